"""Export a trained drafter as a Hugging Face directory a serving engine loads.

    python -m trainer.export RUN_DIR|CHECKPOINT OUT_DIR [--dtype bfloat16|float32]

Writes the reference DFlash format (z-lab / SpecForge `DFlashDraftModel`, which vLLM
speculators' `DFlashConverter` reads): `config.json` with `architectures:
["DFlashDraftModel"]`, the draft layers' Qwen3 shape, `rope_theta` (and transformers 5's
`rope_parameters`), `layer_types` / `sliding_window`, and `dflash_config` {`mask_token_id`,
`target_layer_ids`, `block_size`, `num_target_layers`}; `model.safetensors` with the
trainable weights under the reference names (fc, hidden_norm, layers.N.*, norm). The
embedding and lm_head are the target's (the client takes them from it).

`auto_map` {"AutoModel": "dflash_model.DFlashDraftModel"} and a two-line `dflash_model.py`
that imports the class from z-lab's `dflash` package give the `trust_remote_code=True`
route (`AutoModel.from_pretrained(DIR, trust_remote_code=True)` with `dflash` installed).

A guard on every export: the recorded configuration is validated again before anything is
written (config.DrafterConfig.validate: a feature layer that is the target's last layer, more
feature layers than the target has, a MASK id outside the vocabulary); a refusal names the key.

Why the MASK id travels: the trainer fed `mask_token_id` in every MASK slot; a serving
config written by hand with another id would draft from inputs the drafter never saw.

Exit codes: 0 written; 2 bad input (no checkpoint, unreadable, output exists).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from . import checkpoint
from .config import SLIDING, ConfigError, DrafterConfig, TargetConfig

EXIT_OK, EXIT_USAGE = 0, 2
MAX_POSITION_EMBEDDINGS = 262_144     # Qwen3.6's; RoPE itself needs no table
REMOTE_CODE_MODULE = "dflash_model"    # the export's trust_remote_code file (no code of dflash's in it)
REMOTE_CODE = (
    '"""The trust_remote_code route of this DFlash export: the model class of z-lab\'s `dflash`\n'
    'package (pip install dflash==0.1.0), which reads this directory\'s config.json as written."""\n\n'
    "from dflash.model import DFlashDraftModel  # noqa: F401\n")


class ExportError(ValueError):
    """The export cannot be written; the message names the path."""


def find_checkpoint(source: Path) -> Path:
    """A checkpoint file, or the latest one of a run directory."""
    if source.is_file():
        return source
    if source.is_dir():
        ck = checkpoint.latest(source)
        if ck is not None:
            return ck
        raise ExportError(f"{source}: no checkpoint under {checkpoint.checkpoint_dir(source)}")
    raise ExportError(f"{source}: no such run directory or checkpoint")


def export_config(target: TargetConfig, drafter: DrafterConfig, dtype: str) -> dict:
    """config.json of the reference format for this (resolved) drafter."""
    sliding = SLIDING in drafter.layer_types
    return {
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": f"{REMOTE_CODE_MODULE}.DFlashDraftModel"},
        "model_type": "qwen3",
        "hidden_size": target.hidden_size,
        "num_hidden_layers": drafter.num_layers,
        "num_attention_heads": drafter.num_heads,
        "num_key_value_heads": drafter.num_kv_heads,
        "head_dim": drafter.head_dim,
        "intermediate_size": drafter.intermediate_size,
        "hidden_act": "silu",
        "rms_norm_eps": target.rms_norm_eps,
        "vocab_size": target.vocab_size,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "rope_theta": drafter.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": drafter.rope_theta},
        "layer_types": list(drafter.layer_types),
        "use_sliding_window": sliding,
        "sliding_window": drafter.sliding_window if sliding else None,
        "max_window_layers": drafter.num_layers,
        "dtype": dtype,
        "block_size": drafter.block_size,
        "num_target_layers": target.num_layers,
        "dflash_config": {"mask_token_id": drafter.mask_token_id, "target_layer_ids": list(drafter.target_layers),
                          "block_size": drafter.block_size, "num_target_layers": target.num_layers},
    }


def configs_of(state: dict, where: Path) -> tuple[TargetConfig, DrafterConfig]:
    """The target and (resolved) drafter configs a checkpoint recorded."""
    try:
        raw = state["config"]
        target = TargetConfig(**raw["target"])
        d = dict(raw["drafter"])
        d["target_layers"] = tuple(d["target_layers"])
        d["layer_types"] = tuple(d.get("layer_types") or ())
        return target, DrafterConfig(**d).resolved(target)
    except (KeyError, TypeError) as exc:
        raise ExportError(f"{where}: not a trainer checkpoint ({exc!r})") from None


def export(source: Path, out_dir: Path, *, dtype: str = "bfloat16") -> Path:
    """Write the export of `source` (run dir or checkpoint) to `out_dir` (must not exist),
    atomically (temp dir + rename)."""
    if out_dir.exists():
        raise ExportError(f"{out_dir}: exists; not overwriting")
    ck = find_checkpoint(source)
    try:
        state = checkpoint.load(ck)
    except Exception as exc:  # noqa: BLE001 — any unreadable file is bad input, named
        raise ExportError(f"{ck}: cannot read checkpoint ({type(exc).__name__}: {exc})") from None
    target, drafter = configs_of(state, ck)
    try:
        drafter.validate(target)
    except ConfigError as exc:
        raise ExportError(f"{ck}: {exc}") from None
    torch_dtype = getattr(torch, dtype)
    weights = {k: v.detach().to(torch_dtype).contiguous() for k, v in state["drafter"].items()}
    from safetensors.torch import save_file

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(export_config(target, drafter, dtype), indent=2) + "\n")
        (tmp / f"{REMOTE_CODE_MODULE}.py").write_text(REMOTE_CODE)
        os.rename(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def load_export(path: Path, target: TargetConfig):
    """Our Drafter from an export (the round trip the tests check; embed/lm_head are left
    for the caller to share from the target)."""
    from safetensors.torch import load_file

    from .model import Drafter

    c = json.loads((path / "config.json").read_text())
    dc = c["dflash_config"]
    drafter_cfg = DrafterConfig(
        num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
        num_kv_heads=c["num_key_value_heads"], head_dim=c["head_dim"], intermediate_size=c["intermediate_size"],
        target_layers=tuple(dc["target_layer_ids"]), block_size=dc["block_size"],
        mask_token_id=dc["mask_token_id"], rope_theta=float(c["rope_theta"]), layer_types=tuple(c["layer_types"]),
        sliding_window=c.get("sliding_window") or DrafterConfig.sliding_window)
    drafter = Drafter(target, drafter_cfg)
    missing = drafter.load_state_dict(load_file(str(path / "model.safetensors")), strict=False)
    if missing.unexpected_keys or set(missing.missing_keys) - {"embed_tokens.weight", "lm_head.weight"}:
        raise ExportError(f"{path}: weights do not match the drafter ({missing})")
    return drafter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="run directory (its latest checkpoint) or a checkpoint file")
    ap.add_argument("out_dir", help="directory to create")
    ap.add_argument("--dtype", choices=("bfloat16", "float32", "float16"), default="bfloat16")
    args = ap.parse_args(argv)
    try:
        out = export(Path(args.source), Path(args.out_dir), dtype=args.dtype)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"export: wrote {out} ({size / 2**20:.1f} MiB)")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
