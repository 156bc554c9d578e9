"""The probe: one remote execution per host per tick, and the parsers of what it returns.

`run_probe(transport, request)` sends controller/remote/probe_agent.py (stdlib-only Python)
over stdin to `python3 -` on the host and returns its one JSON document. The request
carries every run's RunCursor (controller/records.py), so the host keeps no state; the parsers in this package (nvidia_smi, procfs, cgroup, readings) turn the
raw document into the typed records of controller/records.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from controller import remote
from controller.errors import UnreachableError
from controller.probe.nvidia_smi import APPS_QUERY_FIELDS, GPU_QUERY_FIELDS
from controller.probe.readings import decode_blob
from controller.records import RunCursor
from controller.remote import probe_agent
from controller.transport.base import Result, Transport

__all__ = ["APPS_QUERY", "GPU_QUERY", "ContainerProbeRequest", "HostProbeRequest", "ProbeError",
           "RunProbeRequest", "decode_blob", "probe_argv", "probe_source", "probe_stdin", "run_probe"]

GPU_QUERY = ",".join(GPU_QUERY_FIELDS)
"""The one nvidia-smi --query-gpu list; the remote script gets it with each request."""
APPS_QUERY = ",".join(APPS_QUERY_FIELDS)

DEFAULT_READ_CAP_BYTES = 1 << 20   # per file per tick; the rest comes next tick


@dataclass
class RunProbeRequest:
    """What to read for one run; its cursor travels with it, unchanged, as JSON."""

    run_id: str
    log_path: str
    run_dir: str = ""
    pid: int | None = None
    vmid: int | None = None            # set for pct targets: read through the container
    cursor: RunCursor = RunCursor()
    log_carry_bytes: int = 0           # bytes past cursor.log.offset the follower holds (a partial line)
    want_fingerprint_bytes: bool = False  # ship the log's first bytes and those before the read
    fingerprint_files: tuple[str, ...] = ()  # ... and those of these files too ("metrics", "wandb")
    wandb_path: str | None = None      # None: the probe looks under <run_dir>/wandb/
    want_launch: bool = False          # ship launch.json (first tick)
    log_context_bytes: int = 0         # also this many bytes before the cursor (a restarted watch's tail)
    log_tail_lines: int = 0            # with no cursor: read from where the last N lines begin (`dfctl logs`)
    cgroup: dict[str, Any] | None = None  # {"version", "path"} last seen: read it once the process is gone
    attached: bool = False             # a run dfctl did not launch: no pid/exit_code/stop files of ours
    start_ticks: int | None = None     # attached: the pid is the run's only while its start time is this
    pid_ns: str | None = None          # attached: ... and its pid namespace this (`pid:[inode]`)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "log_path": self.log_path, "run_dir": self.run_dir,
                "pid": self.pid, "vmid": self.vmid, "cursor": self.cursor.to_json(),
                "log_carry": self.log_carry_bytes, "log_context": self.log_context_bytes,
                "fp_bytes": self.want_fingerprint_bytes, "fp_files": list(self.fingerprint_files),
                "wandb_path": self.wandb_path,
                "want_launch": self.want_launch, "cgroup": self.cgroup, "log_tail_lines": self.log_tail_lines,
                "attached": self.attached, "start_ticks": self.start_ticks,
                "pid_ns": self.pid_ns}


@dataclass
class ContainerProbeRequest:
    """How to reach one container's files from its host."""

    vmid: int
    init_pid: int | None = None        # cached from the last tick; re-checked on the host
    lxcpath: str | None = None         # `lxc-info -P` (test rigs keep one per fake host)
    python: str = "python3"            # inside the CT, for the `pct exec` fallback
    pct: str = "pct"
    force_pct: bool = False            # skip the host view (bench: measure the fallback)

    def to_json(self) -> dict[str, Any]:
        return {"vmid": self.vmid, "init_pid": self.init_pid, "lxcpath": self.lxcpath,
                "python": self.python, "pct": self.pct, "force_pct": self.force_pct}


@dataclass
class HostProbeRequest:
    """Everything one probe execution on one host reads."""

    runs: list[RunProbeRequest] = field(default_factory=list)
    containers: list[ContainerProbeRequest] = field(default_factory=list)
    read_cap_bytes: int = DEFAULT_READ_CAP_BYTES
    gpu: bool = True
    gpu_apps: bool = True              # also --query-compute-apps (per-process attribution)
    nvidia_smi: str = "nvidia-smi"
    pct_timeout_s: float = 20.0

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs],
                "containers": [c.to_json() for c in self.containers],
                "read_cap_bytes": self.read_cap_bytes, "gpu": self.gpu, "gpu_apps": self.gpu_apps,
                "gpu_query": GPU_QUERY, "apps_query": APPS_QUERY,
                "nvidia_smi": self.nvidia_smi, "pct_timeout_s": self.pct_timeout_s}


class ProbeError(Exception):
    """The probe did not produce its document. `unreachable`: the host itself is gone."""

    def __init__(self, message: str, *, unreachable: bool):
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable


def probe_source() -> str:
    """The probe agent's text, as the remote kit ships it (controller/remote/__init__.py)."""
    return remote.script("probe_agent")


def probe_stdin(request: HostProbeRequest | dict[str, Any], source: str | None = None) -> bytes:
    """The program `python3 -` reads (probe_agent.program: the script, executed, then main).
    `source`: a script shipped the same way (the scan: the probe's text followed by
    process_scan.py's, whose main replaces the probe's)."""
    req = request.to_json() if isinstance(request, HostProbeRequest) else request
    return probe_agent.program(source if source is not None else probe_source(), req).encode("utf-8")


# The GPU queries start in the shell *before* the probe's Python, and their output reaches
# it on fd 3, so interpreter start-up and nvidia-smi (the two slowest parts of a tick)
# overlap; `timeout` keeps a hung driver from holding the tick. $1 = python, $2 = nvidia-smi.
GPU_FD = 3


def probe_argv(request: HostProbeRequest, python: str) -> list[str]:
    """The one command a tick runs on the host."""
    if not request.gpu:
        return [python, "-S", "-"]

    def query(what: str, fields: str) -> str:
        return (f'$T "$2" --query-{what}={fields} --format=csv,noheader,nounits </dev/null; '
                'echo "@@dfctl-rc=$?"; ')
    queries = query("gpu", GPU_QUERY)
    if request.gpu_apps:
        queries += query("compute-apps", APPS_QUERY)
    script = ('T=""; command -v timeout >/dev/null 2>&1 && T="timeout -k 2 10"; '
              '{ { ' + queries + '} 2>&1 | "$1" -S - 3<&0 <&4 4<&-; } 4<&0')
    return ["sh", "-c", script, "dfctl-probe", python, request.nvidia_smi]


def reply_document(res: Result, what: str, where: str) -> dict[str, Any]:
    """The one JSON document a stdlib script (`what`: the probe, the scan) printed, or
    ProbeError: unreachable when nothing came back (ssh exit 255, a timeout), not
    unreachable when the host answered but the script failed or printed no JSON."""
    if res.exited in (124, 255) and not res.stdout.strip():
        raise ProbeError(res.summary(), unreachable=True)
    if res.exited != 0:
        hint = " (is python3 installed on the host?)" if res.exited == 127 else ""
        raise ProbeError(f"{what} failed on {res.summary()}{hint}", unreachable=False)
    try:
        doc = json.loads(res.stdout)
    except ValueError as exc:
        raise ProbeError(f"{where}: {what} printed no JSON ({exc}): {res.stdout[:200]!r}",
                         unreachable=False) from None
    if not isinstance(doc, dict):
        raise ProbeError(f"{where}: {what} printed {type(doc).__name__}, not a JSON object", unreachable=False)
    return doc


def run_probe(transport: Transport, request: HostProbeRequest | dict[str, Any], *,
              python: str = "python3", timeout_s: float = 30.0) -> dict[str, Any]:
    """One round trip: run the probe on the transport's host, return its JSON document.

    `python -S`: the probe needs only the standard library, so site-packages (and any
    .pth start-up hooks a conda/pyenv install carries) are skipped on every tick.

    Raises ProbeError(unreachable=True) when the host cannot be reached (connect failure,
    ssh exit 255, timeout), ProbeError(unreachable=False) when the host answered but the
    probe failed (no python3 there, a crash): the message says which and where.
    """
    where = transport.name
    try:
        if isinstance(request, HostProbeRequest):
            argv = probe_argv(request, python)
            doc_req = request.to_json()
            if request.gpu:
                doc_req["gpu_fd"] = GPU_FD
        else:
            argv, doc_req = [python, "-S", "-"], request
        res: Result = transport.run(argv, stdin=probe_stdin(doc_req), timeout_s=timeout_s)
    except UnreachableError as exc:
        raise ProbeError(exc.message, unreachable=True) from None
    except (OSError, EOFError) as exc:
        raise ProbeError(f"{where}: {exc}", unreachable=True) from None
    doc = reply_document(res, "probe", where)
    doc["round_trip_s"] = res.duration_s
    return doc
