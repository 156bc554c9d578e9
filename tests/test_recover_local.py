"""Failure injection on the local target (issue 25 item 4): `dfctl watch --recover` with
the real trainer on CPU -- kill -9 mid-training is resumed within a tick plus start-up and
the resumed run's steps continue from the checkpoint; a CUDA OOM line in the log is resumed
with the playbook's declared change; a link that fails acts only once recover's window has
passed; two controllers watching one crashed run resume it once."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from controller.act.executor import Recoverer
from controller.errors import UnreachableError
from controller.store.runstore import RunStore
from controller.transport.local import LocalTransport
from controller.watch import Watch
from tests.deploy_support import dfctl, wait_for
from tests.recover_support import (
    INTERVAL_S,
    Watcher,
    checkpoints,
    deploy_and_launch,
    first_progress,
    kill_every_run_beside,
    kill_trainer,
    resumable_project,
    trainer_project,
    watch_until,
)

ROOT = Path(__file__).resolve().parents[1]

# The wording torch's caching allocator prints (the form controller/judge/rules.py
# _OOM_NEW, lines 74-76, reads), as the exception line a training script's traceback ends with.
CUDA_OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                 "capacity of 79.19 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process "
                 "has 77.93 GiB memory in use.\n")


def _deploy(capsys, pb: Path) -> dict:
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    return json.loads(out)["run"]


@pytest.fixture
def in_project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    monkeypatch.chdir(tmp_path)
    return root


def test_kill_9_is_resumed_within_a_tick_and_continues_from_the_checkpoint(in_project, capsys):
    pb = trainer_project(in_project, '[recover]\non = ["crash", "oom"]\nbackoff_s = 0\nmax_attempts = 2\n')
    os.chdir(in_project)
    run = _deploy(capsys, pb)
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: checkpoints(run["run_dir"]), timeout_s=240, what="the first checkpoint")
        # kill -9 of the trainer (its wrapper records 137). Not of the whole group here: this
        # machine's pid 1 reaps orphans late, and a wrapper left a zombie has no exit code yet
        os.kill(json.loads((Path(run["run_dir"]) / "launch.json").read_text())["trainer_pid"], signal.SIGKILL)
        died_s = time.time()
        saved = checkpoints(run["run_dir"])[-1]
        line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=60,
                        what="the resume action")
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and nxt.attempt == 1 and nxt.release_id == run["release_id"]
        acted_s = store.actions(run["run_id"])[-1]["time_s"]
        # within one tick of the death (plus the probe's round trip and the launch exec)
        assert acted_s - died_s < 2 * INTERVAL_S + 3.0, (acted_s - died_s, line)
        first = wait_for(lambda: first_progress(nxt.run_dir), timeout_s=240, what="the resumed run's first step")
        step = int(saved[5:13])
        assert first[0] == step + 1                       # continues from the checkpoint, not from 1
        assert f"from {run['run_dir']}/checkpoints/" in line
        launched = json.loads((Path(nxt.run_dir) / "launch.json").read_text())
        assert launched["argv"][launched["argv"].index("--resume-from") + 1].startswith(run["run_dir"])
        # runs shows the chain; compare-runs --chain expands it
        code, out, _ = dfctl(capsys, "runs", "--json")
        rows = {r["run_id"]: r for r in json.loads(out)}
        assert rows[run["run_id"]]["next_run_id"] == nxt.run_id
        assert rows[nxt.run_id]["previous_run_id"] == run["run_id"] and rows[nxt.run_id]["attempt"] == 1
        code, out, err = dfctl(capsys, "runs")
        assert f"chain: {run['run_id']} -> this (attempt 1) -> (newest)" in out
        wait_for(lambda: first_progress(nxt.run_dir) and w.saw(r"rec running step="), timeout_s=60,
                 what="the watch following the resumed run")
        code, out, err = dfctl(capsys, "compare-runs", "--chain", run["run_id"], "--json")
        assert code in (0, 4, 5), err
        got = [(r["label"], r["source"]) for r in json.loads(out)["runs"]]
        assert len(got) == 2 and all(run_id in " ".join(g) for run_id, g in zip((run["run_id"], nxt.run_id), got)), got
        store.close()
    finally:
        w.stop()
        kill_every_run_beside(run["run_dir"])


def test_a_cuda_oom_line_is_resumed_with_the_declared_change(in_project, capsys):
    pb = trainer_project(in_project, '[recover]\non = ["oom"]\nbackoff_s = 0\n'
                                     '[recover.oom]\nargs = { "--token-budget" = "half" }\n')
    os.chdir(in_project)
    run = _deploy(capsys, pb)
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: first_progress(run["run_dir"]), timeout_s=240, what="the first step")
        with open(Path(run["run_dir"]) / "train.log", "a") as fh:      # the wrapper's log is O_APPEND too
            fh.write(CUDA_OOM_LINE)
        line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=120,
                        what="the resume action")
        assert "--token-budget half" in line
        store = RunStore()
        old, nxt = store.get_run(run["run_id"]), store.successor(run["run_id"])
        assert old.state == "stopped"                     # stopped first: SIGTERM, the trainer saved a checkpoint
        launched = json.loads((Path(nxt.run_dir) / "launch.json").read_text())
        argv = launched["argv"]
        assert argv[argv.index("--token-budget") + 1] == "1024"
        ck = argv[argv.index("--resume-from") + 1]
        assert ck.startswith(run["run_dir"] + "/checkpoints/step-")
        first = wait_for(lambda: first_progress(nxt.run_dir), timeout_s=240, what="the resumed run's first step")
        assert first[0] == int(Path(ck).name[5:13]) + 1
        store.close()
    finally:
        w.stop()
        kill_every_run_beside(run["run_dir"])


class LinkTransport(LocalTransport):
    """A stand-in for a network link that goes down (nothing here can cut a real one for a
    local target): while `down` is set every command fails as a lost SSH connection does."""

    down = threading.Event()

    def run(self, argv, *, stdin=None, timeout_s=None):
        if self.down.is_set():
            raise UnreachableError("local: connection lost (link down)")
        return super().run(argv, stdin=stdin, timeout_s=timeout_s)


def test_link_down_acts_only_after_the_window(tmp_path):
    root, pb = resumable_project(tmp_path / "proj", recover='[recover]\non = ["unreachable"]\nbackoff_s = 0\n'
                                                          '[recover.unreachable]\nwindow_s = 30\n')
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    now = [time.time()]
    clock = lambda: now[0]                                                 # noqa: E731 - the test's clock
    link = LinkTransport()
    said: list[str] = []
    w = Watch([store.get_run(run.run_id)], store, transport_for=lambda t: link, clock=clock, persistent=False,
              interval_s=1.0)
    rec = Recoverer(store, lambda line, doc: said.append(line), transport_for=lambda r: link, clock=clock)
    try:
        w.tick()
        rec.after_tick(w)
        assert w.states[0].state == "running" and not said
        link.down.set()
        down_s = now[0]
        for dt in (1.0, 10.0, 29.0):                                        # inside the window: nothing is done
            now[0] = down_s + dt
            w.tick()
            rec.after_tick(w)
            assert w.states[0].state == "unreachable"
            assert store.actions(run.run_id) == [] and store.successor(run.run_id) is None
            assert rec.pending
        assert [s for s in said if "waiting" in s] and all("waiting" in s for s in said)
        assert os.path.exists(f"/proc/{run.pid}") and sorted(os.listdir(Path(run.run_dir).parent)) == [run.run_id]
        now[0] = down_s + 31.0                                              # the window has passed: it acts
        w.tick()
        rec.after_tick(w)
        acts = store.actions(run.run_id)
        assert [a["action"] for a in acts] == ["failed"] and "connection lost" in acts[0]["reason"]
        for dt in (42.0, 53.0):                                             # tried again, the same failure not re-said
            now[0] = down_s + dt
            w.tick()
            rec.after_tick(w)
        assert [a["action"] for a in store.actions(run.run_id)] == ["failed"]
        link.down.clear()                                                   # back: the finding clears, no resume
        for _ in range(20):                                                 # (past the poller's back-off)
            now[0] += 15.0
            w.tick()
            rec.after_tick(w)
            if w.states[0].state == "running":
                break
        assert w.states[0].state == "running" and store.successor(run.run_id) is None
        assert not rec.pending
        assert [a["action"] for a in store.actions(run.run_id)] == ["failed"]
    finally:
        link.down.clear()
        w.close()
        os.killpg(run.pid, signal.SIGKILL)
        store.close()


def test_two_watching_controllers_resume_a_crashed_run_once(tmp_path, capsys):
    root, pb = resumable_project(tmp_path / "proj", recover='[recover]\non = ["crash", "oom"]\nbackoff_s = 0\n')
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    store.close()
    watchers = [Watcher(run.run_id), Watcher(run.run_id, "--json")]     # lines, and JSON lines
    resumed = rf'recover {run.run_id}: resume: |^{{"recover": {{"run_id": "{run.run_id}", "action": "resume"'
    try:
        wait_for(lambda: checkpoints(run.run_dir) and all(w.saw(r"running") for w in watchers), timeout_s=60,
                 what="a checkpoint and both watches ticking")
        kill_trainer(run)
        wait_for(lambda: any(w.saw(resumed) for w in watchers), timeout_s=60, what="a resume")
        store = RunStore()
        nxt = store.successor(run.run_id)
        wait_for(lambda: first_progress(nxt.run_dir) or (Path(nxt.run_dir) / "train.log").exists(), timeout_s=30,
                 what="the resumed run started")
        runs_dir = Path(run.run_dir).parent
        assert sorted(p.name for p in runs_dir.iterdir()) == sorted([run.run_id, nxt.run_id])
        assert [a["action"] for a in store.actions(run.run_id)].count("resume") == 1
        assert sum(1 for w in watchers if w.saw(resumed)) == 1
        docs = [json.loads(x)["recover"] for x in watchers[1].lines if x.startswith('{"recover"')]
        assert all(set(d) == {"run_id", "action", "reason", "new_run_id", "time_s"} for d in docs), docs
        assert [d["new_run_id"] for d in docs if d["action"] == "resume"] in ([], [nxt.run_id])
        store.close()
    finally:
        for w in watchers:
            w.stop()
        kill_every_run_beside(run.run_dir)


def test_a_hang_is_stopped_only_after_its_stack_dump_is_saved(tmp_path):
    root, pb = resumable_project(tmp_path / "proj", args='"--steps", "100000", "--hang-after", "8"',
                                 recover='hang_min_s = 1\nhang_factor = 1\n[recover]\non = ["hang"]\nbackoff_s = 0\n'
                                         '[recover.hang]\naction = "stop"\n')
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    said: list[str] = []
    w = Watch([store.get_run(run.run_id)], store, interval_s=0.5)
    rec = Recoverer(store, lambda line, doc: said.append(line))
    try:
        acts = watch_until(w, rec, lambda: [a for a in store.actions(run.run_id) if a["action"] == "stop"], 90,
                            "the stop of the hung run")
        hang = next(f for f in w.states[0].findings if f.kind == "hang")
        dumps = store.stacks(run.run_id)
        assert dumps and acts[0]["time_s"] >= dumps[0][0]      # the dump was saved before the stop
        assert any(line.startswith("stacks: ") and "resumable/__main__.py" in line for line in hang.evidence)
        waited = [i for i, line in enumerate(said) if "waiting for its stack dump" in line]
        stopped = [i for i, line in enumerate(said) if f"recover {run.run_id}: stop: hang" in line]
        assert waited and stopped and waited[0] < stopped[0], said
        assert store.get_run(run.run_id).state == "stopped" and store.successor(run.run_id) is None
        assert "dfctl watch --recover" in (Path(run.run_dir) / "stop_request").read_text()
    finally:
        w.close()
        store.close()
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_after_max_attempts_it_gives_up(tmp_path):
    root, pb = resumable_project(tmp_path / "proj", recover='[recover]\non = ["crash", "oom"]\nbackoff_s = 0\n'
                                                          'max_attempts = 1\n')
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    said: list[str] = []
    w = Watch([store.get_run(run.run_id)], store, interval_s=0.5)
    rec = Recoverer(store, lambda line, doc: said.append(line))
    try:
        watch_until(w, rec, lambda: checkpoints(run.run_dir), 60, "a checkpoint")
        kill_trainer(run)
        nxt = watch_until(w, rec, lambda: store.successor(run.run_id), 60, "the resume")
        from controller.ship.launch import LaunchedRun

        launched = json.loads(_wait_file(Path(nxt.run_dir) / "launch.json"))
        watch_until(w, rec, lambda: checkpoints(nxt.run_dir), 60, "the resumed run's checkpoint")
        kill_trainer(LaunchedRun(nxt.run_id, nxt.run_dir, launched["pid"], nxt.release_id or "", 0.0, launched))
        gave_up = watch_until(w, rec, lambda: [a for a in store.actions(nxt.run_id) if a["action"] == "give_up"],
                               60, "give_up")
        assert "recover.max_attempts = 1" in gave_up[0]["reason"]
        assert store.successor(nxt.run_id) is None and [r.attempt for r in store.chain(run.run_id)] == [0, 1]
        assert any(f"recover {nxt.run_id}: give_up: " in line for line in said)
        assert rec.exit_code(w) == 4                          # the chain's newest run failed
    finally:
        w.close()
        store.close()


def _wait_file(p: Path) -> str:
    return wait_for(lambda: p.read_text() if p.exists() else "", what=str(p))


def test_a_resume_that_failed_after_its_stop_is_tried_again(tmp_path):
    """An OOM line in a live run: the run is stopped for the resume, whose launch then fails
    (its release was moved away); the run now reads `stopped`, and the resume is still done
    once the release is back -- no row of the failed launch claims the run was resumed."""
    root, pb = resumable_project(tmp_path / "proj", recover='[recover]\non = ["oom"]\nbackoff_s = 0\n')
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    release = Path(run.run_dir).parents[1] / "releases" / run.release_id
    offset = [0.0]
    said: list[str] = []
    w = Watch([store.get_run(run.run_id)], store, interval_s=0.5)
    rec = Recoverer(store, lambda line, doc: said.append(line), clock=lambda: time.time() + offset[0])
    try:
        watch_until(w, rec, lambda: checkpoints(run.run_dir), 60, "a checkpoint")
        release.rename(release.with_name("moved"))
        with open(Path(run.run_dir) / "train.log", "a") as fh:
            fh.write(CUDA_OOM_LINE)
        failed = watch_until(w, rec, lambda: [a for a in store.actions(run.run_id) if a["action"] == "failed"], 60,
                              "the failed resume")
        assert "is gone" in failed[0]["reason"] and store.successor(run.run_id) is None
        assert store.get_run(run.run_id).state == "stopped"
        release.with_name("moved").rename(release)
        offset[0] = 11.0                                                   # past RETRY_AFTER_FAILURE_S
        nxt = watch_until(w, rec, lambda: store.successor(run.run_id), 60, "the resume, tried again")
        assert nxt.attempt == 1 and [a["action"] for a in store.actions(run.run_id)] == ["failed", "resume"]
    finally:
        w.close()
        kill_every_run_beside(run.run_dir)
        store.close()


def test_kill_9_of_the_whole_group_is_a_crash_and_is_resumed(in_project, capsys):
    """kill -9 of the process group: the wrapper dies too and writes no exit code, and where
    pid 1 reaps orphans late (this machine's does) it stays a zombie for a while. The probe
    reads exit_code after the process tree, so a zombie leader without one is a vanished
    process at once -- a critical crash the policy acts on -- not a wait for a code that
    never comes (before: no finding, the run `failed`, nothing resumed). The probe and the
    policy are the point, not the trainer: the resumable stand-in, deployed by the CLI."""
    root, _ = resumable_project(in_project, recover='[recover]\non = ["crash"]\nbackoff_s = 0\nmax_attempts = 1\n')
    os.chdir(root)
    run = _deploy(capsys, root / "pb.toml")
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: checkpoints(run["run_dir"]), timeout_s=240, what="the first checkpoint")
        os.killpg(int((Path(run["run_dir"]) / "pid").read_text().strip()), signal.SIGKILL)
        line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=60,
                        what="the resume action after the whole group's kill")
        assert f"from {run['run_dir']}/checkpoints/" in line
        store = RunStore()
        try:
            nxt = store.successor(run["run_id"])
            assert nxt is not None and nxt.attempt == 1
            crash = [f for f in store.findings(run["run_id"]) if f.kind == "crash"]
            assert [f.summary for f in crash] == ["process vanished: no exit code recorded"], crash
            assert crash[0].severity == "critical"
        finally:
            store.close()
    finally:
        w.stop()
        kill_every_run_beside(run["run_dir"])
