"""`dfctl runs -w`: every run in one live table (like `dstack ps -w`), redrawn each
interval in place, fitting the terminal. Live runs are ticked by one controller.watch.Watch
(re-made when the set of live runs changes: a deploy meanwhile shows up); ended runs show
what the registry and the metric history hold. Wiring only; the table is
controller.view.runs_table."""

from __future__ import annotations

import time

from controller.playbook import total_steps_of
from controller.records import ENDED_STATES, SEVERITY_RANK, RunState
from controller.store.runstore import LIVE_STATES, RunRecord, RunStore
from controller.view.runs_table import RunRow, render


def total_steps(rec: RunRecord) -> int | None:
    return total_steps_of(((rec.playbook or {}).get("run") or {}).get("args"))


def _worst(findings) -> str | None:
    findings = [f for f in findings if f.cleared_s is None]   # a cleared one's cause went away
    if not findings:
        return None
    f = max(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 0))
    return f"{f.kind}: {f.summary}"


def _last_progress(run_id: str):
    from controller.store.history import read_progress

    try:
        t = read_progress(run_id, columns=["step", "tok_per_s"])
    except (OSError, ValueError):
        return None
    return t.slice(t.num_rows - 1).to_pylist()[0] if t.num_rows else None


def row_of(rec: RunRecord, st: RunState | None, store: RunStore, cache: dict) -> RunRow:
    baseline = (((rec.playbook or {}).get("watch") or {}).get("baseline_tok_per_s"))
    row = RunRow(run_id=rec.run_id, state=rec.state, started_s=rec.started_s, total_steps=total_steps(rec),
                 baseline_tok_per_s=baseline, target=rec.target, ended_s=rec.ended_s)
    if st is not None:
        row.state = st.state
        if st.state in ENDED_STATES and row.ended_s is None:
            # seen ended first at this tick; the registry learns the end when the watch is done with it
            row.ended_s = cache.setdefault(("ended", rec.run_id), st.updated_s)
        row.baseline_tok_per_s = st.baseline_tok_per_s or baseline
        last = st.progress[-1] if st.progress else None
        if last is not None:
            row.step, row.tok_per_s = last.step, last.tok_per_s
        row.worst = _worst(st.findings)
        return row
    if rec.run_id not in cache:
        cache[rec.run_id] = (_last_progress(rec.run_id), _worst(store.findings(rec.run_id)))
    last, row.worst = cache[rec.run_id]
    if last:
        row.step, row.tok_per_s = last.get("step"), last.get("tok_per_s")
    return row


def live_table(interval_s: float) -> int:
    """Redraw until Ctrl-C (exit 130, the convention for an interrupt)."""
    from rich.console import Console
    from rich.live import Live

    from controller.adopt.imported import is_imported
    from controller.watch import Watch
    from controller.watch import tick as watch_tick

    console = Console()
    store = RunStore()
    watched: tuple[str, ...]
    cache: dict = {}
    watch, watched = None, ()
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            for _ in watch_tick.ticks_every(interval_s):   # the watch's clock paces the redraws
                records = sorted(store.runs(), key=lambda r: -(r.started_s or 0))   # newest first
                # a job row's processes are its members' (a Watch of a job is `dfctl watch JOB`'s)
                live_ids = tuple(r.run_id for r in records if r.state in LIVE_STATES and not is_imported(r)
                                 and not r.is_job)
                if live_ids != watched:
                    if watch is not None:
                        watch.close()
                    watch = Watch([r for r in records if r.run_id in live_ids], store,
                                  interval_s=interval_s) if live_ids else None
                    watched = live_ids
                states = {s.run_id: s for s in watch.tick().states} if watch is not None else {}
                rows = [row_of(r, states.get(r.run_id), store, cache) for r in records]
                live.update(render(rows, time.time(), console.width), refresh=True)
        return 0                    # the pacing ended (a test's); the CLI's only ends by Ctrl-C
    finally:
        if watch is not None:
            watch.close()
        store.close()
