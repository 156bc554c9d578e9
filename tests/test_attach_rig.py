"""dfctl scan / attach / stop / stacks against the rig (real sshd, real LXC CT, pct stand-in),
on the seeds' case: the bundled trainer started by hand in CT 200 with nohup, stdout to a
file and no PYTHONUNBUFFERED -- its log block-buffered while metrics.jsonl and wandb advance."""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest

from tests.deploy_support import dfctl, wait_for

pytestmark = pytest.mark.rig

from tests.test_deploy_rig import CT_PYTHON, PROJECT  # noqa: E402


def start_by_hand(host, vmid: int, run_dir: str, *, data_dir: str, seed: int = 0) -> None:
    """The seeds' way: `nohup python -m trainer … > train.log 2>&1 &` in a shell in the CT,
    stdout a regular file, PYTHONUNBUFFERED unset (pct keeps no such variable here)."""
    argv = ["env", "-u", "PYTHONUNBUFFERED", f"PYTHONPATH={PROJECT}", "OMP_NUM_THREADS=1", "WANDB_MODE=offline",
            "WANDB_SILENT=true", "nohup", CT_PYTHON, "-m", "trainer", "--config", "tiny", "--data", data_dir,
            "--synthetic-samples", "300", "--run-dir", run_dir, "--steps", "100000", "--log-every", "1",
            "--seed", str(seed)]
    script = f"mkdir -p {run_dir}; cd {run_dir}; {shlex.join(argv)} > {run_dir}/train.log 2>&1 < /dev/null &"
    r = host.ct_exec(vmid, ["sh", "-c", script], timeout_s=60)
    assert r.returncode == 0, r.stderr


def metrics_lines(host, vmid: int, run_dir: str) -> int:
    path = host.container_path(vmid, f"{run_dir}/metrics.jsonl")
    return path.read_text().count("\n") if path.exists() else 0


def ct_pid_alive(host, vmid: int, pid: int) -> bool:
    r = host.ct_exec(vmid, ["cat", f"/proc/{pid}/stat"])
    return r.returncode == 0 and r.stdout.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def ct_pid_free(host, vmid: int, pid: int) -> bool:
    """Reaped, not only dead: a zombie still holds the pid respawn_with_pid asks for."""
    return host.ct_exec(vmid, ["test", "-e", f"/proc/{pid}"]).returncode != 0


def target_args(rig, host, vmid: int) -> list[str]:
    return ["--target", f"pct:{host.name}:{vmid}", "--ssh-config", str(rig.ssh_config_path)]


def test_scan_attach_stacks_stop_hand_started_trainer(rig, rig_host, capsys, tmp_path):
    vmid = rig_host.vmid_running
    base = f"/workspace/attach-{os.getpid()}"
    first, second = f"{base}/first", f"{base}/second-run"
    # both started at once: their start-ups overlap (the dataset is written by rename: the
    # one that loses the race reads the other's)
    start_by_hand(rig_host, vmid, first, data_dir=f"{base}/data")
    start_by_hand(rig_host, vmid, second, data_dir=f"{base}/data", seed=7)
    wait_for(lambda: metrics_lines(rig_host, vmid, first) >= 2, timeout_s=240, what="the first run's metrics")
    wait_for(lambda: metrics_lines(rig_host, vmid, second) >= 1, timeout_s=240, what="the second run's metrics")

    # scan: one round trip to the node, the CT read through /proc/<CT init>/root
    code, out, err = dfctl(capsys, "scan", *target_args(rig, rig_host, vmid), "--json")
    assert code == 0, err
    doc = json.loads(out)
    ours = {p["log"]["path"]: p for p in doc["processes"] if p["log"] and p["log"]["path"].startswith(base)}
    assert set(ours) == {f"{first}/train.log", f"{second}/train.log"}, doc["processes"]
    p1 = ours[f"{first}/train.log"]
    assert doc["round_trips"] == 1 and p1["where"] == f"ct {vmid}" and p1["user"] == "root"
    assert p1["env"] == {"pythonunbuffered": False, "python_u_flag": False, "stdout_kind": "file",
                         "stderr_kind": "file", "block_buffered": True}
    assert p1["metrics_jsonl"] == [f"{first}/metrics.jsonl"] and p1["cwd"] == first
    assert p1["argv"][1:3] == ["-m", "trainer"] and p1["rss_bytes"] > 50 << 20
    code, out, _ = dfctl(capsys, "scan", *target_args(rig, rig_host, vmid))
    row = next(line for line in out.splitlines() if f" {p1['pid']} " in line)
    assert code == 0 and " buffered " in row and f"ct {vmid}" in row

    # every running CT of the node (lxc-ls there, no pct), still one round trip
    code, out, err = dfctl(capsys, "scan", "--target", f"pct:{rig_host.name}:all", "--ssh-config",
                           str(rig.ssh_config_path), "--json")
    assert code == 0, err
    every = json.loads(out)
    assert every["round_trips"] == 1 and {p["pid"] for p in every["processes"] if p["where"] == f"ct {vmid}"} >= \
        {p["pid"] for p in ours.values()}

    # the fallback for a CT whose procfs the node cannot see: the same scan inside it (pct exec)
    from controller.playbook import TargetConfig
    from controller.probe.scan import scan_target
    from controller.transport.factory import close_all

    inside = scan_target(TargetConfig(kind="pct", host=rig_host.name, vmid=vmid, ssh_config=str(rig.ssh_config_path)),
                         force_pct=True)
    close_all()
    seen = {p.pid: p for p in inside.processes}
    assert inside.round_trips == 2 and not inside.errors, inside.errors
    assert seen[p1["pid"]].log.path == f"{first}/train.log" and seen[p1["pid"]].block_buffered is True

    # ambiguity: both runs match -> exit 2 naming both, nothing registered
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--match", "-m trainer")
    assert code == 2 and str(p1["pid"]) in err and str(ours[f"{second}/train.log"]["pid"]) in err, err
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert json.loads(out) == []

    pb = tmp_path / "ct.toml"       # the PLAYBOOK form: its [watch] applies to the attached run
    pb.write_text(f'[target]\nkind = "pct"\nhost = "{rig_host.name}"\nvmid = {vmid}\nworkdir = "/var/tmp/dfctl"\n'
                  f'python = "{CT_PYTHON}"\nssh_config = "{rig.ssh_config_path}"\n[watch]\nstale_log_s = 5\n')
    code, out, err = dfctl(capsys, "attach", str(pb), "--log", f"{first}/train.log", "--name", "seeds", "--json")
    assert code == 0, err
    att = json.loads(out)
    run1 = att["run"]["run_id"]
    assert att["run"]["pid"] == p1["pid"] and att["run"]["origin"] == "attached"
    assert att["attachment"]["env"]["block_buffered"] is True
    assert att["attachment"]["log"]["inode"] == p1["log"]["inode"]
    assert att["attachment"]["sources"]["metrics_jsonl"] == [f"{first}/metrics.jsonl"]
    assert att["attachment"]["sources"]["wandb_run_id"]          # the offline run dir it holds open
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--match", r"second-run",
                           "--name", "second", "--json")
    assert code == 0, err
    run2 = json.loads(out)["run"]["run_id"]
    assert json.loads(out)["run"]["pid"] == ours[f"{second}/train.log"]["pid"]
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert {r["run_id"]: r["state"] for r in json.loads(out)} == {run1: "running", run2: "running"}

    # the seeds' case: the watch says stale_log with what attach saw, and its automatic
    # dump puts the trainer's threads into the evidence
    from controller.store.runstore import RunStore
    from controller.watch import Watch

    store = RunStore()
    w = Watch([store.get_run(run1)], store, gpu=False, interval_s=1.0)
    try:
        st = w.states[0]

        def explained():
            w.tick()
            f = next((f for f in st.findings if f.kind == "stale_log"), None)
            return f if f is not None and any(e.startswith("stacks: ") for e in f.evidence) else None

        f = wait_for(explained, timeout_s=180, interval_s=0.5, what="stale_log with the automatic dump's frames")
        assert st.state == "running" and f.summary.startswith("log block-buffered: ")
        assert f.evidence[0].startswith("stdout is a regular file, PYTHONUNBUFFERED unset, no python -u, log "
                                        "unchanged "), f.evidence
        assert " while metrics advanced " in f.evidence[0] and "dfctl deploy PLAYBOOK --replace" in f.hint
        assert any("thread MainThread: " in e for e in f.evidence)
        assert store.stacks(run1) and store.findings(run1)[0].evidence == f.evidence
    finally:
        w.close()
        store.close()

    # stacks: real py-spy, shipped into the CT (its PATH has none), run there
    code, out, err = dfctl(capsys, "stacks", run1, "--json")
    assert code == 0, err
    dump = json.loads(out)
    names = {t["name"] for t in dump["threads"]}
    assert "MainThread" in names and any(n and n.startswith("target-") for n in names), names
    assert "shipped by dfctl" in dump["py_spy"] and " in " in dump["summary"]
    code, out, err = dfctl(capsys, "stacks", run1)   # the copy the watch's dump shipped is reused
    assert code == 0 and "pushed now" not in out and "Thread" not in err
    from controller.ship.stacks import py_spy_check
    from controller.transport.factory import open_transport

    tgt = TargetConfig(kind="pct", host=rig_host.name, vmid=vmid, ssh_config=str(rig.ssh_config_path),
                       workdir="/var/tmp/dfctl")
    row = py_spy_check(open_transport(tgt), tgt)         # what doctor says for this target
    close_all()
    assert row["ok"] is True and row["detail"].startswith("shipped by dfctl (/var/tmp/dfctl/tools/py-spy-")

    # stop: SIGTERM on the run's group; the other run lives on
    code, out, err = dfctl(capsys, "stop", run1, "--grace-s", "20", "--json")
    assert code == 0 and json.loads(out)["left"] == [] and json.loads(out)["signals"][0] == "SIGTERM", err
    assert not ct_pid_alive(rig_host, vmid, p1["pid"])
    assert ct_pid_alive(rig_host, vmid, ours[f"{second}/train.log"]["pid"])
    code, out, err = dfctl(capsys, "stop", run2, "--grace-s", "20", "--json")
    assert code == 0 and json.loads(out)["left"] == []
    code, out, err = dfctl(capsys, "watch", run1, "--once", "--json")    # stopped, not crashed
    w1 = json.loads(out)["runs"][0]
    assert w1["state"] == "stopped" and not [f for f in w1["findings"] if f["kind"] == "crash"], w1
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert {r["run_id"]: (r["state"], r["exit_code"]) for r in json.loads(out)} == \
        {run1: ("stopped", None), run2: ("stopped", None)}


def test_attach_pid_exits_mid_attach_nothing_registered(rig, rig_host, capsys, monkeypatch):
    vmid = rig_host.vmid_running
    run_dir = f"/workspace/attach-gone-{os.getpid()}"
    script = (f"mkdir -p {run_dir}; cd {run_dir}; nohup {CT_PYTHON} -c 'import time\nwhile 1: print(1, flush=True); "
              f"time.sleep(0.2)' > {run_dir}/out.log 2>&1 < /dev/null & echo $!")
    r = rig_host.ct_exec(vmid, ["sh", "-c", script])
    pid = int(r.stdout.split()[-1])
    import controller.adopt.attach as attach

    real_find = attach.find_run

    def find_then_kill(*a, **kw):
        report = real_find(*a, **kw)            # the first round trip saw it alive
        rig_host.ct_exec(vmid, ["kill", "-9", str(pid)])
        wait_for(lambda: not ct_pid_alive(rig_host, vmid, pid), what="the process to die")
        return report

    monkeypatch.setattr(attach, "find_run", find_then_kill)
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid))
    assert code == 2 and f"pid {pid} exited during attach" in err and "nothing registered" in err, err
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert json.loads(out) == []
    monkeypatch.setattr(attach, "find_run", real_find)
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid))
    assert code == 2 and f"no process {pid}" in err
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--log", f"{run_dir}/nobody.log")
    assert code == 2 and f"writes {run_dir}/nobody.log" in err


PTRACE_CT = 203


def test_stacks_ptrace_denied_names_the_capability(rig, rig_host, capsys):
    """A CT whose config drops sys_ptrace (lxc.cap.drop), the run under another uid: the
    kernel refuses py-spy (real EPERM); the message names CAP_SYS_PTRACE and the sysctl."""
    rig_host.add_container(PTRACE_CT, "lxc.cap.drop = sys_ptrace")
    run_dir = f"/workspace/ptrace-{os.getpid()}"
    prog = "import time\nwhile 1:\n    print('[progress] step=1', flush=True)\n    time.sleep(0.2)\n"
    script = (f"mkdir -p {run_dir}; chmod 777 {run_dir}; cd {run_dir}; nohup setpriv --reuid 65534 --regid 65534 "
              f"--clear-groups {CT_PYTHON} -c {shlex.quote(prog)} train > {run_dir}/train.log 2>&1 < /dev/null &")
    assert rig_host.ct_exec(PTRACE_CT, ["sh", "-c", script]).returncode == 0
    log = rig_host.container_path(PTRACE_CT, f"{run_dir}/train.log")
    wait_for(lambda: log.exists() and log.stat().st_size > 0, what="the run's log")
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, PTRACE_CT), "--log", f"{run_dir}/train.log",
                           "--name", "noptrace", "--json")
    assert code == 0, err
    att = json.loads(out)
    assert att["attachment"]["user"] == "nobody" or att["attachment"]["uid"] == 65534
    t0 = time.monotonic()
    code, out, err = dfctl(capsys, "stacks", att["run"]["run_id"])
    assert code == 1 and "ptrace of the run is not permitted" in err and "lacks CAP_SYS_PTRACE" in err, err
    assert "kernel.yama.ptrace_scope" in err and "lxc.cap.drop" in err and "Traceback" not in err
    assert time.monotonic() - t0 < 120
    code, out, err = dfctl(capsys, "stop", att["run"]["run_id"], "--json")
    assert code == 0 and json.loads(out)["left"] == [], err


def test_scan_maps_gpus_held_through_cgroup_and_nspid(rig, rig_host, capsys):
    """nvidia-smi (the rig's stand-in, driver 580 formats) lists compute apps by HOST pid;
    scan names the CT process that holds each GPU (cgroup /lxc/<vmid>/, innermost NSpid)."""
    from tests.rig.gpus import FakeComputeApp, busy_gpu, default_gpus

    vmid = rig_host.vmid_running
    run_dir = f"/workspace/gpus-{os.getpid()}"
    prog = "import time\nwhile 1:\n    print('[progress] step=1', flush=True)\n    time.sleep(0.5)\n"
    r = rig_host.ct_exec(vmid, ["sh", "-c", f"mkdir -p {run_dir}; cd {run_dir}; printf %s {shlex.quote(prog)} > t.py; "
                                            f"nohup {CT_PYTHON} t.py > train.log 2>&1 < /dev/null & echo $!"])
    ct_pid = int(r.stdout.split()[-1])
    try:
        def host_pid():
            for hp in rig_host.container_host_pids(vmid):
                try:
                    status = open(f"/proc/{hp}/status").read()
                except OSError:
                    continue
                ns = [ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")]
                if ns and ns[0][-1] == str(ct_pid):
                    return hp
            return None

        hp = wait_for(host_pid, what="the CT process's host pid")
        gpus = default_gpus()
        gpus[3] = busy_gpu(3, apps=[FakeComputeApp(pid=hp, used_memory_mib=4242)])
        gpus[5] = busy_gpu(5, apps=[FakeComputeApp(pid=hp, used_memory_mib=17)])
        rig_host.set_gpus(gpus)
        code, out, err = dfctl(capsys, "scan", *target_args(rig, rig_host, vmid), "--json")
        assert code == 0, err
        row = next(p for p in json.loads(out)["processes"] if p["pid"] == ct_pid)
        assert [(g["index"], g["used_mib"]) for g in row["gpus"]] == [(3, 4242.0), (5, 17.0)]
        assert row["log"]["path"] == f"{run_dir}/train.log"
    finally:
        rig_host.reset_gpus()
        rig_host.ct_exec(vmid, ["kill", str(ct_pid)])


def respawn_with_pid(host, vmid: int, pid: int) -> bool:
    """A new process in the CT that gets `pid` (a `sleep 600`): the CT's own procfs mounted
    afresh (its /proc/sys is read-only, as LXC mounts it) to set ns_last_pid, tried until
    it lands (other processes of the CT may fork meanwhile)."""
    script = (f"set -e; mkdir -p /tmp/pidns-proc; mountpoint -q /tmp/pidns-proc || mount -t proc proc /tmp/pidns-proc; "
              f"for i in $(seq 200); do echo {pid - 1} > /tmp/pidns-proc/sys/kernel/ns_last_pid; "
              f"setsid sleep 600 > /dev/null 2>&1 < /dev/null & p=$!; [ $p = {pid} ] && break; kill $p; done; "
              f"umount /tmp/pidns-proc; echo $p")
    r = host.ct_exec(vmid, ["sh", "-c", script])
    return r.returncode == 0 and r.stdout.split()[-1] == str(pid)


def start_loop(host, vmid: int, run_dir: str, *, buffered: bool = True, wrapped: bool = False) -> int:
    """A loop printing the seeds' free-form `step N loss 1.4292 tok/s 6020`, started by hand in the CT with nohup
    (stdout train.log); `wrapped`: under `nohup sh -c '… > train.log 2>&1; echo done'` whose
    own output is wrapper.out. Returns the pid nohup started (the wrapper's, when wrapped)."""
    loop = ("import time\nstep = 0\nwhile True:\n    step += 1\n"
            "    print('step %d loss 1.4292 tok/s 6020' % step)\n    time.sleep(0.005)\n")
    env = "env -u PYTHONUNBUFFERED" if buffered else "env PYTHONUNBUFFERED=1"
    inner = f"{CT_PYTHON} loop.py > {run_dir}/train.log 2>&1"
    cmd = f"{env} nohup sh -c {shlex.quote(inner + '; echo done')} > {run_dir}/wrapper.out 2>&1" if wrapped else \
        f"{env} nohup {inner}"
    script = (f"mkdir -p {run_dir}; cd {run_dir}; printf %s {shlex.quote(loop)} > loop.py; "
              f"{cmd} < /dev/null & echo $!")
    r = host.ct_exec(vmid, ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    log = host.container_path(vmid, f"{run_dir}/train.log")
    wait_for(lambda: log.exists() and log.stat().st_size > 0, what="the loop's first bytes in train.log")
    return int(r.stdout.split()[-1])


def test_a_reused_pid_is_another_process_for_attach_watch_stacks_stop(rig, rig_host, capsys, monkeypatch):
    """Issue 27 item 2: a process is (pid, start time, pid namespace). The CT hands the
    attached run's pid to a new process: the watch says the run ended, stacks and stop
    refuse it; a pid reused between attach's scan and its confirmation: exit 2 naming it."""
    vmid = rig_host.vmid_running
    base = f"/workspace/reuse-{os.getpid()}"
    pid = start_loop(rig_host, vmid, f"{base}/a")
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid), "--name", "reuse")
    assert code == 0, err
    code, out, err = dfctl(capsys, "watch", "reuse", "--once", "--json")
    assert json.loads(out)["runs"][0]["state"] == "running", out
    rig_host.ct_exec(vmid, ["kill", "-9", str(pid)])
    wait_for(lambda: ct_pid_free(rig_host, vmid, pid), what="the run's pid to be free")
    assert respawn_with_pid(rig_host, vmid, pid), "could not get the freed pid back in the CT"
    try:
        code, out, err = dfctl(capsys, "watch", "reuse", "--once", "--json")
        w = json.loads(out)["runs"][0]
        assert w["state"] in ("ended", "failed") and ct_pid_alive(rig_host, vmid, pid), w
        code, out, err = dfctl(capsys, "stacks", "reuse")
        assert code == 1 and f"pid {pid} now belongs to another process" in err, err
        code, out, err = dfctl(capsys, "stop", "reuse", "--grace-s", "1")
        assert ct_pid_alive(rig_host, vmid, pid), "stop signalled the process that got the pid"
        # refused by the node's own view (node_identity) before anything runs in the CT
        assert code == 2 and f"(pid {pid}): pid {pid} now belongs to another process" in err, err
        assert "pid:[" in err and "nothing was signalled" in err, err
    finally:
        rig_host.ct_exec(vmid, ["kill", str(pid)])

    # between attach's two round trips
    pid2 = start_loop(rig_host, vmid, f"{base}/b")
    import controller.adopt.attach as attach

    real_find = attach.find_run

    def find_then_reuse(*a, **kw):
        report = real_find(*a, **kw)
        rig_host.ct_exec(vmid, ["kill", "-9", str(pid2)])
        wait_for(lambda: ct_pid_free(rig_host, vmid, pid2), what="the run's pid to be free")
        assert respawn_with_pid(rig_host, vmid, pid2)
        return report

    monkeypatch.setattr(attach, "find_run", find_then_reuse)
    try:
        code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(pid2))
        assert code == 2 and f"pid {pid2} was replaced by another process with the same pid ('sleep 600'" in err, err
        assert "nothing registered" in err
    finally:
        rig_host.ct_exec(vmid, ["kill", str(pid2)])


@pytest.mark.parametrize("buffered", [True, False], ids=["block-buffered", "unbuffered"])
def test_attach_of_a_nohup_wrapper_in_a_ct_finds_the_python_and_its_log(rig, rig_host, capsys, buffered):
    """Issue 26 item 2 on the rig: attach --pid of the `nohup sh -c` wrapper: the python
    child is the run, train.log its log (not wrapper.out), the buffered warning judged on
    the python; the watch reads 6020 tok/s from the log."""
    from controller.store.runstore import RunStore
    from controller.watch import Watch

    vmid = rig_host.vmid_running
    run_dir = f"/workspace/wrapped-{os.getpid()}-{int(buffered)}"
    wrapper = start_loop(rig_host, vmid, run_dir, buffered=buffered, wrapped=True)
    child = None
    try:
        code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(wrapper), "--name", "w")
        assert code == 0, err
        assert f"log {run_dir}/train.log" in out and ("block-buffered" in out) is buffered, out
        store = RunStore()
        try:
            rec = store.get_run("w")
            child = rec.pid
            att = store.attachment(rec.run_id)
            assert rec.pid != wrapper and att["wrapper_pid"] == wrapper and att["printer_pid"] == rec.pid
            r = rig_host.ct_exec(vmid, ["cat", f"/proc/{rec.pid}/cmdline"])
            assert r.stdout.split("\0")[1:2] == ["loop.py"], r.stdout
            assert att["env"]["block_buffered"] is buffered
            w = Watch([rec], store, gpu=False, interval_s=0.2)
            try:
                def tok_per_s():
                    w.tick()
                    return next((s.tok_per_s for s in w.states[0].progress if s.tok_per_s), None)
                assert wait_for(tok_per_s, timeout_s=60, what="a progress sample from the log") == 6020
                assert w.states[0].state == "running"
            finally:
                w.close()
        finally:
            store.close()
    finally:
        rig_host.ct_exec(vmid, ["kill", str(wrapper), *([str(child)] if child else [])])
