"""Progress samples from three sources (log lines, metrics.jsonl, the .wandb file) merged
into one bounded history, one sample per step."""

from __future__ import annotations

import json
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


def add_progress(st: RunState, samples: list[ProgressSample], now: float,
                 last_step: int | None) -> tuple[list[ProgressSample], list[ProgressSample], int | None]:
    """Merge samples into the run's bounded history (one per step): (the fresh ones, the
    fields that filled steps already known, the new highest step). A step already known --
    from any source, however far back (the .wandb file lags metrics.jsonl by up to its
    15 s flush; a block-buffered log lags both) -- only gives the fields it lacked and is
    not delivered again as progress; those fields come back as a partial sample (step,
    source and the filled fields) for the history, whose reader folds rows per step."""
    fresh: list[ProgressSample] = []
    filled: list[ProgressSample] = []
    by_step: dict[int, ProgressSample] | None = None
    for s in sorted(samples, key=lambda x: x.step):
        last = st.progress[-1] if st.progress else None
        known = last if last is not None and s.step == last.step else None
        if known is None and last is not None and s.step < last.step:
            if by_step is None:
                by_step = {p.step: p for p in st.progress}
            known = by_step.get(s.step)
        if known is not None:
            gained = {f.name: getattr(s, f.name) for f in fields(ProgressSample)
                      if getattr(known, f.name) is None and getattr(s, f.name) is not None}
            for name, value in gained.items():
                setattr(known, name, value)
            if gained:
                filled.append(ProgressSample(step=s.step, source=s.source, **gained))
            continue
        st.progress.append(s)
        if by_step is not None:
            by_step[s.step] = s
        fresh.append(s)
        if last_step is None or s.step > last_step:
            last_step = s.step
            st.last_progress_s = now
    if len(st.progress) > PROGRESS_HISTORY_LEN:
        del st.progress[:len(st.progress) - PROGRESS_HISTORY_LEN]
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
