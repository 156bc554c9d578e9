"""The fleet: one compact row per run -- state, step, tok/s against its baseline, worst finding."""

from __future__ import annotations

from rich.text import Text

from controller.records import RunState
from controller.view.findings import worst
from controller.view.format import SEVERITY_LABEL, SEVERITY_STYLE, STATE_STYLE, deficit_text, si
from controller.view.throughput_panel import tok_text, warm_median_tok_per_s


def fleet_row(state: RunState, width: int, selected: bool) -> Text:
    """`▶ train_eager_dynamiccopy  running   step 1200  12.4K/21.5K -42.3%  CRIT regression …`."""
    name_w = max(12, min(28, width // 3 - 3))
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("▶ " if selected else "  ", style="bold cyan")
    name = state.name or state.run_id
    t.append(f"{name[:name_w]:<{name_w}} ", style="bold" if selected else "")
    code = state.process.exit_code
    label = state.state + (f" {code}" if state.state in ("failed", "stopped") and code is not None else "")
    t.append(f"{label[:11]:<11} ", style=STATE_STYLE.get(state.state, ""))
    if width >= 100:
        step = str(state.progress[-1].step) if state.progress else "-"
        t.append(f"step {step:<7} ", style="dim")
    med = warm_median_tok_per_s(state)
    tok = tok_text(med)
    if state.baseline_tok_per_s and med is not None:
        tok += "/" + si(state.baseline_tok_per_s)
    t.append(f"{tok:<12}")
    dlabel, dstyle = deficit_text(med, state.baseline_tok_per_s)
    t.append(f"{dlabel:<7} ", style=dstyle)
    w = worst(state.findings)
    if w is None:
        t.append("ok", style="green")
    else:
        sev = SEVERITY_STYLE.get(w.severity, "")
        t.append(f"{SEVERITY_LABEL.get(w.severity, '?')} ", style=sev)
        t.append(w.summary, style=sev if w.severity == "critical" else "")
    return t


def fleet_lines(states: list[RunState], selected: int, width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """A row per run; with too few lines, a window around the selected run plus a count."""
    if max_lines <= 0 or not states:
        return []
    n = len(states)
    if n <= max_lines:
        return [fleet_row(s, width, i == selected) for i, s in enumerate(states)]
    room = max(1, max_lines - 1)
    start = min(max(0, selected - room // 2), n - room)
    rows = [fleet_row(states[i], width, i == selected) for i in range(start, start + room)]
    rows.append(Text(f"  … {n - room} more runs (↑/↓ to select)", style="dim", no_wrap=True))
    return rows[:max_lines]
