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

Other programs report a wait by repeating one line at a fixed period while it lasts
(WAITS): torch's store-based barrier at start-up (`Waiting in store based barrier to
initialize process group for rank: 0, key: ... (world_size=8, worker_count=1, ...)`, once
per rank every 10 s while a rank is missing: torch/distributed/distributed_c10d.py
`_store_based_barrier`), TensorFlow's master (`CreateSession still waiting for response
from worker: /job:ps/replica:0/task:0`, once per silent worker every kLoggingPeriodMs =
10 s: tensorflow/core/distributed_runtime/master.cc `DeviceFinder::Wait`), vLLM's
shared-memory broadcast (`No available shared memory broadcast block found in 60
seconds`: a worker has not read the last broadcast for that long -- one such line is a
slow compile or load, minutes of them in a row a worker that hangs: shm_broadcast.py).

How long it waited is read from the wording (N sec a retry, running for H:MM:SS, found in
60 seconds), from the lines' own clock (glog's `I1127 19:18:22.167176`, a logger's
`2022-11-27 19:18:22`) or, where neither says, from the reports counted per thing waited
for times the period the program reports at: never from when the text was read, so a
pasted log and a live one judge alike.
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

VLLM_STALL_S = 120.0
"""vLLM reporting running requests and no token in or out for this long: a step takes well under
a second, a long prefill shows as prompt throughput, so two minutes of zeros is no step at all."""
TF_MODEL_READY_HANG_S = 120.0
"""A TF1 worker still polling for the chief's variable initialisation after this long (five of its
30-s polls, nothing else printed between): a chief initialises in seconds once it runs; the waits
that pasted logs show end after one or two polls or go on for minutes."""
SHM_HANG_S = 180.0
"""vLLM's broadcast unread this long: three of its 60-s reports in a row. One report is a
worker busy compiling or loading weights (pasted gpustack/gpustack#3888: a long model
load); five in a row while nothing else is printed is a hung engine (vllm-project/vllm#51986)."""


@dataclass(frozen=True)
class WaitWording:
    """One line a program repeats while it waits for others, and how to time the wait."""

    name: str
    pattern: re.Pattern     # groups: `s` (seconds the line says), `who` (what it waits for), `joined`/`world`
    period_s: float         # seconds one report stands for (per `who`) when the line says none; 0: clock only
    hang_s: float           # waited this long, doing nothing else: stuck
    summary: str            # {s}: seconds waited, {who}, {joined}, {world}
    hint: str
    resume: re.Pattern | None = None  # a line of this (not matching `pattern`) ends the wait: progress resumed


_PEER_HINT = "a rank never started or cannot be reached: check every node's launcher log, the endpoints' ports and firewalls"
WAITS: tuple[WaitWording, ...] = (
    WaitWording("paddle-launcher", re.compile(r"server not ready, wait (?P<s>\d+(?:\.\d+)?) sec to retry"), 0.0,
                WAIT_HANG_S, "start-up stuck waiting for its peers: the same wait retried for {s} s (a rank's endpoint "
                "never came up)", _PEER_HINT),
    WaitWording("paddle-tcp-store", re.compile(r"Retry to connect to (?P<who>\S+?:\d+) while the server is not yet "
                                               r"listening"), 0.0, WAIT_HANG_S,
                "start-up stuck waiting for its peers: the same wait retried for {s} s (a rank's endpoint never came up)",
                _PEER_HINT),
    WaitWording("torch-store-barrier", re.compile(r"Waiting in store based barrier to initialize process group for "
                                                  r"(?:[\d.]+ seconds ?)?rank: (?P<who>\d+), key: \S+ \(world_size="
                                                  r"(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<joined>\d+)"),
                10.0, WAIT_HANG_S, "start-up stuck in the store-based barrier: {joined} of {world} ranks joined after "
                "{s} s of waiting (a rank never came up)", _PEER_HINT),
    # LightGBM's socket linkers (microsoft/LightGBM src/network/linkers_socket.cpp:209 @bae0b7ba): a rank that cannot
    # reach a larger rank warns `Connecting to rank %d failed, waiting for %d milliseconds` and sleeps that long,
    # 200 ms first, 1.3 times longer each retry (:193-194), for at least 20 retries, then waits on its listener for
    # the rest: a few retries are a peer still starting, 30 s of them a machine that is not there
    WaitWording("lightgbm-connect", re.compile(r"Connecting to rank (?P<who>\d+) failed, waiting for (?P<ms>\d+) "
                                               r"milliseconds"), 0.0, WAIT_HANG_S,
                "start-up stuck waiting for its peers: LightGBM retried connecting to rank {who} for {s} s (that "
                "machine never listened)", "check that every machine in `machines`/`machine_list_filename` runs the "
                "same training with its own rank, that `local_listen_port` is open between them, and firewalls"),
    WaitWording("tf-create-session", re.compile(r"CreateSession still waiting for response from worker: (?P<who>\S+)"),
                10.0, WAIT_HANG_S, "start-up stuck: the session waited {s} s for {who}, which never answered",
                "that task never started or cannot be reached: check its log, the cluster spec's host:port and firewalls"),
    # TF1's SessionManager.wait_for_session (tensorflow/python/training/session_manager.py): a non-chief worker
    # polls every recovery_wait_secs (30 s) until the chief has initialised the variables, logging this each time
    # (pasted yahoo/TensorFlowOnSpark#422: 2 minutes of it). Timed by the lines' clock only: the same report is
    # often printed twice (absl's `INFO:tensorflow:` and a second handler), so counting lines would double it.
    WaitWording("tf-model-not-ready", re.compile(r"Waiting for model to be ready\.\s+Ready_for_local_init_op:"), 0.0,
                TF_MODEL_READY_HANG_S, "start-up stuck: the worker waited {s} s for the chief to initialise the "
                "model's variables (the chief never did, or this worker cannot reach it)",
                "check that the chief (task 0) runs and initialises, that every task has the same graph and cluster "
                "spec (TF_CONFIG), and that the parameter servers are reachable"),
    # vLLM's periodic engine stats (vllm/engine/metrics.py LoggingStatLogger, v1/metrics/loggers.py: `Avg prompt
    # throughput: X tokens/s, Avg generation throughput: Y tokens/s, Running: N reqs, ...` every 5-10 s): requests
    # running while neither prompt nor generation tokens move, report after report by the lines' clock, is an
    # engine that stopped stepping (pasted vllm-project/vllm#12795: 0.0/0.0 with 1 running for minutes). A 0.0
    # report between working ones is a pause (vllm-project/vllm#2595: 0.0, then 77 tokens/s), and any report
    # with tokens moving ends the wait.
    WaitWording("vllm-zero-throughput", re.compile(r"Avg prompt throughput: 0\.0 tokens/s, Avg generation throughput: "
                                                   r"0\.0 tokens/s, Running: (?P<running>[1-9]\d*) reqs?"), 0.0,
                VLLM_STALL_S, "the inference engine stopped generating: {s} s of stats with requests running and "
                "0.0 tokens/s (prompt and generation)",
                "dump the engine's and workers' stacks (py-spy dump --pid) to see where the step waits (a collective, a "
                "dead worker, a stuck compile); NCCL_DEBUG=INFO for a tensor-parallel hang",
                resume=re.compile(r"Avg generation throughput: [\d.]+ tokens/s")),
    WaitWording("vllm-shm-broadcast", re.compile(r"No available shared memory broadcast block found in (?P<s>\d+) "
                                                 r"seconds?"), 0.0, SHM_HANG_S,
                "a worker stopped reading its work: no shared-memory broadcast block was taken for {s} s (a worker "
                "process hangs)", "dump the workers' stacks (py-spy dump --pid) to see where they wait; check that "
                "every GPU worker is alive (a NCCL/collective call, a stuck compile)"),
)
WAIT_WORDS = ("retry", "waiting", "broadcast block", "generation throughput")
"""The caller's cheap test: every WAITS wording holds one of these (lower-case). (LightGBM's `Connecting to rank
... failed, waiting for` holds "waiting"; line_scan's LINE_WORDS "connecting to rank" lets the line through.)"""
_CONNECT_WAIT = re.compile(r"Waiting for (?P<pending>\d+)/(?P<total>\d+) tasks to connect\.")
"""The XLA/TSL coordination service (TensorFlow's MultiWorkerMirroredStrategy, jax.distributed) after each task
registers: `Waiting for P/N tasks to connect.` then `Example stragglers:` and at most three task names, one a line
(openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service.cc, LogConnectStatusLocked, called from
RegisterTaskAsync after every connection -- the last one logs `Waiting for 0/N` -- at b80f3b7452351a62ce827db0a79d741afb6edbff).
It is logged once per connection, not while the wait lasts, so only where the text ends tells a wait that never ended."""
_CONNECT_TAIL = re.compile(r"(?:Example stragglers:|/job:[\w-]+/replica:\d+/task:\d+|Coordination agent has successfully "
                           r"connected\.)\s*$")
"""What may follow that line while nothing else happens: the straggler list, and this process's own agent saying it
connected (coordination_service_agent.cc; real output: tests/data/logs/tf_multiworker_straggler.log)."""
CONNECT_TAIL_LINES = 5
"""`Example stragglers:`, three names and the agent's line: the most lines the wait's own report spans."""
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
    """One wait in progress (bounded: a few numbers, a count per thing waited for, two
    evidence lines)."""

    waited_s: float = 0.0
    first_clock_s: float | None = None
    last_line: int | None = None
    first_line: int | None = None
    evidence: list[str] = field(default_factory=list)
    stuck_line: int | None = None
    reported: bool = False
    tune_running_s: float | None = None
    pending_trials: int = 0
    wording: WaitWording | None = None
    said_s: dict[str, float] = field(default_factory=dict)  # seconds the lines said, summed per thing waited for
    reports: dict[str, int] = field(default_factory=dict)  # reports per thing waited for
    groups: dict[str, str] = field(default_factory=dict)   # the stuck line's groups (summary)
    last_groups: dict[str, str] = field(default_factory=dict)  # the latest wait line's groups
    connect_wait: tuple[int, int, int, str] | None = None  # the coordination service's last report: line, P, N, text

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

    def feed(self, line: str, line_no: int, raw: str = "", key: str = "") -> None:
        """A line holding a WAIT_WORDS word (the caller's cheap test): is it a wait? `raw` is
        the line as printed, with the logger's clock that `line` (repaired) may have lost;
        `key` its launcher prefix, which tells apart the processes that each report their own
        wait when the line names nothing it waits for (vLLM's engine cores)."""
        cw = _CONNECT_WAIT.search(line) if "tasks to connect" in line else None
        if cw is not None:
            pending, total = int(cw.group("pending")), int(cw.group("total"))
            self.connect_wait = (line_no, pending, total, line) if pending else None
            return
        for w in WAITS:
            m = w.pattern.search(line)
            if m is not None:
                break
        else:
            if self.wording is not None and self.wording.resume is not None and self.wording.resume.search(line):
                self.last_line = None  # progress resumed: the wait is over (a new one starts from scratch)
            return
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        if "joined" in groups and int(groups["joined"]) >= int(groups["world"]):
            return  # every rank is in (an overfull barrier is rules.py's barrier-overfull)
        if self.last_line is None or line_no - self.last_line > ROW_GAP_LINES or w is not self.wording:
            self.waited_s, self.first_clock_s, self.first_line, self.wording = 0.0, None, line_no, w
            self.said_s, self.reports = {}, {}
            self.evidence = [line]
        self.last_line, self.last_groups = line_no, groups
        who = groups.get("who", key)
        if who in self.reports or len(self.reports) < 64:
            self.reports[who] = self.reports.get(who, 0) + 1
            if "s" in groups or "ms" in groups:
                said = float(groups["s"]) if "s" in groups else float(groups["ms"]) / 1000.0
                self.said_s[who] = self.said_s.get(who, 0.0) + said
        counted = w.period_s * max(self.reports.values())
        c = _program_clock(line, raw)
        clocked = 0.0
        if c is not None:
            t = int(c.group("h")) * 3600 + int(c.group("m")) * 60 + int(c.group("s"))
            if self.first_clock_s is None:
                self.first_clock_s = float(t)
            else:
                clocked = (t - self.first_clock_s) % _DAY_S  # (past midnight)
        self.waited_s = max(max(self.said_s.values(), default=0.0), counted, clocked)
        if self.stuck_line is None and self.waited_s >= w.hang_s:
            self.stuck_line, self.groups = line_no, groups
            if len(self.evidence) < 2:
                self.evidence.append(line)

    def barrier_open_at_end(self, last_line_no: int) -> bool:
        """Final text only: the text ENDS inside torch's store-based barrier -- its last line is a
        `Waiting in store based barrier ... (world_size=W, worker_count=J ...)` with J < W, and some
        rank reported twice, i.e. waited two whole intervals (WAIT_HANG_S need not have passed;
        every rank reporting once is one 10-s interval: a late rank, test_detectors_shapes.py). torch prints that line only
        after a whole logging interval (10 s) passed without every rank joining, and prints `Rank R:
        Completed store-based barrier for key:K with W nodes.` once they all have
        (torch/distributed/distributed_c10d.py `_store_based_barrier`, torch 2.13.0 lines 1027-1092;
        torch 1.7 printed `worker_count=` where it now prints `num_workers_joined=`): a text whose
        last word is still that wait is a start-up that never completed (pasted
        Lightning-AI/pytorch-lightning#4420: 7 of 8 ranks, and no completion). A live read may see
        the completion next, so scan_lines never judges this."""
        return (not self.reported and self.stuck_line is None and self.wording is not None and self.wording.name == "torch-store-barrier"
                and self.last_line == last_line_no and max(self.reports.values(), default=0) >= 2
                and "joined" in self.last_groups)

    def connect_open_at_end(self, last_line: str, last_line_no: int) -> bool:
        """Final text only: the coordination service's last report still counts tasks not connected, and the text
        ends in that report (its straggler list, the agent's own line): the cluster never formed. A healthy start
        logs `Waiting for 0/N` once the last task registers and goes on to build its strategy and train; a live
        read may see the straggler come, so scan_lines never judges this."""
        cw = self.connect_wait
        if cw is None or self.reported or not 0 <= last_line_no - cw[0] <= CONNECT_TAIL_LINES:
            return False
        return last_line_no == cw[0] or bool(_CONNECT_TAIL.search(last_line))

    def connect_summary(self) -> str:
        assert self.connect_wait is not None
        _, pending, total, _ = self.connect_wait
        return (f"start-up stuck: the coordination service still waits for {pending} of {total} tasks to connect "
                "where the text ends (a worker never started or cannot reach the coordinator)")

    def barrier_summary(self) -> str:
        g = self.last_groups
        return (f"start-up stuck in the store-based barrier: the text ends waiting with {g.get('joined')} of "
                f"{g.get('world')} ranks joined (a rank never came up)")

    @property
    def stuck(self) -> bool:
        return self.stuck_line is not None

    def summary(self) -> str:
        if self.pending_trials:
            return (f"no trial could start: all {self.pending_trials} trial(s) still PENDING {self.waited_s:.0f} s "
                    "into the run (the resources they request are not there)")
        w = self.wording or WAITS[0]
        return w.summary.format(s=f"{self.waited_s:.0f}", who=self.groups.get("who", "?"),
                                joined=self.groups.get("joined", "?"), world=self.groups.get("world", "?"))

    def hint(self) -> str:
        if self.pending_trials:
            return ("compare what each trial requests (resources_per_trial, num_workers, GPUs) with what the "
                    "cluster has: `ray status`")
        return (self.wording or WAITS[0]).hint
