"""One interface for running commands here, on an SSH host, or inside a container.

Modelled on invoke/fabric's Runner: a transport runs an *argv* (never a shell string we
assembled by concatenation) and returns one `Result`. Each layer that must pass a command
through a shell (ssh's remote login shell, `pct exec`, `bash -c`) quotes the argv with
`shlex.join`, so an argument reaches the final program byte-exact at any depth.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol, Self, Sequence


class ReadableBytes(Protocol):
    """What a transport reads a command's stdin from: a file, a spooled tar, a progress wrapper."""

    def read(self, size: int = -1, /) -> bytes: ...


Stdin = bytes | ReadableBytes | None


@dataclass(frozen=True)
class Result:
    """What one command did. `exited` is the exit status (128+N when killed by signal N)."""

    command: str
    exited: int
    stdout: bytes
    stderr: bytes
    where: str = ""
    """Human name of where it ran ("local", "ssh root@pve1", "pct 200 on pve1")."""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exited == 0

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def summary(self, limit_chars: int = 400) -> str:
        """One-line description for error messages: where, exit code, stderr tail."""
        tail = self.stderr_text.strip()[-limit_chars:]
        return f"{self.where or 'command'}: exit {self.exited}" + (f": {tail}" if tail else "")


class ChannelUnsupported(Exception):
    """This transport cannot hold a streaming channel (`Transport.open_channel`)."""


class Transport(ABC):
    """Runs argv lists somewhere. Implementations: local, ssh, pct (wraps another)."""

    name: str = "transport"

    @abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: Stdin = None,
        timeout_s: float | None = None,
    ) -> Result:
        """Run argv to completion; stdin may be bytes or a binary stream (streamed)."""

    def run_script(self, script: str, *, stdin: Stdin = None, timeout_s: float | None = None,
                   shell: str = "sh") -> Result:
        """Run a POSIX shell script. The script is one argv element: no extra quoting layer."""
        return self.run([shell, "-c", script], stdin=stdin, timeout_s=timeout_s)

    def open_channel(self, argv: Sequence[str], *, timeout_s: float = 10.0) -> Any:
        """Start argv with a live two-way byte stream (a long-lived agent), not one reply.

        Why public: the probe agent needs the transport's own reused connection; reaching
        into a transport's private connection broke each time that code moved. A transport
        that cannot stream raises `ChannelUnsupported` and the caller uses `run` instead.
        """
        raise ChannelUnsupported(f"{self.name}: no streaming channel")

    def close(self) -> None:  # noqa: B027 (not abstract: a no-op is the right default)
        """Release connections. Safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def join_argv(argv: Sequence[str]) -> str:
    """Quote argv for one POSIX shell level (ssh's remote shell, `sh -c`)."""
    return shlex.join([str(a) for a in argv])
