"""The loss's pass over one chunk's logits as one Triton kernel, in place (CUDA only).

Why: after the logits matmul, the loss needs per row the log-sum-exp, the argmax, the
label's logit, and the gradient (softmax - onehot) * w. Inductor's fused version of
loss._ce_chunk reads the [rows, 151,936] bf16 logits three times (max, sum, gradient) and
writes a second [rows, V] buffer: 7.4 % of the compiled bench-1b drafter step (issue 23,
BENCHMARKS.md trainer run 10), ~2.6 TB/s. Here one program takes one row: pass 1 keeps a
running max / sum of exponentials / argmax (online softmax: one read), pass 2 reads the row
again (often still in L2) and writes the gradient over the logits themselves -- no second
buffer. The arithmetic is loss._ce_chunk's: fp32 from the bf16 logits, the gradient rounded
once to the logits' dtype.

The tile width and warp count are tuned on the device at first use (triton.autotune over
CONFIGS, keyed on V; the logits are restored between the timed tries, since the kernel
writes over them). `ce_rows_inplace` returns None when Triton is not importable; loss.py
then keeps its inductor path. On a CPU tensor it runs the untuned kernel (Triton's
interpreter, TRITON_INTERPRET=1: the tests).
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:          # CPU-only installs (the tests here): loss.py's other paths run
    triton = None
    tl = None

BLOCK_V = 4096              # the untuned kernel's (interpreter) tile
CONFIGS = ((2048, 4), (4096, 8), (4096, 16), (8192, 8), (8192, 16), (16384, 16))   # (BLOCK, num_warps)

if triton is not None:
    @triton.jit
    def _ce_rows_kernel(logits_ptr, labels_ptr, w_ptr, loss_ptr, pred_ptr, stride_row,
                        V: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        base = logits_ptr + row * stride_row
        label = tl.load(labels_ptr + row)
        w = tl.load(w_ptr + row)
        offs = tl.arange(0, BLOCK)
        m = tl.full((), float("-inf"), tl.float32)
        s = tl.zeros((), tl.float32)
        best = tl.full((), float("-inf"), tl.float32)
        best_idx = tl.zeros((), tl.int64)
        for start in range(0, V, BLOCK):
            idx = start + offs
            x = tl.load(base + idx, mask=idx < V, other=float("-inf")).to(tl.float32)
            tile_max = tl.max(x, axis=0)
            tile_arg = tl.argmax(x, axis=0)
            new_m = tl.maximum(m, tile_max)
            s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
            m = new_m
            better = tile_max > best                 # strict: the first maximum wins, as torch.argmax
            best_idx = tl.where(better, start + tile_arg.to(tl.int64), best_idx)
            best = tl.where(better, tile_max, best)
        lse = m + tl.log(s)
        x_label = tl.load(base + label).to(tl.float32)
        tl.store(loss_ptr + row, (lse - x_label) * w)
        tl.store(pred_ptr + row, best_idx)
        for start in range(0, V, BLOCK):
            idx = start + offs
            inside = idx < V
            x = tl.load(base + idx, mask=inside, other=0.0).to(tl.float32)
            g = (tl.exp(x - lse) - tl.where(idx == label, 1.0, 0.0)) * w
            tl.store(base + idx, g.to(logits_ptr.dtype.element_ty), mask=inside)

    _ce_rows_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in CONFIGS], key=["V"],
        restore_value=["logits_ptr"])(_ce_rows_kernel)


def available() -> bool:
    return triton is not None


def tuned_config() -> str | None:
    """The config the autotuner chose (after a first CUDA call), for the logs."""
    best = getattr(_ce_rows_tuned, "best_config", None) if triton is not None else None
    return str(best) if best is not None else None


def ce_rows_inplace(logits: torch.Tensor, labels: torch.Tensor, w: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(weighted CE sum, argmax [N]) of `logits` [N, V]; `logits` is overwritten by
    d(loss)/d(logits) = (softmax - onehot) * w in its own dtype. None without Triton."""
    if triton is None:
        return None
    n, v = logits.shape
    assert logits.stride(1) == 1 and labels.shape == (n,) and w.shape == (n,)
    loss_rows = torch.empty(n, dtype=torch.float32, device=logits.device)
    pred = torch.empty(n, dtype=torch.int64, device=logits.device)
    args = (logits, labels.contiguous(), w.contiguous().float(), loss_rows, pred, logits.stride(0))
    if n and logits.is_cuda:
        _ce_rows_tuned[(n,)](*args, V=v)
    elif n:
        _ce_rows_kernel[(n,)](*args, V=v, BLOCK=BLOCK_V)
    return loss_rows.sum(), pred
