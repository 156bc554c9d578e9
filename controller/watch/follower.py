"""RunFollower: one run's side of a tick -- its cursor, what the probe read, what it means.

A composition, one part per concern: RunLog (the log's cursor, tail, lines and text
detectors: watch/run_log.py), RunProgress (metrics.jsonl, the .wandb file, wandb's API:
watch/progress_files.py), RunResources (CPU, memory cgroup, the run's GPUs:
watch/run_resources.py) and FindingBook (live and cleared findings, the detector guard:
watch/finding_book.py). Each followed file has its own cursor (follow/cursor.py); the
run's RunCursor is theirs together.

`apply(reading, now)` takes the host's reading and returns this tick's observation and
the findings that are new. The cursor is persisted only after the lines it covers were
scanned, so a watcher killed at any moment and restarted re-reads at most the lines
whose findings were not yet stored (a finding is stored once: the registry dedupes) and
never skips one. The follower decides when its run is done: ended, and its files read to
the end.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from controller import judge
from controller.follow.cursor import LogFollower
from controller.judge.state import cleared, unreadable_file
from controller.playbook import TargetConfig, total_steps_of, watch_config_from
from controller.probe import RunProbeRequest
from controller.probe.readings import HostReading, RunReading
from controller.records import (
    ENDED_STATES,
    Finding,
    HostSample,
    LogStatus,
    ProcessState,
    RunCursor,
    RunState,
    RunStatus,
    TickObservation,
    WandbInfo,
)
from controller.store.runstore import RunRecord, RunStore
from controller.watch.attached_run import AttachedRun
from controller.watch.finding_book import FindingBook, FindingHook
from controller.watch.progress_files import ProgressHook, RunProgress
from controller.watch.run_log import LOG_CONTEXT_BYTES, LOG_TAIL_LEN, LogBytesHook, RunLog
from controller.watch.run_resources import RunResources, note_gpu_use

__all__ = ["LOG_CONTEXT_BYTES", "LOG_TAIL_LEN", "FindingHook", "LogBytesHook", "ProgressHook", "RunFollower"]

LAUNCH_ASKS = 10   # ticks without launch.json (not dfctl's launch) before we stop asking


class RunFollower:
    """One watched run: its parts, its accumulated state, its done-ness."""

    def __init__(self, record: RunRecord, target: TargetConfig, store: RunStore, *,
                 on_finding: FindingHook | None = None, on_progress: ProgressHook | None = None,
                 on_log_bytes: LogBytesHook | None = None, errors: list[str] | None = None):
        self.record, self.target, self.store = record, target, store
        self.cfg = watch_config_from(record.playbook)
        self.on_log_bytes = on_log_bytes
        self.errors = errors if errors is not None else []
        cur = store.get_cursor(record.run_id)
        self.state = RunState(run_id=record.run_id, name=record.name, target=record.target, host=record.host,
                              vmid=record.vmid, release_id=record.release_id, run_dir=record.run_dir,
                              started_s=record.started_s, state="starting",
                              baseline_tok_per_s=self.cfg.baseline_tok_per_s,
                              warmup_s=self.cfg.warmup_s, warmup_steps=self.cfg.warmup_steps,
                              total_steps=total_steps_of(((record.playbook or {}).get("run") or {}).get("args")),
                              log=LogStatus(path=record.log_path, inode=cur.log.inode, offset_bytes=cur.log.offset))
        self.book = FindingBook(self.state, store, self.errors, on_finding)
        self.run_log = RunLog(self.state, record.log_path, cur.log, self.cfg.progress_pattern, self.book)
        self.progress = RunProgress(self.state, cur, on_progress)
        self.resources = RunResources(record.run_id, self.vmid)
        self.files_read: frozenset[str] = frozenset()   # run files this tick read as regular files
        self.launch_read, self.launch_asks = False, 0
        self.ended_ticks = 0                     # ticks seen ended with nothing left to read
        self.stop_obeyed_line: int | None = None  # log line where the launcher obeyed an operator's stop
        self.done = False
        # a run dfctl did not launch (dfctl attach): what attach saw, for its findings
        seen = store.attachment(record.run_id) if record.origin == "attached" else None
        self.attached = AttachedRun(record.run_id, store, seen) if seen is not None else None

    @property
    def vmid(self) -> int | None:
        return int(self.target.vmid) if self.target.kind == "pct" and self.target.vmid is not None else None

    @property
    def log(self) -> LogFollower:
        """The log's cursor."""
        return self.run_log.file

    @property
    def metrics_offset(self) -> int:
        return self.progress.metrics.offset

    @property
    def wandb_offset(self) -> int:
        return self.progress.wandb_file.offset

    @property
    def wandb_path(self) -> str | None:
        return self.progress.wandb_file.path

    def cursor(self) -> RunCursor:
        p = self.progress
        return RunCursor(log=self.log.cursor(), metrics=p.metrics.cursor(), wandb=p.wandb_file.cursor(),
                         progress_step=p.last_step)

    def request(self) -> RunProbeRequest:
        rec = self.record
        return RunProbeRequest(
            run_id=rec.run_id, log_path=rec.log_path or f"{rec.run_dir}/train.log", run_dir=rec.run_dir,
            pid=rec.pid, vmid=self.vmid, cursor=self.cursor(), log_carry_bytes=len(self.log.carry),
            want_fingerprint_bytes=self.log.wants_fingerprint_bytes,
            fingerprint_files=self.progress.fingerprint_files(), wandb_path=self.wandb_path,
            want_launch=not self.launch_read and rec.origin != "attached", cgroup=self.resources.cgroup_seen,
            log_context_bytes=self.run_log.context_bytes, attached=rec.origin == "attached",
            start_ticks=rec.pid_start_ticks, pid_ns=self.attached.pid_ns if self.attached else None)

    # -- one tick --------------------------------------------------------------------
    def apply(self, reading: HostReading, now: float) -> tuple[TickObservation, list[Finding]]:
        st = self.state
        rd = reading.runs.get(self.record.run_id) or RunReading(run_id=self.record.run_id,
                                                                error="probe returned nothing")
        obs = TickObservation(run_id=self.record.run_id, time_s=now, host=self.resources.host_sample(reading, rd))
        st.host_sample, st.updated_s = obs.host, now
        if rd.error:
            st.state = "unreachable"
            return obs, self.book.record([Finding(
                kind="unreachable", severity="warning", summary=f"{self.record.target}: run files unreadable",
                evidence=(rd.error,), hint="is the container running? `pct status <vmid>` on the host",
                first_seen_s=now, run_id=self.record.run_id)])
        self.answered()
        self.read_launch(rd)
        chunk = self.run_log.follow(rd.log, reading.host.time_s, now, obs, self.on_log_bytes)
        samples, log_found = self.run_log.parse(chunk, now)
        log_found += self.refused_files(rd, now)
        # metrics/wandb first: at a step both report, the history keeps their source and
        # time (stale_log compares them with the log's last growth)
        samples = self.progress.read(rd, now) + samples
        obs.wandb = st.wandb
        if st.wandb is not None and st.wandb.run_id and st.wandb.run_id != self.record.wandb_run_id:
            self.record.wandb_run_id = st.wandb.run_id          # the registry learns it once
            self.store.update_run(self.record.run_id, wandb_run_id=st.wandb.run_id)
        obs.progress = self.progress.deliver(samples, now)
        obs.process = st.process = self.resources.process(rd, reading)
        st.gpus = self.resources.gpus(reading, rd)
        note_gpu_use(st, now)
        st.state = run_state(st, st.process)
        if self.attached is not None:
            self.attached.note_facts(st)
        obs.wandb = st.wandb = ended_wandb(st)
        lr = rd.log
        if st.state in ENDED_STATES and lr is not None and lr.exists and lr.start + len(lr.data) >= (lr.size_bytes or 0):
            log_found += self.run_log.flush_end(obs, now)
        new = self.judge(log_found, now)
        # persist the cursor only now: every line it covers has been scanned
        self.store.set_cursor(self.record.run_id, self.cursor())
        self.maybe_done(rd, now)
        return obs, new

    def answered(self) -> None:
        """The host and the run's files answer: an outage's `unreachable` findings are
        over (cleared: the registry keeps them; the run's list shows what is wrong now)."""
        self.book.clear(lambda f: f.kind == "unreachable", self.state.updated_s or time.time())

    def read_launch(self, rd: RunReading) -> None:
        st = self.state
        if rd.launch is not None:
            self.launch_read = True
            if st.oom_kill_at_launch is None and isinstance(rd.launch.get("oom_kill_at_launch"), int):
                st.oom_kill_at_launch = rd.launch["oom_kill_at_launch"]
            if st.started_s is None and isinstance(rd.launch.get("started_s"), (int, float)):
                st.started_s = float(rd.launch["started_s"])
        elif not self.launch_read:
            self.launch_asks += 1
            self.launch_read = self.launch_asks >= LAUNCH_ASKS

    def refused_files(self, rd: RunReading, now: float) -> list[Finding]:
        """A FIFO, device, socket or directory where a run file should be: the probe did not
        read it (it could hang or have side effects) -- say what is there. Notes which run
        files were read as regular files: that clears their earlier log_unreadable."""
        out, read = [], set()
        for what, fr in (("log", rd.log), ("metrics.jsonl", rd.metrics), (".wandb file", rd.wandb)):
            if fr is not None and fr.exists:
                read.add(what)
            elif fr is not None and fr.error and "not a regular file" in fr.error:
                out.append(unreadable_file(what, fr.error, now, self.record.run_id))
        self.files_read = frozenset(read)
        return out

    def judge(self, log_found: list[Finding], now: float) -> list[Finding]:
        """Text findings first (evaluate() reads them), then the whole state's; an attached
        run's stale_log explained by what attach saw, and its end judged once."""
        if self.state.process.stopped_by:
            log_found = self.without_stop_teardown(log_found)
        new = self.book.record(log_found)
        found = self.book.guarded("evaluate", lambda: judge.evaluate(self.state, self.cfg, now))
        if self.attached is not None:
            found = self.attached.judged(found, self.state, now)
        new += self.book.record(found)
        self.book.clear(lambda f: self.book.guarded_bool("cleared", lambda: cleared(
            f, self.state, self.cfg, now, files_read=self.files_read)), now)
        return new

    def without_stop_teardown(self, found: list[Finding]) -> list[Finding]:
        kept, self.stop_obeyed_line = without_stop_teardown(found, self.stop_obeyed_line)
        return kept

    def host_down(self, host: str, sample: HostSample | None, error: str | None, since_s: float,
                  now: float) -> list[Finding]:
        st = self.state
        st.state, st.host_sample, st.updated_s = "unreachable", sample, now
        return self.book.record([Finding(
            kind="unreachable", severity="warning",
            summary=f"host {host} unreachable since {time.strftime('%H:%M:%S', time.localtime(since_s))}",
            evidence=(error or "no answer",),
            hint="the watch keeps retrying with backoff; check the host, its network and sshd",
            first_seen_s=now, run_id=self.record.run_id)])

    def maybe_done(self, rd: RunReading, now: float) -> None:
        """A run is done once it ended AND its files are read to the end (one more tick
        after the process ends, so the last lines -- the traceback -- are scanned)."""
        st = self.state
        if st.state not in ENDED_STATES:
            self.ended_ticks = 0
            return
        capped = [f for f in (rd.log, rd.metrics) if f is not None and f.exists
                  and (f.size_bytes or 0) > f.start + len(f.data)]
        if capped:
            return   # more bytes than one read: the rest comes next tick
        self.ended_ticks += 1
        if self.ended_ticks >= 2:
            self.done = True
            try:
                self.store.update_run(self.record.run_id, state=st.state, exit_code=st.process.exit_code, ended_s=now)
            except Exception:  # noqa: BLE001 - the registry row is informational here
                pass


_OPERATOR_SIGNAL = re.compile(r"SignalException: Process \d+ got signal: (?:15|1|2)\b"
                              r"|Received (?:15|1|2|(?:Signals\.)?SIG(?:TERM|HUP|INT)) death signal")
"""torchrun's agent raising on the SIGTERM (SIGHUP, SIGINT) an operator's stop sent it
(torch/distributed/elastic/multiprocessing/api.py `_terminate_process`), and its log line
before it (agent/server/api.py `run`: `Received {e.sigval} death signal, shutting down
workers` -- the number in torch 2.x, `Signals.SIGTERM` in older ones)."""


def operator_signal(f: Finding) -> bool:
    """A 'crash' that is the launcher obeying `dfctl stop` (the run dir's stop_request was
    read): the traceback torchrun prints for the SIGTERM it got."""
    return f.kind == "crash" and any(_OPERATOR_SIGNAL.search(x) for x in (f.summary, *f.evidence))


def without_stop_teardown(found: list[Finding], obeyed_line: int | None) -> tuple[list[Finding], int | None]:
    """A stopped run's text findings less the stop itself: torchrun's SignalException for the
    SIGTERM it got, and any crash printed after it -- the launcher's own teardown (node1 of a
    two-node job stopped under load printed `terminate called without an active exception` /
    `Fatal Python error: Aborted` from the agent's exit after its SignalException; seen in the
    fresh-clone CI of test_stop_during_watch_is_no_failure_and_exits_0). `obeyed_line` is the
    log line of the first SignalException seen so far (a later tick's findings come after it);
    returns the findings kept and that line."""
    for f in found:
        if operator_signal(f) and f.line is not None:
            obeyed_line = f.line if obeyed_line is None else min(obeyed_line, f.line)
    kept = [f for f in found if not operator_signal(f)
            and not (f.kind == "crash" and obeyed_line is not None and f.line is not None and f.line > obeyed_line)]
    return kept, obeyed_line


def ended_wandb(st: RunState) -> WandbInfo | None:
    """The run's wandb side once its process is gone and no exit record of the .wandb file
    said how it ended (killed hard, or a file still being read in pieces): wandb's word for
    what the process did -- finished (exit 0), killed (an operator's stop), crashed (any
    other code), unknown (an attached run: no exit code can be known) -- never `running`.
    A later exit record's own word replaces it (merge_wandb)."""
    w = st.wandb
    if w is None or st.state not in ENDED_STATES or w.state not in (None, "running"):
        return w
    code = st.process.exit_code
    return replace(w, state="killed" if st.state == "stopped" else "finished" if code == 0 else
                   "unknown" if code is None and st.state == "ended" else "crashed")


def run_state(st: RunState, proc: ProcessState) -> RunStatus:
    if proc.state in ("exited", "zombie"):
        if proc.stopped_by:
            return "stopped"        # an operator's stop (dfctl stop, deploy --replace), whatever the code
        return "finished" if proc.exit_code == 0 else "failed"
    if proc.state == "running":
        return "running" if st.progress or "first_step" in st.milestones else "starting"
    return "starting"

