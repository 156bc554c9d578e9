"""DFlash loss: position-weighted cross-entropy through the frozen lm_head, in chunks.

Why a custom autograd function: N*B*V logits (e.g. 49K draft tokens x 152K vocab in fp32 =
30 GB) must never exist at once. Each chunk computes its logits, its loss, and at once the
gradient with respect to its hidden rows ((softmax - onehot) * w) @ W; only that gradient
([N, H], the size of the input) is kept for backward. Two matmuls per chunk, no recompute,
and the lm_head weight gets no gradient (it is frozen).

The loss is returned as an unnormalised sum with its weight sum, so that replicas and
processes can divide by the *global* weight sum: N replicas' step then equals one step on
the combined batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import loss_kernel

IGNORE = -100
# how a CUDA chunk's pass over its logits runs: "inductor" (_ce_chunk through torch.compile;
# the default) or "triton" (loss_kernel.py: one in-place kernel, online softmax; 11 % faster
# per chunk on the H200 but no faster end to end, BENCHMARKS.md trainer run 11); CPU always
# runs _ce_chunk eagerly
LOSS_KERNELS = ("inductor", "triton")


def slot_weights(block_size: int, gamma: float, device=None) -> torch.Tensor:
    """[Bk] weights: 0 for slot 0 (the anchor), exp(-(k-1)/gamma) for slot k >= 1."""
    k = torch.arange(block_size, dtype=torch.float32, device=device)
    w = torch.exp(-(k - 1) / gamma)
    w[0] = 0.0
    return w


def _ce_chunk(h, weight, lbl, w):
    """(weighted CE sum, argmax, d(loss)/dh) of one chunk of rows."""
    logits = h @ weight.t()
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))   # bf16 -> fp32; fp64 stays
    lse = torch.logsumexp(logits, dim=-1)
    loss = ((lse - logits.gather(1, lbl[:, None]).squeeze(1)) * w).sum()
    pred = logits.argmax(dim=-1)
    onehot = torch.arange(logits.shape[1], device=logits.device)[None, :] == lbl[:, None]
    grad_logits = ((torch.exp(logits - lse[:, None]) - onehot.to(logits.dtype)) * w[:, None]).to(weight.dtype)
    return loss, pred, grad_logits @ weight


_ce_chunk_compiled = None
_ce_lock = threading.Lock()
_ce_fallback_reason: str | None = None


def _ce_chunk_fused(h, weight, lbl, w):
    """_ce_chunk through inductor on CUDA: the softmax/argmax/gradient passes over the
    [rows, V] logits fuse into a few kernels instead of ~8 full passes in fp32. Falls back to
    eager (and says why, once) if compilation fails."""
    global _ce_chunk_compiled, _ce_fallback_reason
    if _ce_fallback_reason is None:
        try:
            with _ce_lock:
                if _ce_chunk_compiled is None:
                    _ce_chunk_compiled = torch.compile(_ce_chunk, dynamic=True)
                return _ce_chunk_compiled(h, weight, lbl, w)
        except Exception as exc:  # noqa: BLE001 — a slower loss beats a dead run
            _ce_fallback_reason = repr(exc)[:300]
            print(f"[compile] fused loss unavailable, eager loss from now on: {_ce_fallback_reason}", flush=True)
    return _ce_chunk(h, weight, lbl, w)


def _ce_chunk_triton(h, weight, lbl, w):
    """The logits by one matmul, then loss_kernel's single in-place pass turns them into
    d(loss)/d(logits), and a second matmul gives d(loss)/dh: no second [rows, V] buffer.
    Without Triton (or if its kernel fails to build: said once): the inductor path."""
    global _triton_fallback_reason
    if _triton_fallback_reason is None and loss_kernel.available():
        logits = h @ weight.t()
        try:
            out = loss_kernel.ce_rows_inplace(logits, lbl, w)
        except Exception as exc:  # noqa: BLE001 -- a slower loss beats a dead run (it fails before launching)
            _triton_fallback_reason = repr(exc)[:300]
            print(f"[loss] Triton logits pass unavailable, inductor's from now on: {_triton_fallback_reason}",
                  flush=True)
            out = None
        if out is not None:
            loss, pred = out
            return loss, pred, logits @ weight
        del logits
    return _ce_chunk_fused(h, weight, lbl, w)


_triton_fallback_reason: str | None = None


class _ChunkedLinearCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, labels, row_weights, chunk_rows, kernel="inductor"):
        n = hidden.shape[0]
        grad_hidden = torch.empty_like(hidden)
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        predictions = torch.empty(n, dtype=torch.long, device=hidden.device)
        if not hidden.is_cuda:
            chunk_fn = _ce_chunk
        else:
            chunk_fn = _ce_chunk_triton if kernel == "triton" else _ce_chunk_fused
        for start in range(0, n, chunk_rows):
            end = min(n, start + chunk_rows)
            loss, pred, grad = chunk_fn(hidden[start:end], weight, labels[start:end], row_weights[start:end])
            loss_sum += loss
            predictions[start:end] = pred
            grad_hidden[start:end] = grad.to(hidden.dtype)
        ctx.save_for_backward(grad_hidden)
        ctx.mark_non_differentiable(predictions)
        return loss_sum, predictions

    @staticmethod
    def backward(ctx, grad_loss, _grad_pred):
        (grad_hidden,) = ctx.saved_tensors
        return grad_hidden * grad_loss.to(grad_hidden.dtype), None, None, None, None, None


@dataclass
class LossOutput:
    loss_sum: torch.Tensor        # scalar, weighted CE summed over supervised slots (differentiable)
    weight_sum: torch.Tensor      # scalar, the sum of the weights (divide by the global one)
    correct: torch.Tensor         # [Bk] argmax hits per slot
    count: torch.Tensor           # [Bk] supervised rows per slot
    accepted: torch.Tensor        # scalar, sum over blocks of the accepted prefix (slots 1.. all hits)


def dflash_loss(hidden: torch.Tensor, labels: torch.Tensor, lm_head_weight: torch.Tensor, *,
                gamma: float, chunk_rows: int, rows: torch.Tensor | None = None,
                kernel: str = "inductor") -> LossOutput:
    """hidden [S, A, Bk, H] (after the drafter's norm), labels [S, A, Bk] (IGNORE where none).

    `rows`: the flat indices of the supervised slots (labels != IGNORE), if the caller
    knows them (the pipeline computes them on the host). Without it they are found with
    `nonzero` on labels' device, which on a GPU is a device->host sync per call."""
    bk = labels.shape[-1]
    flat_labels = labels.reshape(-1)
    if rows is None:
        rows = (flat_labels != IGNORE).nonzero(as_tuple=True)[0]
    slot = rows % bk
    h = hidden.reshape(-1, hidden.shape[-1]).index_select(0, rows)
    lbl = flat_labels.index_select(0, rows)
    w = slot_weights(bk, gamma, hidden.device)[slot]
    if h.dtype != lm_head_weight.dtype:
        h = h.to(lm_head_weight.dtype)
    loss_sum, pred = _ChunkedLinearCE.apply(h, lm_head_weight, lbl, w, max(1, chunk_rows), kernel)
    hits = (pred == lbl).float()
    correct = torch.zeros(bk, device=hidden.device).index_add_(0, slot, hits)
    count = torch.zeros(bk, device=hidden.device).index_add_(0, slot, torch.ones_like(hits))
    accepted = accepted_prefix_sum(hits, rows, flat_labels.numel(), bk)
    return LossOutput(loss_sum, w.sum(), correct, count, accepted)


def accepted_prefix_sum(hits: torch.Tensor, rows: torch.Tensor, num_slots: int, block_size: int) -> torch.Tensor:
    """Sum over blocks of the accepted prefix: how many slots 1, 2, ... in a row the drafter
    got right, as a serving engine's verifier counts them (the first miss ends the block; a
    slot with no label -- past the sequence or unsupervised -- ends it too). `hits` [N] are
    the argmax hits of the supervised slots at flat indices `rows` of [S*A*Bk]. On the device,
    no host sync."""
    full = torch.zeros(num_slots, device=hits.device, dtype=hits.dtype).index_put_((rows,), hits)
    return full.view(-1, block_size)[:, 1:].cumprod(dim=1).sum()


def accept_len(accepted_sum: float, blocks: float) -> float:
    """Mean accepted prefix per block plus one -- the bonus token the verifier adds to every
    block -- the number serving engines and the papers report (z-lab dflash/model.py
    `acceptance_length + 1`). `blocks` = supervised rows at slot 1 (every valid anchor)."""
    return accepted_sum / blocks + 1.0 if blocks else 0.0


def tau_from_acc(acc_per_slot: list[float]) -> float:
    """Simulated accept length from per-slot marginal accuracies: sum over k of
    prod_{i<=k} acc_i (slots 1..B-1; speculators' "eal"). It treats slots as independent and
    counts no bonus token: not the number serving reports (that is `accept_len`)."""
    tau, run = 0.0, 1.0
    for acc in acc_per_slot:
        run *= acc
        tau += run
    return tau


def reference_loss(hidden, labels, lm_head_weight, gamma):
    """The same loss with whole logits (tests only): weighted mean CE."""
    bk = labels.shape[-1]
    logits = hidden.reshape(-1, hidden.shape[-1]).to(lm_head_weight.dtype) @ lm_head_weight.t()
    flat = labels.reshape(-1)
    w = slot_weights(bk, gamma, hidden.device).repeat(flat.numel() // bk)
    keep = flat != IGNORE
    ce = F.cross_entropy(logits.float()[keep], flat[keep], reduction="none")
    return (ce * w[keep]).sum() / w[keep].sum()


__all__ = ["IGNORE", "LOSS_KERNELS", "slot_weights", "dflash_loss", "LossOutput", "tau_from_acc", "accepted_prefix_sum",
           "accept_len", "reference_loss"]
