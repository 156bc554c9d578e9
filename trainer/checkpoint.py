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
         config: dict, layout: dict) -> Path:
    """Write the checkpoint for `step` (steps done) and return its path."""
    cdir = checkpoint_dir(run_dir)
    cdir.mkdir(parents=True, exist_ok=True)
    path = cdir / f"step-{step:08d}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"step": step, "next_pos": next_pos, "drafter": {k: v.detach().cpu() for k, v in drafter_state.items()},
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "config": config,
                "layout": layout}, tmp)
    os.replace(tmp, path)
    latest_tmp = cdir / "latest.tmp"
    latest_tmp.write_text(path.name + "\n")
    os.replace(latest_tmp, cdir / "latest")
    for old in sorted(cdir.glob("step-*.pt"))[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


def latest(run_dir: Path) -> Path | None:
    pointer = checkpoint_dir(run_dir) / "latest"
    if not pointer.exists():
        return None
    path = checkpoint_dir(run_dir) / pointer.read_text().strip()
    return path if path.exists() else None


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)
