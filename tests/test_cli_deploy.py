"""The deploy-area commands end to end on the local target, run in-process through
controller.cli.main (exit codes included): deploy --dry-run/--json, runs, logs, stop, doctor."""

from __future__ import annotations

import json
import os

import pytest

from tests.deploy_support import make_project, session_members, ticker_playbook, wait_for
from tests.deploy_support import dfctl



@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj", git=True)
    monkeypatch.chdir(root)
    return root, ticker_playbook(root)


def test_deploy_runs_logs_stop(project, capsys, monkeypatch):
    root, pb = project
    code, out, _ = dfctl(capsys, "deploy", str(pb), "--dry-run")
    assert code == 0 and "tar -x -f -" in out and "launch" in out and "sha256sum -c" in out
    assert not (root / ".dfctl-local").exists()                      # a dry run changes nothing

    monkeypatch.setenv("WANDB_API_KEY", "cli-secret-123")
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--name", "clirun")
    assert code == 0, err
    doc = json.loads(out)
    run = doc["run"]
    assert run["run_id"].startswith("clirun-") and doc["release"]["transferred_bytes"] > 0
    assert "cli-secret-123" not in out + err

    code, out, _ = dfctl(capsys, "runs", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["run_id"] == run["run_id"] and rows[0]["state"] == "running"
    assert rows[0]["git_commit"] and rows[0]["git_dirty"] is True     # pb.toml is untracked

    wait_for(lambda: os.path.getsize(run["log"]) > 100, what="log output")
    code, out, _ = dfctl(capsys, "logs", "clirun", "--tail", "2")
    assert code == 0 and len(out.splitlines()) == 2 and "[progress] step=" in out

    code, out, err = dfctl(capsys, "stop", "clirun", "--grace-s", "5", "--json")
    assert code == 0, err
    assert json.loads(out)["left"] == [] and session_members(run["pid"]) == []
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert json.loads(out)[0]["state"] == "stopped"

    # logs -f of an ended run prints the rest and returns
    code, out, _ = dfctl(capsys, "logs", run["run_id"], "-f", "--tail", "1")
    assert code == 0 and out.count("\n") >= 1

    # an unchanged redeploy without launch transfers nothing
    code, out, _ = dfctl(capsys, "deploy", str(pb), "--no-launch", "--json")
    assert code == 0 and json.loads(out)["release"]["transferred_bytes"] == 0


def test_bad_input_exit_codes(project, capsys):
    root, pb = project
    code, _, err = dfctl(capsys, "logs", "no-such-run")
    assert code == 2 and "no-such-run" in err
    bad = root / "bad.toml"
    bad.write_text('[target]\nkind = "pct"\nhost = "h"\nvmid = "abc"\n')
    code, _, err = dfctl(capsys, "deploy", str(bad))
    assert code == 2 and "target.vmid: expected an integer" in err and "Traceback" not in err


def test_doctor_local(project, capsys):
    root, pb = project
    code, out, err = dfctl(capsys, "doctor", str(pb), "--json")
    assert code == 0, err
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert checks["python"]["ok"] and checks["torch"]["ok"] and checks["free disk"]["detail"]
    assert checks["nvidia-smi"]["ok"] is not False
