"""Checkpoints: the drafter's trainable weights, optimizer, scheduler and the data position.

Layout: <run-dir>/checkpoints/step-00000100.pt plus a `latest` file naming the newest.
Each file is written to a temp name and renamed, and `latest` is switched the same way,
so a kill mid-save leaves the previous checkpoint usable. The two newest are kept.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

KEEP = 2


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def save(run_dir: Path, *, step: int, next_pos: int, drafter_state: dict, optimizer, scheduler,
         config: dict, layout: dict, data: dict | None = None) -> Path:
    """Write the checkpoint for `step` (steps done) and return its path. `data`: what fixes
    the batch order besides the config (resume_source.data_facts), checked on resume."""
    cdir = checkpoint_dir(run_dir)
    cdir.mkdir(parents=True, exist_ok=True)
    path = cdir / f"step-{step:08d}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"step": step, "next_pos": next_pos, "drafter": {k: v.detach().cpu() for k, v in drafter_state.items()},
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "config": config,
                "layout": layout, "data": data or {}, "rng": rng_state()}, tmp)
    os.replace(tmp, path)
    latest_tmp = cdir / "latest.tmp"
    latest_tmp.write_text(path.name + "\n")
    os.replace(latest_tmp, cdir / "latest")
    for old in sorted(cdir.glob("step-*.pt"))[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


def rng_state() -> dict:
    """torch's CPU and CUDA generator states, so a resumed run draws what the straight one would."""
    return {"cpu": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def restore_rng(state: dict) -> None:
    """Put back what rng_state() saved (a checkpoint from before it had none: nothing to do)."""
    rng = state.get("rng")
    if not rng:
        return
    torch.set_rng_state(rng["cpu"])
    if rng["cuda"] and torch.cuda.is_available() and len(rng["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(rng["cuda"])


def newest_complete(run_dir: Path) -> Path | None:
    """The newest COMPLETE checkpoint file under <run-dir>/checkpoints, or None.

    For other tools (resume, export, the controller) to call. A file named step-*.pt is only
    ever created by os.replace of a fully written temp file, so every step-*.pt is complete;
    `*.pt.tmp` leftovers of a killed save are ignored. The `latest` pointer is preferred;
    if it is missing or names a removed file, the highest-numbered step-*.pt is the answer.
    """
    pointed = latest(run_dir)
    if pointed is not None:
        return pointed
    found = sorted(checkpoint_dir(run_dir).glob("step-*.pt"))
    return found[-1] if found else None


def latest(run_dir: Path) -> Path | None:
    pointer = checkpoint_dir(run_dir) / "latest"
    if not pointer.exists():
        return None
    path = checkpoint_dir(run_dir) / pointer.read_text().strip()
    return path if path.exists() else None


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)
