"""The typed records that flow through dfctl: probe -> parsers -> detectors -> renderers.

One state object (`RunState`) is what the dashboard draws, what `--json` prints and what
the detectors read, so the screen and the machine output can never disagree. Every field
that may be unreadable is Optional and means "unknown" when None (JSON null) -- for that
field and that GPU only (nvitop's rule). Units are in the names.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.throughput_columns import ThroughputColumns

Severity = Literal["info", "warning", "critical"]
RunStatus = Literal["starting", "running", "finished", "failed", "stopped", "ended", "unreachable", "unknown"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

FindingKind = Literal[
    "oom", "crash", "hang", "stale_log", "regression", "nan", "recompile",
    "gpu_idle", "gpu_unreadable", "startup_stall", "unreachable", "log_unreadable",
]

ProcessStatus = Literal["running", "zombie", "exited", "not_started", "unknown"]


@dataclass
class GpuSample:
    """One row of `nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits`.

    Each field names the query it came from; `[N/A]`/`[Not Supported]`/garbage -> None.
    """

    index: int                          # index
    uuid: str | None = None             # uuid
    name: str | None = None             # name
    util_pct: float | None = None       # utilization.gpu
    mem_used_mib: float | None = None   # memory.used
    mem_total_mib: float | None = None  # memory.total
    temp_c: float | None = None         # temperature.gpu
    power_w: float | None = None        # power.draw
    clocks_event_reasons: str | None = None  # clocks_event_reasons.active (hex bitmask)
    users: list[str] = field(default_factory=list)
    """Who uses it: run ids / `ct <vmid>` labels, from --query-compute-apps + cgroups."""


@dataclass
class GpuProcess:
    """One row of `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory`, mapped to a CT."""

    pid: int
    gpu_uuid: str | None
    used_mib: float | None
    vmid: int | None = None  # from /proc/<pid>/cgroup `/lxc/<vmid>/`; None = host process


@dataclass
class ProgressSample:
    """One training progress point, from a log line, metrics.jsonl, or wandb history."""

    step: int
    time_s: float | None = None          # unix time the trainer reported (or we observed)
    tok_per_s: float | None = None       # target tokens / s over the last interval
    samples_per_s: float | None = None
    step_time_s: float | None = None
    data_wait_s: float | None = None
    loss: float | None = None
    acc: float | None = None
    tau: float | None = None
    accept_len: float | None = None      # accepted prefix per block + 1 (serving's count; README)
    eval_loss: float | None = None       # held-out eval (the trainer's --eval-every steps only)
    eval_acc: float | None = None
    eval_tau: float | None = None
    eval_accept_len: float | None = None  # the trainer's estimate (random anchors)
    eval_accept_len_decode: float | None = None  # measured by greedy decoding (trainer.eval_decode): serving's figure
    mem_alloc_gib: float | None = None
    mem_peak_gib: float | None = None
    lr: float | None = None
    source: str = "log"                  # "log" | "metrics" | "wandb"


@dataclass
class ProcessState:
    """The training process as the probe saw it."""

    state: ProcessStatus = "unknown"
    pid: int | None = None
    exit_code: int | None = None         # from the wrapper's exit_code file
    exit_code_known: bool = True         # False: an attached run (no wrapper of ours records one)
    stopped_by: str | None = None        # "dfctl stop", "dfctl deploy --replace": the run dir's stop_request
    stop_requested_s: float | None = None
    replaced_by: str | None = None       # the run deploy --replace started in its place
    cpu_pct: float | None = None         # whole process tree
    rss_bytes: int | None = None         # whole process tree
    threads: int | None = None
    disk_free_bytes: int | None = None   # run dir's filesystem, read while no exit code is recorded
    exit_code_tmp_bytes: int | None = None   # an exit_code.tmp left behind (0: the wrapper died writing it)


@dataclass
class WandbInfo:
    """Where the run's wandb data lives."""

    run_id: str | None = None
    url: str | None = None               # online runs only
    mode: Literal["online", "offline", "disabled", "unknown"] = "unknown"
    offline_dir: str | None = None       # .../wandb/offline-run-<ts>-<id>
    state: str | None = None             # running / finished / crashed / failed (API)


@dataclass
class LogStatus:
    """The run's log file as of this tick."""

    path: str | None = None
    inode: int | None = None
    size_bytes: int | None = None
    mtime_s: float | None = None
    offset_bytes: int = 0                # how far we have read (the cursor)
    rotated: bool = False                # a new inode or a truncation restarted the cursor
    event: str | None = None             # this read: renamed | deleted | copytruncate | truncated | replaced
    deleted: bool = False                # the log is read through a descriptor of its unlinked file
    followed: str | None = None          # the file read, when not `path` (a rename, the copy, a writer's fd)
    error: str | None = None             # why it could not be read (missing; a FIFO there, ...)
    lost_bytes: int = 0                  # this read: bytes a truncation destroyed unread (past the agent's cap)


@dataclass
class HostSample:
    """Host/container-wide readings of one tick (shared by every run on that target)."""

    host: str
    reachable: bool = True
    error: str | None = None
    time_s: float | None = None          # the host's clock
    gpus: list[GpuSample] = field(default_factory=list)
    gpu_error: str | None = None         # why the GPU table is empty (no nvidia-smi, ...)
    gpu_processes: list[GpuProcess] = field(default_factory=list)
    oom_kill_count: int | None = None    # cgroup v2 memory.events / v1 memory.oom_control
    mem_peak_bytes: int | None = None
    mem_limit_bytes: int | None = None
    probe_duration_s: float | None = None
    clock_offset_s: float | None = None  # time_s - the controller's clock at the middle of the round trip
    clock_uncertainty_s: float | None = None  # half that round trip: how well the offset is known


ENDED_STATES = ("finished", "failed", "stopped", "ended")
"""Run states after which nothing more happens (the registry's and the watch's word).
`ended`: an attached run's process is gone and no exit code can be known (dfctl did not
launch it)."""


@dataclass(frozen=True)
class FileCursor:
    """How far a watcher has read one followed file (the log, metrics.jsonl, the .wandb
    file): the one cursor type, with one JSON form that the registry stores, the probe
    request carries and the probe agent reads under the same names (Vector / Fluent Bit /
    Filebeat keep the same facts per file).

    The file is known by `dev` + `inode`; `tail` digests the bytes just before `offset`
    and `head` the file's first bytes (each "<length>:<sha1 hex>"), checked by the probe
    on every read, so a truncation that regrew past the offset -- which no size check can
    see -- and an inode number reused by a new file are seen as the new file they are.
    `offset` is committed: the end of the last complete line (record), so a restarted
    watch re-reads a partial one and loses nothing. `line_no`: complete lines before
    `offset` where the follower counts them (the log); 0 elsewhere."""

    inode: int | None = None
    dev: int | None = None
    offset: int = 0
    line_no: int = 0
    tail: str | None = None              # digest of the bytes before offset
    head: str | None = None              # digest of the file's first bytes

    def to_json(self) -> dict[str, Any]:
        return {"inode": self.inode, "dev": self.dev, "offset": self.offset, "line_no": self.line_no,
                "tail": self.tail, "head": self.head}

    @classmethod
    def from_json(cls, doc: dict[str, Any] | int | None) -> FileCursor:
        """The JSON form back. A bare int is the older form (an offset only, as the registry
        kept metrics.jsonl's and the .wandb file's): read at that offset, checked by size."""
        if doc is None:
            return cls()
        if isinstance(doc, int):
            return cls(offset=doc)
        kw = {k: doc[k] for k in _FILE_CURSOR_FIELDS if doc.get(k) is not None}
        return cls(**kw)


_FILE_CURSOR_FIELDS = tuple(f.name for f in dataclasses.fields(FileCursor))
FOLLOWED_FILES = ("log", "metrics", "wandb")
"""The files a run's cursor follows, by the names the cursor's JSON uses for them."""


@dataclass(frozen=True, init=False)
class RunCursor:
    """How far a watcher has read one run's files: one FileCursor per followed file, the
    same from the registry through the probe request and reply and back. `progress_step`
    is the highest step delivered, so a restarted watch does not deliver a step again
    from a slower source (the .wandb file lags metrics.jsonl).

    The flat keywords (`log_offset=`, `metrics_offset=`, ...) are the spelling before the
    per-file cursor, kept for callers and registry rows written in it; they fill the
    fields of `log`, `metrics` and `wandb` and read back as properties."""

    log: FileCursor
    metrics: FileCursor
    wandb: FileCursor
    progress_step: int | None

    def __init__(self, log: FileCursor | None = None, metrics: FileCursor | None = None,
                 wandb: FileCursor | None = None, progress_step: int | None = None, *,
                 log_inode: int | None = None, log_offset: int | None = None, log_line_no: int | None = None,
                 log_fingerprint: str | None = None, log_head: str | None = None,
                 metrics_offset: int | None = None, wandb_offset: int | None = None):
        log = log or FileCursor()
        if any(v is not None for v in (log_inode, log_offset, log_line_no, log_fingerprint, log_head)):
            log = FileCursor(inode=log.inode if log_inode is None else log_inode, dev=log.dev,
                             offset=log.offset if log_offset is None else log_offset,
                             line_no=log.line_no if log_line_no is None else log_line_no,
                             tail=log.tail if log_fingerprint is None else log_fingerprint,
                             head=log.head if log_head is None else log_head)
        if metrics_offset is not None:
            metrics = dataclasses.replace(metrics or FileCursor(), offset=metrics_offset)
        if wandb_offset is not None:
            wandb = dataclasses.replace(wandb or FileCursor(), offset=wandb_offset)
        object.__setattr__(self, "log", log)
        object.__setattr__(self, "metrics", metrics or FileCursor())
        object.__setattr__(self, "wandb", wandb or FileCursor())
        object.__setattr__(self, "progress_step", progress_step)

    # the older flat names, read-only
    @property
    def log_inode(self) -> int | None:
        return self.log.inode

    @property
    def log_offset(self) -> int:
        return self.log.offset

    @property
    def log_line_no(self) -> int:
        return self.log.line_no

    @property
    def log_fingerprint(self) -> str | None:
        return self.log.tail

    @property
    def log_head(self) -> str | None:
        return self.log.head

    @property
    def metrics_offset(self) -> int:
        return self.metrics.offset

    @property
    def wandb_offset(self) -> int:
        return self.wandb.offset

    def file(self, name: str) -> FileCursor:
        """The cursor of one followed file, by its FOLLOWED_FILES name."""
        return {"log": self.log, "metrics": self.metrics, "wandb": self.wandb}[name]

    def to_json(self) -> dict[str, Any]:
        return {"log": self.log.to_json(), "metrics": self.metrics.to_json(), "wandb": self.wandb.to_json(),
                "progress_step": self.progress_step}

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> RunCursor:
        """The JSON form back; unknown keys (a newer writer) are ignored, missing ones
        default; the flat form of older registries and requests is read too."""
        doc = doc or {}
        flat: dict[str, Any] = {k: doc[k] for k in _FLAT_CURSOR_KEYS if doc.get(k) is not None}
        return cls(FileCursor.from_json(doc.get("log")), FileCursor.from_json(doc.get("metrics")),
                   FileCursor.from_json(doc.get("wandb")), doc.get("progress_step"), **flat)


_FLAT_CURSOR_KEYS = ("log_inode", "log_offset", "log_line_no", "log_fingerprint", "log_head",
                     "metrics_offset", "wandb_offset")


@dataclass
class TickObservation:
    """What one probe tick saw for one run (the raw material of the detectors)."""

    run_id: str
    time_s: float                        # controller's clock when the tick finished
    log: LogStatus = field(default_factory=LogStatus)
    new_lines: list[str] = field(default_factory=list)
    first_line_no: int = 1               # 1-based number of new_lines[0] in the log
    process: ProcessState = field(default_factory=ProcessState)
    progress: list[ProgressSample] = field(default_factory=list)  # new samples this tick
    wandb: WandbInfo | None = None
    host: HostSample | None = None


@dataclass(frozen=True)
class Finding:
    """Something wrong (or worth knowing), with the evidence and the next step."""

    kind: str
    severity: Severity
    summary: str                         # one line: "CUDA OOM on GPU 5 (tried 2.1 GiB)"
    evidence: tuple[str, ...] = ()       # the log lines or numbers behind it
    hint: str = ""                       # what to do next
    first_seen_s: float | None = None
    line: int | None = None              # 1-based log line, when it came from the log
    run_id: str | None = None
    cleared_s: float | None = None
    """When its cause went away (controller.judge.state.CLEARED_BY says what clears each
    kind); None while it holds. A cleared finding leaves the run's live list and stays in
    the registry's record of the run."""

    @property
    def key(self) -> tuple[str, str]:
        """Identity for de-duplication across ticks: the same kind + summary is one finding."""
        return (self.kind, self.summary)


@dataclass
class RunState:
    """Everything known about one watched run; what the dashboard renders and --json prints."""

    run_id: str
    name: str = ""
    target: str = ""                     # "local", "ssh root@pve1", "pct 200 on pve1"
    host: str | None = None
    vmid: int | None = None
    release_id: str | None = None
    run_dir: str | None = None
    started_s: float | None = None
    state: RunStatus = "unknown"
    process: ProcessState = field(default_factory=ProcessState)
    wandb: WandbInfo | None = None
    log: LogStatus = field(default_factory=LogStatus)
    last_log_growth_s: float | None = None
    last_progress_s: float | None = None
    gpus: list[GpuSample] = field(default_factory=list)
    host_sample: HostSample | None = None
    progress: list[ProgressSample] = field(default_factory=list)   # bounded history
    log_tail: list[str] = field(default_factory=list)              # bounded, last lines
    milestones: dict[str, float] = field(default_factory=dict)     # name -> unix time seen
    findings: list[Finding] = field(default_factory=list)         # live: their cause holds
    cleared_findings: list[Finding] = field(default_factory=list)  # whose cause went away (cleared_s)
    baseline_tok_per_s: float | None = None
    warmup_s: float = 60.0                 # the run's watch.warmup_s / warmup_steps (WatchConfig's defaults):
    warmup_steps: int = 3                  # the warm window of every tok/s figure shown for it (throughput.py)
    total_steps: int | None = None         # the run's `--steps N` (playbook args), for "220/300" and an ETA
    oom_kill_at_launch: int | None = None  # the CT cgroup's oom_kill counter when launched
    gpus_seen_since_s: float | None = None  # first tick that brought this run's GPU readings
    gpu_busy_seen_s: dict[int, float] = field(default_factory=dict)
    """GPU index -> last time its utilization was above the idle threshold. utilization.gpu
    is an instantaneous share, and a healthy pipeline's GPUs read 0 between bursts (seen on
    2x H200), so "idle" must mean idle for a while, not idle in one sample."""
    updated_s: float | None = None

    def __post_init__(self) -> None:
        self.older_throughput = ThroughputColumns()
        """The throughput figures of this run's samples that left `progress` (which keeps
        the last 2,000 as objects), as compact columns (throughput_columns.py: at most 49
        bytes a step), so every median shown for the run is its whole run's. Not a field:
        `--json` and dataclasses.asdict leave it out (a million steps are 47 MiB)."""

    @property
    def worst_severity(self) -> str | None:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=SEVERITY_RANK.__getitem__)


@dataclass(frozen=True)
class RankOutcome:
    """How one rank of a job ended, as its evidence says (controller.judge.ranks)."""

    node: int                            # node_rank of the member whose log said it
    rank: int | None                     # global rank (None: the line did not say)
    local_rank: int | None
    kind: str                            # timeout | peer_lost | sigterm | oom | signal | exception | exit | ...
    what: str                            # "timed out in ALLREDUCE", "lost its peer (connection reset by peer)"
    time_s: float | None = None          # on the controller's clock
    own_failure: bool = False            # a failure of its own (a second cause), not a consequence
    text: str = ""
    line: int | None = None


@dataclass(frozen=True)
class FirstFailure:
    """The rank that failed first in a job, and the rest as its consequences."""

    node: int
    rank: int | None
    local_rank: int | None
    kind: str                            # oom | signal | exception | exit | timeout | ...
    what: str                            # "CUDA OOM (tried 20.00 GiB) on GPU 1", "killed by SIGKILL"
    time_s: float                        # on the controller's clock (node clocks mapped through the probe)
    uncertainty_s: float                 # the evidence time's resolution + the node clock's uncertainty
    time_source: str                     # line (a timestamp in the line) | elastic (torchrun's `time :`) | seen
    own_failure: bool                    # False: every rank's failure was a consequence (the earliest is named)
    text: str = ""
    line: int | None = None
    consequences: tuple[RankOutcome, ...] = ()
    agents_failed: tuple[int, ...] = ()  # nodes whose torchrun raised ChildFailedError
    attempt: int = 0                     # torchrun restarts before this attempt
    ranks_not_timed_out: tuple[int, ...] = ()
    """With only timeouts as evidence: the ranks that did not time out (the ones the
    others waited for)."""


@dataclass
class JobNode:
    """One node of a job, as the job's dashboard row shows it (from its member's RunState)."""

    node_rank: int
    run_id: str                          # the member's run id (<job>.node<i>)
    target: str
    host: str | None = None
    vmid: int | None = None
    state: RunStatus = "unknown"
    process: ProcessState = field(default_factory=ProcessState)
    gpus: list[GpuSample] = field(default_factory=list)
    step: int | None = None
    tok_per_s: float | None = None       # this node's latest progress figure (rank 0's node only, for the bundled trainer)
    last_line: str | None = None
    findings: list[Finding] = field(default_factory=list)
    clock_offset_s: float | None = None
    clock_uncertainty_s: float | None = None


@dataclass
class RestartEvent:
    """torchrun restarting its workers (max_restarts): an event of the job, not a new run."""

    node_rank: int
    time_s: float | None
    attempts_left: int
    max_restarts: int
    line: str = ""


@dataclass
class JobState:
    """One job (a run spread over nodes by torchrun): what the dashboard's job block draws
    and `watch --json` prints as {"job": ...}. Member RunStates stay as they are."""

    job_id: str
    name: str = ""
    target: str = ""
    release_id: str | None = None
    started_s: float | None = None
    state: RunStatus = "unknown"
    nodes: list[JobNode] = field(default_factory=list)
    tok_per_s: float | None = None
    """The job's throughput: the sum of the nodes' latest progress tok/s. The bundled
    trainer prints progress on global rank 0 only, counting every rank's tokens, so this
    is the trainer's own global figure; a trainer that prints per-node figures on each
    node's rank 0 gets them summed."""
    step: int | None = None
    loss: float | None = None
    restarts: list[RestartEvent] = field(default_factory=list)
    first_failure: FirstFailure | None = None
    findings: list[Finding] = field(default_factory=list)   # the job's own (first failure), in the registry under job_id
    exit_code: int = 0                   # the job's verdict: 0 healthy, 4 failure, 5 regression
    updated_s: float | None = None


def finite_or_none(value: Any) -> float | None:
    """A float, or None for None/bools/non-numbers/NaN/Inf: how an unreadable metric is kept."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/Inf become null (json.dumps would write invalid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_jsonable(obj: Any) -> Any:
    """Dataclass (or list/dict of them) -> plain JSON-able data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _clean(dataclasses.asdict(obj))
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    return _clean(obj)


STREAM_HISTORIES = ("progress", "log_tail")
"""RunState's bounded histories, left out of each `watch --json` stream line."""


def tick_document(state: RunState, obs: TickObservation | None) -> dict[str, Any]:
    """One `dfctl watch --json` stream line for one run: its state without the bounded
    histories, plus what this tick added to them and the newest progress sample.

    Why not the whole RunState each tick: with a full history (2,000 samples, 200 log
    lines) one line was ~0.5 MB and ~30 ms of encoding per run per tick -- 4 MB/s of
    stdout for 8 runs at 1 s -- and a consumer had to diff it to see what changed. The
    deltas concatenated over the stream are the run's whole progress and log, each item
    once; `watch --once --json` still prints the full state."""
    doc = {f.name: to_jsonable(getattr(state, f.name))
           for f in dataclasses.fields(state) if f.name not in STREAM_HISTORIES}
    doc["latest_progress"] = to_jsonable(state.progress[-1]) if state.progress else None
    doc["progress_new"] = to_jsonable(obs.progress) if obs is not None else []
    doc["log_lines_new"] = list(obs.new_lines) if obs is not None else []
    return doc


def dumps(obj: Any, **kw: Any) -> str:
    """One JSON document for `--json` output."""
    return json.dumps(to_jsonable(obj), ensure_ascii=False, **kw)
