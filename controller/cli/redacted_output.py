"""The watch's own output with the secrets cut out, as its webhook messages have them.

A finding's evidence is log lines, and a log can carry a token (a trainer printing its
environment, `wandb.login(key=...)` in a traceback). The webhooks already pass every string
through view.notify_message.Redactor; `dfctl watch --json` and its line output print the
same evidence to a terminal, a CI log or a file that more people read than the run's log.
One stream wrapper covers every print of the watch instead of a redact() call at each.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO


class RedactingStream:
    """A text stream whose writes pass `redact` first. A print() writes its text whole, then
    its end: a secret is never split across two writes of ours."""

    def __init__(self, stream: TextIO, redact: Callable[[str], str]) -> None:
        self._stream, self._redact = stream, redact

    def write(self, text: str) -> int:
        self._stream.write(self._redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:   # flush, isatty, fileno, encoding, ...
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_stdio(redact: Callable[[str], str]) -> Iterator[None]:
    """stdout and stderr through `redact` for the block. The live dashboard writes through
    them too; a secret that Rich's styling cuts in two is not matched there, the lines kept
    after it quits are plain text and are."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out, redact), RedactingStream(err, redact)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
