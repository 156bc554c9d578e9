"""Where and how to reach an SSH host: ~/.ssh/config (or `target.ssh_config`) merged with
the playbook's explicit values (explicit wins), the way OpenSSH resolves an alias:
HostName, User, Port, IdentityFile, ProxyJump (chains too), ProxyCommand,
UserKnownHostsFile. A [hosts] alias of the user's dfctl config is expanded first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from controller.errors import UnreachableError


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
