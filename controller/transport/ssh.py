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
changed key is always refused. paramiko's own log is routed (ParamikoFailureLines): one
line per failure, never its tracebacks on stderr. Both output streams are drained concurrently (reading one
to EOF first deadlocks past the ~2 MiB window); stdin may be a stream, copied in chunks.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import paramiko

from controller.errors import BadInputError, HostKeyError, UnreachableError
from controller.transport.base import Result, Stdin, Transport, join_argv

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


@dataclass(frozen=True)
class SshEndpoint:
    """Where and how to connect, after ~/.ssh/config and the playbook were merged."""

    alias: str                       # what the user wrote (playbook target.host)
    hostname: str                    # HostName (or the alias itself)
    port: int
    user: str
    identity_files: tuple[str, ...]
    known_hosts: str
    proxy_jump: str | None = None
    proxy_command: str | None = None
    connect_timeout_s: float = 10.0
    keepalive_s: int = 15
    accept_new_host_key: bool = False
    ssh_config: str | None = None

    @property
    def label(self) -> str:
        """Human name used in messages: `root@pve (10.0.0.5:22)`."""
        real = self.hostname if self.port == 22 else f"{self.hostname}:{self.port}"
        return f"{self.user}@{self.alias}" + ("" if real == self.alias else f" ({real})")

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH looks up in known_hosts: `host` or `[host]:port`."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def _load_ssh_config(path: str | None) -> paramiko.SSHConfig:
    cfg_path = Path(os.path.expanduser(path or "~/.ssh/config"))
    if cfg_path.is_file():
        return paramiko.SSHConfig.from_path(str(cfg_path))
    if path:  # the playbook named a file that is not there: say so instead of ignoring it
        raise UnreachableError(f"ssh_config {cfg_path}: no such file")
    return paramiko.SSHConfig()


def resolve_endpoint(host: str, *, user: str | None = None, port: int | None = None,
                     identity_file: str | None = None, known_hosts: str | None = None,
                     ssh_config: str | None = None, connect_timeout_s: float = 10.0,
                     keepalive_s: int = 15, accept_new_host_key: bool = False) -> SshEndpoint:
    """Merge an alias's ssh_config entry with explicit values (explicit wins); a [hosts]
    alias of the user's dfctl config (controller.userconfig) is expanded first."""
    from controller.userconfig import host_alias

    spec_user, spec_host, spec_port = _split_jump_spec(host_alias(host))
    cfg = _load_ssh_config(ssh_config).lookup(spec_host)
    ids = tuple(os.path.expanduser(p) for p in ([identity_file] if identity_file else cfg.get("identityfile", [])))
    kh = known_hosts or (cfg.get("userknownhostsfile") or "").split(" ")[0] or "~/.ssh/known_hosts"
    timeout = connect_timeout_s
    proxy_jump = cfg.get("proxyjump")
    if proxy_jump and proxy_jump.lower() == "none":
        proxy_jump = None
    return SshEndpoint(
        alias=spec_host,
        hostname=cfg.get("hostname", spec_host),
        port=int(port or spec_port or cfg.get("port", 22)),
        user=user or spec_user or cfg.get("user") or "root",
        identity_files=ids,
        known_hosts=os.path.expanduser(kh),
        proxy_jump=proxy_jump,
        proxy_command=None if proxy_jump else cfg.get("proxycommand"),
        connect_timeout_s=timeout,
        keepalive_s=keepalive_s,
        accept_new_host_key=accept_new_host_key,
        ssh_config=ssh_config,
    )


def _split_jump_spec(spec: str) -> tuple[str | None, str, int | None]:
    """`user@host:port` (ProxyJump's form) -> parts; a bare alias passes through."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port = None
    if spec.startswith("[") and "]" in spec:       # [v6addr]:port
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        return user, host, port
    if spec.count(":") == 1:
        host, _, p = spec.partition(":")
        if p.isdigit():
            return user, host, int(p)
    return user, spec, None


def fingerprint_sha256(key: paramiko.PKey) -> str:
    """OpenSSH's fingerprint form: `SHA256:<base64 without padding>`."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: refuse with the fingerprint, or append it when the user said so."""

    def __init__(self, ep: SshEndpoint, via: "SshTransport | None" = None):
        self.ep = ep
        self.via = via
        """The ProxyJump hop this connection is tunnelled through (direct-tcpip), if any."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:  # noqa: D401 (paramiko's API)
        fp = fingerprint_sha256(key)
        if not self.ep.accept_new_host_key:
            raise HostKeyError(
                f"host {self.ep.label}: unknown host key {key.get_name()} {fp} "
                f"(not in {self.ep.known_hosts})",
                hint="check the fingerprint on the host (`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub`), "
                     "then rerun with --accept-new-host-key to add it to known_hosts")
        path = Path(self.ep.known_hosts)
        path.parent.mkdir(parents=True, exist_ok=True)
        needs_nl = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        with open(path, "a", encoding="ascii") as fh:  # append: never rewrite the user's file
            fh.write(("\n" if needs_nl else "") + f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def dead_link_timeout_s(ep: SshEndpoint) -> float:
    """How long sent bytes may stay unacknowledged before the connection counts as dead."""
    return max(10.0, 3 * ep.connect_timeout_s)


def _bound_dead_link(transport: "paramiko.Transport | None", ep: SshEndpoint) -> None:
    """TCP_USER_TIMEOUT on the connection's socket: with the link gone (cable, namespace,
    VPN), a transfer would otherwise block in sendall for TCP's ~15 minutes of
    retransmissions. With it, the kernel drops the connection once data (a chunk of the
    stream, a keepalive) stays unacknowledged this long; the command ends as `connection
    lost` and the next one reconnects. (reliability suite: test_connection_lost_mid_transfer)"""
    sock = getattr(transport, "sock", None)
    if isinstance(sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(dead_link_timeout_s(ep) * 1000))
        except OSError:
            pass


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
        ep = self.ep
        client = paramiko.SSHClient()
        if os.path.isfile(ep.known_hosts):
            try:
                client.load_host_keys(ep.known_hosts)
            except (OSError, paramiko.SSHException) as exc:
                raise HostKeyError(f"host {ep.label}: cannot read known_hosts {ep.known_hosts}: {exc}") from None
        client.set_missing_host_key_policy(_KnownHostsPolicy(ep))
        sock = self._open_sock()
        t0 = time.monotonic()
        try:
            client.connect(
                ep.hostname, port=ep.port, username=ep.user,
                key_filename=list(ep.identity_files) or None,
                look_for_keys=not ep.identity_files, allow_agent=True,
                timeout=ep.connect_timeout_s, banner_timeout=ep.connect_timeout_s,
                auth_timeout=ep.connect_timeout_s, channel_timeout=ep.connect_timeout_s,
                sock=sock)
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"host {ep.label}: HOST KEY CHANGED: the host offered {exc.key.get_name()} "
                f"{fingerprint_sha256(exc.key)} but {ep.known_hosts} holds {fingerprint_sha256(exc.expected_key)}; "
                "refusing to connect (possible man-in-the-middle)",
                hint=f"if the host was reinstalled, remove the old key: ssh-keygen -R '{ep.known_hosts_name}' "
                     f"-f {ep.known_hosts}") from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise UnreachableError(
                f"host {ep.label}: authentication failed as {ep.user}: {exc}",
                hint="check target.user / IdentityFile / ssh-agent") from None
        except (socket.timeout, TimeoutError) as exc:
            client.close()
            raise UnreachableError(
                f"host {ep.label}: no answer within {ep.connect_timeout_s:g} s ({exc or 'timed out'})") from None
        except (OSError, EOFError, paramiko.SSHException) as exc:
            client.close()
            if str(exc) == "No authentication methods available":
                # paramiko's words when it had no key to offer at all: no IdentityFile, none
                # under ~/.ssh, and no ssh-agent or an empty one
                raise UnreachableError(
                    f"host {ep.label}: authentication failed as {ep.user}: no key to offer (no IdentityFile, "
                    f"no key under ~/.ssh, ssh-agent not running or empty)",
                    hint="set target.identity_file or IdentityFile in ~/.ssh/config, or ssh-add your key "
                         "to a running ssh-agent (SSH_AUTH_SOCK)") from None
            if time.monotonic() - t0 >= 0.9 * ep.connect_timeout_s:
                # TCP connected but no banner/handshake in time (sshd stopped, overloaded):
                # paramiko words this "No existing session" or "Error reading SSH protocol banner"
                raise UnreachableError(
                    f"host {ep.label}: no answer within {ep.connect_timeout_s:g} s "
                    f"(TCP connected, but the SSH handshake did not complete: {exc})") from None
            raise UnreachableError(f"host {ep.label}: cannot connect: {exc}") from None
        transport = client.get_transport()
        if transport is not None and ep.keepalive_s > 0:
            transport.set_keepalive(ep.keepalive_s)
        _bound_dead_link(transport, ep)
        return client

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

