"""Remove what crashed test sessions left behind: namespaces, veths, CTs, sshd, mounts, cgroups.

A session is alive while it holds the flock on /tmp/dfctl-rig-<pid>-*/owner.lock. Names
carry the owner's pid (netns `dfctl-rig<pid><seq>h<N>` and the fabric's `dfctl-rig<pid><seq>fab`,
veth `drg<pid><seq>h<N>`, cgroup `dfctl-rig<pid><seq>h<N>`), so leftovers without a session directory are matched by pid:
stale when no process with that pid exists.

Sessions start side by side (pytest-xdist workers, other checkouts): each clean-up takes
a shared flock on /tmp/dfctl-rig-slots/cleanup.lock, and `cleanups_held_off()` (a test that
makes leftovers and looks at them before removing them) takes it exclusively; a session
starting meanwhile skips its clean-up (the next start does it).

Run by hand: `.venv/bin/python -m tests.rig.stale`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.rig.network import SLOTS_DIR, list_links, list_netns, netns_pids, nsenter_argv, run_ip

SESSION_GLOB = "dfctl-rig-*"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CLEANUP_LOCK = SLOTS_DIR / "cleanup.lock"
_NAME_PID = re.compile(r"^(?:dfctl-rig|drg)(\d+)[a-z]?(?:h\d+|fab)$")
"""A host's netns/veth/cgroup (`…h<N>`) or the session's fabric netns (`dfctl-rig<pid><seq>fab`)."""


def _session_dirs() -> list[Path]:
    return [p for p in Path("/tmp").glob(SESSION_GLOB)
            if p.is_dir() and re.match(r"^dfctl-rig-\d+-", p.name)]


def _pid_of_dir(path: Path) -> int:
    return int(path.name.split("-")[2])


def _claim_if_stale(path: Path) -> int | None:
    """Take a dead session's lock (returns its fd, or -1 when it has none); None if alive.

    Alive: its owner.lock is held. A lock file younger than 2 min whose pid still runs is
    a session in the middle of starting (the file exists a moment before its flock).
    """
    pid_alive = Path(f"/proc/{_pid_of_dir(path)}").exists()
    try:
        fd = os.open(path / "owner.lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None if pid_alive else -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if pid_alive and time.time() - os.fstat(fd).st_mtime < 120:
        os.close(fd)
        return None
    return fd


def _owner_alive(pid: int) -> bool:
    dirs = [d for d in _session_dirs() if _pid_of_dir(d) == pid]
    for d in dirs:
        fd = _claim_if_stale(d)
        if fd is None:
            return True
        if fd >= 0:
            os.close(fd)
    if dirs:
        return False  # its session directories exist, but none is alive
    return Path(f"/proc/{pid}").exists()


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _pids_in_cgroup_prefix(prefix: str) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "cgroup").read_text()
        except OSError:
            continue
        if f":/{prefix}/" in text:
            pids.append(int(entry.name))
    return pids


def remove_cgroup_dirs(prefix: str) -> None:
    """rmdir the (empty) cgroup trees named `prefix` in every hierarchy, deepest first."""
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.exists() else []:
        top = hierarchy / prefix
        if not top.is_dir():
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def unmount_under(path: Path) -> bool:
    """Lazily unmount everything mounted under `path`; True when nothing is left."""
    prefix = str(path).rstrip("/") + "/"
    for _ in range(3):
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        inside = [m for m in mounts if m.startswith(prefix) or m == str(path)]
        if not inside:
            return True
        for m in sorted(inside, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
    return False


def _clean_session_dir(path: Path) -> None:
    state = {}
    try:
        state = json.loads((path / "state.json").read_text())
    except (OSError, ValueError):
        pass
    for host in state.get("hosts", []):
        netns, lxcpath = host.get("netns", ""), Path(host.get("lxcpath", "/nonexistent"))
        if netns in list_netns() and lxcpath.is_dir():
            for ct in lxcpath.iterdir():
                if (ct / "config").exists():
                    subprocess.run([*nsenter_argv(netns), "/usr/bin/lxc-stop", "-P", str(lxcpath),
                                    "-n", ct.name, "-k"], capture_output=True, timeout=60)
        prefix = host.get("cgroup_prefix")
        if prefix:
            _kill(_pids_in_cgroup_prefix(prefix))
        if netns in list_netns():
            _kill(netns_pids(netns))
            run_ip("netns", "del", netns, check=False)
        if host.get("host_dev"):
            run_ip("link", "del", host["host_dev"], check=False)
        if prefix:
            remove_cgroup_dirs(prefix)
    fabric = state.get("fabric_netns")
    if fabric and fabric in list_netns():
        run_ip("netns", "del", fabric, check=False)
    for mount in state.get("mounts", []):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    if unmount_under(path):
        shutil.rmtree(path, ignore_errors=True)


def _open_cleanup_lock() -> int:
    SLOTS_DIR.mkdir(mode=0o755, exist_ok=True)
    return os.open(CLEANUP_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


@contextmanager
def cleanups_held_off() -> Iterator[None]:
    """No session removes leftovers while this is held (it waits for running clean-ups)."""
    fd = _open_cleanup_lock()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def cleanup_stale_sessions() -> list[str]:
    """Clean every dead session's leftovers; return a line per thing removed (nothing while
    cleanups_held_off() is held elsewhere)."""
    fd = _open_cleanup_lock()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return []
        return _cleanup_stale_sessions()
    finally:
        os.close(fd)


def _cleanup_stale_sessions() -> list[str]:
    removed: list[str] = []
    for path in _session_dirs():
        fd = _claim_if_stale(path)
        if fd is None:
            continue
        try:
            _clean_session_dir(path)
            removed.append(str(path))
        finally:
            if fd >= 0:
                os.close(fd)
    for netns in list_netns():
        match = _NAME_PID.match(netns)
        if match and not _owner_alive(int(match.group(1))):
            _kill(netns_pids(netns))
            run_ip("netns", "del", netns, check=False)
            removed.append(f"netns {netns}")
    for link in list_links():
        match = _NAME_PID.match(link)
        if match and not _owner_alive(int(match.group(1))):
            run_ip("link", "del", link, check=False)
            removed.append(f"link {link}")
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.exists() else []:
        for top in hierarchy.glob("dfctl-rig*"):
            match = _NAME_PID.match(top.name)
            if match and not _owner_alive(int(match.group(1))):
                _kill(_pids_in_cgroup_prefix(top.name))
                remove_cgroup_dirs(top.name)
    return removed


if __name__ == "__main__":
    for line in cleanup_stale_sessions():
        print("removed", line)
