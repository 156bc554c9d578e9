"""The export, proven with real clients: transformers writes and runs a Qwen3 target, our
trainer trains a drafter on it, exports it, and vLLM speculators' converter and DFlash model
load the export and give the same logits as our drafter on the same target features.

The clients live in their own venv (.venv-clients, made by scripts/setup.sh): speculators
0.9.0 needs transformers 5, whose pins would replace this venv's torch. It imports without
torchvision/torchaudio (checked), so only torch 2.13.0 CPU + transformers + speculators go in.
SpecForge's wheel (`specforge` 0.2.0) pins torch 2.11 and sglang, but its DFlash modeling
module (specforge/modeling/draft/dflash.py) imports only torch and transformers: it goes into
the same venv with --no-deps and loads the export directly (no converter). Each script runs
as one server process per test session (tests/trainer/clients_driver.py, the conftest's
`speculators_client`): its imports are paid once, not at every command.
"""

import json
import math
from pathlib import Path

import pytest
import torch

from tests.trainer.conftest import TARGET_ROPE_THETA as THETA
from tests.trainer.conftest import run_in_process
from trainer import checkpoint, dflash_mask, train
from trainer.config import FULL, PRESETS, SLIDING, get_preset
from trainer.export import export, load_export
from trainer.export import main as export_main
from trainer.model import Drafter, hf_config_to_target, load_target

torch.set_num_threads(1)


def test_hf_config_to_target_reads_configs_written_by_transformers(hf_target, tmp_path, speculators_client):
    raw = json.loads((hf_target / "config.json").read_text())
    assert "rope_theta" not in raw                                   # transformers 5: rope_parameters only
    t = hf_config_to_target(raw)
    assert (t.rope_theta, t.num_layers, t.num_heads, t.num_kv_heads, t.head_dim) == (THETA, 4, 4, 2, 32)
    assert t.tie_word_embeddings and t.vocab_size == 256
    # a Qwen3.5/3.6-style wrapper written by transformers' Qwen3_5Config
    speculators_client("qwen35-config", str(tmp_path / "q35"))
    written = json.loads((tmp_path / "q35" / "config.json").read_text())
    assert "text_config" in written and "rope_theta" not in written
    q = hf_config_to_target(written)
    assert (q.rope_theta, q.num_layers, q.num_heads, q.num_kv_heads, q.hidden_size, q.head_dim, q.vocab_size) == \
        (1e7, 64, 24, 4, 5120, 256, 248320)
    # the same shape by hand: the decoder under text_config, its RoPE nested in rope_parameters
    wrapped = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
               "vision_config": {"hidden_size": 1152},
               "text_config": {"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 5120,
                               "num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4,
                               "head_dim": 256, "intermediate_size": 17408,
                               "rope_parameters": {"rope_type": "default", "rope_theta": 10_000_000,
                                                   "partial_rotary_factor": 0.25}}}
    q = hf_config_to_target(wrapped)
    assert (q.rope_theta, q.num_layers, q.num_heads, q.num_kv_heads, q.hidden_size) == (1e7, 64, 24, 4, 5120)
    assert hf_config_to_target({**raw, "rope_parameters": None, "rope_scaling": {"rope_theta": 3.0}}).rope_theta == 3.0


def _io(target_path: Path, layers, seed=0, length=96):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 255, (1, length), generator=g)
    cfg = hf_config_to_target(json.loads((target_path / "config.json").read_text()))
    ours = load_target(cfg, tuple(layers), path=str(target_path), device=torch.device("cpu"), dtype=torch.float32)
    return ids, ours, ours(ids)


def test_our_target_gives_transformers_hidden_states(hf_target, tmp_path, speculators_client):
    """At the layers the reference rule can choose (1 .. n-3): transformers' last entry of
    hidden_states has the final norm applied (a 4-layer model's hidden_states[4]), which
    the reference never reads; ours is the layer's raw output."""
    layers = (0, 1, 2)
    ids, _, feats = _io(hf_target, layers)
    torch.save({"input_ids": ids, "layers": list(layers)}, tmp_path / "io.pt")
    speculators_client("hidden", str(hf_target), str(tmp_path / "io.pt"), str(tmp_path / "out.pt"))
    theirs = torch.load(tmp_path / "out.pt")["features"]
    assert theirs.shape == feats.shape
    assert (theirs - feats).abs().max().item() < 1e-5


def _speculators_logits(client, hf_target, export_dir, feats, ids, tmp_path, max_anchors=6):
    loss_mask = torch.zeros_like(ids)
    loss_mask[:, 20:] = 1
    torch.save({"features": feats, "input_ids": ids, "loss_mask": loss_mask, "k": 3, "max_anchors": max_anchors},
               tmp_path / "io.pt")
    client("draft", str(hf_target), str(export_dir), str(tmp_path / "io.pt"), str(tmp_path / "out.pt"))
    return torch.load(tmp_path / "out.pt")


def _our_logits(export_dir, target_model, feats, ids, anchors, sliding_mask="inference"):
    from dataclasses import replace

    cfg = hf_config_to_target(json.loads((export_dir.parent / "target_config.json").read_text())) \
        if (export_dir.parent / "target_config.json").exists() else target_model.cfg
    drafter = load_export(export_dir, cfg).float().eval()
    drafter.cfg = replace(drafter.cfg, sliding_mask=sliding_mask)
    drafter.share_target_weights(target_model.embed_weight, target_model.lm_head_weight)
    bk = drafter.cfg.block_size
    block_ids = torch.full((1, len(anchors), bk), drafter.cfg.mask_token_id)
    block_ids[0, :, 0] = ids[0, anchors]
    with torch.no_grad():
        hidden = drafter(feats, block_ids, anchors[None], use_flex=False)
    return (hidden.reshape(-1, hidden.shape[-1]) @ drafter.lm_head.weight.t()), drafter


def test_trained_drafter_export_gives_speculators_the_same_logits(hf_target, tmp_path, tiny_data, speculators_client):
    """Full attention: trained 6 steps on the transformers-written target, exported (fp32),
    converted and run by speculators: logits equal ours within 1e-5. Feature layers 0,1,2:
    speculators' converter drops a feature layer equal to the target's last (vLLM adds that
    one itself; convert/dflash/converter.py `i + 1 != num_verifier_layers`), so a drafter
    reading the last layer does not convert -- the reference rule never picks it."""
    run_dir = tmp_path / "run"
    result = run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(run_dir),
                             "--steps", "6", "--log-every", "3", "--target-model", str(hf_target),
                             "--device", "cpu", "--sequential", "--target-layers", "0,1,2"])
    assert result.exit_code == 0 and checkpoint.latest(run_dir) is not None
    export_dir = tmp_path / "export"
    assert export_main([str(run_dir), str(export_dir), "--dtype", "float32"]) == 0
    config = json.loads((export_dir / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and config["rope_theta"] == THETA
    assert config["dflash_config"] == {"mask_token_id": 255, "target_layer_ids": [0, 1, 2], "block_size": 8,
                                       "num_target_layers": 4}
    ids, target_model, feats = _io(hf_target, (0, 1, 2), seed=1)
    theirs = _speculators_logits(speculators_client, hf_target, export_dir, feats, ids, tmp_path)
    assert theirs["mask_token_id"] == 255 and theirs["sliding_layers"] == []
    ours, _ = _our_logits(export_dir, target_model, feats, ids, theirs["anchors"])
    assert ours.shape == theirs["logits"].shape
    assert (ours - theirs["logits"]).abs().max().item() < 1e-5
    assert export_main([str(run_dir), str(export_dir)]) == 2           # exists: not overwritten


def test_sliding_window_export_gives_speculators_the_same_logits(hf_target, tmp_path, speculators_client):
    """The reference Qwen3.6 layout in small: sliding layers (window 16, causal in the block)
    and a full one; random weights saved as a trainer checkpoint, exported, run by both.
    speculators' DFlash forward is its *training* mask (every slot sees the W positions before
    the anchor), so ours is compared under sliding_mask="training"; the engines' rule, our
    default, is held to z-lab's dflash in test_eval_decode.py."""
    cfg = get_preset("tiny")
    target_cfg = hf_config_to_target(json.loads((hf_target / "config.json").read_text()))
    from dataclasses import replace

    dc = replace(cfg.drafter, layer_types=(SLIDING, FULL), sliding_window=16, rope_theta=THETA,
                 target_layers=(0, 1, 2))
    drafter = Drafter(target_cfg, dc)
    drafter.init_weights(3)
    run_cfg = replace(cfg, target=target_cfg, drafter=drafter.cfg)
    opt = torch.optim.AdamW([p for _, p in drafter.trainable_parameters()])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ck = checkpoint.save(tmp_path / "run", step=1, next_pos=1, drafter_state=drafter.trainable_state_dict(),
                         optimizer=opt, scheduler=sched, config=run_cfg.to_dict(), layout={})
    export_dir = export(ck, tmp_path / "export", dtype="float32")
    config = json.loads((export_dir / "config.json").read_text())
    assert config["layer_types"] == [SLIDING, FULL] and config["sliding_window"] == 16
    ids, target_model, feats = _io(hf_target, (0, 1, 2), seed=2)
    theirs = _speculators_logits(speculators_client, hf_target, export_dir, feats, ids, tmp_path, max_anchors=6)
    assert theirs["sliding_layers"] == [0] and theirs["sliding_window"] == 16
    assert int(theirs["anchors"].max()) > 16 + 20                        # some block's window cuts its context
    ours, mine = _our_logits(export_dir, target_model, feats, ids, theirs["anchors"], sliding_mask="training")
    assert mine.cfg.layer_types == (SLIDING, FULL)
    assert (ours - theirs["logits"]).abs().max().item() < 1e-5
    # and the window matters: the same weights as all-full layers give other logits
    full = replace(mine.cfg, layer_types=(FULL, FULL))
    other = Drafter(target_model.cfg, full)
    other.load_state_dict(mine.state_dict())
    with torch.no_grad():
        bk = full.block_size
        block_ids = torch.full((1, len(theirs["anchors"]), bk), full.mask_token_id)
        block_ids[0, :, 0] = ids[0, theirs["anchors"]]
        h = other(feats, block_ids, theirs["anchors"][None], use_flex=False)
    assert (h.reshape(-1, h.shape[-1]) @ other.lm_head.weight.t() - ours).abs().max().item() > 1e-3
    assert not math.isnan(ours.sum().item())


def test_export_of_nothing_exits_2_naming_the_path(tmp_path, capsys):
    assert export_main([str(tmp_path / "nope"), str(tmp_path / "out")]) == 2
    assert "nope" in capsys.readouterr().err


def _specforge_hidden(client, export_dir, drafter, feats, ids, anchors, tmp_path):
    """SpecForge's forward on the same inputs: block embeddings, [context ; block] positions
    and our masks per layer type as additive float masks (its eager attention adds them)."""
    bk = drafter.cfg.block_size
    block_ids = torch.full((1, len(anchors), bk), drafter.cfg.mask_token_id)
    block_ids[0, :, 0] = ids[0, anchors]
    length = feats.shape[1]
    positions = torch.cat([torch.arange(length), (anchors[:, None] + torch.arange(bk)).reshape(-1)])[None]
    masks = {}
    for kind in set(drafter.cfg.layer_types):
        allowed = dflash_mask.dense_mask(anchors[None], length, bk,
                                         window=drafter.cfg.sliding_window if kind == SLIDING else None)
        masks[kind] = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))
    torch.save({"position_ids": positions, "masks": masks, "features": feats,
                "noise_embedding": drafter.embed_tokens(block_ids.view(1, -1))}, tmp_path / "sf-io.pt")
    client("specforge", str(export_dir), str(tmp_path / "sf-io.pt"), str(tmp_path / "sf-out.pt"))
    return torch.load(tmp_path / "sf-out.pt")


@pytest.mark.parametrize("layer_types", [(FULL, FULL), (SLIDING, FULL)])
def test_specforge_loads_the_export_and_gives_our_hidden_states(hf_target, tmp_path, layer_types, speculators_client):
    from dataclasses import replace

    cfg = get_preset("tiny")
    target_cfg = hf_config_to_target(json.loads((hf_target / "config.json").read_text()))
    dc = replace(cfg.drafter, layer_types=layer_types, sliding_window=16, rope_theta=THETA, target_layers=(0, 1, 2))
    drafter = Drafter(target_cfg, dc)
    drafter.init_weights(5)
    opt = torch.optim.AdamW([p for _, p in drafter.trainable_parameters()])
    ck = checkpoint.save(tmp_path / "run", step=1, next_pos=1, drafter_state=drafter.trainable_state_dict(),
                         optimizer=opt, scheduler=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
                         config=replace(cfg, target=target_cfg, drafter=drafter.cfg).to_dict(), layout={})
    export_dir = export(ck, tmp_path / "export", dtype="float32")
    ids, target_model, feats = _io(hf_target, (0, 1, 2), seed=3)
    mine = load_export(export_dir, target_model.cfg).float().eval()
    mine.share_target_weights(target_model.embed_weight, target_model.lm_head_weight)
    anchors = torch.tensor([21, 30, 44, 58, 70, 85])
    theirs = _specforge_hidden(speculators_client, export_dir, mine, feats, ids, anchors, tmp_path)
    assert theirs["layer_types"] == list(layer_types) and theirs["mask_token_id"] == 255
    assert theirs["target_layer_ids"] == [0, 1, 2]
    assert theirs["sliding_window"] == (16 if SLIDING in layer_types else None)
    bk = mine.cfg.block_size
    block_ids = torch.full((1, len(anchors), bk), mine.cfg.mask_token_id)
    block_ids[0, :, 0] = ids[0, anchors]
    with torch.no_grad():
        ours = mine(feats, block_ids, anchors[None], use_flex=False).reshape(1, -1, target_model.cfg.hidden_size)
    assert (ours - theirs["hidden"]).abs().max().item() < 1e-5


def test_init_drafter_fine_tunes_from_an_export(tiny_data, tmp_path):
    """--init-drafter: a new run starts from the exported weights (every replica), and an
    export of another shape is refused naming the path."""
    first = tmp_path / "a"
    assert run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(first),
                           "--steps", "3", "--log-every", "3", "--device", "cpu", "--sequential"]).exit_code == 0
    exported = export(first, tmp_path / "exp", dtype="float32")
    args = train.parse_args(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "b"),
                             "--device", "cpu", "--init-drafter", str(exported), "--drafter-devices", "0,1"])
    s = train.build(args)
    try:
        from safetensors.torch import load_file

        saved = load_file(str(exported / "model.safetensors"))
        for d in s.replicas.drafters:
            for name, p in d.trainable_parameters():
                assert torch.equal(p, saved[name]), name
    finally:
        s.replicas.close()
    bad = train.parse_args(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "c"),
                            "--device", "cpu", "--init-drafter", str(exported), "--draft-layers", "3"])
    with pytest.raises(train.ConfigError, match="does not fit"):
        train.build(bad)


def _cli_error(argv, capsys) -> str:
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("flags, key", [
    (["--target-layers", "0,1,3"], "layer 3 is the target's last layer"),
    (["--target-layers", "0,1,1"], "a layer is named twice"),
    (["--draft-layers", "3"], "3 draft layers on a 4-layer target"),      # the reference rule gives 1,1,1
    (["--mask-token-id", "256"], "drafter.mask_token_id=256 is outside the vocabulary"),
])
def test_exports_a_client_would_reject_are_refused_at_configuration(tiny_data, tmp_path, capsys, flags, key):
    err = _cli_error(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "r"),
                      "--device", "cpu", "--steps", "1", *flags], capsys)
    assert err.startswith("error: drafter.") and key in err
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_export_refuses_a_checkpoint_with_the_last_layer_as_a_feature_layer(tmp_path, capsys):
    """The guard on every export: a checkpoint written before the refusal existed (its config
    names layer 3 of a 4-layer target) is not exported; the message names the key."""
    from dataclasses import replace

    cfg = get_preset("tiny")
    drafter = Drafter(cfg.target, cfg.drafter)
    opt = torch.optim.AdamW([p for _, p in drafter.trainable_parameters()])
    raw = replace(cfg, drafter=replace(cfg.drafter, target_layers=(0, 1, 3))).to_dict()
    drafter_state = {k: v for k, v in drafter.trainable_state_dict().items()}
    ck = checkpoint.save(tmp_path / "run", step=1, next_pos=1, drafter_state=drafter_state, optimizer=opt,
                         scheduler=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), config=raw, layout={})
    assert export_main([str(ck), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "drafter.target_layers=[0, 1, 3]" in err and "last layer" in err
    assert not (tmp_path / "out").exists()


def _shrunk(name: str):
    """The preset's structure (target depth and vocabulary, draft depth, layer types, window,
    feature layers, block, MASK id) at a tiny width: what a converter checks, on 2 cores."""
    from dataclasses import replace

    cfg = get_preset(name)
    t = replace(cfg.target, hidden_size=32, num_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=64)
    d = replace(cfg.drafter, num_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=64)
    return replace(cfg, target=t, drafter=d).validate()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_presets_export_converts_in_speculators(name, tmp_path, speculators_client):
    cfg = _shrunk(name)
    t = cfg.target
    shape = {"vocab_size": t.vocab_size, "hidden_size": t.hidden_size, "num_hidden_layers": t.num_layers,
             "num_attention_heads": t.num_heads, "num_key_value_heads": t.num_kv_heads, "head_dim": t.head_dim,
             "intermediate_size": t.intermediate_size, "tie_word_embeddings": t.tie_word_embeddings,
             "rope_parameters": {"rope_type": "default", "rope_theta": t.rope_theta}}
    speculators_client("make-shaped-target", str(tmp_path / "target"), json.dumps(shape))
    drafter = Drafter(t, cfg.drafter)
    drafter.init_weights(0)
    opt = torch.optim.AdamW([p for _, p in drafter.trainable_parameters()])
    ck = checkpoint.save(tmp_path / "run", step=1, next_pos=1, drafter_state=drafter.trainable_state_dict(),
                         optimizer=opt, scheduler=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
                         config=cfg.to_dict(), layout={})
    export_dir = export(ck, tmp_path / "export", dtype="float32")
    speculators_client("convert", str(tmp_path / "target"), str(export_dir), str(tmp_path / "out.json"))
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["aux_hidden_state_layer_ids"] == [i + 1 for i in cfg.drafter.target_layers]
    assert out["mask_token_id"] == cfg.drafter.mask_token_id
