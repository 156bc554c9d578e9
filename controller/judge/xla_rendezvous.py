"""XLA's rendezvous watchdog, read as a state: "may be stuck" until "unstuck".

XLA makes every participant of a collective (the local devices' threads; in JAX, torch-xla
and TF on GPU/CPU) meet at a rendezvous before it runs. When one waits past a warning
timeout it logs, once per thread (xla/service/rendezvous.cc AwaitAndLogIfStuck, in
tensorflow/tensorflow third_party/xla at 03daf31):

    This thread has been waiting for `NAME` for 10 seconds and may be stuck. Expected 8
    threads to join the rendezvous, but not all of them arrived on time.

(older XLA, collective_ops_utils.h WaitAndLogIfStuck: `This thread has been waiting for
5000ms for and may be stuck: participant ... waiting for all participants to arrive at
rendezvous RendezvousKey{...}`), then keeps waiting: if the others arrive it logs `Thread is
unstuck! Warning above was a false-positive. Perhaps the timeout is too short.`; if they do
not, after the termination timeout it logs `Termination timeout for NAME of N seconds
exceeded. Exiting to ensure a consistent program state.` (rules.py xla-termination) and
exits. So a warning with no "unstuck" after it is a thread still waiting where the text
ends -- a hang, judged only on final text (line_scan.final_findings): a live read may see
the "unstuck" line next. State is bounded: a count and the first warning's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_STUCK = re.compile(r"This thread has been waiting for (?:`(?P<name>[^`]{1,300})` for (?P<s>\d+) seconds?"
                    r"|(?P<ms>\d+) ?ms for) and may be stuck")
UNSTUCK = "Thread is unstuck!"
WORDS = ("may be stuck", "unstuck")
"""The caller's cheap test (lower-case)."""


@dataclass
class RendezvousWait:
    waiting: int = 0                  # warnings since the last "unstuck"
    first_line: int | None = None
    waited_s: float = 0.0
    name: str = ""
    evidence: list[str] = field(default_factory=list)
    reported: bool = False

    def feed(self, line: str, line_no: int, raw: str) -> None:
        if UNSTUCK in line:
            self.waiting, self.first_line, self.evidence, self.name, self.waited_s = 0, None, [], "", 0.0
            return
        m = _STUCK.search(line)
        if m is None:
            return
        self.waiting += 1
        if self.first_line is None:
            self.first_line = line_no
            self.name = (m.group("name") or "").split(";")[0].strip()
            self.waited_s = float(m.group("s")) if m.group("s") else int(m.group("ms")) / 1000.0
        if len(self.evidence) < 2:
            self.evidence.append(raw or line)

    def summary(self) -> str:
        at = f" at `{self.name}`" if self.name else ""
        return (f"XLA collective stuck: {self.waiting} rendezvous warning(s){at} ('may be stuck' after "
                f"{self.waited_s:g} s) and no 'Thread is unstuck' where the text ends: a participant never arrived")
