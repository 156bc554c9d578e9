"""Throughput statistics over progress samples: the warm window, its median/p10/p90.

Shared by the regression detector (detectors.py), `dfctl check-log` and compare-runs,
so "12.4K tok/s" means the same number everywhere. Pure functions, no I/O.

Why medians of a *warm* window: the first steps include torch.compile, CUDA graph
capture, allocator growth and data-loader start-up; a mean over them under-reports a
healthy run and a single slow checkpoint step skews it. The warm window drops the first
`warmup_steps` samples after the first one and anything within `warmup_s` of the first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from controller.records import ProgressSample


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


def finite(value: float | None) -> bool:
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
    """Samples after warm-up: drop the first sample and the `warmup_steps` after it, and
    (when the samples carry times) anything within `warmup_s` of the first sample."""
    if not samples:
        return []
    t0 = samples[0].time_s
    out = []
    for i, s in enumerate(samples):
        if i <= warmup_steps:
            continue
        if warmup_s > 0 and t0 is not None and s.time_s is not None and s.time_s < t0 + warmup_s:
            continue
        out.append(s)
    return out


def throughput_summary(progress: Sequence[ProgressSample], cfg: Any = None,
                       baseline_tok_per_s: float | None = None) -> dict[str, Any]:
    """Warm-window throughput of a run, as plain JSON-able data.

    `cfg` is a WatchConfig (warmup_s, warmup_steps, baseline_tok_per_s) or None (no
    warm-up skipped). `baseline_tok_per_s` overrides cfg's. When no sample is past
    warm-up (a short log) every sample is used and `warm` is False.
    Keys: samples_total, samples_used, warm, window{first_step,last_step,start_s,end_s,
    duration_s}, tok_per_s{median,p10,p90,mean,min,max,last}, step_time_s (median),
    samples_per_s (median), data_wait_s (median), baseline_tok_per_s, deficit_pct
    (positive = slower than the baseline).
    """
    warmup_s = float(getattr(cfg, "warmup_s", 0.0) or 0.0) if cfg is not None else 0.0
    warmup_steps = int(getattr(cfg, "warmup_steps", 0) or 0) if cfg is not None else 0
    if baseline_tok_per_s is None and cfg is not None:
        baseline_tok_per_s = getattr(cfg, "baseline_tok_per_s", None)
    samples = [s for s in by_step(progress)
               if finite(s.tok_per_s) or finite(s.step_time_s) or finite(s.samples_per_s)]
    warm = warm_samples(samples, warmup_s, warmup_steps)
    is_warm = bool(warm)
    used = warm if warm else samples
    toks = sorted(s.tok_per_s for s in used if finite(s.tok_per_s) and s.tok_per_s > 0)  # type: ignore[operator]
    tok_stats = None
    if toks:
        last = next((s.tok_per_s for s in reversed(used) if finite(s.tok_per_s)), None)
        tok_stats = {
            "median": quantile(toks, 0.5), "p10": quantile(toks, 0.1), "p90": quantile(toks, 0.9),
            "mean": sum(toks) / len(toks), "min": toks[0], "max": toks[-1], "last": last,
        }
    times = [s.time_s for s in used if s.time_s is not None]
    deficit = None
    if tok_stats and baseline_tok_per_s:
        deficit = (1.0 - tok_stats["median"] / baseline_tok_per_s) * 100.0
    return {
        "samples_total": len(samples),
        "samples_used": len(used),
        "warm": is_warm,
        "window": {
            "first_step": used[0].step if used else None,
            "last_step": used[-1].step if used else None,
            "start_s": min(times) if times else None,
            "end_s": max(times) if times else None,
            "duration_s": (max(times) - min(times)) if times else None,
        },
        "tok_per_s": tok_stats,
        "step_time_s": median(s.step_time_s for s in used if finite(s.step_time_s)),
        "samples_per_s": median(s.samples_per_s for s in used if finite(s.samples_per_s)),
        "data_wait_s": median(s.data_wait_s for s in used if finite(s.data_wait_s)),
        "baseline_tok_per_s": baseline_tok_per_s,
        "deficit_pct": deficit,
    }
