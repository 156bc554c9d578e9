"""A real OpenSSH sshd per fake host, run inside the host's network namespace.

Sessions log in as root, but with `SetEnv HOME=<clean dir> PATH=<host bin>:…`: root's
~/.bashrc (pyenv init, ~100 ms per command) is never read because bash looks for it under
$HOME, and the host's own bin directory (the `pct`, `nvidia-smi` and `lxc-*` stand-ins)
comes first on PATH. OpenSSH 9.2 applies SetEnv after its own defaults, so both win.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from tests.rig.network import nsenter_argv

SSHD = "/usr/sbin/sshd"


def generate_key(path: Path, comment: str) -> str:
    """Write a fresh ed25519 key pair at `path` (+ .pub); return the public line."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    return path.with_name(path.name + ".pub").read_text().strip()


def sshd_config_text(*, address: str, host_key: Path, authorized_keys: Path, home: Path,
                     path_env: str) -> str:
    return "\n".join([
        f"ListenAddress {address}:22",
        f"HostKey {host_key}",
        "PidFile none",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        f"AuthorizedKeysFile {authorized_keys}",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "LogLevel INFO",
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "AllowTcpForwarding yes",
        "Subsystem sftp internal-sftp",
        f"SetEnv HOME={home} PATH={path_env}",
        "",
    ])


class SshServer:
    """One sshd listener (`sshd -D -e`) in a namespace; its session children are separate."""

    def __init__(self, *, netns: str, address: str, config_path: Path, log_path: Path,
                 uts: Path | None = None):
        self.netns = netns
        self.uts = uts
        self.address = address
        self.config_path = config_path
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 15.0) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*nsenter_argv(self.netns, self.uts), SSHD, "-D", "-e", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the SSH banner: proves the listener is up and answering."""
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"sshd for {self.address} exited {self.proc.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection((self.address, 22), timeout=1.0) as sock:
                    sock.settimeout(2.0)
                    if sock.recv(64).startswith(b"SSH-2.0-"):
                        return
            except OSError as exc:
                last_error = exc
            time.sleep(0.01)
        raise RuntimeError(f"sshd at {self.address}:22 not answering after {timeout_s:.0f} s: {last_error}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def session_pids(self) -> list[int]:
        """sshd processes of this host other than the listener (one per open connection)."""
        netns_inode = os.stat(f"/run/netns/{self.netns}").st_ino
        pids = []
        for proc in psutil.process_iter(["name", "pid"]):
            if proc.info["name"] != "sshd" or proc.info["pid"] == self.pid:
                continue
            try:
                if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == netns_inode:
                    pids.append(proc.pid)
            except OSError:
                continue
        return pids

    def stop(self, *, drop_sessions: bool = True) -> None:
        """Kill the listener (and, by default, every open session, as a crashed sshd would)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        if drop_sessions:
            for pid in self.session_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def signal_listener(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"sshd for {self.address} is not running")
        os.kill(self.proc.pid, sig)
