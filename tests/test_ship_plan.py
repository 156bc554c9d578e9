"""ship/plan.py: a single run is a deploy of one node, over the path a [[nodes]] job takes,
on the local target with the real ticker program (tests/deploy_support.py).

What the CLI gets from it: the report's hooks (a transfer's bytes, a release in place, a
run stopped by --replace) and the outcome it renders; the CLI's own tests
(test_cli_deploy.py, test_job_local.py) hold the rendered output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.errors import RunConflictError
from controller.playbook import load_playbook
from controller.ship.plan import ShipReport, live_runs, plan_deploy, ship, stop
from controller.store.runstore import RunStore
from tests.deploy_support import dfctl, make_project, session_members, ticker_playbook
from tests.job_support import job_rest_toml


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj", git=True)
    monkeypatch.chdir(root)
    return root, ticker_playbook(root)


def test_a_single_run_is_a_plan_of_one_node_with_the_reports_hooks(project):
    root, pb_path = project
    plan = plan_deploy(load_playbook(pb_path), root)
    assert not plan.is_job and [n.where for n in plan.nodes] == ["local"] and plan.label == "local"
    sent: list[tuple[int, int]] = []
    released = []
    store = RunStore()
    try:
        first = ship(plan, store, name="one", report=ShipReport(progress=lambda n, d, t: sent.append((d, t)),
                                                                released=lambda n, r: released.append((n.rank, r))))
        assert [rank for rank, _ in released] == [0] and released[0][1] is first.releases[0]
        assert sent and sent[-1][0] == sent[-1][1] == first.releases[0].transferred_bytes > 0
        run = first.launched[0]
        assert first.job is None and first.stopped is None and session_members(run.pid)
        assert store.get_run(run.run_id).state == "running"
        # the next exclusive deploy meets it: refused before anything is pushed
        (root / "ticker" / "patch.py").write_text("FIX = 1\n")
        nxt = plan_deploy(load_playbook(pb_path), root)
        assert [r.run_id for r in live_runs(nxt, store, launch=True)[0]] == [run.run_id]
        assert live_runs(nxt, store, launch=False) == {0: []}
        releases = sorted(p.name for p in (root / ".dfctl-local" / "releases").iterdir())
        with pytest.raises(RunConflictError) as refused:
            ship(nxt, store, name="two")
        assert run.run_id in refused.value.message and "still alive" in refused.value.message
        assert sorted(p.name for p in (root / ".dfctl-local" / "releases").iterdir()) == releases
        # --replace: the new release, the old run stopped (the hook hears it), then the launch
        heard = []
        second = ship(nxt, store, name="two", replace=True, report=ShipReport(stopped=lambda r, res: heard.append(r.run_id)))
        assert heard == [run.run_id] and [s["run_id"] for s in second.stopped or []] == [run.run_id]
        assert session_members(run.pid) == [] and store.get_run(run.run_id).state == "stopped"
        assert second.releases[0].release_id != first.releases[0].release_id
        new = second.launched[0]
        stopped = stop(store, store.get_run(new.run_id), 5)
        assert [m.run_id for m, _, _ in stopped.nodes] == [new.run_id] and stopped.left == [] and not stopped.unreached
        assert session_members(new.pid) == [] and store.get_run(new.run_id).state == "stopped"
    finally:
        store.close()


def two_node_job(dir: Path) -> Path:
    pb = dir / "pair.toml"
    pb.write_text(f"""
[[nodes]]
kind = "local"
workdir = "{dir}/node0"
[[nodes]]
kind = "local"
workdir = "{dir}/node1"
""" + job_rest_toml(name="pair", steps=5, nproc=1, ifname="lo").replace('["trainer"]', '["ticker"]'))
    return pb


def test_an_exclusive_job_meeting_a_live_run_is_refused_before_any_node_is_pushed(project, capsys, tmp_path):
    """The job's live-run check is the single run's: every node asked at once, refused
    (exit 2, the node named) before a release goes anywhere."""
    root, pb_path = project
    code, out, err = dfctl(capsys, "deploy", str(pb_path), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    job = two_node_job(tmp_path)
    code, out, err = dfctl(capsys, "deploy", str(job))
    assert code == 2 and out == "", err
    assert f"nodes[0] (local:{tmp_path}/node0): deploy refused: " in err and run["run_id"] in err
    assert not (tmp_path / "node0").exists() and not (tmp_path / "node1").exists()      # nothing pushed
    assert session_members(run["pid"])                                                 # nor stopped
    code, _, err = dfctl(capsys, "stop", run["run_id"], "--grace-s", "5")
    assert code == 0, err
