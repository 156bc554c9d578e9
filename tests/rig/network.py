"""Network namespaces and veth pairs for fake hosts, plus the 10.200.0.0/16 guard route.

Each fake host lives in its own network namespace joined to the root namespace by a veth
pair: root side 10.200.S.1/24, namespace side 10.200.S.2/24 (named eth0 inside). The
subnet number S is a *slot* shared by every test session on this machine, so two pytest
sessions running at once never claim the same /24: a session holds an flock on
/tmp/dfctl-rig-slots/S.lock for as long as it lives (the kernel drops it when it dies).

The guard route goes in before any address: with it, a packet to a fake host whose link
is gone is refused here instead of leaving the machine by the default route.

Processes are put into a namespace with `nsenter --net=/run/netns/NAME`, not `ip netns
exec`: the latter also unmounts /sys and mounts a fresh sysfs, which hides the cgroup
hierarchies under /sys/fs/cgroup, and then LXC starts containers without any cgroup.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

GUARD_PREFIX = "10.200.0.0/16"
SLOTS_DIR = Path("/tmp/dfctl-rig-slots")
NETNS_DIR = Path("/run/netns")


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `ip ARGS…`; on failure raise with ip's own message (it names the object)."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def ensure_guard_route() -> None:
    """`ip route add unreachable 10.200.0.0/16`, tolerating an existing one."""
    proc = run_ip("route", "add", "unreachable", GUARD_PREFIX, check=False)
    if proc.returncode != 0 and "File exists" not in proc.stderr:
        raise RuntimeError(f"cannot add the guard route {GUARD_PREFIX}: {proc.stderr.strip()}")


def guard_route_present() -> bool:
    out = run_ip("route", "show", GUARD_PREFIX).stdout
    return out.strip().startswith("unreachable 10.200.0.0/16")


def nsenter_argv(netns: str, uts: Path | None = None) -> list[str]:
    """Prefix that runs a command inside `netns` (and a persistent UTS namespace, for the
    host's own hostname), keeping this mount namespace (see module doc)."""
    argv = ["nsenter", f"--net={NETNS_DIR / netns}"]
    if uts is not None:
        argv.append(f"--uts={uts}")
    return [*argv, "--"]


def create_uts_namespace(path: Path, hostname: str) -> None:
    """A persistent UTS namespace bound at `path` (a file), with `hostname` set in it."""
    path.touch()
    proc = subprocess.run(["unshare", f"--uts={path}", "hostname", hostname], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"unshare --uts={path}: {proc.stderr.strip()}")


def _root_addresses() -> str:
    return run_ip("-o", "-4", "addr", "show").stdout


class SlotLease:
    """An flock-held claim on subnet 10.200.S.0/24 for the life of this process."""

    def __init__(self, slot: int, fd: int):
        self.slot = slot
        self._fd = fd

    @classmethod
    def acquire(cls, first: int = 1, last: int = 254) -> "SlotLease":
        SLOTS_DIR.mkdir(mode=0o755, exist_ok=True)
        in_use = _root_addresses()
        for slot in range(first, last + 1):
            fd = os.open(SLOTS_DIR / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if re.search(rf"inet 10\.200\.{slot}\.\d+/", in_use):
                # Held by nobody, yet configured: a leftover this session must not reuse.
                os.close(fd)
                continue
            return cls(slot, fd)
        raise RuntimeError("no free 10.200.S.0/24 slot for a fake host (all 254 in use)")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class VethLink:
    """One fake host's link: namespace `netns`, root-side device `host_dev`, slot S."""

    netns: str
    host_dev: str
    slot: int

    @property
    def host_address(self) -> str:
        return f"10.200.{self.slot}.1"

    @property
    def ns_address(self) -> str:
        return f"10.200.{self.slot}.2"

    def create(self) -> None:
        ensure_guard_route()
        run_ip("netns", "add", self.netns)
        run_ip("link", "add", self.host_dev, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        run_ip("addr", "add", f"{self.host_address}/24", "dev", self.host_dev)
        run_ip("link", "set", self.host_dev, "up")
        run_ip("-n", self.netns, "addr", "add", f"{self.ns_address}/24", "dev", "eth0")
        run_ip("-n", self.netns, "link", "set", "eth0", "up")
        run_ip("-n", self.netns, "link", "set", "lo", "up")

    def ns_mac(self) -> str:
        out = run_ip("-n", self.netns, "-o", "link", "show", "eth0").stdout
        match = re.search(r"link/ether ([0-9a-f:]{17})", out)
        if not match:
            raise RuntimeError(f"no MAC address on eth0 in {self.netns}: {out.strip()}")
        return match.group(1)

    def down(self) -> None:
        """Silently drop every packet both ways, so connects and open sessions time out.

        Taking the root-side device down would delete the connected route and connects
        would fail at once (the guard route answers "unreachable"); taking the namespace
        side down alone makes ARP fail and connects end in EHOSTUNREACH after ~3 s. A
        permanent neighbour entry plus a downed namespace side gives a clean black hole:
        the kernel sends into a veth whose peer is down, and the frames vanish.
        """
        run_ip("neigh", "replace", self.ns_address, "lladdr", self.ns_mac(), "dev", self.host_dev,
               "nud", "permanent")
        run_ip("-n", self.netns, "link", "set", "eth0", "down")

    def up(self) -> None:
        run_ip("-n", self.netns, "link", "set", "eth0", "up")
        run_ip("neigh", "del", self.ns_address, "dev", self.host_dev, check=False)

    def is_up(self) -> bool:
        out = run_ip("-n", self.netns, "-o", "link", "show", "eth0", check=False).stdout
        return ",UP" in out or "<UP" in out

    def destroy(self) -> None:
        """Delete the namespace (which deletes the veth pair) and the root side if left."""
        run_ip("netns", "del", self.netns, check=False)
        run_ip("link", "del", self.host_dev, check=False)


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def netns_pids(netns: str) -> list[int]:
    out = run_ip("netns", "pids", netns, check=False).stdout
    return [int(tok) for tok in out.split() if tok.isdigit()]


def list_links() -> list[str]:
    out = run_ip("-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(": ", 2)
        if len(parts) >= 2:
            names.append(parts[1].split("@", 1)[0])
    return names


FABRIC_PREFIX = "10.200.254"
"""The fabric's /24 (inside the guard /16). It exists only on bridges in namespaces this rig
session creates, so concurrent sessions each have their own 10.200.254.0/24 and never meet."""


class Fabric:
    """A network between the fake hosts' CTs, as Proxmox nodes' vmbr0 bridges on one switch.

    The switch is a bridge `br0` in a namespace of its own (`dfctl-rig<tag>fab`); each fake
    host that joins gets a bridge `vmbr0` in its namespace and a veth pair from it to the
    switch (`fab0` in the host, `h<N>` on the switch). A CT joins with `lxc.net.0.type =
    veth`, `lxc.net.0.link = vmbr0` and an address in 10.200.254.0/24 (FakeHost.add_fabric_
    container). No namespace gets a default route, and the root namespace is not on the
    fabric at all: its traffic can go nowhere but between the CTs.
    """

    def __init__(self, tag: str):
        self.netns = f"dfctl-rig{tag}fab"
        self.joined: set[str] = set()
        self.created = False

    def create(self) -> None:
        ensure_guard_route()
        run_ip("netns", "add", self.netns)
        self.created = True
        run_ip("-n", self.netns, "link", "add", "br0", "type", "bridge")
        run_ip("-n", self.netns, "link", "set", "br0", "up")
        run_ip("-n", self.netns, "link", "set", "lo", "up")

    def join(self, host_netns: str, index: int) -> None:
        """Host `index`'s vmbr0, wired to the switch (idempotent)."""
        if host_netns in self.joined:
            return
        if not self.created:
            self.create()
        port = f"h{index}"
        run_ip("-n", host_netns, "link", "add", "vmbr0", "type", "bridge")
        run_ip("-n", host_netns, "link", "set", "vmbr0", "up")
        run_ip("-n", self.netns, "link", "add", port, "type", "veth", "peer", "name", "fab0", "netns", host_netns)
        run_ip("-n", self.netns, "link", "set", port, "master", "br0")
        run_ip("-n", self.netns, "link", "set", port, "up")
        run_ip("-n", host_netns, "link", "set", "fab0", "master", "vmbr0")
        run_ip("-n", host_netns, "link", "set", "fab0", "up")
        self.joined.add(host_netns)

    def destroy(self) -> None:
        """The switch's namespace (its bridge and veth ends go with it; the hosts' vmbr0
        go with their namespaces)."""
        if self.created:
            run_ip("netns", "del", self.netns, check=False)
            self.created = False
        self.joined.clear()
