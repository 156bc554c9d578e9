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

pytest-timeout's own reports (`+++ Timeout +++` banners around its stack dump, `Failed: Timeout
(>3.0s) from pytest-timeout.`) are a verdict, not a dump to place: rules.py pytest-timeout reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.judge.tracebacks import STACK_DUMP

_TIMER = re.compile(r"Timeout \((?P<t>\d+:\d\d:\d\d)(?:\.\d+)?\)!\s*$")
"""faulthandler's header; searched, not anchored: pytest prints it behind its `test_x.py ` progress."""
_DUMP_FRAME = re.compile(r'File "[^"]{1,1000}", line \d+ in [^\s,]+\s*$')
"""faulthandler's frame (no comma after the line number: Python/traceback.c dump_frame); searched, a
launcher's prefix may stay on the line (Determined's `dc5b74e6 [rank=0] ||`, pasted
determined-ai/determined#4245)."""
WORD = "timeout ("
"""The caller's cheap test (lower-case)."""


@dataclass
class TimerDump:
    line: int | None = None    # the last timer header's line number
    raw: str = ""
    waited: str = ""
    reported: bool = False

    def feed(self, line: str, line_no: int, raw: str) -> None:
        m = _TIMER.search(line)
        if m is not None:
            self.line, self.raw, self.waited = line_no, raw or line, m.group("t")

    def ends_text(self, last_line: str, last_line_no: int) -> bool:
        """The timer fired and the text's last line is still inside a stack dump."""
        if self.line is None or last_line_no <= self.line:
            return False
        text = last_line.strip()
        return bool(_DUMP_FRAME.search(text) or STACK_DUMP.match(text))

    def summary(self) -> str:
        return (f"faulthandler's watchdog fired after {self.waited} (`Timeout ({self.waited})!`) and the text ends "
                "in the stacks it dumped: nothing ran after it, the program was stuck where they show")
