"""Throughput: current and warm-window median tok/s, the baseline and the deficit, and a
chart of tok/s over the run's life with the baseline drawn through it.

The median is the run's warm-window median (controller/judge/throughput_window.py, the run's own
warm-up): the figure the closing line, check-log and compare-runs print for the same run.
It was a rolling median of the last 20 samples, and one run showed `median 6.2K` here and
`5.1K` in its closing line (issue 26.3)."""

from __future__ import annotations

from rich.text import Text

from controller.judge.throughput_window import fmt_tok_per_s, throughput_summary
from controller.records import ProgressSample, RunState
from controller.view.format import NA, deficit_text, known, si
from controller.view.sparkline import chart

_MEDIANS: dict[str, tuple[tuple[int, int, int, float, int], float | None]] = {}
"""run id -> (what the figure was computed from, the figure): a redraw without new samples
costs no pass over the history."""


def current_tok_per_s(progress: list[ProgressSample]) -> float | None:
    for p in reversed(progress):
        if known(p.tok_per_s):
            return p.tok_per_s
    return None


def warm_median_tok_per_s(state: RunState) -> float | None:
    """The run's warm-window median tok/s (throughput.throughput_summary, its warm-up) over
    its whole run: the samples the bounded history let go count through older_throughput."""
    last = state.progress[-1].step if state.progress else -1
    key = (len(state.progress), last, state.older_throughput.version, state.warmup_s, state.warmup_steps)
    cached = _MEDIANS.get(state.run_id)
    if cached is not None and cached[0] == key:
        return cached[1]
    tok = throughput_summary(state.progress, state, older=state.older_throughput)["tok_per_s"] \
        if state.progress or len(state.older_throughput) else None
    value = tok["median"] if tok else None
    if len(_MEDIANS) > 256:
        _MEDIANS.clear()
    _MEDIANS[state.run_id] = (key, value)
    return value


def tok_text(value: float | None) -> str:
    """A tok/s figure as every command prints it (throughput.fmt_tok_per_s); n/a unknown."""
    return fmt_tok_per_s(value) if known(value) else NA


def figures_line(state: RunState) -> Text:
    """'tok/s 12.4K  median 12.3K  baseline 21.5K  -42.3%'."""
    cur = current_tok_per_s(state.progress)
    med = warm_median_tok_per_s(state)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("tok/s ", style="bold")
    t.append(si(cur))
    t.append("  median ", style="dim")
    t.append(tok_text(med))
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
