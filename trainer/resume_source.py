"""Where a run resumes from, and whether it may: `--resume` (the run's own run dir) and
`--resume-from PATH` (another run's run dir, or one checkpoint file).

Why a module of its own: the controller's relaunch (issue 25) starts every attempt as a NEW
run in a new run dir with `--resume-from <previous run dir>`, and counts on the resume being
exact -- the same step, the same data position, the same loss curve as a run that never
stopped. What makes that so is checked here, before any weight is loaded: the model/training
config the checkpoint was written under, and the data facts that fix the batch order (seed,
held-out share, sample count, batches per epoch). A difference is refused (exit 2, one line
naming the path and the key), except `train.token_budget`, the one change a relaunch after a
CUDA OOM declares: the run then continues at the same share of the same epoch, which is
said to be NOT exact (other batches).

An attempt that dies before its first checkpoint has none of its own; its run dir's
`resumed_from.json` names the checkpoint it started from, and a later `--resume-from` (or
`--resume`) of that dir follows it, so a chain of relaunches never loses its place.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import checkpoint
from .config import ConfigError

LINK_NAME = "resumed_from.json"
MAX_LINKS = 32                      # a chain of relaunches longer than this is a loop
MAY_CHANGE = ("train.token_budget",)
NEEDED_KEYS = ("step", "next_pos", "drafter", "optimizer", "scheduler", "config")
_ABSENT = object()


def source_checkpoint(path: Path, flag: str = "--resume-from") -> Path:
    """The complete checkpoint file PATH stands for: PATH itself when it is a file, else
    checkpoint.newest_complete(PATH), else what PATH's resumed_from.json names."""
    here = path
    for _ in range(MAX_LINKS):
        if not here.exists():
            named = "" if here == path else f" ({here}, named by a {LINK_NAME})"
            raise ConfigError(f"{flag} {path}: does not exist{named}")
        if here.is_file():
            if here.name.endswith(".tmp"):
                raise ConfigError(f"{flag} {here}: a partial save (*.tmp), not a complete checkpoint")
            return here
        found = checkpoint.newest_complete(here)
        if found is not None:
            return found
        linked = linked_checkpoint(here)
        if linked is None:
            raise ConfigError(f"{flag} {path}: no complete checkpoint under {checkpoint.checkpoint_dir(here)}")
        here = linked
    raise ConfigError(f"{flag} {path}: more than {MAX_LINKS} {LINK_NAME} links (a loop?)")


def own_checkpoint(run_dir: Path) -> Path | None:
    """--resume: the run dir's newest complete checkpoint, else the one it was started from
    (its resumed_from.json), else None (a fresh start)."""
    if checkpoint.newest_complete(run_dir) is None and linked_checkpoint(run_dir) is None:
        return None
    return source_checkpoint(run_dir, "--resume")


def linked_checkpoint(run_dir: Path) -> Path | None:
    link = run_dir / LINK_NAME
    if not link.is_file():
        return None
    try:
        return Path(json.loads(link.read_text())["checkpoint"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{link}: unreadable ({exc!r})") from None


def write_link(run_dir: Path, source: Path, step: int) -> None:
    """Record in the new run's dir which checkpoint it started from (temp file + rename)."""
    tmp = run_dir / (LINK_NAME + ".tmp")
    tmp.write_text(json.dumps({"checkpoint": str(source.resolve()), "step": step}) + "\n")
    tmp.replace(run_dir / LINK_NAME)


def load_checked(path: Path, flag: str) -> dict:
    """checkpoint.load, with a file that is not a trainer checkpoint refused by name."""
    try:
        state = checkpoint.load(path)
    except Exception as exc:  # noqa: BLE001 -- torch.load raises many kinds for a foreign file
        raise ConfigError(f"{flag} {path}: not a trainer checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict):
        raise ConfigError(f"{flag} {path}: not a trainer checkpoint (a {type(state).__name__})")
    missing = [k for k in NEEDED_KEYS if k not in state]
    if missing:
        raise ConfigError(f"{flag} {path}: not a trainer checkpoint (no key {missing[0]!r})")
    return state


def data_facts(*, seed: int, eval_fraction: float, samples: int, batches_per_epoch: int) -> dict:
    """What fixes the batch order besides the config (saved in every checkpoint as `data`)."""
    return {"seed": seed, "eval_fraction": eval_fraction, "samples": samples, "batches_per_epoch": batches_per_epoch}


def check_compatible(state: dict, path: Path, flag: str, config: dict, data: dict) -> list[str]:
    """Refuse (ConfigError naming the key) a checkpoint written under another config or
    another data order; return the allowed changes made (MAY_CHANGE keys), described.
    A key the checkpoint lacks (an older trainer's) is not compared."""
    saved, here = flatten(state["config"]), flatten(config)
    changes = []
    for key in sorted(saved):
        there, now = saved[key], here.get(key, _ABSENT)
        if there == now:
            continue
        if key in MAY_CHANGE:
            changes.append(f"{key} {there} -> {now}")
            continue
        shown = "absent" if now is _ABSENT else repr(now)
        raise ConfigError(f"{flag} {path}: config {key} is {there!r} there, {shown} here")
    saved_data = state.get("data") or {}
    for key in ("seed", "eval_fraction", "samples", "batches_per_epoch"):
        if key not in saved_data or saved_data[key] == data[key]:
            continue
        if key == "batches_per_epoch" and changes:
            continue                           # follows from the token budget's change
        raise ConfigError(f"{flag} {path}: data.{key} is {saved_data[key]!r} there, {data[key]!r} here")
    return changes


def data_position(state: dict, batches_per_epoch: int) -> int:
    """The global batch position to continue at: the checkpoint's own when the batches per
    epoch are the same (exact); else the same share of the same epoch (not exact)."""
    pos = int(state["next_pos"])
    before = (state.get("data") or {}).get("batches_per_epoch")
    if not before or before == batches_per_epoch:
        return pos
    epoch, index = divmod(pos, int(before))
    return epoch * batches_per_epoch + index * batches_per_epoch // int(before)


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"drafter": {"num_layers": 2}} -> {"drafter.num_layers": 2}; lists as tuples."""
    out: dict = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = tuple(v) if isinstance(v, list) else v
    return out
