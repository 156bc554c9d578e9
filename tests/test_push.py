"""The one content-addressed push (controller/ship/push.py) in its tool form, on the local
target through the real shell: what ships dfctl's py-spy to a target. (The tree form is a
release: tests/test_deploy_local.py and tests/test_deploy_rig.py.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from controller.ship import push
from controller.transport.local import LocalTransport

LOCAL = LocalTransport()


def _push_tool(workdir: Path, data: bytes, sha256: str, nonce: str = "n1"):
    name = f"tool-{sha256[:16]}"
    argv = push.push_argv(str(workdir), "tools", name, "tool", sha256=sha256, nonce=nonce)
    return LOCAL.run(argv, stdin=data, timeout_s=60), workdir / "tools" / name


def test_a_tool_lands_executable_under_its_hash_and_replaces_a_bad_copy(tmp_path):
    data = b"#!/bin/sh\necho tool-ran\n"
    digest = hashlib.sha256(data).hexdigest()
    r, path = _push_tool(tmp_path / "w", data, digest)
    assert r.ok, r.summary()
    assert path.read_bytes() == data and os.access(path, os.X_OK)
    assert subprocess.run([str(path)], capture_output=True).stdout == b"tool-ran\n"
    assert r.stdout_text.strip() == f"pushed {path}"
    assert not (tmp_path / "w" / "current").exists()          # a tool switches nothing
    path.write_bytes(b"corrupted")                           # the caller's hash check found it bad
    r, _ = _push_tool(tmp_path / "w", data, digest, nonce="n2")
    assert r.ok and path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]      # no temp left


def test_a_tool_whose_bytes_do_not_match_its_hash_is_refused_and_leaves_nothing(tmp_path):
    good = b"the real bytes"
    r, path = _push_tool(tmp_path / "w", b"other bytes", hashlib.sha256(good).hexdigest())
    assert r.exited == 72 and "hash mismatch after push" in r.stderr_text
    assert list(path.parent.iterdir()) == []


def test_a_dead_push_s_temp_is_removed_a_live_one_kept(tmp_path):
    tools = tmp_path / "w" / "tools"
    tools.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tools / f".tmp-tool-x-r0-{dead.pid}"
    stale.write_bytes(b"half")
    live = tools / f".tmp-tool-y-r1-{os.getpid()}"          # a push still running (this process)
    live.write_bytes(b"in flight")
    data = b"x" * 1000
    r, path = _push_tool(tmp_path / "w", data, hashlib.sha256(data).hexdigest())
    assert r.ok, r.summary()
    assert not stale.exists() and live.exists() and path.read_bytes() == data


def test_a_live_push_whose_process_names_itself_a_zombie_is_still_alive(tmp_path):
    """alive() reads the State line of /proc/PID/status, where the kernel escapes the name a
    process chose: a name holding a newline and `State:\tZ` forges nothing."""
    import sys

    tools = tmp_path / "w" / "tools"
    tools.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, sys\n"
        "ctypes.CDLL(None).prctl(15, b'x\\nState:\\tZ (zombie)', 0, 0, 0)\n"
        "print('named', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"named\n"
        assert Path(f"/proc/{child.pid}/comm").read_bytes() == b"x\nState:\tZ (zombie)"[:15] + b"\n"   # as set
        live = tools / f".tmp-tool-y-r1-{child.pid}"
        live.write_bytes(b"in flight")
        data = b"y" * 10
        r, _ = _push_tool(tmp_path / "w", data, hashlib.sha256(data).hexdigest())
        assert r.ok, r.summary()
        assert live.exists()
    finally:
        child.kill()
        child.wait()
