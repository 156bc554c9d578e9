"""Run commands on this machine: the `local` target, and the rig's own plumbing.

Both output streams are drained concurrently (subprocess.communicate), so a command that
writes megabytes to stderr cannot deadlock us; a stream given as stdin is copied in chunks.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Mapping, Sequence

from controller.transport.base import Result, Stdin, Transport, join_argv


class LocalTransport(Transport):
    """subprocess on this machine; `cwd` and `env` apply to every command."""

    def __init__(self, cwd: str | None = None, env: Mapping[str, str] | None = None):
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.name = "local"

    def describe(self, argv: Sequence[str]) -> str:
        """The exact command this transport would run (for --dry-run)."""
        return f"[local] {join_argv(argv)}"

    def run(self, argv: Sequence[str], *, stdin: Stdin = None, timeout_s: float | None = None) -> Result:
        argv = [str(a) for a in argv]
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, cwd=self.cwd, env=self.env, start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            return Result(join_argv(argv), 127, b"", f"{argv[0]}: command not found".encode(), self.name)
        feeder = None
        data = stdin if isinstance(stdin, (bytes, bytearray)) else None
        if stdin is not None and not isinstance(stdin, (bytes, bytearray)):  # a stream: data is None
            def feed() -> None:
                assert proc.stdin is not None            # a PIPE whenever stdin is given
                try:
                    shutil.copyfileobj(stdin, proc.stdin, 1 << 20)
                except (BrokenPipeError, ValueError):
                    pass
                finally:
                    try:
                        proc.stdin.close()
                    except OSError:
                        pass
            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        try:
            if feeder is not None:
                # communicate() would also write stdin; with a feeder thread read only.
                out, err = _drain(proc, timeout_s)
            else:
                out, err = proc.communicate(data, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return Result(join_argv(argv), 124, out, err + f"\n[dfctl] timed out after {timeout_s}s".encode(),
                          self.name, time.monotonic() - t0)
        if feeder is not None:
            feeder.join()
        code = proc.returncode
        if code < 0:  # killed by a signal: report it the way a shell does
            code = 128 - code
        return Result(join_argv(argv), code, out, err, self.name, time.monotonic() - t0)


def _drain(proc: subprocess.Popen, timeout_s: float | None) -> tuple[bytes, bytes]:
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def pump(stream: IO[bytes], key: str) -> None:
        for block in iter(lambda: stream.read(1 << 16), b""):
            chunks[key].append(block)

    threads = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    proc.wait(timeout=timeout_s)
    for t in threads:
        t.join()
    return b"".join(chunks["out"]), b"".join(chunks["err"])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
