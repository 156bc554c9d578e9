"""Throughput: current and rolling-median tok/s, the baseline and the deficit, and a chart
of tok/s over the run's life with the baseline drawn through it."""

from __future__ import annotations

import statistics

from rich.text import Text

from controller.records import ProgressSample, RunState
from controller.widgets.format import deficit_text, known, si
from controller.widgets.sparkline import chart

ROLLING_SAMPLES = 20
"""The rolling median spans the last this-many progress samples (start-up included only
when the run has no more than that); the regression *finding* uses the detectors' warm
window -- this is the screen's smoothing, not a judgement."""


def current_tok_per_s(progress: list[ProgressSample]) -> float | None:
    for p in reversed(progress):
        if known(p.tok_per_s):
            return p.tok_per_s
    return None


def rolling_median_tok_per_s(progress: list[ProgressSample], n: int = ROLLING_SAMPLES) -> float | None:
    values = []
    for p in reversed(progress):  # newest first: a 2000-sample history costs n, not 2000
        if known(p.tok_per_s):
            values.append(p.tok_per_s)
            if len(values) == n:
                break
    return statistics.median(values) if values else None


def figures_line(state: RunState) -> Text:
    """'tok/s 12.4K  median 12.3K  baseline 21.5K  -42.3%'."""
    cur = current_tok_per_s(state.progress)
    med = rolling_median_tok_per_s(state.progress)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("tok/s ", style="bold")
    t.append(si(cur))
    t.append("  median ", style="dim")
    t.append(si(med))
    t.append("  baseline ", style="dim")
    t.append(si(state.baseline_tok_per_s))
    label, style = deficit_text(med, state.baseline_tok_per_s)
    if label:
        t.append(f"  {label}", style=style)
    return t


def throughput_lines(state: RunState, width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """The figures line, then a chart using the remaining lines (at most 4 rows)."""
    if max_lines <= 0:
        return []
    lines = [figures_line(state)]
    rows = min(4, max_lines - 1)
    if rows > 0:
        values = [p.tok_per_s for p in state.progress]
        xs = [p.time_s if known(p.time_s) else float(p.step) for p in state.progress]
        if not any(known(v) for v in values):
            lines.append(Text("no throughput samples yet", style="dim"))
        else:
            lines += chart(values, xs, width, rows, state.baseline_tok_per_s, axis=True)
    return lines
