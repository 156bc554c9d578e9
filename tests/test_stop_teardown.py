"""A stopped run's launcher teardown is the stop, not a crash (controller/watch/follower.py
`without_stop_teardown`).

tests/data/logs/torchrun_stop_teardown_abort.log is real output: node1's train.log of
tests/test_watch_job.py::test_stop_during_watch_is_no_failure_and_exits_0 in a fresh-clone CI
run on 2026-12-03 (two torchrun nodes on loopback, `dfctl stop` mid-run, a loaded 2-core
machine): the agent's SignalException for the SIGTERM, then `terminate called without an
active exception` / `Fatal Python error: Aborted` as the agent exited (exit 134)."""

from __future__ import annotations

from pathlib import Path

from controller.watch.follower import without_stop_teardown
from tests.judge_support import final_read as _findings

LOG = Path(__file__).parent / "data" / "logs" / "torchrun_stop_teardown_abort.log"


def test_the_agents_abort_after_it_obeyed_the_stop_is_the_stop_not_a_crash():
    lines = LOG.read_text().splitlines()
    found = _findings(lines)
    # the text alone: the agent's SignalException and its abort are both crashes
    assert any("Fatal Python error" in f.summary for f in found if f.kind == "crash")
    assert any("SignalException" in f.summary or "SIGTERM" in f.summary for f in found if f.kind == "crash")
    kept, obeyed = without_stop_teardown(found, None)
    assert obeyed is not None and kept == []
    # in two ticks: the SignalException first, the abort in the next tick's findings
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("terminate called"))
    first = _findings(lines[:cut])
    _, obeyed1 = without_stop_teardown(first, None)
    later = [f for f in found if f.line is not None and f.line > cut]
    assert later and without_stop_teardown(later, obeyed1) == ([], obeyed1)


def test_a_crash_before_the_stop_was_obeyed_is_still_a_crash():
    lines = ["step 3 loss 2.1", "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
             "    step()", "RuntimeError: CUDA error: an illegal memory access was encountered"]
    lines += LOG.read_text().splitlines()
    kept, _ = without_stop_teardown(_findings(lines), None)
    assert [f.kind for f in kept if f.kind == "crash"] == ["crash"]
    assert "illegal memory access" in next(f.summary for f in kept if f.kind == "crash")
