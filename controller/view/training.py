"""Training progress: step, loss, acc, tau, samples/s and time since the last step."""

from __future__ import annotations

from rich.text import Text

from controller.records import ProgressSample, RunState
from controller.view.format import NA, duration, known, num, si


def latest(progress: list[ProgressSample], attr: str) -> float | None:
    """The newest known value of one field (samples may carry only some fields)."""
    for p in reversed(progress):
        v = getattr(p, attr)
        if known(v):
            return v
    return None


def since_last_step_s(state: RunState, now_s: float) -> float | None:
    last = state.last_progress_s
    if not known(last) and state.progress:
        last = state.progress[-1].time_s
    return now_s - last if known(last) else None


ETA_SAMPLES = 20
"""Progress samples the ETA's pace is taken over (the recent pace, not the whole run's)."""


def eta_s(state: RunState) -> float | None:
    """Seconds to `total_steps` at the recent pace (seconds per step over the last
    ETA_SAMPLES timed samples); None without a total, a pace or steps left."""
    total = state.total_steps
    timed = [p for p in state.progress if known(p.time_s)][-ETA_SAMPLES:]
    if not total or len(timed) < 2 or timed[-1].step >= total:
        return None
    steps = timed[-1].step - timed[0].step
    secs = timed[-1].time_s - timed[0].time_s  # type: ignore[operator]  # timed holds known time_s only
    if steps <= 0 or secs <= 0:
        return None
    return (total - timed[-1].step) * secs / steps


def step_text(state: RunState) -> str:
    """'220/300 · ETA 4m10s' (or '220' without a known total)."""
    p = state.progress
    if not p:
        return NA
    if not state.total_steps:
        return str(p[-1].step)
    eta = eta_s(state)
    return f"{p[-1].step}/{state.total_steps}" + (f" · ETA {duration(eta)}" if eta is not None else "")


def training_fields(state: RunState, now_s: float) -> list[tuple[str, str]]:
    """(label, value) pairs in display order; unknown values read 'n/a'."""
    p = state.progress
    return [
        ("step", step_text(state)),
        ("loss", num(latest(p, "loss"), 4)),
        ("acc", num(latest(p, "acc"), 3)),
        ("τ", num(latest(p, "tau"), 2)),
        ("samples/s", num(latest(p, "samples_per_s"), 2)),
        ("step time", (num(latest(p, "step_time_s"), 3) + "s") if known(latest(p, "step_time_s")) else NA),
        ("mem peak", (num(latest(p, "mem_peak_gib"), 1) + "G") if known(latest(p, "mem_peak_gib")) else NA),
        ("lr", si(latest(p, "lr")) if not known(latest(p, "lr")) else f"{latest(p, 'lr'):.1e}"),
        ("last step", (duration(since_last_step_s(state, now_s)) + " ago") if known(since_last_step_s(state, now_s)) else NA),
    ]


def training_lines(state: RunState, width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """Fields flowed left to right over as many lines as they need (or are allowed)."""
    if max_lines <= 0:
        return []
    lines: list[Text] = []
    cur = Text(no_wrap=True, overflow="ellipsis")
    for label, value in training_fields(state, now_s):
        piece_len = len(label) + 1 + len(value) + 2
        if cur.cell_len and cur.cell_len + piece_len > width and len(lines) + 1 < max_lines:
            lines.append(cur)
            cur = Text(no_wrap=True, overflow="ellipsis")
        cur.append(label + " ", style="dim")
        cur.append(value, style="bold" if label in ("step", "last step") else "")
        cur.append("  ")
        if label == "last step" and value != NA:
            stale = since_last_step_s(state, now_s) or 0
            if stale > 300 and state.state == "running":
                cur.stylize("bold red", cur.cell_len - len(value) - 2, cur.cell_len - 2)
    cur.rstrip()
    lines.append(cur)
    return lines
