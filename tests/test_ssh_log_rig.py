"""paramiko's own log on the real rig: a stalled sshd (TCP connects, no banner) and a cut
link print dfctl's one line per failure on stderr -- not paramiko's tracebacks (`Error
reading SSH protocol banner` + its EOFError traceback) nor its `Socket exception: No route
to host (113)` line. Each through a fresh Python process with no logging configured, as the
`dfctl` command runs (pytest's log capture would hide paramiko's records in-process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from tests.test_watch import ROOT

pytestmark = pytest.mark.rig

SCRIPT = textwrap.dedent("""
    import sys, time
    from controller.errors import DfctlError, one_line
    from controller.playbook import TargetConfig
    from controller.transport.factory import open_host_transport
    t = open_host_transport(TargetConfig(kind="ssh", host=sys.argv[1], ssh_config=sys.argv[2],
                                         connect_timeout_s=float(sys.argv[3])))
    if sys.argv[4] == "twice":
        t.run(["true"])
        print("connected", flush=True)
        sys.stdin.readline()          # the parent cuts the link now
    try:
        t.run(["sleep", "30"], timeout_s=20)
    except DfctlError as exc:
        print(f"dfctl: error: {one_line(exc.message)}", file=sys.stderr)
        time.sleep(0.5)               # paramiko's thread would log its failure meanwhile
        sys.exit(exc.exit_code)
""")


def _client(rig, host, timeout_s: float, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SCRIPT, host.name, str(rig.ssh_config_path), str(timeout_s), mode],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/root"})


def _one_line_per_failure(err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dfctl: error: "), err
    assert "Traceback" not in err and "Socket exception" not in err


def test_stalled_sshd_prints_one_line_not_paramikos_traceback(rig, rig_host):
    rig_host.sigstop_sshd()
    try:
        p = _client(rig, rig_host, 1.5, "once")
        _, err = p.communicate(timeout=60)
    finally:
        rig_host.sigcont_sshd()
    assert p.returncode == 3
    _one_line_per_failure(err)
    assert rig_host.name in err


def test_link_cut_mid_session_prints_one_line_not_socket_exception(rig, rig_host):
    p = _client(rig, rig_host, 2.0, "twice")
    try:
        assert p.stdout.readline().strip() == "connected"
        rig_host.link_down()
        t0 = time.monotonic()
        p.stdin.write("go\n")
        p.stdin.flush()
        _, err = p.communicate(timeout=120)
    finally:
        rig_host.link_up()
    assert p.returncode == 3 and time.monotonic() - t0 < 100
    _one_line_per_failure(err)
