"""A run's log for `dfctl logs`: its last lines, then (-f) the bytes as they are written.

Read only through the probe's read_since -- the watch's own reader, with its
fingerprints, renames, copytruncate and deleted-log rules -- and for `-f` through the
host's long-lived probe agent (the watch's HostPoller), so a poll costs one round trip
on the open connection, not a Python start. The polls are paced by the watch's clock
(tick.ticks_every); on the local target its wait is an inotify wake-up on the log's
directory where the kernel has it (tail -F's way; a write shows at once), else the
plain interval.
"""

from __future__ import annotations

import ctypes
import os
import select
import time
from typing import BinaryIO, Callable

from controller.errors import DeployError, UnreachableError
from controller.follow.cursor import LogFollower
from controller.probe import ProbeError, RunProbeRequest
from controller.probe.readings import FileRead, RunReading
from controller.records import RunCursor
from controller.store.runstore import RunRecord, target_of
from controller.watch.poller import HostPoller, default_transport, host_key
from controller.watch.settings import WatchSettings
from controller.watch.tick import ticks_every

POLL_S = 0.5
READ_CAP_BYTES = 4 << 20
SETTLE_S = 0.02
"""After an inotify wake, the writes within this long are one poll: the host's agent keeps
every byte between polls (probe_agent.LogShadow), so a poll per write bought only load (a
writer at 370 lines/s was 370 round trips a second, each with a process scan)."""
_IN_MODIFY, _IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x2, 0x40, 0x80, 0x100, 0x200
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000


class DirectoryWake:
    """Wakes on any change in one local directory (inotify), else after the timeout;
    `fd` None: no inotify here (waiter() is None: the clock's own wait)."""

    def __init__(self, directory: str):
        self.fd: int | None = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd < 0:
                return
            mask = _IN_MODIFY | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
            if libc.inotify_add_watch(fd, directory.encode("utf-8", "surrogateescape"), mask) < 0:
                os.close(fd)
                return
            self.fd = fd
        except (OSError, AttributeError):   # no inotify here: poll
            self.fd = None

    def waiter(self) -> Callable[[float], bool] | None:
        """ticks_every's wait: returns early on a change (never a stop), None without inotify."""
        return self.wait if self.fd is not None else None

    def wait(self, timeout_s: float) -> bool:
        if self.fd is None:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if ready:
            time.sleep(min(SETTLE_S, timeout_s))     # a burst of writes: one poll
            try:
                while os.read(self.fd, 65536):
                    pass
            except BlockingIOError:
                pass
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LogStream:
    """One run's log, read where the run lives."""

    def __init__(self, rec: RunRecord, *, poll_s: float = POLL_S):
        self.rec, self.poll_s = rec, poll_s
        self.target = target_of(rec)
        self.path = rec.log_path or f"{rec.run_dir}/train.log"
        settings = WatchSettings(interval_s=poll_s, gpu=False, read_cap_bytes=READ_CAP_BYTES,
                                 agent_idle_exit_s=max(30.0, 20 * poll_s))
        self.poller = HostPoller(host_key(self.target), self.target, settings, default_transport, time.time)
        self.log = LogFollower()

    def _read(self, tail_lines: int = 0) -> RunReading:
        vmid = int(self.target.vmid) if self.target.kind == "pct" and self.target.vmid is not None else None
        req = RunProbeRequest(run_id=self.rec.run_id, log_path=self.path, run_dir=self.rec.run_dir or "",
                              pid=self.rec.pid, vmid=vmid, cursor=RunCursor(log=self.log.cursor()),
                              log_carry_bytes=len(self.log.carry), log_tail_lines=tail_lines,
                              want_fingerprint_bytes=self.log.wants_fingerprint_bytes)
        reading, error = self.poller.poll([req], {vmid: self.target.python} if vmid is not None else {})
        if reading is None:
            raise (UnreachableError if not self.poller.health.ever_reachable or "unreach" in (error or "")
                   else DeployError)(f"run {self.rec.run_id}: reading {self.path} on {self.poller.host}: {error}")
        rd = reading.runs.get(self.rec.run_id)
        if rd is None or rd.error:
            raise DeployError(f"run {self.rec.run_id}: reading {self.path} on {self.poller.host}: "
                              f"{rd.error if rd else 'no answer for this run'}")
        return rd

    def _take(self, lr: FileRead) -> None:
        self.log.feed(lr.data, start=lr.start, inode=lr.inode, dev=lr.dev, rotated=lr.rotated, head=lr.head,
                      before=lr.before, event=lr.event)

    def tail(self, lines: int) -> FileRead:
        """The last `lines` lines (bytes as written); the stream then continues after them."""
        lr = self._read(tail_lines=max(1, lines)).log
        if lr is None or not lr.exists:
            why = f" ({lr.error})" if lr is not None and lr.error else ""
            raise DeployError(f"run {self.rec.run_id}: no log at {self.path} on {self.poller.host}{why}")
        self._take(lr)
        if lines <= 0:
            lr.data = b""
        return lr

    def follow(self, out: BinaryIO, on_event: Callable[[str], None]) -> None:
        """Print bytes as they come until the run has ended and nothing is left to read.
        A rotation, truncation or deletion is told through `on_event` (stderr)."""
        wake = DirectoryWake(os.path.dirname(self.path)) if self.target.kind == "local" else None
        ended_polls = 0
        try:
            for _ in ticks_every(self.poll_s, wait=wake.waiter() if wake is not None else None):
                while True:
                    rd = self._poll(out, on_event)
                    lr = rd.log
                    if lr is None or not lr.exists or not lr.data:
                        break
                    ended_polls = 0
                    if lr.start + len(lr.data) >= (lr.size_bytes or 0):
                        break
                    # more than one read's worth: read on at once
                if rd.process.state in ("exited", "not_started"):
                    ended_polls += 1
                    if ended_polls >= 2:
                        return
        finally:
            if wake is not None:
                wake.close()

    def _poll(self, out: BinaryIO, on_event: Callable[[str], None]) -> RunReading:
        """One read; its bytes printed, its event told."""
        try:
            rd = self._read()
        except DeployError:
            raise
        except ProbeError as exc:
            raise UnreachableError(f"run {self.rec.run_id}: following {self.path}: {exc.message}") from None
        lr = rd.log
        if lr is not None and lr.exists:
            if lr.lost_bytes:
                on_event(f"{self.path}: {lr.lost_bytes} bytes lost (truncated before they were read; more than "
                         "the host's agent keeps)")
            if lr.event:
                on_event(f"{self.path}: {lr.event}" + (f" (reading {lr.followed})" if lr.followed else "")
                         + ("; from its start" if lr.rotated else ""))
            self._take(lr)
            if lr.data:
                out.write(lr.data)
                out.flush()
        return rd

    def close(self) -> None:
        self.poller.close()
