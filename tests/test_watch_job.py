"""`dfctl watch JOB` on a local two-node job deployed by `dfctl deploy` of a [[nodes]]
playbook (two workdirs on this machine): the bundled trainer's tiny config under real
torchrun (gloo, c10d rendezvous on 127.0.0.1), 2 nodes x 2 processes, one worker of node
1 killed with SIGKILL. The job finding names that node and rank first, the other ranks'
failures come under it as consequences, the watch exits 4, and the dashboard (the real
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

from controller.store.runstore import RunStore
from controller.view.dashboard import render
from controller.watch import Watch
from tests.cli_support import dfctl_in_process
from tests.deploy_support import wait_for
from tests.job_support import ROOT, job_rest_toml, workers_of


def cli(home, *argv: str) -> subprocess.CompletedProcess:
    """deploy and stop through dfctl's main() in-process (tests/cli_support.py): the watch,
    a real `dfctl watch` process, is what these tests are about."""
    return dfctl_in_process(*argv, env={"DFCTL_HOME": str(home)})


def job_playbook(dir, name: str, nproc: int = 2):
    """Two local nodes x nproc processes, the tiny trainer running until stopped."""
    pb = dir / f"{name}.toml"
    pb.write_text(f"""
[[nodes]]
kind = "local"
workdir = "{dir}/node0"
[[nodes]]
kind = "local"
workdir = "{dir}/node1"
""" + job_rest_toml(name=name, steps=100000, nproc=nproc, ifname="lo", rdzv_timeout_s=None,
                                watch_interval_s=0.5))
    return pb


def test_kill_one_nodes_worker_names_it_first_and_watch_exits_4(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("DFCTL_HOME", str(home))           # this test's registry, for the in-process reads too
    r = cli(home, "deploy", str(job_playbook(tmp_path, "wj")), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = json.loads(r.stdout)["job"]
    store = RunStore(home / "registry.sqlite")
    members = store.job_members(job_id)
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", job_id, "--json", "--interval", "0.5"],
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    killed, jobs, runs = None, [], set()
    try:
        for line in watch.stdout:          # one document per member and one per job, every tick
            doc = json.loads(line)
            if "job" not in doc:
                runs.add(doc["run_id"])
                continue
            jobs.append(doc["job"])
            if killed is None and (doc["job"]["step"] or 0) >= 2:
                ws = wait_for(lambda: len(workers_of(members[1].pid)) == 2 and workers_of(members[1].pid),
                              what="node 1's two workers")
                pid, rank, local = ws[1]
                os.kill(pid, signal.SIGKILL)
                killed = (rank, local, time.time())
        rc = watch.wait(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        cli(home, "stop", job_id, "--grace-s", "10")       # nothing left running, whatever happened above
    assert killed is not None, (jobs[-1:], watch.stderr.read()[-2000:])
    rank, local, killed_s = killed
    assert rc == 4, watch.stderr.read()[-2000:]
    assert runs == {m.run_id for m in members}                    # the members are followed as runs
    last = jobs[-1]
    assert last["job_id"] == job_id and last["state"] == "failed" and last["exit_code"] == 4
    assert [n["node_rank"] for n in last["nodes"]] == [0, 1]
    assert all(n["clock_offset_s"] is not None and abs(n["clock_offset_s"]) < 1 for n in last["nodes"])
    assert any(j["tok_per_s"] for j in jobs)                      # the job's aggregate figure was shown
    [f] = last["findings"]
    assert f["kind"] == "crash" and f["severity"] == "critical"
    assert f["summary"].startswith(f"rank {rank} (node 1: local, local rank {local}) killed by SIGKILL at ")
    ff = last["first_failure"]
    assert (ff["node"], ff["rank"], ff["kind"]) == (1, rank, "signal")
    assert ff["time_s"] >= killed_s - 1.0                         # its time is after the kill, on our clock
    # every other rank of the job is a consequence under it, none a failure of its own
    assert sorted(c["rank"] for c in ff["consequences"]) == sorted({0, 1, 2, 3} - {rank})
    assert not any(c["own_failure"] for c in ff["consequences"])
    assert sum(e.startswith("then rank ") for e in f["evidence"]) == 3
    assert f["first_seen_s"] - killed_s < 30
    # the registry keeps the job's finding under the job's id; members keep their own
    assert [x.summary for x in store.findings(job_id)] == [f["summary"]]

    # a later watch of the ended job: the same verdict from the registry, and the dashboard
    w = Watch([store.get_run(job_id)], store, interval_s=0.5)
    try:
        rep = w.tick()
        assert w.exit_code() == 4
        buf = io.StringIO()
        Console(file=buf, width=160, height=40, color_system=None, force_terminal=False).print(
            render(rep.states, jobs=rep.jobs, now_s=time.time()))
    finally:
        w.close()
    screen = buf.getvalue()
    assert "job wj failed FAILED (exit 4)  2 nodes" in screen
    assert "  node 0 local" in screen and "  node 1 local" in screen
    assert f"first failure: rank {rank} (node 1: local, local rank {local}) killed by SIGKILL" in screen


def test_stop_during_watch_is_no_failure_and_exits_0(tmp_path):
    """`dfctl stop JOB` while `dfctl watch JOB` runs: torchrun's SignalException on each node
    is the stop obeyed, not a crash -- the job ends `stopped`, no finding, exit 0."""
    home = tmp_path / "home"
    r = cli(home, "deploy", str(job_playbook(tmp_path, "ws", nproc=1)), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = json.loads(r.stdout)["job"]
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", job_id, "--json", "--interval", "0.5"],
                             cwd=ROOT, env={**os.environ, "DFCTL_HOME": str(home), "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last, stopped = None, None
    try:
        for line in watch.stdout:
            doc = json.loads(line)
            if "job" in doc:
                last = doc["job"]
                if stopped is None and (last["step"] or 0) >= 1:     # training: the stop lands mid-run
                    stopped = cli(home, "stop", job_id, "--grace-s", "10")
        rc = watch.wait(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        cli(home, "stop", job_id, "--grace-s", "10")
    assert stopped is not None and stopped.returncode == 0, stopped and stopped.stderr
    assert rc == 0, watch.stderr.read()[-2000:]
    assert last["state"] == "stopped" and last["exit_code"] == 0 and last["findings"] == []
    assert [n["state"] for n in last["nodes"]] == ["stopped", "stopped"]
    assert all(n["findings"] == [] for n in last["nodes"]), [n["findings"] for n in last["nodes"]]
