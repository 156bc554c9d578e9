"""A long-lived probe on one host: one request line and one answer line per tick.

Why: a one-shot probe pays a Python start-up (and nvidia-smi) on the host every tick --
on a loaded or slow host that is most of the tick. The agent (probe_agent.py `serve`) starts
once per watch over the host's existing SSH connection (and exits by itself when the
watch goes away or stops asking: remote.serve), samples the GPUs in a background
thread, and answers each tick's request (which carries every cursor, so the agent holds
nothing a restart would lose) in one round trip with no process start. Any trouble --
the channel closes (sshd restarted), a timeout, a transport we cannot stream over -- and
the caller drops the session and falls back to the one-shot probe for that tick.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from typing import Any

from controller.probe import ProbeError, probe_source
from controller.remote import probe_agent
from controller.transport.base import ChannelUnsupported, Transport
from controller.transport.local import LocalTransport

BOOT = probe_agent.agent_bootstrap()


class SessionUnsupported(Exception):
    """This transport cannot hold a streaming channel; use the one-shot probe."""


class ProbeSession:
    """The agent on one host, over a pipe (local) or an SSH channel (paramiko)."""

    def __init__(self, transport: Transport, python: str = "python3", *, connect_timeout_s: float = 10.0):
        self.where = transport.name
        self._buf = b""
        self._proc: subprocess.Popen[bytes] | None = None
        self._chan: Any = None                 # paramiko.Channel (untyped library)
        argv = [python, "-S", "-c", BOOT]
        if isinstance(transport, LocalTransport):
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, start_new_session=True, cwd=transport.cwd,
                                          env=transport.env)
        else:
            try:
                chan = transport.open_channel(argv, timeout_s=connect_timeout_s)
            except ChannelUnsupported:
                raise SessionUnsupported(f"{self.where}: no streaming channel") from None
            except Exception as exc:  # noqa: BLE001 - paramiko raises many kinds
                raise ProbeError(f"{self.where}: cannot start the probe agent: {exc}", unreachable=False) from None
            self._chan = chan
        src = probe_source().encode("utf-8")
        self._send(b"%d\n" % len(src) + src)

    # -- I/O -----------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        try:
            if self._proc is not None:
                stdin = self._proc.stdin
                assert stdin is not None             # opened with PIPE
                stdin.write(data)
                stdin.flush()
            else:
                self._chan.sendall(data)
        except Exception as exc:  # noqa: BLE001
            raise ProbeError(f"{self.where}: probe agent gone: {exc}", unreachable=False) from None

    def _recv_some(self, timeout_s: float) -> bytes:
        if self._proc is not None:
            assert self._proc.stdout is not None     # opened with PIPE
            fd = self._proc.stdout.fileno()
            r, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
            if not r:
                raise TimeoutError
            return os.read(fd, 1 << 20)
        chan = self._chan
        while chan.recv_stderr_ready():       # never let stderr fill the window
            chan.recv_stderr(1 << 16)
        chan.settimeout(max(0.01, timeout_s))
        try:
            return chan.recv(1 << 20)
        except TimeoutError:
            raise
        except OSError as exc:
            if "timed out" in str(exc):
                raise TimeoutError from None
            raise

    def request(self, req: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        """One round trip. ProbeError(unreachable=True) on timeout, else (channel closed,
        garbage) ProbeError(unreachable=False): the caller retries one-shot."""
        t0 = time.monotonic()
        self._send(json.dumps(req).encode("utf-8") + b"\n")
        deadline = t0 + timeout_s
        while b"\n" not in self._buf:
            try:
                block = self._recv_some(deadline - time.monotonic())
            except TimeoutError:
                self.close()
                raise ProbeError(f"{self.where}: no answer from the probe agent within {timeout_s:g} s",
                                 unreachable=True) from None
            except Exception as exc:  # noqa: BLE001
                self.close()
                raise ProbeError(f"{self.where}: probe agent channel failed: {exc}", unreachable=False) from None
            if not block:
                self.close()
                raise ProbeError(f"{self.where}: probe agent channel closed", unreachable=False)
            self._buf += block
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            doc = json.loads(line)
        except ValueError as exc:
            self.close()
            raise ProbeError(f"{self.where}: probe agent answered no JSON ({exc})", unreachable=False) from None
        if "error" in doc and "runs" not in doc:
            raise ProbeError(f"{self.where}: {doc['error']}", unreachable=False)
        doc["round_trip_s"] = time.monotonic() - t0
        return doc

    def close(self) -> None:
        if self._proc is not None:
            try:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._chan is not None:
            try:
                self._chan.close()
            except Exception:  # noqa: BLE001
                pass
            self._chan = None

    @property
    def alive(self) -> bool:
        return self._proc is not None or self._chan is not None
