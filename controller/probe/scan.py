"""Which training processes run on a target, and where each writes: `dfctl scan`, and the
first half of `dfctl attach`.

One round trip per host: controller/remote/process_scan.py (shipped after the probe's own
text, through the probe's bootstrap) lists the candidates of the host and of every
container asked for -- a container read from the node through /proc/<CT init>/root, no
`pct exec` -- with the GPU compute apps; this module turns its document into
`TrainingProcess` records (GPUs mapped through /proc/<pid>/cgroup and NSpid, as the watch
maps them). `pct exec` is the fallback for a container whose procfs the node cannot see.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from controller import remote
from controller.errors import BadInputError, UnreachableError
from controller.playbook import TargetConfig
from controller.probe import APPS_QUERY, GPU_QUERY, ProbeError, decode_blob, probe_stdin, reply_document
from controller.probe.cgroup import vmid_from_cgroup
from controller.probe.gpu_owners import pid_seen_from
from controller.probe.nvidia_smi import gpu_error_from, parse_compute_apps_csv, parse_gpu_csv
from controller.transport.base import Transport


def scan_source() -> str:
    """What the scan ships: the probe's text, then process_scan.py's (its main wins)."""
    return remote.script("probe_agent", "process_scan")


@dataclass(frozen=True)
class OpenFile:
    """What one descriptor points at, read as a string (never walked) plus the kernel's stat."""

    target: str
    kind: str | None = None            # file | pipe | socket | tty | null | char | other
    inode: int | None = None
    size_bytes: int | None = None
    mtime_s: float | None = None
    deleted: bool = False
    fd: int | None = None
    outside_root: bool = False         # a CT's descriptor whose file is not the CT's file at that path


    @property
    def path(self) -> str:
        return self.target[:-len(" (deleted)")] if self.deleted else self.target

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "OpenFile | None":
        if not doc or not isinstance(doc.get("target"), str):
            return None
        return cls(target=doc["target"], kind=doc.get("kind"), inode=doc.get("inode"), size_bytes=doc.get("size"),
                   mtime_s=doc.get("mtime"), deleted=bool(doc.get("deleted")), fd=doc.get("fd"),
                   outside_root=bool(doc.get("outside_root")))

    @property
    def followable(self) -> bool:
        """A regular file the watch can follow: the CT's own file at its path."""
        return self.kind == "file" and not self.outside_root


@dataclass
class GpuHeld:
    index: int | None
    uuid: str | None
    used_mib: float | None


@dataclass
class TrainingProcess:
    """One candidate as `dfctl scan` lists it. Pids are the ones of its own pid namespace
    (the container's, for a CT), as `pct exec` and the run's own tools see them."""

    where: str                          # "host" | "ct 200"
    vmid: int | None
    pid: int
    ppid: int
    pgid: int
    sid: int
    uid: int | None
    user: str | None
    argv: list[str]
    cwd: str | None
    start_ticks: int                    # /proc/<pid>/stat field 22: with the pid and pid_ns, who it is
    start_s: float | None               # unix seconds
    cpu_pct: float | None               # average over its life
    rss_bytes: int
    threads: int
    stdout: OpenFile | None
    stderr: OpenFile | None
    written_files: list[OpenFile] = field(default_factory=list)
    wandb_run_dirs: list[str] = field(default_factory=list)
    wandb_run_id: str | None = None
    metrics_paths: list[str] = field(default_factory=list)
    env_readable: bool = False
    pythonunbuffered: bool | None = None
    descendants: list[int] = field(default_factory=list)
    gpus: list[GpuHeld] = field(default_factory=list)
    nested_in: int | None = None        # pid of a listed ancestor (a worker of that run)
    pid_ns: str | None = None           # `pid:[inode]` of its pid namespace (the node's /proc/<pid>/ns/pid)

    @property
    def program(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else ""

    @property
    def is_python(self) -> bool:
        """A Python interpreter: the kind of process whose own stdout buffering decides what the log shows."""
        return bool(re.match(r"^(python[0-9.]*|pypy[0-9.]*)$", self.program))

    @property
    def python_u_flag(self) -> bool:
        """`python -u` (or -u among its leading flags)."""
        for a in self.argv[1:]:
            if not a.startswith("-") or a in ("-m", "-c"):
                return False
            if a.startswith("-") and not a.startswith("--") and "u" in a[1:]:
                return True
        return False

    @property
    def log(self) -> OpenFile | None:
        """The log it writes: its stdout or stderr file, else a file it writes under its cwd
        (or one named like a log)."""
        for f in (self.stdout, self.stderr):
            if f is not None and f.followable:
                return f
        cwd = (self.cwd or "").rstrip("/") + "/"
        for f in self.written_files:
            if not f.followable:
                continue
            if f.path.startswith(cwd) or re.search(r"\.(log|out|txt|err)(\.\d+)?$", f.path):
                return f
        return None

    @property
    def block_buffered(self) -> bool | None:
        """Python block-buffers stdout to a file or a pipe (a `| tee`) unless PYTHONUNBUFFERED or
        -u (FIELD-NOTES; CPython's io.open line-buffers only a tty)."""
        if self.stdout is None:
            return None
        if self.stdout.kind != "file" and not (self.stdout.kind == "pipe" and self.is_python):
            return False
        if self.python_u_flag:
            return False
        return None if self.pythonunbuffered is None else not self.pythonunbuffered

    def env_facts(self) -> dict[str, Any]:
        """The environment facts attach records (never a value of the environment)."""
        return {"pythonunbuffered": self.pythonunbuffered, "python_u_flag": self.python_u_flag,
                "stdout_kind": self.stdout.kind if self.stdout else None,
                "stderr_kind": self.stderr.kind if self.stderr else None,
                "block_buffered": self.block_buffered}


@dataclass
class ScanReport:
    host: str
    processes: list[TrainingProcess]
    errors: list[str] = field(default_factory=list)     # per container / host, one line each
    gpu_error: str | None = None
    round_trips: int = 1
    duration_s: float | None = None                      # host side
    round_trip_s: float | None = None
    samples: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)


# -- the request ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanScope:
    """What to scan on one host: its own processes and/or containers ("all" = every running one)."""

    host: bool
    vmids: tuple[int, ...] | str = ()

    def request(self, *, match: str | None = None, pids: tuple[int, ...] = (), samples: list[dict] | None = None,
                lxcpath: str | None = None, gpu: bool = True, nvidia_smi: str = "nvidia-smi",
                logs: tuple[str, ...] = ()) -> dict[str, Any]:
        cts: list[dict[str, Any]] | str = "all" if self.vmids == "all" else \
            [{"vmid": v, "lxcpath": lxcpath} for v in self.vmids]
        return {"host": self.host, "host_cgroups": self.host, "containers": cts, "lxcpath": lxcpath, "match": match,
                "pids": list(pids), "logs": list(logs), "samples": samples or [], "gpu": gpu, "gpu_apps": gpu,
                "gpu_query": GPU_QUERY, "apps_query": APPS_QUERY, "nvidia_smi": nvidia_smi}


def scope_of(target: TargetConfig, vmids: tuple[int, ...] | str | None = None) -> ScanScope:
    if target.kind == "pct":
        return ScanScope(host=False, vmids=vmids if vmids is not None else (int(target.vmid or 0),))
    return ScanScope(host=True)


_TARGET_RE = re.compile(r"^(?:(local)|ssh:(?P<ssh>[^:]+)|pct:(?P<host>[^:]+):(?P<vmids>all|\d+(?:,\d+)*))$")


def parse_target_spec(text: str, *, ssh_config: str | None = None, python: str | None = None
                      ) -> tuple[TargetConfig, tuple[int, ...] | str | None]:
    """`local`, `ssh:HOST` or `pct:HOST:VMID[,VMID...]|all` -> (target, vmids for the scan)."""
    m = _TARGET_RE.match(text.strip())
    if not m:
        raise BadInputError(f"--target {text!r}: expected local, ssh:HOST or pct:HOST:VMID (VMID a number, "
                            f"a comma list or all)")
    extra: dict[str, Any] = {"ssh_config": ssh_config} if ssh_config else {}
    if python:
        extra["python"] = python
    if m.group(1):
        return TargetConfig(kind="local", **extra), None
    if m.group("ssh"):
        return TargetConfig(kind="ssh", host=m.group("ssh"), **extra), None
    vm = m.group("vmids")
    vmids: tuple[int, ...] | str = "all" if vm == "all" else tuple(int(v) for v in vm.split(","))
    first = vmids[0] if isinstance(vmids, tuple) else None
    return TargetConfig(kind="pct", host=m.group("host"), vmid=first, **extra), vmids


# -- one round trip ------------------------------------------------------------------------
def host_python(target: TargetConfig) -> str:
    """The interpreter that runs the scan on the host: this one locally, the node's python3
    for a pct target (target.python is the container's), target.python on an SSH host."""
    if target.kind == "local":
        return sys.executable if target.python in ("python3", "python") else target.python
    return "python3" if target.kind == "pct" else target.python


def run_scan(host: Transport, python: str, request: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    """One execution of the scan on `host`; its one JSON document."""
    try:
        res = host.run([python, "-S", "-"], stdin=probe_stdin(request, scan_source()), timeout_s=timeout_s)
    except UnreachableError:
        raise
    except (OSError, EOFError) as exc:
        raise UnreachableError(f"{host.name}: {exc}") from None
    try:
        doc = reply_document(res, "scan", host.name)
    except ProbeError as exc:
        if exc.unreachable:
            raise UnreachableError(f"scan: {exc.message}") from None
        raise
    doc["round_trip_s"] = res.duration_s
    return doc


def _process(doc: dict[str, Any], where: str, vmid: int | None, facts: dict[str, Any]) -> TrainingProcess:
    clk = int(facts.get("clk_tck") or 100)
    page = int(facts.get("page_size") or 4096)
    btime, uptime = facts.get("btime_s"), facts.get("uptime_s")
    start_ticks = int(doc["start_ticks"])
    start_s = btime + start_ticks / clk if btime is not None else None
    life_s = (float(uptime) - start_ticks / clk) if uptime else None
    cpu = round(100.0 * int(doc["cpu_ticks"]) / clk / life_s, 1) if life_s and life_s > 0 else None
    wandb = doc.get("wandb") or []
    env = doc.get("env") or {}
    return TrainingProcess(
        where=where, vmid=vmid, pid=int(doc["pid"]), ppid=int(doc["ppid"]), pgid=int(doc["pgid"]),
        sid=int(doc["sid"]), uid=doc.get("uid"), user=doc.get("user"), argv=list(doc.get("argv") or []),
        cwd=doc.get("cwd"), start_ticks=start_ticks, start_s=start_s, cpu_pct=cpu,
        rss_bytes=int(doc.get("rss_pages") or 0) * page, threads=int(doc.get("threads") or 0),
        stdout=OpenFile.from_doc(doc.get("stdout")), stderr=OpenFile.from_doc(doc.get("stderr")),
        written_files=[f for f in (OpenFile.from_doc(w) for w in doc.get("written_files") or []) if f],
        wandb_run_dirs=sorted({w["run_dir"] for w in wandb}), wandb_run_id=wandb[0]["run_id"] if wandb else None,
        metrics_paths=list(doc.get("metrics") or []), env_readable=bool(env.get("readable")),
        pythonunbuffered=env.get("pythonunbuffered") if env.get("readable") else None,
        descendants=[int(p) for p in doc.get("descendants") or []], pid_ns=doc.get("pid_ns"))


def _nest(procs: list[TrainingProcess]) -> None:
    """A candidate inside another candidate's tree (a torchrun worker, a wrapper's python)
    is marked with the outermost one's pid."""
    by_where: dict[str, list[TrainingProcess]] = {}
    for p in procs:
        by_where.setdefault(p.where, []).append(p)
    for group in by_where.values():
        for p in group:
            holders = [q for q in group if q is not p and p.pid in q.descendants]
            if holders:
                p.nested_in = min(holders, key=lambda q: q.start_ticks).pid


def _attribute_gpus(doc: dict[str, Any], procs: list[TrainingProcess]) -> str | None:
    gpu = doc.get("gpu")
    if gpu is None:
        return "GPU readings not requested"
    err = gpu_error_from(gpu.get("rc", 1), gpu.get("stdout", ""), gpu.get("stderr", ""))
    if err:
        return err
    index_of = {g.uuid: g.index for g in parse_gpu_csv(gpu.get("stdout", ""))}
    apps = doc.get("apps") or {}
    if apps.get("rc") != 0:
        return "nvidia-smi --query-compute-apps failed"
    info = doc.get("app_pids") or {}
    by_key = {(p.vmid, p.pid): p for p in procs}
    for app in parse_compute_apps_csv(apps.get("stdout", "")):
        pinfo = info.get(str(app.pid)) or {}
        vmid = vmid_from_cgroup(pinfo.get("cgroup"))
        nspid = pinfo.get("nspid")
        # a CT's process by its pid inside the CT (controller/probe/gpu_owners.py), else a host one
        seen = pid_seen_from(app.pid, vmid, nspid, vmid)
        owner = (by_key.get((vmid, seen)) if vmid is not None and seen is not None else None) \
            or by_key.get((None, app.pid))
        if owner is not None:
            owner.gpus.append(GpuHeld(index_of.get(app.gpu_uuid), app.gpu_uuid, app.used_mib))
    return None


def parse_scan(doc: dict[str, Any], host_label: str) -> ScanReport:
    report = ScanReport(host=host_label, processes=[], duration_s=doc.get("duration_s"),
                        round_trip_s=doc.get("round_trip_s"))
    sections: list[tuple[str, int | None, dict[str, Any]]] = []
    if doc.get("host") is not None:
        sections.append(("host", None, doc["host"]))
    for ct in doc.get("containers") or []:
        sections.append((f"ct {ct['vmid']}", int(ct["vmid"]), ct))
    for where, vmid, sec in sections:
        if sec.get("error"):
            report.errors.append(f"{host_label}: {sec['error']}")
        if sec.get("proc_refused"):
            report.errors.append(f"{host_label}: {sec['proc_refused']}")
        for p in sec.get("processes") or []:
            proc = _process(p, where, vmid, doc)
            if vmid is None and p.get("vmid") is not None:   # a host scan sees CT processes by host pid
                proc.where = f"host (in ct {p['vmid']})"
            report.processes.append(proc)
        for s in sec.get("samples") or []:
            report.samples[(where, int(s["pid"]), int(s["fd"]))] = s
    _nest(report.processes)
    report.gpu_error = _attribute_gpus(doc, report.processes)
    return report


def scan_target(target: TargetConfig, vmids: tuple[int, ...] | str | None = None, *, match: str | None = None,
                pids: tuple[int, ...] = (), samples: list[dict] | None = None, logs: tuple[str, ...] = (),
                force_pct: bool = False, gpu: bool = True) -> ScanReport:
    """One round trip to the target's host (a second, through `pct exec`, only for a
    container whose procfs the node cannot see; `force_pct`: always, to test that path)."""
    from controller.transport.factory import open_host_transport, open_transport, target_label

    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise BadInputError(f"--match {match!r}: not a regular expression ({exc})") from None
    scope = scope_of(target, vmids)
    host = open_host_transport(target)
    lxcpath = os.environ.get("DFCTL_LXCPATH")      # a test rig keeps one lxcpath per fake host
    req = scope.request(match=match, pids=pids, samples=samples, lxcpath=lxcpath, logs=logs, gpu=gpu)
    req["force_pct"] = force_pct
    t0 = time.monotonic()
    try:
        doc = run_scan(host, host_python(target), req)
    except ProbeError as exc:
        raise (UnreachableError if exc.unreachable else BadInputError)(exc.message) from None
    label = target_label(target) if target.kind != "pct" else (target.host or "host")
    report = parse_scan(doc, label)
    for ct in doc.get("containers") or []:
        if ct.get("need_pct") and target.kind == "pct":
            import dataclasses
            sub_target = dataclasses.replace(target, vmid=int(ct["vmid"]))
            inside = run_scan(open_transport(sub_target), target.python,
                              {**req, "mode": "inside", "vmid": int(ct["vmid"]), "containers": [], "gpu": False})
            sub = parse_scan({**inside, "containers": [{**inside, "vmid": ct["vmid"]}]}, label)
            report.processes.extend(sub.processes)
            report.samples.update(sub.samples)
            report.errors = [e for e in report.errors if f"CT {ct['vmid']}:" not in e] + sub.errors
            report.round_trips += 1
    report.round_trip_s = time.monotonic() - t0
    return report


def log_sample_text(sample: dict[str, Any] | None) -> str:
    """The head and tail a scan sampled from a log, as text."""
    if not sample or sample.get("error"):
        return ""
    return (decode_blob(sample.get("head")) + b"\n" + decode_blob(sample.get("tail"))).decode("utf-8", "replace")
