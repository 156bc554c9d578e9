"""Throughput statistics over progress samples: the warm window, its median/p10/p90.

Shared by the regression detector (judge/regression.py), `dfctl check-log`, the watch's closing
line and compare-runs, so "12.4K tok/s" means the same number everywhere: every one of them
takes its median through `warm_window()` and `tok_quantiles()` (compare-runs over columns
of a 1M-row history, the others over samples turned into columns by `throughput_summary`),
and every figure printed names the window it came from (`window_label`). Pure, no I/O.

One run, one figure (issue 26.3): the dashboard's median, the watch's closing line,
check-log and compare-runs all print `throughput_summary`'s median (compare-runs its
column-wise twin, `warm_window` + `tok_quantiles`), through `fmt_tok_per_s`. Two things
made them differ: the dashboard took a rolling median of the last 20 samples, and the
watch stamps a log line with the time *it read* the line (a block-buffered log delivers a
burst at one time), which check-log and compare-runs of the log file never see. So the
warm window's time rule uses the trainer's own clock only (`trainer_times`): a sample from
a log line counts by steps; metrics.jsonl and wandb samples by time too. And for any run
length: the watch and check-log hold a bounded number of samples as objects, and the
ones they let go keep their figures in a ThroughputColumns (`older`), so the median is the
whole run's as compare-runs reads it from the history, exactly.

Why medians of a *warm* window: the first steps include torch.compile, CUDA graph
capture, allocator growth and data-loader start-up; a mean over them under-reports a
healthy run and a single slow checkpoint step skews it. The warm window drops the first
`warmup_steps` samples after the first one and anything within `warmup_s` of the first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, TypeGuard

import numpy as np

from controller.records import ProgressSample
from controller.throughput_columns import FIGURES, ThroughputColumns


def fmt_tok_per_s(value: float | None) -> str:
    """21500 -> '21.5K', 12400 -> '12.4K', 950 -> '950', 1.2e6 -> '1.20M'."""
    if value is None or not math.isfinite(value):
        return "?"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f}K"
    return f"{value:.0f}"


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated quantile (numpy's default) of an already sorted sequence."""
    n = len(sorted_values)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_values[0])
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def median(values: Iterable[float]) -> float | None:
    return quantile(sorted(values), 0.5)


def finite(value: float | None) -> TypeGuard[float]:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def by_step(progress: Sequence[ProgressSample]) -> list[ProgressSample]:
    """One sample per step, in step order. The same step may arrive from the log, from
    metrics.jsonl and from wandb; the first one seen wins, later ones only fill gaps."""
    seen: dict[int, ProgressSample] = {}
    for s in progress:
        if s.step not in seen:
            seen[s.step] = s
    return [seen[k] for k in sorted(seen)]


def warm_samples(samples: Sequence[ProgressSample], warmup_s: float = 0.0,
                 warmup_steps: int = 0) -> list[ProgressSample]:
    """The samples of `warm_window()`, of those with a throughput figure; [] while no
    sample is past warm-up (the regression detector judges nothing during warm-up)."""
    useful = [s for s in samples if finite(s.tok_per_s) or finite(s.step_time_s) or finite(s.samples_per_s)]
    times = np.array([s.time_s if finite(s.time_s) else np.nan for s in useful], dtype=np.float64)
    mask, warm = warm_window(times, np.ones(len(useful), bool), warmup_s, warmup_steps)
    return [useful[i] for i in np.arange(len(useful))[mask]] if warm else []


def warm_window(time_s: np.ndarray, useful: np.ndarray, warmup_s: float,
                warmup_steps: int) -> tuple[np.ndarray | slice, bool]:
    """The warm window over columns (one entry per step, in step order): of the `useful`
    samples (those with a throughput figure), drop the first and `warmup_steps` more, and any
    within `warmup_s` of the first (when times are known). Nothing left (a short run): every
    useful sample, and False. A slice when the window is contiguous -- the usual case, no
    copy of a 1M-row column."""
    n = useful.size
    t = time_s
    if n and useful.all():
        start = warmup_steps + 1
        contiguous = True
        if warmup_s > 0 and math.isfinite(t[0]):
            if np.isfinite(t).all() and np.all(t[1:] >= t[:-1]):
                start = max(start, int(np.searchsorted(t, t[0] + warmup_s, side="left")))
            else:
                contiguous = False
        if contiguous:
            return (slice(start, n), True) if start < n else (slice(0, n), False)
    idx = np.flatnonzero(useful)
    mask = np.zeros(n, bool)
    if idx.size == 0:
        return mask, False
    warm = np.zeros(idx.size, bool)
    warm[warmup_steps + 1:] = True
    t0 = t[idx[0]]
    if warmup_s > 0 and math.isfinite(t0):
        ti = t[idx]
        warm &= ~(np.isfinite(ti) & (ti < t0 + warmup_s))
    if warm.any():
        mask[idx[warm]] = True
        return mask, True
    mask[idx] = True
    return mask, False


def tok_quantiles(tok: np.ndarray) -> dict[str, float] | None:
    """median/p10/p90/mean/min/max of the positive finite tok/s values (numpy's linear
    quantiles); None when there is none."""
    good = np.isfinite(tok) & (tok > 0)
    if not good.all():
        tok = tok[good]
    if not tok.size:
        return None
    q = np.quantile(tok, [0.5, 0.1, 0.9])
    return {"median": float(q[0]), "p10": float(q[1]), "p90": float(q[2]), "mean": float(tok.mean()),
            "min": float(tok.min()), "max": float(tok.max())}


def window_label(first_step: int | None, last_step: int | None, warm: bool) -> str:
    """How a figure names its window: 'warm window steps 40-300' / 'all steps 1-12 (short run)'."""
    if first_step is None:
        return "no steps"
    return f"warm window steps {first_step}-{last_step}" if warm else f"all steps {first_step}-{last_step}, short run"


def trainer_times(samples: Sequence[ProgressSample]) -> np.ndarray:
    """The samples' times on the trainer's clock, NaN where unknown -- a log line's time is
    when the watch read it, not when the trainer printed it, so it is left out (the same
    log read by check-log has no times at all)."""
    return np.array([s.time_s if s.source != "log" and finite(s.time_s) else np.nan for s in samples],
                    dtype=np.float64)


def median_text(summary: dict[str, Any] | None) -> str:
    """'median 5.1K tok/s (warm window steps 50-120)': the one way a run's figure is printed."""
    tok = (summary or {}).get("tok_per_s") or {}
    if tok.get("median") is None:
        return "median ? tok/s"
    return f"median {fmt_tok_per_s(tok['median'])} tok/s ({summary['window']['label']})"  # type: ignore[index]


def _sample_columns(samples: Sequence[ProgressSample]) -> dict[str, np.ndarray]:
    """Samples -> the columns ThroughputColumns.arrays() gives (one row per sample, in order)."""
    out = {
        "step": np.array([int(s.step) for s in samples], dtype=np.int64),
        "time_s": _column(samples, "time_s"),
        "from_log": np.array([s.source == "log" for s in samples], dtype=bool),
    }
    for name in FIGURES:
        out[name] = _column(samples, name)
    return out


def _column(samples: Sequence[ProgressSample], name: str) -> np.ndarray:
    return np.array([v if finite(v := getattr(s, name)) else np.nan for s in samples], dtype=np.float64)


def _run_columns(progress: Sequence[ProgressSample], older: ThroughputColumns | None = None) -> dict[str, np.ndarray]:
    """One row per step, in step order, the first seen winning (`by_step`'s rule): the rows
    of `older` (samples that left a bounded history, so seen first), then `progress`."""
    cols = _sample_columns(progress)
    if older is not None and len(older):
        before = older.arrays()
        cols = {k: np.concatenate([before[k], cols[k]]) for k in cols}
    step = cols["step"]
    if step.size > 1 and not np.all(step[1:] > step[:-1]):
        _, first = np.unique(step, return_index=True)   # sorted steps, each one's first row
        cols = {k: v[first] for k, v in cols.items()}
    return cols


def _median_of(values: np.ndarray) -> float | None:
    """The median of the finite values (numpy's, as compare-runs takes it; no full sort)."""
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else None


def throughput_summary(progress: Sequence[ProgressSample], cfg: Any = None,
                       baseline_tok_per_s: float | None = None,
                       older: ThroughputColumns | None = None) -> dict[str, Any]:
    """Warm-window throughput of a run, as plain JSON-able data.

    `cfg` is a WatchConfig (warmup_s, warmup_steps, baseline_tok_per_s) or None (no
    warm-up skipped). `baseline_tok_per_s` overrides cfg's. When no sample is past
    warm-up (a short log) every sample is used and `warm` is False. `older`: the run's
    samples that left the bounded `progress` history (RunState.older_throughput,
    TextScanner.older_throughput), so the figures are the whole run's however long it is.
    Keys: samples_total, samples_used, warm, window{first_step,last_step,start_s,end_s,
    duration_s,label}, tok_per_s{median,p10,p90,mean,min,max,last}, step_time_s (median),
    samples_per_s (median), data_wait_s (median), baseline_tok_per_s, deficit_pct
    (positive = slower than the baseline).
    """
    warmup_s = float(getattr(cfg, "warmup_s", 0.0) or 0.0) if cfg is not None else 0.0
    warmup_steps = int(getattr(cfg, "warmup_steps", 0) or 0) if cfg is not None else 0
    if baseline_tok_per_s is None and cfg is not None:
        baseline_tok_per_s = getattr(cfg, "baseline_tok_per_s", None)
    cols = _run_columns(progress, older)
    useful = np.isfinite(cols["tok_per_s"]) | np.isfinite(cols["step_time_s"]) | np.isfinite(cols["samples_per_s"])
    if not useful.all():
        cols = {k: v[useful] for k, v in cols.items()}
    trainer_time_s = np.where(cols["from_log"], np.nan, cols["time_s"])
    mask, is_warm = warm_window(trainer_time_s, np.ones(cols["step"].size, bool), warmup_s, warmup_steps)
    used = {k: v[mask] for k, v in cols.items()}
    tok = used["tok_per_s"]
    tok_stats: dict[str, Any] | None = tok_quantiles(tok)
    if tok_stats is not None:
        known = tok[np.isfinite(tok)]
        tok_stats["last"] = float(known[-1]) if known.size else None
    times = used["time_s"][np.isfinite(used["time_s"])]
    deficit = None
    if tok_stats and baseline_tok_per_s:
        deficit = (1.0 - tok_stats["median"] / baseline_tok_per_s) * 100.0
    steps = used["step"]
    first_step = int(steps[0]) if steps.size else None
    last_step = int(steps[-1]) if steps.size else None
    start_s, end_s = (float(times.min()), float(times.max())) if times.size else (None, None)
    return {
        "samples_total": int(cols["step"].size),
        "samples_used": int(steps.size),
        "warm": is_warm,
        "window": {
            "first_step": first_step,
            "last_step": last_step,
            "start_s": start_s,
            "end_s": end_s,
            "duration_s": (end_s - start_s) if start_s is not None and end_s is not None else None,
            "label": window_label(first_step, last_step, is_warm),
        },
        "tok_per_s": tok_stats,
        "step_time_s": _median_of(used["step_time_s"]),
        "samples_per_s": _median_of(used["samples_per_s"]),
        "data_wait_s": _median_of(used["data_wait_s"]),
        "baseline_tok_per_s": baseline_tok_per_s,
        "deficit_pct": deficit,
    }
