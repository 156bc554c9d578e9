"""The run's identity line(s): name, state, target, release, uptime, wandb run."""

from __future__ import annotations

from rich.text import Text

from controller.records import RunState
from controller.view.format import NA, STATE_STYLE, duration, known


def state_label(state: RunState) -> tuple[str, str]:
    """The run state as shown, with the exit code once the process has gone."""
    label: str = state.state
    code = state.process.exit_code
    if state.state in ("finished", "failed", "stopped") and code is not None:
        label = f"{label} (exit {code})"
    return label, STATE_STYLE.get(state.state, "")


def target_label(state: RunState) -> str:
    """'pct 200 on pve1', 'local', ...: the registry's words, else built from host/vmid."""
    if state.target:
        return state.target
    if state.vmid is not None:
        return f"CT {state.vmid} on {state.host or NA}"
    return state.host or NA


def wandb_label(state: RunState, room: int) -> str:
    """The run URL when it fits, else the run id; 'n/a' when wandb said nothing yet."""
    w = state.wandb
    if w is None or (not w.run_id and not w.url):
        return NA
    if w.url and len(w.url) <= room:
        return w.url
    label = w.run_id or w.url or NA
    return f"{label} ({w.mode})" if w.mode == "offline" else label


def header_lines(state: RunState, width: int, max_lines: int, now_s: float) -> list[Text]:
    """Line 1: name, state, uptime. Line 2: target, release, wandb (joined when only 1 line)."""
    if max_lines <= 0:
        return []
    name = state.name or state.run_id
    label, style = state_label(state)
    uptime = duration(now_s - state.started_s) if known(state.started_s) else NA
    first = Text(no_wrap=True, overflow="ellipsis")
    first.append(name, style="bold")
    first.append("  ")
    first.append(label, style=style)
    first.append(f"  up {uptime}")
    if state.name and state.name != state.run_id:
        first.append(f"  {state.run_id}", style="dim")
    second = Text(no_wrap=True, overflow="ellipsis")
    second.append("target ", style="dim")
    second.append(target_label(state))
    second.append("  release ", style="dim")
    second.append(state.release_id or NA)
    second.append("  wandb ", style="dim")
    second.append(wandb_label(state, max(0, width - second.cell_len)))
    if max_lines == 1:
        first.append("  ")
        first.append_text(second)
        return [first]
    return [first, second]
