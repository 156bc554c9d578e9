"""The remote side of one watch tick: stdlib-only Python run as `python3 -` on the host.

Why a script and not a row of shell commands: one process start per host per tick reads
everything for every watched run on that host (log bytes since the cursor, the process
tree, metrics.jsonl, the .wandb file, nvidia-smi, the container's cgroup), so a tick costs
one round trip however many things we look at -- the seeds paid one ssh + pct start-up
per question. The script keeps no state on the host: the controller sends the cursors
in, and it prints ONE JSON document with raw readings out. Parsing (nvidia-smi CSV,
/proc/<pid>/stat, cgroup files) happens controller-side in controller/probe/, where it
can be tested without a host.

Container targets (`pct`): the container's files are read from the host through
/proc/<container init pid>/root and its processes through that container's own procfs
(/proc/<init>/root/proc, pids in the container's namespace, as the pid file holds them),
so no `pct exec` starts per tick. When that fails, this same script re-runs itself
inside the container through `pct exec <vmid> -- <python> -` for that container's runs.

Must run on Python >= 3.6 (old hosts): no walrus, no dataclasses, no f-string `=`.
The controller sends: `_SRC = <this file>; exec(_SRC); main(<request>, _SRC)`.
"""

import base64
import hashlib
import json
import os
import re
import select
import stat
import subprocess
import sys
import time
import zlib
from typing import Any  # noqa: F401 - the type comments' (typing is stdlib from 3.5)

if "split_stat" not in globals():  # imported (tests, type checks); shipped, proc_stat.py's text came first
    from controller.remote.proc_stat import PGRP, PPID, SESSION, STARTTIME, comm_part, stat_fields, stat_int  # noqa: F401
if "LogReading" not in globals():  # imported; shipped, log_reader.py's text came first
    from controller.remote.log_reader import (
        FOLLOW_POLL_S,
        FOLLOWED_GENERATIONS,
        LogReader,
        LogReading,
        drain_inotify,
        inotify,
    )

ZIP_ABOVE_BYTES = 64 * 1024


def _blob(data):
    """Bytes -> JSON-safe text: base64, zlib first when large (logs compress ~5-10x)."""
    if len(data) > ZIP_ABOVE_BYTES:
        return {"enc": "zb64", "data": base64.b64encode(zlib.compress(data, 1)).decode("ascii")}
    return {"enc": "b64", "data": base64.b64encode(data).decode("ascii")}


def _run(argv, timeout_s, stdin=None):
    """(rc, stdout, stderr); rc 127 when the program is missing, 124 on timeout."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return 127, b"", str(exc).encode()
    try:
        out, err = p.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return 124, out, err + b"\ntimed out"
    return p.returncode, out, err


def _cmd_doc(rc, out, err):
    return {"rc": rc, "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")[-2000:]}


# -- files ----------------------------------------------------------------------------
#
# Every file under a container's root is untrusted input: anything with root in the CT
# (the training code, a dependency) can put a symlink, a FIFO or a device where the log
# should be, and the probe reads it as root on the node. So a path under a root is
# resolved INSIDE that root (openat2 RESOLVE_IN_ROOT where the kernel has it, else a
# component walk that reads each link itself and never lets `..` or an absolute target
# climb out), opened O_PATH first (no side effect, whatever it is), fstat'ed, and only a
# regular file is then opened for reading -- through its own descriptor, so a link swapped
# between the check and the open changes nothing.

FP_BYTES = 256
"""Bytes a fingerprint covers: just before the cursor, and at the file's start."""

_O_PATH = getattr(os, "O_PATH", 0o10000000)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_IN_ROOT = 0x02, 0x10
_SYS_OPENAT2 = 437            # the same number on every Linux architecture (asm-generic)
_OPENAT2 = []  # type: list  # [callable or None], probed once
MAX_LINK_HOPS = 40            # the kernel's own limit (ELOOP)


class RefusedFile(Exception):
    """A path that is not a readable regular file inside its root; the text says what is there."""


def _kind_of(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def _openat2():
    if not _OPENAT2:
        fn = None
        try:
            import ctypes

            class _How(ctypes.Structure):
                _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]
            libc = ctypes.CDLL(None, use_errno=True)

            def fn(dirfd, rel, flags):
                how = _How(flags, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
                fd = libc.syscall(_SYS_OPENAT2, dirfd, rel.encode("utf-8", "surrogateescape"),
                                  ctypes.byref(how), ctypes.sizeof(how))
                if fd < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err))
                return fd
            probe_fd = os.open("/", _O_PATH | os.O_DIRECTORY)
            try:
                os.close(fn(probe_fd, ".", _O_PATH | os.O_CLOEXEC))
            finally:
                os.close(probe_fd)
        except Exception:  # no ctypes, no syscall (kernel < 5.6, seccomp): walk instead
            fn = None  # type: ignore[assignment]  # (no typing import in this script to spell Optional)
        _OPENAT2.append(fn)
    return _OPENAT2[0]


def _walk_in_root(rootfd, rel):
    """O_PATH fd of `rel` resolved inside `rootfd` without the kernel's help: each component
    opened O_NOFOLLOW; a symlink is read and its target walked from the root (absolute) or
    the link's directory (relative); `..` never goes above the root."""
    stack = [os.dup(rootfd)]               # directory fds from the root down
    todo = [c for c in rel.split("/") if c not in ("", ".")]
    hops = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            try:
                fd = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
            except OSError:
                raise
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                os.close(fd)
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise OSError(40, "too many levels of symbolic links")
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                todo[0:0] = [c for c in target.split("/") if c not in ("", ".")]
                continue
            if todo and not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                raise OSError(20, "Not a directory")
            stack.append(fd)
        return os.dup(stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def _path_fd(path, root):
    """O_PATH fd of `path` (`root` "" = the probe's own view, else resolved inside root)."""
    if not root:
        return os.open(path, _O_PATH | os.O_CLOEXEC)
    rootfd = os.open(root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rel = path.lstrip("/") or "."
        fn = None if _FORCE_WALK else _openat2()
        if fn is not None:
            return fn(rootfd, rel, _O_PATH | os.O_CLOEXEC)
        return _walk_in_root(rootfd, rel)
    finally:
        os.close(rootfd)


_FORCE_WALK = False   # set by a request's "resolve": "walk" (tests of the fallback)


class RawFile(object):
    """A read-only descriptor read with pread: no buffered file object per open (a tick
    opens every run file; io.open's BufferedReader was a third of that cost)."""

    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd

    def pread(self, offset, n):
        chunks, left = [], n
        while left > 0:
            block = os.pread(self.fd, left, offset + n - left)
            if not block:
                break
            chunks.append(block)
            left -= len(block)
        return b"".join(chunks)

    def read(self, n):
        return self.pread(0, n)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def open_regular(path, root=""):
    """(file, fstat) of a regular file at `path` inside `root`; OSError when absent or
    unreadable, RefusedFile (what is there) for a FIFO, device, socket, directory.
    O_NONBLOCK: a FIFO (which `fstat` then refuses) can never hold the probe."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not root:                       # the probe's own view: one open, one fstat
        fd = os.open(path, flags)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise RefusedFile("%s is %s, not a regular file: not read" % (path, _kind_of(st.st_mode)))
        return RawFile(fd), st
    pfd = _path_fd(path, root)
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile("%s is %s, not a regular file: not read" % (path, _kind_of(st.st_mode)))
        fd = os.open("/proc/self/fd/%d" % pfd, flags)   # the file this descriptor is, nothing else
    finally:
        os.close(pfd)
    return RawFile(fd), os.fstat(fd)


def _read_text(path, limit=65536, root=""):
    try:
        f, _ = open_regular(path, root)
    except (OSError, RefusedFile):
        return None
    try:
        return f.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    finally:
        f.close()


def run_dir_disk(run_dir, root=""):
    """Free space on the run dir's filesystem (and an exit_code.tmp's size), the dir resolved
    inside `root` like every other path: read while no exit code is recorded, so a run that
    vanished can be told apart from a kill -9 -- a full disk kills the trainer, then the
    wrapper, leaving exit_code.tmp empty."""
    try:
        fd = _path_fd(run_dir, root)
    except OSError:
        return None
    try:
        st = os.statvfs(fd)            # fstatfs works on an O_PATH descriptor (Linux >= 3.12)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        tfd = _path_fd(run_dir + "/exit_code.tmp", root)
        try:
            tmp_bytes = os.fstat(tfd).st_size
        finally:
            os.close(tfd)
    except OSError:
        tmp_bytes = None
    return {"free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize,
            "exit_code_tmp_bytes": tmp_bytes}


def _open_stat(path, root=""):
    """(file, fstat, None) or (None, None, why)."""
    try:
        f, st = open_regular(path, root)
        return f, st, None
    except RefusedFile as exc:
        return None, None, str(exc)
    except OSError as exc:
        return None, None, exc.strerror or str(exc)


def _digest(data):
    return "%d:%s" % (len(data), hashlib.sha1(data).hexdigest())


def _pread(f, offset, n):
    if n <= 0:
        return b""
    return f.pread(offset, n)


def _matches(f, size, offset, fingerprint):
    """Does the file hold, just before `offset`, the bytes `fingerprint` digests?"""
    if not fingerprint:
        return True
    try:
        n = int(fingerprint.split(":", 1)[0])
    except ValueError:
        return True
    if offset < n or size < offset:
        return False
    return _digest(_pread(f, offset - n, n)) == fingerprint


def _head_matches(f, size, head):
    """Does the file begin with the bytes `head` digests? (the fingerprint of [0, n): the
    bytes before offset n)"""
    length = (head or "").split(":", 1)[0]
    return _matches(f, size, int(length) if length.isdigit() else 0, head)


def _siblings(path, root):
    """(name, fstat) of the regular files beside `path` (same directory, inside root)."""
    d = os.path.dirname(path) or "/"
    try:
        dfd = _path_fd(d, root)
    except OSError:
        return []
    out = []
    try:
        listing = os.open("/proc/self/fd/%d" % dfd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            names = os.listdir(listing)
            for name in names:
                try:
                    st = os.stat(name, dir_fd=listing, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out.append((d.rstrip("/") + "/" + name, st))
        finally:
            os.close(listing)
    except OSError:
        return []
    finally:
        os.close(dfd)
    return out


def _renamed_to(path, inode, root=""):
    """Where the file with `inode` went when it left `path`: a name in the same directory
    (logrotate's rename, `mv train.log train.log.1`), or None (deleted, or moved away)."""
    for name, st in _siblings(path, root):
        if st.st_ino == inode and name != path:
            return name
    return None


def _copy_of(path, root, cur):
    """copytruncate: the sibling that holds the truncated file's bytes up to the cursor
    (its first bytes match the cursor's head and the bytes before the offset its
    fingerprint), or None (no copy, or a compressed one)."""
    if not cur.get("head") or not cur.get("tail"):
        return None
    offset = cur.get("offset") or 0
    for name, st in _siblings(path, root):
        if name == path or st.st_size < offset:
            continue
        f, fst, _ = _open_stat(name, root)
        if f is None:
            continue
        try:
            if _head_matches(f, fst.st_size, cur["head"]) and _matches(f, fst.st_size, offset, cur["tail"]):
                return name
        finally:
            f.close()
    return None


_HELD = {}  # type: dict
"""Agent mode: path -> (file, inode) of each followed log, kept open between ticks, so a
log deleted or renamed out of sight is read to its end through the descriptor (as
`tail -F` does). A one-shot probe holds them only for its own life."""


def _held(path, inode):
    got = _HELD.get(path)
    if got is None or got[1] != inode:
        return None
    return got[0]


def _hold(path, f, st):
    old = _HELD.get(path)
    if old is not None and old[0] is not f:
        old[0].close()
    _HELD[path] = (f, st.st_ino)


def _writer_fd(path, root, proc_root, pid, inode):
    """A log deleted before this process held it: the writer's stdout/stderr descriptor
    still reaches the unlinked file: `proc_root` is the node's own /proc and `pid` the host
    pid (never a CT's /proc: one mounted over it could point fd/1 at any node file).
    Accepted only if it is a regular file with the cursor's inode on the log directory's
    filesystem."""
    if not pid:
        return None
    d = os.path.dirname(path) or "/"
    try:
        dfd = _path_fd(d, root)
        try:
            dev = os.fstat(dfd).st_dev
        finally:
            os.close(dfd)
    except OSError:
        return None
    for n in (1, 2):
        link = "%s/%d/fd/%d" % (proc_root, int(pid), n)
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if inode is None and target != path + " (deleted)":
            continue
        try:
            pfd = os.open(link, _O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(pfd)
            if not stat.S_ISREG(st.st_mode) or st.st_dev != dev or (inode is not None and st.st_ino != inode):
                continue
            fd = os.open("/proc/self/fd/%d" % pfd, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        except OSError:
            continue
        finally:
            os.close(pfd)
        f = RawFile(fd)
        return f, os.fstat(f.fileno()), link
    return None


def _pick_file(path, cur, carry, root, proc_root, pid):
    """Which file the cursor continues in: (file, fstat, followed, event, error).

    `path` if it still is the cursor's file; else the file the cursor's inode went to
    (renamed in its directory, held open by the agent, or reachable through the writer's
    descriptor) as long as it has unread bytes or nothing is written at `path`;
    after a copytruncate the copy, read from the cursor to its end first."""
    inode, dev, offset = cur.get("inode"), cur.get("dev"), cur.get("offset") or 0
    f, st, err = _open_stat(path, root)
    if err is not None and f is None and "not a regular file" in err:
        return None, None, None, None, err
    if inode is None:
        if f is None:
            got = _writer_fd(path, root, proc_root, pid, None)
            if got is not None:
                return got[0], got[1], got[2], "deleted", None
        return f, st, None, None, err
    if st is not None and st.st_ino == inode and dev in (None, st.st_dev):
        if st.st_size < offset or not _matches(f, st.st_size, offset, cur.get("tail")):
            copy = _copy_of(path, root, cur)
            if copy is not None:
                cf, cst, _ = _open_stat(copy, root)
                if cf is not None:
                    f.close()
                    return cf, cst, copy, "copytruncate", None
            return f, st, None, "truncated", None
        if offset and not _head_matches(f, st.st_size, cur.get("head")):
            return f, st, None, "replaced", None       # a new file that got the old inode number
        return f, st, None, None, None
    path_quiet = st is None or st.st_size == 0
    cands = []
    old = _renamed_to(path, inode, root)
    if old is not None:
        cands.append(("renamed", old))
    held = _held(path, inode)
    if held is not None:
        cands.append(("held", held))
    cands.append(("writer", None))
    for how, where in cands:
        if how == "renamed":
            of, ost, _ = _open_stat(where, root)
            label, event = where, "renamed"
        elif how == "held":
            try:
                of, ost = where, os.fstat(where.fileno())
            except OSError:
                continue
            label, event = path + " (held open)", "deleted" if ost.st_nlink == 0 else "renamed"
        else:
            got = _writer_fd(path, root, proc_root, pid, inode)
            if got is None:
                continue
            of, ost, label = got
            event = "deleted"
        if of is None or ost.st_size < offset:
            if of is not None and how != "held":
                of.close()
            continue
        if ost.st_size > offset + carry or path_quiet:
            if f is not None:
                f.close()
            return of, ost, label, event, None
        if how != "held":
            of.close()
    return f, st, None, None, err


# -- between ticks (agent mode) ---------------------------------------------------------
#
# A tick reads a log every interval; a truncation destroys whatever was written after the
# last read (one poll window x the write rate: 0.1 s at 370 lines/s is ~37 lines). So the
# agent reads each followed log as it is written, between requests -- in its log reader
# process (log_reader.py: woken by inotify as `tail -F` is, and scheduled ahead of it where
# it may be), else in-process by a follower thread -- and keeps the bytes past the
# watcher's cursor until a request's cursor passes them. Once the file is seen cut
# (shorter than, or different before, what was read), a request is answered from those
# saved bytes first, then the file from its start. Only the descriptor open_regular
# already vetted is read (a regular file inside its root), through a dup of it; memory is
# at most SHADOW_CAP_BYTES per log, the oldest dropped and told as `lost_bytes`.

SHADOW_CAP_BYTES = 4 << 20
"""The most bytes of one log the agent keeps past its watcher's cursor."""
SHADOW_TOTAL_CAP_BYTES = 64 << 20
"""...and for all its logs together (each gets an equal share, at least SHADOW_MIN_CAP_BYTES)."""
SHADOW_MIN_CAP_BYTES = 256 << 10
SHADOW_IDLE_S = 120.0
"""A log no request has asked for this long is no longer followed (its run left the watch)."""
_READER = []  # type: list  # [LogReader] once the agent's reader process runs
READER_DRAIN_S = 0.05
"""How long the follower thread lets the reader's events gather before it takes them: once
sent they are the socket's (up to its buffer, 4 MiB where the agent may set it), so only
the reader must be quick; a wake-up of the agent per write was ~0.1 ms of CPU each."""


def _reader():
    """The agent's reader process (LogReader), or None: read in-process. A reader found
    stopped (it died, or did not answer) is let go here, and the logs it read are read on
    in-process from where its last event left them."""
    if _READER and not _READER[0].alive:
        del _READER[:]
        for sh in list(_SHADOWS.values()):
            if sh.rid is not None:
                sh.read_in_process()
    return _READER[0] if _READER else None


class LogShadow(object):
    """One followed log's bytes from `base` on, as its reading (LogReading, here or in
    the reader process) reports them; `gen` is the content it holds (0: the file as the
    watcher's cursor knows it).

    Once cut, the content written after the cut is kept by `next` (from offset 0), so a
    line appended to the emptied file and then overwritten by the rewrite (a writer with
    O_APPEND beside a rewriter without it) is kept too; FOLLOWED_GENERATIONS at most. The chain's
    first shadow owns the reading (`reading` in-process, `rid` in the reader process)."""

    def __init__(self, f, inode, dev, base, cap, gen=0, follow=True):
        self.f = RawFile(os.dup(f.fileno()))     # its own descriptor: the held one is replaced per read
        self.inode, self.dev, self.cap, self.gen = inode, dev, cap, gen
        self.next = None  # type: Any  # the content after the cut, once cut
        self.base = base
        self.pre = _pread(self.f, max(0, base - FP_BYTES), min(base, FP_BYTES))   # the bytes before base
        self.buf = bytearray()                   # the file's bytes [base, end)
        self.cut = False                         # since shrunk below `end`, or its bytes before `end` changed
        self.dropped = 0                         # bytes dropped past the cap (base moved past them unread)
        self.asked_s = time.time()
        self.reading, self.rid = None, None
        if follow:
            reader = _reader()
            if reader is not None:
                self.rid = reader.follow(self.f.fileno(), base, self.pre, cap, FP_BYTES)
                if self.rid is not None:
                    _BY_READING[self.rid] = self
            if self.rid is None:
                self.reading = LogReading(os.dup(self.f.fileno()), base, self.pre, cap, FP_BYTES)

    @property
    def end(self):
        return self.base + len(self.buf)

    @property
    def polled(self):
        """Read in-process without an inotify watch: the follower thread must poll."""
        return self.reading is not None and self.reading.wd is None

    def known(self):
        """The last FP_BYTES the shadow holds of the file, ending at `end`."""
        return (self.pre + bytes(self.buf[-FP_BYTES:]))[-FP_BYTES:]

    def pump(self):
        """Take what the reading has read since (in-process: read it now)."""
        if self.reading is not None:
            for kind, gen, offset, payload in self.reading.step():
                self.take(kind, gen, offset, payload)

    def take(self, kind, gen, offset, payload):
        """One event of the reading (log_reader.py's module doc): to the generation it is of."""
        sh = self  # type: Any
        while sh is not None and sh.gen < gen:
            sh = sh.next
        if sh is None or sh.gen != gen:
            return                               # a content past GENERATIONS, or one already handed on
        if kind == b"C":
            sh.cut = True                        # truncated (and perhaps rewritten): buf is all that is left
            if gen + 1 < FOLLOWED_GENERATIONS:
                sh.next = LogShadow(sh.f, sh.inode, sh.dev, 0, sh.cap, gen + 1, follow=False)
        elif kind == b"S":
            sh.dropped += offset - sh.end
            sh.buf, sh.base, sh.pre = bytearray(), offset, payload
        elif kind == b"D" and not sh.cut:
            if offset > sh.end:                  # never so (a reading's events are contiguous): as if dropped
                sh.dropped += offset - sh.end
                sh.buf, sh.base, sh.pre = bytearray(), offset, b""
            sh.buf += payload[sh.end - offset:]
            sh.drop_over()

    def drop_over(self):
        """Keep at most `cap` bytes: the oldest go (told as lost_bytes if the file is cut)."""
        over = len(self.buf) - self.cap
        if over > 0:
            self.pre = bytes(self.buf[over - FP_BYTES:over]) if over >= FP_BYTES else \
                (self.pre + bytes(self.buf[:over]))[-FP_BYTES:]
            del self.buf[:over]
            self.base += over
            self.dropped += over

    def set_cap(self, cap):
        self.cap = cap
        if self.reading is not None:
            self.reading.cap = cap
        elif self.rid is not None and _READER and _READER[0].alive:
            _READER[0].set_cap(self.rid, cap)
        self.drop_over()

    def trim(self, pos):
        """The watcher holds the bytes before `pos`: keep only those after it."""
        if self.base < pos <= self.end:
            n = pos - self.base
            self.pre = (self.pre + bytes(self.buf[max(0, n - FP_BYTES):n]))[-FP_BYTES:]
            del self.buf[:n]
            self.base = pos

    def answer(self, pos, cap):
        """The reply to a cursor at `pos` of a cut file: the saved bytes from there (from
        `base` when the cap dropped some: lost_bytes), as read_since spells a read."""
        start = max(pos, self.base)
        data = bytes(self.buf[start - self.base:start - self.base + cap])
        at = start - self.base
        held = self.pre + bytes(self.buf[max(0, at - FP_BYTES):at])
        try:
            st = os.fstat(self.f.fd)
            size, mtime, nlink = st.st_size, st.st_mtime, st.st_nlink
        except (OSError, TypeError):
            size, mtime, nlink = None, None, 1
        out = {"exists": True, "inode": self.inode, "dev": self.dev, "size": size, "mtime": mtime, "start": start,
               "rotated": False, "bytes": _blob(data), "saved": True, "before": _blob(held[-FP_BYTES:])}
        if start > pos:
            out["lost_bytes"] = start - pos
        if nlink == 0:
            out["deleted"] = True
        return out

    def read_in_process(self):
        """The reader process is gone: read on here from where the chain's last content is."""
        last = self
        while last.next is not None:
            last = last.next
        _BY_READING.pop(self.rid, None)
        self.rid = None
        self.reading = LogReading(os.dup(self.f.fileno()), last.end, last.known(), self.cap, FP_BYTES)
        self.reading.gen = last.gen
        self.reading.done = last.cut

    def close(self):
        if self.rid is not None:
            rid, self.rid = self.rid, None
            _BY_READING.pop(rid, None)
            if _READER and _READER[0].alive:
                _READER[0].forget(rid)
        if self.reading is not None:
            self.reading.close()
            self.reading = None
        self.f.close()
        if self.next is not None:
            self.next.close()

    def successor(self):
        """The next generation, the caller's now with the reading (this one is done: the
        watcher has it all)."""
        nxt, self.next = self.next, None
        nxt.reading, nxt.rid, self.reading, self.rid = self.reading, self.rid, None, None
        if nxt.rid is not None:
            _BY_READING[nxt.rid] = nxt
        self.close()
        return nxt


_BY_READING = {}  # type: dict  # reader process's reading id -> the LogShadow chain it feeds


def _take_event(rid, kind, gen, offset, payload):
    sh = _BY_READING.get(rid)
    if sh is not None:
        sh.take(kind, gen, offset, payload)


def _cut_event(path, root, cur, pos):
    """What cut the log: `copytruncate` when a copy of it lies beside it (its first bytes
    the cursor's head, no longer than what was read), else `truncated`."""
    if _copy_of(path, root, cur) is not None:
        return "copytruncate"
    if cur.get("head"):
        for name, st in _siblings(path, root):
            if name == path or not 0 < st.st_size <= pos:
                continue
            f, fst, _ = _open_stat(name, root)
            if f is None:
                continue
            try:
                if _head_matches(f, fst.st_size, cur["head"]):
                    return "copytruncate"
            finally:
                f.close()
    return "truncated"


_SHADOWS = {}  # type: dict  # (root, path) -> LogShadow of each followed log (agent mode)


def _follow_shadows(lock):
    """The agent's follower thread: takes the reader process's events as they come (else,
    reading in-process, woken by inotify on any followed log or every FOLLOW_POLL_S), while
    a request is being answered too, so a request's own time (a process scan) is no window
    for a truncation."""
    ino = inotify()
    while True:
        reader = _reader()
        if reader is not None:
            if select.select([reader], [], [], 1.0)[0]:
                time.sleep(READER_DRAIN_S)       # the bytes are safe in the socket: one wake-up a batch
        elif ino is None or any(sh.polled for sh in list(_SHADOWS.values())):
            if ino is not None:
                select.select([ino[1]], [], [], FOLLOW_POLL_S)
            else:
                time.sleep(FOLLOW_POLL_S)
        else:
            select.select([ino[1]], [], [], 1.0)
        drain_inotify()
        try:
            with lock:
                if reader is not None:
                    reader.drain()
                    _reader()                   # stopped: read on in-process
                    _forget_idle()
                else:
                    pump_shadows()
        except Exception:  # noqa: BLE001 - keep following; a request pumps too
            time.sleep(FOLLOW_POLL_S)


def pump_shadows():
    """Take every followed log's new bytes (the reader's, synced; else read here); forget
    the logs no request asked for in SHADOW_IDLE_S."""
    reader = _reader()
    if reader is not None and not reader.sync():
        _reader()                               # it did not answer: read on in-process
    _forget_idle()
    for sh in list(_SHADOWS.values()):
        sh.pump()


def _forget_idle():
    now = time.time()
    for key, sh in list(_SHADOWS.items()):
        if now - sh.asked_s > SHADOW_IDLE_S:
            sh.close()
            del _SHADOWS[key]


def start_shadow_thread():
    """Agent mode only (a one-shot probe follows nothing between ticks): the reader
    process first (forked while this is the only thread), then the thread that takes its
    events -- or reads in-process where there is no reader, with a short GIL switch
    interval so it reads within ~1 ms of a write even while the main thread answers a
    request (the default 5 ms is ~2 lines at 370 lines/s)."""
    import threading
    if _SHADOW_LOCK:
        return
    reader = LogReader(_take_event)
    if reader.start():
        _READER.append(reader)
    _SHADOW_LOCK.append(threading.Lock())
    sys.setswitchinterval(0.0005)
    t = threading.Thread(target=_follow_shadows, args=(_SHADOW_LOCK[0],))
    t.daemon = True
    t.start()


class _NoLock(object):
    """The lock of a process with no follower thread (one-shot, tests): nothing to exclude."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_SHADOW_LOCK = []  # type: list  # [threading.Lock] once the follower thread runs


def _shadow_lock():
    return _SHADOW_LOCK[0] if _SHADOW_LOCK else _NoLock()


def _catch_up(sh):
    """Everything read of the log so far, taken (the reader process synced)."""
    reader = _reader()
    if sh.rid is not None and reader is not None and not reader.sync():
        _reader()                               # it did not answer: read on in-process
    sh.pump()


def _shadow_of(key, cur, carry):
    """The followed log's shadow, caught up, for a cursor on its file (else None); trimmed
    to the cursor while the file is whole."""
    sh = _SHADOWS.get(key)
    if sh is None or cur.get("inode") != sh.inode or cur.get("dev") not in (None, sh.dev):
        return None
    sh.asked_s = time.time()
    _catch_up(sh)
    pos = (cur.get("offset") or 0) + (carry or 0)
    if not sh.cut:
        sh.trim(pos)
    return sh


def _keep_shadow(key, f, st, end, restarted):
    """After a read of the log at its path up to `end`: follow it on from there (a new
    shadow when there is none, the file is another, or the old one was cut)."""
    sh = _SHADOWS.get(key)
    if sh is not None and not restarted and not sh.cut and sh.inode == st.st_ino and sh.dev == st.st_dev \
            and sh.base <= end and end > sh.end:
        _catch_up(sh)                   # written since the request caught up: the reader has it by now
    if sh is not None and not restarted and not sh.cut and sh.inode == st.st_ino and sh.dev == st.st_dev \
            and sh.base <= end <= sh.end:
        sh.asked_s = time.time()
        return
    if sh is not None:
        sh.close()
        del _SHADOWS[key]
    cap = max(SHADOW_MIN_CAP_BYTES, min(SHADOW_CAP_BYTES, SHADOW_TOTAL_CAP_BYTES // (len(_SHADOWS) + 1)))
    _SHADOWS[key] = LogShadow(f, st.st_ino, st.st_dev, end, cap)
    for other in _SHADOWS.values():      # an equal share each
        if other.cap != cap:
            other.set_cap(cap)


def _tail_start(f, size, lines):
    """The offset where the last `lines` lines of the file begin (read backwards, as
    `tail -n` counts: a final newline does not start another line)."""
    end = size - 1 if size and _pread(f, size - 1, 1) == b"\n" else size
    pos, seen = end, 0
    while pos > 0:
        n = min(65536, pos)
        block = _pread(f, pos - n, n)
        i = len(block)
        while True:
            i = block.rfind(b"\n", 0, i)
            if i < 0:
                break
            seen += 1
            if seen >= lines:
                return pos - n + i + 1
        pos -= n
    return 0


def read_since(path, inode, offset, cap, context=0, root="", cursor=None, carry=0, proc_root=None,
               pid=None, hold=False, fp_bytes=False, tail_lines=0):
    """New bytes of a growing file from a cursor (_read_since); a held log's under the
    follower thread's lock (its shadow is read and moved here)."""
    if not hold:
        return _read_since(path, inode, offset, cap, context, root, cursor, carry, proc_root, pid, hold, fp_bytes,
                           tail_lines)
    with _shadow_lock():
        return _read_since(path, inode, offset, cap, context, root, cursor, carry, proc_root, pid, hold, fp_bytes,
                           tail_lines)


def _read_since(path, inode, offset, cap, context, root, cursor, carry, proc_root, pid, hold, fp_bytes,
                tail_lines):
    """New bytes of a growing file from a cursor.

    `cursor` (one file's FileCursor as JSON, controller/records.py: inode, dev,
    committed offset, tail and head fingerprints, under the same names) says where the
    watcher is; `carry` bytes past that offset the controller already holds
    (a partial line), so the read starts at offset + carry. The file is a new one -- read
    from 0, `rotated` -- when its inode or device differs, it is shorter than the offset, its bytes
    before the offset or its first bytes no longer match the fingerprints (a truncation
    that regrew, an inode number reused). A file renamed away, deleted while held open
    (agent) or still open in the writer is read to its end first, and followed while
    nothing is written at `path`; after a copytruncate the copy is read from the cursor
    first. `followed` names the file read when it is not `path`, `event` says what
    happened to the log (renamed, deleted, copytruncate, truncated).

    Returns {exists, inode, size, mtime, start, rotated, bytes(blob), head, before, ...}:
    `start` is the offset the returned bytes begin at, `head` the file's first FP_BYTES
    and `before` the FP_BYTES before `start` (the controller's next fingerprints).
    With `context` (and the cursor still valid) also up to that many bytes before the
    cursor, as {context(blob), context_start}: what a restarted watch shows as its tail.
    """
    cur = dict(cursor or {})
    if cursor is None:
        cur = {"inode": inode, "offset": offset}
    offset = cur.get("offset") or 0
    inode, dev = cur.get("inode"), cur.get("dev")
    key, pos, cut = (root, path), offset + (carry or 0), None
    sh = _shadow_of(key, cur, carry) if hold else None
    if sh is not None and sh.cut and pos < sh.end:
        return sh.answer(pos, cap)              # what the cut destroyed, saved by this agent
    if sh is not None and sh.cut and sh.next is not None:
        nxt = _SHADOWS[key] = sh.successor()   # all of it delivered: on to what came after the cut
        nxt.pump()
        if nxt.cut:                             # that was cut too: its bytes, from its start
            out = nxt.answer(0, cap)
            out.update(rotated=True, event=_cut_event(path, root, cur, pos))
            return out
    f, st, follow, event, err = _pick_file(path, cur, carry or 0, root, proc_root, pid)
    if f is None:
        return {"exists": False, "error": err}
    if sh is not None and not sh.cut and event in ("truncated", "replaced", "copytruncate"):
        # cut since the shadow caught up above (the cursor's inode is the shadow's): what
        # the reader read before the cut is the answer, not the file from its start
        _catch_up(sh)
        if sh.cut and pos < sh.end:
            f.close()
            return sh.answer(pos, cap)
    if sh is not None and sh.cut and follow is None and st.st_ino == sh.inode and st.st_dev == sh.dev:
        cut = _cut_event(path, root, cur, pos)  # all the saved bytes delivered: the file anew, from its start
    keep = False
    try:
        rotated = False
        if cut is not None:
            rotated, event = True, cut
        elif event == "copytruncate":
            pass                            # the copy holds the cursor's bytes
        elif event in ("truncated", "replaced"):
            rotated = True                  # shorter than the cursor, or its bytes changed (_pick_file)
        elif inode is not None and (st.st_ino != inode or dev not in (None, st.st_dev)):
            rotated, event = True, event or "replaced"
        elif st.st_size < offset:
            rotated, event = True, "truncated"
        start = 0 if rotated else offset + (carry or 0)
        if start > st.st_size:
            start = st.st_size
        if tail_lines and inode is None and not offset:
            start = _tail_start(f, st.st_size, tail_lines)   # `dfctl logs --tail N`: its last lines
        n = max(0, min(st.st_size - start, cap))
        data = _pread(f, start, n)
        out = {"exists": True, "inode": st.st_ino, "dev": st.st_dev, "size": st.st_size, "mtime": st.st_mtime,
               "start": start, "rotated": rotated, "bytes": _blob(data)}
        if fp_bytes or rotated or event:
            # what the controller's next fingerprints are made of (it keeps them after this)
            out["head"] = _blob(_pread(f, 0, min(FP_BYTES, st.st_size)))
            out["before"] = _blob(_pread(f, max(0, start - FP_BYTES), min(start, FP_BYTES)))
        if event:
            out["event"] = event
        if st.st_nlink == 0:
            out["deleted"] = True
        if follow is not None:
            out["followed"] = follow
        if context and start > 0 and not rotated:
            c0 = max(0, start - context)
            out["context"], out["context_start"] = _blob(_pread(f, c0, start - c0)), c0
        if hold and follow is None:
            _hold(path, f, st)
            keep = True
            _keep_shadow(key, f, st, start + n, rotated)
        elif _HELD.get(path, (None,))[0] is f:
            keep = True                     # the held file of a deleted log: read it on
        return out
    finally:
        if not keep:
            f.close()


def _int_file(path, root=""):
    text = _read_text(path, 64, root)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


# -- processes -----------------------------------------------------------------------
#
# Process facts come from the node's own procfs, never from a container's: root in a CT
# can mount anything over its /proc (a directory of made-up pids whose fd/1 is a symlink
# to a node file), and a node that read the CT's /proc would list those pids and, walking
# their links with its own root, read the node's files. A CT's processes are the node's
# processes in the pid namespace of the CT's init; their pids in the CT's numbering (the
# one the pid file, `pct exec` and the user use) come from NSpid / NSpgid / NSsid of the
# node's /proc/<host pid>/status. Where a procfs must be read from inside a CT (the pct
# fallback), its statfs magic says whether it is the kernel's (procfs_refusal).

PROC_SUPER_MAGIC = 0x9FA0     # linux/magic.h


def fs_magic(fd):
    """The f_type of the filesystem `fd` is on (fstatfs through ctypes: os.statvfs has none)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = (ctypes.c_long * 32)()           # struct statfs begins with f_type (a long)
    if libc.fstatfs(int(fd), buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return buf[0] & 0xFFFFFFFF


def procfs_refusal(path="/proc", root=""):
    """None when `path` (inside `root`) is a procfs mount, else a sentence saying what it is."""
    try:
        fd = _path_fd(path, root)
    except OSError as exc:
        return "%s cannot be opened (%s)" % (path, exc.strerror)
    try:
        magic = fs_magic(fd)
    except Exception as exc:  # no ctypes: it cannot be told, so it is not trusted
        return "%s cannot be checked to be procfs (%s)" % (path, exc)
    finally:
        os.close(fd)
    if magic != PROC_SUPER_MAGIC:
        return "%s is not procfs (filesystem magic 0x%x, procfs is 0x%x): something is mounted over it" % (
            path, magic, PROC_SUPER_MAGIC)
    return None


def _pid_ns(pid):
    """`pid:[inode]` of a process's pid namespace, from the node's own /proc."""
    try:
        return os.readlink("/proc/%d/ns/pid" % int(pid))
    except OSError:
        return None


def _status_ids(text, key):
    m = re.search(r"^%s:\s*(.*)$" % key, text or "", re.M)
    return [int(x) for x in m.group(1).split()] if m else None


class PidView(object):
    """The processes of one pid namespace, read from the node's own procfs.

    init None: the /proc the probe runs under, as it is (the node's own; inside `pct exec`
    the CT's own, once procfs_refusal said it is procfs). init a host pid: the processes in
    that process's pid namespace (a CT's), found among the node's /proc entries, their stat
    lines rewritten into the namespace's numbering (pid, ppid, pgrp, session: what the CT's
    own procfs would show, 0 for a process outside it)."""

    def __init__(self, init=None):
        self.init = init
        self.ns = _pid_ns(init) if init else None
        self.error = None
        self._loaded = False
        self._rows = {}        # type: dict  # own pid -> (host pid, fields, stat text in own numbering)
        self._own_of = {}      # host pid -> own pid

    def _load(self):
        if self._loaded:
            return
        self._loaded = True
        try:
            names = os.listdir("/proc")
        except OSError as exc:
            self.error = "cannot list /proc: %s" % exc.strerror
            return
        if self.init is None:
            for name in names:
                if name.isdigit():
                    text = _read_text("/proc/%s/stat" % name, 4096)
                    if text:
                        self._rows[int(name)] = (int(name), stat_fields(text), text)
            self._own_of = dict((p, p) for p in self._rows)
            return
        if self.ns is None:
            self.error = "the container's init (host pid %d) is gone" % self.init
            return
        raw = []
        for name in names:
            if not name.isdigit() or _pid_ns(int(name)) != self.ns:
                continue
            hp = int(name)
            text = _read_text("/proc/%d/stat" % hp, 4096)
            status = _read_text("/proc/%d/status" % hp, 8192)
            ids = [_status_ids(status, k) for k in ("NSpid", "NSpgid", "NSsid")]
            if not text or not ids[0]:
                continue
            raw.append((hp, text, ids))
            self._own_of[hp] = ids[0][-1]
        for hp, text, (nspid, nspgid, nssid) in raw:
            f = stat_fields(text)
            if len(f) < 4:
                continue
            try:
                f[PPID] = str(self._own_of.get(int(f[PPID]), 0))
            except ValueError:
                continue
            f[PGRP] = str(nspgid[-1]) if nspgid else "0"
            f[SESSION] = str(nssid[-1]) if nssid else "0"
            own = nspid[-1]
            mine = "%d %s %s" % (own, comm_part(text), " ".join(f))
            self._rows[own] = (hp, f, mine)

    def host_pid(self, pid):
        """The pid of the node's /proc entry of `pid` (own numbering), or None."""
        if pid is None:
            return None
        self._load()
        row = self._rows.get(int(pid))
        return row[0] if row else None

    def own_pid(self, host_pid):
        """The pid a node process has in this view's namespace (None: not in it)."""
        self._load()
        return self._own_of.get(int(host_pid))

    def stat_text(self, pid):
        self._load()
        row = self._rows.get(int(pid))
        return row[2] if row else None

    def table(self):
        """[(fields, stat text)] of every process, own numbering; or an error string."""
        self._load()
        if self.error:
            return self.error
        return [(f, t) for _, f, t in self._rows.values()]

    def pid_ns(self, pid):
        hp = self.host_pid(pid)
        return _pid_ns(hp) if hp else None


def pid_view(init=None):
    """The request's one PidView per namespace (one scan per probe however many runs)."""
    key = init or 0
    view = _PROC_SCANS.get(key)
    if view is None:
        view = _PROC_SCANS[key] = PidView(init)
    return view


_PROC_SCANS = {}  # type: dict  # init pid (0: this /proc) -> PidView


def process_tree(view, leader):
    """Raw stat lines of the leader and every process in its session (= the run's tree),
    in the numbering of the namespace the pid file uses (the CT's, for a CT)."""
    out = {"leader_stat": view.stat_text(leader), "tree": []}
    table = view.table()
    if isinstance(table, str):
        out["error"] = table
        return out
    key = str(leader)
    # the leader's session (or process group) is the tree
    out["tree"] = [text for f, text in table if len(f) > SESSION and (f[SESSION] == key or f[PGRP] == key)]
    return out


def attached_tree(view, pid, start_ticks, pid_ns=None):
    """A run dfctl attached to: the process (only while it is the same one: its start time
    and pid namespace the recorded ones -- a pid reused by another process is not the run)
    and its descendants."""
    text = view.stat_text(pid)
    out = {"leader_stat": text, "tree": []}
    ticks = stat_int(stat_fields(text), STARTTIME)
    ns = view.pid_ns(pid) if ticks is not None else None
    if ticks is None or (start_ticks is not None and ticks != int(start_ticks)) or \
            (pid_ns and ns != pid_ns):
        out["leader_stat"] = None
        out["pid_reused"] = ticks is not None
        return out
    table = view.table()
    if isinstance(table, str):
        out["error"] = table
        return out
    kids = {}  # type: dict
    for f, t in table:
        if len(f) > PPID:
            kids.setdefault(f[PPID], []).append((t[:t.find(" ")], t))
    todo, seen = [str(pid)], set()
    while todo:
        p = todo.pop()
        for child, t in kids.get(p, []):
            if child not in seen:
                seen.add(child)
                out["tree"].append(t)
                todo.append(child)
    out["tree"].append(text)
    return out


def _listdir(path, root=""):
    if not root:
        return os.listdir(path)
    pfd = _path_fd(path, root)
    try:
        fd = os.open("/proc/self/fd/%d" % pfd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.close(pfd)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _nspid(pid):
    text = _read_text("/proc/%d/status" % pid, 8192) or ""
    m = re.search(r"^NSpid:\s*(.*)$", text, re.M)
    return [int(x) for x in m.group(1).split()] if m else None


def container_init_pid(vmid, hint_pid, lxcpath, pct, timeout_s):
    """The container's init pid on the host, found once and then cached by the controller:
    the cached pid if still right, else `lxc-info -n <vmid> -p -H` (Proxmox's own LXC),
    else the host process whose pid namespace is the one `pct exec` shows as the CT's
    (one pct start-up, first tick only; works whatever the cgroup naming or lxcpath)."""
    if hint_pid and _is_init_of(hint_pid, vmid):
        return hint_pid, "cached"
    argv = ["lxc-info", "-n", str(vmid), "-p", "-H"]
    if lxcpath:
        argv[1:1] = ["-P", lxcpath]
    rc, out, _ = _run(argv, 5)
    if rc == 0 and out.strip().isdigit():
        return int(out.strip()), "lxc-info"
    rc, out, err = _run([pct, "exec", str(vmid), "--", "readlink", "/proc/1/ns/pid"], timeout_s)
    want = out.decode("utf-8", "replace").strip()
    if rc != 0 or not want.startswith("pid:["):
        return None, "not found (lxc-info failed; pct exec %d exit %d: %s)" % (
            vmid, rc, err.decode("utf-8", "replace").strip()[-200:])
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink("/proc/%s/ns/pid" % name) != want:
                    continue
            except OSError:
                continue
            ns = _nspid(int(name))
            if ns and ns[-1] == 1:
                return int(name), "pct-ns"
    return None, "not found (no host process in pid namespace %s)" % want


def _is_init_of(pid, vmid):
    ns = _nspid(pid)
    cg = _read_text("/proc/%d/cgroup" % pid) or ""
    return bool(ns and len(ns) > 1 and ns[-1] == 1 and str(vmid) in cg)


_CG_FILES = {1: ["memory.oom_control", "memory.max_usage_in_bytes", "memory.limit_in_bytes",
                  "memory.usage_in_bytes"],
             2: ["memory.events", "memory.peak", "memory.max", "memory.current"]}


def cgroup_files_at(version, path):
    """The raw memory files of one cgroup directory; None when none can be read."""
    files = {}
    for n in _CG_FILES[int(version)]:
        t = _read_text(path + "/" + n, 8192)
        if t is not None:
            files[n] = t
    return {"version": int(version), "path": path, "files": files} if files else None


def cgroup_files(cgroup_text):
    """The memory cgroup of a process: path and the raw oom/peak/limit files (v2 or v1).

    Proxmox puts a CT's processes in /lxc/<vmid>/ns and sets the limits one level up:
    both levels are read (the counter where the processes are -- the level the launcher
    saw from inside -- and the limit where it is set); the parser combines them.
    """
    v1 = v2 = None
    for line in (cgroup_text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            v1 = parts[2]
        elif parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
    cands = []
    if v1 is not None:
        cands.append((1, "/sys/fs/cgroup/memory", v1))
    if v2 is not None:
        cands.append((2, "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") and v1 is not None
                      else "/sys/fs/cgroup", v2))
    for version, root, rel in cands:
        doc = cgroup_files_at(version, root + rel.rstrip("/"))
        if doc is None:
            continue
        if rel.rstrip("/").endswith("/ns"):
            doc["parent"] = cgroup_files_at(version, root + rel.rstrip("/")[:-3])
        return doc
    return None


# -- one run -------------------------------------------------------------------------

def _newest_wandb_file(rd, root):
    """The run's newest .wandb transaction log (offline and online runs keep one), by its
    directory's timestamp; looked up inside the root, links never followed out of it."""
    found = []
    try:
        names = _listdir(rd + "/wandb", root)
    except OSError:
        return None
    for name in names:
        if name.startswith("offline-run-") or name.startswith("run-"):
            try:
                inner = _listdir(rd + "/wandb/" + name, root)
            except OSError:
                continue
            for f in inner:
                if f.startswith("run-") and f.endswith(".wandb"):
                    found.append((name.replace("offline-", ""), rd + "/wandb/" + name + "/" + f))
    return max(found)[1] if found else None


def probe_run(run, root, cap, host_cgroup, hold=False, view=None):
    """Everything about one run. `root`: "" (this host's view) or /proc/<init>/root, inside
    which every path of the run is resolved; `view`: the PidView its pids are numbered in
    (the CT's, read from the node's own /proc; default this /proc)."""
    view = view or pid_view()
    rd = run.get("run_dir") or ""
    out = {"run_id": run["run_id"]}
    cur = run.get("cursor") or {}
    fp_files = run.get("fp_files") or ()
    attached = bool(run.get("attached"))   # not dfctl's run dir: its pid/exit_code/stop files are not ours
    pid = _int_file(rd + "/pid", root) if rd and not attached else None
    if pid is None:
        pid = run.get("pid")
    if attached:
        out["attached"] = True
    out["pid"] = pid
    out["log"] = read_since(run["log_path"], None, 0, cap, run.get("log_context", 0), root=root,
                            cursor=cur.get("log") or {}, carry=run.get("log_carry", 0), proc_root="/proc",
                            pid=view.host_pid(pid), hold=hold, fp_bytes=run.get("fp_bytes", False) or "log" in fp_files,
                            tail_lines=run.get("log_tail_lines", 0))
    out["stop_request_text"] = _read_text(rd + "/stop_request", 4096, root) if rd and not attached else None
    if run.get("want_launch") and rd and not attached:
        out["launch_json"] = _read_text(rd + "/launch.json", 65536, root)
    if pid:
        out["proc"] = attached_tree(view, pid, run.get("start_ticks"), run.get("pid_ns")) if attached \
            else process_tree(view, pid)
        if host_cgroup:
            out["cgroup"] = cgroup_files(_read_text("/proc/%d/cgroup" % pid, root=root))
    # the exit code after the process tree: a leader seen as a zombie has made every write it
    # will make, so an exit_code still absent now is one its wrapper never wrote (read in the
    # other order, a wrapper that wrote it and exited between the two reads looked vanished)
    out["exit_code_text"] = _read_text(rd + "/exit_code", 64, root) if rd and not attached else None
    if rd and not attached and out["exit_code_text"] is None:
        out["disk"] = run_dir_disk(rd, root)
    if host_cgroup and not out.get("cgroup") and run.get("cgroup"):
        # the process is gone (its /proc entry with it): read the cgroup it was in
        cg = run["cgroup"]
        out["cgroup"] = cgroup_files_at(cg["version"], cg["path"])
    if rd:
        # the same reader and cursor checks as the log's: a metrics.jsonl or .wandb file
        # truncated, rewritten or replaced is read again from its start
        out["metrics"] = read_since(rd + "/metrics.jsonl", None, 0, cap, root=root, cursor=cur.get("metrics") or {},
                                    fp_bytes="metrics" in fp_files)
        wpath = run.get("wandb_path") or _newest_wandb_file(rd, root)
        if wpath:
            out["wandb"] = read_since(wpath, None, 0, cap, root=root, cursor=cur.get("wandb") or {},
                                      fp_bytes="wandb" in fp_files)
            out["wandb"]["path"] = wpath
    return out


def probe_inside(req):
    """Mode for running inside a container (the pct fallback) or on a plain host."""
    cap = int(req.get("read_cap_bytes", 1 << 20))
    runs = []
    refused = procfs_refusal("/proc") if req.get("vmid") is not None else None
    for run in req.get("runs", []):
        if refused:   # inside a CT whose /proc is not the kernel's: nothing of it is a fact
            runs.append({"run_id": run.get("run_id"), "error": "CT %s: %s; its processes are not read from it"
                         % (req.get("vmid"), refused)})
            continue
        try:
            runs.append(probe_run(run, "", cap, True, bool(req.get("hold"))))
        except Exception as exc:  # one bad run never hides the others
            runs.append({"run_id": run.get("run_id"), "error": "%s: %s" % (type(exc).__name__, exc)})
    return runs


def probe_container(ct, runs, req, src):
    """All runs of one container: via the host's view of its files, else `pct exec`."""
    vmid = int(ct["vmid"])
    cap = int(req.get("read_cap_bytes", 1 << 20))
    doc = {"vmid": vmid}  # type: dict
    init, how = container_init_pid(vmid, ct.get("init_pid"), ct.get("lxcpath"), ct.get("pct", "pct"),
                                   float(req.get("pct_timeout_s", 20)))
    doc["init_pid"], doc["init_found_by"] = init, how
    if init:
        doc["cgroup"] = cgroup_files(_read_text("/proc/%d/cgroup" % init))
    root = "/proc/%d/root" % init if init else None
    if root and not ct.get("force_pct") and os.path.isdir(root) and _pid_ns(init):
        doc["via"] = "host"
        view = pid_view(init)      # the CT's processes from the node's /proc, never the CT's own
        results = []
        for run in runs:
            try:
                results.append(probe_run(run, root, cap, False, bool(req.get("hold")), view))
            except Exception as exc:
                results.append({"run_id": run.get("run_id"), "error": "%s: %s" % (type(exc).__name__, exc)})
        return doc, results
    # Fallback: the same script inside the container (one pct start-up per tick).
    doc["via"] = "pct"
    sub = {"mode": "inside", "runs": runs, "read_cap_bytes": cap, "vmid": vmid}
    payload = program(src, sub).encode("utf-8")
    argv = [ct.get("pct", "pct"), "exec", str(vmid), "--", ct.get("python") or "python3", "-"]
    rc, out, err = _run(argv, float(req.get("pct_timeout_s", 20)), payload)
    if rc != 0:
        doc["error"] = "pct exec %d failed (exit %d): %s" % (vmid, rc, err.decode("utf-8", "replace").strip()[-300:])
        return doc, [{"run_id": r["run_id"], "error": doc["error"]} for r in runs]
    try:
        return doc, json.loads(out.decode("utf-8"))["runs"]
    except (ValueError, KeyError) as exc:
        doc["error"] = "pct exec %d: unreadable probe output: %s" % (vmid, exc)
        return doc, [{"run_id": r["run_id"], "error": doc["error"]} for r in runs]


class _Started(object):
    """A command started now and collected later, so nvidia-smi (often the slowest part
    of a tick) runs while the files are read."""

    def __init__(self, argv, timeout_s):
        self.deadline = time.time() + timeout_s
        self.p = None  # type: subprocess.Popen | None
        try:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            self.error = None
        except OSError as exc:
            self.p, self.error = None, exc

    def result(self):
        if self.p is None:
            return 127, b"", str(self.error).encode()
        try:
            out, err = self.p.communicate(timeout=max(0.1, self.deadline - time.time()))
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
            return 124, out, err + b"\ntimed out"
        return self.p.returncode, out, err


def start_gpu_queries(req):
    """Start `--query-gpu` (and `--query-compute-apps` when asked) side by side."""
    smi = req.get("nvidia_smi", "nvidia-smi")
    gpu = _Started([smi, "--query-gpu=" + req["gpu_query"], "--format=csv,noheader,nounits"], 10)
    apps = None
    if req.get("gpu_apps", True) and gpu.p is not None:
        apps = _Started([smi, "--query-compute-apps=" + req["apps_query"], "--format=csv,noheader,nounits"], 10)
    return gpu, apps


def gpu_readings(started):
    """Collect the GPU table + compute apps + each app pid's cgroup/NSpid (host pids)."""
    gpu, apps = started
    return _gpu_doc(gpu.result(), apps.result() if apps is not None else None)


def gpu_from_fd(fd, timeout_s):
    """The nvidia-smi output the shell piped to `fd` (started before this interpreter, so
    Python's start-up and the GPU query overlap): sections end in `@@dfctl-rc=<code>`."""
    import select
    chunks, deadline = [], time.time() + timeout_s  # type: list, float
    while True:
        left = deadline - time.time()
        if left <= 0:
            return _gpu_doc((124, b"".join(chunks), b"nvidia-smi timed out"), None)
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        block = os.read(fd, 65536)
        if not block:
            break
        chunks.append(block)
    sections, cur = [], []  # type: list, list
    for line in b"".join(chunks).splitlines(True):
        if line.startswith(b"@@dfctl-rc="):
            try:
                rc = int(line[len(b"@@dfctl-rc="):].strip())
            except ValueError:
                rc = 1
            sections.append((rc, b"".join(cur), b""))
            cur = []
        else:
            cur.append(line)
    if not sections:
        return _gpu_doc((1, b"".join(cur), b"no output from the GPU query"), None)
    return _gpu_doc(sections[0], sections[1] if len(sections) > 1 else None)


def _gpu_doc(gpu, apps):
    rc, out, err = gpu
    doc = {"gpu": _cmd_doc(rc, out, err)}
    if apps is None or rc != 0:
        return doc
    arc, aout, aerr = apps
    doc["apps"] = _cmd_doc(arc, aout, aerr)
    pids = {}
    if arc == 0:
        for line in aout.decode("utf-8", "replace").splitlines():
            first = line.split(",", 1)[0].strip()
            if first.isdigit():
                p = int(first)
                pids[str(p)] = {"cgroup": _read_text("/proc/%d/cgroup" % p, 8192), "nspid": _nspid(p)}
    doc["app_pids"] = pids
    return doc


def handle(req, src=""):
    """One request -> one document (the body of a tick on this host)."""
    t0 = time.time()
    _PROC_SCANS.clear()   # a fresh process table per request (the agent serves many)
    if req.get("mode") == "inside":
        return {"runs": probe_inside(req)}
    doc = {"version": 1, "time_s": t0, "clk_tck": os.sysconf("SC_CLK_TCK"),
           "page_size": os.sysconf("SC_PAGE_SIZE"), "hostname": os.uname()[1]}  # type: dict
    doc["uptime_s"] = float((_read_text("/proc/uptime") or "0").split()[0])
    started = None
    gpu = req.get("gpu", True)
    if gpu and req.get("gpu_sampler"):
        doc.update(_SAMPLER.latest(req))
        gpu = False
    elif gpu and req.get("gpu_fd") is None:
        started = start_gpu_queries(req)
    by_ct = {}  # type: dict
    plain = []
    for run in req.get("runs", []):
        if run.get("vmid") is not None:
            by_ct.setdefault(int(run["vmid"]), []).append(run)
        else:
            plain.append(run)
    doc["runs"] = probe_inside({"runs": plain, "read_cap_bytes": req.get("read_cap_bytes", 1 << 20),
                                "hold": req.get("hold")})
    cts = {int(c["vmid"]): c for c in req.get("containers", [])}
    doc["containers"] = []
    for vmid, runs in sorted(by_ct.items()):
        ct_doc, results = probe_container(cts.get(vmid, {"vmid": vmid}), runs, req, src)
        doc["containers"].append(ct_doc)
        doc["runs"].extend(results)
    if started is not None:
        doc.update(gpu_readings(started))
    elif gpu:
        doc.update(gpu_from_fd(int(req["gpu_fd"]), 12.0))
    doc["duration_s"] = time.time() - t0
    return doc


def main(req, src=""):
    """One-shot mode: one request, one document on stdout, exit."""
    sys.stdout.write(json.dumps(handle(req, src)))
    sys.stdout.flush()


class _GpuSampler(object):
    """Agent mode: nvidia-smi sampled by a background thread every `gpu_every_s` (compute
    apps every `gpu_apps_every_s`), so a tick returns the latest sample at once instead of
    waiting for nvidia-smi (the slowest part of a tick on a real 8-GPU node)."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()
        self.doc = None
        self.thread = None
        self.every_s, self.apps_every_s, self.smi = 1.0, 10.0, "nvidia-smi"
        self.queries = {}
        self.apps_at = 0.0

    def _sample(self):
        want_apps = time.time() - self.apps_at >= self.apps_every_s
        started = start_gpu_queries(dict(self.queries, nvidia_smi=self.smi, gpu_apps=want_apps))
        doc = gpu_readings(started)
        doc["gpu_sampled_s"] = time.time()
        with self.lock:
            if want_apps and "apps" in doc:
                self.apps_at = doc["gpu_sampled_s"]
            elif self.doc is not None and "apps" in self.doc and doc["gpu"]["rc"] == 0:
                doc["apps"], doc["app_pids"] = self.doc["apps"], self.doc.get("app_pids", {})
            self.doc = doc

    def _loop(self):
        while True:
            time.sleep(self.every_s)
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - keep sampling; the next tick shows the error
                pass

    def latest(self, req):
        import threading
        self.every_s = max(0.2, float(req.get("gpu_every_s", 1.0)))
        self.apps_every_s = float(req.get("gpu_apps_every_s", 10.0))
        self.smi = req.get("nvidia_smi", "nvidia-smi")
        self.queries = {"gpu_query": req["gpu_query"], "apps_query": req["apps_query"]}
        if self.doc is None:
            self._sample()
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop)
            self.thread.daemon = True
            self.thread.start()
        with self.lock:
            assert self.doc is not None   # _sample() above set it, or raised
            return dict(self.doc)


_SAMPLER = _GpuSampler()


AGENT_IDLE_EXIT_S = 120.0
"""How long an agent waits for a request before it exits, until a request says otherwise."""


def serve(src="", pending=b""):
    """Agent mode: JSON request lines on stdin, one JSON document line each on stdout.

    Holds no state a restart would lose: every cursor arrives with each request (the
    open descriptors of followed logs it keeps, and the bytes it reads from them between
    requests -- LogShadow -- are a help, not a need). It exits when
    stdin closes (the controller went away) OR when no request has come for
    `idle_exit_s` (each request says how long: a few watch intervals) -- a cut link
    brings no end-of-file (the TCP session can linger for hours), and an agent left
    behind would hold a root python process and an sshd session on the node per flap.
    `pending`: bytes of stdin the bootstrap already read past the script."""
    fd = sys.stdin.fileno()
    import select
    start_shadow_thread()
    buf = pending
    idle_exit_s = AGENT_IDLE_EXIT_S
    last = time.time()
    while True:
        while b"\n" not in buf:
            left = idle_exit_s - (time.time() - last)
            if left <= 0:
                return
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            block = os.read(fd, 1 << 20)
            if not block:
                return
            buf += block
        line, buf = buf.split(b"\n", 1)
        try:
            req = json.loads(line.decode("utf-8"))
            idle_exit_s = float(req.get("idle_exit_s") or idle_exit_s)
            req["hold"] = True
            doc = handle(req, src)
        except Exception as exc:  # noqa: BLE001 - answer, never die mid-conversation
            doc = {"error": "probe agent: %s: %s" % (type(exc).__name__, exc)}
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
        last = time.time()


EXEC_SRC = "exec(compile(_SRC, 'dfctl-probe', 'exec'))"
"""How every way of starting the probe runs its text (kept as `_SRC`, so the script
can re-send itself into a container for the pct fallback)."""


def program(src, req):
    """The program a one-shot `python3 -` reads: the script, executed, then main(req)."""
    return "_SRC = %r\n%s\nmain(json.loads(%r), _SRC)\n" % (src, EXEC_SRC, json.dumps(req))


def agent_bootstrap():
    """The `python3 -c` text of an agent: it reads `<length>\\n<script>` from stdin
    (os.read, so no buffered reader swallows the first request), runs it, serves."""
    return ("import os\n"
            "b = b''\n"
            "while b'\\n' not in b:\n"
            "    c = os.read(0, 65536)\n"
            "    if not c:\n"
            "        raise SystemExit(0)\n"
            "    b += c\n"
            "n, b = b.split(b'\\n', 1)\n"
            "n = int(n)\n"
            "while len(b) < n:\n"
            "    c = os.read(0, 1 << 20)\n"
            "    if not c:\n"
            "        raise SystemExit(0)\n"
            "    b += c\n"
            "_SRC = b[:n].decode('utf-8')\n"
            + EXEC_SRC + "\n"
            "serve(_SRC, b[n:])\n")


if __name__ == "__main__" and "_SRC" not in globals():  # `python3 probe_agent.py < request.json`
    main(json.load(sys.stdin), open(__file__).read())
