"""The watch against the rig: fake Proxmox hosts (real sshd, real LXC CT 200, pct and
nvidia-smi stand-ins), runs started inside the container the way dfctl's launch does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from controller.playbook import TargetConfig, WatchConfig
from controller.store.runstore import RunRecord, RunStore
from controller.watch import Watch
from tests.rig.gpus import NA, NOT_SUPPORTED, FakeComputeApp, busy_gpu, default_gpus
from tests.test_probe import wait_for
from tests.test_watch import PROGRESS_PROGRAM, tick_until

pytestmark = pytest.mark.rig
ROOT = Path(__file__).resolve().parents[1]


def launch_in_ct(host, name: str, program: str, *, vmid: int = 200) -> Path:
    """Start `program` in the CT under /workspace/<name>: setsid wrapper, pid + exit_code."""
    run_dir = host.workspace_dir / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "prog.py").write_text(textwrap.dedent(program))
    inner = f"echo $$ > pid; PYTHONUNBUFFERED=1 {sys.executable} prog.py > train.log 2>&1; echo $? > exit_code"
    r = host.ct_exec(vmid, ["sh", "-c", f"cd /workspace/{name}; setsid sh -c '{inner}' </dev/null >/dev/null 2>&1 &"])
    assert r.returncode == 0, r.stderr
    wait_for(lambda: (run_dir / "pid").exists() and (run_dir / "train.log").exists(), 30, "run started in CT")
    return run_dir


def ct_record(rig, host, name: str, *, connect_timeout_s: float = 3.0, vmid: int = 200, **watch) -> RunRecord:
    target = TargetConfig(kind="pct", host=host.name, vmid=vmid, ssh_config=str(rig.ssh_config_path),
                          known_hosts=str(rig.known_hosts_path), python=sys.executable,
                          connect_timeout_s=connect_timeout_s)
    cfg = WatchConfig(**{"interval_s": 0.5, **watch})
    return RunRecord(run_id=f"{host.name}-{name}", name=name, target_kind="pct", target=f"pct {vmid} on {host.name}",
                     host=host.name, vmid=vmid, run_dir=f"/workspace/{name}", log_path=f"/workspace/{name}/train.log",
                     started_s=time.time(), playbook={"target": asdict(target), "watch": asdict(cfg)})


def host_pid_of(ct_pid: int, init_pid: int) -> int:
    """The host pid of a CT process (NSpid's last entry is the CT's view)."""
    ns = os.readlink(f"/proc/{init_pid}/ns/pid")
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.readlink(f"/proc/{p}/ns/pid") != ns:
                    continue
                status = Path(f"/proc/{p}/status").read_text()
            except OSError:
                continue
            nspid = [int(x) for x in status.split("NSpid:")[1].splitlines()[0].split()]
            if nspid[-1] == ct_pid:
                return int(p)
    raise AssertionError(f"no host process for CT pid {ct_pid}")


def stop_ct_run(host, run_dir: Path) -> None:
    pid = (run_dir / "pid").read_text().strip()
    host.ct_exec(200, ["sh", "-c", f"kill -9 -{pid} 2>/dev/null; true"])


def test_pct_run_through_the_host_view_gpus_mapped_and_cgroup_read(rig, rig_host, tmp_path):
    host = rig_host
    run_dir = launch_in_ct(host, "gpu-run", PROGRESS_PROGRAM)
    try:
        wait_for(lambda: (run_dir / "trainer.pid").exists(), 30, "trainer pid")
        trainer_ct_pid = int((run_dir / "trainer.pid").read_text())
        init = host.container_init_pid(200)
        trainer_host_pid = host_pid_of(trainer_ct_pid, init)
        gpus = default_gpus(4)
        gpus[1] = busy_gpu(1)
        gpus[1].apps = [FakeComputeApp(pid=trainer_host_pid, used_memory_mib=70000)]
        gpus[2].utilization_gpu_pct = NA
        gpus[2].temperature_c = NOT_SUPPORTED
        host.set_gpus(gpus)
        store = RunStore(tmp_path / "reg.sqlite")
        store.add_run(ct_record(rig, host, "gpu-run"))
        rounds = []
        w = Watch(store.runs(), store, gpu=True)
        st = tick_until(w, lambda: w.states[0].progress and w.states[0].state == "running" and w.states[0],
                        60, "progress from the CT")
        assert w.agent_hosts == [host.name]                              # the long-lived probe agent
        assert st.process.pid == int((run_dir / "pid").read_text())      # the CT-namespace pid
        assert st.process.rss_bytes and st.process.threads >= 2
        assert [g.index for g in st.gpus] == [1] and st.gpus[0].users == [st.run_id]    # mapped via NSpid,
        # named once by the run (not also as "pid N"), and its busy time recorded for gpu_idle
        assert st.gpu_busy_seen_s.get(1) is not None and st.gpus_seen_since_s is not None
        hs = st.host_sample
        assert len(hs.gpus) == 4 and hs.gpus[2].util_pct is None and hs.gpus[2].temp_c is None
        assert hs.gpus[2].mem_total_mib == 143771                      # only that field is None
        assert hs.gpu_processes[0].vmid == 200
        assert isinstance(hs.oom_kill_count, int) and hs.mem_peak_bytes > 0   # CT cgroup (v1 here)
        rounds.append(hs.probe_duration_s)
        # the pct exec fallback reads the same bytes
        w_fallback = Watch(store.runs(), RunStore(tmp_path / "reg2.sqlite"), gpu=False, force_pct=True,
                           persistent=False)
        got: list[bytes] = []
        w_fallback.on_log_bytes = lambda rid, off, data: got.append(data)
        w_fallback.tick()
        assert got and (run_dir / "train.log").read_bytes().startswith(b"".join(got))
        assert w_fallback.states[0].process.state == "running" and w_fallback.agent_hosts == []
        w.close()
        w_fallback.close()
    finally:
        stop_ct_run(host, run_dir)
        host.reset_gpus()


def test_sshd_restart_and_link_down_mid_watch_recover_with_no_byte_lost(rig, rig_host, tmp_path):
    host = rig_host
    run_dir = launch_in_ct(host, "flaky", PROGRESS_PROGRAM)
    try:
        store = RunStore(tmp_path / "reg.sqlite")
        store.add_run(ct_record(rig, host, "flaky", connect_timeout_s=2.0))
        got: list[tuple[int, bytes]] = []
        w = Watch(store.runs(), store, gpu=False, probe_timeout_s=4.0,
                  on_log_bytes=lambda rid, off, data: got.append((off, data)))
        tick_until(w, lambda: w.states[0].state == "running", 60, "running")
        host.restart_sshd()
        tick_until(w, lambda: w.states[0].state == "running" and len(got) >= 3, 60, "recovered after sshd restart")
        host.link_down()
        try:
            tick_until(w, lambda: w.states[0].state == "unreachable", 60, "unreachable while the link is down",
                       interval_s=0.2)
            assert any(f.kind == "unreachable" for f in w.states[0].findings)
            assert not w.hosts[host.name].reachable
            rep = w.tick()                                  # a dead host never holds the tick long
            assert rep.duration_s < w.tick_wait_s + 2.0 and w.states[0].state == "unreachable"
        finally:
            host.link_up()
        n = len(got)
        tick_until(w, lambda: w.states[0].state == "running" and len(got) > n, 90, "recovered after link up")
        tick_until(w, lambda: w.agent_hosts == [host.name], 30, "the probe agent back")
        data = (run_dir / "train.log").read_bytes()
        offsets = [o for o, _ in got]
        joined = b"".join(d for _, d in got)
        assert offsets[0] == 0 and data.startswith(joined)             # contiguous: nothing lost or repeated
        assert all(b - a == len(d) for (a, d), (b, _) in zip(got, got[1:]))
        w.close()
    finally:
        stop_ct_run(host, run_dir)


def test_once_on_a_host_never_reachable_exits_3(rig, rig_host, tmp_path, _dfctl_home):
    host = rig_host
    store = RunStore()
    store.add_run(ct_record(rig, host, "nowhere", connect_timeout_s=2.0))
    host.stop_sshd()
    try:
        p = subprocess.run([sys.executable, "-m", "controller", "watch", f"{host.name}-nowhere", "--once", "--json"],
                           cwd=ROOT, env={**os.environ, "DFCTL_HOME": str(_dfctl_home)},
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 3, p.stdout + p.stderr
        assert host.name in p.stderr
    finally:
        host.start_sshd()


HOG = """
    import os, time
    open("trainer.pid", "w").write(str(os.getpid()))
    print("[milestone] first_step", flush=True)
    while not os.path.exists("go"):
        time.sleep(0.05)
    chunks = []
    for i in range(64):
        chunks.append(bytearray(16 << 20))      # 16 MiB each, touched: RSS grows until the kernel kills
        print("[progress] step=%d mem_alloc_gib=%.2f" % (i + 1, (i + 1) / 64), flush=True)
"""


def test_a_real_kernel_oom_kill_in_the_ct_is_told_apart_by_the_cgroup_counter(rig, rig_host, tmp_path):
    host = rig_host
    rec = ct_record(rig, host, "hog")
    run_dir = launch_in_ct(host, "hog", HOG)
    cg = host.ct_cgroup_dir(200, "memory")
    try:
        store = RunStore(tmp_path / "reg.sqlite")
        store.add_run(rec)
        w = Watch(store.runs(), store, gpu=False)
        st = tick_until(w, lambda: w.states[0].process.state == "running" and w.states[0], 60, "hog running")
        baseline = st.host_sample.oom_kill_count
        assert isinstance(baseline, int)
        st.oom_kill_at_launch = baseline
        (cg / "memory.limit_in_bytes").write_text(str(160 << 20))
        (run_dir / "go").write_text("1")
        wait_for(lambda: (run_dir / "exit_code").exists(), 60, "the kernel OOM killer")
        assert (run_dir / "exit_code").read_text().strip() == "137"
        tick_until(w, lambda: any(f.kind == "oom" for f in w.states[0].findings), 30, "oom finding")
        ooms = [f for f in w.states[0].findings if f.kind == "oom"]
        assert any("OOM killer" in f.summary and f.severity == "critical" for f in ooms), ooms  # certain
        assert w.states[0].host_sample.oom_kill_count > baseline
        w.close()
    finally:
        (cg / "memory.limit_in_bytes").write_text("-1")
        stop_ct_run(host, run_dir)


def test_a_stopped_container_reports_its_runs_unreachable_with_pcts_words(rig, rig_host, tmp_path):
    host = rig_host
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(ct_record(rig, host, "gone", vmid=host.vmid_stopped))
    w = Watch(store.runs(), store, gpu=False)
    w.tick()
    st = w.states[0]
    assert st.state == "unreachable" and w.hosts[host.name].reachable      # the host answers, the CT does not
    (f,) = [f for f in st.findings if f.kind == "unreachable"]
    assert "not running" in " ".join(f.evidence) and "pct status" in f.hint
    w.close()


def test_a_history_gap_is_backfilled_from_the_cts_metrics_jsonl(rig, rig_host, tmp_path):
    """Issue 13.1: a gap an older watch left (rows lost to SIGTERM while the cursor moved past
    them) is filled from the run's metrics.jsonl where the run lives -- here inside CT 200,
    read through the probe on the node -- not only on the local target."""
    from controller.adopt.importers import metrics_samples
    from controller.records import RunCursor
    from controller.store import history
    from controller.watch.backfill import backfill_history

    host = rig_host
    name = f"backfill-{os.getpid()}"
    run_dir = launch_in_ct(host, name, """
        import json
        with open("metrics.jsonl", "a") as m:
            for step in range(1, 41):
                m.write(json.dumps({"step": step, "tok_per_s": 1000.0 + step, "loss": 3.0}) + "\\n")
        print("done")
        """)
    wait_for(lambda: (run_dir / "exit_code").exists(), 30, "the run to end")
    data = (run_dir / "metrics.jsonl").read_bytes()
    rec = ct_record(rig, host, name)
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(rec)
    samples = metrics_samples(data.splitlines())
    history.append_progress(rec.run_id, [s for s in samples if not 11 <= s.step <= 20])   # the gap
    log = (run_dir / "train.log").read_bytes()
    store.set_cursor(rec.run_id, RunCursor(log_inode=(run_dir / "train.log").stat().st_ino, log_offset=len(log),
                                           log_line_no=log.count(b"\n"), metrics_offset=len(data), progress_step=40))
    w = Watch(store.runs(), store, gpu=False)
    try:
        added, where = backfill_history(w.runs[0])
        assert added == 10 and f"/workspace/{name}/metrics.jsonl" in where and host.name in where
        assert history.read_progress(rec.run_id).column("step").to_pylist() == list(range(1, 41))
        assert backfill_history(w.runs[0]) == (0, "")       # checked bytes are not read again
    finally:
        w.close()
