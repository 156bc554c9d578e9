"""A watchdog timer's stack dump, read as a hang only where the text ends in it.

CPython's faulthandler.dump_traceback_later(timeout) arms a timer thread; when it fires it writes
`Timeout (0:05:00)!` (Modules/faulthandler.c, faulthandler_thread: the header format_timeout builds,
`Timeout (%lu:%02lu:%02lu)!` and a `.%06d` fraction when there is one), then every thread's stack,
innermost frame first (`Thread 0x... (most recent call first):`, frames `  File "p.py", line 5 in f`
without the comma a raised traceback has: tracebacks.STACK_DUMP). With exit=True the process then
ends (`_exit(1)`); with exit=False -- pytest's faulthandler_timeout -- it goes on. So the dump alone
does not say the program was stuck: a slow step dumps and then prints its next line (the real
exit=False log tests/data/logs/faulthandler-timeout-slow.log trains on and finishes). The dump is a
hang where the text ends inside it -- its last line a dump frame or thread header: nothing ran after
the timer (exit=True's death, or a program still parked where the dump shows it; real log
tests/data/logs/faulthandler-timeout-hang.log, and pytest's plugin glued behind its
`test_x.py ` progress text, tests/data/logs/pytest-faulthandler-timeout.log). Judged on final
text only (line_scan.final_findings): a live read may see the next step come.

One dump says more than a stop: a thread whose innermost frame is one of torch.distributed's
collectives (`File ".../torch/distributed/distributed_c10d.py", line 5356 in barrier`) spent the
timer's whole span waiting for the other ranks, and when a process then ends with status 1 -- what
exit=True does right after its dump (faulthandler_thread's `_exit(1)`), which torchrun reports as
`failed (exitcode: 1)` -- that wait is where the run stopped, though the launcher's report follows
the dump (real torchrun/gloo output: tests/data/logs/faulthandler_barrier_k14.log; exit=False, the
wait ends and the run trains on: faulthandler_barrier_slow_k14.log stays quiet).

pytest-timeout's own reports (`+++ Timeout +++` banners around its stack dump, `Failed: Timeout
(>3.0s) from pytest-timeout.`) are a verdict, not a dump to place: rules.py pytest-timeout reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from controller.judge.stopped_wait import COLLECTIVES
from controller.judge.tracebacks import STACK_DUMP
from controller.records import Finding

_TIMER = re.compile(r"Timeout \((?P<t>\d+:\d\d:\d\d)(?:\.\d+)?\)!\s*$")
"""faulthandler's header; searched, not anchored: pytest prints it behind its `test_x.py ` progress."""
_DUMP_FRAME = re.compile(r'File "[^"]{1,1000}", line \d+ in [^\s,]+\s*$')
"""faulthandler's frame (no comma after the line number: Python/traceback.c dump_frame); searched, a
launcher's prefix may stay on the line (Determined's `dc5b74e6 [rank=0] ||`, pasted
determined-ai/determined#4245)."""
_FRAME_PARTS = re.compile(r'File "(?P<path>[^"]{1,1000})", line (?P<line>\d+) in (?P<fn>[^\s,]+)\s*$')
_EXIT_ONE = re.compile(r"\bexit ?code:? ?1\b|\bexitcode:? ?1\b|exited with (?:code|status) 1\b", re.I)
"""A launcher's report that a process ended with status 1: what faulthandler's exit=True does after its
dump (Modules/faulthandler.c faulthandler_thread: `_exit(1)`); torchrun reports it `failed (exitcode: 1)`."""
DUMP_LINES = 400
"""Lines after a timer header read as its dump (every thread's header and frames)."""
WORD = "timeout ("
"""The caller's cheap test (lower-case)."""


@dataclass
class TimerDump:
    line: int | None = None    # the last timer header's line number
    raw: str = ""
    waited: str = ""
    reported: bool = False
    open: bool = False         # inside the dump after a header: its thread headers and frames are read
    thread: str = ""           # the thread header read last, until its first (innermost) frame
    collective: str = ""       # a dumped thread's innermost frame when it is a torch.distributed collective
    frame: str = ""
    last_fed: int = -1         # the last line number fed (batches overlap)
    pending: bool = False      # a header was seen in the batch being read

    def feed(self, line: str, line_no: int, raw: str) -> None:
        m = _TIMER.search(line)
        if m is not None:
            self.line, self.raw, self.waited = line_no, raw or line, m.group("t")
            self.open, self.thread = True, ""  # (a collective seen in an earlier dump stays: repeat=True)
            return
        if not self.open:
            return
        text = line.strip()
        if self.line is not None and line_no - self.line > DUMP_LINES:
            self.open = False
        elif STACK_DUMP.match(text):
            self.thread = text
        elif (f := _FRAME_PARTS.search(text)) is not None:
            if self.thread and not self.collective and f.group("fn") in COLLECTIVES \
                    and "torch/distributed/" in f.group("path"):
                self.collective, self.frame = f.group("fn"), raw or line
                tail = f.group("path").rsplit("/torch/distributed/", 1)[-1]
                self.collective = f"{f.group('fn')} (torch/distributed/{tail}:{f.group('line')})"
            self.thread = ""  # only a thread's first frame is where it waits
        elif text:
            self.open = False  # the dump is over: the program's (or a launcher's) next line

    def parked_then_exited(self, found: Iterable[Finding]) -> bool:
        """A dumped thread waited in a collective and a process then ended with status 1 (exit=True's
        `_exit(1)`, which the launcher reports): the timer's whole span spent in that wait, then the end."""
        if not self.collective or self.line is None:
            return False
        return any(f.kind == "crash" and (f.line or 0) > self.line and _EXIT_ONE.search(f.summary) for f in found)

    def collective_summary(self) -> str:
        return (f"faulthandler's watchdog fired after {self.waited} (`Timeout ({self.waited})!`) with a thread parked "
                f"in the collective {self.collective}, and the process then exited: a rank waiting for the others")

    def ends_text(self, last_line: str, last_line_no: int) -> bool:
        """The timer fired and the text's last line is still inside a stack dump."""
        if self.line is None or last_line_no <= self.line:
            return False
        text = last_line.strip()
        return bool(_DUMP_FRAME.search(text) or STACK_DUMP.match(text))

    def summary(self) -> str:
        return (f"faulthandler's watchdog fired after {self.waited} (`Timeout ({self.waited})!`) and the text ends "
                "in the stacks it dumped: nothing ran after it, the program was stuck where they show")
