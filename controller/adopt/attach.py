"""Adopt a run dfctl did not launch (`dfctl attach`): find it, check it, register it.

Two round trips: the scan that finds the candidates, then -- once one run is chosen -- a
second that samples its log through the writer's own descriptor (for the wandb URL and the
progress format) and confirms that the same process (pid + start time + pid namespace)
still runs and still writes that log. A wrapper named by pid or regex (nohup's shell,
`bash -c`, srun) is followed down to the Python process below it (family_of,
run_and_printer), whose own stdout buffering the stale-log warning is judged on.
Anything ambiguous or gone is a BadInputError (exit 2) naming the candidates, and nothing
is registered: the run and its attachment facts go into the registry in one transaction,
or not at all.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from controller.errors import BadInputError
from controller.playbook import SECRET_NAME_RE, Playbook, TargetConfig
from controller.probe.scan import OpenFile, ScanReport, TrainingProcess, log_sample_text, scan_target
from controller.store.runstore import RunRecord, RunStore

WANDB_URL_RE = re.compile(r"View run at (https?://\S+/runs/([A-Za-z0-9]+))")
WANDB_OFFLINE_RE = re.compile(r"offline-run-\d{8}_\d{6}-([A-Za-z0-9]+)")
PROGRESS_LINE_RE = re.compile(r"^\[progress\] step=\d+", re.M)


@dataclass(frozen=True)
class Selector:
    """How the operator names the run: exactly one of pid, log path, command-line regex."""

    pid: int | None = None
    log: str | None = None
    match: str | None = None

    def __post_init__(self) -> None:
        given = [x for x in (self.pid, self.log, self.match) if x is not None]
        if len(given) != 1:
            raise BadInputError("attach: give exactly one of --pid N, --log PATH, --match REGEX")

    def describe(self) -> str:
        return f"pid {self.pid}" if self.pid is not None else f"log {self.log}" if self.log else \
            f"--match {self.match!r}"


def _label(p: TrainingProcess) -> str:
    cmd = " ".join(p.argv)[:80]
    log = p.log.path if p.log else "no log"
    return f"{p.where} pid {p.pid} ({cmd}; {log})"


def _outermost(procs: list[TrainingProcess]) -> list[TrainingProcess]:
    """One per run: drop a process inside another matched process's tree."""
    return [p for p in procs
            if not any(q is not p and q.where == p.where and p.pid in q.descendants for q in procs)]


def _norm(path: str) -> str:
    return os.path.normpath(path)


def select(report: ScanReport, sel: Selector) -> TrainingProcess:
    """The one run the selector names, or a BadInputError naming what was found instead."""
    procs = report.processes
    if sel.pid is not None:
        hits = [p for p in procs if p.pid == sel.pid]
        if not hits:
            raise BadInputError(f"attach: no process {sel.pid} on {report.host}"
                                + _others(procs, " (training processes there: ", ")"))
    elif sel.log is not None:
        want = _norm(sel.log)
        hits = _outermost([p for p in procs if want in _paths_written(p)])
        if not hits:
            logs = sorted({f"{p.log.path} (pid {p.pid})" for p in procs if p.log})
            raise BadInputError(f"attach: no process on {report.host} writes {sel.log}"
                                + (f"; logs being written: {', '.join(logs[:8])}" if logs else
                                   "; no training process writes a log there"))
    else:
        rx = re.compile(sel.match or "")
        hits = _outermost([p for p in procs if rx.search(" ".join(p.argv))])
        if not hits:
            raise BadInputError(f"attach: nothing on {report.host} matches {sel.match!r}"
                                + _others(procs, " (training processes: ", ")"))
    if len(hits) > 1:
        raise BadInputError(f"attach: {sel.describe()} is ambiguous on {report.host}: "
                            + "; ".join(_label(p) for p in hits[:8]),
                            hint="name one with --pid N (and a single CT in --target)")
    return hits[0]


def _paths_written(p: TrainingProcess) -> set[str]:
    files = [f for f in (p.stdout, p.stderr, *p.written_files) if f is not None and f.followable]
    return {_norm(f.path) for f in files}


def _others(procs: list[TrainingProcess], pre: str, post: str) -> str:
    top = [_label(p) for p in procs if p.nested_in is None][:6]
    return pre + "; ".join(top) + post if top else ""


def family_of(chosen: TrainingProcess, report: ScanReport) -> list[TrainingProcess]:
    """The chosen process and its described descendants, shallowest first."""
    below = [p for p in report.processes if p.where == chosen.where and p.pid in chosen.descendants]
    by_pid = {p.pid: p for p in [chosen, *below]}

    def depth(p: TrainingProcess) -> int:
        n, seen = 0, set()
        while p.pid != chosen.pid and p.ppid in by_pid and p.pid not in seen:
            seen.add(p.pid)
            p, n = by_pid[p.ppid], n + 1
        return n

    return sorted([chosen, *below], key=lambda p: (depth(p), p.start_ticks, p.pid))


def run_and_printer(family: list[TrainingProcess]) -> tuple[TrainingProcess, TrainingProcess]:
    """(the run's process, the process that prints its output). A wrapper (nohup's shell,
    `bash -c`, srun, env, setsid) is followed down: the run is the outermost Python process
    below it (torchrun's agent, or the trainer itself), the printer the innermost (a worker)
    -- its own stdout buffering decides what the log shows. No Python below: the chosen one."""
    pythons = [p for p in family if p.is_python]
    if not pythons:
        return family[0], family[0]
    run = family[0] if family[0].is_python else pythons[0]
    return run, pythons[-1] if pythons[-1].pid in run.descendants or pythons[-1] is run else run


def log_of(family: list[TrainingProcess], printer: TrainingProcess, sel: Selector
           ) -> tuple[TrainingProcess, OpenFile | None]:
    """(the process holding the log, the log): the one named; else the printer's own (its
    fd 1/2 or a file it opens for writing); else the innermost process of the tree that
    holds one (`python … | tee train.log`: tee's)."""
    if sel.log is not None:
        want = _norm(sel.log)
        for p in family:
            for f in (p.stdout, p.stderr, *p.written_files):
                if f is not None and f.followable and _norm(f.path) == want:
                    return p, f
    piped = printer.stdout is not None and printer.stdout.kind == "pipe"
    if printer.log is not None and not piped:
        return printer, printer.log
    for p in reversed(family):         # its stdout a pipe: the file the reader writes (tee's), not its stderr
        if p is not printer:
            written = next((f for f in p.written_files if f.followable), None)
            if written is not None:
                return p, written
    for p in reversed(family):
        if p is not printer and p.log is not None:
            return p, p.log
    return printer, printer.log


def _fd_of(p: TrainingProcess, log: OpenFile) -> int | None:
    if log is p.stdout:
        return 1
    if log is p.stderr:
        return 2
    return log.fd


def redacted_argv(argv: list[str]) -> list[str]:
    """The command line as the registry keeps it: values of secret-looking options replaced."""
    out, hide_next = [], False
    for a in argv:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        name, eq, _ = a.partition("=")
        if SECRET_NAME_RE.search(name) and (eq or name.startswith("-")):
            if eq:
                out.append(f"{name}=<redacted>")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(a)
    return out


@dataclass
class Attached:
    record: RunRecord
    attachment: dict[str, Any]


def _confirm(target: TargetConfig, chosen: TrainingProcess, writer: TrainingProcess, log: OpenFile | None, fd: int | None
             ) -> tuple[TrainingProcess, str]:
    """Second round trip: the same process (pid + start time + pid namespace) still runs and
    still writes the log; returns it fresh with the log's sampled head and tail."""
    vmids = (chosen.vmid,) if chosen.vmid is not None else None
    samples = [{"vmid": writer.vmid, "pid": writer.pid, "fd": fd}] if log is not None and fd is not None else []
    again = scan_target(target, vmids, pids=tuple({chosen.pid, writer.pid}), samples=samples)
    now = next((p for p in again.processes if p.where == chosen.where and p.pid == chosen.pid), None)
    if now is None or now.start_ticks != chosen.start_ticks or now.pid_ns != chosen.pid_ns:
        what = "exited" if now is None else (
            f"was replaced by another process with the same pid ({' '.join(now.argv)[:60]!r}, started at tick "
            f"{now.start_ticks}, {now.pid_ns}; the one scanned: tick {chosen.start_ticks}, {chosen.pid_ns})")
        raise BadInputError(f"attach: {chosen.where} pid {chosen.pid} {what} during attach; nothing registered")
    text = ""
    if samples and log is not None:            # (samples is empty without a log)
        sample = again.samples.get((writer.where, writer.pid, int(fd or 0)))
        if not sample or sample.get("error") or sample.get("inode") != log.inode:
            raise BadInputError(f"attach: {chosen.where} pid {writer.pid} no longer writes {log.path}; "
                                "nothing registered")
        text = log_sample_text(sample)
    return now, text


def progress_sources(proc: TrainingProcess, family: list[TrainingProcess], log_text: str,
                     progress_pattern: str | None) -> dict[str, Any]:
    metrics = sorted({m for p in family for m in p.metrics_paths})
    wandb_dirs = sorted({d for p in family for d in p.wandb_run_dirs})
    url = WANDB_URL_RE.search(log_text)
    offline = WANDB_OFFLINE_RE.search(log_text)
    wandb_id = url.group(2) if url else next((p.wandb_run_id for p in family if p.wandb_run_id), None) or \
        (offline.group(1) if offline else None)
    fmt = "dfctl" if PROGRESS_LINE_RE.search(log_text) else None
    if fmt is None and progress_pattern and re.search(progress_pattern, log_text, re.M):
        fmt = "pattern"
    return {"metrics_jsonl": metrics, "wandb_run_dirs": wandb_dirs, "wandb_run_id": wandb_id,
            "wandb_url": url.group(1) if url else None, "log_progress_format": fmt}


def attach_run(target: TargetConfig, sel: Selector, *, vmids: tuple[int, ...] | str | None = None,
               name: str | None = None, playbook: Playbook | None = None, store: RunStore | None = None) -> Attached:
    """Find, confirm and register the run; returns what was registered."""
    report = find_run(target, vmids, sel)
    family = family_of(select(report, sel), report)
    chosen, printer = run_and_printer(family)
    writer, log = log_of(family, printer, sel)
    fd = _fd_of(writer, log) if log is not None else None
    now, text = _confirm(target, chosen, writer, log, fd)
    pattern = playbook.watch.progress_pattern if playbook else None
    sources = progress_sources(now, family, text, pattern)
    if log is None and not sources["metrics_jsonl"] and not sources["wandb_run_dirs"]:
        raise BadInputError(f"attach: {_label(chosen)} writes no log file and holds no metrics.jsonl or wandb run "
                            "open: nothing to follow; nothing registered",
                            hint="a run writing to a pipe or terminal cannot be followed; relaunch it with "
                                 "`dfctl deploy`")
    return _register(target, chosen, writer, log, fd, sources, printer=printer, wrapper=family[0],
                     name=name, playbook=playbook, store=store)


def find_run(target: TargetConfig, vmids: tuple[int, ...] | str | None, sel: Selector) -> ScanReport:
    """First round trip: the candidates (a --pid is described even if it is not one)."""
    return scan_target(target, vmids, match=sel.match, pids=(sel.pid,) if sel.pid is not None else (),
                       logs=(os.path.normpath(sel.log),) if sel.log else ())


def _progress_dir(chosen: TrainingProcess, log: OpenFile | None, sources: dict[str, Any]) -> str:
    """Where the watch looks for metrics.jsonl and wandb/: the directory of the metrics file
    the run holds open, else of its wandb dir, else its cwd."""
    if sources["metrics_jsonl"]:
        return os.path.dirname(sources["metrics_jsonl"][0])
    if sources["wandb_run_dirs"]:
        return os.path.dirname(os.path.dirname(sources["wandb_run_dirs"][0]))
    return chosen.cwd or (os.path.dirname(log.path) if log else "")


def _refuse_twice(store: RunStore, target: TargetConfig, chosen: TrainingProcess) -> None:
    """One process, one attached run: the same pid + start time on the same target again
    is refused, naming the run that already has it."""
    from controller.records import ENDED_STATES
    from controller.ship.launch import target_identity
    from controller.store.runstore import target_of

    for rec in store.target_runs():
        if rec.origin == "attached" and rec.pid == chosen.pid and rec.pid_start_ticks == chosen.start_ticks \
                and rec.state not in ENDED_STATES and target_identity(target_of(rec)) == target_identity(target):
            raise BadInputError(f"attach: {chosen.where} pid {chosen.pid} is already attached as {rec.run_id}; "
                                "nothing registered", hint=f"dfctl watch {rec.run_id}")


def _register(target: TargetConfig, chosen: TrainingProcess, writer: TrainingProcess, log: OpenFile | None, fd: int | None,
              sources: dict[str, Any], *, printer: TrainingProcess, wrapper: TrainingProcess, name: str | None,
              playbook: Playbook | None, store: RunStore | None) -> Attached:
    from controller.ship.launch import make_run_id
    from controller.transport.factory import target_label

    if chosen.vmid is not None and target.vmid != chosen.vmid:
        target = dataclasses.replace(target, vmid=chosen.vmid)
    run_name = name or f"attached-{chosen.vmid if chosen.vmid is not None else 'host'}-{chosen.pid}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", run_name):
        raise BadInputError(f"--name: expected letters, digits, '.', '_' or '-' (at most 64), got {run_name!r}")
    pb = playbook.redacted() if playbook else {}
    pb["target"] = dataclasses.asdict(target)
    own = store is None
    store = store or RunStore()
    try:
        _refuse_twice(store, target, chosen)
        run_id, n = make_run_id(run_name), 1
        base = run_id
        while store.has_run(run_id):
            n += 1
            run_id = f"{base}-{n}"
        rec = RunRecord(
            run_id=run_id, name=run_name, target_kind=target.kind, target=target_label(target), host=target.host,
            vmid=target.vmid, workdir=target.workdir, run_dir=_progress_dir(chosen, log, sources),
            log_path=log.path if log else "", pid=chosen.pid, playbook=pb,
            playbook_path=playbook.source if playbook else None, started_s=chosen.start_s,
            wandb_run_id=sources["wandb_run_id"], state="running", origin="attached",
            pid_start_ticks=chosen.start_ticks)
        doc = {"attached_s": time.time(), "pid": chosen.pid, "start_ticks": chosen.start_ticks, "pid_ns": chosen.pid_ns,
               "wrapper_pid": wrapper.pid if wrapper is not chosen else None,
               "printer_pid": printer.pid, "pgid": chosen.pgid,
               "sid": chosen.sid, "ppid": chosen.ppid, "user": chosen.user, "uid": chosen.uid, "cwd": chosen.cwd,
               "argv": redacted_argv(chosen.argv), "where": chosen.where,
               "log": None if log is None else {"path": log.path, "inode": log.inode, "size_bytes": log.size_bytes,
                                                "deleted": log.deleted, "writer_pid": writer.pid, "fd": fd},
               "env": printer.env_facts(), "sources": sources,
               "gpus": [dataclasses.asdict(g) for g in chosen.gpus]}
        store.add_run_with_attachment(rec, doc)
    finally:
        if own:
            store.close()
    return Attached(rec, doc)
