"""The throughput figures of progress samples as compact columns, one row per step: how a
run's samples older than a bounded history of objects still count in its warm-window median.

Why: the watch keeps the last 2,000 samples of a run as ProgressSample objects (its charts,
ETA and detectors read them) and check-log the last 50,000; a run of 5,000 steps then showed
the median of its last 2,000 in the dashboard and its closing line while compare-runs read
all 5,000 from the history -- two figures for one run (issue 26.3). The samples that leave
such a history go here, every figure `throughput.throughput_summary` takes from a sample kept
exactly (float64, as parsed), so its median over these columns plus the objects is the
median of the whole run, not an estimate.

Memory: 8 bytes a step for the step, 8 for its time, 1 for whether the time is the
trainer's (not a log line's reading time), and 8 for each figure (tok/s, step time,
samples/s, data wait) that at least one sample of the run has -- a figure no sample has
costs nothing. At most 49 bytes a step: a million steps hold at most 47 MiB, a run
reporting tok/s and step time 33 bytes a step (31 MiB). Pure, no I/O; numpy is imported
only when the columns are read (records imports this module, and every command imports
records).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from controller.records import ProgressSample

FIGURES = ("tok_per_s", "step_time_s", "samples_per_s", "data_wait_s")
"""The per-sample figures a throughput summary reads (with step, time_s and source)."""

_NAN = float("nan")


def _number(value: Any) -> float:
    """A figure as stored: a finite float, else NaN (None, NaN, inf all mean unknown)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else _NAN


def _numbers(values: Iterable[Any]) -> list[float]:
    """`_number` of each value; a finite float (the common case) is taken without a call."""
    return [v if v.__class__ is float and v - v == 0.0 else _number(v) for v in values]


class ThroughputColumns:
    """Rows of (step, time_s, from_log, tok_per_s, step_time_s, samples_per_s, data_wait_s),
    one per step, kept in step order. `add` keeps the first sample seen for a step (what
    `throughput.by_step` keeps); `fill` gives a known step the figures it lacked (what the
    watch's add_progress does to a sample object when another source reports the same step)."""

    def __init__(self) -> None:
        self.step = array("q")
        self.time_s = array("d")
        self.from_log = bytearray()
        self.figures: dict[str, array[float] | None] = dict.fromkeys(FIGURES)
        self.version = 0
        """Bumped by every change: a cached figure over these columns knows when it is stale."""

    def __len__(self) -> int:
        return len(self.step)

    def _find(self, step: int) -> int:
        n = len(self.step)
        return n if not n or step > self.step[-1] else bisect_left(self.step, step)

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int):
            return False
        i = self._find(step)
        return i < len(self.step) and self.step[i] == step

    def add(self, sample: ProgressSample) -> bool:
        """Keep `sample`'s figures as its step's row; False (nothing kept) when the step has
        one already: the first sample seen for a step wins."""
        step = int(sample.step)
        i = self._find(step)
        n = len(self.step)
        if i < n and self.step[i] == step:
            return False
        self.step.insert(i, step)
        self.time_s.insert(i, _number(sample.time_s))
        self.from_log.insert(i, sample.source == "log")
        for name in FIGURES:
            value = _number(getattr(sample, name))
            col = self.figures[name]
            if col is None:
                if math.isnan(value):
                    continue
                col = self.figures[name] = array("d", [_NAN]) * n
            col.insert(i, value)
        self.version += 1
        return True

    def add_many(self, samples: Sequence[ProgressSample]) -> int:
        """`add` each of `samples` in order; how many were kept. The common case -- steps
        rising past the last row, as a log's samples leave a bounded history -- appends
        whole columns at once (the per-step cost of check-log's read loop past its 50,000th
        sample); any other order takes `add`'s way, one sample at a time."""
        steps = [int(s.step) for s in samples]
        n = len(self.step)
        if not steps or (n and steps[0] <= self.step[-1]) or any(a >= b for a, b in zip(steps, steps[1:])):
            return sum(self.add(s) for s in samples)
        self.step.extend(steps)
        self.time_s.extend(_numbers(map(attrgetter("time_s"), samples)))
        self.from_log.extend([s.source == "log" for s in samples])
        for name in FIGURES:
            values = _numbers(map(attrgetter(name), samples))
            col = self.figures[name]
            if col is None:
                if all(math.isnan(v) for v in values):
                    continue
                col = self.figures[name] = array("d", [_NAN]) * n
            col.extend(values)
        self.version += len(steps)
        return len(steps)

    def fill(self, sample: ProgressSample) -> bool | None:
        """Give `sample.step`'s row the time and figures it lacks, from `sample`; None when
        the step has no row, else whether anything was filled."""
        step = int(sample.step)
        i = self._find(step)
        if i >= len(self.step) or self.step[i] != step:
            return None
        changed = False
        if math.isnan(self.time_s[i]) and not math.isnan(t := _number(sample.time_s)):
            self.time_s[i] = t
            changed = True
        for name in FIGURES:
            value = _number(getattr(sample, name))
            if math.isnan(value):
                continue
            col = self.figures[name]
            if col is None:
                col = self.figures[name] = array("d", [_NAN]) * len(self.step)
            if math.isnan(col[i]):
                col[i] = value
                changed = True
        if changed:
            self.version += 1
        return changed

    def load(self, step: np.ndarray, time_s: np.ndarray, from_log: np.ndarray,
             figures: dict[str, np.ndarray]) -> None:
        """Take whole columns at once (a restarted watch's history, read folded and in step
        order): an empty instance only, steps strictly increasing."""
        import numpy as np

        if len(self.step):
            raise ValueError("ThroughputColumns.load: columns already hold rows")
        step = np.asarray(step, np.int64)
        if step.size > 1 and not np.all(step[1:] > step[:-1]):
            raise ValueError("ThroughputColumns.load: steps must be strictly increasing")
        self.step.frombytes(step.tobytes())
        self.time_s.frombytes(np.asarray(time_s, np.float64).tobytes())
        self.from_log.extend(np.asarray(from_log, bool).astype(np.uint8).tobytes())
        for name in FIGURES:
            values = np.asarray(figures.get(name, np.full(step.size, np.nan)), np.float64)
            values = np.where(np.isfinite(values), values, np.nan)
            if np.isfinite(values).any():
                col = self.figures[name] = array("d")
                col.frombytes(values.tobytes())
        self.version += 1

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns as numpy arrays (copies, so the columns may grow meanwhile): step
        (int64), time_s, from_log (bool) and each of FIGURES (NaN where unknown)."""
        import numpy as np

        n = len(self.step)
        out: dict[str, np.ndarray] = {
            "step": np.array(self.step, dtype=np.int64) if n else np.empty(0, np.int64),
            "time_s": np.frombuffer(self.time_s, dtype=np.float64).copy() if n else np.empty(0),
            "from_log": np.frombuffer(bytes(self.from_log), dtype=np.uint8).astype(bool),
        }
        for name in FIGURES:
            col = self.figures[name]
            out[name] = np.frombuffer(col, dtype=np.float64).copy() if col is not None and n else np.full(n, np.nan)
        return out

    def nbytes(self) -> int:
        """The bytes the columns' values take (the bound the module docstring states)."""
        return (self.step.itemsize * len(self.step) + self.time_s.itemsize * len(self.time_s) + len(self.from_log)
                + sum(c.itemsize * len(c) for c in self.figures.values() if c is not None))
