"""Throughput regression against a baseline, and the exit code a set of findings means."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.judge.throughput_window import by_step, finite, fmt_tok_per_s, median, warm_samples
from controller.records import Finding, ProgressSample

if TYPE_CHECKING:
    from controller.playbook import WatchConfig

REGRESSION_WINDOW_SAMPLES = 5


def detect_regression(progress: Sequence[ProgressSample], cfg: WatchConfig, baseline_tok_per_s: float | None,
                      now_s: float | None = None, run_id: str | None = None) -> Finding | None:
    """Rolling median tok/s over the last `regression_windows` windows (each
    REGRESSION_WINDOW_SAMPLES samples, fewer when the warm history is short), every one
    below the baseline by more than `regression_threshold_pct` -> a regression. Never
    during warm-up (warm_samples)."""
    if not baseline_tok_per_s or baseline_tok_per_s <= 0:
        return None
    samples = [s for s in warm_samples(by_step(progress), cfg.warmup_s, cfg.warmup_steps)
               if finite(s.tok_per_s)]
    n_windows = max(1, int(cfg.regression_windows))
    if len(samples) < n_windows:
        return None
    size = REGRESSION_WINDOW_SAMPLES if len(samples) >= REGRESSION_WINDOW_SAMPLES * n_windows \
        else len(samples) // n_windows
    judged = samples[-size * n_windows:]
    windows = [judged[i * size:(i + 1) * size] for i in range(n_windows)]
    limit = baseline_tok_per_s * (1.0 - cfg.regression_threshold_pct / 100.0)
    medians = [median(s.tok_per_s for s in w) for w in windows]  # type: ignore[misc]
    if any(m is None or m >= limit for m in medians):
        return None
    overall = median(s.tok_per_s for s in judged)  # type: ignore[misc]
    assert overall is not None                     # judged holds at least n_windows finite samples
    deficit = (1.0 - overall / baseline_tok_per_s) * 100.0
    # the summary's figure is the recent windows' median, not the warm window's (which
    # check-log, the closing line and compare-runs print): say so, with its steps
    evidence = [f"{fmt_tok_per_s(overall)} tok/s = median of the last {n_windows} windows, "
                f"steps {judged[0].step}-{judged[-1].step}"]
    evidence += [f"window steps {w[0].step}-{w[-1].step}: median {fmt_tok_per_s(m)} tok/s"
                 for w, m in zip(windows, medians)]
    evidence.append(f"baseline {fmt_tok_per_s(baseline_tok_per_s)} tok/s, threshold "
                    f"{cfg.regression_threshold_pct:g}% (below {fmt_tok_per_s(limit)} tok/s)")
    hint = "compare with the baseline run (dfctl compare-runs) and its config/code diff"
    waits = [s.data_wait_s for s in judged if finite(s.data_wait_s)]
    steps = [s.step_time_s for s in judged if finite(s.step_time_s)]
    if waits and steps and median(steps):
        share = (median(waits) or 0.0) / median(steps)  # type: ignore[operator]
        evidence.append(f"data wait {share * 100:.0f}% of step time")
        if share > 0.2:
            hint = "input-bound: the data/hidden-state supply is starving the trainer (data_wait_s); " + hint
    return Finding(kind="regression", severity="warning",
                   summary=f"{fmt_tok_per_s(overall)} tok/s, {deficit:.0f}% below the "
                           f"{fmt_tok_per_s(baseline_tok_per_s)} baseline",
                   evidence=tuple(evidence), hint=hint, first_seen_s=now_s, run_id=run_id)


_DEFICIT = re.compile(r"(\d+)% below")
REGRESSION_RESUMMARY_PCT = 5.0
"""A regression whose deficit moved less than this keeps the summary it was first reported
with, so the registry (which de-duplicates on kind + summary) does not record a new
finding every tick as the rolling median jitters; the evidence carries the live numbers."""


def _same_episode(f: Finding | None, known: Sequence[Finding]) -> Finding | None:
    if f is None:
        return None
    prev = next((k for k in reversed(known) if k.kind == f.kind), None)
    if prev is None:
        return f
    a, b = _DEFICIT.search(prev.summary), _DEFICIT.search(f.summary)
    if a and b and abs(int(a.group(1)) - int(b.group(1))) <= REGRESSION_RESUMMARY_PCT:
        return replace(f, summary=prev.summary)
    return f




def verdict_exit_code(findings: Sequence[Finding]) -> int:
    """DESIGN.md exit codes: 4 when any critical finding (OOM, crash, hang, NaN) is
    present, else 5 when a throughput regression is, else 0 (warnings and info alone
    leave a run healthy)."""
    if any(f.severity == "critical" and f.kind != "regression" for f in findings):
        return 4
    if any(f.kind == "regression" for f in findings):
        return 5
    return 0


