"""SIGTERM and SIGHUP end a command the way Ctrl-C does: through the `finally` blocks.

Python's default for SIGTERM and SIGHUP is to die at once, with no `finally`, no flush and
no terminal restored -- what `timeout`, `kill`, systemd and a closed tmux pane send. Inside
`interrupts_unwind()` either signal (and Ctrl-C's SIGINT) raises KeyboardInterrupt in the
main thread instead, so the command unwinds like a Ctrl-C (history flushed, cursor kept,
terminal restored) and exits 130 (`interrupted`) with the usual line.

Why the interrupt is also remembered: Python runs a signal handler between two bytecodes
of the main thread, wherever it is -- and when that is inside a `__del__` or a weakref
callback (pyarrow's ParquetWriter.__del__ was seen), the KeyboardInterrupt is printed as
"Exception ignored in ..." and dropped, and the watch went on looping forever after its
SIGHUP. So the handler records the signal too, and the loops call `raise_if_interrupted()`
once per tick: a dropped interrupt is raised again there, at most one tick later.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

UNWIND_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

_received: str | None = None
"""The name of the signal that asked this command to stop, once one has; else None."""


def _raise_interrupt(signum: int, _frame) -> None:
    global _received
    first = _received is None
    _received = _received or signal.Signals(signum).name
    if first:   # a second signal while the first unwinds would cut its `finally` short
        raise KeyboardInterrupt(_received)


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt that a signal asked for, if one did (see the module's why)."""
    if _received is not None:
        raise KeyboardInterrupt(_received)


@contextlib.contextmanager
def interrupts_unwind() -> Iterator[None]:
    """While inside, SIGTERM/SIGHUP/SIGINT raise KeyboardInterrupt; the old handlers come back after."""
    global _received
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is _raise_interrupt:
        yield   # handlers can only be set from the main thread; nested: the outer one's stand
        return
    _received = None
    old = {sig: signal.signal(sig, _raise_interrupt) for sig in UNWIND_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _received = None
