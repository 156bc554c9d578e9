"""The list of plain `dfctl runs`: every run with where it lives, fitting the terminal.

Why not one wide table: a run id (~30), a target, a pid, a start time and a run dir (~50,
the run id again at its end) made ~140 columns with borders, wrapped to mush in an 80-column
terminal. Nothing is cut here -- each field is something a user copies (the id into
`dfctl watch`, the run dir into ssh) -- so what does not fit on the row moves to an indented
second line under it: the run dir first, then the target. Plain text: it pipes into grep.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

GAP = "  "
COLUMNS = ("run", "target", "state", "pid", "started (UTC)", "run dir")


def _started(started_s: float | None, now_s: float) -> str:
    """Month-day hour:minute in UTC; the year only when it is not this year's."""
    if not started_s:
        return "-"
    t = time.gmtime(started_s)
    return time.strftime("%m-%d %H:%M" if t.tm_year == time.gmtime(now_s).tm_year else "%Y-%m-%d %H:%M", t)


def _cells(r: dict[str, Any], now_s: float) -> dict[str, str]:
    state = str(r.get("state") or "unknown")
    if r.get("exit_code") is not None:
        state += f" ({r['exit_code']})"
    return {"run": str(r["run_id"]), "target": str(r.get("target") or "-"), "state": state,
            "pid": str(r.get("pid") or "-"), "started (UTC)": _started(r.get("started_s"), now_s),
            "run dir": str(r.get("run_dir") or "-")}


def _moved(r: dict[str, Any], prev: dict[str, Any] | None) -> str:
    """`; moved from TARGET WORKDIR` when the previous attempt ran elsewhere ([recover] targets)."""
    if prev is None or (prev.get("target"), prev.get("workdir")) == (r.get("target"), r.get("workdir")):
        return ""
    return f"; moved from {prev.get('target') or '-'} {prev.get('workdir') or ''}".rstrip()


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    return GAP.join(v.ljust(w) for v, w in zip(values, widths)).rstrip()


def render_runs(rows: Sequence[dict[str, Any]], width: int, now_s: float | None = None) -> str:
    """The list for a `width`-column terminal: one line per run when everything fits,
    else the run dir (and then the target) on an indented line under its run."""
    now_s = time.time() if now_s is None else now_s
    cells = [_cells(r, now_s) for r in rows]
    need = {c: max([len(c)] + [len(x[c]) for x in cells]) for c in COLUMNS}
    layouts = (COLUMNS, tuple(c for c in COLUMNS if c != "run dir"),
               tuple(c for c in COLUMNS if c not in ("run dir", "target")))
    for cols in layouts:
        if sum(need[c] for c in cols) + len(GAP) * (len(cols) - 1) <= width:
            break
    under = [c for c in ("target", "run dir") if c not in cols]
    widths = [need[c] for c in cols]
    out = [_line(cols, widths)]
    by_id = {r["run_id"]: r for r in rows}
    for r, x in zip(rows, cells):
        out.append(_line([x[c] for c in cols], widths))
        if under:
            out.append("  " + GAP.join(x[c] for c in under))
        if r.get("previous_run_id") or r.get("next_run_id"):     # a resume chain (dfctl watch --recover)
            out.append(f"  chain: {r.get('previous_run_id') or '(first)'} -> this (attempt {r.get('attempt') or 0})"
                       f" -> {r.get('next_run_id') or '(newest)'}" + _moved(r, by_id.get(r.get("previous_run_id"))))
    return "\n".join(out)
