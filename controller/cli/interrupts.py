"""SIGTERM and SIGHUP end a command the way Ctrl-C does: through the `finally` blocks.

Python's default for SIGTERM and SIGHUP is to die at once, with no `finally`, no flush and
no terminal restored -- what `timeout`, `kill`, systemd and a closed tmux pane send. Inside
`interrupts_unwind()` either signal raises KeyboardInterrupt in the main thread instead, so
the command unwinds like a Ctrl-C (history flushed, cursor kept, terminal restored) and
exits 130 (`interrupted`) with the usual line.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

UNWIND_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum: int, _frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def interrupts_unwind() -> Iterator[None]:
    """While inside, SIGTERM/SIGHUP raise KeyboardInterrupt; the old handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield   # signal handlers can only be set from the main thread
        return
    old = {sig: signal.signal(sig, _raise_interrupt) for sig in UNWIND_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
