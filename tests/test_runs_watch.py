"""`dfctl runs -w` in a real 80-column tmux pane: every run on one line with its whole id
(copyable), newest first, the live run's step/total and tok/s, the worst finding, nothing
past column 80 (the table used to be forced to 100 columns); Ctrl-C ends it with 130."""

from __future__ import annotations

import io
import os
import sys
import time

from controller.records import Finding
from controller.store.runstore import RunRecord, RunStore
from tests.test_probe import launch_local
from tests.test_watch import PROGRESS_PROGRAM, ROOT, record_for
from tests.tmux_screen import TmuxScreen


def test_runs_watch_fits_80_columns_with_full_ids_newest_first(tmp_path, _dfctl_home):
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM)
    try:
        store = RunStore()
        old = record_for(run, "x")
        store.add_run(RunRecord(**{**old.__dict__, "run_id": "train_eager_unpadded-20261130T101010Z",
                                   "name": "train_eager_unpadded", "started_s": time.time() - 3600, "state": "failed"}))
        store.add_findings("train_eager_unpadded-20261130T101010Z", [Finding(
            kind="oom", severity="critical", summary="CUDA OOM on GPU 5: tried to allocate 4.50 GiB, 1.21 GiB free")])
        live = record_for(run, "live-run-20261201T120000Z")
        store.add_run(RunRecord(**{**live.__dict__, "pid": run.pid(), "state": "running",
                                   "playbook": {**live.playbook, "run": {"args": ["--steps", "300"]}}}))
        store.close()
        cmd = f"{sys.executable} -m controller runs -w --interval 0.5"
        with TmuxScreen(["sh", "-c", cmd], width=80, height=24, cwd=ROOT,
                        env={"DFCTL_HOME": str(_dfctl_home), "PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}
                        ) as term:
            screen = term.wait_for("/300", timeout_s=60)          # the live run's step/total
            lines = screen.splitlines()
            assert all(len(ln) <= 80 for ln in lines)
            live_line = next(ln for ln in lines if "live-run-20261201T120000Z" in ln)
            old_line = next(ln for ln in lines if "train_eager_unpadded-20261130T101010Z" in ln)
            assert lines.index(live_line) < lines.index(old_line)           # newest first
            assert "running" in live_line and "21.5K" in live_line
            assert "failed" in old_line and "oom: CUDA OOM" in old_line
            term.send_keys("C-c")
            assert term.wait_exit(timeout_s=30) == 130
    finally:
        run.stop()


def test_an_ended_runs_age_stops_at_its_end():
    """Issue 26.5: `runs -w` kept counting an ended run's age; it is its length now."""
    from rich.console import Console

    from controller.cli.runs_live import row_of
    from controller.records import ProcessState, RunState
    from controller.view.runs_table import render

    def age_at(rec, st, now_s):
        row = row_of(rec, st, RunStore(), cache)
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(render([row], now_s, 100))
        return console.export_text()

    cache: dict = {}
    t0 = 1_800_000_000.0
    ended = RunRecord(run_id="done-run", name="done", target_kind="local", target="local", started_s=t0,
                      state="finished", ended_s=t0 + 125)
    assert "2m05s" in age_at(ended, None, t0 + 3600) and "2m05s" in age_at(ended, None, t0 + 7200)
    live = RunRecord(run_id="ends-now", name="e", target_kind="local", target="local", started_s=t0, state="running")
    st = RunState(run_id="ends-now", state="running", process=ProcessState(state="running"), updated_s=t0 + 60)
    assert "1m00s" in age_at(live, st, t0 + 60)
    st.state, st.updated_s = "failed", t0 + 70                         # seen ended at this tick
    assert "1m10s" in age_at(live, st, t0 + 70)
    st.updated_s = t0 + 90
    assert "1m10s" in age_at(live, st, t0 + 900)
