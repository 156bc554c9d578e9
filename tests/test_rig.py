"""The test rig's own contract: what other tests rely on when they use `rig` / `rig_host`."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import paramiko
import pytest

from tests.rig.gpus import NA, NOT_SUPPORTED, FakeComputeApp, FakeGpu, busy_gpu
from tests.rig.network import guard_route_present, list_links, list_netns

pytestmark = pytest.mark.rig

PCT_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"


def ssh(host, *argv: str, known_hosts: Path | None = None, timeout_s: float = 60):
    """Run argv on `host` through OpenSSH, quoted so it arrives byte-exact."""
    cmd = host.ssh_argv(shlex.join(argv))
    if known_hosts is not None:
        cmd[1:1] = ["-o", f"UserKnownHostsFile={known_hosts}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)


def banner(address: str, timeout_s: float) -> bytes:
    with socket.create_connection((address, 22), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        return sock.recv(64)


# ---- hosts and ssh --------------------------------------------------------------------------

def test_guard_route_and_one_namespace_per_host(rig):
    assert guard_route_present()
    assert len(rig.hosts) >= 2
    addresses = {h.address for h in rig.hosts}
    assert len(addresses) == len(rig.hosts)
    for h in rig.hosts:
        assert h.netns in list_netns()
        assert h.link.host_dev in list_links() and len(h.link.host_dev) <= 15
        assert h.address.startswith("10.200.") and h.address.endswith(".2")


def test_openssh_alias_key_and_known_hosts(rig):
    for h in rig.hosts:
        proc = ssh(h, "sh", "-c", 'echo "$HOME|$PATH|$(hostname)|$(pct exec 200 -- hostname)"')
        assert proc.returncode == 0, proc.stderr
        home, path, node, ct = proc.stdout.strip().split("|")
        assert (node, ct) == (h.node, "ct200")
        assert home == str(h.home_dir) and not any(Path(home).iterdir())  # no pyenv .bashrc
        assert path.split(":")[0] == str(h.bin_dir)
    config = rig.ssh_config_path.read_text()
    assert f"Host {rig.hosts[0].name}\n  HostName {rig.hosts[0].address}\n" in config


def test_unknown_host_key_is_refused_by_strict_checking(rig, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    proc = ssh(rig.hosts[0], "true", known_hosts=empty)
    assert proc.returncode == 255
    assert "Host key verification failed" in proc.stderr


def test_paramiko_connects_with_rig_key_and_known_hosts(rig):
    h = rig.hosts[1]
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.load_host_keys(str(rig.known_hosts_path))
    client.connect(h.address, port=h.port, username=h.user, key_filename=str(rig.identity_file),
                   look_for_keys=False, allow_agent=False, timeout=10)
    try:
        _, stdout, _ = client.exec_command("pct status 200")
        assert stdout.read() == b"status: running\n"
        assert stdout.channel.recv_exit_status() == 0
    finally:
        client.close()


# ---- pct stand-in ---------------------------------------------------------------------------

def test_pct_exec_sets_pct_path(rig_host):
    proc = ssh(rig_host, "pct", "exec", "200", "--", "sh", "-c", "echo $PATH")
    assert (proc.returncode, proc.stdout) == (0, PCT_PATH + "\n")


def test_pct_exec_parses_options_anywhere_like_pct(rig_host):
    proc = ssh(rig_host, "pct", "exec", "200", "ls", "-la")
    assert proc.returncode == 255
    assert "Unknown option: la" in proc.stderr and "400 unable to parse option" in proc.stderr
    moved = rig_host.host_exec(["pct", "exec", "--keep-env", "0", "200", "--", "env"])
    assert moved.returncode == 0 and "container=lxc" in moved.stdout
    assert f"HOME={rig_host.home_dir}" not in moved.stdout  # --clear-env


@pytest.mark.parametrize("script,status", [("exit 7", 7), ("kill -9 $$", 137), ("kill -TERM $$", 143)])
def test_exit_and_signal_status_pass_through_ssh(rig_host, script, status):
    proc = ssh(rig_host, "pct", "exec", "200", "--", "sh", "-c", script)
    assert proc.returncode == status


def test_pct_errors_for_stopped_absent_ct_and_missing_command(rig_host):
    stopped = ssh(rig_host, "pct", "exec", "201", "--", "true")
    assert (stopped.returncode, stopped.stderr) == (255, "container '201' not running!\n")
    absent = rig_host.host_exec(["pct", "exec", "999", "--", "true"])
    assert absent.returncode == 255
    assert absent.stderr == f"Configuration file 'nodes/{rig_host.node}/lxc/999.conf' does not exist\n"
    missing = rig_host.host_exec(["pct", "exec", "200"])
    assert missing.returncode == 255 and missing.stderr.startswith("missing command")
    status = rig_host.host_exec(["pct", "status", "201"])
    assert status.stdout == "status: stopped\n"


def test_hide_tool_takes_pct_off_the_host(rig_host):
    rig_host.hide_tool("pct")
    gone = ssh(rig_host, "pct", "status", "200")
    assert gone.returncode == 127 and "pct: command not found" in gone.stderr
    rig_host.reset()
    assert ssh(rig_host, "pct", "status", "200").returncode == 0


def test_pct_list_and_config(rig_host):
    listing = rig_host.host_exec(["pct", "list"]).stdout.splitlines()
    assert listing[0] == "VMID       Status     Lock         Name                "
    assert listing[1].startswith("200        running                 ct200")
    assert listing[2].startswith("201        stopped")
    config = rig_host.host_exec(["pct", "config", "200"]).stdout
    assert f"mp0: {rig_host.workspace_dir},mp=/workspace\n" in config
    assert config.splitlines() == sorted(config.splitlines())


def test_pct_push_pull_and_missing_dir_quirk(rig_host, tmp_path):
    src = tmp_path / "payload.bin"
    src.write_bytes(os.urandom(4096))
    bad = rig_host.host_exec(["pct", "push", "200", str(src), "/no/such/dir/payload.bin"])
    assert bad.returncode == 0  # real pct: the error is printed, the exit status is 0
    assert "failed to create file: /no/such/dir/payload.bin: No such file or directory" in bad.stdout
    ok = rig_host.host_exec(["pct", "push", "200", str(src), "/workspace/payload.bin", "--perms", "600"])
    assert (ok.returncode, ok.stdout) == (0, "")
    pushed = rig_host.workspace_dir / "payload.bin"
    assert pushed.read_bytes() == src.read_bytes() and pushed.stat().st_mode & 0o777 == 0o600
    back = tmp_path / "back.bin"
    pulled = rig_host.host_exec(["pct", "pull", "200", "/workspace/payload.bin", str(back)])
    assert pulled.returncode == 0 and back.read_bytes() == src.read_bytes()
    to_stopped = rig_host.host_exec(["pct", "push", "201", str(src), "/workspace/x"])
    assert to_stopped.returncode == 255 and "can only push files to a running CT" in to_stopped.stderr


def test_detached_child_survives_and_exec_returns_at_once(rig_host):
    ws = rig_host.workspace_dir
    for name in ("go", "marker"):
        (ws / name).unlink(missing_ok=True)
    child = 'while [ ! -e /workspace/go ]; do sleep 0.05; done; echo survived > /workspace/marker'
    started = time.monotonic()
    proc = ssh(rig_host, "pct", "exec", "200", "--", "sh", "-c",
               f"cd /workspace; setsid nohup sh -c {shlex.quote(child)} >/dev/null 2>&1 </dev/null & echo $!")
    elapsed_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert not (ws / "marker").exists()  # the exec returned while the child still waits
    assert elapsed_s < 20
    (ws / "go").touch()
    wait_until(lambda: (ws / "marker").exists() and (ws / "marker").read_text() == "survived\n",
               30, "the detached child to finish after the exec returned")


def test_workspace_is_host_dir_and_container_path(rig_host):
    (rig_host.workspace_dir / "from-host.txt").write_text("hello ct\n")
    seen = rig_host.ct_exec(200, ["cat", "/workspace/from-host.txt"])
    assert seen.stdout == "hello ct\n"
    rig_host.ct_exec(200, ["sh", "-c", "echo from-ct > /root/inside.txt"], check=True)
    assert rig_host.container_path(200, "/root/inside.txt").read_text() == "from-ct\n"
    assert rig_host.container_path(200, "/workspace/from-host.txt") == rig_host.workspace_dir / "from-host.txt"
    pid = rig_host.host_exec(["lxc-info", "-n", "200", "-p", "-H"]).stdout.strip()
    assert int(pid) == rig_host.container_init_pid(200)
    assert Path(f"/proc/{pid}/root/root/inside.txt").read_text() == "from-ct\n"
    cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    assert "/lxc/200/" in cgroup
    assert (rig_host.ct_cgroup_dir(200) / "memory.oom_control").exists()


def test_project_venv_python_imports_torch_in_ct(rig_host):
    python = str(Path(sys.prefix) / "bin" / "python")
    proc = rig_host.ct_exec(200, [python, "-c", "import torch, sys; print(torch.__version__, sys.prefix)"],
                            timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[1] == sys.prefix


def test_container_stop_start_and_restart_hooks(rig_host):
    rig_host.stop_container(200)
    assert rig_host.host_exec(["pct", "status", "200"]).stdout == "status: stopped\n"
    rig_host.start_container(200)
    assert rig_host.ct_exec(200, ["true"]).returncode == 0
    rig_host.ct_exec(200, ["sh", "-c", "setsid sleep 1000 >/dev/null 2>&1 </dev/null &"], check=True)
    assert "sleep 1000" in rig_host.ct_exec(200, ["ps", "-eo", "args"]).stdout
    cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in rig_host.container_host_pids(200)]
    assert b"sleep\x001000\x00" in cmdlines
    rig_host.restart_container(200)
    assert "sleep 1000" not in rig_host.ct_exec(200, ["ps", "-eo", "args"]).stdout


# ---- nvidia-smi stand-in --------------------------------------------------------------------

def test_nvidia_smi_query_gpu_formats(rig_host):
    rig_host.set_gpus([busy_gpu(0, power_draw_w=689.46), FakeGpu(index=1, power_draw_w=NA,
                                                                   fan_speed_pct=NOT_SUPPORTED)])
    fields = "index,name,utilization.gpu,memory.used,memory.total,memory.free,temperature.gpu," \
             "power.draw,clocks.sm,clocks_event_reasons.active,fan.speed"
    plain = rig_host.host_exec(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    rows = plain.stdout.splitlines()
    assert rows[0] == "0, NVIDIA H200, 100, 1011, 143771, 142146, 53, 689.46, 1515, 0x0000000000000004, [N/A]"
    assert rows[1] == "1, NVIDIA H200, 0, 0, 143771, 143157, 30, [N/A], 345, 0x0000000000000001, [Not Supported]"
    field_notes_query = ("index,name,utilization.gpu,utilization.memory,memory.used,memory.total,memory.free,"
                         "temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,"
                         "clocks_event_reasons.active")
    busy = rig_host.host_exec(["nvidia-smi", "-i", "0", f"--query-gpu={field_notes_query}",
                               "--format=csv,noheader,nounits"])
    assert busy.stdout == ("0, NVIDIA H200, 100, 23, 1011, 143771, 142146, 53, 689.46, 700.00, 1515, 3201, "
                           "P0, 0x0000000000000004\n")  # the busy H200 row in FIELD-NOTES
    full = rig_host.ct_exec(200, ["nvidia-smi", f"--query-gpu={fields}", "--format=csv"]).stdout.splitlines()
    assert full[0] == ("index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
                       "memory.free [MiB], temperature.gpu, power.draw [W], clocks.current.sm [MHz], "
                       "clocks_event_reasons.active, fan.speed [%]")
    assert full[1].startswith("0, NVIDIA H200, 100 %, 1011 MiB, 143771 MiB, 142146 MiB, 53, 689.46 W, 1515 MHz")


def test_nvidia_smi_compute_apps_list_and_unknown_field(rig_host):
    gpu = FakeGpu(index=0, apps=[FakeComputeApp(pid=421, used_memory_mib=1002)])
    rig_host.set_gpus([gpu, FakeGpu(index=1)])
    apps = rig_host.host_exec(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                               "--format=csv,noheader"])
    assert apps.stdout == f"421, {gpu.uuid}, 1002 MiB\n"
    listing = rig_host.host_exec(["nvidia-smi", "-L"]).stdout.splitlines()
    assert listing == [f"GPU 0: NVIDIA H200 (UUID: {gpu.uuid})",
                       f"GPU 1: NVIDIA H200 (UUID: {FakeGpu(index=1).uuid})"]
    bad = rig_host.ct_exec(200, ["nvidia-smi", "--query-gpu=index,bogus.field", "--format=csv"])
    assert bad.returncode == 2
    assert bad.stdout == 'Field "bogus.field" is not a valid field to query.\n\n'
    rig_host.set_nvidia_smi_failure()
    failed = rig_host.host_exec(["nvidia-smi", "-L"])
    assert failed.returncode == 9 and "couldn't communicate with the NVIDIA driver" in failed.stdout


# ---- faults ---------------------------------------------------------------------------------

def test_link_down_makes_connect_time_out(rig_host):
    assert banner(rig_host.address, 5).startswith(b"SSH-2.0-")
    rig_host.link_down()
    try:
        started = time.monotonic()
        with pytest.raises((TimeoutError, socket.timeout)):
            banner(rig_host.address, 1.0)
        assert time.monotonic() - started >= 0.9  # a timeout, not an instant refusal
    finally:
        rig_host.link_up()
    assert banner(rig_host.address, 10).startswith(b"SSH-2.0-")


def test_sigstopped_sshd_accepts_tcp_but_sends_no_banner(rig_host):
    rig_host.sigstop_sshd()
    try:
        with socket.create_connection((rig_host.address, 22), timeout=5) as sock:
            sock.settimeout(0.5)
            with pytest.raises((TimeoutError, socket.timeout)):
                sock.recv(64)
    finally:
        rig_host.sigcont_sshd()
    assert banner(rig_host.address, 10).startswith(b"SSH-2.0-")


def test_stopped_sshd_refuses_and_restart_recovers(rig_host):
    rig_host.stop_sshd()
    with pytest.raises(ConnectionRefusedError):
        banner(rig_host.address, 5)
    rig_host.start_sshd()
    assert ssh(rig_host, "true").returncode == 0


def test_rekey_gives_a_changed_host_key(rig_host, rig):
    old = rig_host.host_public_key
    new = rig_host.rekey()
    assert new.split()[1] != old.split()[1]
    proc = ssh(rig_host, "true")
    assert proc.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr
    rig_host.reset()
    assert ssh(rig_host, "true").returncode == 0


def test_small_workspace_fills_up(rig_host):
    small = rig_host.make_small_workspace(256)
    proc = rig_host.ct_exec(small.vmid, ["sh", "-c", "head -c 1048576 /dev/zero > /workspace/big"])
    assert proc.returncode != 0 and "No space left on device" in proc.stderr
    assert small.host_dir.is_dir()


def test_add_host_and_stale_session_cleanup(rig, tmp_path):
    third = rig.ensure_hosts(3)[2]
    assert third.name == "rig-host3" and ssh(third, "pct", "status", "200").stdout == "status: running\n"
    # A session that dies without tearing down: its leftovers go at the next start.
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys
        sys.path.insert(0, %r)
        from tests.rig.rig import Rig
        rig = Rig.create(hosts=1)
        rig.hosts[0].add_fabric_container(210)
        print(rig.hosts[0].netns, rig.hosts[0].link.host_dev, rig.dir, rig.fabric.netns, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """ % str(Path(__file__).resolve().parents[1])))
    from tests.rig.stale import _pids_in_cgroup_prefix, cleanup_stale_sessions, cleanups_held_off
    with cleanups_held_off():   # no other session (an xdist worker's rig starting) cleans them first
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        netns, host_dev, session_dir, fabric = proc.stdout.split()
        assert netns in list_netns() and fabric in list_netns() and Path(session_dir).exists()
        assert _pids_in_cgroup_prefix(netns)  # its CT 200 still runs
    cleanup_stale_sessions()
    assert netns not in list_netns() and fabric not in list_netns()
    assert _pids_in_cgroup_prefix(netns) == []
    assert host_dev not in list_links()
    assert not Path(session_dir).exists()
    assert all(h.netns in list_netns() for h in rig.hosts)  # a live session is left alone


def test_chroot_fallback_backend_behind_the_same_pct(monkeypatch):
    """Where LXC cannot start a CT the rig uses unshare/chroot CTs; keep that path working."""
    from tests.rig.rig import Rig
    monkeypatch.setenv("DFCTL_RIG_BACKEND", "chroot")
    fallback = Rig.create(hosts=1)
    try:
        h = fallback.hosts[0]
        assert fallback.backend == "chroot"
        (h.workspace_dir / "seen").touch()
        probe = ssh(h, "pct", "exec", "200", "--", "sh", "-c",
                    'echo "$PATH $(hostname) $(cat /proc/1/comm)"; ls /workspace/seen; exit 5')
        assert probe.returncode == 5
        assert probe.stdout == f"{PCT_PATH} ct200 init\n/workspace/seen\n"
        killed = h.ct_exec(200, ["sh", "-c", "kill -9 $$"])
        assert killed.returncode == 137
        assert ssh(h, "pct", "exec", "201", "--", "true").stderr == "container '201' not running!\n"
        pid = h.host_exec(["lxc-info", "-n", "200", "-p", "-H"]).stdout.strip()
        assert "/lxc/200/" in Path(f"/proc/{pid}/cgroup").read_text()
    finally:
        fallback.close()
    assert h.netns not in list_netns()


# ---- nvidia-smi stand-in against real output -------------------------------------------------

CAPTURES = Path(__file__).parent / "data" / "nvidia-smi"
FIELD_NOTES_ROWS = {  # FIELD-NOTES "GPUs and nvidia-smi", measured on an H200, driver 580
    "busy-query-gpu-noheader-nounits": "0, GPU-3bc0a1f2-9d7e-4c1b-8a55-0e6f3b2d9c10, NVIDIA H200, 100, 1011, "
                                       "143771, 53, 689.46, 0x0000000000000004\n",
    "list-gpus": "GPU 0: NVIDIA H200 (UUID: GPU-3bc0a1f2-9d7e-4c1b-8a55-0e6f3b2d9c10)\n",
    "unknown-field": 'Field "not_a_field" is not a valid field to query.\n\n',
}
CAPTURE_ARGS = {
    "query-gpu-noheader-nounits": ["--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,"
                                   "temperature.gpu,power.draw,clocks_event_reasons.active",
                                   "--format=csv,noheader,nounits"],
    "query-gpu-csv": ["--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,"
                      "temperature.gpu,power.draw,clocks_event_reasons.active", "--format=csv"],
    "compute-apps": ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"],
    "compute-apps-header": ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv"],
    "list-gpus": ["-L"],
    "unknown-field": ["--query-gpu=index,not_a_field", "--format=csv,noheader,nounits"],
}


def _shape(text: str) -> list[list[str]]:
    """Each CSV cell reduced to its form: digits -> 9, UUIDs -> GPU-<uuid>, names kept."""
    import re
    rows = []
    for line in text.splitlines():
        cells = []
        for cell in line.split(", "):
            cell = re.sub(r"GPU-[0-9a-f-]{8,}", "GPU-<uuid>", cell)
            cell = re.sub(r"0x[0-9a-f]{16}", "0x<mask>", cell)
            cells.append(re.sub(r"\d+", "9", cell))
        rows.append(cells)
    return rows


def test_nvidia_smi_standin_matches_real_output(tmp_path):
    """Same form as real nvidia-smi: FIELD-NOTES rows always, plus every capture in tests/data/nvidia-smi."""
    from tests.rig.gpus import write_scenario
    from tests.rig.host import install_script
    smi = tmp_path / "nvidia-smi"
    install_script(Path(__file__).parent / "rig" / "standins" / "nvidia_smi.py", smi)
    busy = busy_gpu(0, apps=[FakeComputeApp(pid=421)])
    write_scenario(tmp_path / "gpus.json", [busy])
    expected = dict(FIELD_NOTES_ROWS)
    for out in sorted(CAPTURES.glob("*.out")) if CAPTURES.is_dir() else []:
        expected[out.stem] = out.read_text()
    compared = 0
    for name, real in expected.items():
        kind = next((k for k in sorted(CAPTURE_ARGS, key=len, reverse=True) if name.endswith(k)), None)
        if kind is None:
            continue  # e.g. the plain table: the stand-in's is not the real layout
        proc = subprocess.run([str(smi), *CAPTURE_ARGS[kind]], capture_output=True, text=True)
        rc_file = CAPTURES / f"{name}.rc"
        if rc_file.exists():
            assert proc.returncode == int(rc_file.read_text()), name
        if kind == "unknown-field":
            assert (proc.returncode, proc.stdout, proc.stderr) == (2, real, ""), name
        elif kind == "list-gpus":
            assert _shape(proc.stdout)[0] == _shape(real)[0], name
        else:
            real_rows, ours = _shape(real), _shape(proc.stdout)
            if real_rows and ours:
                if kind.endswith("csv") or kind.endswith("header"):
                    assert ours[0] == real_rows[0], f"{name}: header"
                assert ours[-1] == real_rows[-1], f"{name}: row form"
        compared += 1
    assert compared >= len(FIELD_NOTES_ROWS)
