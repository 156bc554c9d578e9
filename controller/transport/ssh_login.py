"""Logging in to an SSH host with paramiko: the host-key policy (known_hosts; an unknown
key refused with its SHA256 fingerprint unless --accept-new-host-key, which appends it; a
changed key always refused), authentication, and paramiko's failures turned into dfctl's
errors naming the host (HostKeyError, UnreachableError with what to check).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import time
from pathlib import Path
from typing import Callable, Union

import paramiko

from controller.errors import HostKeyError, UnreachableError
from controller.transport.ssh_endpoint import SshEndpoint


def fingerprint_sha256(key: paramiko.PKey) -> str:
    """OpenSSH's fingerprint form: `SHA256:<base64 without padding>`."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: refuse with the fingerprint, or append it when the user said so."""

    def __init__(self, ep: SshEndpoint):
        self.ep = ep

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


Sock = Union[paramiko.Channel, paramiko.ProxyCommand, None]


def login(ep: SshEndpoint, open_sock: Callable[[], Sock]) -> paramiko.SSHClient:
    """One connection to `ep` (over what `open_sock` gives once known_hosts is read: a
    jump host's channel or a ProxyCommand, else None for TCP), host key checked against
    known_hosts, authenticated, keepalive and dead-link bound set; paramiko's failures
    become dfctl's errors, each naming the host."""
    client = paramiko.SSHClient()
    if os.path.isfile(ep.known_hosts):
        try:
            client.load_host_keys(ep.known_hosts)
        except (OSError, paramiko.SSHException) as exc:
            raise HostKeyError(f"host {ep.label}: cannot read known_hosts {ep.known_hosts}: {exc}") from None
    client.set_missing_host_key_policy(_KnownHostsPolicy(ep))
    sock = open_sock()
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
