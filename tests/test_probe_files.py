"""The probe's file reading as the untrusted input it is, and log following like the
log shippers: paths resolved inside a container's root (openat2 and the walk fallback),
non-regular files refused, fingerprints that see a truncation which regrew, the copy of
a copytruncate read first, a deleted log read through a held or the writer's descriptor.

The container root here is a directory the test owns (the probe resolves a CT path
under /proc/<init>/root the same way: `root` is just a directory fd)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.follow.cursor import LogFollower
from controller.probe import HostProbeRequest, RunProbeRequest
from controller.probe.readings import FileRead
from controller.probe.session import ProbeSession
from controller.records import RunCursor
from controller.remote import probe_agent
from controller.transport.local import LocalTransport

SECRET = b"node secret: id_ed25519 PRIVATE KEY\n"


@pytest.fixture(params=["openat2", "walk"])
def resolve_mode(request, monkeypatch):
    if request.param == "openat2" and probe_agent._openat2() is None:
        pytest.fail("this kernel has no openat2: the walk covers it, but the test machine should have it")
    monkeypatch.setattr(probe_agent, "_FORCE_WALK", request.param == "walk")
    return request.param


@pytest.fixture
def ct(tmp_path):
    """A container root with /workspace/r, and a node secret outside it."""
    root = tmp_path / "ctroot"
    (root / "workspace" / "r").mkdir(parents=True)
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (root / "secret.txt").write_bytes(b"the container's own file\n")
    return root


def read(root: Path, path: str, **kw) -> dict:
    return probe_agent.read_since(path, None, 0, 1 << 20, root=str(root), **kw)


def data_of(doc: dict) -> bytes:
    fr = FileRead.from_doc(doc)
    return fr.data if fr is not None else b""


@pytest.mark.parametrize("link", [
    "/secret.txt",                                   # absolute: the CT's /, never the node's
    "../../../../../../../../secret.txt",            # relative, climbing past the root
    "/workspace/../../../secret.txt",                # `..` through an absolute link
])
def test_a_symlinked_log_resolves_inside_the_container_root(ct, tmp_path, resolve_mode, link):
    log = ct / "workspace" / "r" / "train.log"
    log.symlink_to(link)
    doc = read(ct, "/workspace/r/train.log")
    assert SECRET not in data_of(doc)
    assert data_of(doc) == b"the container's own file\n"          # what the CT itself would read
    (ct / "secret.txt").unlink()
    doc = read(ct, "/workspace/r/train.log")
    assert not doc["exists"] and SECRET not in data_of(doc)


def test_dotdot_in_the_requested_path_stays_in_the_root(ct, resolve_mode):
    doc = read(ct, "/workspace/r/../../../../secret.txt")
    assert data_of(doc) == b"the container's own file\n"


def test_a_symlinked_directory_and_a_link_chain_stay_inside(ct, tmp_path, resolve_mode):
    (ct / "workspace" / "r" / "sub").symlink_to(str(tmp_path))     # a node path, absolute
    (ct / "workspace" / "r" / "a").symlink_to("b")
    (ct / "workspace" / "r" / "b").symlink_to("/secret.txt")
    assert not read(ct, "/workspace/r/sub/secret.txt")["exists"]  # tmp_path inside the CT: absent
    assert data_of(read(ct, "/workspace/r/a")) == b"the container's own file\n"


def test_a_link_loop_is_refused_not_followed_forever(ct, resolve_mode):
    (ct / "workspace" / "r" / "x").symlink_to("y")
    (ct / "workspace" / "r" / "y").symlink_to("x")
    doc = read(ct, "/workspace/r/x")
    assert not doc["exists"]


def test_a_link_swapped_between_check_and_open_never_reaches_the_node(ct, tmp_path, resolve_mode):
    """A writer flips train.log between a regular file and a link to the node's secret
    (absolute target, valid only outside the root) as fast as it can."""
    run = ct / "workspace" / "r"
    (run / "real.log").write_bytes(b"ok line\n")
    stop = threading.Event()

    def flip():
        tmp = run / "train.log.tmp"
        while not stop.is_set():
            for target in ("real.log", str(tmp_path / "secret.txt")):
                try:
                    tmp.unlink()
                except FileNotFoundError:
                    pass
                tmp.symlink_to(target)
                os.replace(tmp, run / "train.log")
    t = threading.Thread(target=flip)
    t.start()
    try:
        seen = set()
        for _ in range(1500):
            doc = read(ct, "/workspace/r/train.log")
            got = data_of(doc)
            assert SECRET not in got
            seen.add(got)
    finally:
        stop.set()
        t.join()
    assert b"ok line\n" in seen


@pytest.mark.parametrize("kind", ["fifo", "dir", "socket"])
def test_a_fifo_device_or_socket_at_the_log_path_is_refused_at_once(ct, resolve_mode, kind):
    log = ct / "workspace" / "r" / "train.log"
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "dir":
        log.mkdir()
    else:
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(log))
    t0 = time.monotonic()
    doc = read(ct, "/workspace/r/train.log")
    assert time.monotonic() - t0 < 2.0
    assert not doc["exists"]
    want = {"fifo": "a FIFO", "dir": "a directory", "socket": "a socket"}[kind]
    assert want in doc["error"] and "not a regular file" in doc["error"]


def test_a_fifo_on_the_local_target_is_refused_too(tmp_path):
    os.mkfifo(tmp_path / "train.log")
    doc = probe_agent.read_since(str(tmp_path / "train.log"), None, 0, 1 << 20)
    assert not doc["exists"] and "a FIFO" in doc["error"]


def test_a_char_device_is_refused_without_being_opened_for_reading(ct, resolve_mode):
    (ct / "workspace" / "r" / "train.log").symlink_to("/dev/zero")     # the CT's /dev/zero: absent here
    assert not read(ct, "/workspace/r/train.log")["exists"]
    dev = ct / "dev"
    dev.mkdir()
    subprocess.run(["mknod", str(dev / "zero"), "c", "1", "5"], check=True)
    doc = read(ct, "/workspace/r/train.log")
    assert not doc["exists"] and "a character device" in doc["error"]


# -- following ----------------------------------------------------------------------------

def follow(path: Path, f: LogFollower, lines: list[str], cap: int = 1 << 20, **kw):
    """Read like the watch does until caught up; returns the last chunk."""
    chunk = None
    for _ in range(1000):
        doc = probe_agent.read_since(str(path), None, 0, cap, cursor=f.cursor().to_json(), carry=len(f.carry),
                                fp_bytes=f.wants_fingerprint_bytes, **kw)
        lr = FileRead.from_doc(doc)
        if not lr.exists:
            return chunk
        chunk = f.feed(lr.data, start=lr.start, inode=lr.inode, rotated=lr.rotated, head=lr.head,
                       before=lr.before, event=lr.event)
        lines += chunk.ended_lines + chunk.lines
        if lr.start + len(lr.data) >= lr.size_bytes:
            return chunk
    raise AssertionError("never caught up")


def test_truncate_then_rewrite_longer_before_the_next_read_is_seen(tmp_path):
    """The size check alone cannot see it: the new file is already past the old offset."""
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(b"old %d\n" % i for i in range(100)))
    f, lines = LogFollower(), []
    follow(log, f, lines)
    with open(log, "r+b") as fh:                         # same inode, truncated, rewritten longer
        fh.truncate(0)
        fh.write(b"".join(b"new line %d\n" % i for i in range(400)))
    chunk = follow(log, f, lines)
    assert chunk.rotated and chunk.event == "truncated"
    assert lines == [f"old {i}" for i in range(100)] + [f"new line {i}" for i in range(400)]


def test_a_restarted_follower_checks_the_stored_fingerprints(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(b"old %d\n" % i for i in range(50)))
    f, lines = LogFollower(), []
    follow(log, f, lines)
    stored = f.cursor()
    assert stored.tail and stored.head
    with open(log, "r+b") as fh:
        fh.truncate(0)
        fh.write(b"".join(b"replacement %d\n" % i for i in range(80)))
    g, lines2 = LogFollower.from_cursor(stored), []
    chunk = follow(log, g, lines2)
    assert chunk.rotated and lines2 == [f"replacement {i}" for i in range(80)]
    # an untouched file: the restarted follower goes on where it was, fingerprints intact
    h, lines3 = LogFollower.from_cursor(g.cursor()), []
    with open(log, "ab") as fh:
        fh.write(b"more\n")
    chunk = follow(log, h, lines3)
    assert not chunk.rotated and lines3 == ["more"] and h.cursor().tail


def test_copytruncate_reads_the_copy_from_the_cursor_then_the_new_file(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(30)))
    f, lines = LogFollower(), []
    follow(log, f, lines)
    with open(log, "ab") as fh:                          # written after our last read ...
        fh.write(b"".join(b"line %d\n" % i for i in range(30, 60)))
    (tmp_path / "train.log.1").write_bytes(log.read_bytes())   # ... logrotate copies ...
    with open(log, "r+b") as fh:                         # ... truncates, the writer goes on
        fh.truncate(0)
        fh.write(b"after 0\nafter 1\n")
    chunk = follow(log, f, lines)
    assert chunk.event == "copytruncate" and not chunk.rotated
    assert lines == [f"line {i}" for i in range(60)]
    chunk = follow(log, f, lines)
    assert chunk.rotated and lines[60:] == ["after 0", "after 1"]


def test_an_agent_reads_a_deleted_log_to_its_end_through_its_descriptor(tmp_path):
    """`rm train.log` under a writer that keeps writing into the unlinked file: tail -F
    keeps reading it through its descriptor; so does the agent, and says it is deleted."""
    log = tmp_path / "train.log"
    sess = ProbeSession(LocalTransport(), sys.executable)
    f, lines = LogFollower(), []

    def tick():
        req = HostProbeRequest(runs=[RunProbeRequest(run_id="d", log_path=str(log), cursor=RunCursor(log=f.cursor()),
                                                     log_carry_bytes=len(f.carry),
                                                     want_fingerprint_bytes=f.wants_fingerprint_bytes)],
                               gpu=False).to_json()
        doc = sess.request(req)
        lr = FileRead.from_doc(doc["runs"][0]["log"])
        if lr.exists:
            c = f.feed(lr.data, start=lr.start, inode=lr.inode, rotated=lr.rotated, head=lr.head,
                       before=lr.before, event=lr.event)
            lines.extend(c.lines)
        return lr
    try:
        with open(log, "ab", buffering=0) as writer:
            writer.write(b"one\n")
            tick()
            writer.write(b"two\n")
            log.unlink()
            writer.write(b"three\n")
            lr = tick()
            assert lr.exists and lr.deleted and lr.event == "deleted"
            assert lines == ["one", "two", "three"]
        log.write_bytes(b"fresh\n")                       # a new file at the path: from 0
        lr = tick()
        assert lr.rotated and lines[-1] == "fresh"
    finally:
        sess.close()


def test_a_log_deleted_before_it_was_held_is_read_through_the_writers_fd(tmp_path):
    log = tmp_path / "train.log"
    writer = subprocess.Popen([sys.executable, "-u", "-c",
                               "import sys, time\nfor i in range(4):\n print('w', i)\n time.sleep(0.2)\n"
                               "sys.stdin.readline()\nprint('after')\nsys.stdin.readline()\n"],
                              stdout=open(log, "wb"), stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while log.read_bytes().count(b"\n") < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        f = LogFollower()
        doc = probe_agent.read_since(str(log), None, 0, 1 << 20, cursor=f.cursor().to_json())
        lr = FileRead.from_doc(doc)
        f.feed(lr.data[:4], start=0, inode=lr.inode, rotated=False)   # read "w 0\n" only
        log.unlink()
        writer.stdin.write(b"\n")
        writer.stdin.flush()
        time.sleep(0.3)
        doc = probe_agent.read_since(str(log), None, 0, 1 << 20, cursor=f.cursor().to_json(),
                                proc_root="/proc", pid=writer.pid)
        lr = FileRead.from_doc(doc)
        assert lr.exists and lr.deleted and lr.event == "deleted"
        assert lr.data.decode() == "w 1\nw 2\nw 3\nafter\n"
    finally:
        writer.stdin.close()
        writer.wait(10)


def test_the_agent_exits_when_no_request_comes_for_its_idle_time():
    sess = ProbeSession(LocalTransport(), sys.executable)
    doc = sess.request(dict(HostProbeRequest(gpu=False).to_json(), idle_exit_s=0.5))
    assert "runs" in doc
    proc = sess._proc
    proc.wait(10)                                        # no request, stdin still open: it exits
    assert proc.returncode == 0
    sess.close()


def test_a_transport_without_a_streaming_channel_says_so_and_the_session_falls_back():
    """`Transport.open_channel` is public: pct (no stream) raises ChannelUnsupported, which the
    session turns into SessionUnsupported (the poller's cue for the one-shot probe)."""
    from controller.probe.session import SessionUnsupported
    from controller.transport.base import ChannelUnsupported
    from controller.transport.pct import PctTransport

    pct = PctTransport(LocalTransport(), 101)
    with pytest.raises(ChannelUnsupported, match="no streaming channel"):
        pct.open_channel(["true"])
    with pytest.raises(SessionUnsupported, match="no streaming channel"):
        ProbeSession(pct, sys.executable)
