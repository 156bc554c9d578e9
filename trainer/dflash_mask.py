"""The DFlash attention mask, in the three forms the trainer uses.

Layout of one sample's keys: L context positions (the target's hidden states, projected),
then A blocks of Bk draft tokens. Queries are the A*Bk draft tokens only. The rule:

    query in block a (anchor position p_a) may see
      - context position j  iff  j < p_a          (strictly before the anchor)
      - draft token in block a' iff a' == a       (its own block, both directions)
      - nothing else (no other block)

A sliding-window layer (window W) narrows both, in one of two ways (`rule`):

  - "inference" (the default): the serving engines' rule. z-lab's dflash (model.py
    `_attention_mask`: causal, and query position - key position < W) and SpecForge count
    the window from each *query's* position: slot k (position p_a + k) sees context
    p_a + k - W < j < p_a, so every later slot loses one more of the oldest positions.
  - "training": speculators' training mask (models/dflash/attention.py:70-95): every slot
    of the block sees p_a - W <= j < p_a. Equal to the engines' inside the window, not past it.

Inside its own block a sliding layer is causal (tokens at or before its own slot) either way.

Forms: `dense_mask` (bool [S,1,Q,L+Q], for SDPA on CPU / without flex), `mask_mod` (the
same rule as a flex_attention mask function) and `block_mask` (a flex BlockMask with
H=None built straight from the anchors, tile by tile, so no dense [Q, KV] mask is ever
materialised: at L=8K, A=512, Bk=16 that would be 0.8 G booleans per batch).
"""

from __future__ import annotations

import torch

TILE = 128   # flex_attention's default Q and KV block size


INFERENCE, TRAINING = "inference", "training"   # the two sliding rules (config.SLIDING_MASKS)


def _window_start(q_anchor, slot, window: int, rule: str):
    """The oldest context position a sliding layer's query may see."""
    if rule == INFERENCE:
        return q_anchor + slot - window + 1
    return q_anchor - window


def dense_mask(anchors: torch.Tensor, ctx_len: int, block_size: int, window: int | None = None,
               rule: str = INFERENCE) -> torch.Tensor:
    """bool [S, 1, A*Bk, ctx_len + A*Bk]; True = may attend. `window`: a sliding layer's."""
    s, a = anchors.shape
    q = a * block_size
    dev = anchors.device
    q_anchor = anchors.repeat_interleave(block_size, dim=1)                    # [S, Q]
    j = torch.arange(ctx_len, device=dev)[None, None, :]
    ctx = j < q_anchor[:, :, None]
    qi = torch.arange(q, device=dev)
    q_block = qi // block_size
    blk = q_block[:, None] == q_block[None, :]
    if window is not None:
        slot = (qi % block_size)[None, :, None]
        ctx = ctx & (j >= _window_start(q_anchor[:, :, None], slot, window, rule))
        blk = blk & (qi[None, :] <= qi[:, None])
    return torch.cat([ctx, blk.expand(s, q, q)], dim=2)[:, None]


def mask_mod_for(anchors: torch.Tensor, ctx_len: int, block_size: int, window: int | None = None,
                 rule: str = INFERENCE):
    """The rule as a flex_attention mask_mod(b, h, q_idx, kv_idx) -> bool."""

    # ctx_len as a tensor, not a Python int: compiled flex would otherwise specialise on it
    # and recompile for every padded length.
    # (a fill on the device, not torch.tensor(...): no host->device copy in the step.)
    ctx = anchors.new_full((), ctx_len)

    def mask_mod(b, h, q_idx, kv_idx):
        a = q_idx // block_size
        anchor = anchors[b, a]
        is_ctx = kv_idx < ctx
        return torch.where(is_ctx, kv_idx < anchor, (kv_idx - ctx) // block_size == a)

    def sliding_mask_mod(b, h, q_idx, kv_idx):
        a = q_idx // block_size
        anchor = anchors[b, a]
        is_ctx = kv_idx < ctx
        in_ctx = (kv_idx < anchor) & (kv_idx >= _window_start(anchor, q_idx % block_size, window, rule))
        in_blk = ((kv_idx - ctx) // block_size == a) & (kv_idx - ctx <= q_idx)
        return torch.where(is_ctx, in_ctx, in_blk)

    return mask_mod if window is None else sliding_mask_mod


def block_mask(anchors: torch.Tensor, ctx_len: int, block_size: int, window: int | None = None,
               rule: str = INFERENCE):
    """A flex BlockMask (H=None) from per-tile anchor ranges.

    Needs ctx_len and A*Bk to be multiples of TILE and TILE a multiple of Bk (the batch
    builder pads to that). Per query tile: context tiles entirely before the tile's lowest
    anchor are *full* (no mask_mod call), context tiles up to its highest anchor are
    partial, and the diagonal draft tile (its own blocks) is partial.
    """
    from torch.nn.attention.flex_attention import BlockMask

    s, a = anchors.shape
    q = a * block_size
    if ctx_len % TILE or q % TILE or TILE % block_size:
        raise ValueError(f"block_mask needs ctx_len ({ctx_len}) and A*Bk ({q}) to be multiples of {TILE}")
    n_qt, n_ctx_t = q // TILE, ctx_len // TILE
    n_kvt = n_ctx_t + n_qt
    per_tile = anchors.view(s, n_qt, TILE // block_size)
    amin = per_tile.min(dim=2).values
    amax = per_tile.max(dim=2).values
    n_full = torch.div(amin, TILE, rounding_mode="floor")                     # ctx tiles [0, n_full)
    hi = torch.div(amax + TILE - 1, TILE, rounding_mode="floor")               # ctx tiles [n_full, hi) partial
    lo = n_full
    if window is not None:            # sliding: no full tiles; partial from the window's first tile
        # (p_a - W is at or before either rule's first position: a superset of tiles)
        lo = torch.div((amin - window).clamp(min=0), TILE, rounding_mode="floor")
        n_full = torch.zeros_like(n_full)
    n_ctx_partial = (hi - lo).clamp(min=0)
    dev = anchors.device
    j = torch.arange(n_kvt, device=dev)[None, None, :]
    partial_idx = torch.where(j < n_ctx_partial[..., None], lo[..., None] + j,
                              n_ctx_t + torch.arange(n_qt, device=dev)[None, :, None])
    partial_idx = partial_idx.clamp(max=n_kvt - 1)
    full_idx = j.expand(s, n_qt, n_kvt)
    to_i32 = lambda t: t.to(torch.int32)[:, None].contiguous()                  # noqa: E731  add H=1
    return BlockMask.from_kv_blocks(
        to_i32(n_ctx_partial + 1), to_i32(partial_idx), to_i32(n_full), to_i32(full_idx),
        BLOCK_SIZE=TILE, mask_mod=mask_mod_for(anchors, ctx_len, block_size, window, rule), seq_lengths=(q, ctx_len + q))
