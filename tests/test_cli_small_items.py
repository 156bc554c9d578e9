"""Issue 13's small defects: a bad DFCTL_HOME (through the real `dfctl` process: its start-up
is where that one would break), and through dfctl's main() in-process (tests/cli_support.py:
the command's behaviour is the point, not the child's start-up) `logs --tail -5`, `--notify
/nonexistent`, one --name rule for import and deploy, `stop --grace-s` defaulting to the run's
run.stop_grace_s, and the piped watch's status cadence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from controller.store.runstore import RunRecord, RunStore
from tests.cli_support import dfctl_in_process
from tests.test_probe import launch_local
from tests.test_watch import PROGRESS_PROGRAM, ROOT, record_for


def dfctl_process(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def dfctl(*args: str, env: dict) -> subprocess.CompletedProcess:
    return dfctl_in_process(*args, env=env)


def _one_error(p: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = p.stderr.splitlines()
    assert p.returncode == code, p.stderr
    assert lines and lines[0].startswith("dfctl: error: ") and "Traceback" not in p.stderr, p.stderr
    assert all(ln.startswith("dfctl: ") for ln in lines), p.stderr
    return lines[0]


def test_bad_dfctl_home_is_one_line_exit_2(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for home, why in ((a_file, "is not a directory"), ("/proc/nope", "No such file or directory")):
        line = _one_error(dfctl_process("runs", env={"DFCTL_HOME": str(home)}))
        assert line.startswith(f"dfctl: error: DFCTL_HOME={home}: ") and why in line


def test_logs_negative_tail_and_notify_missing_command_are_refused(tmp_path, _dfctl_home):
    env = {"DFCTL_HOME": str(_dfctl_home)}
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM.replace('"100000"', '"5"'))
    try:
        RunStore().add_run(record_for(run, "small"))
        line = _one_error(dfctl("logs", "small", "--tail", "-5", env=env))
        assert "--tail" in line and "greater than or equal to 0" in line
        t0 = time.monotonic()
        line = _one_error(dfctl("watch", "small", "--notify", "/nonexistent --flag", env=env))
        assert line == "dfctl: error: --notify /nonexistent: not an executable file"
        assert time.monotonic() - t0 < 30
        assert "not found on PATH" in _one_error(dfctl("watch", "small", "--notify", "no-such-notifier-x", env=env))
        assert "No closing quotation" in _one_error(dfctl("watch", "small", "--notify", "notify-send 'x", env=env))
    finally:
        run.stop()


def test_import_and_deploy_share_one_name_rule_and_wording(tmp_path, _dfctl_home):
    env = {"DFCTL_HOME": str(_dfctl_home)}
    log = tmp_path / "run.log"
    log.write_text("[progress] step=1 loss=2.0 tok_per_s=10.0\n")
    pb = tmp_path / "pb.toml"
    pb.write_text('[target]\nkind = "local"\n[run]\nname = "ok"\nmodule = "ticker"\n')
    for bad in ("bad name", "-lead", "a" * 65, "x@y"):
        imported = _one_error(dfctl("import", str(log), "--name", bad, env=env))
        deployed = _one_error(dfctl("deploy", str(pb), "--name", bad, "--dry-run", env=env))
        assert imported == deployed, (imported, deployed)
        assert "expected letters, digits, '.', '_' or '-'" in imported
    assert dfctl("import", str(log), "--name", "good.name_1-x", env=env).returncode == 0


IGNORES_SIGTERM = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("started", flush=True)
    while True:
        time.sleep(0.1)
"""


def test_stop_grace_defaults_to_the_runs_stop_grace_s(tmp_path, _dfctl_home):
    """Before: --grace-s defaulted to 10 s whatever run.stop_grace_s said (60 by default)."""
    env = {"DFCTL_HOME": str(_dfctl_home)}
    run = launch_local(tmp_path / "r", IGNORES_SIGTERM)
    try:
        rec = record_for(run, "graceful")
        rec = RunRecord(**{**rec.__dict__, "pid": run.pid(), "playbook": {**rec.playbook, "run": {"stop_grace_s": 1.5}}})
        RunStore().add_run(rec)
        t0 = time.monotonic()
        p = dfctl("stop", "graceful", "--json", env=env)
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert "SIGKILL" in " ".join(doc["signals"])       # it ignored SIGTERM for the whole grace
        assert 1.5 <= took < 9, took                          # 1.5 s of grace, not the old 10 s
    finally:
        run.stop()


def test_piped_watch_prints_status_at_its_interval_and_a_finished_run_once(tmp_path, _dfctl_home):
    env = {"DFCTL_HOME": str(_dfctl_home)}
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM.replace('"100000"', '"40"'))
    try:
        RunStore().add_run(record_for(run, "piped"))
        p = dfctl("watch", "piped", "--interval", "0.3", env=env)
        assert p.returncode == 0, p.stderr
        status = [ln for ln in p.stdout.splitlines() if ln.startswith("[") and " piped " in ln]
        assert len(status) >= 4, p.stdout                     # ~4 s of run at 0.3 s: not one per 30 s
        assert len([ln for ln in status if " piped finished " in ln]) == 1, p.stdout
    finally:
        run.stop()


def test_run_argument_defaults_to_the_one_live_run(tmp_path, _dfctl_home):
    env = {"DFCTL_HOME": str(_dfctl_home)}
    a = launch_local(tmp_path / "a", PROGRESS_PROGRAM)
    b = launch_local(tmp_path / "b", PROGRESS_PROGRAM)
    try:
        store = RunStore()
        older = record_for(a, "older")
        store.add_run(RunRecord(**{**older.__dict__, "started_s": 1.0, "state": "finished"}))
        live = record_for(b, "live")
        store.add_run(RunRecord(**{**live.__dict__, "pid": b.pid(), "state": "running"}))
        doc = json.loads(dfctl("watch", "--once", "--json", env=env).stdout)
        assert [r["run_id"] for r in doc["runs"]] == ["live"]
        p = dfctl("logs", "--tail", "1", env=env)
        assert p.returncode == 0 and p.stdout.startswith("[progress] step="), p.stderr
        line = _one_error(dfctl("stop", env=env))               # no terminal to ask on: refused
        assert "would stop live" in line
        assert b.proc.poll() is None
        p = dfctl("stop", "--yes", "--json", env=env)
        assert p.returncode == 0 and json.loads(p.stdout)["run_id"] == "live"
        store.add_run(RunRecord(**{**older.__dict__, "run_id": "older-2", "state": "running"}))
        store.add_run(RunRecord(**{**older.__dict__, "run_id": "older-3", "state": "running"}))
        line = _one_error(dfctl("watch", "--once", env=env))
        assert "2 runs are live" in line and "older-2" in line and "older-3" in line
    finally:
        a.stop()
        b.stop()
