"""Faults during `dfctl deploy` on the rig (real sshd, real LXC CT, pct stand-in).

The property everywhere: `current` always names a complete, verified release; a rerun
completes; every run directory has exactly one registry row (no orphan, no duplicate
launch); the error says what and where. Existing tests already cover a SIGKILL mid-
transfer (tests/test_deploy_rig.py) and a lock held by hand (tests/test_deploy_local.py);
here: a kill at every phase, sshd restarted / link down mid-transfer and mid-launch, the
remote disk full, two real deploys at once, a host that accepts TCP but sends no banner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.ship import deploy as deploy_mod
from tests.deploy_support import make_project, only_error_doc, ticker_playbook, wait_for
from tests.reliability.support import (
    current_release,
    dfctl,
    lock_is_free,
    make_shims,
    note,
    registry_rows,
    release_is_complete,
    run_dirs,
    spawn_phased,
    target_toml,
)
from tests.test_deploy_rig import live_pids_of_run

pytestmark = pytest.mark.rig


def setup_target(rig, host, tmp_path, tag: str, *, timeout_s: float = 10, shims: bool = True):
    """A project, a playbook for CT 200 with shims on its PATH, and a first release live."""
    root = make_project(tmp_path / "proj", git=True)
    workdir = f"/workspace/rel-{tag}-{os.getpid()}"
    shim_ct = f"{workdir}-shims"
    if shims:
        make_shims(host.container_path(host.vmid_running, shim_ct), shim_ct)
    toml = target_toml(rig, host, workdir, timeout_s=timeout_s, shims=shim_ct if shims else None)
    pb = ticker_playbook(root, kind="pct", extra_target=toml.split("\n", 1)[1])
    return root, pb, workdir, host.container_path(host.vmid_running, shim_ct)


def first_release(capsys, pb, shims: Path | None = None) -> str:
    code, out, err = dfctl(capsys, "deploy", str(pb), "--no-launch", "--json")
    assert code == 0, err
    for marker in ("at-switch", "at-launch"):          # the shims noted this deploy too
        if shims is not None:
            (shims / marker).unlink(missing_ok=True)
    return json.loads(out)["release"]["release_id"]


def stop_everything(capsys, host, workdir):
    for row in registry_rows(capsys):
        dfctl(capsys, "stop", row["run_id"], "--grace-s", "2")
    for rd in run_dirs(host, host.vmid_running, workdir):
        host.ct_exec(host.vmid_running, ["sh", "-c", f'p=$(cat "{workdir}/runs/{rd}/pid" 2>/dev/null) && kill -9 -"$p"; true'])


def assert_consistent(capsys, host, workdir) -> list[dict]:
    """Every run dir has one registry row and vice versa; `current` is complete."""
    rows = registry_rows(capsys)
    assert sorted(r["run_id"] for r in rows) == run_dirs(host, host.vmid_running, workdir), rows
    cur = current_release(host, host.vmid_running, workdir)
    assert cur and release_is_complete(host, host.vmid_running, workdir, cur)
    return rows


@pytest.mark.parametrize("phase", ["before-transfer", "mid-transfer", "after-rename", "during-launch"])
def test_controller_sigkilled_at_every_phase(rig, rig_host, tmp_path, capsys, monkeypatch, phase):
    host = rig_host
    root, pb, workdir, shims = setup_target(rig, host, tmp_path, phase.replace("-", ""))
    monkeypatch.chdir(root)
    before = first_release(capsys, pb, shims)
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(3 << 20))       # a new release to push
    hold = {"after-rename": "hold-switch", "during-launch": "hold-launch"}.get(phase)
    if hold:
        (shims / hold).write_text("")
    child = spawn_phased(phase, "deploy", str(pb), "--json", cwd=root)
    try:
        if hold:
            marker = shims / ("at-switch" if phase == "after-rename" else "at-launch")
            wait_for(marker.exists, timeout_s=120, what=f"the remote side at {phase}")
        else:
            assert child.stdout.readline().strip() == f"at {phase}", child.stderr.read()
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        if phase == "after-rename":
            # the session dies with its controller: the remote script is killed between
            # `mv` (release in place) and `ln` (the switch)
            shim_pid, script_pid = (shims / "at-switch").read_text().split()
            host.ct_exec(host.vmid_running, ["kill", "-9", shim_pid, script_pid])
        if hold:
            (shims / hold).unlink()
        wait_for(lambda: lock_is_free(host, host.vmid_running, workdir), timeout_s=60, what="the deploy lock free")
        cur = current_release(host, host.vmid_running, workdir)
        assert cur and release_is_complete(host, host.vmid_running, workdir, cur)   # never half a release
        if phase in ("before-transfer", "mid-transfer", "after-rename"):
            assert cur == before
        # the rerun completes (--replace: the killed controller's launch may have started a run)
        code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--replace")
        assert code == 0, err
        doc = json.loads(out)
        assert current_release(host, host.vmid_running, workdir) == doc["release"]["release_id"] != before
        assert doc["release"]["transferred_bytes"] == 0 if phase in ("after-rename", "during-launch") else True
        assert not list(host.container_path(host.vmid_running, f"{workdir}/releases").glob(".tmp-*"))
        if phase == "during-launch":
            # the killed controller's launch either started a run or not; either way each
            # run dir has one registry row, and the rerun's run is there and alive
            wait_for(lambda: all((host.container_path(host.vmid_running, f"{workdir}/runs/{d}") / "launch.json").exists()
                                 for d in run_dirs(host, host.vmid_running, workdir)), 60, "launches settled")
        rows = assert_consistent(capsys, host, workdir)
        assert doc["run"]["run_id"] in [r["run_id"] for r in rows]
        assert live_pids_of_run(doc["run"]["run_id"])
    finally:
        if child.poll() is None:
            child.kill()
        for f in ("hold-switch", "hold-launch"):
            (shims / f).unlink(missing_ok=True)
        stop_everything(capsys, host, workdir)


class _FaultAtRead(deploy_mod.ProgressReader):
    """The tar stream, which calls `fault` once after some chunks have gone out."""

    fault = None
    calls = 0

    def read(self, size=-1):
        type(self).calls += 1
        if type(self).calls == 3 and type(self).fault is not None:
            f, type(self).fault = type(self).fault, None
            f()
        return super().read(size)


@pytest.mark.parametrize("fault", ["restart_sshd", "link_down"])
def test_connection_lost_mid_transfer(rig, rig_host, tmp_path, capsys, monkeypatch, fault):
    host = rig_host
    root, pb, workdir, _ = setup_target(rig, host, tmp_path, f"drop{fault[:4]}", timeout_s=2, shims=False)
    monkeypatch.chdir(root)
    before = first_release(capsys, pb)
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(8 << 20))
    _FaultAtRead.calls, _FaultAtRead.fault = 0, getattr(host, fault)
    monkeypatch.setattr(deploy_mod, "ProgressReader", _FaultAtRead)
    t0 = time.monotonic()
    try:
        code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
        took = time.monotonic() - t0
    finally:
        host.link_up()
    assert code in (1, 3) and "Traceback" not in err, (code, err)
    assert host.name in err and only_error_doc(out, code), out
    assert took < 60, took                                    # bounded, not TCP's 15 minutes
    note(f"deploy: {fault} mid-transfer", exit_code=code, failed_after_s=round(took, 1), message=err.strip()[:300])
    assert current_release(host, host.vmid_running, workdir) == before
    monkeypatch.setattr(deploy_mod, "ProgressReader", _FaultAtRead.__mro__[1])
    # recovery: once the host is back, a rerun completes (the stale session's lock and
    # temp dir do not block it for longer than the deadline)
    deadline = time.monotonic() + 90
    while True:
        code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
        if code == 0 or time.monotonic() > deadline:
            break
        assert "Traceback" not in err
        time.sleep(1)
    assert code == 0, err
    note(f"deploy: {fault} mid-transfer, rerun", completed_after_s=round(time.monotonic() - t0, 1))
    doc = json.loads(out)
    assert current_release(host, host.vmid_running, workdir) == doc["release"]["release_id"] != before
    try:
        rows = assert_consistent(capsys, host, workdir)
        assert len(rows) == 1
    finally:
        stop_everything(capsys, host, workdir)


@pytest.mark.parametrize("fault", ["restart_sshd", "link_down"])
def test_connection_lost_mid_launch_no_duplicate_run(rig, rig_host, tmp_path, capsys, monkeypatch, fault):
    host = rig_host
    root, pb, workdir, shims = setup_target(rig, host, tmp_path, f"launch{fault[:4]}", timeout_s=2)
    monkeypatch.chdir(root)
    first_release(capsys, pb, shims)
    (shims / "hold-launch").write_text("")

    def inject():
        wait_for((shims / "at-launch").exists, timeout_s=120, what="the launch in flight")
        getattr(host, fault)()
        if fault == "link_down":
            time.sleep(8)                       # past the dead-link detection, then back
            host.link_up()
        (shims / "hold-launch").unlink()

    th = threading.Thread(target=inject, daemon=True)
    th.start()
    try:
        code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
        th.join(60)
        assert "Traceback" not in err
        # whatever the CLI said, within a deadline there is exactly one run, registered once
        wait_for(lambda: all((host.container_path(host.vmid_running, f"{workdir}/runs/{d}") / "launch.json").exists()
                             for d in run_dirs(host, host.vmid_running, workdir)), 60, "the launch settled")
        rows = assert_consistent(capsys, host, workdir)
        assert len(rows) == 1, (code, err, rows)
        assert rows[0]["state"] == "running" and rows[0]["pid"]
        assert len(live_pids_of_run(rows[0]["run_id"])) >= 1
        note(f"launch: {fault} mid-launch", exit_code=code, runs=len(rows), message=err.strip()[:300])
        if code == 0:
            assert json.loads(out)["run"]["run_id"] == rows[0]["run_id"]
        else:
            assert code in (1, 3) and host.name in err
    finally:
        host.link_up()
        (shims / "hold-launch").unlink(missing_ok=True)
        stop_everything(capsys, host, workdir)


def test_disk_full_keeps_previous_release(rig, rig_host, tmp_path, capsys, monkeypatch):
    host = rig_host
    small = host.make_small_workspace(4096)
    root = make_project(tmp_path / "proj", git=False)
    workdir = "/workspace/full"
    toml = target_toml(rig, host, workdir, vmid=small.vmid)
    pb = ticker_playbook(root, kind="pct", extra_target=toml.split("\n", 1)[1])
    monkeypatch.chdir(root)
    before = first_release(capsys, pb)
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(6 << 20))        # more than the tmpfs holds
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 1 and "Traceback" not in err and only_error_doc(out, code), out
    assert "No space left on device" in err and f"pct {small.vmid} on {host.name}" in err
    assert f"`current` still points at {before}" in err
    note("deploy: disk full", exit_code=code, message=err.strip()[:400])
    assert current_release(host, small.vmid, workdir) == before
    assert release_is_complete(host, small.vmid, workdir, before)
    assert not list((small.host_dir / "full" / "releases").glob(".tmp-*"))   # the partial copy is gone
    assert registry_rows(capsys) == [] and run_dirs(host, small.vmid, workdir) == []   # nothing launched
    (root / "ticker" / "blob.bin").unlink()
    code, out, err = dfctl(capsys, "deploy", str(pb), "--no-launch", "--json")
    assert code == 0 and json.loads(out)["release"]["transferred_bytes"] == 0, err


def test_two_deploys_at_once_one_locked_other_completes(rig, rig_host, tmp_path, capsys, monkeypatch):
    host = rig_host
    root, pb, workdir, shims = setup_target(rig, host, tmp_path, "twice")
    monkeypatch.chdir(root)
    first_release(capsys, pb, shims)
    (root / "ticker" / "__init__.py").write_text("VERSION = 2\n")
    (shims / "hold-switch").write_text("")
    a = spawn_phased("remote", "deploy", str(pb), "--json", cwd=root)     # pauses holding the lock
    try:
        wait_for((shims / "at-switch").exists, timeout_s=120, what="deploy A holding the lock")
        # B waits for the lock 2 s instead of the default 10 before it is refused: A holds it
        # until told, so how long B waits changes nothing of what B is told
        with monkeypatch.context() as m:
            m.setattr(deploy_mod, "LOCK_WAIT_S", 2.0)
            code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
        assert code == 2 and "Traceback" not in err and only_error_doc(out, code), out
        assert f"deploy lock {workdir}/.deploy.lock is held by: dfctl pid {a.pid} " in err
        note("deploy: two at once", exit_code=code, message=err.strip()[:300])
        assert registry_rows(capsys) == [] and run_dirs(host, host.vmid_running, workdir) == []
        (shims / "hold-switch").unlink()
        a_out, a_err = a.communicate(timeout=120)
        assert a.returncode == 0, a_err
        a_doc = json.loads(a_out.splitlines()[-1])
        assert current_release(host, host.vmid_running, workdir) == a_doc["release"]["release_id"]
        code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--replace")   # B again: now it completes
        assert code == 0, err
        rows = assert_consistent(capsys, host, workdir)
        assert len(rows) == 2 and json.loads(out)["release"]["transferred_bytes"] == 0
    finally:
        if a.poll() is None:
            a.kill()
        (shims / "hold-switch").unlink(missing_ok=True)
        stop_everything(capsys, host, workdir)


def test_slow_host_no_banner_bounded_clear(rig, rig_host, tmp_path, capsys, monkeypatch):
    host = rig_host
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, kind="pct", extra_target=target_toml(rig, host, "/workspace/slow", timeout_s=2).split("\n", 1)[1])
    monkeypatch.chdir(root)
    host.sigstop_sshd()
    try:
        for argv in (("deploy", str(pb)), ("doctor", str(pb)), ("deploy", str(pb), "--json")):
            t0 = time.monotonic()
            code, out, err = dfctl(capsys, *argv)
            assert code == 3 and time.monotonic() - t0 < 15, (argv, code, err)
            note(f"slow host: {' '.join(argv[:1] + argv[2:])}", exit_code=code, took_s=round(time.monotonic() - t0, 1),
                 message=(err.strip() or out.strip())[:300])
            assert host.name in (err + out) and "no answer within 2 s" in (err + out) and "Traceback" not in err
    finally:
        host.sigcont_sshd()
    assert registry_rows(capsys) == []


@pytest.mark.parametrize("n", [2, 5])
def test_concurrent_deploys_on_the_rig_exactly_one_launches(rig, rig_host, tmp_path, capsys, monkeypatch, n):
    """Issue 12 item 3 on a real CT: N controllers deploy one playbook at the same moment
    (each past its early live-run check, seeing the target free; the release not there yet,
    so all N stream it at once). Exactly one launches; the others exit 2 naming it. Before
    the fix every one launched: N trainers on one CT."""
    from tests.deploy_support import race_deploys
    from tests.test_cli_deploy import assert_exactly_one_launched

    host = rig_host
    root, pb, workdir, _ = setup_target(rig, host, tmp_path, f"race{n}", shims=False)
    monkeypatch.chdir(root)
    try:
        results = race_deploys(n, pb, root, tmp_path / "barrier")
        won = assert_exactly_one_launched(results, capsys)
        note(f"deploy: {n} at once", launched=1, refused=[c for c, _, _ in results].count(2),
             message=next((e.strip()[:300] for c, _, e in results if c == 2), ""))
        assert run_dirs(host, host.vmid_running, workdir) == [won["run"]["run_id"]]
        assert live_pids_of_run(won["run"]["run_id"])
        cur = current_release(host, host.vmid_running, workdir)
        assert cur == won["release"]["release_id"] and release_is_complete(host, host.vmid_running, workdir, cur)
        assert not list(host.container_path(host.vmid_running, f"{workdir}/releases").glob(".tmp-*"))
    finally:
        stop_everything(capsys, host, workdir)


def test_link_cut_mid_deploy_does_not_lock_out_a_second_controller(rig, rig_host, tmp_path, capsys, monkeypatch):
    """Issue 12 item 5 (the lock half): controller A's link is cut mid-transfer; its remote
    script stays blocked on a stream that never ends. Controller B, on ANOTHER machine (its
    own UTS namespace and host name: A's lock owner text cannot be judged from there), deploys
    right after the link is back. Before the fix B was refused "deploy lock ... is held by:
    dfctl pid A on vm" until sshd dropped A's session (~2 min); the stream is now received
    without the lock, which covers only the rename and switch."""
    host = rig_host
    root, pb, workdir, _ = setup_target(rig, host, tmp_path, "cutlock", timeout_s=2, shims=False)
    monkeypatch.chdir(root)
    before = first_release(capsys, pb)
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(8 << 20))
    _FaultAtRead.calls, _FaultAtRead.fault = 0, host.link_down
    monkeypatch.setattr(deploy_mod, "ProgressReader", _FaultAtRead)
    try:
        code, _, err = dfctl(capsys, "deploy", str(pb), "--json")
    finally:
        host.link_up()
        monkeypatch.setattr(deploy_mod, "ProgressReader", _FaultAtRead.__mro__[1])
    assert code in (1, 3), err
    assert current_release(host, host.vmid_running, workdir) == before
    t0 = time.monotonic()
    b = subprocess.run(["unshare", "--uts", "sh", "-c", 'hostname other-controller && exec "$@"', "sh",
                        sys.executable, "-m", "controller", "deploy", str(pb), "--json"],
                       cwd=root, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                       capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    note("deploy: a second controller after a link cut mid-deploy", exit_code=b.returncode, took_s=round(took, 1),
         message=b.stderr.strip()[:300])
    try:
        assert b.returncode == 0, b.stderr
        assert "held by" not in b.stderr and took < 60
        doc = json.loads(b.stdout)
        assert current_release(host, host.vmid_running, workdir) == doc["release"]["release_id"] != before
    finally:
        stop_everything(capsys, host, workdir)


FILLER = '''"""Fills its run dir's filesystem, then dies of ENOSPC as a trainer writing a checkpoint would."""
import os, sys
run_dir = sys.argv[1]
print("filling", flush=True)
with open(os.path.join(run_dir, "ckpt.bin"), "wb") as fh:
    while True:
        fh.write(b"\\0" * (1 << 16))
        fh.flush()
'''


def test_disk_full_mid_run_is_named_not_blamed_on_kill_9(rig, rig_host, tmp_path, capsys, monkeypatch):
    """Issue 12 item 8: the trainer dies of ENOSPC, then its wrapper dies writing the exit
    code (exit_code.tmp left empty, no exit_code). Before, the watch said "process vanished
    ... kill -9 of the process group, container restart, host reboot?"; now it names the
    full disk, read (statvfs) on the run dir's filesystem when no exit code is recorded."""
    host = rig_host
    small = host.make_small_workspace(4096)
    root = make_project(tmp_path / "proj", git=False, extra_files={"filler/__init__.py": b"",
                                                                    "filler/__main__.py": FILLER.encode()})
    workdir = "/workspace/fullrun"
    pb = root / "pb.toml"
    pb.write_text(target_toml(rig, host, workdir, vmid=small.vmid).replace('kind = "pct"', '[target]\nkind = "pct"', 1)
                  + '[bundle]\npaths = ["filler"]\n[run]\nname = "fill"\nmodule = "filler"\nargs = ["{run_dir}"]\n')
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    host_run_dir = small.host_dir / "fullrun" / "runs" / run["run_id"]
    wait_for(lambda: not live_pids_of_run(run["run_id"]), timeout_s=60, what="the run dead of ENOSPC")
    assert not (host_run_dir / "exit_code").exists()
    assert (host_run_dir / "exit_code.tmp").exists() and (host_run_dir / "exit_code.tmp").stat().st_size == 0
    code, out, err = dfctl(capsys, "watch", run["run_id"], "--once", "--json")
    doc = json.loads(out)["runs"][0]
    print([(f["kind"], f["summary"], f.get("hint")) for f in doc["findings"]])
    # the traceback's own OSError (when a byte of it still fit) is a crash finding too; the
    # verdict on the vanished process must name the disk, and nothing may say kill -9
    crash = [f for f in doc["findings"] if f["kind"] == "crash" and "vanished" in f["summary"]]
    note("run: disk full mid-run", exit_code=code, summary=crash[0]["summary"] if crash else None,
         evidence=crash[0]["evidence"][0] if crash else None)
    assert code == 4 and len(crash) == 1, (code, doc["findings"])
    assert "disk full" in crash[0]["summary"] and not any("kill -9" in (f.get("hint") or "") for f in doc["findings"])
    assert "KiB free" in crash[0]["evidence"][0] and "exit_code.tmp left empty" in crash[0]["evidence"][0]
    assert "ENOSPC" in crash[0]["hint"]


def test_runs_with_the_host_down_exits_3_naming_it(rig, rig_host, tmp_path, capsys, monkeypatch):
    """Issue 12 item 10 on the rig: with the node's sshd stopped, `dfctl runs` printed the
    rows `unknown` and exited 0. Now: the partial list, the host named, exit 3; once sshd
    is back, the run is `running` again and the exit code 0."""
    host = rig_host
    root, pb, workdir, _ = setup_target(rig, host, tmp_path, "runsdown", timeout_s=2, shims=False)
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run_id = json.loads(out)["run"]["run_id"]
    host.stop_sshd()
    try:
        code, out, err = dfctl(capsys, "runs", "--json")
        note("runs: host down", exit_code=code, message=err.strip()[:300])
        rows = json.loads(out)
        assert code == 3 and "Traceback" not in err, (code, err)
        assert f"pct {host.vmid_running} on {host.name}" in err.splitlines()[-1]
        assert [(r["run_id"], r["state"]) for r in rows] == [(run_id, "unknown")] and rows[0]["read_error"]
    finally:
        host.start_sshd()
    try:
        code, out, err = dfctl(capsys, "runs", "--json")
        assert code == 0 and [(r["run_id"], r["state"]) for r in json.loads(out)] == [(run_id, "running")], err
    finally:
        stop_everything(capsys, host, workdir)
