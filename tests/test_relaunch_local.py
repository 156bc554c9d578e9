"""ship/relaunch.py on the local target: a resume is a NEW run linked to the previous one
(same release, the previous args plus the declared changes, from the newest complete
checkpoint along the chain); two controllers resuming one run at once: exactly one launches
(the target's deploy lock and the previous run dir's resumed_by marker decide)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.errors import AlreadyResumedError
from controller.remote import launcher
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.ship.relaunch import relaunch, resume_args, without_resume
from controller.store.runstore import RunStore
from controller.transport.local import LocalTransport
from tests.deploy_support import wait_for
from tests.recover_support import checkpoints, deploy_and_launch, kill_group, resumable_project


def test_resume_args_strip_an_old_resume_and_apply_changes():
    prev = ["--run-dir", "{run_dir}", "--token-budget", "64", "--resume-from", "{resume_from}", "--resume"]
    assert without_resume(prev) == ["--run-dir", "{run_dir}", "--token-budget", "64"]
    assert resume_args(prev, {"--token-budget": "half"}) == \
        ["--run-dir", "{run_dir}", "--token-budget", "32", "--resume-from", "{resume_from}"]


def test_the_launcher_finds_the_newest_complete_checkpoint_along_the_chain(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "checkpoints").mkdir(parents=True)
    (a / "checkpoints" / "step-00000005.pt").write_text("5")
    (a / "checkpoints" / "step-00000010.pt").write_text("10")
    (a / "checkpoints" / "step-00000015.pt.tmp").write_text("partial")    # a killed save never counts
    assert launcher.newest_checkpoint(str(a)) == str(a / "checkpoints" / "step-00000010.pt")
    (a / "checkpoints" / "latest").write_text("step-00000005.pt\n")
    assert launcher.newest_checkpoint(str(a)) == str(a / "checkpoints" / "step-00000005.pt")
    spec = {"args": ["--x", "1", "--resume-from", "{resume_from}"], "resume_from_dirs": [str(b), str(a)]}
    assert launcher._resume_args(spec) == (["--x", "1", "--resume-from", str(a / "checkpoints" / "step-00000005.pt")],
                                           str(a / "checkpoints" / "step-00000005.pt"))
    assert launcher._resume_args({**spec, "resume_from_dirs": [str(b)]}) == (["--x", "1"], None)   # fresh start


def test_resume_is_a_new_linked_run_with_the_same_release(tmp_path):
    root, pb = resumable_project(tmp_path / "proj")
    store = RunStore()
    first = deploy_and_launch(root, pb, store)
    wait_for(lambda: len(checkpoints(first.run_dir)) >= 2, timeout_s=60, what="two checkpoints")
    kill_group(first)
    saved = checkpoints(first.run_dir)[-1]
    # a later deploy moves `current`: the resume still runs the previous run's release
    (root / "resumable" / "__init__.py").write_text("VERSION = 2\n")
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    assert deploy_bundle(t, workdir, build_bundle(root, pb.bundle)).release_id != first.release_id

    prev = store.get_run(first.run_id)
    run = relaunch(store, t, prev, {"--token-budget": "half"})
    assert run.run_id != first.run_id and run.release_id == first.release_id
    assert run.info["resumed_from"] == os.path.join(first.run_dir, "checkpoints", saved)
    argv = run.info["argv"]
    assert argv[argv.index("--token-budget") + 1] == "32"
    assert argv[argv.index("--resume-from") + 1] == run.info["resumed_from"]
    log = Path(run.run_dir) / "train.log"
    step = int(saved[5:13])
    wait_for(lambda: log.exists() and f"[progress] step={step + 1} " in log.read_text(), timeout_s=60,
             what="the resumed run's first step")
    text = log.read_text()
    assert f"step={step}\n" in text and "token_budget=32" in text
    assert "[progress] step=1 " not in text                      # continued, not started over
    rec = store.get_run(run.run_id)
    assert (rec.previous_run_id, rec.attempt, rec.release_id) == (first.run_id, 1, first.release_id)
    assert [r.run_id for r in store.chain(first.run_id)] == [first.run_id, run.run_id]
    assert store.successor(first.run_id).run_id == run.run_id
    assert (Path(first.run_dir) / "resumed_by").read_text().strip() == run.run_id
    with pytest.raises(AlreadyResumedError, match="already resumed by " + run.run_id):
        relaunch(store, t, prev, {})
    # the resumed run's registry args carry the change, so a second resume halves again
    assert json.dumps(rec.playbook["run"]["args"]).count('"32"') == 1
    os.killpg(run.pid, 9)
    store.close()


# Two controllers, each with ITS OWN registry copy (so neither sees the other's new row):
# both decided to resume; both wait at a barrier just before the launch exec; let go together.
RACE = r'''
import os, sys, time, json
os.environ["DFCTL_HOME"] = sys.argv[3]
barrier, tag, run_id = sys.argv[1], sys.argv[2], sys.argv[4]
import controller.ship.launch as launch
real = launch.launch_run
def gated(*a, **k):
    open(os.path.join(barrier, "ready-" + tag), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.01)
    return real(*a, **k)
launch.launch_run = gated
from controller.errors import AlreadyResumedError
from controller.ship.relaunch import relaunch
from controller.store.runstore import RunStore
from controller.transport.local import LocalTransport
store = RunStore()
try:
    run = relaunch(store, LocalTransport(), store.get_run(run_id), {})
    print(json.dumps({"launched": run.run_id, "pid": run.pid}))
except AlreadyResumedError as exc:
    print(json.dumps({"refused": exc.message}))
'''


def test_two_controllers_never_resume_one_run_twice(tmp_path, _dfctl_home):
    root, pb = resumable_project(tmp_path / "proj")
    store = RunStore()
    first = deploy_and_launch(root, pb, store)
    wait_for(lambda: checkpoints(first.run_dir), timeout_s=60, what="a checkpoint")
    kill_group(first)
    store.close()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    homes = []
    for i in range(2):
        home = tmp_path / f"home{i}"
        home.mkdir()
        shutil.copy(Path(_dfctl_home) / "registry.sqlite", home / "registry.sqlite")
        homes.append(home)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    kids = [subprocess.Popen([sys.executable, "-c", RACE, str(barrier), str(i), str(homes[i]), first.run_id],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        wait_for(lambda: len(list(barrier.glob("ready-*"))) == 2 or any(k.poll() is not None for k in kids),
                 timeout_s=60, what="both controllers at the launch")
        (barrier / "go").write_text("")
        outs = [k.communicate(timeout=60) for k in kids]
    finally:
        for k in kids:
            if k.poll() is None:
                k.kill()
    docs = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    launched = [d for d in docs if "launched" in d]
    refused = [d for d in docs if "refused" in d]
    assert len(launched) == 1 and len(refused) == 1, (docs, [e[-2000:] for _, e in outs])
    assert "already resumed by " + launched[0]["launched"] in refused[0]["refused"]
    runs_dir = Path(first.run_dir).parent
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted([first.run_id, launched[0]["launched"]])
    os.killpg(launched[0]["pid"], 9)


def test_runs_list_shows_the_chain_under_a_resumed_run():
    from controller.view.runs_list import render_runs

    rows = [{"run_id": "r-2", "state": "running", "previous_run_id": "r-1", "attempt": 1, "next_run_id": None},
            {"run_id": "r-1", "state": "failed", "previous_run_id": None, "attempt": 0, "next_run_id": "r-2"},
            {"run_id": "other", "state": "finished"}]
    text = render_runs(rows, 200, now_s=0.0)
    assert "  chain: r-1 -> this (attempt 1) -> (newest)" in text
    assert "  chain: (first) -> this (attempt 0) -> r-2" in text
    assert text.count("chain:") == 2


def test_an_older_registry_gains_the_chain_columns_and_the_actions_table(tmp_path):
    import sqlite3

    from controller.store.runstore import RunRecord

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, name TEXT, target_kind TEXT, target TEXT, host TEXT, "
               "vmid INTEGER, workdir TEXT, run_dir TEXT, log_path TEXT, pid INTEGER, release_id TEXT, "
               "git_commit TEXT, git_dirty INTEGER, playbook TEXT, playbook_path TEXT, started_s REAL, "
               "wandb_run_id TEXT, state TEXT, exit_code INTEGER, ended_s REAL, origin TEXT, pid_start_ticks INTEGER, "
               "job_id TEXT, node_rank INTEGER)")
    db.execute("INSERT INTO runs (run_id, name, target_kind, target, playbook, state, started_s) "
               "VALUES ('old-1', 'old', 'local', 'local', '{}', 'failed', 1.0)")
    db.commit()
    db.close()
    store = RunStore(path)
    old = store.get_run("old-1")
    assert (old.previous_run_id, old.attempt) == (None, 0)
    store.add_run(RunRecord(run_id="new-1", name="old", target_kind="local", target="local", started_s=2.0,
                            previous_run_id="old-1", attempt=1))
    assert [r.run_id for r in store.chain("new-1")] == ["old-1", "new-1"] == [r.run_id for r in store.chain("old-1")]
    store.add_action("old-1", 3.0, "resume", "crash: ...", "new-1")
    assert store.actions("old-1") == [{"run_id": "old-1", "time_s": 3.0, "action": "resume", "reason": "crash: ...",
                                       "new_run_id": "new-1"}]
    store.close()
