"""The registry's job contract: one job row + one member row per node (controller.store.runstore)."""

import sqlite3

import pytest

from controller.errors import UnknownRunError
from controller.store.runstore import JOB_KIND, RunRecord, RunStore, target_of


def _job(store: RunStore, job_id: str = "pre-20261201T100000Z", started_s: float = 100.0) -> None:
    nodes = [{"kind": "pct", "host": f"pve{i + 1}", "vmid": 200, "workdir": "/ws"} for i in range(2)]
    playbook = {"run": {"name": "pre"}, "nodes": nodes, "distributed": {"nproc_per_node": 1}}
    store.add_run(RunRecord(run_id=job_id, name="pre", target_kind=JOB_KIND,
                            target="job: 2 nodes (pct 200 on pve1, pct 200 on pve2)", playbook=playbook,
                            started_s=started_s, state="running"))
    for i in (1, 0):     # inserted out of order: job_members sorts by rank
        run_dir = f"/ws/runs/{job_id}"
        store.add_run(RunRecord(run_id=f"{job_id}.node{i}", name="pre", target_kind="pct",
                                target=f"pct 200 on pve{i + 1}", host=f"pve{i + 1}", vmid=200, workdir="/ws",
                                run_dir=run_dir, log_path=f"{run_dir}/train.log", pid=4000 + i,
                                playbook={**{k: v for k, v in playbook.items() if k != "nodes"},
                                          "nodes": nodes, "target": nodes[i]},
                                started_s=started_s, state="running", job_id=job_id, node_rank=i))


def test_job_row_lists_once_members_resolve_by_exact_id(tmp_path):
    store = RunStore(tmp_path / "r.sqlite")
    store.add_run(RunRecord(run_id="solo-1", name="solo", target_kind="local", target="local", started_s=50.0,
                            state="finished"))
    _job(store)
    assert [r.run_id for r in store.runs()] == ["pre-20261201T100000Z", "solo-1"]
    assert len(store.runs(members=True)) == 4
    assert sorted(r.run_id for r in store.target_runs()) == [
        "pre-20261201T100000Z.node0", "pre-20261201T100000Z.node1", "solo-1"]
    members = store.job_members("pre-20261201T100000Z")
    assert [(m.node_rank, m.pid, m.host) for m in members] == [(0, 4000, "pve1"), (1, 4001, "pve2")]
    assert all(m.run_dir == "/ws/runs/pre-20261201T100000Z" for m in members)
    assert target_of(members[1]).host == "pve2" and target_of(members[1]).vmid == 200
    # by name and by prefix the job is meant, never a member (which shares both)
    assert store.get_run("pre").run_id == "pre-20261201T100000Z"
    assert store.get_run("pre-2026").is_job
    assert store.get_run("pre-20261201T100000Z.node1").node_rank == 1
    assert store.default_run("watch").run_id == "pre-20261201T100000Z"   # one live run: the job
    with pytest.raises(UnknownRunError):
        store.get_run("nope")


def test_older_registry_gains_job_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, name TEXT, target_kind TEXT, target TEXT, host TEXT, "
               "vmid INTEGER, workdir TEXT, run_dir TEXT, log_path TEXT, pid INTEGER, release_id TEXT, "
               "git_commit TEXT, git_dirty INTEGER, playbook TEXT, playbook_path TEXT, started_s REAL, "
               "wandb_run_id TEXT, state TEXT, exit_code INTEGER, ended_s REAL)")
    db.execute("INSERT INTO runs (run_id, name, target_kind, target, playbook, state) "
               "VALUES ('old-1', 'old', 'local', 'local', '{}', 'finished')")
    db.commit()
    db.close()
    store = RunStore(path)
    old = store.get_run("old-1")
    assert (old.job_id, old.node_rank, old.is_job) == (None, None, False)
    _job(store)
    assert [r.run_id for r in store.runs()] == ["pre-20261201T100000Z", "old-1"]
