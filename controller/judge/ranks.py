"""Which rank of a multi-node job failed first, and which failures were its consequences.

When one rank of a torchrun job dies, every other rank fails soon after -- gloo's
"Connection closed by peer", NCCL's watchdog timeout, the local peers SIGTERM'd by their
agent, each node's torchrun raising ChildFailedError -- and a reader of N logs sees N
failures. Two facts tell them apart: what kind of failure a rank had (an OOM, a signal
or an exception of its own is a cause; a lost peer, a timed-out collective or a SIGTERM
from its agent is a consequence), and when (the earliest cause wins).

Times come from the evidence itself, on the node's clock: a timestamp at the start of a
line (a logger's `[2026-12-01 18:34:22,844]`, glog's `E1201 18:34:23.419000` that torch's
elastic agent writes), torchrun's error summary (`time : 2026-12-01_18:34:23`, 1 s
resolution), else the moment the watch first saw the line (the controller's clock, to
within a tick). A node clock is mapped to the controller's through the probe's own
timestamp (NodeClock: offset = host clock at the probe - controller clock at the middle
of the round trip, known to within half the round trip), so clock skew between nodes
does not reorder them. Ties within the uncertainty are broken by (node, rank), so the
answer never depends on the order in which lines arrived.

Line prefixes say whose a line is: `[rank11]:` is the global rank (torch's distributed
excepthook), `[default3]:` the local rank (torchrun --tee); an unprefixed line belongs to
its node (the node's only rank when it has one). Pure: lines in, records out, no I/O.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.judge.repair import peel
from controller.records import FirstFailure, RankOutcome

CAUSE, CONSEQUENCE, NEUTRAL = "cause", "consequence", "neutral"
ELASTIC_TIME_ERROR_S = 1.0      # torchrun's summary `time :` has whole seconds
LINE_TIME_ERROR_S = 0.001
MAX_TIMESTAMP_DRIFT_S = 6 * 3600.0
"""A line timestamp this far from when the line was seen is not this run's clock (another
time zone, a replayed log): the first-seen time is used instead."""


@dataclass(frozen=True)
class NodeClock:
    """A node's clock against the controller's: node time - controller time."""

    offset_s: float = 0.0
    uncertainty_s: float = 0.0      # half the probe's round trip


@dataclass(frozen=True)
class RankEvent:
    """One piece of failure evidence from one node's log."""

    node: int                       # the member's node_rank (which log it came from)
    rank: int | None                # global rank, when the line says it
    local_rank: int | None
    kind: str                       # oom | signal | exception | exit | timeout | peer_lost | sigterm | child_failed
    role: str                       # CAUSE | CONSEQUENCE | NEUTRAL
    what: str                       # "CUDA OOM", "killed by SIGKILL", "timed out in ALLREDUCE"
    time_s: float                   # on the node's clock, or the controller's when time_source == "seen"
    time_source: str                # "line" | "elastic" | "seen"
    time_error_s: float             # the time's own resolution
    text: str                       # the line as read (evidence)
    line: int | None = None


@dataclass(frozen=True)
class RestartSeen:
    """torchrun's agent restarting its worker group (max_restarts): an event, not a new run."""

    node: int
    time_s: float                   # when the agent stopped the old attempt (node clock unless "seen")
    time_source: str
    attempts_left: int              # -1: not printed (torchrun's INFO line was not in the log)
    max_restarts: int
    text: str
    line: int                       # the new attempt's first line


# -- what a line says --------------------------------------------------------------------
_GLOG_TIME = re.compile(r"^\[?[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?\s+(?:\d+\s|[\w.]+:\d+\])")
"""glog as torch's Python agent writes it (`E1201 18:34:23.419000 738 api.py:1002]`) and as
c10's C++ logging does (`[E1201 18:40:34.850764840 ProcessGroupNCCL.cpp:689]`)."""
_NCCL_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\(.*?OpType=(\w+)")
_ISO_TIME = re.compile(r"^\[?(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_EVIDENCE_WORDS = ("Error", "Exception", "Interrupt", "exitcode", "Watchdog", "attempts left", "closing signal",
                   "out of memory", "allocate memory", "enough memory", "in all_", "in broadcast", "in barrier",
                   "in reduce_scatter", "in send", "in recv")
"""A word every line the reader acts on holds (an exception, the agent's failure or stop
line, a traceback frame naming a collective) -- plain substring tests: a regex alternation
of them cost ~10 us a line, these ~1 us."""


def _maybe_evidence(raw: str) -> bool:
    if any(w in raw for w in _EVIDENCE_WORDS):
        return True
    return raw.startswith("[") and raw.rstrip().endswith("]:")      # torchrun's summary block `[0]:`


_KEYS = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?)+")
_RANK_KEY = re.compile(r"\[rank(\d+)\]:")
_LOCAL_KEY = re.compile(r"\[default(\d+)\]:")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: \d+\)")
_SUMMARY_BLOCK = re.compile(r"^\[(\d+)\]:\s*$")
_SUMMARY_FIELD = re.compile(r"^\s+(time|rank|exitcode)\s*: (.*)$")
_SUMMARY_RANK = re.compile(r"(\d+) \(local_rank: (\d+)\)")
_SUMMARY_EXIT = re.compile(r"(-?\d+) \(pid: \d+\)")
_RESTART = re.compile(r"Worker group (?:FAILED|UNHEALTHY)\. (\d+)/(\d+) attempts left; will restart worker group")
_CHILD_FAILED = re.compile(r"\bChildFailedError\b")
_GAVE_UP = re.compile(r"ChildFailedError|RendezvousClosedError|RendezvousError|SignalException")
_CLOSING = re.compile(r"Sending process \d+ closing signal SIGTERM")
_STEP = re.compile(r"\bstep[= ](\d+)")
_NEW_START = re.compile(r"^\[milestone\] (?:dataset_loaded|target_loaded|first_step)\b")
"""A worker's start-up milestone (the bundled trainer's), even under a rank prefix (torchrun
--tee): a worker starting after its agent stopped the group is a new attempt. Not
`checkpoint_saved`: a worker SIGTERM'd by its agent saves one on its way out."""
_AGENT_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s")
_OOM = re.compile(r"(?:CUDA|HIP) out of memory|OutOfMemoryError|Cuda failure (?:\d+ )?'out of memory'"
                  r"|CUDA error: out of memory|can't allocate memory|not enough memory")
_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|Timed out waiting \d+ ?ms"
                      r"|timed out|Timeout\(ms\)=|\bTimeoutError\b", re.I)
_PEER_LOST = re.compile(r"Connection (?:closed|reset) by peer|Broken pipe|remote process exited"
                        r"|communicator was aborted|NCCL communicator .*abort|DistNetworkError")
_STORE_LOST = re.compile(r"(?:DistNetworkError|RendezvousConnectionError|RendezvousClosedError|DistStoreError)$")
"""The agent's (or a worker's) link to the c10d store gone: the store's host went down first."""
_OP = re.compile(r"OpType=(\w+)|\bin (all_reduce|all_gather|broadcast|barrier|reduce_scatter|all_to_all|send|recv)\b")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): ?(.*)$")


def _line_time(body: str, seen_s: float) -> float | None:
    """A timestamp at the start of a line (glog or ISO), on the node's clock, read in
    the controller's time zone; None when there is none or it is implausible."""
    t: float | None = None
    m = _GLOG_TIME.match(body)
    if m:
        year = time.localtime(seen_s).tm_year
        mon, day, hh, mm, ss = (int(x) for x in m.groups()[:5])
        frac = float(m.group(6) or 0.0)
        try:
            t = time.mktime((year, mon, day, hh, mm, ss, 0, 0, -1)) + frac
        except (OverflowError, ValueError):
            return None
    else:
        m = _ISO_TIME.match(body)
        if m:
            y, mon, day, hh, mm, ss = (int(x) for x in m.groups()[:6])
            frac = float("0." + m.group(7)) if m.group(7) else 0.0
            try:
                t = time.mktime((y, mon, day, hh, mm, ss, 0, 0, -1)) + frac
            except (OverflowError, ValueError):
                return None
    if t is None or abs(t - seen_s) > MAX_TIMESTAMP_DRIFT_S:
        return None
    return t


def _elastic_time(value: str, seen_s: float) -> float | None:
    return _line_time(value.strip().replace("_", " ", 1), seen_s)


def _exit_meaning(code: int) -> tuple[str, str, str]:
    """(kind, role, what) of a worker's exit code as torchrun reports it (-N: signal N)."""
    from controller.judge.evidence import signal_name

    if code == -15:
        return "sigterm", CONSEQUENCE, "stopped by its agent (SIGTERM)"
    if code < 0:
        return "signal", CAUSE, f"killed by {signal_name(-code) or f'signal {-code}'}"
    return "exit", NEUTRAL, f"exited with code {code}"


class RankEventReader:
    """One node's log, read line by line across ticks (torchrun's summary spans lines,
    maybe ticks). feed() returns the failure evidence and restarts those lines hold."""

    def __init__(self, node: int):
        self.node = node
        self.attempt = 0
        self.op_by_key: dict[str, str] = {}      # last collective named in a rank's traceback
        self._block: dict[str, str] | None = None
        self.restarts: list[RestartSeen] = []
        self._stopping: tuple[float, str, str, int] | None = None   # the agent stopping its workers (SIGTERM sent)
        self._boundary: int | None = None        # where a new attempt would start, if it was a restart
        self._max_step: int | None = None        # the highest progress step before the agent's stop
        self.ranks_seen: set[int] = set()        # global ranks of this node's `[rankN]:` lines
        self._seen_prefixes: tuple[str, ...] = ()

    def feed(self, lines: Sequence[str], first_line_no: int, seen_s: float,
             seen_error_s: float = 0.0) -> list[RankEvent]:
        out: list[RankEvent] = []
        for i, raw in enumerate(lines):
            if raw.startswith("[rank") and not raw.startswith(self._seen_prefixes):
                self._note_rank(raw)
            if self._stopping is None and "step" in raw:
                m = _STEP.search(raw)
                if m:
                    self._max_step = max(self._max_step or 0, int(m.group(1)))
            if self._block is None and self._stopping is None and not _maybe_evidence(raw):
                continue           # most lines of a healthy log: substring tests, nothing more
            line_no = first_line_no + i
            key, body = peel(raw)
            out += self._one(raw, key, body, line_no, seen_s, seen_error_s)
        return out

    def _note_rank(self, raw: str) -> None:
        """A worker's line names its global rank: which ranks this node holds (the job's
        layout, for a worker that dies without a word). One regex per rank, not per line."""
        m = _RANK_KEY.match(raw)
        if m:
            self.ranks_seen.add(int(m.group(1)))
            self._seen_prefixes = (*self._seen_prefixes, m.group(0))

    def _one(self, raw: str, key: str, body: str, line_no: int, seen_s: float, seen_error_s: float) -> list[RankEvent]:
        rank_m, local_m = _RANK_KEY.search(key), _LOCAL_KEY.search(key)
        rank = int(rank_m.group(1)) if rank_m else None
        local = int(local_m.group(1)) if local_m else None
        t_line = _line_time(_KEYS.sub("", raw.lstrip(), count=1), seen_s)
        # a line seen at seen_s was written during the tick before it: the middle of that span
        when = (t_line, "line", LINE_TIME_ERROR_S) if t_line is not None else \
            (seen_s - seen_error_s / 2, "seen", seen_error_s / 2)

        def event(kind: str, role: str, what: str, *, r: int | None = rank, lr: int | None = local,
                  at: tuple[float, str, float] = when) -> RankEvent:
            return RankEvent(node=self.node, rank=r, local_rank=lr, kind=kind, role=role, what=what, time_s=at[0],
                             time_source=at[1], time_error_s=at[2], text=raw.strip(), line=line_no)

        block_event = self._summary(body, raw, line_no, seen_s)
        if block_event is not None:
            return [block_event]
        if self._block is not None:
            return []
        m = _RESTART.search(body)
        if m:
            self._restarted(RestartSeen(self.node, when[0], when[1], int(m.group(1)), int(m.group(2)),
                                        raw.strip(), line_no + 1))
            return []
        self._watch_restart(raw, key, body, when, line_no)
        m = _OP.search(body)
        if m and key:
            self.op_by_key[key] = (m.group(1) or m.group(2)).upper().replace("_", "")
        m = _AGENT_FAILED.search(body)
        if m:
            kind, role, what = _exit_meaning(int(m.group(1)))
            return [event(kind, role, what, r=None, lr=int(m.group(2)))]
        m = _NCCL_WATCHDOG.search(body)
        if m and _EXCEPTION.match(body) is None:
            # NCCL's watchdog line (c10 C++ log, with its own time); the exception that
            # follows repeats it and the process is then taken down (SIGABRT): consequences
            return [event("timeout", CONSEQUENCE, f"timed out in {m.group(1)}")]
        exc = _EXCEPTION.match(body)
        if exc and _GAVE_UP.search(exc.group(1)):
            self._stopping = self._boundary = None
        if exc and _CHILD_FAILED.search(exc.group(1)):
            return [event("child_failed", CONSEQUENCE, "torchrun raised ChildFailedError", r=None, lr=None)]
        if _OOM.search(body) and (exc or "out of memory" in body):
            return [event("oom", CAUSE, _oom_what(body))]
        if exc is None:
            return []
        name, message = exc.groups()
        if _STORE_LOST.search(name):
            return [event("peer_lost", CONSEQUENCE, "lost the rendezvous store (" + name.rsplit(".", 1)[-1] + ")")]
        if _PEER_LOST.search(message):
            return [event("peer_lost", CONSEQUENCE, "lost its peer (" + _peer_words(message) + ")")]
        if _TIMEOUT.search(body):
            op = self.op_by_key.get(key) or _op_of(body)
            return [event("timeout", CONSEQUENCE, f"timed out in {op}" if op else "timed out in a collective")]
        if name.rsplit(".", 1)[-1] in ("KeyboardInterrupt", "SystemExit"):
            return []
        return [event("exception", CAUSE, f"{name.rsplit('.', 1)[-1]}: {message}"[:160])]

    def _restarted(self, seen: RestartSeen) -> None:
        self.restarts.append(seen)
        self.attempt += 1
        self.op_by_key.clear()
        self._stopping = None
        self._boundary = None

    def _watch_restart(self, raw: str, key: str, body: str, when: tuple[float, str, float], line_no: int) -> None:
        """A restart without torchrun's INFO line (not printed at its default log level):
        the agent stopped its workers (`Sending process N closing signal SIGTERM`), no
        ChildFailedError followed, and then a new attempt showed itself -- a worker's
        start-up milestone, a progress step not past the last one before the stop (training
        again), or the agent stopping workers once more (the next attempt failed too). The
        new attempt starts at the first line after the first stop's cascade."""
        if _CLOSING.search(body):
            if self._stopping is not None and self._boundary is not None:
                self._confirm_restart()
            if self._stopping is None:
                self._stopping = (when[0], when[1], raw.strip(), line_no)
            return
        if self._stopping is None:
            return
        if self._boundary is None and not _AGENT_LINE.match(raw):
            self._boundary = line_no
        if self._boundary is not None and (_NEW_START.search(body) or self._step_went_back(body)):
            self._confirm_restart()

    def _step_went_back(self, body: str) -> bool:
        """A progress line whose step is not past the last one before the stop: the new
        attempt training again (from step 1, or from its checkpoint)."""
        if "[milestone]" in body:      # `checkpoint_saved step=N` on a SIGTERM'd worker's way out
            return False
        m = _STEP.search(body)
        return m is not None and self._max_step is not None and int(m.group(1)) <= self._max_step

    def _confirm_restart(self) -> None:
        assert self._stopping is not None and self._boundary is not None
        t, src, text, _ = self._stopping
        self._restarted(RestartSeen(self.node, t, src, -1, -1, text, self._boundary))

    def _summary(self, body: str, raw: str, line_no: int, seen_s: float) -> RankEvent | None:
        """torchrun's error summary: `[i]:` then `time`, `host`, `rank`, `exitcode` lines,
        one block per failed local worker; the block's event once its exitcode is read."""
        stripped = raw.strip()
        if _SUMMARY_BLOCK.match(stripped):
            self._block = {}
            return None
        if self._block is None:
            return None
        if stripped.startswith(("====", "----")) or not stripped:
            self._block = None if stripped.startswith("====") or not stripped else self._block
            return None
        m = _SUMMARY_FIELD.match(raw.rstrip())
        if not m:
            if not raw.startswith((" ", "\t")):
                self._block = None     # the summary is over
            return None
        self._block[m.group(1)] = m.group(2)
        if m.group(1) != "exitcode":
            return None
        blk, self._block = self._block, None
        rm = _SUMMARY_RANK.search(blk.get("rank", ""))
        em = _SUMMARY_EXIT.search(blk.get("exitcode", ""))
        if em is None:
            return None
        kind, role, what = _exit_meaning(int(em.group(1)))
        t = _elastic_time(blk.get("time", ""), seen_s)
        # whole seconds, truncated (int(time.time()) in torch's ProcessFailure): the middle of that second
        at = (t + ELASTIC_TIME_ERROR_S / 2, "elastic", ELASTIC_TIME_ERROR_S / 2) if t is not None else (seen_s, "seen", 0.0)
        self._block = {}     # the same block may go on (error_file, traceback): ignore its fields
        return RankEvent(node=self.node, rank=int(rm.group(1)) if rm else None,
                         local_rank=int(rm.group(2)) if rm else None, kind=kind, role=role, what=what,
                         time_s=at[0], time_source=at[1], time_error_s=at[2], text=stripped, line=line_no)


def _oom_what(body: str) -> str:
    m = re.search(r"GPU (\d+) has a total capacity", body)
    m2 = re.search(r"Tried to allocate ([\d.]+ [KMGT]iB)", body)
    what = "CUDA OOM" if "CUDA" in body or "Cuda" in body else "out of memory"
    if m2:
        what += f" (tried {m2.group(1)})"
    if m:
        what += f" on GPU {m.group(1)}"
    return what


def _peer_words(message: str) -> str:
    m = _PEER_LOST.search(message)
    return m.group(0).lower() if m else "peer lost"


def _op_of(body: str) -> str | None:
    m = _OP.search(body)
    return (m.group(1) or m.group(2)).upper().replace("_", "") if m else None


# -- the earliest failure ----------------------------------------------------------------
@dataclass
class _Rank:
    node: int
    rank: int | None
    local_rank: int | None
    events: list[RankEvent] = field(default_factory=list)

    def role(self) -> str:
        roles = {e.role for e in self.events}
        if CONSEQUENCE in roles and not any(e.kind == "oom" for e in self.events):
            return CONSEQUENCE
        return CAUSE if CAUSE in roles else NEUTRAL


def mapped_time(e: RankEvent, clocks: dict[int, NodeClock]) -> tuple[float, float]:
    """(controller-clock time, uncertainty) of an event."""
    if e.time_source == "seen":
        return e.time_s, e.time_error_s
    c = clocks.get(e.node) or NodeClock()
    return e.time_s - c.offset_s, e.time_error_s + c.uncertainty_s


def _group(events: Iterable[RankEvent], nproc_per_node: int | None = None,
           ranks_seen: Mapping[int, set[int]] | None = None) -> list[_Rank]:
    """Events per rank: a local rank is joined to its global rank where one event says
    both (torchrun's summary); unprefixed cause lines join their node's only failed rank;
    a local rank's bare exit code on a node whose every rank is already known by its
    global number (before the summary maps it) is one of those, not one more rank."""
    events = list(events)
    local_to_global: dict[tuple[int, int], int] = {}
    for e in events:
        if e.rank is not None and e.local_rank is not None:
            local_to_global[(e.node, e.local_rank)] = e.rank
    if nproc_per_node:
        local_to_global = {**_local_ranks_by_layout(events, nproc_per_node, ranks_seen or {}), **local_to_global}
    ranks: dict[tuple, _Rank] = {}
    node_level: list[RankEvent] = []
    for e in events:
        rank = e.rank if e.rank is not None else (
            local_to_global.get((e.node, e.local_rank)) if e.local_rank is not None else None)
        if rank is None and e.local_rank is None:
            node_level.append(e)
            continue
        key = ("g", rank) if rank is not None else ("l", e.node, e.local_rank)
        r = ranks.setdefault(key, _Rank(e.node, rank, e.local_rank))
        if r.local_rank is None:
            r.local_rank = e.local_rank
        r.events.append(e)
    for e in node_level:
        if e.kind == "child_failed":
            continue                         # the agent's word, not a rank's: counted apart
        mine = [r for r in ranks.values() if r.node == e.node]
        target = mine[0] if len(mine) == 1 else None
        if target is None and mine:
            failed = [r for r in mine if r.role() != CONSEQUENCE]
            target = failed[0] if len(failed) == 1 else None
        if target is None:
            target = ranks.setdefault(("n", e.node), _Rank(e.node, None, None))
        target.events.append(e)
    if nproc_per_node:
        for key, r in list(ranks.items()):
            if key[0] == "l" and r.role() == NEUTRAL and \
                    sum(1 for k, o in ranks.items() if k[0] == "g" and o.node == r.node) >= nproc_per_node:
                del ranks[key]
    return list(ranks.values())


def _local_ranks_by_layout(events: list[RankEvent], nproc_per_node: int,
                           ranks_seen: Mapping[int, set[int]]) -> dict[tuple[int, int], int]:
    """(node, local rank) -> global rank from the job's layout, before torchrun's summary
    says it: every node runs nproc_per_node workers (dfctl launches each with the same
    --nproc-per-node), so node n's workers are the global ranks g*P .. g*P+P-1 for its
    rendezvous position g, and any `[rankN]:` line in n's log gives g = N // P. A SIGKILLed
    worker prints nothing of its own (its agent names only its local rank), so without this
    the finding read "local rank 1 (node 1)" until the summary came -- if the job's verdict
    came first, for good. A node whose global ranks disagree on g (another launcher's
    uneven layout) is left to the summary."""
    positions: dict[int, set[int]] = {node: {r // nproc_per_node for r in seen} for node, seen in ranks_seen.items()}
    for e in events:
        if e.rank is not None:
            positions.setdefault(e.node, set()).add(e.rank // nproc_per_node)
    return {(node, local): g * nproc_per_node + local
            for node, gs in positions.items() if len(gs) == 1 for g in gs for local in range(nproc_per_node)}


def _earliest(r: _Rank, clocks: dict[int, NodeClock], roles: tuple[str, ...]) -> tuple[float, float, RankEvent]:
    evs = [e for e in r.events if e.role in roles] or r.events
    best = min(evs, key=lambda e: (mapped_time(e, clocks)[0], e.line or 0))
    t, err = mapped_time(best, clocks)
    # the same moment told twice (glog's line to the millisecond, the summary's whole
    # second): keep the sharper of the times that agree with the earliest
    close = [e for e in evs if abs(mapped_time(e, clocks)[0] - t) <= mapped_time(e, clocks)[1] + err]
    sharp = min(close, key=lambda e: (mapped_time(e, clocks)[1], e.line or 0))
    return (*mapped_time(sharp, clocks), sharp)


def attempt_of(e: RankEvent, restarts: Sequence[RestartSeen]) -> int:
    return sum(1 for r in restarts if r.node == e.node and e.line is not None and r.line <= e.line)


def first_failure(events: Iterable[RankEvent], clocks: dict[int, NodeClock] | None = None,
                  world_size: int | None = None, restarts: Sequence[RestartSeen] = (),
                  nproc_per_node: int | None = None,
                  ranks_seen: Mapping[int, set[int]] | None = None) -> FirstFailure | None:
    """The earliest rank that failed on its own (else, with only timeouts, the one rank
    the others waited for; else the earliest failure of any kind), and every other rank's
    failure as its consequence. Only each node's latest torchrun attempt counts (a
    restart began a new one). None without failure evidence."""
    clocks = clocks or {}
    events = list(events)
    latest: dict[int, int] = {}
    for rs in restarts:
        latest[rs.node] = latest.get(rs.node, 0) + 1
    attempt = max(latest.values(), default=0)
    events = [e for e in events if attempt_of(e, restarts) == latest.get(e.node, 0)]
    ranks = _group(events, nproc_per_node, ranks_seen)
    if not ranks:
        return None
    causes = [r for r in ranks if r.role() == CAUSE] or [r for r in ranks if r.role() == NEUTRAL]
    pool = causes or ranks
    timed = [(_earliest(r, clocks, (CAUSE, NEUTRAL) if causes else (CONSEQUENCE,)), r) for r in pool]
    first = min(timed, key=lambda x: (x[0][0], x[1].node, -1 if x[1].rank is None else x[1].rank,
                                      x[1].local_rank or 0))[1]
    timed_out = {r.rank for r in ranks if r.rank is not None and any(e.kind == "timeout" for e in r.events)}
    silent: tuple[int, ...] = ()
    if timed_out and not causes and world_size:
        silent = tuple(r for r in range(world_size) if r not in timed_out)
        waited = [r for r in ranks if len(silent) == 1 and r.rank == silent[0]]
        if waited:
            first = waited[0]      # only timeouts: the rank the others waited for stopped first
    return _named(first, ranks, clocks, bool(causes), attempt, silent,
                  tuple(sorted({e.node for e in events if e.kind == "child_failed"})))


def _named(first: _Rank, ranks: list[_Rank], clocks: dict[int, NodeClock], caused: bool, attempt: int,
           silent: tuple[int, ...], agents: tuple[int, ...]) -> FirstFailure:
    t, err, ev = _earliest(first, clocks, (CAUSE, NEUTRAL) if caused else (CONSEQUENCE,))
    if caused:
        cause_ev = next((e for e in first.events if e.kind == "oom"), None) or (ev if ev.role == CAUSE else None) or \
            min((e for e in first.events if e.role == CAUSE), key=lambda e: mapped_time(e, clocks)[0], default=ev)
    else:       # only consequences: name the earliest of them (a timeout before the SIGABRT it caused)
        cause_ev = ev
    others = []
    for r in sorted(ranks, key=lambda r: (r.node, r.rank if r.rank is not None else -1, r.local_rank or 0)):
        if r is first:
            continue
        rt, _, rev = _earliest(r, clocks, (CONSEQUENCE, CAUSE, NEUTRAL))
        con = next((e for e in r.events if e.kind in ("timeout", "peer_lost")), None) or \
            next((e for e in r.events if e.role == CONSEQUENCE), None) or rev
        others.append(RankOutcome(node=r.node, rank=r.rank, local_rank=r.local_rank, kind=con.kind, what=con.what,
                                  time_s=rt, own_failure=r.role() == CAUSE, text=con.text, line=con.line))
    what = cause_ev.what
    if silent and first.rank in silent and not caused:
        what = "stopped joining collectives (the other ranks timed out waiting for it)"
    return FirstFailure(node=first.node, rank=first.rank, local_rank=first.local_rank, kind=cause_ev.kind,
                        what=what, time_s=t, uncertainty_s=err, time_source=ev.time_source,
                        own_failure=caused, text=cause_ev.text, line=cause_ev.line,
                        consequences=tuple(others), agents_failed=agents, attempt=attempt,
                        ranks_not_timed_out=silent)
