"""The DFlash mask (three forms vs the rules), the chunked loss, tau, and target loading."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import dflash_mask
from trainer.config import get_preset
from trainer.loss import (
    IGNORE,
    accept_len,
    accepted_prefix_sum,
    dflash_loss,
    reference_loss,
    slot_weights,
    tau_from_acc,
)
from trainer.model import TargetModel, load_target

torch.set_num_threads(1)


def rule_mask(anchors: list[list[int]], ctx_len: int, bk: int, window: int | None = None,
              rule: str = "inference") -> np.ndarray:
    """The rule, spelled out position by position (the reference). Sliding, "inference": the
    engines' count from the query's own position (z-lab dflash `_attention_mask`: query
    position - key position < W, query at anchor + slot); "training": speculators' count
    from the anchor."""
    s, a = len(anchors), len(anchors[0])
    q, kv = a * bk, ctx_len + a * bk
    m = np.zeros((s, q, kv), dtype=bool)
    for b, qi, kj in itertools.product(range(s), range(q), range(kv)):
        block = qi // bk
        if kj < ctx_len:
            m[b, qi, kj] = kj < anchors[b][block]                 # context strictly before the anchor
            if window is not None:
                if rule == "inference":
                    m[b, qi, kj] &= (anchors[b][block] + qi % bk) - kj < window   # ... within the query's window
                else:
                    m[b, qi, kj] &= kj >= anchors[b][block] - window   # ... within the anchor's window
        else:
            m[b, qi, kj] = (kj - ctx_len) // bk == block          # own block, both directions; no other
            if window is not None:
                m[b, qi, kj] &= kj - ctx_len <= qi                 # sliding: causal inside the block
    return m


@settings(max_examples=30, deadline=None)
@given(data=st.data(), s=st.integers(1, 2), a=st.integers(1, 4), bk=st.sampled_from([2, 4, 8]),
       ctx_len=st.integers(1, 24), window=st.sampled_from([None, 1, 3, 8]),
       rule=st.sampled_from(["inference", "training"]))
def test_dense_mask_and_mask_mod_equal_the_rule(data, s, a, bk, ctx_len, window, rule):
    anchors = [sorted(data.draw(st.lists(st.integers(0, ctx_len - 1), min_size=a, max_size=a))) for _ in range(s)]
    want = rule_mask(anchors, ctx_len, bk, window, rule)
    t = torch.tensor(anchors)
    assert np.array_equal(dflash_mask.dense_mask(t, ctx_len, bk, window, rule)[:, 0].numpy(), want)
    from torch.nn.attention.flex_attention import create_mask

    got = create_mask(dflash_mask.mask_mod_for(t, ctx_len, bk, window, rule), s, None, a * bk, ctx_len + a * bk,
                      device="cpu")
    assert np.array_equal(got[:, 0].numpy(), want)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), tiles=st.integers(1, 3), a_tiles=st.integers(1, 2), bk=st.sampled_from([8, 16]),
       window=st.sampled_from([None, 5, 130, 300]))
def test_block_mask_tiles_match_the_dense_mask(seed, tiles, a_tiles, bk, window):
    ctx_len, a = 128 * tiles, (128 // bk) * a_tiles
    g = torch.Generator().manual_seed(seed)
    anchors = torch.sort(torch.randint(0, ctx_len, (2, a), generator=g), dim=1).values
    anchors[1, : a // 2] = 0                                     # padding anchors, as batches have
    anchors = torch.sort(anchors, dim=1).values
    bm = dflash_mask.block_mask(anchors, ctx_len, bk, window)
    dense = dflash_mask.dense_mask(anchors, ctx_len, bk, window)[:, 0]
    s, q, kv = dense.shape
    tiles_dense = dense.view(s, q // 128, 128, kv // 128, 128)
    listed = bm.to_dense()[:, 0].bool()
    assert torch.all(listed[tiles_dense.any(4).any(2)])         # every tile with a True is visited
    if window is None:
        assert torch.equal(listed, tiles_dense.any(4).any(2))   # ... and no other
    full = torch.zeros_like(listed)
    n_full, idx = bm.full_kv_num_blocks[:, 0], bm.full_kv_indices[:, 0]
    for b, qt in itertools.product(range(s), range(q // 128)):
        for j in range(int(n_full[b, qt])):
            full[b, qt, int(idx[b, qt, j])] = True
    assert torch.all(tiles_dense.all(4).all(2)[full])          # tiles skipping mask_mod are truly all-True


@pytest.mark.parametrize("window", [None, 40])
def test_flex_attention_with_block_mask_equals_sdpa_with_dense_mask(window):
    from torch.nn.attention.flex_attention import flex_attention

    g = torch.Generator().manual_seed(0)
    anchors = torch.sort(torch.randint(1, 256, (2, 16), generator=g), dim=1).values
    q = torch.randn(2, 4, 128, 16, generator=g)
    k, v = torch.randn(2, 2, 384, 16, generator=g), torch.randn(2, 2, 384, 16, generator=g)
    flex = flex_attention(q, k, v, block_mask=dflash_mask.block_mask(anchors, 256, 8, window), enable_gqa=True)
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=dflash_mask.dense_mask(anchors, 256, 8, window),
                                           enable_gqa=True)
    assert torch.allclose(flex, dense, atol=1e-5)


def test_chunked_loss_matches_whole_logits_and_gradient():
    g = torch.Generator().manual_seed(0)
    s, a, bk, h, vocab = 2, 5, 8, 16, 50
    hidden = torch.randn(s, a, bk, h, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab, h, generator=g, dtype=torch.float64)
    labels = torch.randint(0, vocab, (s, a, bk), generator=g)
    labels[..., 0] = IGNORE
    labels[1, 3:] = IGNORE                                         # padding anchors
    labels[0, 1, 5:] = IGNORE                                      # past the sample's end
    out = dflash_loss(hidden, labels, weight, gamma=4.0, chunk_rows=7)   # chunks that split rows oddly
    (out.loss_sum / out.weight_sum).backward()
    grad_chunked = hidden.grad.clone()
    hidden.grad = None
    ref = reference_loss(hidden, labels, weight, 4.0)
    ref.backward()
    assert torch.allclose(out.loss_sum / out.weight_sum, ref.to(out.loss_sum.dtype), rtol=1e-6)
    assert torch.allclose(grad_chunked, hidden.grad, rtol=1e-5, atol=1e-7)   # slot weights are fp32
    assert out.count.tolist()[0] == 0 and out.count.sum() == (labels != IGNORE).sum()
    w = slot_weights(bk, 4.0)
    assert w[0] == 0 and torch.isclose(w[1], torch.tensor(1.0)) and torch.isclose(w[5], torch.exp(torch.tensor(-1.0)))


def test_tau_is_the_simulated_accept_length():
    assert tau_from_acc([1.0, 1.0, 1.0]) == 3.0
    assert tau_from_acc([0.5, 0.5]) == pytest.approx(0.5 + 0.25)
    assert tau_from_acc([0.0, 1.0, 1.0]) == 0.0


def test_target_loads_from_safetensors_with_hf_names(tmp_path):
    from safetensors.torch import save_file

    cfg = get_preset("tiny")
    src = TargetModel(cfg.target, cfg.drafter.target_layers)
    src.reset_parameters(7)
    tensors = {k: v.contiguous().clone() for k, v in src.state_dict().items() if k != "lm_head.weight"}
    assert "model.layers.0.self_attn.q_norm.weight" in tensors                # HF Qwen3 naming
    save_file(tensors, str(tmp_path / "model.safetensors"))
    loaded = load_target(cfg.target, cfg.drafter.target_layers, path=str(tmp_path / "model.safetensors"),
                         device=torch.device("cpu"), dtype=torch.float32)
    ids = torch.randint(0, cfg.target.vocab_size, (2, 20))
    assert torch.equal(loaded(ids), src(ids))
    assert loaded(ids).shape == (2, 20, len(cfg.drafter.target_layers) * cfg.target.hidden_size)
    with pytest.raises(ValueError, match="missing tensors"):
        save_file({"model.norm.weight": torch.ones(cfg.target.hidden_size)}, str(tmp_path / "bad.safetensors"))
        load_target(cfg.target, cfg.drafter.target_layers, path=str(tmp_path / "bad.safetensors"),
                    device=torch.device("cpu"), dtype=torch.float32)


def test_target_features_ignore_right_padding():
    """Causal attention: a sample's features do not depend on how far the batch is padded."""
    cfg = get_preset("tiny")
    t = load_target(cfg.target, cfg.drafter.target_layers, path=None, device=torch.device("cpu"),
                    dtype=torch.float32, seed=1)
    ids = torch.randint(1, 200, (1, 30))
    padded = torch.cat([ids, torch.zeros(1, 17, dtype=torch.long)], dim=1)
    assert torch.allclose(t(ids), t(padded)[:, :30], atol=1e-5)


def test_gradient_checkpointing_gives_the_same_gradients():
    from trainer.model import Drafter

    cfg = get_preset("tiny")
    g = torch.Generator().manual_seed(3)
    feats = torch.randn(2, 40, len(cfg.drafter.target_layers) * cfg.target.hidden_size, generator=g)
    anchors = torch.sort(torch.randint(0, 38, (2, 4), generator=g), dim=1).values
    block = torch.randint(0, 255, (2, 4, cfg.drafter.block_size), generator=g)
    probe = torch.randn(2, 4, cfg.drafter.block_size, cfg.target.hidden_size, generator=g)
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(0)                   # the frozen embedding's default init
        d = Drafter(cfg.target, cfg.drafter)
        d.init_weights(1)
        d.grad_checkpointing = ckpt
        (d.train()(feats, block, anchors, use_flex=False) * probe).sum().backward()
        grads.append([p.grad for _, p in d.trainable_parameters()])
    assert all(a.abs().max() > 1e-4 for a in grads[0])
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(*grads))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), blocks=st.integers(1, 6), bk=st.sampled_from([2, 4, 8]))
def test_accept_len_equals_a_brute_force_count_per_block(data, blocks, bk):
    """Hand-made hits and labels per slot: the accepted prefix of each block counted by a
    loop (slots 1.. until the first miss or unlabelled slot), plus one per block."""
    labelled = [[False] + [data.draw(st.booleans()) for _ in range(bk - 1)] for _ in range(blocks)]
    for row in labelled:
        row[1] = True                                        # a valid anchor's slot 1 is supervised
    hit = [[data.draw(st.booleans()) for _ in range(bk)] for _ in range(blocks)]
    rows = torch.tensor([b * bk + k for b in range(blocks) for k in range(bk) if labelled[b][k]])
    hits = torch.tensor([float(hit[b][k]) for b in range(blocks) for k in range(bk) if labelled[b][k]])
    want = 0
    for b in range(blocks):
        for k in range(1, bk):
            if not (labelled[b][k] and hit[b][k]):
                break
            want += 1
    got = accepted_prefix_sum(hits, rows, blocks * bk, bk).item()
    assert got == want
    assert accept_len(got, blocks) == pytest.approx(want / blocks + 1)


def test_accept_len_differs_from_tau_when_slots_are_correlated():
    """Per-block difficulty: half the blocks all right, half all wrong. Marginal acc 0.5 per
    slot gives tau = 0.5+0.25+0.125 = 0.875; the per-block prefix is 3 in half the blocks:
    accept_len = 1.5 + 1 = 2.5."""
    bk, blocks = 4, 4
    rows = torch.arange(blocks * bk).view(blocks, bk)[:, 1:].reshape(-1)
    hits = torch.tensor([1.0] * 3 + [0.0] * 3 + [1.0] * 3 + [0.0] * 3)
    assert tau_from_acc([0.5, 0.5, 0.5]) == pytest.approx(0.875)
    assert accept_len(accepted_prefix_sum(hits, rows, blocks * bk, bk).item(), blocks) == pytest.approx(2.5)
