"""A multi-node job on the rig: 2 fake hosts x CT 210 on the rig's fabric (10.200.254.0/24),
the bundled trainer's tiny config under real torchrun with gloo, 2 nodes x 1 process,
through the real CLI (real sshd, real LXC, the pct stand-in). Deploy -> the job trains, its
loss falls, both replicas end with the same weights (each node's own checksum line); an
unchanged redeploy sends nothing to either node; stop with one node's link down -> the other
node stopped, exit 3 naming the unreachable one; stop again -> nothing left on either node;
one node's link down at deploy -> nothing launched anywhere, exit 3 naming the node."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from tests.deploy_support import wait_for
from tests.job_support import job_rest_toml
from tests.rig.fixtures import FAB_VMID, on_fabric
from tests.test_deploy_rig import live_pids_of_run
from tests.test_job_local import JOB_STEPS, cli

pytestmark = pytest.mark.rig

PROJECT = Path(__file__).resolve().parents[1]
CT_PYTHON = str(PROJECT / ".venv" / "bin" / "python")   # the checkout is bound read-only into the CT
VMID = FAB_VMID                                       # the fabric CT (CT 200 keeps loopback only)


def job_playbook(rig, path: Path, workdir: str, *, steps: int, name: str, timeout_s: float = 10) -> Path:
    nodes = []
    for host in rig.hosts[:2]:
        nodes.append(f"""[[nodes]]
kind = "pct"
host = "{host.name}"
vmid = {VMID}
addr = "{host.fabric_address(VMID)}"
workdir = "{workdir}"
python = "{CT_PYTHON}"
ssh_config = "{rig.ssh_config_path}"
connect_timeout_s = {timeout_s}
""")
    path.write_text("\n".join(nodes) + "\n" + job_rest_toml(name=name, steps=steps, nproc=1, ifname="eth0",
                                                           master_port=29400))
    return path


def host_path(host, ct_path: str) -> Path:
    return host.container_path(VMID, ct_path)


@pytest.fixture(scope="module")
def fabric(rig):
    """The rig with hosts 1 and 2 on the fabric (once for the module's shared job)."""
    on_fabric(rig)
    return rig


@pytest.fixture(scope="module")
def finished_job(fabric, tmp_path_factory):
    """One 2-node job of JOB_STEPS steps deployed to the rig and run to its end."""
    dir = tmp_path_factory.mktemp("rigjob")
    home, workdir = dir / "home", f"/workspace/dfctl-job-{os.getpid()}"
    r = cli(home, "deploy", str(job_playbook(fabric, dir / "pb.toml", workdir, steps=JOB_STEPS, name="rigpair")), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    store = RunStore(home / "registry.sqlite")
    for host, m in zip(fabric.hosts, store.job_members(doc["job"])):
        wait_for(lambda h=host, m=m: host_path(h, m.run_dir + "/exit_code").exists(), timeout_s=300, interval_s=0.2,
                 what=f"{m.run_id} to end")
    return dir, home, workdir, doc, store


def test_rig_job_trains_and_replicas_agree_across_hosts(finished_job, fabric):
    _, home, _, doc, store = finished_job
    members = store.job_members(doc["job"])
    assert [(m.host, m.vmid, m.target) for m in members] == [
        (h.name, VMID, f"pct {VMID} on {h.name}") for h in fabric.hosts[:2]]
    run_dirs = [host_path(h, m.run_dir) for h, m in zip(fabric.hosts, members)]
    assert [(d / "exit_code").read_text().strip() for d in run_dirs] == ["0", "0"]
    rows = [json.loads(x) for x in (run_dirs[0] / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, JOB_STEPS + 1)) and rows[-1]["loss"] < rows[0]["loss"]
    logs = [(d / "train.log").read_text() for d in run_dirs]
    sums = [re.findall(r"^\[rank(\d)\]:\[dist\] rank=\d params_checksum=(\S+)$", log, re.M) for log in logs]
    assert [s[0][0] for s in sums] == ["0", "1"] and sums[0][0][1] == sums[1][0][1]
    r = cli(home, "runs", "--json")
    assert r.returncode == 0 and [(x["run_id"], x["state"]) for x in json.loads(r.stdout)] == \
        [(doc["job"], "finished")], r.stderr


def run_pids_on(host, job_id: str) -> list[int]:
    """The job's live processes inside this host's fabric CT."""
    return sorted(set(live_pids_of_run(job_id)) & set(host.container_host_pids(VMID)))


def test_rig_job_redeploy_sends_nothing_and_stop_leaves_nothing(finished_job, fabric):
    dir, home, workdir, _, _ = finished_job
    r = cli(home, "deploy", str(job_playbook(fabric, dir / "long.toml", workdir, steps=100000, name="riglong",
                                             timeout_s=3)), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert [n["release"]["transferred_bytes"] for n in doc["nodes"]] == [0, 0]
    store = RunStore(home / "registry.sqlite")
    m0 = store.job_members(doc["job"])[0]
    log0 = host_path(fabric.hosts[0], m0.log_path)
    wait_for(lambda: "[rank0]:[progress] step=" in log0.read_text(errors="replace"), timeout_s=300,
             interval_s=0.2, what="the job's first step")
    h1, h2 = fabric.hosts[:2]
    assert len(run_pids_on(h1, doc["job"])) >= 3 and len(run_pids_on(h2, doc["job"])) >= 3   # wrapper, torchrun, worker
    # node 1 cannot be reached: node 0 is stopped all the same, node 1 is named, exit 3
    h2.link_down()
    try:
        listed = cli(home, "runs", "--json")
        s = cli(home, "stop", doc["job"], "--grace-s", "10")
    finally:
        h2.link_up()
    # runs: the job listed with node 1's read error, node 0 still running, exit 3 (a partial list)
    row = [x for x in json.loads(listed.stdout) if x["run_id"] == doc["job"]][0]
    assert listed.returncode == 3 and row["read_error"] and row["state"] == "running", listed.stderr
    assert [(n["state"], bool(n["read_error"])) for n in row["nodes"]] == [("running", False), ("unknown", True)]
    assert s.returncode == 3 and f"node1 (pct {VMID} on {h2.name})" in s.stderr, s.stdout + s.stderr
    assert run_pids_on(h1, doc["job"]) == [] and store.get_run(doc["job"]).state != "stopped"
    s = cli(home, "stop", doc["job"], "--grace-s", "10")
    assert s.returncode == 0, s.stdout + s.stderr
    assert live_pids_of_run(doc["job"]) == []
    assert [m.state for m in store.job_members(doc["job"])] == ["stopped", "stopped"]
    assert store.get_run(doc["job"]).state == "stopped"


def test_rig_node_unreachable_at_deploy_launches_nothing(finished_job, fabric):
    dir, home, workdir, _, _ = finished_job
    fabric.hosts[1].link_down()
    try:
        r = cli(home, "deploy", str(job_playbook(fabric, dir / "down.toml", workdir, steps=5, name="rigdown",
                                                 timeout_s=3)))
    finally:
        fabric.hosts[1].link_up()
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"nodes[1] (pct {VMID} on {fabric.hosts[1].name}): unreachable:" in r.stderr
    runs0 = host_path(fabric.hosts[0], f"{workdir}/runs")
    assert not [d for d in os.listdir(runs0) if d.startswith("rigdown-")]
    assert not [r for r in RunStore(home / "registry.sqlite").runs() if r.name == "rigdown"]
