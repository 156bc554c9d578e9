"""`dfctl stop` and the watch's automatic py-spy dump act from inside a CT (`pct exec`),
where the CT's /proc is whatever its root mounted there (issue 27): both must first find
the run's process in the NODE's own /proc -- pid, start time and pid namespace -- and refuse
otherwise, signalling and dumping nothing. Real sshd, real LXC CT 200, the pct stand-in
(tests/rig)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from controller.records import Finding
from tests.deploy_support import dfctl, make_project, ticker_playbook, wait_for
from tests.test_attach_fake_proc_rig import fake_entry, node_only_file, start_loop  # noqa: F401 - node_only_file: a fixture
from tests.test_attach_rig import ct_pid_alive, ct_pid_free, respawn_with_pid, target_args
from tests.test_deploy_rig import live_pids_of_run, target_toml

pytestmark = pytest.mark.rig


def auto_stacks_outcome(run_id: str):
    """What the watch's automatic dump makes of a `hang` finding of the run: the real
    AutoStacks with its default dump (dump_record), waited on until it has an outcome."""
    from controller.store.runstore import RunStore
    from controller.watch.auto_stacks import AutoStacks

    store = RunStore()
    try:
        rec = store.get_run(run_id)
    finally:
        store.close()
    auto = AutoStacks(deadline_s=120.0)
    try:
        assert auto.consider(rec, Finding(kind="hang", severity="critical", summary="no step for 600 s",
                                          run_id=run_id))
        done: list = []
        wait_for(lambda: bool(done.extend(auto.finished()) or done), timeout_s=150, what="the automatic dump")
        return done[0]
    finally:
        auto.close()


def set_recorded_pid_ns(pid_ns: str) -> str:
    """Rewrite the one attachment row's pid namespace (what a row from before a CT restart
    holds: the CT's numbering begun again); returns the namespace attach had recorded."""
    db = sqlite3.connect(Path(os.environ["DFCTL_HOME"]) / "registry.sqlite")
    try:
        (doc,) = db.execute("SELECT doc FROM attachments").fetchone()
        att = json.loads(doc)
        was = att["pid_ns"]
        att["pid_ns"] = pid_ns
        db.execute("UPDATE attachments SET doc = ?", (json.dumps(att),))
        db.commit()
    finally:
        db.close()
    return was


def test_stop_and_auto_stacks_refuse_a_pid_of_another_pid_namespace(rig, rig_host, capsys):
    """Same pid, same start time, another pid namespace: not the attached run. The check
    inside the CT sees only pid + start time; the node's view sees the namespace."""
    vmid = rig_host.vmid_running
    base = f"/workspace/stop-ns-{os.getpid()}"
    pid = start_loop(rig_host, vmid, base, "loop")
    try:
        code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid), "--name", "ns")
        assert code == 0, err
        was = set_recorded_pid_ns("pid:[4026531000]")
        assert was.startswith("pid:[") and was != "pid:[4026531000]"

        outcome = auto_stacks_outcome("ns")
        assert outcome.dump is None and f"pid {pid} now belongs to another process" in (outcome.error or ""), outcome
        assert "pid:[4026531000]" in outcome.error and "nothing dumped" in outcome.error
        assert any(e.startswith("stacks: ") and "now belongs to another process" in e for e in outcome.finding.evidence)

        code, out, err = dfctl(capsys, "stop", "ns", "--grace-s", "1")
        assert code == 2, (code, err)
        assert "run ns" in err and f"(pid {pid})" in err and "now belongs to another process" in err, err
        assert "nothing was signalled" in err
        assert ct_pid_alive(rig_host, vmid, pid), "stop signalled a process of another pid namespace"
        code, out, err = dfctl(capsys, "runs", "--json")        # not the run's process: the run ended
        assert code == 0 and [r["state"] for r in json.loads(out)] == ["ended"], out

        set_recorded_pid_ns(was)     # the run's own namespace again: stop stops it
        code, out, err = dfctl(capsys, "stop", "ns", "--grace-s", "5", "--json")
        assert code == 0 and "SIGTERM" in json.loads(out)["signals"], (code, out, err)
        wait_for(lambda: not ct_pid_alive(rig_host, vmid, pid), what="the run to end")
    finally:
        rig_host.ct_exec(vmid, ["kill", "-9", str(pid)])


def test_stop_and_auto_stacks_refuse_a_reused_pid_behind_a_fake_proc(rig, rig_host, capsys,
                                                                     node_only_file):  # noqa: F811 - the fixture imported
    """The attached run ends, the CT hands its pid to a `sleep 600`, and root in the CT mounts
    a made-up /proc that shows the run's start time at that pid (its fds links to a
    node-only file). stop must not signal the sleep (the in-CT check would believe the fake
    start time), and neither stop nor the automatic dump reads anything of the node's."""
    vmid = rig_host.vmid_running
    base = f"/workspace/stop-fake-{os.getpid()}"
    pid = start_loop(rig_host, vmid, base, "loop")
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid), "--name", "fk",
                           "--json")
    assert code == 0, err
    ticks = json.loads(out)["run"]["pid_start_ticks"]
    rig_host.ct_exec(vmid, ["kill", "-9", str(pid)])
    wait_for(lambda: ct_pid_free(rig_host, vmid, pid), what="the run's pid to be free")
    assert respawn_with_pid(rig_host, vmid, pid), "could not get the freed pid back in the CT"
    before = os.stat(node_only_file)
    setup = "\n".join(["set -e", "mkdir -p /tmp/fakeproc/1", "printf '1 (init) S 0 1 1 0' > /tmp/fakeproc/1/stat",
                       fake_entry(pid, ticks, str(node_only_file)), "mount --bind /tmp/fakeproc /proc", "ls /proc"])
    mounted = False
    try:
        r = rig_host.ct_exec(vmid, ["sh", "-c", setup])
        mounted = r.returncode == 0
        assert mounted and str(pid) in r.stdout.split(), r.stderr

        code, out, err = dfctl(capsys, "stop", "fk", "--grace-s", "1")
        assert code == 2, (code, err)
        assert "run fk" in err and f"(pid {pid})" in err and f"CT {vmid}: /proc is not procfs" in err, err
        assert "nothing was signalled" in err
        assert ct_pid_alive(rig_host, vmid, pid), "stop signalled the process that got the pid"
        # the status read (`dfctl runs`): the fake /proc says the run lives; the node says it ended
        code, out, err = dfctl(capsys, "runs", "--json")
        assert code == 0 and [r["state"] for r in json.loads(out)] == ["ended"], out

        outcome = auto_stacks_outcome("fk")
        assert outcome.dump is None and f"CT {vmid}: /proc is not procfs" in (outcome.error or ""), outcome
        assert "nothing dumped" in outcome.error
        outputs = [err, repr(outcome)]
    finally:
        if mounted:
            rig_host.ct_exec(vmid, ["umount", "/proc"])
        rig_host.ct_exec(vmid, ["kill", str(pid)])
    after = os.stat(node_only_file)
    assert after.st_atime == before.st_atime, "the node-only file was read"
    for text in outputs:
        assert "NODE-ONLY" not in text and str(before.st_ino) not in text and "12337" not in text


def test_stop_of_a_deployed_run_behind_a_fake_proc_is_refused_not_reported_done(rig, rig_host, capsys, tmp_path,
                                                                                 monkeypatch):
    """A run dfctl deployed into the CT, then an empty made-up /proc mounted over the CT's:
    inside the CT the run's pid is no process, so the stop there signalled nothing and said
    it was done while the run lived on. The node's view refuses instead, naming the CT."""
    vmid = rig_host.vmid_running
    root = make_project(tmp_path / "proj", git=True)
    pb = ticker_playbook(root, kind="pct",
                         extra_target=target_toml(rig, rig_host, f"/workspace/stop-dep-{os.getpid()}").split("\n", 1)[1])
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run_id = json.loads(out)["run"]["run_id"]
    wait_for(lambda: live_pids_of_run(run_id), what="the deployed run's process")
    setup = "set -e; mkdir -p /tmp/emptyproc/1; printf '1 (init) S 0 1 1 0' > /tmp/emptyproc/1/stat; " \
            "mount --bind /tmp/emptyproc /proc"
    mounted = False
    try:
        r = rig_host.ct_exec(vmid, ["sh", "-c", setup])
        mounted = r.returncode == 0
        assert mounted, r.stderr
        code, out, err = dfctl(capsys, "stop", run_id, "--grace-s", "5")
        assert code == 2, (code, err)
        assert f"run {run_id} (pid " in err and f"CT {vmid}: /proc is not procfs" in err, err
        assert "nothing was signalled" in err
        assert live_pids_of_run(run_id), "the run was signalled"
        code, out, err = dfctl(capsys, "runs", "--json")
        # the status read: alive by the node's /proc (the CT's empty one said it had died, `failed`)
        assert [r["state"] for r in json.loads(out) if r["run_id"] == run_id] == ["running"], out
    finally:
        if mounted:
            rig_host.ct_exec(vmid, ["umount", "/proc"])
    code, out, err = dfctl(capsys, "stop", run_id, "--grace-s", "5", "--json")   # the CT's own /proc again
    assert code == 0 and json.loads(out)["left"] == [], (code, out, err)
    wait_for(lambda: not live_pids_of_run(run_id), what="the run to end")
