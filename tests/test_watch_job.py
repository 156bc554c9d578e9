"""`dfctl watch JOB` on a local two-node job: two workdirs, the bundled trainer's tiny
config under real torchrun (gloo, c10d rendezvous on 127.0.0.1), one node's worker killed
with SIGKILL. The job finding names that node and rank first, the other rank's lost peer
and both ChildFailedErrors come under it, the watch exits 4, and the dashboard (the real
Rich renderer) shows both nodes."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

from rich.console import Console

from controller.dashboard import render
from controller.runstore import RunStore
from controller.watch import Watch
from tests.job_support import ROOT, launch_local_job, stop_job, worker_of


def test_kill_one_nodes_worker_names_it_first_and_watch_exits_4(tmp_path):
    store = RunStore()
    job = launch_local_job(tmp_path, store)
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", job.job_id, "--json", "--interval", "0.5"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed_rank, killed_s, jobs, runs = None, None, [], set()
    try:
        for line in watch.stdout:          # one document per member and one per job, every tick
            doc = json.loads(line)
            if "job" not in doc:
                runs.add(doc["run_id"])
                continue
            jobs.append(doc["job"])
            if killed_rank is None and (doc["job"]["step"] or 0) >= 2:
                pid, killed_rank = worker_of(job.members[1].pid)
                os.kill(pid, signal.SIGKILL)
                killed_s = time.time()
        rc = watch.wait(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        stop_job(job)                       # nothing left running, whatever happened above
    assert killed_rank is not None, (jobs[-1:], watch.stderr.read()[-2000:])
    assert rc == 4, watch.stderr.read()[-2000:]
    assert runs == {m.run_id for m in job.members}                # the members are followed as runs
    last = jobs[-1]
    assert last["job_id"] == job.job_id and last["state"] == "failed" and last["exit_code"] == 4
    assert [n["node_rank"] for n in last["nodes"]] == [0, 1]
    assert all(n["clock_offset_s"] is not None and abs(n["clock_offset_s"]) < 1 for n in last["nodes"])
    assert any(j["tok_per_s"] for j in jobs)                      # the job's aggregate figure was shown
    [f] = last["findings"]
    assert f["kind"] == "crash" and f["severity"] == "critical"
    assert f["summary"].startswith(f"rank {killed_rank} (node 1: local, local rank 0) killed by SIGKILL at ")
    assert f"then rank {1 - killed_rank} on node 0: lost its peer" in " ".join(f["evidence"])
    # node 1's torchrun gave up; node 0 may still be tearing down (its one rank already failed)
    assert any(e.startswith("torchrun raised ChildFailedError on node(s) ") and "1" in e for e in f["evidence"])
    assert f["evidence"][0].startswith("first: E") and "failed (exitcode: -9)" in f["evidence"][0]  # glog: ms
    assert f["first_seen_s"] - killed_s < 30
    ff = last["first_failure"]
    assert (ff["node"], ff["rank"], ff["kind"]) == (1, killed_rank, "signal")
    assert ff["time_s"] >= killed_s - 1.0                         # its time is after the kill, on our clock
    # the registry keeps the job's finding under the job's id; members keep their own
    assert [x.summary for x in store.findings(job.job_id)] == [f["summary"]]
    assert store.get_run(job.job_id).state == "failed"            # the job row says how it ended

    # a later watch of the ended job: the same verdict from the registry, and the dashboard
    w = Watch([store.get_run(job.job_id)], store, interval_s=0.5)
    try:
        rep = w.tick()
        assert w.exit_code() == 4
        buf = io.StringIO()
        Console(file=buf, width=160, height=40, color_system=None, force_terminal=False).print(
            render(rep.states, jobs=rep.jobs, now_s=time.time()))
    finally:
        w.close()
    screen = buf.getvalue()
    assert f"job {job.members[0].name} failed FAILED (exit 4)  2 nodes" in screen
    assert "  node 0 local" in screen and "  node 1 local" in screen
    assert f"first failure: rank {killed_rank} (node 1: local, local rank 0) killed by SIGKILL" in screen


def test_stop_during_watch_is_no_failure_and_exits_0(tmp_path):
    """Both nodes stopped the way `dfctl stop` stops a run (stop_request, then SIGTERM to the
    session) while `dfctl watch JOB` runs: torchrun's SignalException on each node is the
    stop obeyed, not a crash -- the job ends `stopped`, no finding, exit 0."""
    from concurrent.futures import ThreadPoolExecutor

    from controller.launch import stop_run
    from controller.runstore import target_of
    from controller.transport.local import LocalTransport

    store = RunStore()
    job = launch_local_job(tmp_path, store, name="ws")
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", job.job_id, "--json", "--interval", "0.5"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last, stopped = None, False
    try:
        for line in watch.stdout:
            doc = json.loads(line)
            if "job" in doc:
                last = doc["job"]
                if not stopped and (last["step"] or 0) >= 2:
                    with ThreadPoolExecutor(2) as pool:
                        list(pool.map(lambda m: stop_run(LocalTransport(), target_of(m), m, grace_s=10), job.members))
                    stopped = True
        rc = watch.wait(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        stop_job(job)
    assert stopped and rc == 0, watch.stderr.read()[-2000:]
    assert last["state"] == "stopped" and last["exit_code"] == 0 and last["findings"] == []
    assert [n["state"] for n in last["nodes"]] == ["stopped", "stopped"]
    assert all(n["findings"] == [] for n in last["nodes"])
