"""The test rig: a set of fake Proxmox hosts plus the client files to reach them.

One Rig per pytest session (fixture `rig`). It owns a directory /tmp/dfctl-rig-<pid>-*/
holding an flock'ed owner.lock (how other sessions tell it is alive), state.json (what to
clean up if this process dies without tearing down), the client key, ssh_config and
known_hosts, and one sub-directory per host. Names of namespaces and veths carry a tag
made from the pid, so concurrent sessions never collide and a later session can remove
what a crashed one left (tests/rig/stale.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import string
import subprocess
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.rig.host import FakeHost
from tests.rig.network import Fabric, SlotLease, ensure_guard_route
from tests.rig.sshd import generate_key
from tests.rig.stale import cleanup_stale_sessions

_rig_seq = iter(string.ascii_lowercase)
MAX_HOSTS = 16
_open_rigs: list["Rig"] = []
"""The rigs of this process (one per pytest session or xdist worker, plus any a test makes)."""


def owned_by_this_session(pid: int) -> bool:
    """Whether process `pid` runs on one of this process's rigs: in a fake host's network
    namespace (an ssh session, a run of a kind = "ssh" target) or in a CT's cgroup. Every
    rig's hosts and CTs share this machine's pid table, so a test that looks for its run's
    processes in /proc must not count another session's (an xdist worker deploying a run of
    the same name in the same second gets the same run id)."""
    try:
        net_inode = os.stat(f"/proc/{pid}/ns/net").st_ino
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    for rig in list(_open_rigs):
        for host in list(rig.hosts):
            if f"/{host.containers.cgroup_prefix}/" in cgroup:
                return True
            try:
                if os.stat(f"/run/netns/{host.netns}").st_ino == net_inode:
                    return True
            except OSError:
                continue
    return False


def _check_prerequisites() -> None:
    missing = [tool for tool in ("/usr/sbin/sshd", "/usr/bin/lxc-create", "/usr/bin/lxc-start",
                                 "/usr/bin/ssh", "/usr/bin/ssh-keygen", "/usr/bin/nsenter")
               if not os.access(tool, os.X_OK)]
    if not (os.access("/usr/bin/busybox", os.X_OK) or os.access("/bin/busybox", os.X_OK)):
        missing.append("busybox")
    if missing:
        raise RuntimeError("the test rig needs " + ", ".join(missing) +
                           ": run scripts/setup.sh (installs openssh-server, lxc, busybox-static)")
    if os.geteuid() != 0:
        raise RuntimeError("the test rig needs root (network namespaces, LXC, sshd)")


class Rig:
    """Fake hosts `hosts` (rig-host1, rig-host2, …) and how a client reaches them."""

    def __init__(self) -> None:
        _check_prerequisites()
        self.tag = f"{os.getpid()}{next(_rig_seq)}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"dfctl-rig-{os.getpid()}-", dir="/tmp"))
        self._lock_fd = os.open(self.dir / "owner.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self.hosts: list[FakeHost] = []
        self._leases: list[SlotLease] = []
        self._mounts: list[str] = []
        self._lock = threading.Lock()
        self.identity_file = self.dir / "client_ed25519"
        self.authorized_keys_path = self.dir / "authorized_keys"
        self.ssh_config_path = self.dir / "ssh_config"
        self.known_hosts_path = self.dir / "known_hosts"
        self.setup_seconds = 0.0
        self.backend = os.environ.get("DFCTL_RIG_BACKEND", "auto")
        """"lxc", "chroot" (fallback when LXC cannot start a CT here) or "auto" until decided."""
        self.fallback_reason = ""
        self.fabric = Fabric(self.tag)
        """The CT network between hosts (created when a host first joins: add_fabric_container)."""
        self._save_state()
        _open_rigs.append(self)

    @classmethod
    def create(cls, hosts: int = 2) -> "Rig":
        started = time.monotonic()
        cleanup_stale_sessions()
        ensure_guard_route()
        rig = cls()
        try:
            public = generate_key(rig.identity_file, "dfctl-rig-client")
            rig.authorized_keys_path.write_text(public + "\n")
            rig.ensure_hosts(hosts)
        except BaseException:
            rig.close()
            raise
        rig.setup_seconds = time.monotonic() - started
        return rig

    # ---- hosts --------------------------------------------------------------------------
    def add_host(self) -> FakeHost:
        return self.ensure_hosts(len(self.hosts) + 1)[-1]

    def ensure_hosts(self, count: int) -> list[FakeHost]:
        """At least `count` hosts, the missing ones set up in parallel; returns all hosts."""
        if count > MAX_HOSTS:
            raise ValueError(f"the rig supports at most {MAX_HOSTS} hosts, asked for {count}")
        new: list[FakeHost] = []
        with self._lock:
            for index in range(len(self.hosts) + 1, count + 1):
                lease = SlotLease.acquire()
                self._leases.append(lease)
                host = FakeHost(self, index, lease.slot)
                self.hosts.append(host)
                new.append(host)
            self._save_state()
        created = bool(new)
        if new and self.backend == "auto":
            new = self._decide_backend(new)
        if new:
            with ThreadPoolExecutor(max_workers=min(len(new), 8)) as pool:
                for future in [pool.submit(h.setup) for h in new]:
                    future.result()
        if created:
            self.write_client_files()
        return list(self.hosts)

    def _decide_backend(self, new: list[FakeHost]) -> list[FakeHost]:
        """Set up the first host with real LXC; if LXC cannot start its CT, switch all hosts
        to the unshare/chroot fallback (a warning says why). Returns the hosts still to set up."""
        first = new[0]
        try:
            first.setup()
        except Exception as exc:
            self.fallback_reason = f"{type(exc).__name__}: {exc}"
            try:
                first.teardown()
            except Exception:
                pass
            shutil.rmtree(first.dir, ignore_errors=True)
            self.backend = "chroot"
            warnings.warn(f"test rig: LXC cannot start containers here ({self.fallback_reason}); "
                          "using unshare/chroot containers behind the same pct interface", stacklevel=2)
            for host in new:
                host.use_backend("chroot")
            return new
        self.backend = "lxc"
        return new[1:]

    def host(self, name: str) -> FakeHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no fake host named {name!r} (have {[h.name for h in self.hosts]})")

    # ---- client files -------------------------------------------------------------------
    def write_client_files(self) -> None:
        """ssh_config with one alias per host, known_hosts with each host's original key
        (so after FakeHost.rekey() a client using it sees a *changed* key)."""
        blocks = []
        for h in self.hosts:
            blocks.append("\n".join([
                f"Host {h.name}",
                f"  HostName {h.address}",
                f"  User {h.user}",
                f"  Port {h.port}",
                f"  IdentityFile {self.identity_file}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {self.known_hosts_path}",
                "  GlobalKnownHostsFile /dev/null",
                "  StrictHostKeyChecking yes",
                "  BatchMode yes",
                "  LogLevel ERROR",
                "",
            ]))
        self.ssh_config_path.write_text("\n".join(blocks))
        self.known_hosts_path.write_text("".join(h.known_hosts_line(h.original_public_key) + "\n"
                                                 for h in self.hosts))

    def write_known_hosts(self, path: Path, hosts: list[FakeHost] | None = None) -> Path:
        """A known_hosts file for `hosts` (default all) with their *current* keys."""
        chosen = self.hosts if hosts is None else hosts
        path.write_text("".join(h.known_hosts_line() + "\n" for h in chosen))
        return path

    # ---- bookkeeping --------------------------------------------------------------------
    def join_fabric(self, host: FakeHost) -> None:
        """Wire `host`'s vmbr0 to the fabric (recorded in state.json before it exists)."""
        with self._lock:
            if not self.fabric.created:
                self.fabric.created = True       # state.json names it before `ip netns add`
                self._save_state()
                self.fabric.created = False
                self.fabric.create()
            self.fabric.join(host.netns, host.index)

    def note_mount(self, path: Path) -> None:
        with self._lock:
            if str(path) not in self._mounts:
                self._mounts.append(str(path))
            self._save_state()

    def _save_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "tag": self.tag,
            "hosts": [{"netns": h.netns, "host_dev": h.link.host_dev, "lxcpath": str(h.lxcpath),
                       "cgroup_prefix": h.containers.cgroup_prefix} for h in self.hosts],
            "mounts": self._mounts,
            "fabric_netns": self.fabric.netns if self.fabric.created else None,
        }
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.dir / "state.json")

    def close(self) -> None:
        """Tear everything down: CTs, sshd, namespaces, veths, mounts, the directory."""
        errors: list[str] = []
        if self.hosts:
            with ThreadPoolExecutor(max_workers=min(len(self.hosts), 8)) as pool:
                for future in [pool.submit(h.teardown) for h in self.hosts]:
                    try:
                        future.result()
                    except Exception as exc:
                        errors.append(str(exc))
        try:
            self.fabric.destroy()
        except Exception as exc:
            errors.append(f"fabric: {exc}")
        for mount in self._mounts:
            subprocess.run(["umount", "-l", mount], capture_output=True)
        for lease in self._leases:
            lease.release()
        from tests.rig.stale import remove_cgroup_dirs, unmount_under
        for h in self.hosts:
            remove_cgroup_dirs(h.containers.cgroup_prefix)
        if unmount_under(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            errors.append(f"mounts remain under {self.dir}; left it in place")
        os.close(self._lock_fd)
        self.hosts = []
        if self in _open_rigs:
            _open_rigs.remove(self)
        if errors:
            raise RuntimeError("rig teardown: " + "; ".join(errors))
