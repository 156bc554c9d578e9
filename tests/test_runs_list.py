"""Plain `dfctl runs` fits the terminal without losing a field (issue 26.5): it was one
bordered table ~140 columns wide, which an 80-column terminal wrapped to mush. Each run id,
target, state with exit code, pid, start time and run dir is shown whole (a user copies
them); what does not fit on a run's line goes to an indented line under it."""

from __future__ import annotations

import os
import sys
import time

import pytest

from controller.store.runstore import RunRecord, RunStore
from controller.view.runs_list import render_runs
from tests.test_watch import ROOT
from tests.tmux_screen import TmuxScreen

NOW = time.mktime((2026, 12, 2, 1, 30, 0, 0, 0, 0))
ROWS = [
    {"run_id": "train_eager_unpadded-20261201T231012Z", "target": "pct 200 on pve1", "state": "failed",
     "exit_code": 137, "pid": 182734, "started_s": NOW - 7200,
     "run_dir": "/root/dfctl/runs/train_eager_unpadded-20261201T231012Z"},
    {"run_id": "qwen3-8b-dflash-20261202T011500Z", "target": "ssh root@gpu-node-07", "state": "running",
     "exit_code": None, "pid": 40211, "started_s": NOW - 900,
     "run_dir": "/srv/train/runs/qwen3-8b-dflash-20261202T011500Z"},
    {"run_id": "smoke-20251130T101010Z", "target": "local", "state": "stopped", "exit_code": None, "pid": None,
     "started_s": time.mktime((2025, 11, 30, 10, 10, 10, 0, 0, 0)), "run_dir": "/tmp/w/runs/smoke-20251130T101010Z"},
]


def _fields(r: dict) -> list[str]:
    state = r["state"] + (f" ({r['exit_code']})" if r["exit_code"] is not None else "")
    return [r["run_id"], r["target"], state, str(r["pid"] or "-"), r["run_dir"]]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_list_fits_the_width_and_keeps_every_field_whole(width):
    text = render_runs(ROWS, width, NOW)
    lines = text.splitlines()
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    for r in ROWS:
        for field in _fields(r):
            assert any(field in ln for ln in lines), (width, field)
    assert time.strftime("%m-%d %H:%M", time.gmtime(NOW - 7200)) in text   # this year's start: short
    assert "2025-11-30 " in text                                           # another year's: with it


def test_a_wide_terminal_gets_one_line_per_run_a_narrow_one_two():
    assert len(render_runs(ROWS, 160, NOW).splitlines()) == 1 + len(ROWS)
    narrow = render_runs(ROWS, 80, NOW).splitlines()
    assert len(narrow) == 1 + 2 * len(ROWS)
    run_line, under = narrow[1], narrow[2]
    assert run_line.startswith("train_eager_unpadded-20261201T231012Z") and "failed (137)" in run_line
    assert under.startswith("  ") and "/root/dfctl/runs/train_eager_unpadded-20261201T231012Z" in under


def test_dfctl_runs_in_a_real_80_column_terminal(tmp_path, _dfctl_home):
    store = RunStore()
    for r in ROWS[::-1]:
        store.add_run(RunRecord(run_id=r["run_id"], name=r["run_id"].rsplit("-", 1)[0], target_kind="local",
                                target="local", run_dir=r["run_dir"], pid=r["pid"], started_s=r["started_s"],
                                state="failed", exit_code=1, ended_s=r["started_s"] + 60))
    store.close()
    cmd = f"{sys.executable} -m controller runs"
    with TmuxScreen(["sh", "-c", cmd], width=80, height=24, cwd=ROOT,
                    env={"DFCTL_HOME": str(_dfctl_home), "PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}) as term:
        assert term.wait_exit(timeout_s=60) == 0
        # the scrollback too: in some runs the header line was no longer on the visible screen
        lines = term._tmux("capture-pane", "-p", "-S", "-50", "-t", term.session).stdout.splitlines()
    lines = lines[next(i for i, ln in enumerate(lines) if ln.startswith("run ")):]
    assert lines[0].split() == ["run", "state", "pid", "started", "(UTC)"]
    for r in ROWS:
        (i,) = [i for i, ln in enumerate(lines) if ln.startswith(r["run_id"] + " ")]   # whole, never wrapped
        assert "failed (1)" in lines[i] and str(r["pid"] or "-") in lines[i]
        assert lines[i + 1].split() == ["local", r["run_dir"]]
    assert all(len(ln.rstrip()) <= 80 for ln in lines)
