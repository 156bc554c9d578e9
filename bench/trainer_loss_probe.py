"""The loss's chunk on one GPU, inductor's pass over the logits beside loss_kernel.py's
(issue 23, last round): time and agreement on one bench-1b-shaped chunk.

    python3 bench/trainer_loss_probe.py [--rows 8192] [--reps 10]

One chunk = logits matmul, the pass over the [rows, 151,936] logits, the gradient matmul,
as loss._ChunkedLinearCE runs it under bf16 autocast. Both paths are compared with the
eager, uncompiled loss._ce_chunk on the same inputs (fresh random ones: hidden rows at unit
RMS, the lm_head at the bench target's init std). Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainer import loss, loss_kernel  # noqa: E402


def say(**kv) -> None:
    print(json.dumps(kv, default=str), flush=True)


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(int.from_bytes(os.urandom(4), "little"))
    n, h, v = args.rows, 2048, 151936
    weight = (torch.randn(v, h, device=dev, generator=g) * 0.02).bfloat16()
    hidden = torch.randn(n, h, device=dev, generator=g).bfloat16()
    labels = torch.randint(0, v, (n,), device=dev, generator=g)
    w = loss.slot_weights(16, 7.0, dev)[torch.randint(1, 16, (n,), device=dev, generator=g)]
    paths = {"eager": loss._ce_chunk, "inductor": loss._ce_chunk_fused, "triton": loss._ce_chunk_triton}
    out = {}
    for name, fn in paths.items():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            res = fn(hidden, weight, labels, w)           # the first call compiles / tunes
            torch.cuda.synchronize()
            out[name] = (res[0].float().item(), res[1].clone(), res[2].float())
            del res
            ms = median_ms(lambda fn=fn: fn(hidden, weight, labels, w), 3 if name == "eager" else args.reps)
        say(name=f"chunk_{name}", rows=n, ms=ms, peak_gib=torch.cuda.max_memory_allocated(dev) / 2 ** 30)
        torch.cuda.reset_peak_memory_stats(dev)
    ref_loss, ref_pred, ref_grad = out["eager"]
    for name in ("inductor", "triton"):
        lo, pred, grad = out[name]
        say(name=f"agree_{name}", loss_rel=abs(lo - ref_loss) / abs(ref_loss),
            pred_equal=float((pred == ref_pred).float().mean()),
            grad_rel=float((grad - ref_grad).norm() / ref_grad.norm()))
    say(name="triton_config", config=loss_kernel.tuned_config())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
