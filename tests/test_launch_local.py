"""Launch on the local target: detached + unbuffered, run-dir files, no overwrite, secrets
only via a 0600 file (never argv or the registry), stop leaves nothing behind."""

from __future__ import annotations

import json
import os
import time

from controller.playbook import load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.ship.launch import launch_run, record_run, runs_status, state_of, stop_run
from controller.store.runstore import RunRecord, RunStore
from controller.transport.local import LocalTransport
from tests.deploy_support import all_cmdlines, make_project, session_members, ticker_playbook, wait_for

SECRET = "wandb-secret-" + os.urandom(6).hex()


def _deployed(tmp_path, **pb_kw):
    root = make_project(tmp_path / "proj", git=True)
    pb = load_playbook(ticker_playbook(root, **pb_kw))
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    return root, pb, t, workdir


def test_launch_detached_log_grows_secret_hidden_stop(tmp_path):
    root, pb, t, workdir = _deployed(tmp_path, env='{ WANDB_MODE = "offline", HF_TOKEN = "hf-secret-value" }')
    t0 = time.monotonic()
    run = launch_run(t, pb, workdir, environ={"WANDB_API_KEY": SECRET})
    assert time.monotonic() - t0 < 10                       # the launching exec returned at once
    log = os.path.join(run.run_dir, "train.log")
    first = wait_for(lambda: os.path.getsize(log) if os.path.exists(log) and os.path.getsize(log) > 0 else 0,
                     what="first log bytes")
    wait_for(lambda: os.path.getsize(log) > first + 200, what="log growth after launch returned")
    text = open(log).read()
    assert f"cwd={run.run_dir} run_dir={run.run_dir} has_key=True" in text

    # layout the watcher reads
    assert run.run_id.startswith("tick-") and run.run_id.endswith("Z")
    assert open(os.path.join(run.run_dir, "pid")).read().strip() == str(run.pid)
    info = json.load(open(os.path.join(run.run_dir, "launch.json")))
    assert info["release_id"] == run.release_id and info["argv"][1:4] == ["-u", "-m", "ticker"]
    assert "WANDB_API_KEY" in info["env_names"] and "HF_TOKEN" in info["env_names"]
    assert wait_for(lambda: not os.path.exists(os.path.join(run.run_dir, "env")), what="env file deleted")
    assert os.getpgid(run.pid) == run.pid and os.getsid(run.pid) == run.pid
    wrapper_env = open(f"/proc/{run.pid}/environ", "rb").read()
    assert f"DFCTL_RUN_ID={run.run_id}".encode() in wrapper_env and SECRET.encode() not in wrapper_env
    assert run.run_dir.encode() in open(f"/proc/{run.pid}/cmdline", "rb").read()

    # secrets: never in any cmdline, launch.json, or the registry
    store = RunStore()
    record_run(store, run, pb, workdir=workdir, git_commit="abc", git_dirty=False)
    store.close()
    for blob in all_cmdlines():
        assert SECRET.encode() not in blob and b"hf-secret-value" not in blob
    for path in (os.path.join(run.run_dir, "launch.json"), str(store.path)):
        data = open(path, "rb").read()
        assert SECRET.encode() not in data and b"hf-secret-value" not in data
    assert RunStore().get_run(run.run_id).playbook["run"]["env"]["HF_TOKEN"] == "<redacted>"

    # a second launch in the same second gets its own directory
    run2 = launch_run(t, pb, workdir, environ={})
    assert run2.run_dir != run.run_dir

    for r in (run, run2):
        rec = RunStore().get_run(run.run_id)
        rec.run_dir, rec.pid = r.run_dir, r.pid
        res = stop_run(t, pb.target, rec, grace_s=5)
        assert res["signals"] == ["SIGTERM"] and res["left"] == [] and res["exit_code"] == 143
        assert session_members(r.pid) == []


def test_exit_code_recorded_and_state(tmp_path):
    root, pb, t, workdir = _deployed(tmp_path, args='"--steps", "3", "--exit-code", "7"')
    run = launch_run(t, pb, workdir, environ={})
    code_file = os.path.join(run.run_dir, "exit_code")
    wait_for(lambda: os.path.exists(code_file), what="exit_code file")
    assert open(code_file).read().strip() == "7"
    rec = RunRecord(run.run_id, "tick", "local", "local", run_dir=run.run_dir, pid=run.pid)
    st = wait_for(lambda: (s := runs_status(t, pb.target, [rec]))[0]["alive_pids"] == [] and s, what="wrapper gone")
    assert state_of(st[0], "running") == ("failed", 7)
    assert "done" in open(os.path.join(run.run_dir, "train.log")).read()


def test_one_target_from_a_stored_row_whatever_the_row_holds():
    """runstore.target_of is the one converter: the watch (its old alias included) and
    stop/runs/logs rebuild the same TargetConfig from a row, with the row's columns
    filling what the stored playbook lacks."""
    from controller import watch
    from controller.ship.launch import target_identity
    from controller.store.runstore import target_of

    full = RunRecord(run_id="a", name="a", target_kind="pct", target="pct 200 on n1", host="n1", vmid=200,
                     workdir="/ws", playbook={"target": {"kind": "pct", "host": "n1", "vmid": 200, "port": 2222,
                                                         "workdir": "/ws", "python": "/venv/bin/python"}})
    bare = RunRecord(run_id="b", name="b", target_kind="pct", target="pct 200 on n1", host="n1", vmid=200,
                     workdir="/ws", playbook={})
    partial = RunRecord(run_id="c", name="c", target_kind="ssh", target="n2", host="n2", workdir="/w2",
                        playbook={"target": {"kind": "ssh", "user": "ops"}})
    t = target_of(full)
    assert (t.kind, t.host, t.vmid, t.port, t.python, t.workdir) == ("pct", "n1", 200, 2222, "/venv/bin/python", "/ws")
    b = target_of(bare)
    assert (b.kind, b.host, b.vmid, b.workdir) == ("pct", "n1", 200, "/ws")
    p = target_of(partial)
    assert (p.kind, p.host, p.user, p.workdir) == ("ssh", "n2", "ops", "/w2")     # host filled from the row
    assert target_identity(b) == ("pct", "n1", None, None, 200)
    for rec in (full, bare, partial):
        assert watch.target_config_from(rec) == target_of(rec)


def test_the_locked_launch_check_sees_runs_of_the_workdir_and_attached_runs(tmp_path):
    """The target's own check under the deploy lock (issue 12 item 3) counts an attached run
    the registry knows (by pid + start time: a reused pid is not it) and refuses the launch
    before any run dir is made. (Live run dirs of the workdir: the racing-deploy tests.)"""
    import subprocess
    import sys

    from controller.remote import launcher

    workdir = tmp_path / "wd"
    (workdir / "releases" / "r1").mkdir(parents=True)
    os.symlink("releases/r1", workdir / "current")
    hand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = launcher._start_ticks(hand.pid)
        spec = {"workdir": str(workdir), "run_id": "new-1", "name": "new", "python": sys.executable, "module": "x",
                "args": [], "env": {}, "secrets": {}, "path": "/usr/bin:/bin",
                "exclusive": {"runs": [{"run_id": "hand-1", "run_dir": "", "pid": hand.pid, "attached": True,
                                        "start_ticks": ticks}], "lock_wait_s": 2, "owner": "test"}}
        reply = launcher.launch(spec)
        assert reply["conflict"] == [{"run_id": "hand-1", "run_dir": "", "pid": hand.pid}], reply
        assert not (workdir / "runs" / "new-1").exists()
        stale = {**spec, "exclusive": {**spec["exclusive"], "runs": [{**spec["exclusive"]["runs"][0],
                                                                       "start_ticks": ticks + 1}]}}
        # a pid now held by another process (start time differs) is no live run of ours
        assert launcher._live_runs(str(workdir), stale["exclusive"]["runs"]) == []
        assert (workdir / ".deploy.owner").read_text() == "test\n"
    finally:
        hand.kill()
        hand.wait()
