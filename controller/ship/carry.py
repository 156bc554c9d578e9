"""Carry bytes from one target to another: a command's stdout on the source (`cat` of a
checkpoint, `tar -c` of a release) read as a stream and fed as stdin to the one
content-addressed push on the destination (ship/push.py), which verifies what arrived.

Why a stream and not a copy through this machine's disk or memory: a checkpoint of a big
model is many GiB, a controller's machine may have neither; here at most one chunk
(CHUNK_BYTES) is held at a time. The source end is Transport.open_channel (one session
channel on the host's reused SSH connection); a local target has no channel (its probe
session uses a pipe likewise, controller/probe/session.py) and a CT's command is its
`pct exec` on the node's channel.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any, Sequence

from controller.errors import DeployError, DfctlError
from controller.transport.base import ChannelUnsupported, Transport
from controller.transport.local import LocalTransport
from controller.transport.pct import PctTransport


class SourceReadError(DeployError):
    """The source end failed (its command, or the stream from it): not the destination's fault."""


CHUNK_BYTES = 1 << 20
"""What one read() of a stream returns at most: all the carrying holds in memory at once."""

STDERR_KEPT_BYTES = 4096


class SourceStream:
    """stdout of `argv` on `transport`, readable as a file; close() says how it ended."""

    def __init__(self, transport: Transport, argv: Sequence[str], *, timeout_s: float = 30.0):
        self.where = transport.name
        self._proc: subprocess.Popen[bytes] | None = None
        self._chan: Any = None                       # paramiko.Channel (untyped library)
        self._err = b""
        self._eof = False
        self.read_bytes = 0
        if isinstance(transport, PctTransport):
            try:
                transport.ensure_running()
            except DfctlError as exc:                # a stopped CT, or its node gone
                raise SourceReadError(f"{self.where}: {exc.message}") from None
            argv = transport.wrap(argv)
            transport = transport.host
        if isinstance(transport, LocalTransport):
            self._errfile = tempfile.TemporaryFile()
            self._proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=self._errfile, cwd=transport.cwd, env=transport.env,
                                          start_new_session=True)
            return
        try:
            self._chan = transport.open_channel(argv, timeout_s=timeout_s)
        except ChannelUnsupported as exc:
            raise SourceReadError(f"{self.where}: cannot stream from it: {exc}") from None
        except DfctlError as exc:
            raise SourceReadError(f"{self.where}: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - paramiko raises many kinds
            raise SourceReadError(f"{self.where}: cannot open a channel to read from it: {exc}") from None

    def read(self, size: int = -1, /) -> bytes:
        n = CHUNK_BYTES if size is None or size < 0 else min(size, CHUNK_BYTES)
        if self._proc is not None:
            assert self._proc.stdout is not None     # opened with PIPE
            data = os.read(self._proc.stdout.fileno(), n)
        else:
            while self._chan.recv_stderr_ready():    # never let stderr fill the channel's window
                self._err = (self._err + self._chan.recv_stderr(STDERR_KEPT_BYTES))[-STDERR_KEPT_BYTES:]
            data = self._chan.recv(n)
        self._eof = self._eof or not data
        self.read_bytes += len(data)
        return data

    def close(self) -> tuple[int, str]:
        """(exit status, the tail of its stderr) once the command has ended."""
        if self._proc is not None:
            assert self._proc.stdout is not None
            self._proc.stdout.close()
            code = self._proc.wait()
            self._errfile.seek(0)
            err = self._errfile.read()[-STDERR_KEPT_BYTES:]
            self._errfile.close()
            return (128 - code if code < 0 else code), err.decode("utf-8", "replace").strip()
        if not self._eof:                            # the reader stopped early: do not wait on a full window
            self._chan.close()
            return 255, "the stream was not read to its end"
        code = self._chan.recv_exit_status()
        while self._chan.recv_stderr_ready():
            self._err = (self._err + self._chan.recv_stderr(STDERR_KEPT_BYTES))[-STDERR_KEPT_BYTES:]
        self._chan.close()
        return code, self._err.decode("utf-8", "replace").strip()


def carry(source: Transport, argv: Sequence[str], dest: Transport, push: Sequence[str], *,
          expect_bytes: int | None = None, timeout_s: float = 3600.0) -> int:
    """Run `push` on `dest` with the stdout of `argv` on `source` as its stdin; the bytes
    carried. SourceReadError when the source end failed, DeployError when the destination
    did or the count is not `expect_bytes`."""
    stream = SourceStream(source, argv)
    try:
        r = dest.run(push, stdin=stream, timeout_s=timeout_s)
    finally:
        code, err = stream.close()
    if code != 0:
        raise SourceReadError(f"reading from {source.name}: exit {code}" + (f": {err}" if err else ""))
    if not r.ok:
        raise DeployError(f"writing to {dest.name}: {r.summary()}")
    if expect_bytes is not None and stream.read_bytes != expect_bytes:
        raise DeployError(f"carried {stream.read_bytes} bytes from {source.name}, expected {expect_bytes}")
    return stream.read_bytes
