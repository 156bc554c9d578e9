"""The probe's raw JSON document -> typed readings (HostSample, per-run readings).

Kept apart from the tick loop so it can be tested on recorded documents: every field the
host could not give stays None, and one run's broken reading never hides another's.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from controller.probe.cgroup import MemoryCgroup, parse_memory_cgroup, vmid_from_cgroup
from controller.probe.nvidia_smi import gpu_error_from, parse_compute_apps_csv, parse_gpu_csv
from controller.probe.procfs import leader_state, parse_stat, tree_totals
from controller.records import GpuProcess, HostSample, ProcessState


def decode_blob(blob: dict[str, str] | None) -> bytes:
    """The probe's {"enc": "b64"|"zb64", "data": ...} -> bytes."""
    if not blob:
        return b""
    raw = base64.b64decode(blob.get("data", ""))
    if blob.get("enc") == "zb64":
        raw = zlib.decompress(raw)
    return raw


@dataclass
class FileRead:
    """New bytes of one file since a cursor, as the probe read them."""

    exists: bool
    data: bytes = b""
    start: int = 0                     # file offset of data[0]
    inode: int | None = None
    dev: int | None = None             # st_dev: with the inode, which file (FileCursor's names)
    size_bytes: int | None = None
    mtime_s: float | None = None       # host clock
    rotated: bool = False
    error: str | None = None
    context: bytes = b""               # bytes before the cursor, when asked (log_context_bytes)
    context_start: int = 0             # file offset of context[0]
    head: bytes | None = None          # the file's first bytes (fingerprint material), when sent
    before: bytes | None = None        # the bytes just before `start`, when sent
    event: str | None = None           # renamed | deleted | copytruncate | truncated | replaced
    deleted: bool = False              # read through a descriptor of an unlinked file
    followed: str | None = None        # the file read, when not the path asked for
    saved: bool = False                # bytes the agent kept of a file since cut (remote/probe_agent.LogShadow)
    lost_bytes: int = 0                # bytes before `start` dropped past the agent's cap, never read

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "FileRead | None":
        if doc is None:
            return None
        if not doc.get("exists"):
            return cls(exists=False, error=doc.get("error"))
        return cls(exists=True, data=decode_blob(doc.get("bytes")), start=int(doc.get("start", 0)),
                   inode=doc.get("inode"), dev=doc.get("dev"), size_bytes=doc.get("size"), mtime_s=doc.get("mtime"),
                   rotated=bool(doc.get("rotated")), context=decode_blob(doc.get("context")),
                   context_start=int(doc.get("context_start", 0)),
                   head=decode_blob(doc["head"]) if "head" in doc else None,
                   before=decode_blob(doc["before"]) if "before" in doc else None,
                   event=doc.get("event"), deleted=bool(doc.get("deleted")), followed=doc.get("followed"),
                   saved=bool(doc.get("saved")), lost_bytes=int(doc.get("lost_bytes") or 0))


@dataclass
class RunReading:
    """One run as one probe saw it."""

    run_id: str
    error: str | None = None           # the run could not be read at all (CT down, ...)
    log: FileRead | None = None
    metrics: FileRead | None = None
    wandb_path: str | None = None
    wandb: FileRead | None = None
    process: ProcessState = field(default_factory=ProcessState)
    tree_cpu_ticks: int | None = None
    tree_pids: list[int] = field(default_factory=list)
    launch: dict[str, Any] | None = None
    cgroup: MemoryCgroup | None = None  # the run's own memory cgroup (non-container targets)
    vmid: int | None = None


@dataclass
class ContainerReading:
    vmid: int
    init_pid: int | None = None
    init_found_by: str | None = None
    via: str | None = None             # "host" (/proc/<init>/root) | "pct" (exec fallback)
    error: str | None = None
    cgroup: MemoryCgroup | None = None


@dataclass
class HostReading:
    """Everything one probe execution returned, typed."""

    host: HostSample
    uptime_s: float | None = None
    clk_tck: int = 100
    runs: dict[str, RunReading] = field(default_factory=dict)
    containers: dict[int, ContainerReading] = field(default_factory=dict)
    gpu_pid_nspids: dict[int, list[int]] = field(default_factory=dict)  # host pid -> NSpid chain


GPU_STALE_S = 15.0
"""An agent's background GPU sample older than this is flagged (kept, but said to be old)."""


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _exit_code(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_stop_request(text: str | None) -> tuple[str | None, float | None, str | None]:
    """(who, when, successor run id) from the run dir's stop_request (launcher.stop
    writes it)."""
    if text is None:
        return None, None, None
    try:
        doc = json.loads(text)
    except ValueError:
        return "a stop request", None, None     # half-written or not ours: still a stop
    if not isinstance(doc, dict):
        return "a stop request", None, None
    at, nxt = doc.get("time_s"), doc.get("successor")
    return (str(doc.get("by") or "a stop request")[:200], float(at) if isinstance(at, (int, float)) else None,
            str(nxt)[:200] if isinstance(nxt, str) and nxt else None)


def parse_run(doc: dict[str, Any], page_size: int) -> RunReading:
    r = RunReading(run_id=str(doc.get("run_id")), error=doc.get("error"))
    if r.error:
        return r
    r.log = FileRead.from_doc(doc.get("log"))
    r.metrics = FileRead.from_doc(doc.get("metrics"))
    if doc.get("wandb"):
        r.wandb_path = doc["wandb"].get("path")
        r.wandb = FileRead.from_doc(doc["wandb"])
    if doc.get("launch_json"):
        try:
            r.launch = json.loads(doc["launch_json"])
        except ValueError:
            r.launch = None
    pid = doc.get("pid")
    code = _exit_code(doc.get("exit_code_text"))
    by, at, nxt = parse_stop_request(doc.get("stop_request_text"))
    proc = doc.get("proc") or {}
    if pid is None:
        r.process = ProcessState(state="not_started", exit_code=code, stopped_by=by, stop_requested_s=at,
                                 replaced_by=nxt)
    else:
        state = leader_state(proc.get("leader_stat"))
        totals = tree_totals(proc.get("tree") or [], page_size)
        if state == "exited" and totals is not None:
            state = "running"      # the leader is gone but its children still work
        if code is not None and totals is None:
            state = "exited"       # the wrapper wrote the exit code: it is over
        disk_doc = doc.get("disk")
        disk: dict[str, Any] = disk_doc if isinstance(disk_doc, dict) else {}
        r.process = ProcessState(state=state, pid=pid, exit_code=code, stopped_by=by, stop_requested_s=at,
                                 replaced_by=nxt, exit_code_known=not doc.get("attached"),
                                 disk_free_bytes=_opt_int(disk.get("free_bytes")),
                                 exit_code_tmp_bytes=_opt_int(disk.get("exit_code_tmp_bytes")),
                                 rss_bytes=totals.rss_bytes if totals else None,
                                 threads=totals.threads if totals else None)
        r.tree_cpu_ticks = totals.cpu_ticks if totals else None
        r.tree_pids = [s.pid for s in (parse_stat(t) for t in proc.get("tree") or []) if s]
    r.cgroup = parse_memory_cgroup(doc.get("cgroup"))
    return r


def parse_probe_document(doc: dict[str, Any], host_label: str) -> HostReading:
    """The remote script's document -> HostReading (GPU table, containers, runs)."""
    hs = HostSample(host=host_label, time_s=doc.get("time_s"),
                    probe_duration_s=doc.get("round_trip_s", doc.get("duration_s")))
    gpu = doc.get("gpu")
    if gpu is None:
        hs.gpu_error = "GPU readings not requested"
    else:
        hs.gpu_error = gpu_error_from(gpu.get("rc", 1), gpu.get("stdout", ""), gpu.get("stderr", ""))
        if hs.gpu_error is None:
            hs.gpus = parse_gpu_csv(gpu.get("stdout", ""))
            if not hs.gpus:
                hs.gpu_error = "nvidia-smi listed no GPUs"
    sampled = doc.get("gpu_sampled_s")       # agent mode: the background sample's time
    if sampled is not None and hs.time_s is not None and hs.time_s - sampled > GPU_STALE_S:
        age = hs.time_s - sampled
        hs.gpu_error = (hs.gpu_error + "; " if hs.gpu_error else "") + \
            f"GPU numbers are {age:.0f} s old (nvidia-smi slow or hung)"
    nspids: dict[int, list[int]] = {}
    apps = doc.get("apps")
    if apps and apps.get("rc") == 0:
        procs: list[GpuProcess] = parse_compute_apps_csv(apps.get("stdout", ""))
        info = doc.get("app_pids") or {}
        for p in procs:
            pinfo = info.get(str(p.pid)) or {}
            p.vmid = vmid_from_cgroup(pinfo.get("cgroup"))
            if pinfo.get("nspid"):
                nspids[p.pid] = list(pinfo["nspid"])
        hs.gpu_processes = procs
    reading = HostReading(host=hs, uptime_s=doc.get("uptime_s"), clk_tck=int(doc.get("clk_tck") or 100),
                          gpu_pid_nspids=nspids)
    page = int(doc.get("page_size") or 4096)
    for rd in doc.get("runs") or []:
        run = parse_run(rd, page)
        reading.runs[run.run_id] = run
    for cd in doc.get("containers") or []:
        ct = ContainerReading(vmid=int(cd["vmid"]), init_pid=cd.get("init_pid"),
                              init_found_by=cd.get("init_found_by"), via=cd.get("via"),
                              error=cd.get("error"), cgroup=parse_memory_cgroup(cd.get("cgroup")))
        reading.containers[ct.vmid] = ct
    return reading
