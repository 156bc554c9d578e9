"""torch.compile on CPU (corpus generator program).

Usage: python dynamo_run.py MODE. MODE: recompile-limit (a Python int that changes each
call makes dynamo recompile until config.recompile_limit is hit), recompiles (the same
with TORCH_LOGS=recompiles set by the caller, limit not reached), dynamic (dynamic=True:
healthy), lowering (an inductor compile that fails in lowering, where torch allows it).
"""

from __future__ import annotations

import sys

import torch
import torch._dynamo


def main() -> None:
    mode = sys.argv[1]
    torch._dynamo.config.recompile_limit = 4

    def step(x, k):
        return (x * k).sin().sum()

    if mode == "recompile-shape":   # a new sequence length every batch, dynamic shapes off
        f = torch.compile(lambda t: (t * 2).tanh().sum(), backend="eager", dynamic=False)
        for i in range(1, 10):
            print(f"step={i} seq_len={8 * i} loss={float(f(torch.randn(8 * i))):.4f}", flush=True)
        print("compiled run done", flush=True)
        return
    if mode == "fullgraph-break":   # fullgraph=True and a data-dependent branch: dynamo refuses
        def fwd(t):
            if t.sum() > 0:
                return t.cos()
            return t.sin()
        g = torch.compile(fwd, backend="eager", fullgraph=True)
        for i in range(1, 4):
            print(f"step={i} loss={float(g(torch.randn(8)).sum()):.4f}", flush=True)
        return
    if mode == "graph-breaks":      # healthy: graph breaks logged (TORCH_LOGS=graph_breaks by the caller)
        def fwd2(t):
            u = t.cos()
            print("debug: inside the compiled step, no error")
            return u.sum()
        g = torch.compile(fwd2, backend="eager")
        for i in range(1, 4):
            print(f"step={i} loss={float(g(torch.randn(8))):.4f}", flush=True)
        print("compiled run done", flush=True)
        return
    if mode == "dynamic":
        f = torch.compile(step, backend="eager", dynamic=True)
    else:
        f = torch.compile(step, backend="eager")
        torch._dynamo.config.automatic_dynamic_shapes = False
    x = torch.randn(16)
    n = 3 if mode == "recompiles" else 12
    for i in range(1, n + 1):
        v = f(x, i)
        print(f"step={i} loss={float(v):.4f} tok_per_s={9000 + i}", flush=True)
    if mode == "lowering":
        from torch._inductor import lowering

        @torch.library.custom_op("corpus::twice", mutates_args=())
        def twice(t: torch.Tensor) -> torch.Tensor:
            return t * 2

        @twice.register_fake
        def _(t):
            return torch.empty_like(t)

        def bad_lowering(t):
            raise NotImplementedError("no lowering for corpus::twice on this device")
        lowering.register_lowering(torch.ops.corpus.twice.default)(bad_lowering)
        g = torch.compile(lambda t: twice(t) + 1, backend="inductor")
        print(g(x).sum())
    print("compiled run done", flush=True)


if __name__ == "__main__":
    main()
