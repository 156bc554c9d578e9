"""Recovery on the rig (real sshd, real LXC CT 200, pct stand-in): the bundled trainer
deployed into the CT with a [recover] playbook, `dfctl watch --recover` as its own process,
and issue 25 item 4's injected faults there: the training process killed with SIGKILL
resumes by itself as a new linked run in the CT, from its checkpoint, with the same
release (`runs` shows the chain); a CUDA OOM line in the run's log is stopped and resumed
with the playbook's declared change; the node's real sshd stopped for less than
[recover.unreachable].window_s acts on nothing; two controllers with separate registries
resume a crash once (the resumed_by marker, written under the deploy lock, decides).

One trainer playbook and one release serve the trainer's tests, the resumable stand-in's
(tests/recover_support.py) the two whose point is the controller -- the link that comes
back, the two controllers (module-scoped: each release pushed once, each test's deploy
transfers nothing and launches its own run)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from tests.deploy_support import dfctl, wait_for
from tests.recover_support import INTERVAL_S, Watcher, resumable_project, trainer_playbook
from tests.test_deploy_rig import PROJECT, live_pids_of_run, target_toml
from tests.test_recover_local import CUDA_OOM_LINE

pytestmark = pytest.mark.rig

UNREACHABLE_WINDOW_S = 8.0
"""[recover.unreachable].window_s of these tests: long enough for sshd to be stopped, seen
down and back on a loaded 2-core machine (measured here: the watch waiting 0.6 s after the
stop, the run read running 1.3 s after it), short enough to wait out."""


NAME = "rig-rec"
"""run.name of the shared playbook (the watch's lines start with it)."""
WORKDIR = f"/workspace/dfctl-recover-{os.getpid()}"
"""The CT's workdir of the shared playbook."""


def _first_step(path: Path) -> int | None:
    if not path.exists():
        return None
    line = path.read_text().split("\n", 1)[0]
    return json.loads(line)["step"] if line.endswith("}") else None


@pytest.fixture(scope="module")
def ct_playbook(rig, tmp_path_factory) -> Path:
    """The trainer's CPU playbook for CT 200 with every policy these tests inject faults
    for, its release pushed once (deploy --no-launch, a registry of its own)."""
    host = rig.hosts[0]
    host.reset()
    d = tmp_path_factory.mktemp("recover-rig")
    pb = trainer_playbook(d / "ct200.toml", f"""[recover]
on = ["crash", "oom", "unreachable"]
backoff_s = 0
[recover.oom]
args = {{ "--token-budget" = "half" }}
[recover.unreachable]
window_s = {UNREACHABLE_WINDOW_S}
""", target=target_toml(rig, host, WORKDIR), name=NAME, run_extra="exclusive = false")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "DFCTL_HOME": str(d / "dfctl-home")}
    r = subprocess.run([sys.executable, "-m", "controller", "deploy", str(pb), "--no-launch"], cwd=PROJECT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return pb


STANDIN_NAME = "res"
"""run.name of the stand-in's playbook (tests/recover_support.py resumable_project)."""


@pytest.fixture(scope="module")
def ct_standin(rig, tmp_path_factory) -> Path:
    """The resumable stand-in's playbook for CT 200 (a workdir of its own), the same
    policies, its release pushed once: for the tests whose point is the controller (a link
    that comes back, two controllers), not the trainer -- no torch start-up to wait for."""
    host = rig.hosts[0]
    root, _ = resumable_project(tmp_path_factory.mktemp("recover-rig-standin") / "proj", recover=f"""[recover]
on = ["crash", "oom", "unreachable"]
backoff_s = 0
[recover.unreachable]
window_s = {UNREACHABLE_WINDOW_S}
""", target=target_toml(rig, host, f"{WORKDIR}-standin"), run_extra="exclusive = false")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "DFCTL_HOME": str(root.parent / "dfctl-home")}
    r = subprocess.run([sys.executable, "-m", "controller", "deploy", "pb.toml", "--no-launch"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return root / "pb.toml"


def _deploy_a_run(playbook: Path, project: Path, host, capsys, monkeypatch):
    """A fresh run of a shared release in CT 200 (its own registry row), deployed from
    `project`; every process of the runs the test started killed after it."""
    monkeypatch.chdir(project)
    code, out, err = dfctl(capsys, "deploy", str(playbook), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    yield run
    runs_dir = host.container_path(host.vmid_running, run["run_dir"]).parent
    for rd in runs_dir.iterdir() if runs_dir.is_dir() else []:
        for pid in live_pids_of_run(rd.name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def deployed(ct_playbook, rig_host, capsys, monkeypatch):
    """A fresh run of the trainer's shared release in CT 200."""
    yield from _deploy_a_run(ct_playbook, PROJECT, rig_host, capsys, monkeypatch)


@pytest.fixture
def deployed_standin(ct_standin, rig_host, capsys, monkeypatch):
    """A fresh run of the stand-in's shared release in CT 200."""
    yield from _deploy_a_run(ct_standin, ct_standin.parent, rig_host, capsys, monkeypatch)


def _program_pid(run_id: str, module: str = "trainer") -> int:
    """The run's python -m MODULE process (seen from the host: the CT's are in its pid table)."""
    flag = b"-m\0" + module.encode() + b"\0"
    found = [p for p in live_pids_of_run(run_id) if flag in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(found) == 1, found
    return found[0]


def _runs_in_ct(host, run: dict) -> set[str]:
    """The run dirs in the shared workdir (earlier tests' runs among them)."""
    return {p.name for p in host.container_path(host.vmid_running, run["run_dir"]).parent.iterdir()}


def test_a_crashed_run_in_a_ct_resumes_by_itself(rig_host, deployed, capsys):
    run, ct = deployed, rig_host.vmid_running
    host_dir = rig_host.container_path(ct, run["run_dir"])
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: list((host_dir / "checkpoints").glob("step-*.pt")), timeout_s=240, what="a checkpoint")
        os.kill(_program_pid(run["run_id"]), signal.SIGKILL)  # seen from the host: the CT's processes are in its pid table
        wait_for(lambda: (host_dir / "exit_code").exists(), timeout_s=60, what="the wrapper's exit code")
        try:
            line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=120, what="the resume")
        except AssertionError:
            raise AssertionError(f"no resume; the watch said {w.lines[-12:]}") from None
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and nxt.target == f"pct {ct} on {rig_host.name}"
        assert (nxt.release_id, nxt.attempt, nxt.workdir) == (run["release_id"], 1, WORKDIR)
        store.close()
        ck = line.split(" from ", 1)[1]
        assert ck.startswith(f"{run['run_dir']}/checkpoints/step-")
        first = wait_for(lambda: _first_step(rig_host.container_path(ct, nxt.run_dir) / "metrics.jsonl"),
                         timeout_s=240, what="the resumed run's first step in the CT")
        assert first == int(Path(ck).name[5:13]) + 1
        assert live_pids_of_run(nxt.run_id)
        code, out, _ = dfctl(capsys, "runs")
        assert f"chain: {run['run_id']} -> this (attempt 1) -> (newest)" in out
    finally:
        w.stop()


def test_a_cuda_oom_line_in_the_ct_is_resumed_with_the_declared_change(rig_host, deployed):
    run, ct = deployed, rig_host.vmid_running
    host_dir = rig_host.container_path(ct, run["run_dir"])
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: _first_step(host_dir / "metrics.jsonl"), timeout_s=240, what="the first step in the CT")
        with open(host_dir / "train.log", "a") as fh:          # the wrapper's log is O_APPEND too
            fh.write(CUDA_OOM_LINE)
        try:
            line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=120, what="the resume")
        except AssertionError:
            raise AssertionError(f"no resume; the watch said {w.lines[-12:]}") from None
        assert f"recover {run['run_id']}: resume: oom: CUDA OOM" in line and "--token-budget half" in line, line
        store = RunStore()
        old, nxt = store.get_run(run["run_id"]), store.successor(run["run_id"])
        store.close()
        assert old.state == "stopped"                   # stopped first: SIGTERM, the trainer saved a checkpoint
        assert nxt is not None and (nxt.release_id, nxt.attempt) == (run["release_id"], 1)
        launched = json.loads((rig_host.container_path(ct, nxt.run_dir) / "launch.json").read_text())
        argv = launched["argv"]
        assert argv[argv.index("--token-budget") + 1] == "1024"
        ck = argv[argv.index("--resume-from") + 1]
        assert ck.startswith(run["run_dir"] + "/checkpoints/step-")
        first = wait_for(lambda: _first_step(rig_host.container_path(ct, nxt.run_dir) / "metrics.jsonl"),
                         timeout_s=240, what="the resumed run's first step in the CT")
        assert first == int(Path(ck).name[5:13]) + 1
        assert live_pids_of_run(nxt.run_id) and not live_pids_of_run(run["run_id"])
    finally:
        w.stop()


def test_the_node_s_sshd_down_for_less_than_the_window_acts_on_nothing(rig_host, deployed_standin):
    run = deployed_standin
    running = rf"{STANDIN_NAME} running step="
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: w.saw(running), timeout_s=240, what="the watch reading the run running")
        trainer, before = _program_pid(run["run_id"], "resumable"), _runs_in_ct(rig_host, run)
        rig_host.stop_sshd()                            # the real sshd, its sessions (the watch's agent) too
        down_s = time.time()
        try:
            waiting = wait_for(lambda: w.saw(rf"recover {run['run_id']}: waiting: unreachable seen"), timeout_s=30,
                               what="the watch waiting out the window")
        finally:
            rig_host.start_sshd()
        back_s = time.time()
        assert f"acting at {UNREACHABLE_WINDOW_S:.0f} s" in waiting, waiting
        wait_for(lambda: w.saw(running, after_s=back_s), timeout_s=UNREACHABLE_WINDOW_S,
                 what="the run read running again")
        assert time.time() - down_s < UNREACHABLE_WINDOW_S, "sshd was not back within the window: the test proves nothing"
        # past the window's end, the watch still ticking: the cleared finding was never acted on
        wait_for(lambda: w.saw(running, after_s=down_s + UNREACHABLE_WINDOW_S + 2 * INTERVAL_S),
                 timeout_s=2 * UNREACHABLE_WINDOW_S, what="a tick after the window's end")
        acted = [ln for ln in w.lines if f"recover {run['run_id']}:" in ln and ": waiting: " not in ln]
        assert acted == [], acted
        store = RunStore()
        assert store.actions(run["run_id"]) == [] and store.successor(run["run_id"]) is None
        store.close()
        assert _runs_in_ct(rig_host, run) == before and run["run_id"] in before   # nothing launched
        assert _program_pid(run["run_id"], "resumable") == trainer   # the same process trained on
    finally:
        w.stop()


def _copy_registry(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def test_two_controllers_with_their_own_registries_resume_a_crash_in_the_ct_once(rig_host, deployed_standin, tmp_path):
    run, ct = deployed_standin, rig_host.vmid_running
    host_dir = rig_host.container_path(ct, run["run_dir"])
    other_home = tmp_path / "controller-b"
    _copy_registry(Path(os.environ["DFCTL_HOME"]) / "registry.sqlite", other_home / "registry.sqlite")
    watchers = [Watcher(run["run_id"]), Watcher(run["run_id"], env={"DFCTL_HOME": str(other_home)})]
    acted = rf"recover {run['run_id']}: (resume|refused): "
    try:
        wait_for(lambda: list((host_dir / "checkpoints").glob("step-*.pt"))
                 and all(w.saw(rf"{STANDIN_NAME} running step=") for w in watchers), timeout_s=240,
                 what="a checkpoint and both watches ticking")
        before = _runs_in_ct(rig_host, run)
        os.kill(_program_pid(run["run_id"], "resumable"), signal.SIGKILL)
        try:
            lines = wait_for(lambda: all(w.saw(acted) for w in watchers) and [w.saw(acted) for w in watchers],
                             timeout_s=120, what="both controllers acting")
        except AssertionError:
            raise AssertionError(f"the watches said {[w.lines[-8:] for w in watchers]}") from None
        kinds = sorted(ln.split(": ", 2)[1] for ln in lines)
        assert kinds == ["refused", "resume"], lines
        launched = _runs_in_ct(rig_host, run) - before
        assert len(launched) == 1, launched                 # one resumed run in the CT, not two
        (new_id,) = launched
        assert (host_dir / "resumed_by").read_text().strip() == new_id
        refused = next(ln for ln in lines if ": refused: " in ln)
        assert f"run {run['run_id']} was already resumed by {new_id}" in refused, refused
        stores = [RunStore(), RunStore(other_home / "registry.sqlite")]
        try:
            successors = [s.successor(run["run_id"]) for s in stores]
            assert sorted(bool(s) for s in successors) == [False, True]
            assert next(s for s in successors if s).run_id == new_id
            assert sum([a["action"] for a in s.actions(run["run_id"])].count("resume") for s in stores) == 1
        finally:
            for s in stores:
                s.close()
        log = rig_host.container_path(ct, f"{WORKDIR}-standin/runs/{new_id}") / "train.log"
        wait_for(lambda: log.exists() and "[progress] step=" in log.read_text(), timeout_s=240,
                 what="the one resumed run's first step")
    finally:
        for w in watchers:
            w.stop()
