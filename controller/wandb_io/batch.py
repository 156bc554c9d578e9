"""What dfctl takes from a wandb run, whichever way it was read (offline file or API).

The offline `.wandb` reader (offline_reader.py) and the API poller (api_poller.py) hand
back the same two shapes, so the watch loop, the Parquet history, the importers and
compare-runs never care where the numbers came from:

- `WandbBatch`: what arrived since the last read (incremental; the watch tick).
- `WandbRunData`: a whole run at once (importers, compare-runs).

History rows keep every key wandb logged (nested keys joined with "."), plus the
trainer's metric keys mapped onto `ProgressSample` (README: the trainer's output
contract uses the same names as the wandb keys, so the mapping is by name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from controller.records import ProgressSample

# ProgressSample fields filled from a history row key of the same name (units in names).
_PROGRESS_FLOAT_KEYS: tuple[str, ...] = tuple(
    f.name for f in fields(ProgressSample) if f.name not in ("step", "time_s", "source")
)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _as_step(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def progress_from_row(row: dict[str, Any]) -> ProgressSample | None:
    """One wandb history row -> a ProgressSample, or None when it has no step.

    The step is the trainer's own `step` key when it logged one, else wandb's `_step`
    (they agree when the trainer calls `wandb.log(..., step=step)`). `_timestamp` is
    the unix time wandb stamped on the row. NaN stays NaN: the detectors want to see it.
    """
    step = _as_step(row.get("step"))
    if step is None:
        step = _as_step(row.get("_step"))
    if step is None:
        return None
    sample = ProgressSample(step=step, time_s=_as_float(row.get("_timestamp")), source="wandb")
    for key in _PROGRESS_FLOAT_KEYS:
        if key in row:
            setattr(sample, key, _as_float(row[key]))
    return sample


@dataclass
class WandbBatch:
    """What arrived from one wandb run since the previous read.

    `config` and `summary` are the run's whole config / summary as of this batch when
    this batch changed them, else None (nothing to merge: replace what you kept).
    `state` is sticky across batches of one reader: "running" until the run's exit
    record (offline) or until the server says otherwise (API).
    """

    progress: list[ProgressSample] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)   # every key, one dict a row
    system: list[dict[str, Any]] = field(default_factory=list)    # stats rows: time_s + system.*
    config: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    run_id: str | None = None
    project: str | None = None
    entity: str | None = None
    exit_code: int | None = None
    state: str = "running"        # running | finished | crashed (offline); API: the server's
    offset: int = 0               # offline: bytes consumed after this batch; API: next step
    corrupt_blocks: int = 0       # offline: blocks skipped for a bad crc/type in this batch
    error: str | None = None      # API poller: why the last poll failed (never the API key)

    @property
    def empty(self) -> bool:
        return not (self.history or self.system or self.config or self.summary
                    or self.exit_code is not None)

    def absorb(self, part: "WandbBatch") -> None:
        """Append a later batch's rows; its config/summary, when it has them, replace ours."""
        self.progress.extend(part.progress)
        self.history.extend(part.history)
        self.system.extend(part.system)
        if part.config is not None:
            self.config = part.config
        if part.summary is not None:
            self.summary = part.summary
        self.corrupt_blocks += part.corrupt_blocks


@dataclass
class WandbRunData:
    """A whole wandb run: what compare-runs and the importers need."""

    run_id: str | None
    project: str | None = None
    entity: str | None = None
    state: str = "running"
    exit_code: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    system: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    source: str = ""              # the file/dir read, or the entity/project/run_id path
    corrupt_blocks: int = 0

    @property
    def progress(self) -> list[ProgressSample]:
        out = []
        for row in self.history:
            sample = progress_from_row(row)
            if sample is not None:
                out.append(sample)
        return out


def set_nested(target: dict[str, Any], path: list[str], value: Any) -> None:
    """target[a][b][c] = value for path [a, b, c], creating dicts on the way."""
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def remove_nested(target: dict[str, Any], path: list[str]) -> None:
    node: Any = target
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def merge_nested(into: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `update` into `into` (dicts merged, everything else replaced)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge_nested(into[key], value)
        else:
            into[key] = value
    return into
