"""The agent's log reader: each followed log read the moment it is written, in a process of its own.

A truncation destroys every byte written after a reader's last read, so a reader woken per
write (tail -F, this) still loses the lines written within its wake-up latency before the
cut; nothing can read them after (the kernel frees the pages; a read lease cannot be held
on a file a writer has open). What decides the loss is how soon after a write the reader
runs. The agent's follower used to be a thread of the agent, and a thread shares the
agent's GIL with the request being answered (2-8 ms of Python a request on a loaded
2-core machine, and a GIL holder the kernel preempts stalls the thread behind it).
Measured beside GNU tail -F on the same writer (370 lines/s, load ~8 on 2 cores, each
follower's first read after each write, by perf trace): that thread read a write after
p50 ~450 us with 15-40 % of writes over 1 ms, where tail -F read after p50 ~100-250 us,
2-7 % over 1 ms -- so in 2-3 runs of 15 it lost the last line before a live truncation
that tail -F had read. Hence a process that does nothing else: select on its inotify
descriptor, fstat, pread, send; no GIL to wait for. It also asks the kernel to run it
before ordinary tasks (SCHED_FIFO at the lowest real-time priority) where it may: then
p99 ~220 us, ahead of tail -F. Guards, since a real-time task can starve a core: the
kernel's RLIMIT_RTTIME kills it if it ever runs 0.2 s without blocking (the agent then
reads in-process, as without a reader), and it returns to the normal class by itself if
it uses more than RT_MAX_CPU_SHARE of a core (a flood of writes is no latency case).

It keeps nothing: every byte read goes at once to the agent as an event over a
SOCK_SEQPACKET socketpair (the socket's buffer holds it safe from a truncation), and the
agent's LogShadow keeps it. `LogReading` is the reading of one file -- where it is read
to, and how a cut is seen -- and the same class reads in-process where there is no reader
process (a one-shot probe, a fork that failed, a reader that died, the unit tests).

Events (reader -> agent), each one message: a 17-byte header (kind, reading id,
generation, file offset) and a payload:
  D  bytes of the file at `offset` of this generation's content;
  S  the reading skipped to `offset` (more than the cap written at once); payload: the
     bytes just before it (the agent's next fingerprint material);
  C  this generation's content was cut (shorter, or its bytes before the end changed);
     the next generation is the file's content from offset 0;
  Y  synced: every event before it has been sent (id: the sync's number).
Commands (agent -> reader): F follow (a descriptor passed with SCM_RIGHTS; payload: cap,
fingerprint size, the bytes before `offset`), K new cap (offset), X forget, Y sync.

Stdlib only, Python >= 3.6 (shipped as text ahead of probe_agent.py).
"""

import array
import os
import select
import socket
import struct
import time
from typing import Any  # noqa: F401 - the type comments' (typing is stdlib from 3.5)

READ_STEP_BYTES = 1 << 20
"""The most bytes one step reads of a file (a step reads at most a few of these)."""
EVENT_BYTES = 64 << 10
"""The most payload one event carries (a larger read is several events)."""
FOLLOWED_GENERATIONS = 3
"""Contents of one log followed across cuts in a row (the old one, the emptied file's, the rewrite's)."""
FOLLOW_POLL_S = 0.05
"""Without inotify: how often the files are looked at."""
RT_MAX_CPU_SHARE = 0.25
"""Above this share of a core (over a second), the reader leaves the real-time class."""
RT_TIME_LIMIT_US = (200000, 400000)
"""RLIMIT_RTTIME (soft: SIGXCPU, hard: SIGKILL): CPU time a real-time task may use without blocking."""
SYNC_TIMEOUT_S = 2.0
"""A reader that does not answer a sync in this long is taken for dead (the agent reads in-process)."""
_HEADER = struct.Struct("!cIIQ")
_FOLLOW = struct.Struct("!QI")
_IN_MODIFY, _IN_NONBLOCK, _IN_CLOEXEC = 0x2, 0o4000, 0o2000000
_INOTIFY = []  # type: list  # [(libc, fd) or None], made once per process


def inotify():
    """(libc, inotify fd) of this process, or None (no inotify here: poll)."""
    if not _INOTIFY:
        got = None
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd >= 0:
                got = (libc, fd)
        except Exception:  # no ctypes, no inotify: poll instead
            got = None
        _INOTIFY.append(got)
    return _INOTIFY[0]


def drain_inotify():
    """Take the queued inotify events (what changed is not read from them: every followed
    file is looked at). One read takes all that fit 64 KiB; any left wake the next select."""
    ino = inotify()
    if ino is None:
        return
    try:
        os.read(ino[1], 65536)
    except OSError:                      # EAGAIN: none queued
        pass


def _pread_fd(fd, offset, n):
    block = os.pread(fd, n, offset) if n > 0 else b""
    if len(block) == n or not block:
        return block                     # the common case: one read
    chunks, left = [block], n - len(block)
    while left > 0:
        block = os.pread(fd, left, offset + n - left)
        if not block:
            break
        chunks.append(block)
        left -= len(block)
    return b"".join(chunks)


class LogReading(object):
    """Where one followed file is read to (`end` of generation `gen`) and the bytes just
    before it (`last`, fp_bytes at most): a step reads what was appended, unless the bytes
    before `end` changed or the file shrank below it -- a cut, after which the file's
    content is read from 0 as the next generation (FOLLOWED_GENERATIONS at most)."""

    def __init__(self, fd, base, last, cap, fp_bytes, watch=True):
        self.fd = fd                     # this reading's own descriptor (closed with it)
        self.gen, self.end, self.last = 0, base, last
        self.cap, self.fp_bytes = cap, fp_bytes
        self.done = False                # cut once more than FOLLOWED_GENERATIONS allow: nothing more read
        self.wd = None
        ino = inotify() if watch else None
        if ino is not None:
            wd = ino[0].inotify_add_watch(ino[1], ("/proc/self/fd/%d" % fd).encode(), _IN_MODIFY)
            self.wd = wd if wd >= 0 else None

    def step(self):
        """The events since the last step: [(kind, gen, offset, payload)] (see the module doc)."""
        out = []  # type: list
        for _ in range(4):
            if self.done or self.fd is None:
                return out
            try:
                size = os.fstat(self.fd).st_size
                end, last = self.end, self.last
                if size == end:
                    return out
                if size > end + self.cap:
                    if _pread_fd(self.fd, end - len(last), len(last)) == last:
                        to = size - self.cap
                        self.end, self.last = to, _pread_fd(self.fd, max(0, to - self.fp_bytes), min(to, self.fp_bytes))
                        out.append((b"S", self.gen, to, self.last))
                        continue
                    got = b""
                else:
                    got = _pread_fd(self.fd, end - len(last), len(last) + min(max(0, size - end), READ_STEP_BYTES))
            except OSError:
                return out
            if size < end or got[:len(last)] != last:
                out.append((b"C", self.gen, end, b""))
                self.gen, self.end, self.last = self.gen + 1, 0, b""
                self.done = self.gen >= FOLLOWED_GENERATIONS
                continue                 # the new content at once, from its start
            data = got[len(last):]
            for i in range(0, len(data), EVENT_BYTES):
                out.append((b"D", self.gen, end + i, data[i:i + EVENT_BYTES]))
            self.end, self.last = end + len(data), (last + data)[-self.fp_bytes:] if self.fp_bytes else b""
            if self.end >= size:
                return out               # read to the size just seen: the next write wakes the next step
        return out

    def close(self):
        ino = inotify()
        if ino is not None and self.wd is not None:
            ino[0].inotify_rm_watch(ino[1], self.wd)
            self.wd = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _run_first():
    """SCHED_FIFO at the lowest priority, under RLIMIT_RTTIME; False where not allowed."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_RTTIME, RT_TIME_LIMIT_US)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return True
    except (AttributeError, OSError, ValueError):
        return False


def _send_event(sock, kind, rid, gen, offset, payload=b""):
    sock.sendall(_HEADER.pack(kind, rid, gen, offset) + payload)


def _serve_reader(sock):
    """The reader process's loop (it never returns: os._exit when the agent is gone)."""
    readings = {}  # type: dict
    rt = _run_first()
    cpu_at, wall_at = sum(os.times()[:2]), time.monotonic()
    ino = inotify()
    fds = [sock.fileno()] + ([ino[1]] if ino is not None else [])
    wait_s = FOLLOW_POLL_S if ino is None else 1.0
    while True:
        ready, _, _ = select.select(fds, [], [], wait_s)
        drain_inotify()
        for rid, r in readings.items():
            for ev in r.step():
                _send_event(sock, ev[0], rid, ev[1], ev[2], ev[3])
        if fds[0] in ready:
            try:
                msg, anc, _, _ = sock.recvmsg(EVENT_BYTES + 4096, socket.CMSG_SPACE(4))
            except OSError:
                return
            if not msg:
                return                   # the agent is gone
            kind, rid, _, offset = _HEADER.unpack(msg[:_HEADER.size])
            payload = msg[_HEADER.size:]
            if kind == b"F":
                fds_in = array.array("i")
                for level, typ, data in anc:
                    if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                        fds_in.frombytes(data[:len(data) - len(data) % fds_in.itemsize])
                if fds_in:
                    cap, fp_bytes = _FOLLOW.unpack(payload[:_FOLLOW.size])
                    r = readings[rid] = LogReading(fds_in[0], offset, payload[_FOLLOW.size:], cap, fp_bytes)
                    for ev in r.step():
                        _send_event(sock, ev[0], rid, ev[1], ev[2], ev[3])
                    if r.wd is None:
                        wait_s = FOLLOW_POLL_S      # a file inotify cannot watch: poll
            elif kind == b"K" and rid in readings:
                readings[rid].cap = offset
            elif kind == b"X" and rid in readings:
                readings.pop(rid).close()
                wait_s = FOLLOW_POLL_S if ino is None or any(r.wd is None for r in readings.values()) else 1.0
            elif kind == b"Y":
                for r_id, r in list(readings.items()):
                    for ev in r.step():
                        _send_event(sock, ev[0], r_id, ev[1], ev[2], ev[3])
                _send_event(sock, b"Y", rid, 0, 0)
        now = time.monotonic()
        if rt and now - wall_at >= 1.0:
            cpu = sum(os.times()[:2])
            if (cpu - cpu_at) / (now - wall_at) > RT_MAX_CPU_SHARE:
                try:
                    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
                except OSError:
                    pass
                rt = False
            cpu_at, wall_at = cpu, now


class LogReader(object):
    """The agent's side of its reader process: start it, follow / forget a file, sync.
    `on_event(rid, kind, gen, offset, payload)` takes each event as it is received."""

    def __init__(self, on_event):
        self.on_event = on_event
        self.sock = None  # type: Any
        self.pid = None  # type: Any
        self.next_id, self.next_sync = 1, 1

    def start(self):
        """Fork the reader (before any other thread starts: a fork copies only the caller's);
        False if it could not be started (the agent then reads in-process)."""
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except (OSError, AttributeError):
            return False
        for s in (ours, theirs):
            for opt in ("SO_SNDBUFFORCE", "SO_SNDBUF"):      # room for bytes in flight (a burst)
                try:
                    s.setsockopt(socket.SOL_SOCKET, getattr(socket, opt), 4 << 20)
                    break
                except (OSError, AttributeError):
                    continue
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return False
        if pid == 0:                     # the reader: nothing of the agent's but its socket
            code = 0
            try:
                ours.close()
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                keep = {0, 1, 2, theirs.fileno()}
                for name in os.listdir("/proc/self/fd"):
                    if int(name) not in keep:
                        try:
                            os.close(int(name))
                        except OSError:
                            pass
                del _INOTIFY[:]              # the agent's inotify descriptor was just closed
                _serve_reader(theirs)
            except BaseException:  # noqa: BLE001 - the reader only ever exits
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        self.sock, self.pid = ours, pid
        return True

    @property
    def alive(self):
        return self.sock is not None

    def fileno(self):
        return self.sock.fileno()

    def follow(self, fd, base, before, cap, fp_bytes):
        """A new reading of `fd` from `base` (`before`: the bytes just before it); its id."""
        rid, self.next_id = self.next_id, self.next_id + 1
        try:
            self.sock.sendmsg([_HEADER.pack(b"F", rid, 0, base) + _FOLLOW.pack(cap, fp_bytes) + before],
                              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())])
        except OSError:
            self.stop()
            return None
        return rid

    def _command(self, kind, rid, offset=0):
        try:
            _send_event(self.sock, kind, rid, 0, offset)
        except OSError:
            self.stop()

    def set_cap(self, rid, cap):
        self._command(b"K", rid, cap)

    def forget(self, rid):
        self._command(b"X", rid)

    def drain(self):
        """Take every event received so far (no waiting)."""
        while self.sock is not None:
            ready, _, _ = select.select([self.sock], [], [], 0)
            if not ready or self._receive() is None:
                return

    def sync(self):
        """Every byte the reader has read of every file, taken (its step run first);
        False if it did not answer (it is stopped: read in-process)."""
        if self.sock is None:
            return False
        n, self.next_sync = self.next_sync, self.next_sync + 1
        self._command(b"Y", n)
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while self.sock is not None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.sock], [], [], max(0.0, left))
            if not ready:
                self.stop()
                return False
            got = self._receive()
            if got == (b"Y", n):
                return True
        return False

    def _receive(self):
        try:
            msg = self.sock.recv(EVENT_BYTES + 4096)
        except OSError:
            msg = b""
        if len(msg) < _HEADER.size:
            self.stop()
            return None
        kind, rid, gen, offset = _HEADER.unpack(msg[:_HEADER.size])
        if kind == b"Y":
            return kind, rid
        self.on_event(rid, kind, gen, offset, msg[_HEADER.size:])
        return kind, None

    def stop(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None
