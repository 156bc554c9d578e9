"""Run commands inside a Proxmox LXC container: `pct exec <vmid> -- env -i … <argv>`.

Quoting: pct hands everything after `--` to lxc-attach, which execs it directly (no
shell), so the only shell level is the host transport's (ssh's remote login shell),
which quotes with shlex.join. An argument therefore reaches the container byte-exact.

Environment: pct keeps the host's environment and sets PATH=/sbin:/bin:/usr/sbin:/usr/bin
(no /usr/local/bin, no venv) -- FIELD-NOTES. Every command runs under `env -i` with an
explicit PATH, HOME and LANG, so what runs in the CT never depends on the operator's shell.

`pct status` is checked once per transport before the first command (it costs a Perl
start-up on a real node); a stopped or absent CT is a ContainerStateError (exit 3) that
names host and vmid. A CT that stops later is caught from pct's own error text.
"""

from __future__ import annotations

import re
from typing import Sequence

from controller.errors import ContainerStateError
from controller.transport.base import Result, Stdin, Transport, join_argv

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# $0 = vmid. Exit 97 when the CT has no init pid (not running); else R = its root on the host.
HOST_VIEW_PREFIX = ('pid=$(lxc-info -n "$0" -p -H 2>/dev/null); '
                    'case "$pid" in ""|*[!0-9]*) exit 97;; esac; R=/proc/$pid/root\n')

_NOT_RUNNING_RE = re.compile(rb"container '?(\d+)'? not running", re.I)
_NO_CONFIG_RE = re.compile(rb"Configuration file '([^']*)' does not exist", re.I)


class PctTransport(Transport):
    """A container on a host transport (SSH to the node, or local on the node itself)."""

    def __init__(self, host: Transport, vmid: int, *, path: str = DEFAULT_PATH,
                 home: str = "/root", host_label: str | None = None):
        self.host = host
        self.vmid = int(vmid)
        self.path = path
        self.home = home
        self.host_label = host_label or getattr(host, "name", "host")
        self.name = f"pct {self.vmid} on {self.host_label}"
        self._status_checked = False

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The host-side argv that runs argv inside the CT with a clean environment."""
        return ["pct", "exec", str(self.vmid), "--", "env", "-i", f"PATH={self.path}",
                f"HOME={self.home}", "LANG=C.UTF-8", *[str(a) for a in argv]]

    def describe(self, argv: Sequence[str]) -> str:
        wrapped = self.wrap(argv)
        describe = getattr(self.host, "describe", None)
        return describe(wrapped) if describe else join_argv(wrapped)

    def status(self) -> str:
        """`pct status` -> running | stopped | unknown; raises for an absent CT / no pct."""
        r = self.host.run(["pct", "status", str(self.vmid)], timeout_s=60)
        if r.exited == 127:
            raise ContainerStateError(
                f"{self.host_label}: no `pct` command (is it a Proxmox VE node?); cannot reach CT {self.vmid}")
        m = re.search(rb"status:\s*(\w+)", r.stdout)
        if r.ok and m:
            return m.group(1).decode()
        if _NO_CONFIG_RE.search(r.stderr) or b"does not exist" in r.stderr:
            raise ContainerStateError(
                f"{self.host_label}: CT {self.vmid} does not exist on this node",
                hint="`pct list` on the node shows its containers; a CT lives on one node of a cluster")
        raise ContainerStateError(f"{self.host_label}: `pct status {self.vmid}` failed: {r.summary()}")

    def ensure_running(self) -> None:
        if self._status_checked:
            return
        state = self.status()
        if state != "running":
            raise ContainerStateError(
                f"{self.host_label}: CT {self.vmid} is {state}, not running",
                hint=f"start it on the node: pct start {self.vmid}")
        self._status_checked = True

    def host_view_argv(self, script: str, args: Sequence[str] = ()) -> list[str]:
        """The host-side argv of run_host_view (also what --dry-run prints)."""
        return ["sh", "-c", HOST_VIEW_PREFIX + script, str(self.vmid), *[str(a) for a in args]]

    def run_host_view(self, script: str, args: Sequence[str] = (), *, timeout_s: float | None = 60) -> Result:
        """Run a POSIX sh script on the HOST with $R = the CT's root as the host sees it.

        FIELD-NOTES: a running CT's files can be read from the node through
        /proc/<CT init pid>/root (pid from `lxc-info -n <vmid> -p -H`) with no attach and no
        pct (Perl) start-up: one cheap exec instead of two pct calls. A CT that is not
        running falls back to `pct status` for pct's own answer (ContainerStateError).
        The script gets args as "$1"…; it must only read under "$R".
        """
        r = self.host.run(self.host_view_argv(script, args), timeout_s=timeout_s)
        if r.exited == 97:
            self._status_checked = False
            self.ensure_running()          # raises with pct's own words for a stopped/absent CT
            raise ContainerStateError(f"{self.host_label}: CT {self.vmid}: lxc-info reports no init pid")
        self._status_checked = True        # lxc-info found its init: the CT runs
        return Result(r.command, r.exited, r.stdout, r.stderr, f"{self.host_label} (view of CT {self.vmid})",
                      r.duration_s)

    def run(self, argv: Sequence[str], *, stdin: Stdin = None, timeout_s: float | None = None) -> Result:
        self.ensure_running()
        r = self.host.run(self.wrap(argv), stdin=stdin, timeout_s=timeout_s)
        if r.exited != 0 and _NOT_RUNNING_RE.search(r.stderr[:400]) and not r.stdout:
            self._status_checked = False
            raise ContainerStateError(f"{self.host_label}: CT {self.vmid} is not running (it stopped)",
                                      hint=f"start it on the node: pct start {self.vmid}")
        return Result(join_argv(argv), r.exited, r.stdout, r.stderr, self.name, r.duration_s)

    def close(self) -> None:
        """The host connection belongs to the factory's cache; nothing of ours to close."""
