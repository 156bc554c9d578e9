"""Run commands on an SSH host through paramiko, the way OpenSSH users expect.

Why paramiko and not the `ssh` binary: one connection is opened per host and reused for
every command (FIELD-NOTES: a new OpenSSH connection costs ~350 ms, a reused one's exec
~50 ms), and host-key policy, timeouts and keepalive are under our control. Why not
fabric.Connection: its `client` is public and takes our RejectPolicy and known_hosts, and
it would resolve ssh_config and ProxyJump for us -- but measured side by side on the rig
(bench/ssh.py, BENCHMARKS.md "SSH transport") it connects and execs no faster and costs
~0.5 s more import on every `dfctl` start (fabric + invoke: 676 ms against 192 ms), and
fabric 3.2.3 pins invoke < 3 where paramiko 5 brings invoke 3. So this module stays.

What is honoured: ~/.ssh/config (or `target.ssh_config`) aliases with HostName, User,
Port, IdentityFile, ProxyJump (chains too), ProxyCommand, UserKnownHostsFile,
ConnectTimeout; ssh-agent; explicit playbook values win over the config file.

Host keys are checked against known_hosts. An unknown key is refused with its SHA256
fingerprint and the way to accept it (`--accept-new-host-key`, which appends it); a
changed key is always refused (transport/ssh_login.py; where to connect:
transport/ssh_endpoint.py). This module is the connection's life and its commands. paramiko's own log is routed (ParamikoFailureLines): one
line per failure, never its tracebacks on stderr. Both output streams are drained concurrently (reading one
to EOF first deadlocks past the ~2 MiB window); stdin may be a stream, copied in chunks.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from typing import Callable, Sequence

import paramiko

from controller.errors import BadInputError, UnreachableError
from controller.transport.base import Result, Stdin, Transport, join_argv
from controller.transport.ssh_endpoint import SshEndpoint, resolve_endpoint
from controller.transport.ssh_login import dead_link_timeout_s, fingerprint_sha256, login

__all__ = ["PARAMIKO_LOG", "SshEndpoint", "SshTransport", "dead_link_timeout_s", "fingerprint_sha256",
           "resolve_endpoint"]

_CHUNK = 1 << 16


class ParamikoFailureLines(logging.Handler):
    """paramiko's own log, one line per failure, printed nowhere by default.

    paramiko's transport thread logs a failure as an `Exception (client): …` or `Socket
    exception: No route to host (113)` record followed by one record per traceback line
    (paramiko/transport.py, Transport.run: `self._log(ERROR, util.tb_strings())`). With no
    handler configured, Python's last-resort handler printed all of them on stderr ahead of
    dfctl's own message for the same failure. This handler keeps the first line of each
    failure (the traceback lines are dropped) in `recent` -- dfctl's UnreachableError says
    the same thing in its one line -- and prints it as `dfctl: ssh: …` only when
    DFCTL_SSH_DEBUG=1."""

    def __init__(self, keep: int = 20):
        super().__init__(level=logging.WARNING)
        self.recent: collections.deque[str] = collections.deque(maxlen=keep)
        self._in_traceback: dict[int, bool] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record must not break paramiko's thread
            return
        tid = record.thread or 0
        if line.startswith("Traceback (most recent call last)") or line.startswith("During handling of"):
            self._in_traceback[tid] = True
            return
        if self._in_traceback.get(tid):
            if line and not line[0].isspace():   # the exception line closes the traceback
                self._in_traceback[tid] = False
            return
        if not line.strip():
            return
        self.recent.append(line)
        if os.environ.get("DFCTL_SSH_DEBUG") == "1":
            print(f"dfctl: ssh: {line}", file=sys.stderr)


PARAMIKO_LOG = ParamikoFailureLines()


def _route_paramiko_log() -> None:
    """Once per process: paramiko's records go to PARAMIKO_LOG, not to the root logger."""
    logger = logging.getLogger("paramiko")
    if PARAMIKO_LOG not in logger.handlers:
        logger.addHandler(PARAMIKO_LOG)
        logger.propagate = False


_route_paramiko_log()


class SshTransport(Transport):
    """One paramiko connection to one host, opened lazily, reused, reopened when dropped."""

    def __init__(self, ep: SshEndpoint, via: "SshTransport | None" = None):
        self.ep = ep
        self.via = via
        """The ProxyJump hop this connection is tunnelled through (direct-tcpip), if any."""
        self.name = f"ssh {ep.label}"
        self._client: paramiko.SSHClient | None = None
        self._jumps: list[SshTransport] = []
        self._lock = threading.Lock()

    # -- connection --------------------------------------------------------------------
    def _connected(self) -> paramiko.SSHClient:
        with self._lock:
            c = self._client
            if c is not None and c.get_transport() is not None and c.get_transport().is_active():
                return c
            self._drop()
            self._client = self._connect()
            return self._client

    def open_channel(self, argv: Sequence[str], *, timeout_s: float = 10.0) -> paramiko.Channel:
        """A session channel on this host's reused connection with argv exec'd in it."""
        transport = self._connected().get_transport()
        assert transport is not None                 # _connected checked it is active
        chan = transport.open_session(timeout=timeout_s)
        chan.exec_command(join_argv(argv))
        return chan

    def _open_sock(self) -> paramiko.Channel | paramiko.ProxyCommand | None:
        ep = self.ep
        if ep.proxy_jump:
            hops = [h.strip() for h in ep.proxy_jump.split(",") if h.strip()]
            if not hops:
                raise BadInputError(f"host {ep.label}: ProxyJump {ep.proxy_jump!r} names no jump host")
            # ProxyJump a,b: reach a directly, b through a, the target through b.
            prev: SshTransport | None = None
            for hop in hops:
                jep = resolve_endpoint(hop, known_hosts=ep.known_hosts, ssh_config=ep.ssh_config,
                                       connect_timeout_s=ep.connect_timeout_s,
                                       keepalive_s=ep.keepalive_s,
                                       accept_new_host_key=ep.accept_new_host_key)
                jep = SshEndpoint(**{**jep.__dict__, "proxy_jump": None, "proxy_command": None})
                jt = SshTransport(jep, via=prev)
                jt._connected()
                self._jumps.append(jt)
                prev = jt
            assert prev is not None and prev._client is not None   # hops is not empty; each hop connected
            try:
                return prev._client.get_transport().open_channel(
                    "direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0),
                    timeout=ep.connect_timeout_s)
            except (paramiko.SSHException, OSError) as exc:
                raise UnreachableError(f"host {ep.label}: cannot reach it through ProxyJump {ep.proxy_jump}: {exc}") from None
        via = self.via
        if via is not None and via._client is not None:
            try:
                return via._client.get_transport().open_channel(
                    "direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0), timeout=ep.connect_timeout_s)
            except (paramiko.SSHException, OSError) as exc:
                raise UnreachableError(f"host {ep.label}: cannot reach it through {via.ep.label}: {exc}") from None
        if ep.proxy_command:
            return paramiko.ProxyCommand(ep.proxy_command)
        return None

    def _connect(self) -> paramiko.SSHClient:
        return login(self.ep, self._open_sock)

    def connect(self) -> None:
        """Open the connection now (doctor, host-key acceptance); run() does it lazily."""
        self._connected()

    def host_key_fingerprint(self) -> str | None:
        c = self._client
        if c is None or c.get_transport() is None:
            return None
        return fingerprint_sha256(c.get_transport().get_remote_server_key())

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail any way
                pass
            self._client = None
        for j in reversed(self._jumps):
            j.close()
        self._jumps = []

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- commands ----------------------------------------------------------------------
    def describe(self, argv: Sequence[str]) -> str:
        """The exact command as sent: the string the remote login shell receives."""
        return f"[{self.name}] {join_argv(argv)}"

    def run(self, argv: Sequence[str], *, stdin: Stdin = None, timeout_s: float | None = None) -> Result:
        command = join_argv(argv)
        t0 = time.monotonic()
        chan = None
        for attempt in (0, 1):
            client = self._connected()
            try:
                chan = client.get_transport().open_session(timeout=self.ep.connect_timeout_s)
                chan.exec_command(command)
                break
            except (paramiko.SSHException, OSError, EOFError) as exc:
                # The connection died between commands (link flap, sshd restart): the
                # command never started, so one fresh connection and retry is safe.
                self.close()
                if attempt:
                    raise UnreachableError(f"host {self.ep.label}: cannot start a command: {exc}") from None
        assert chan is not None
        out: list[bytes] = []
        err: list[bytes] = []

        def pump(read: Callable[[int], bytes], sink: list[bytes]) -> None:
            try:
                for block in iter(lambda: read(_CHUNK), b""):
                    sink.append(block)
            except (OSError, EOFError, paramiko.SSHException):
                pass

        def feed() -> None:
            try:
                if isinstance(stdin, (bytes, bytearray)):
                    chan.sendall(bytes(stdin))
                elif stdin is not None:                  # (feed runs only when there is stdin)
                    for block in iter(lambda: stdin.read(1 << 20), b""):
                        chan.sendall(block)
            except (OSError, EOFError, paramiko.SSHException):
                pass
            finally:
                try:
                    chan.shutdown_write()
                except (OSError, EOFError, paramiko.SSHException):
                    pass

        threads = [threading.Thread(target=pump, args=(chan.recv, out), daemon=True),
                   threading.Thread(target=pump, args=(chan.recv_stderr, err), daemon=True)]
        if stdin is not None:
            threads.append(threading.Thread(target=feed, daemon=True))
        else:
            chan.shutdown_write()
        for t in threads:
            t.start()
        deadline = None if timeout_s is None else t0 + timeout_s
        timed_out = False
        for t in threads[:2]:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                timed_out = True
                break
        if timed_out:
            chan.close()
            # A command that outlives its timeout may sit on a dead link: start afresh.
            self.close()
            return Result(command, 124, b"".join(out),
                          b"".join(err) + f"\n[dfctl] timed out after {timeout_s}s on {self.ep.label}".encode(),
                          self.name, time.monotonic() - t0)
        if not chan.status_event.wait(None if deadline is None else max(0.0, deadline - time.monotonic()) + 5):
            chan.close()
            self.close()
            return Result(command, 255, b"".join(out), b"".join(err) + b"\n[dfctl] connection lost",
                          self.name, time.monotonic() - t0)
        code = chan.recv_exit_status()
        if not chan.get_transport() or not chan.get_transport().is_active():
            if code == -1:
                self.close()
                return Result(command, 255, b"".join(out), b"".join(err) + b"\n[dfctl] connection lost",
                              self.name, time.monotonic() - t0)
        chan.close()
        if code == -1:  # exit-signal instead of exit-status: report as a shell would
            code = 255
        return Result(command, code, b"".join(out), b"".join(err), self.name, time.monotonic() - t0)

