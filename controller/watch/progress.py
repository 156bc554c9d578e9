"""Progress samples from three sources (log lines, metrics.jsonl, the .wandb file) merged
into one bounded history, one sample per step.

The history keeps the last PROGRESS_HISTORY_LEN samples as objects (charts, ETA, detectors);
the throughput figures of the samples it lets go are kept in RunState.older_throughput
(compact columns, at most 49 bytes a step), so the run's warm-window median is its whole
run's. The watch's memory for a run: 2,000 sample objects plus those columns."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace

from controller.records import ProgressSample, RunState, WandbInfo

PROGRESS_HISTORY_LEN = 2000
_METRIC_FLOATS = tuple(f.name for f in fields(ProgressSample) if f.name not in ("step", "source"))


def metrics_sample(raw: bytes) -> ProgressSample | None:
    """One metrics.jsonl line (README contract) -> ProgressSample; junk -> None."""
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        return None
    s = ProgressSample(step=int(step), source="metrics")
    for k in _METRIC_FLOATS:
        v = row.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(s, k, float(v))
    return s


def metrics_samples(data: bytes, now: float) -> tuple[list[ProgressSample], int]:
    """The complete lines of metrics.jsonl bytes -> (samples, bytes used); a partial last
    line is left for the next read."""
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0
    out = []
    for raw in data[:end].split(b"\n"):
        sample = metrics_sample(raw)
        if sample is not None:
            if sample.time_s is None:
                sample.time_s = now
            out.append(sample)
    return out, end + 1


def _unknown(value: object) -> bool:
    """None or a non-finite float: what the history stores as null (and its reader, like
    older_throughput, fills from another source's row)."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def add_progress(st: RunState, samples: list[ProgressSample], now: float,
                 last_step: int | None) -> tuple[list[ProgressSample], list[ProgressSample], int | None]:
    """Merge samples into the run's bounded history (one per step; what leaves it goes to
    st.older_throughput): (the fresh ones, the fields that filled steps already known,
    the new highest step). A step already known --
    from any source, however far back (the .wandb file lags metrics.jsonl by up to its
    15 s flush; a block-buffered log lags both) -- only gives the fields it lacked and is
    not delivered again as progress; those fields come back as a partial sample (step,
    source and the filled fields) for the history, whose reader folds rows per step."""
    fresh: list[ProgressSample] = []
    filled: list[ProgressSample] = []
    by_step: dict[int, ProgressSample] | None = None
    # the highest step held: a step at or below it may be known even when the last sample
    # held is an older step that came late (comparing with the last one alone missed it)
    top = max((p.step for p in st.progress), default=None)
    for s in sorted(samples, key=lambda x: x.step):
        last = st.progress[-1] if st.progress else None
        known = last if last is not None and s.step == last.step else None
        if known is None and top is not None and s.step <= top:
            if by_step is None:
                by_step = {p.step: p for p in st.progress}
            known = by_step.get(s.step)
        if known is None and st.older_throughput.fill(s) is not None:
            filled.append(s)   # a step that left the history: its reader keeps each field's first value
            continue
        if known is not None:
            gained = {f.name: getattr(s, f.name) for f in fields(ProgressSample)
                      if _unknown(getattr(known, f.name)) and not _unknown(getattr(s, f.name))}
            for name, value in gained.items():
                setattr(known, name, value)
            if gained:
                filled.append(ProgressSample(step=s.step, source=s.source, **gained))
            continue
        st.progress.append(s)
        top = s.step if top is None else max(top, s.step)
        if by_step is not None:
            by_step[s.step] = s
        fresh.append(s)
        if last_step is None or s.step > last_step:
            last_step = s.step
            st.last_progress_s = now
    if len(st.progress) > PROGRESS_HISTORY_LEN:
        gone = len(st.progress) - PROGRESS_HISTORY_LEN
        for old in st.progress[:gone]:
            st.older_throughput.add(old)
        del st.progress[:gone]
    return fresh, filled, last_step


def merge_wandb(old: WandbInfo | None, new: WandbInfo) -> WandbInfo:
    """What is known of the run's wandb side: each new non-empty field wins."""
    if old is None:
        return new
    out = replace(old)
    for f in fields(WandbInfo):
        v = getattr(new, f.name)
        if v is not None and not (f.name == "mode" and v == "unknown"):
            setattr(out, f.name, v)
    return out
