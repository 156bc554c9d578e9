"""The runs table of `dfctl runs` and `dfctl runs -w`: one row per run, newest first.

It fits the terminal it is drawn on (no forced width): the run id is always shown whole
(copyable: never wrapped or cut), then state, step/total, tok/s, vs baseline, age and the
worst finding; columns drop from the right end of that priority when the width runs out,
and the finding takes what width is left (cut with an ellipsis)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from controller.view.format import deficit_text, duration, si

STATE_STYLE = {"running": "green", "launched": "cyan", "finished": "bold green", "failed": "bold red",
               "stopped": "yellow", "unknown": "dim", "unreachable": "bold red", "oom": "bold red",
               "crash": "bold red"}


@dataclass
class RunRow:
    run_id: str
    state: str
    started_s: float | None = None
    ended_s: float | None = None      # an ended run's age stops here
    step: int | None = None
    total_steps: int | None = None
    tok_per_s: float | None = None
    baseline_tok_per_s: float | None = None
    worst: str | None = None          # "oom: CUDA OOM on GPU 5 …"
    target: str = ""


COLUMNS = ("run", "state", "step", "tok/s", "vs base", "age", "worst finding", "target")


def _cells(r: RunRow, now_s: float) -> dict[str, Text]:
    step = "" if r.step is None else (f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step))
    vs, vs_style = deficit_text(r.tok_per_s, r.baseline_tok_per_s)
    return {
        "run": Text(r.run_id, no_wrap=True),
        "state": Text(r.state, style=STATE_STYLE.get(r.state, "")),
        "step": Text(step),
        "tok/s": Text(si(r.tok_per_s) if r.tok_per_s is not None else ""),
        "vs base": Text(vs, style=vs_style),
        "age": Text(duration((r.ended_s or now_s) - r.started_s) if r.started_s else ""),
        "worst finding": Text(r.worst or "", style="red" if r.worst else ""),
        "target": Text(r.target),
    }


def render(rows: list[RunRow], now_s: float, width: int) -> Table:
    """The table for a `width`-column terminal (rows as given: the caller sorts)."""
    cells = [_cells(r, now_s) for r in rows]
    gap = 1                                                # one space between columns
    need = {c: max([len(c)] + [len(x[c].plain) for x in cells]) for c in COLUMNS}
    keep, used = [], 0
    for c in COLUMNS[:6]:                                # run … age: each if it fits
        if c != "run" and not any(x[c].plain for x in cells):
            continue
        if c == "run" or used + need[c] + gap <= width:
            keep.append(c)
            used += need[c] + gap
    room = width - used - gap
    if room >= 12 and any(x["worst finding"].plain for x in cells):
        keep.append("worst finding")
        used += min(room, need["worst finding"]) + gap
        room = min(room, need["worst finding"])
    if used + need["target"] + gap <= width and any(x["target"].plain for x in cells):
        keep.append("target")
    table = Table(box=None, pad_edge=False, padding=(0, gap, 0, 0), expand=False, show_edge=False,
                  header_style="bold")
    for c in keep:
        if c == "worst finding":
            table.add_column(c, max_width=room, no_wrap=True, overflow="ellipsis")
        else:
            table.add_column(c, no_wrap=True, justify="right" if c in ("step", "tok/s", "vs base", "age") else "left",
                             min_width=need[c] if c == "run" else None)
    for x in cells:
        table.add_row(*(x[c] for c in keep))
    return table
