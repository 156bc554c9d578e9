"""`stop` ends the processes a run started in sessions of their own, not only its group.

Real wandb (offline) starts its service with start_new_session=True
(wandb/sdk/lib/service/service_process.py:116,154): signalling the run's group misses it,
and a stop that returned while it still lived said "nothing left" too early (the rig test
saw the pid of such a process one scan after `dfctl stop` returned). The service ends by
itself once the trainer is gone; a descendant that ignores SIGTERM is killed after the grace.
"""

from __future__ import annotations

import os

import pytest

from controller.playbook import load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.ship.launch import launch_run, stop_run
from controller.store.runstore import RunRecord
from controller.transport.local import LocalTransport
from tests.deploy_support import live_processes_of_run, make_project, ticker_playbook, wait_for

WANDB_PROGRAM = r'''
import argparse, os, signal, subprocess, sys, time
import wandb

ap = argparse.ArgumentParser()
ap.add_argument("--run-dir")
ap.add_argument("--stubborn-child", action="store_true")
a = ap.parse_args()
run = wandb.init(mode="offline", dir=a.run_dir, project="stop-escaped")
if a.stubborn_child:
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                     start_new_session=True)
print("ready", flush=True)
i = 0
while True:
    i += 1
    run.log({"loss": 1.0 / i})
    print("step", i, flush=True)
    time.sleep(0.1)
'''


@pytest.mark.parametrize("stubborn", [False, True], ids=["wandb-service", "sigterm-ignoring-child"])
def test_stop_waits_for_and_ends_what_left_the_runs_session(tmp_path, stubborn):
    root = make_project(tmp_path / "proj", extra_files={"ticker/__main__.py": WANDB_PROGRAM.encode()})
    pb = load_playbook(ticker_playbook(root, args='"--stubborn-child"' if stubborn else ""))
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    run = launch_run(t, pb, workdir, environ={})
    log = os.path.join(run.run_dir, "train.log")
    wait_for(lambda: os.path.exists(log) and "step 3" in open(log, errors="replace").read(), timeout_s=120,
             what="the program's third step after wandb.init")
    escaped = wait_for(lambda: [p for p, sid in live_processes_of_run(run.run_id) if sid != run.pid],
                       timeout_s=30, what="a process of the run in a session of its own")
    assert escaped

    rec = RunRecord(run_id=run.run_id, name=pb.run.name, target_kind="local", target="local",
                    run_dir=run.run_dir, pid=run.pid, release_id=run.release_id, state="running")
    res = stop_run(t, pb.target, rec, grace_s=5)
    assert res["left"] == [], res
    assert live_processes_of_run(run.run_id) == []
    assert res["signals"] == (["SIGTERM", "SIGKILL"] if stubborn else ["SIGTERM"]), res
