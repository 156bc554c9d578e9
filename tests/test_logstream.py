"""`dfctl logs` reads through the probe's read_since only: the tail, then -f over the
host's long-lived agent (one Python start for the whole follow, not one per poll),
woken by inotify on the local target."""

from __future__ import annotations

import io
import threading
import time

from controller.store.runstore import RunRecord
from controller.watch.logstream import DirectoryWake, LogStream
from tests.test_probe import launch_local, wait_for

PROGRAM = """
    import sys, time
    for i in range(40):
        print("line %d" % i, flush=True)
        time.sleep(0.05)
"""


def _record(run) -> RunRecord:
    return RunRecord(run_id="l", name="l", target_kind="local", target="local", run_dir=str(run.run_dir),
                     log_path=str(run.log), pid=run.pid(), started_s=time.time(), playbook={"target": {"kind": "local"}})


def test_tail_then_follow_through_one_agent_to_the_runs_end(tmp_path):
    run = launch_local(tmp_path / "r", PROGRAM)
    try:
        wait_for(lambda: run.log.exists() and run.log.read_bytes().count(b"\n") >= 5, 20, "first lines")
        stream = LogStream(_record(run), poll_s=0.2)
        out = io.BytesIO()
        try:
            head = stream.tail(3).data
            assert head.count(b"\n") == 3 and head.endswith(b"\n")
            out.write(head)
            events: list[str] = []
            stream.follow(out, events.append)
            assert stream.poller.has_agent                  # the whole follow over one agent
            started = stream.poller.session
        finally:
            stream.close()
        body = run.log.read_bytes()
        assert body.endswith(out.getvalue()) and out.getvalue().endswith(b"line 39\n")
        assert not events and started is not None
    finally:
        run.stop()


def test_the_local_wake_up_is_inotify_and_comes_at_a_write(tmp_path):
    wake = DirectoryWake(str(tmp_path))
    try:
        assert wake.fd is not None                          # this kernel has inotify
        threading.Timer(0.2, lambda: (tmp_path / "x.log").write_text("a\n")).start()
        t0 = time.monotonic()
        wake.wait(10.0)
        assert time.monotonic() - t0 < 5.0                  # woken by the write, not the timeout
    finally:
        wake.close()
