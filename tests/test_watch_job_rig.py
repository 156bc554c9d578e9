"""`dfctl watch JOB` on the rig: 2 fake hosts x CT 210 on the rig's fabric, the bundled
trainer's tiny config under real torchrun with gloo across the hosts (deployed by the
real CLI over real sshd into real LXC), one node's worker killed with SIGKILL: the job
finding names that node (pct 210 on its host) and rank first, the other rank's lost peer
under it, the watch exits 4 -- one probe per host per tick, the nodes' clocks compared
through each probe's own timestamp."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from tests.deploy_support import wait_for
from tests.job_support import ROOT
from tests.rig.fixtures import FAB_VMID as VMID
from tests.test_job_local import cli
from tests.test_job_rig import job_playbook

pytestmark = pytest.mark.rig


def ct_workers(host, job_id: str) -> list[tuple[int, int, int]]:
    """(host pid, global rank, local rank) of the job's trainer workers in that host's CT,
    found from this machine's /proc: the run id in their environment, the CT's cgroup."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = dict(e.split(b"=", 1) for e in Path(f"/proc/{name}/environ").read_bytes().split(b"\0") if b"=" in e)
            cgroup = Path(f"/proc/{name}/cgroup").read_text()
        except OSError:
            continue
        if env.get(b"DFCTL_RUN_ID") == job_id.encode() and b"RANK" in env and b"LOCAL_RANK" in env \
                and f"{host.containers.cgroup_prefix}/" in cgroup:
            out.append((int(name), int(env[b"RANK"]), int(env[b"LOCAL_RANK"])))
    return sorted(out, key=lambda x: x[2])


def test_rig_job_kill_one_worker_watch_names_it_first_exits_4(rig, fabric_hosts, tmp_path):
    home, workdir = tmp_path / "home", f"/workspace/dfctl-watchjob-{os.getpid()}"
    r = cli(home, "deploy", str(job_playbook(rig, tmp_path / "pb.toml", workdir, steps=100000, name="rigwatch")),
            "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = json.loads(r.stdout)["job"]
    store = RunStore(home / "registry.sqlite")
    assert [m.node_rank for m in store.job_members(job_id)] == [0, 1]
    env = {**os.environ, "DFCTL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", job_id, "--json", "--interval", "0.5"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed, jobs = None, []
    try:
        for line in watch.stdout:
            doc = json.loads(line)
            if "job" not in doc:
                continue
            jobs.append(doc["job"])
            if killed is None and (doc["job"]["step"] or 0) >= 2:
                pid, rank, local = wait_for(lambda: ct_workers(fabric_hosts[1], job_id), what="node 1's worker")[0]
                os.kill(pid, signal.SIGKILL)
                killed = (rank, local, time.time())
        rc = watch.wait(timeout=180)
    finally:
        if watch.poll() is None:
            watch.kill()
        cli(home, "stop", job_id, "--grace-s", "10")
    assert killed is not None, (jobs[-1:], watch.stderr.read()[-2000:])
    rank, local, killed_s = killed
    assert rc == 4, watch.stderr.read()[-2000:]
    last = jobs[-1]
    host1 = fabric_hosts[1].name
    assert [(n["node_rank"], n["target"]) for n in last["nodes"]] == [
        (0, f"pct {VMID} on {fabric_hosts[0].name}"), (1, f"pct {VMID} on {host1}")]
    assert all(n["clock_offset_s"] is not None and n["clock_uncertainty_s"] is not None for n in last["nodes"])
    [f] = last["findings"]
    assert f["summary"].startswith(f"rank {rank} (node 1: pct {VMID} on {host1}, local rank {local}) "
                                   "killed by SIGKILL at ")
    assert f"then rank {1 - rank} on node 0: lost its peer" in " ".join(f["evidence"])
    assert any("half the probe's round trip" in e for e in f["evidence"])
    assert f["first_seen_s"] - killed_s < 30
    assert [x.summary for x in store.findings(job_id)] == [f["summary"]]
