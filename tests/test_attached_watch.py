"""What the watch says about attached runs (controller.adopt.attached), and the automatic stack
dump on a hang / stale_log finding (controller.watch.auto_stacks) with real py-spy on a real
process: off the tick (never waits), once per finding, bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from controller.adopt.attached import REPLACE_HINT, ended_verdict, explain_stale_log
from controller.judge import evaluate
from controller.playbook import WatchConfig
from controller.records import Finding, LogStatus, ProcessState, ProgressSample, RunState
from controller.ship.stacks import StacksError
from controller.store.runstore import RunRecord, RunStore
from controller.watch.auto_stacks import AutoStacks, dump_record
from tests.deploy_support import wait_for

BUFFERED = {"env": {"pythonunbuffered": False, "python_u_flag": False, "stdout_kind": "file",
                    "stderr_kind": "file", "block_buffered": True}}


def _seeds_state(now: float) -> RunState:
    """The seeds' run 200 s after its log last grew, wandb 40 steps further on."""
    last_growth = now - 180
    progress = [ProgressSample(step=100, time_s=last_growth - 5, source="wandb")]
    progress += [ProgressSample(step=100 + i, time_s=last_growth + 4 * i, source="wandb") for i in range(1, 41)]
    return RunState(run_id="seeds-1", state="running", started_s=now - 600, last_log_growth_s=last_growth,
                    process=ProcessState(state="running", pid=42),
                    log=LogStatus(path="/workspace/train_opt2.log", size_bytes=8192), progress=progress)


def test_seeds_stale_log_names_the_buffering_and_the_fix():
    now = 1_800_000_000.0
    state = _seeds_state(now)
    found = [f for f in evaluate(state, WatchConfig(stale_log_s=120), now) if f.kind == "stale_log"]
    assert len(found) == 1                                       # the detectors' own finding
    f = explain_stale_log(found[0], state, BUFFERED, now)
    assert f.evidence[0] == ("stdout is a regular file, PYTHONUNBUFFERED unset, no python -u, "
                             "log unchanged 180 s while wandb advanced 40 steps")
    assert f.hint == REPLACE_HINT and "dfctl deploy PLAYBOOK --replace" in f.hint
    assert f.summary.startswith("log block-buffered: ") and f.evidence[1:] == found[0].evidence
    unbuffered = {"env": {**BUFFERED["env"], "pythonunbuffered": True, "block_buffered": False}}
    assert explain_stale_log(found[0], state, unbuffered, now) == found[0]   # no such claim without the facts
    assert explain_stale_log(found[0], state, None, now) == found[0]


def test_ended_attached_run_verdicts_never_invent_an_exit_code():
    now = 1_800_000_000.0
    tail = ["[progress] step=10 loss=1.0", ""]
    oom = ended_verdict("r", [], tail, 3, 4, now)
    assert oom.kind == "oom" and oom.severity == "critical" and "exit code unknown" in oom.summary
    assert "oom_kill counter went 3 -> 4" in oom.evidence[0]
    plain = ended_verdict("r", [], tail, 3, 3, now)
    assert plain.severity == "warning" and "exit code unknown" in plain.summary and plain.evidence[-1] == tail[0]
    crash = Finding(kind="crash", severity="critical", summary="RuntimeError: boom")
    assert ended_verdict("r", [crash], tail, 3, 4, now) is None          # the log already said why


PROGRAM = ("import queue, threading, time\nq = queue.Queue()\ndef drafter_loop():\n    q.get()\n"
           "for i in range(3):\n    threading.Thread(target=drafter_loop, name='drafter-%d' % i, daemon=True).start()\n"
           "print('ready', flush=True)\ntime.sleep(600)\n")


def _start_ticks(pid: int) -> int:
    raw = open(f"/proc/{pid}/stat").read()
    return int(raw[raw.rfind(")") + 2:].split()[19])


def test_auto_stack_dump_puts_frames_into_the_hang_evidence(tmp_path):
    (tmp_path / "pipeline.py").write_text(PROGRAM)
    p = subprocess.Popen([sys.executable, str(tmp_path / "pipeline.py")], stdout=subprocess.PIPE, text=True)
    auto = AutoStacks(dump_record)
    try:
        assert p.stdout.readline().strip() == "ready"
        rec = RunRecord(run_id="hung-1", name="hung", target_kind="local", target="local", pid=p.pid,
                        origin="attached", pid_start_ticks=_start_ticks(p.pid), playbook={"target": {"kind": "local"}})
        hang = Finding(kind="hang", severity="critical", summary="no progress for 900 s", evidence=("last step 12",))
        t0 = time.monotonic()
        assert auto.consider(rec, hang) is True
        auto.finished()                               # never blocks: returns at once either way
        assert time.monotonic() - t0 < 0.5
        assert auto.consider(rec, hang) is False      # once per finding
        assert auto.consider(rec, Finding(kind="nan", severity="critical", summary="x")) is False
        done = wait_for(lambda: auto.finished(), timeout_s=60, what="the dump")
        assert len(done) == 1 and done[0].error is None
        ev = done[0].finding.evidence
        assert ev[0] == "last step 12"
        assert ev[1].startswith("stacks: 3 threads in Queue.get (queue.py:") and "from drafter_loop (pipeline.py:4)" \
            in ev[1]
        assert any("thread drafter-0: Condition.wait (threading.py:" in line for line in ev)
        store = RunStore()
        try:
            store.add_findings("hung-1", [hang])
            store.update_finding_evidence("hung-1", done[0].finding)
            assert store.findings("hung-1")[0].evidence == ev
        finally:
            store.close()
    finally:
        auto.close()
        p.kill()
        p.wait()


def test_auto_stack_dump_is_bounded_and_reports_a_refusal_once():
    release = threading.Event()

    def stuck(record):
        release.wait(30)
        raise StacksError("py-spy never answered")

    def denied(record):
        raise StacksError("ptrace of the run is not permitted on pct 200 on pve; lacks CAP_SYS_PTRACE")

    rec = RunRecord(run_id="r", name="r", target_kind="local", target="local", pid=1)
    stale = Finding(kind="stale_log", severity="warning", summary="log silent since 10:00:00")
    auto = AutoStacks(stuck, deadline_s=5.0)
    try:
        auto.consider(rec, stale, now_s=100.0)
        t0 = time.monotonic()
        assert auto.finished(now_s=101.0) == [] and time.monotonic() - t0 < 0.1     # the tick goes on
        out = auto.finished(now_s=106.0)
        assert len(out) == 1 and "no dump within 5 s" in out[0].finding.evidence[-1] and auto.pending == 0
    finally:
        release.set()
        auto.close()
    auto = AutoStacks(denied)
    try:
        auto.consider(rec, stale)
        out = wait_for(lambda: auto.finished(), what="the refusal")
        assert out[0].dump is None and "CAP_SYS_PTRACE" in out[0].finding.evidence[-1]
        assert auto.consider(rec, stale) is False                  # not retried for this finding
    finally:
        auto.close()


HANGING = r'''
import json, queue, sys, threading, time
q = queue.Queue()
def drafter_loop():
    q.get()
workers = [threading.Thread(target=drafter_loop, name="drafter-%d" % i) for i in range(2)]
m = open(sys.argv[1] + "/metrics.jsonl", "a", buffering=1)
for step in range(1, 4):
    print("[progress] step=%d loss=1.0" % step, flush=True)
    m.write(json.dumps({"step": step, "time_s": time.time(), "loss": 1.0}) + "\n")
    time.sleep(0.3)
for w in workers:
    w.start()
for w in workers:
    w.join()
'''


def test_watch_of_an_attached_run_hang_with_frames_then_ended_exit_code_unknown(tmp_path):
    """Through the real watch: a hand-started run stops making progress (its threads wait in
    queue.get) -> hang, whose evidence gains the automatic dump's frames; then the process
    is killed -> `ended`, 'exit code unknown', no invented code, no 'process vanished'."""
    from controller.adopt.attach import Selector, attach_run
    from controller.playbook import load_playbook
    from controller.watch import Watch

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "hang.py").write_text(HANGING)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(run_dir / "train.log", "wb") as log:
        p = subprocess.Popen([sys.executable, str(run_dir / "hang.py"), str(run_dir)], cwd=run_dir, stdout=log,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    pb = tmp_path / "pb.toml"
    pb.write_text('[target]\nkind = "local"\n[watch]\nhang_min_s = 2\nhang_factor = 1\nstale_log_s = 1000\n')
    store = RunStore()
    w = None
    try:
        wait_for(lambda: (run_dir / "metrics.jsonl").exists(), what="the run's first step")
        att = attach_run(load_playbook(pb).target, Selector(pid=p.pid), playbook=load_playbook(pb), store=store,
                         name="hangs")
        w = Watch([att.record], store, gpu=False, interval_s=0.5)
        st = w.states[0]

        def hang_with_frames():
            w.tick()
            f = next((f for f in st.findings if f.kind == "hang"), None)
            return f if f is not None and any(e.startswith("stacks: ") for e in f.evidence) else None

        f = wait_for(hang_with_frames, timeout_s=60, interval_s=0.3, what="a hang finding with frames")
        summary = next(e for e in f.evidence if e.startswith("stacks: "))
        assert "2 threads in Queue.get (queue.py:" in summary and "from drafter_loop (hang.py:5)" in summary, summary
        assert any("thread drafter-1: Condition.wait (threading.py:" in e for e in f.evidence)
        assert store.stacks(att.record.run_id)[0][1]["summary"] == summary[len("stacks: "):]
        assert sum(1 for x in st.findings if x.kind == "hang") == 1
        p.kill()
        p.wait()

        def ended():
            w.tick()
            return st.state == "ended" and any("exit code unknown" in x.summary for x in st.findings)

        wait_for(ended, timeout_s=30, interval_s=0.3, what="the run seen ended")
        assert st.process.exit_code is None
        assert not any("vanished" in x.summary for x in st.findings)
        assert w.exit_code() == 4                     # the hang stays the run's verdict
        wait_for(lambda: (w.tick(), w.all_done)[1], timeout_s=30, interval_s=0.3, what="the watch done")
        rec = store.get_run(att.record.run_id)
        assert (rec.state, rec.exit_code) == ("ended", None)
    finally:
        if w is not None:
            w.close()
        store.close()
        if p.poll() is None:
            p.kill()
            p.wait()
