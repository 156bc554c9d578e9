"""Open the transport a playbook target needs, one connection per host per process.

Two questions have two answers: `open_host_transport` is the machine that holds the run
(this machine, an SSH host, or the Proxmox node), `open_transport` is the place the run
lives (for pct: the container, reached through the node). Both are cached, so a deploy
followed by a launch, or a watcher probing many runs on one node, shares one connection.
"""

from __future__ import annotations

import atexit
import threading
from typing import Sequence

from controller.playbook import TargetConfig
from controller.transport.base import Transport, join_argv
from controller.transport.local import LocalTransport
from controller.transport.pct import PctTransport

_cache: dict[tuple, Transport] = {}
_cache_lock = threading.Lock()


def _host_key(target: TargetConfig) -> tuple:
    if target.kind == "local":
        return ("local",)
    return ("ssh", target.host, target.user, target.port, target.identity_file, target.ssh_config,
            target.known_hosts, target.accept_new_host_key, target.connect_timeout_s, target.keepalive_s)


def open_host_transport(target: TargetConfig) -> Transport:
    """LocalTransport for `local`, else the (cached) SshTransport to target.host."""
    key = _host_key(target)
    with _cache_lock:
        t = _cache.get(key)
        if t is None:
            if target.kind == "local":
                t = LocalTransport()
            else:
                # paramiko is imported only for SSH targets: a local target (the demo, a GPU
                # box watching itself) needs none of it.
                from controller.transport.ssh import SshTransport, resolve_endpoint

                ep = resolve_endpoint(
                    target.host or "", user=target.user, port=target.port,
                    identity_file=target.identity_file, known_hosts=target.known_hosts,
                    ssh_config=target.ssh_config, connect_timeout_s=target.connect_timeout_s,
                    keepalive_s=target.keepalive_s, accept_new_host_key=target.accept_new_host_key)
                t = SshTransport(ep)
            _cache[key] = t
        return t


def open_transport(target: TargetConfig) -> Transport:
    """Where the run lives: the host transport, or a PctTransport wrapping it."""
    host = open_host_transport(target)
    if target.kind != "pct":
        return host
    key = _host_key(target) + ("pct", target.vmid, target.path)
    with _cache_lock:
        t = _cache.get(key)
        if t is None:
            t = PctTransport(host, int(target.vmid or 0), path=target.path, host_label=target.host)
            _cache[key] = t
        return t


def target_label(target: TargetConfig) -> str:
    """Human name of a target: `local`, `ssh root@pve`, `pct 200 on pve`."""
    if target.kind == "local":
        return "local"
    who = f"{target.user}@{target.host}" if target.user else str(target.host)
    return f"ssh {who}" if target.kind == "ssh" else f"pct {target.vmid} on {target.host}"


def describe_command(transport: Transport, argv: Sequence[str]) -> str:
    """The exact command a transport would run for argv (for --dry-run)."""
    describe = getattr(transport, "describe", None)
    return describe(argv) if describe else join_argv(argv)


def close_all() -> None:
    """Close every cached connection (end of a CLI command, test teardown)."""
    with _cache_lock:
        items = list(_cache.values())
        _cache.clear()
    for t in items:
        try:
            t.close()
        except OSError:
            pass


atexit.register(close_all)
