"""RunFollower: one run's side of a tick -- its cursor, what the probe read, what it means.

`apply(reading, now)` takes the host's reading and returns this tick's observation and
the findings that are new: follow_log (lines since the cursor), follow_metrics and
follow_wandb (progress since their offsets), attribute_gpus (which GPUs are this run's),
judge (the detectors over the new lines and the whole state). The cursor is persisted
only after the lines it covers were scanned, so a watcher killed at any moment and
restarted re-reads at most the lines whose findings were not yet stored (a finding is
stored once: the registry dedupes) and never skips one. The follower decides when its
run is done: ended, and its files read to the end.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Callable

from controller import judge
from controller.adopt.attached import ended_verdict, explain_stale_log
from controller.follow.cursor import LogChunk, LogFollower
from controller.follow.logparse import LineParser, split_lines
from controller.judge.state import cleared, unreadable_file
from controller.playbook import TargetConfig, total_steps_of, watch_config_from
from controller.probe import RunProbeRequest
from controller.probe.gpu_owners import pid_seen_from
from controller.probe.procfs import cpu_pct
from controller.probe.readings import HostReading, RunReading
from controller.records import (
    ENDED_STATES,
    Finding,
    GpuSample,
    HostSample,
    LogStatus,
    ProcessState,
    ProgressSample,
    RunCursor,
    RunState,
    RunStatus,
    TickObservation,
    WandbInfo,
)
from controller.store.runstore import RunRecord, RunStore
from controller.watch.progress import add_progress, merge_wandb
from controller.watch.progress_files import MetricsFollower, WandbApiFollower, WandbFollower

LOG_TAIL_LEN = 200
SCAN_CONTEXT_LINES = 20   # lines of the last tick given to the detectors as context (no finding from them)
LOG_CONTEXT_BYTES = 32 << 10
"""A watch that starts past the log's beginning (a restart: its cursor is in the registry)
asks once for this much of the log before the cursor, so its log tail is not empty until
the run writes again -- for a run that ended, never. Shown only: the detectors saw those
lines before."""
LAUNCH_ASKS = 10   # ticks without launch.json (not dfctl's launch) before we stop asking

FindingHook = Callable[[RunState, Finding], None]
ProgressHook = Callable[[str, list[ProgressSample]], None]
LogBytesHook = Callable[[str, int, bytes], None]


class RunFollower:
    """One watched run: its cursor, its accumulated state, its done-ness."""

    def __init__(self, record: RunRecord, target: TargetConfig, store: RunStore, *,
                 on_finding: FindingHook | None = None, on_progress: ProgressHook | None = None,
                 on_log_bytes: LogBytesHook | None = None, errors: list[str] | None = None):
        self.record, self.target, self.store = record, target, store
        self.cfg = watch_config_from(record.playbook)
        self.on_finding, self.on_progress, self.on_log_bytes = on_finding, on_progress, on_log_bytes
        self.errors = errors if errors is not None else []
        cur = store.get_cursor(record.run_id)
        self.log = LogFollower.from_cursor(cur.log)
        self.metrics = MetricsFollower(cur.metrics)
        self.wandb_file = WandbFollower(cur.wandb)
        self.wandb_api = WandbApiFollower()
        self.resumed_step = cur.progress_step     # delivered before a restart: never again
        self.last_step: int | None = cur.progress_step
        self.state = RunState(run_id=record.run_id, name=record.name, target=record.target, host=record.host,
                              vmid=record.vmid, release_id=record.release_id, run_dir=record.run_dir,
                              started_s=record.started_s, state="starting",
                              baseline_tok_per_s=self.cfg.baseline_tok_per_s,
                              warmup_s=self.cfg.warmup_s, warmup_steps=self.cfg.warmup_steps,
                              total_steps=total_steps_of(((record.playbook or {}).get("run") or {}).get("args")),
                              log=LogStatus(path=record.log_path, inode=cur.log.inode, offset_bytes=cur.log.offset))
        recorded = store.findings(record.run_id)
        self.state.findings = [f for f in recorded if f.cleared_s is None]
        self.state.cleared_findings = [f for f in recorded if f.cleared_s is not None]
        self.files_read: frozenset[str] = frozenset()   # run files this tick read as regular files
        self.parser = LineParser(self.cfg.progress_pattern)
        # what the text detectors carry from one tick's lines to the next (the fp16 loss-scale
        # trajectory, the count of non-finite grad norms), as check-log's TextScanner does
        self.scan_state = judge.ScanState()
        self.prev_cpu: tuple[int, float] | None = None
        self.launch_read, self.launch_asks = False, 0
        self.cgroup_seen: dict | None = None     # {"version", "path"} of the run's memory cgroup (non-CT)
        self.log_size_seen: int | None = None
        self.ended_ticks = 0                     # ticks seen ended with nothing left to read
        self.log_end_read: int | None = None     # read offset whose partial last line was delivered
        self.tail_context_wanted = True          # ask for the log before the cursor (once, for the tail)
        self.done = False
        # a run dfctl did not launch (dfctl attach): what attach saw, for its findings
        self.attachment = store.attachment(record.run_id) if record.origin == "attached" else None
        self.end_judged = False

    @property
    def vmid(self) -> int | None:
        return int(self.target.vmid) if self.target.kind == "pct" and self.target.vmid is not None else None

    @property
    def metrics_offset(self) -> int:
        return self.metrics.offset

    @property
    def wandb_offset(self) -> int:
        return self.wandb_file.offset

    @property
    def wandb_path(self) -> str | None:
        return self.wandb_file.path

    def cursor(self) -> RunCursor:
        return RunCursor(log=self.log.cursor(), metrics=self.metrics.cursor(), wandb=self.wandb_file.cursor(),
                         progress_step=self.last_step)

    def fingerprint_files(self) -> tuple[str, ...]:
        """The progress files whose next read must bring fingerprint bytes."""
        return tuple(name for name, f in (("metrics", self.metrics.file), ("wandb", self.wandb_file.file))
                     if f.wants_fingerprint_bytes)

    def request(self) -> RunProbeRequest:
        rec = self.record
        return RunProbeRequest(
            run_id=rec.run_id, log_path=rec.log_path or f"{rec.run_dir}/train.log", run_dir=rec.run_dir,
            pid=rec.pid, vmid=self.vmid, cursor=self.cursor(), log_carry_bytes=len(self.log.carry),
            want_fingerprint_bytes=self.log.wants_fingerprint_bytes, fingerprint_files=self.fingerprint_files(),
            wandb_path=self.wandb_path,
            want_launch=not self.launch_read and rec.origin != "attached", cgroup=self.cgroup_seen,
            log_context_bytes=LOG_CONTEXT_BYTES if self.tail_context_wanted and self.log.read_offset > 0 else 0,
            attached=rec.origin == "attached", start_ticks=rec.pid_start_ticks,
            pid_ns=(self.attachment or {}).get("pid_ns"))

    # -- one tick --------------------------------------------------------------------
    def apply(self, reading: HostReading, now: float) -> tuple[TickObservation, list[Finding]]:
        st = self.state
        rd = reading.runs.get(self.record.run_id) or RunReading(run_id=self.record.run_id,
                                                                error="probe returned nothing")
        obs = TickObservation(run_id=self.record.run_id, time_s=now, host=self.host_sample(reading, rd))
        st.host_sample, st.updated_s = obs.host, now
        if rd.error:
            st.state = "unreachable"
            return obs, self.record_findings([Finding(
                kind="unreachable", severity="warning", summary=f"{self.record.target}: run files unreadable",
                evidence=(rd.error,), hint="is the container running? `pct status <vmid>` on the host",
                first_seen_s=now, run_id=self.record.run_id)])
        self.answered()
        self.read_launch(rd)
        chunk = self.follow_log(rd, reading, now, obs)
        samples, log_found = self.parse_lines(chunk, obs, now)
        log_found += self.refused_files(rd, now)
        # metrics/wandb first: at a step both report, the history keeps their source and
        # time (stale_log compares them with the log's last growth)
        samples = self.follow_metrics(rd, now) + self.follow_wandb(rd) + self.poll_wandb_api() + samples
        obs.wandb = st.wandb
        if st.wandb is not None and st.wandb.run_id and st.wandb.run_id != self.record.wandb_run_id:
            self.record.wandb_run_id = st.wandb.run_id          # the registry learns it once
            self.store.update_run(self.record.run_id, wandb_run_id=st.wandb.run_id)
        obs.progress = self.take_progress(samples, now)
        obs.process = st.process = self.process(rd, reading)
        st.gpus = self.attribute_gpus(reading, rd)
        self.note_gpu_use(now)
        st.state = run_state(st, st.process)
        if self.attachment is not None:
            self.attached_facts(now)
        obs.wandb = st.wandb = ended_wandb(st)
        lr = rd.log
        if st.state in ENDED_STATES and lr is not None and lr.exists and lr.start + len(lr.data) >= (lr.size_bytes or 0):
            log_found += self.flush_log_end(obs, now)
        new = self.judge(log_found, now)
        # persist the cursor only now: every line it covers has been scanned
        self.store.set_cursor(self.record.run_id, self.cursor())
        self.maybe_done(rd, now)
        return obs, new

    def answered(self) -> None:
        """The host and the run's files answer: an outage's `unreachable` findings are
        over (cleared: the registry keeps them; the run's list shows what is wrong now)."""
        self.clear(lambda f: f.kind == "unreachable", self.state.updated_s or time.time())

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

    def follow_log(self, rd: RunReading, reading: HostReading, now: float, obs: TickObservation) -> LogChunk | None:
        st = self.state
        lr = rd.log
        if lr is None or not lr.exists:
            st.log = replace(st.log, size_bytes=None, rotated=False, event=None,
                             error=lr.error if lr is not None else None)
            obs.log = st.log
            return None
        if self.tail_context_wanted:
            self.tail_context_wanted = False
            if lr.context and not lr.rotated and not st.log_tail:
                before, _ = split_lines(lr.context)
                st.log_tail = before[1 if lr.context_start > 0 else 0:][-LOG_TAIL_LEN:]  # [0] may be cut
        chunk = self.log.feed(lr.data, start=lr.start, inode=lr.inode, dev=lr.dev, rotated=lr.rotated, head=lr.head,
                              before=lr.before, event=lr.event)
        if chunk.consumed and self.on_log_bytes is not None:
            self.on_log_bytes(self.record.run_id, self.log.offset - len(chunk.consumed), chunk.consumed)
        grew = self.log_size_seen is None or (lr.size_bytes or 0) > self.log_size_seen or chunk.rotated
        if self.log_size_seen is None and lr.mtime_s is not None and reading.host.time_s is not None:
            # first sight: the log last grew at its mtime, on the host's clock
            st.last_log_growth_s = now - max(0.0, reading.host.time_s - lr.mtime_s)
        elif grew:
            st.last_log_growth_s = now
        self.log_size_seen = lr.size_bytes
        st.log = LogStatus(path=self.record.log_path, inode=lr.inode, size_bytes=lr.size_bytes, mtime_s=lr.mtime_s,
                           offset_bytes=self.log.offset, rotated=chunk.rotated, event=lr.event,
                           deleted=lr.deleted, followed=lr.followed)
        obs.log = st.log
        obs.new_lines = chunk.ended_lines + chunk.lines
        obs.first_line_no = chunk.ended_first_line_no if chunk.ended_lines else chunk.first_line_no
        return chunk

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

    def parse_lines(self, chunk: LogChunk | None, obs: TickObservation,
                    now: float) -> tuple[list[ProgressSample], list[Finding]]:
        """Progress, milestones and wandb ids in the new lines; the text detectors over them."""
        if chunk is None:
            return [], []
        st = self.state
        samples: list[ProgressSample] = []
        wandb_seen: WandbInfo | None = None
        for line in chunk.lines:
            parsed = self.parser.parse(line)
            if parsed.progress is not None:
                p = parsed.progress
                if p.time_s is None:
                    p.time_s = now
                samples.append(p)
            if parsed.milestone:
                st.milestones.setdefault(parsed.milestone[0], now)
            if parsed.wandb is not None:
                wandb_seen = parsed.wandb
        if wandb_seen is not None:        # the log's word first; the .wandb file's overrides it
            st.wandb = merge_wandb(st.wandb, wandb_seen)
        found = self.scan(chunk.ended_lines, chunk.ended_first_line_no, now, rotated_from=None)
        found += self.scan(chunk.lines, chunk.first_line_no, now,
                           rotated_from=chunk.event if chunk.rotated or chunk.event else None)
        return samples, found

    def scan(self, lines: list[str], first_line_no: int, now: float, *, rotated_from: str | None) -> list[Finding]:
        if not lines:
            return []
        st = self.state
        before = st.log_tail[-SCAN_CONTEXT_LINES:]   # completes a traceback begun in the last tick's lines
        st.log_tail = (st.log_tail + lines)[-LOG_TAIL_LEN:]
        found = self.guarded("scan_lines", lambda: judge.scan_lines(
            lines, first_line_no, now, self.record.run_id, context_before=before, state=self.scan_state))
        if rotated_from:
            # the line numbers restarted (or continue in a copy): say so where it is read
            note = f"log_rotated: {rotated_from} (line numbers count from the new file)"
            found = [replace(f, evidence=tuple(f.evidence) + (note,)) for f in found]
        return found

    def flush_log_end(self, obs: TickObservation, now: float) -> list[Finding]:
        """The run ended: its last line, unterminated (an OOM message written just before
        the process died), is a line; scan and deliver it as check-log does."""
        if self.log_end_read == self.log.read_offset:
            return []                   # delivered once
        self.log_end_read = self.log.read_offset
        lines, first = self.log.partial_lines()
        found: list[Finding] = []
        if lines:
            if not obs.new_lines:
                obs.first_line_no = first
            obs.new_lines = obs.new_lines + lines
            found = self.scan(lines, first, now, rotated_from=None)
        # the text is final now: a traceback its last lines were still printing is a crash
        # (while the process lived, it may have been being written); how the process
        # itself ended is state.py's to say, so no SIGKILL reading here
        return found + self.guarded("final_findings", lambda: judge.final_findings(
            self.scan_state, now, self.record.run_id))

    def follow_metrics(self, rd: RunReading, now: float) -> list[ProgressSample]:
        return self.metrics.take(rd.metrics, now)

    def follow_wandb(self, rd: RunReading) -> list[ProgressSample]:
        st = self.state
        try:
            progress, info = self.wandb_file.take(rd.wandb, rd.wandb_path)
        except Exception as exc:  # noqa: BLE001 - a bad wandb file must not end the watch
            st.wandb = merge_wandb(st.wandb, WandbInfo(mode="offline", offline_dir=rd.wandb_path,
                                                       state=f"unreadable: {exc}"[:120]))
            return []
        if info is not None:
            st.wandb = merge_wandb(st.wandb, info)
        return progress

    def poll_wandb_api(self) -> list[ProgressSample]:
        """An online run whose transaction log we cannot read: wandb's API (its own thread)."""
        st = self.state
        if self.wandb_path is not None or st.wandb is None or not st.wandb.url:
            return []
        progress, state = self.wandb_api.take(st.wandb.url)
        if state:
            st.wandb = merge_wandb(st.wandb, WandbInfo(state=state))
        return progress

    def take_progress(self, samples: list[ProgressSample], now: float) -> list[ProgressSample]:
        if self.resumed_step is not None:
            samples = [s for s in samples if s.step > self.resumed_step]
        fresh, filled, last = add_progress(self.state, samples, now, self.last_step)
        self.last_step = last
        if (fresh or filled) and self.on_progress is not None:
            try:
                self.on_progress(self.record.run_id, fresh + filled)   # the history folds rows per step
            except Exception:  # noqa: BLE001 - history is a side channel; never end the watch
                pass
        return fresh

    def process(self, rd: RunReading, reading: HostReading) -> ProcessState:
        proc = rd.process
        if rd.tree_cpu_ticks is not None and reading.uptime_s is not None:
            prev_ticks, prev_uptime_s = self.prev_cpu or (None, None)
            proc.cpu_pct = cpu_pct(prev_ticks, prev_uptime_s, rd.tree_cpu_ticks, reading.uptime_s, reading.clk_tck)
            self.prev_cpu = (rd.tree_cpu_ticks, reading.uptime_s)
        return proc

    def host_sample(self, reading: HostReading, rd: RunReading) -> HostSample:
        hs = replace(reading.host)
        if self.vmid is not None:
            ct = reading.containers.get(self.vmid)
            cg = ct.cgroup if ct else None
        else:
            cg = rd.cgroup
            if cg is not None and cg.path and cg.version:
                self.cgroup_seen = {"version": cg.version, "path": cg.path}
        if cg is not None:
            hs.oom_kill_count, hs.mem_peak_bytes, hs.mem_limit_bytes = cg.oom_kill_count, cg.peak_bytes, cg.limit_bytes
        return hs

    def attribute_gpus(self, reading: HostReading, rd: RunReading) -> list[GpuSample]:
        """The GPUs this run uses: those whose compute apps are its processes (NSpid maps
        a container's pids), else those its container uses, else every GPU seen."""
        gpus = [replace(g, users=[]) for g in reading.host.gpus]
        if not gpus:
            return []
        by_uuid = {g.uuid: g for g in gpus}
        tree = set(rd.tree_pids)
        vmid = self.vmid
        mine, ct = set(), set()
        for p in reading.host.gpu_processes:
            g = by_uuid.get(p.gpu_uuid)
            if g is None:
                continue
            in_ct = vmid is not None and p.vmid == vmid
            if pid_seen_from(p.pid, p.vmid, reading.gpu_pid_nspids.get(p.pid), vmid) in tree:
                mine.add(p.gpu_uuid)
                continue                      # labelled by the run id below
            g.users.append(f"ct {p.vmid}" if p.vmid is not None else f"pid {p.pid}")
            if in_ct:
                ct.add(p.gpu_uuid)
        chosen = mine or ct
        for g in gpus:
            if g.uuid in mine:
                g.users = [self.record.run_id] + [u for u in g.users if not u.startswith("ct ")]
        return [g for g in gpus if g.uuid in chosen] if chosen else gpus

    def note_gpu_use(self, now: float) -> None:
        st = self.state
        if not st.gpus:
            return
        if st.gpus_seen_since_s is None:
            st.gpus_seen_since_s = now
        for g in st.gpus:
            if g.util_pct is not None and g.util_pct > judge.IDLE_UTIL_PCT:
                st.gpu_busy_seen_s[g.index] = now

    def judge(self, log_found: list[Finding], now: float) -> list[Finding]:
        """Text findings first (evaluate() reads them), then the whole state's; an attached
        run's stale_log explained by what attach saw, and its end judged once."""
        if self.state.process.stopped_by:
            log_found = [f for f in log_found if not operator_signal(f)]
        new = self.record_findings(log_found)
        found = self.guarded("evaluate", lambda: judge.evaluate(self.state, self.cfg, now))
        if self.attachment is not None:
            found = [explain_stale_log(f, self.state, self.attachment, now) for f in found]
            found += self.attached_end(now)
        new += self.record_findings(found)
        self.clear(lambda f: self.guarded_bool("cleared", lambda: cleared(
            f, self.state, self.cfg, now, files_read=self.files_read)), now)
        return new

    def clear(self, gone: Callable[[Finding], bool], now: float) -> None:
        """Live findings whose cause went away leave the live list for cleared_findings and
        are marked cleared (with when) in the registry, which keeps them."""
        st = self.state
        ended = [f for f in st.findings if gone(f)]
        if not ended:
            return
        done = [replace(f, cleared_s=now) for f in ended]
        st.findings = [f for f in st.findings if f not in ended]
        st.cleared_findings.extend(done)
        for f in done:
            try:
                self.store.clear_finding(self.record.run_id, f, now)
            except Exception as exc:  # noqa: BLE001 - the record is a side channel; never end the watch
                self.errors.append(f"clear finding: {exc}")

    def guarded_bool(self, what: str, call: Callable[[], bool]) -> bool:
        """guarded() for a yes/no rule: a bug answers no (the finding stays)."""
        try:
            return bool(call())
        except Exception as exc:  # noqa: BLE001 - a rule bug must not end the watch
            msg = f"{what} failed on run {self.record.run_id}: {type(exc).__name__}: {exc}"
            if msg not in self.errors:
                self.errors.append(msg)
            return False

    def attached_facts(self, now: float) -> None:
        """An attached run: the CT cgroup's oom_kill counter when the watch first saw it (its
        launch is unknown), and `stopped` once `dfctl stop` recorded it so; gone otherwise is
        `ended` -- exit code unknown, never invented."""
        st = self.state
        hs = st.host_sample
        if st.oom_kill_at_launch is None and hs is not None and hs.oom_kill_count is not None \
                and st.process.state == "running":
            st.oom_kill_at_launch = hs.oom_kill_count
        if st.state in ("finished", "failed"):
            try:
                stopped = self.store.get_run(self.record.run_id).state == "stopped"
            except Exception:  # noqa: BLE001 - the registry row is informational here
                stopped = False
            st.state = "stopped" if stopped else "ended"

    def attached_end(self, now: float) -> list[Finding]:
        st = self.state
        if self.end_judged or st.state != "ended":
            return []
        self.end_judged = True
        after = st.host_sample.oom_kill_count if st.host_sample else None
        f = ended_verdict(self.record.run_id, st.findings, st.log_tail, st.oom_kill_at_launch, after, now)
        return [f] if f is not None else []

    def guarded(self, what: str, call: Callable[[], list[Finding]]) -> list[Finding]:
        """A detector bug costs that detector's findings for this tick, never the watch:
        the error is kept in `errors` (the CLI prints it once) and the cursor still moves."""
        try:
            return list(call())
        except Exception as exc:  # noqa: BLE001
            msg = f"{what} failed on run {self.record.run_id}: {type(exc).__name__}: {exc}"
            if msg not in self.errors:
                self.errors.append(msg)
            return []

    def record_findings(self, found: list[Finding]) -> list[Finding]:
        if not found:
            return []
        found = [f if f.run_id else replace(f, run_id=self.record.run_id) for f in found]
        known = {f.key for f in self.state.findings}
        fresh = [f for f in found if f.key not in known]
        stored = self.store.add_findings(self.record.run_id, fresh)
        self.state.findings.extend(fresh)
        back = {f.key for f in fresh}
        if back and self.state.cleared_findings:   # a cleared finding that holds again is live again
            self.state.cleared_findings = [f for f in self.state.cleared_findings if f.key not in back]
        for f in stored:
            if self.on_finding is not None:
                try:
                    self.on_finding(self.state, f)
                except Exception:  # noqa: BLE001 - a notifier must not end the watch
                    pass
        return stored

    def host_down(self, host: str, sample: HostSample | None, error: str | None, since_s: float,
                  now: float) -> list[Finding]:
        st = self.state
        st.state, st.host_sample, st.updated_s = "unreachable", sample, now
        return self.record_findings([Finding(
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


_OPERATOR_SIGNAL = re.compile(r"SignalException: Process \d+ got signal: (?:15|1|2)\b")
"""torchrun's agent raising on the SIGTERM (SIGHUP, SIGINT) an operator's stop sent it
(torch/distributed/elastic/multiprocessing/api.py `_terminate_process`)."""


def operator_signal(f: Finding) -> bool:
    """A 'crash' that is the launcher obeying `dfctl stop` (the run dir's stop_request was
    read): the traceback torchrun prints for the SIGTERM it got."""
    return f.kind == "crash" and any(_OPERATOR_SIGNAL.search(x) for x in (f.summary, *f.evidence))


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

