"""Imported runs are first-class: every command reads their files on this machine and shows
the end state the import found (before: `logs` exit 3 "host root@: cannot connect", `runs`
"unknown" plus that SSH error on every call, `watch` "starting", `stop` exit 1).

Through dfctl's main(), in-process (tests/cli_support.py: what each command shows is the
point, not the child's start-up), on a run directory holding a real-shaped OOM log (the
seed fixture) with exit code 1, and a log file of the bundled trainer."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.cli_support import ROOT, dfctl_in_process

DATA = ROOT / "tests" / "data" / "logs"


def _dfctl(*args, env):
    return dfctl_in_process(*args, env=env)


@pytest.fixture
def imported(tmp_path, _dfctl_home):
    env = {"DFCTL_HOME": str(_dfctl_home)}
    run_dir = tmp_path / "oomrun"
    run_dir.mkdir()
    shutil.copy(DATA / "seed_dflash_oom.log", run_dir / "train.log")
    (run_dir / "exit_code").write_text("1\n")
    assert _dfctl("import", str(run_dir), "--name", "oomrun", env=env).returncode == 0
    assert _dfctl("import", str(DATA / "healthy_bundled_trainer.log"), "--name", "healthy", env=env).returncode == 0
    return env, run_dir


def test_logs_reads_the_imported_files_locally(imported):
    env, run_dir = imported
    p = _dfctl("logs", "oomrun", "--tail", "3", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == (run_dir / "train.log").read_text().splitlines()[-3:]
    p = _dfctl("logs", "healthy", "--tail", "2", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == (DATA / "healthy_bundled_trainer.log").read_text().splitlines()[-2:]


def test_runs_shows_the_end_state_the_import_found_and_no_ssh_error(imported):
    env, _ = imported
    p = _dfctl("runs", "--json", env=env)
    assert p.returncode == 0 and p.stderr == ""
    states = {r["name"]: r["state"] for r in json.loads(p.stdout)}
    assert states["oomrun"] == "oom"
    p = _dfctl("runs", env=env)
    assert p.returncode == 0 and "cannot connect" not in p.stderr and "oom" in p.stdout


def test_watch_of_an_imported_run_shows_its_end_and_exits_with_its_verdict(imported):
    env, _ = imported
    p = _dfctl("watch", "oomrun", env=env)
    assert p.returncode == 4, p.stderr                # the OOM the import found
    assert "starting" not in p.stdout
    assert "oomrun oom" in p.stdout and "CRITICAL oom: CUDA OOM on GPU 5" in p.stdout
    doc = json.loads(_dfctl("watch", "oomrun", "--once", "--json", env=env).stdout)
    assert doc["runs"][0]["state"] == "oom" and doc["runs"][0]["process"]["exit_code"] == 1


def test_stop_of_an_imported_run_is_bad_input_with_a_clear_line(imported):
    env, run_dir = imported
    p = _dfctl("stop", "oomrun", env=env)
    assert p.returncode == 2
    assert p.stderr.splitlines()[0].startswith("dfctl: error: run oomrun-")
    assert str(run_dir) in p.stderr and "no process to stop" in p.stderr
