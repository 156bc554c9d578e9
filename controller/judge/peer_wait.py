"""Waiting for peers, told by repetition: a start-up that keeps retrying is a hang.

Launchers and stores that wait for every rank say so each time they retry: Paddle's
launcher `server not ready, wait 3 sec to retry...` then `not ready endpoints:[...]` (its
wait_server_ready probes each endpoint, writes the two lines to stderr and sleeps 3 s),
Paddle's TCP store `Retry to connect to HOST:PORT while the server is not yet listening.`
(tcp_utils.cc, logged at each attempt until its timeout). One or two such lines are a
normal start-up -- the other node is still starting, and pasted logs show runs that train
on after them. The same wait repeated for WAIT_HANG_S or longer, with nothing else
happening between, is a rank that never came: the run is stuck in its start-up.

The same shape from a scheduler: Ray Tune's status block says how long the experiment has
been running (`Current time: ... (running for 00:03:10.22)`) and how its trials stand
(`Number of trials: 4/4 (4 PENDING)`): every trial still PENDING after TUNE_PENDING_S is
an experiment whose trials cannot be placed (the resources they ask for are not there).

How long it waited is read from the wording (N sec a retry, running for H:MM:SS) or from
the lines' own clock (glog's `I1127 19:18:22.167176`, a logger's `2022-11-27 19:18:22`):
never from when the text was read, so a pasted log and a live one judge alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WAIT_HANG_S = 30.0
"""Waiting this long for the same peers, doing nothing else, is stuck, not starting: ten of
Paddle's 3-s retries in a row. The healthy multi-node start-ups in the pasted logs wait one
to six retries (3-18 s) while the other node comes up; the stuck ones repeat for minutes."""
TUNE_PENDING_S = 60.0
"""A Tune experiment whose every trial is still PENDING this long into the run: placing a
trial takes seconds when its resources exist (the first status blocks of a healthy run show
PENDING, then RUNNING)."""
ROW_GAP_LINES = 4
"""Wait lines at most this far apart are one wait (the `not ready endpoints` line, a device
warning between retries); a longer gap is something else happening -- a new wait starts."""

_SAYS_SECONDS = re.compile(r"server not ready, wait (?P<s>\d+(?:\.\d+)?) sec to retry")
_CLOCKED = re.compile(r"Retry to connect to (?P<peer>\S+?):(?P<port>\d+) while the server is not yet listening")
_CLOCK = re.compile(r"(?:^|[\sT\[])(?P<h>[0-2]\d):(?P<m>[0-5]\d):(?P<s>[0-5]\d)(?:[.,]\d+)?\b")
_DAY_S = 86400.0
_RUNNING_FOR = re.compile(r"\(running for (?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)")
_ALL_PENDING = re.compile(r"Number of trials: (?P<n>\d+)(?:/\d+)? \((?P<p>\d+) PENDING\)")


def _program_clock(line: str, raw: str) -> re.Match | None:
    """The time of day the program stamped the line with: the innermost clock of the prefix
    that repair peeled off (glog's, under a collector's own stamp), else one in the text."""
    prefix = raw[:max(0, raw.find(line[:20]))] if line and raw else ""
    clocks = list(_CLOCK.finditer(prefix)) if prefix else []
    return clocks[-1] if clocks else _CLOCK.search(line)


@dataclass
class PeerWait:
    """One wait in progress (bounded: a few numbers and two evidence lines)."""

    waited_s: float = 0.0
    first_clock_s: float | None = None
    last_line: int | None = None
    first_line: int | None = None
    evidence: list[str] = field(default_factory=list)
    stuck_line: int | None = None
    reported: bool = False
    tune_running_s: float | None = None
    pending_trials: int = 0

    def feed_status(self, line: str, line_no: int) -> None:
        """A line holding "running for" or "pending" (the caller's cheap test): Tune's status."""
        r = _RUNNING_FOR.search(line)
        if r is not None:
            self.tune_running_s = int(r.group("h")) * 3600.0 + int(r.group("m")) * 60 + int(r.group("s"))
            return
        p = _ALL_PENDING.search(line)
        if p is None or p.group("n") != p.group("p") or self.tune_running_s is None:
            return
        if self.stuck_line is None and self.tune_running_s >= TUNE_PENDING_S:
            self.stuck_line, self.pending_trials = line_no, int(p.group("n"))
            self.waited_s = self.tune_running_s
            self.evidence = [line]

    def feed(self, line: str, line_no: int, raw: str = "") -> None:
        """A line holding "retry" (the caller's cheap test): is it a peer wait? `raw` is the
        line as printed, with the logger's clock that `line` (repaired) may have lost."""
        said = _SAYS_SECONDS.search(line)
        clocked = None if said else _CLOCKED.search(line)
        if said is None and clocked is None:
            return
        if self.last_line is None or line_no - self.last_line > ROW_GAP_LINES:
            self.waited_s, self.first_clock_s, self.first_line = 0.0, None, line_no
            self.evidence = [line]
        self.last_line = line_no
        if said is not None:
            self.waited_s += float(said.group("s"))
        else:
            c = _program_clock(line, raw)
            if c is not None:
                t = int(c.group("h")) * 3600 + int(c.group("m")) * 60 + int(c.group("s"))
                if self.first_clock_s is None:
                    self.first_clock_s = float(t)
                else:
                    self.waited_s = (t - self.first_clock_s) % _DAY_S  # (past midnight)
        if self.stuck_line is None and self.waited_s >= WAIT_HANG_S:
            self.stuck_line = line_no
            if len(self.evidence) < 2:
                self.evidence.append(line)

    @property
    def stuck(self) -> bool:
        return self.stuck_line is not None

    def summary(self) -> str:
        if self.pending_trials:
            return (f"no trial could start: all {self.pending_trials} trial(s) still PENDING {self.waited_s:.0f} s "
                    "into the run (the resources they request are not there)")
        return (f"start-up stuck waiting for its peers: the same wait retried for {self.waited_s:.0f} s "
                "(a rank's endpoint never came up)")

    def hint(self) -> str:
        if self.pending_trials:
            return ("compare what each trial requests (resources_per_trial, num_workers, GPUs) with what the "
                    "cluster has: `ray status`")
        return "a rank never started or cannot be reached: check every node's launcher log, the endpoints' ports and firewalls"
