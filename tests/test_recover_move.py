"""A resume on the next target of `[recover] targets` (controller/ship/move.py), local ->
local: two local targets with different workdirs (A: the playbook's own, B: wd-b). kill -9
of the real CPU trainer on A is resumed on B by `dfctl watch --recover` with the same
release (carried from A as a tar stream: the checkout changed since the deploy) and A's
newest checkpoint carried and verified (same sha256); steps continue at checkpoint + 1.
With A unreachable the move resumes from the checkpoint in place when B can read it (a
shared filesystem), and gives up naming A when it cannot. On the rig: local -> a CT."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest

from controller.act.executor import Recoverer
from controller.errors import UnreachableError
from controller.playbook import load_playbook
from controller.store.runstore import RunStore
from controller.transport.local import LocalTransport
from controller.watch import Watch
from tests.deploy_support import dfctl, wait_for
from tests.recover_support import (
    Watcher,
    checkpoints,
    deploy_and_launch,
    first_progress,
    kill_every_run_in,
    kill_trainer,
    resumable_project,
    trainer_playbook,
    trainer_project,
    watch_until,
)
from tests.test_deploy_rig import PROJECT, live_pids_of_run, target_toml

B_TOML = '[target]\nkind = "local"\nworkdir = "wd-b"\n'
MOVE = '[recover]\non = ["crash", "oom"]\nbackoff_s = 0\nmax_attempts = 2\ntargets = ["b.toml"]\n'


class DownTransport(LocalTransport):
    """A stand-in for a target that is down (nothing here can take a local machine's link
    away): every command fails as a lost SSH connection does."""

    def run(self, argv, *, stdin=None, timeout_s=None):
        raise UnreachableError("local: connection lost (target down)")


class SwitchTransport(LocalTransport):
    """The same stand-in, for a target that goes down mid-run: up until `down` is set."""

    down = False

    def run(self, argv, *, stdin=None, timeout_s=None):
        if self.down:
            raise UnreachableError("local: connection lost (target down)")
        return super().run(argv, stdin=stdin, timeout_s=timeout_s)


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_kill_9_on_a_is_resumed_on_b_with_its_release_and_checkpoint_carried(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "b.toml").write_text(B_TOML)
    pb = trainer_project(root, MOVE)
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    # the checkout moves on after the deploy: the release must come from A, not from here
    with open(root / "trainer" / "__init__.py", "a") as fh:
        fh.write("# changed after the deploy\n")
    wd_b = root / "wd-b"
    w = Watcher(run["run_id"])
    try:
        wait_for(lambda: checkpoints(run["run_dir"]), timeout_s=240, what="the first checkpoint")
        os.kill(json.loads((Path(run["run_dir"]) / "launch.json").read_text())["trainer_pid"], signal.SIGKILL)
        saved = checkpoints(run["run_dir"])[-1]
        line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=120, what="the move")
        assert f"on local ({wd_b})" in line and "carried from local" in line, line
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and nxt.attempt == 1 and nxt.release_id == run["release_id"]
        assert nxt.workdir == str(wd_b) and nxt.run_dir.startswith(f"{wd_b}/runs/")
        # the release is there, verified by its manifest; B's `current` is not switched by a resume
        assert (wd_b / "releases" / run["release_id"] / ".dfctl-sha256sums").is_file()
        assert not (wd_b / "current").exists()
        copy = wd_b / "moved-in" / run["run_id"] / "checkpoints" / saved
        assert _sha256(copy) == _sha256(Path(run["run_dir"]) / "checkpoints" / saved)
        assert (wd_b / "moved-in" / run["run_id"] / "resumed_by").read_text().strip() == nxt.run_id
        launched = json.loads(wait_for(lambda: (Path(nxt.run_dir) / "launch.json").exists()
                                       and (Path(nxt.run_dir) / "launch.json").read_text(), what="launch.json"))
        assert launched["argv"][launched["argv"].index("--resume-from") + 1] == str(copy)
        first = wait_for(lambda: first_progress(nxt.run_dir), timeout_s=240, what="the resumed run's first step")
        assert first[0] == int(saved[5:13]) + 1
        code, out, _ = dfctl(capsys, "runs", "--json")
        rows = {r["run_id"]: r for r in json.loads(out)}
        assert rows[nxt.run_id]["previous_run_id"] == run["run_id"]
        assert rows[nxt.run_id]["workdir"] == str(wd_b) and rows[run["run_id"]]["workdir"] != str(wd_b)
        code, out, _ = dfctl(capsys, "runs")
        assert f"chain: {run['run_id']} -> this (attempt 1) -> (newest); moved from local " \
               f"{rows[run['run_id']]['workdir']}" in out
        store.close()
    finally:
        w.stop()
        kill_every_run_in(Path(run["run_dir"]).parent, wd_b / "runs")


def _move_with_a_down(tmp_path: Path, *, hide_checkpoints: bool):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "b.toml").write_text(B_TOML)
    root, pb = resumable_project(root, recover=MOVE)
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    said: list[str] = []
    w = Watch([store.get_run(run.run_id)], store, interval_s=0.5)
    down = DownTransport()
    rec = Recoverer(store, lambda line, doc: said.append(line),
                    transport_for=lambda r: down if r.run_id == run.run_id else LocalTransport(),
                    open_target=lambda t: LocalTransport())
    try:
        watch_until(w, None, lambda: checkpoints(run.run_dir), 60, "a checkpoint")
        kill_trainer(run)
        saved = checkpoints(run.run_dir)[-1]
        if hide_checkpoints:     # A's disk is not visible from B either (not a shared filesystem)
            os.rename(Path(run.run_dir) / "checkpoints", Path(run.run_dir) / "checkpoints.away")
        watch_until(w, rec, lambda: store.actions(run.run_id), 60, "the move's action")
        return root, run, store, saved, said
    finally:
        w.close()


def test_a_down_but_its_checkpoint_readable_from_b_resumes_from_it_in_place(tmp_path):
    root, run, store, saved, said = _move_with_a_down(tmp_path, hide_checkpoints=False)
    try:
        acts = store.actions(run.run_id)
        assert [a["action"] for a in acts] == ["resume"], acts
        assert "read in place" in acts[0]["reason"] and "shipped from the checkout" in acts[0]["reason"]
        nxt = store.successor(run.run_id)
        assert nxt is not None and nxt.workdir == str(root / "wd-b") and nxt.release_id == run.release_id
        launched = json.loads(wait_for(lambda: (Path(nxt.run_dir) / "launch.json").exists()
                                       and (Path(nxt.run_dir) / "launch.json").read_text(), what="launch.json"))
        ck = f"{run.run_dir}/checkpoints/{saved}"
        assert launched["argv"][launched["argv"].index("--resume-from") + 1] == ck
        wait_for(lambda: f"resume: {ck} step={int(saved[5:13])}" in (Path(nxt.run_dir) / "train.log").read_text(),
                 what="the resumed program's own line")
        assert not (root / "wd-b" / "current").exists()
    finally:
        kill_every_run_in(Path(run.run_dir).parent, root / "wd-b" / "runs")
        store.close()


def test_a_down_and_its_checkpoint_unreadable_gives_up_naming_a(tmp_path):
    root, run, store, saved, said = _move_with_a_down(tmp_path, hide_checkpoints=True)
    try:
        acts = store.actions(run.run_id)
        assert [a["action"] for a in acts] == ["give_up"], acts
        reason = acts[0]["reason"]
        assert f"the old target local (workdir {run.run_dir.rsplit('/runs/', 1)[0]}) cannot be read" in reason
        assert "connection lost" in reason and "nothing launched" in reason
        assert store.successor(run.run_id) is None
        assert not (root / "wd-b" / "runs").exists() or not list((root / "wd-b" / "runs").iterdir())
        assert any(f"recover {run.run_id}: give_up: " in line for line in said)
    finally:
        kill_every_run_in(Path(run.run_dir).parent)
        store.close()


@pytest.mark.rig
def test_kill_9_on_local_is_resumed_in_a_ct_on_the_rig(rig, rig_host, tmp_path, capsys, monkeypatch):
    """local -> pct (real sshd + LXC CT 200): the release and checkpoint go from this
    machine's workdir into the CT over SSH (`pct exec` of the push); the playbooks live
    outside the checkout, so the release is carried from A, not rebuilt."""
    ct, ct_workdir = rig_host.vmid_running, f"/workspace/dfctl-move-{os.getpid()}"
    (tmp_path / "ct.toml").write_text(f"[target]\n{target_toml(rig, rig_host, ct_workdir)}")
    pb = trainer_playbook(tmp_path / "a.toml", '[recover]\non = ["crash", "oom"]\nbackoff_s = 0\ntargets = ["ct.toml"]\n',
                          target=f'kind = "local"\nworkdir = "{tmp_path}/wd-a"', name="rig-move")
    monkeypatch.chdir(PROJECT)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    w = Watcher(run["run_id"])
    nxt = None
    try:
        wait_for(lambda: checkpoints(run["run_dir"]), timeout_s=240, what="a checkpoint on A")
        os.kill(json.loads((Path(run["run_dir"]) / "launch.json").read_text())["trainer_pid"], signal.SIGKILL)
        saved = checkpoints(run["run_dir"])[-1]
        try:
            line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: (resume|give_up|failed): "), timeout_s=180,
                            what="the move")
        except AssertionError:
            raise AssertionError(f"no move; the watch said {w.lines[-12:]}") from None
        assert ": resume: " in line and f"on pct {ct} on {rig_host.name} ({ct_workdir})" in line, line
        assert "carried from local" in line, line
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and nxt.target == f"pct {ct} on {rig_host.name}"
        assert (nxt.release_id, nxt.attempt, nxt.workdir) == (run["release_id"], 1, ct_workdir)
        store.close()
        copy = rig_host.container_path(ct, f"{ct_workdir}/moved-in/{run['run_id']}/checkpoints/{saved}")
        assert _sha256(copy) == _sha256(Path(run["run_dir"]) / "checkpoints" / saved)
        assert not rig_host.container_path(ct, f"{ct_workdir}/current").exists()
        first = wait_for(lambda: first_progress(str(rig_host.container_path(ct, nxt.run_dir))), timeout_s=240,
                         what="the resumed run's first step in the CT")
        assert first[0] == int(saved[5:13]) + 1
        code, out, _ = dfctl(capsys, "runs", "--json")
        rows = {r["run_id"]: r for r in json.loads(out)}
        assert (rows[run["run_id"]]["target"], rows[nxt.run_id]["target"]) == ("local", f"pct {ct} on {rig_host.name}")
    finally:
        w.stop()
        kill_every_run_in(Path(run["run_dir"]).parent)
        if nxt is not None:
            for pid in live_pids_of_run(nxt.run_id):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.mark.rig
def test_kill_9_in_a_ct_is_resumed_on_local_reading_the_ct_over_ssh(rig, rig_host, tmp_path, capsys, monkeypatch):
    """pct -> local: the release (tar) and the checkpoint (cat) are read from the CT through
    an SSH session channel on the node's connection (SourceStream over `pct exec`)."""
    ct, ct_workdir = rig_host.vmid_running, f"/workspace/dfctl-move-out-{os.getpid()}"
    wd_b = tmp_path / "wd-b"
    (tmp_path / "b.toml").write_text(f'[target]\nkind = "local"\nworkdir = "{wd_b}"\n')
    pb = trainer_playbook(tmp_path / "ct.toml", '[recover]\non = ["crash", "oom"]\nbackoff_s = 0\ntargets = ["b.toml"]\n',
                          target=target_toml(rig, rig_host, ct_workdir), name="rig-move-out")
    monkeypatch.chdir(PROJECT)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    host_dir = rig_host.container_path(ct, run["run_dir"])
    w = Watcher(run["run_id"])
    nxt = None
    try:
        wait_for(lambda: checkpoints(str(host_dir)), timeout_s=240, what="a checkpoint in the CT")
        trainer = [p for p in live_pids_of_run(run["run_id"])
                   if b"-m\0trainer\0" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(trainer) == 1, trainer
        os.kill(trainer[0], signal.SIGKILL)
        saved = checkpoints(str(host_dir))[-1]
        try:
            line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: (resume|give_up|failed): "), timeout_s=180,
                            what="the move")
        except AssertionError:
            raise AssertionError(f"no move; the watch said {w.lines[-12:]}") from None
        assert ": resume: " in line and f"on local ({wd_b})" in line, line
        assert f"carried from pct {ct} on {rig_host.name}" in line, line
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and (nxt.target, nxt.workdir, nxt.release_id) == ("local", str(wd_b), run["release_id"])
        store.close()
        copy = wd_b / "moved-in" / run["run_id"] / "checkpoints" / saved
        assert _sha256(copy) == _sha256(host_dir / "checkpoints" / saved)
        assert (wd_b / "releases" / run["release_id"] / ".dfctl-sha256sums").is_file()
        first = wait_for(lambda: first_progress(nxt.run_dir), timeout_s=240, what="the resumed run's first step")
        assert first[0] == int(saved[5:13]) + 1
    finally:
        w.stop()
        for pid in live_pids_of_run(run["run_id"]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_every_run_in(wd_b / "runs")


def test_two_moves_of_one_run_launch_once_the_marker_on_b_decides(tmp_path):
    """Two controllers that both decide to move a crashed run (the same attempt: the same
    target): the second launch is refused by moved-in/<run>/resumed_by under B's lock."""
    from controller.errors import AlreadyResumedError
    from controller.ship.move import relaunch_on

    root = tmp_path / "proj"
    root.mkdir()
    (root / "b.toml").write_text(B_TOML)
    root, pb = resumable_project(root, recover=MOVE)
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    try:
        wait_for(lambda: checkpoints(run.run_dir), timeout_s=60, what="a checkpoint")
        kill_trainer(run)
        prev = store.get_run(run.run_id)
        kw = {"transport_for": lambda r: LocalTransport(), "open_target": lambda t: LocalTransport()}
        first = relaunch_on(store, prev, {}, "b.toml", **kw)
        with pytest.raises(AlreadyResumedError, match=f"already resumed by {first.run.run_id}"):
            relaunch_on(store, prev, {}, "b.toml", **kw)
        assert [p.name for p in (root / "wd-b" / "runs").iterdir()] == [first.run.run_id]
        assert "carried from local" in first.checkpoint and "sha256" in first.checkpoint
        assert first.release == "shipped from the checkout"
    finally:
        kill_every_run_in(Path(run.run_dir).parent, root / "wd-b" / "runs")
        store.close()


def test_a_carry_that_does_not_verify_leaves_nothing(tmp_path):
    """A checkpoint whose bytes do not match the sha256 read at the source (changed in
    flight, a bad disk) is refused by the push on B and leaves no file; a short stream too."""
    from controller.errors import DeployError
    from controller.ship.carry import carry
    from controller.ship.push import push_argv

    src = tmp_path / "step-00000005.pt"
    src.write_bytes(os.urandom(3 << 20))
    good = _sha256(src)
    dest = tmp_path / "b"
    with pytest.raises(DeployError, match="hash mismatch"):
        carry(LocalTransport(), ["cat", str(src)], LocalTransport(),
              push_argv(str(dest), "moved-in/r/checkpoints", src.name, "file", sha256="0" * 64, owner="-"))
    assert not list((dest / "moved-in" / "r" / "checkpoints").iterdir())
    with pytest.raises(DeployError, match="hash mismatch"):      # cut short: the source's sha256 does not hold
        carry(LocalTransport(), ["head", "-c", "1000", str(src)], LocalTransport(),
              push_argv(str(dest), "moved-in/r/checkpoints", src.name, "file", sha256=good, owner="-"),
              expect_bytes=src.stat().st_size)
    assert not list((dest / "moved-in" / "r" / "checkpoints").iterdir())
    n = carry(LocalTransport(), ["cat", str(src)], LocalTransport(),
              push_argv(str(dest), "moved-in/r/checkpoints", src.name, "file", sha256=good, owner="-"),
              expect_bytes=src.stat().st_size)
    assert n == 3 << 20 and _sha256(dest / "moved-in" / "r" / "checkpoints" / src.name) == good
    assert oct((dest / "moved-in" / "r" / "checkpoints" / src.name).stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_live_run_on_a_target_gone_dark_is_moved_without_its_stop_and_says_so(tmp_path, exclusive):
    """`unreachable` acted on with a move: the old run cannot be stopped (its target does not
    answer), the resume on B goes ahead (the checkpoint read in place here) and the line says
    the old run was not stopped. A and B are one machine here: an exclusive run refuses to
    start beside the live one (it would share its GPUs) and the move is `failed`, retried."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "b.toml").write_text(B_TOML)
    root, pb = resumable_project(root, recover='[recover]\non = ["unreachable"]\nbackoff_s = 0\n'
                                               'targets = ["b.toml"]\n')
    text = (root / "pb.toml").read_text()
    (root / "pb.toml").write_text(text.replace("[run]\n", f"[run]\nexclusive = {str(exclusive).lower()}\n", 1))
    pb = load_playbook(root / "pb.toml")
    store = RunStore()
    run = deploy_and_launch(root, pb, store)
    a_workdir = run.run_dir.rsplit("/runs/", 1)[0]
    a_link = SwitchTransport()
    w = Watch([store.get_run(run.run_id)], store, interval_s=0.5, persistent=False,
              transport_for=lambda t: LocalTransport() if t.workdir == "wd-b" else a_link)   # B's, as in b.toml
    said: list[str] = []
    rec = Recoverer(store, lambda line, doc: said.append(line),
                    transport_for=lambda r: a_link if r.workdir == a_workdir else LocalTransport(),
                    open_target=lambda t: LocalTransport())
    try:
        watch_until(w, None, lambda: checkpoints(run.run_dir), 60, "a checkpoint")
        a_link.down = True
        watch_until(w, rec, lambda: store.actions(run.run_id), 60, "the move's action")
        acts = store.actions(run.run_id)
        if exclusive:
            assert [a["action"] for a in acts] == ["failed"], said
            assert f"{run.run_id} (pid {run.pid}) is still alive" in acts[0]["reason"]
            runs_b = root / "wd-b" / "runs"
            assert store.successor(run.run_id) is None and not (runs_b.is_dir() and list(runs_b.iterdir()))
            return
        assert [a["action"] for a in acts] == ["resume"], said
        assert "the old run could not be stopped" in acts[0]["reason"] and "read in place" in acts[0]["reason"]
        assert os.path.exists(f"/proc/{run.pid}")                        # still running on A: nothing reached it
        nxt = store.successor(run.run_id)
        assert nxt is not None and nxt.workdir == str(root / "wd-b")
    finally:
        w.close()
        kill_every_run_in(Path(run.run_dir).parent, root / "wd-b" / "runs")
        store.close()
