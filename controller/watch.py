"""The watch loop: one probe per host per tick, accumulated into one RunState per run.

A tick: group the watched runs by host, probe every host at once (threads, one round trip
each), turn each host's document into readings (controller/probe/readings.py), follow
each run's log/metrics/.wandb from its cursor, run the detectors over the new lines and
the whole state, then persist cursor and findings in the registry -- the cursor only
after the lines were processed, so a watcher killed at any moment and restarted re-reads
at most the lines whose findings were not yet stored (a finding is stored once: the
registry dedupes) and never skips one.

An unreachable host never crashes a tick: its runs turn `unreachable` with an
`unreachable` finding, and the host is retried with exponential backoff (capped) while
the others carry on.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterable

from controller.logcursor import LogFollower
from controller.logparse import split_lines
from controller.playbook import TargetConfig, WatchConfig, watch_config_from
from controller.probe import (
    DEFAULT_READ_CAP_BYTES,
    ContainerProbeRequest,
    HostProbeRequest,
    ProbeError,
    RunProbeRequest,
    run_probe,
)
from controller.probe.procfs import cpu_pct
from controller.probe.readings import HostReading, RunReading, parse_probe_document
from controller.probe.session import ProbeSession, SessionUnsupported
from controller.records import (
    Finding,
    GpuSample,
    HostSample,
    LogStatus,
    ProgressSample,
    RunState,
    TickObservation,
    WandbInfo,
)
from controller.runstore import Cursor, RunRecord, RunStore, target_of
from controller.transport.base import Transport

PROGRESS_HISTORY_LEN = 2000
LOG_TAIL_LEN = 200
LOG_CONTEXT_BYTES = 32 << 10
"""A watch that starts past the log's beginning (a restart: its cursor is in the registry)
asks once for this much of the log before the cursor, so its log tail is not empty until
the run writes again -- for a run that ended, never. Shown only: the detectors saw those
lines before."""
BACKOFF_MAX_S = 15.0
ENDED_STATES = ("finished", "failed", "stopped")

FindingHook = Callable[[RunState, Finding], None]
ProgressHook = Callable[[str, list[ProgressSample]], None]
LogBytesHook = Callable[[str, int, bytes], None]


# -- the detectors engineer's modules, imported lazily (they may land after this file) --

def _detectors():
    import controller.detectors as d
    return d


def _line_parser(pattern: str | None):
    try:
        from controller.logparse import LineParser
    except ImportError:
        return None
    return LineParser(pattern)


def target_config_from(rec: RunRecord) -> TargetConfig:
    """Kept for old callers: runstore.target_of is the one converter."""
    return target_of(rec)


@dataclass
class HostHealth:
    """Backoff bookkeeping for one host."""

    failures: int = 0
    next_try_s: float = 0.0
    down_since_s: float | None = None
    error: str | None = None
    ever_reachable: bool = False


@dataclass
class WatchedRun:
    """One run's cursors and accumulated state."""

    record: RunRecord
    cfg: WatchConfig
    target: TargetConfig
    state: RunState
    log: LogFollower
    metrics_offset: int = 0
    wandb_path: str | None = None
    wandb_offset: int = 0
    wandb_reader: Any = None
    parser: Any = None
    prev_cpu: tuple[int, float] | None = None
    launch_read: bool = False
    launch_asks: int = 0
    wandb_api: Any = None              # controller.wandb_api.ApiPoller for an online run
    wandb_api_failed: bool = False
    cgroup_seen: dict | None = None    # {"version", "path"} of the run's memory cgroup (non-CT targets)
    last_step: int | None = None
    log_size_seen: int | None = None
    ended_ticks: int = 0               # ticks seen ended with nothing left to read
    tail_context_wanted: bool = True   # ask for the log before the cursor (once, for the tail)
    done: bool = False

    @property
    def host_key(self) -> str:
        return "local" if self.target.kind == "local" else str(self.target.host)


@dataclass
class TickReport:
    """What one tick produced."""

    time_s: float
    states: list[RunState]
    hosts: list[HostSample]
    new_findings: list[Finding] = field(default_factory=list)
    observations: list[TickObservation] = field(default_factory=list)
    duration_s: float = 0.0


class Watch:
    """Watches runs from the registry; call tick() every interval (the CLI owns the loop)."""

    def __init__(self, records: Iterable[RunRecord], store: RunStore, *,
                 transport_for: Callable[[TargetConfig], Transport] | None = None,
                 on_finding: FindingHook | None = None,
                 on_progress: ProgressHook | None = None,
                 on_log_bytes: LogBytesHook | None = None,
                 clock: Callable[[], float] = time.time,
                 read_cap_bytes: int = DEFAULT_READ_CAP_BYTES,
                 probe_timeout_s: float = 30.0,
                 gpu: bool = True, nvidia_smi: str = "nvidia-smi",
                 lxcpath: str | None = None, force_pct: bool = False,
                 gpu_apps_every_s: float = 10.0, persistent: bool = True,
                 tick_wait_s: float | None = None):
        self.store = store
        self.clock = clock
        self.on_finding = on_finding
        self.on_progress = on_progress
        self.on_log_bytes = on_log_bytes
        self.on_tick: Callable[[TickReport], None] | None = None   # after every tick (history)
        self.read_cap_bytes = read_cap_bytes
        self.probe_timeout_s = probe_timeout_s
        self.gpu, self.nvidia_smi = gpu, nvidia_smi
        self.lxcpath, self.force_pct = lxcpath, force_pct
        self.gpu_apps_every_s = gpu_apps_every_s
        self.persistent = persistent
        self._agents: dict[str, ProbeSession] = {}
        self._no_agent: set[str] = set()
        self.round_trips: dict[str, int] = {}     # host -> probe round trips (agent or one-shot)
        self.errors: list[str] = []               # internal errors survived (detector bugs)
        self._pending: dict[str, tuple[Future, list[WatchedRun], float]] = {}
        self._apps: dict[str, tuple[float, list, dict]] = {}   # host -> (time, processes, nspids)
        self._transport_for = transport_for or _default_transport
        self.health: dict[str, HostHealth] = {}
        self.hosts: dict[str, HostSample] = {}
        self._init_pids: dict[tuple[str, int], int] = {}
        self.runs: list[WatchedRun] = [self._watched(rec) for rec in records]
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(16, len({r.host_key for r in self.runs}))))
        self.tick_wait_s = tick_wait_s if tick_wait_s is not None else max(
            2.0, 2 * min((r.cfg.interval_s for r in self.runs), default=1.0))

    # -- set-up ------------------------------------------------------------------------
    def _watched(self, rec: RunRecord) -> WatchedRun:
        cfg = watch_config_from(rec.playbook)
        target = target_config_from(rec)
        cur = self.store.get_cursor(rec.run_id)
        state = RunState(run_id=rec.run_id, name=rec.name, target=rec.target, host=rec.host,
                         vmid=rec.vmid, release_id=rec.release_id, run_dir=rec.run_dir,
                         started_s=rec.started_s, state="starting",
                         baseline_tok_per_s=cfg.baseline_tok_per_s,
                         log=LogStatus(path=rec.log_path, inode=cur.log_inode, offset_bytes=cur.log_offset))
        state.findings = self.store.findings(rec.run_id)
        wr = WatchedRun(record=rec, cfg=cfg, target=target, state=state,
                        log=LogFollower(inode=cur.log_inode, offset=cur.log_offset, line_no=cur.log_line_no),
                        metrics_offset=cur.metrics_offset, wandb_offset=cur.wandb_offset,
                        parser=_line_parser(cfg.progress_pattern))
        return wr

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for sess in self._agents.values():
            sess.close()
        self._agents.clear()

    # -- the tick ----------------------------------------------------------------------
    @property
    def states(self) -> list[RunState]:
        return [r.state for r in self.runs]

    @property
    def agent_hosts(self) -> list[str]:
        """Hosts currently probed through a live agent (the rest: one-shot per tick)."""
        return [h for h, sess in self._agents.items() if sess.alive]

    @property
    def all_done(self) -> bool:
        return all(r.done for r in self.runs)

    def tick(self) -> TickReport:
        t0 = time.monotonic()
        by_host: dict[str, list[WatchedRun]] = {}
        for r in self.runs:
            if not r.done:
                by_host.setdefault(r.host_key, []).append(r)
        # A host still busy with an earlier probe gets no second one: its answer is applied
        # when it comes (it carries the cursors it was sent with), and meanwhile a slow host
        # costs the tick at most tick_wait_s -- the other hosts are reported on time.
        for host, runs in by_host.items():
            if host not in self._pending:
                self._pending[host] = (self._pool.submit(self._probe_host, host, runs), runs, time.monotonic())
        report = TickReport(time_s=0.0, states=self.states, hosts=[])
        for host in list(self._pending):
            fut, runs, submitted = self._pending[host]
            # a host never reached yet gets its whole connect/probe time (first SSH connect,
            # ProxyJump, agent start-up) on its FIRST try only; after that -- and once it
            # has failed or timed out -- a slow answer waits for the next tick, so a host
            # dead from the start cannot stall every tick (reliability suite:
            # test_slow_host_under_watch_bounded_ticks_then_recovers)
            h = self.health.get(host, HostHealth())
            first_try = not h.ever_reachable and h.failures == 0 and h.down_since_s is None
            deadline = t0 + (self.probe_timeout_s if first_try else self.tick_wait_s)
            try:
                reading, error = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                now = self.clock()
                health = self.health.setdefault(host, HostHealth())
                if health.down_since_s is None:
                    health.down_since_s = now - (time.monotonic() - submitted)
                self.hosts[host] = HostSample(host=host, reachable=False,
                                              error=f"no answer for {time.monotonic() - submitted:.0f} s")
                report.new_findings += self._host_down(host, runs, self.hosts[host].error, now)
                continue
            del self._pending[host]
            now = self.clock()
            if reading is None:
                report.new_findings += self._host_down(host, runs, error, now)
                continue
            for r in runs:
                obs, new = self._apply(r, reading, now)
                report.observations.append(obs)
                report.new_findings += new
        report.time_s = self.clock()
        report.hosts = list(self.hosts.values())
        report.duration_s = time.monotonic() - t0
        if self.on_tick is not None:
            try:
                self.on_tick(report)
            except Exception as exc:  # noqa: BLE001 - a side record never ends the watch
                self.errors.append(f"on_tick: {exc}")
        return report

    def _probe_host(self, host: str, runs: list[WatchedRun]) -> tuple[HostReading | None, str | None]:
        """Runs in a worker thread: one probe round trip for every run on this host."""
        health = self.health.setdefault(host, HostHealth())
        now = self.clock()
        if health.failures and now < health.next_try_s:
            return None, health.error
        # Which process uses which GPU changes rarely; asking every tick would double the
        # nvidia-smi cost, so --query-compute-apps runs every gpu_apps_every_s.
        apps_due = now - self._apps.get(host, (float("-inf"),))[0] >= self.gpu_apps_every_s
        req = HostProbeRequest(read_cap_bytes=self.read_cap_bytes, gpu=self.gpu, gpu_apps=apps_due,
                               nvidia_smi=self.nvidia_smi)
        vmids: dict[int, WatchedRun] = {}
        for r in runs:
            req.runs.append(self._run_request(r))
            if r.target.kind == "pct" and r.target.vmid is not None:
                vmids.setdefault(int(r.target.vmid), r)
        for vmid, r in vmids.items():
            req.containers.append(ContainerProbeRequest(
                vmid=vmid, init_pid=self._init_pids.get((host, vmid)), lxcpath=self.lxcpath,
                python=r.target.python, force_pct=self.force_pct))
        target = runs[0].target
        python = "python3"
        if target.kind == "local":
            import sys
            python = sys.executable
        try:
            transport = self._transport_for(target)
            doc = self._probe_via_agent(host, transport, req, python, runs)
            if doc is None:
                self.round_trips[host] = self.round_trips.get(host, 0) + 1
                doc = run_probe(transport, req, python=python, timeout_s=self.probe_timeout_s)
        except ProbeError as exc:
            self._note_failure(host, health, exc.message, now, transport=locals().get("transport"))
            return None, exc.message
        except Exception as exc:  # noqa: BLE001 - a transport bug must not end the watch
            msg = f"host {host}: {type(exc).__name__}: {exc}"
            self._note_failure(host, health, msg, now, transport=locals().get("transport"))
            return None, msg
        health.failures, health.error, health.down_since_s = 0, None, None
        health.ever_reachable = True
        reading = parse_probe_document(doc, host)
        if apps_due and "apps" in doc:
            self._apps[host] = (now, reading.host.gpu_processes, reading.gpu_pid_nspids)
        elif not apps_due and host in self._apps and reading.host.gpu_error is None:
            _, reading.host.gpu_processes, reading.gpu_pid_nspids = self._apps[host]
        for vmid, ct in reading.containers.items():
            if ct.init_pid:
                self._init_pids[(host, vmid)] = ct.init_pid
        self.hosts[host] = reading.host
        return reading, None

    def _probe_via_agent(self, host: str, transport: Transport, req: HostProbeRequest, python: str,
                         runs: list[WatchedRun]) -> dict | None:
        """The tick through the host's long-lived probe agent (controller/probe/session.py);
        None when there is none (the caller runs the one-shot probe). A timeout means the
        host is unreachable; a closed channel (sshd restarted) falls back to one-shot."""
        if not self.persistent or host in self._no_agent:
            return None
        sess = self._agents.get(host)
        if sess is None or not sess.alive:
            try:
                sess = self._agents[host] = ProbeSession(transport, python,
                                                         connect_timeout_s=min(10.0, self.probe_timeout_s))
            except SessionUnsupported:
                self._no_agent.add(host)
                return None
            except ProbeError:
                return None
        doc_req = req.to_json()
        doc_req.update(gpu_sampler=True, gpu_every_s=min(r.cfg.interval_s for r in runs),
                       gpu_apps_every_s=self.gpu_apps_every_s)
        self.round_trips[host] = self.round_trips.get(host, 0) + 1
        try:
            return sess.request(doc_req, timeout_s=self.probe_timeout_s)
        except ProbeError as exc:
            self._agents.pop(host, None)
            if exc.unreachable:
                raise
            return None

    def _note_failure(self, host: str, health: HostHealth, message: str, now: float, transport=None) -> None:
        health.failures += 1
        health.error = message
        if health.down_since_s is None:
            health.down_since_s = now
        interval = min(r.cfg.interval_s for r in self.runs) if self.runs else 1.0
        health.next_try_s = now + min(BACKOFF_MAX_S, interval * (2 ** (health.failures - 1)))
        self.hosts[host] = HostSample(host=host, reachable=False, error=message, time_s=None)
        if transport is not None:
            try:
                transport.close()   # the next try opens a fresh connection
            except Exception:  # noqa: BLE001
                pass

    def _run_request(self, r: WatchedRun) -> RunProbeRequest:
        rec = r.record
        return RunProbeRequest(
            run_id=rec.run_id, log_path=rec.log_path or f"{rec.run_dir}/train.log", run_dir=rec.run_dir,
            pid=rec.pid, vmid=int(r.target.vmid) if r.target.kind == "pct" and r.target.vmid is not None else None,
            log_inode=r.log.inode, log_offset=r.log.read_offset, metrics_offset=r.metrics_offset,
            wandb_path=r.wandb_path, wandb_offset=r.wandb_offset, want_launch=not r.launch_read,
            cgroup=r.cgroup_seen,
            log_context_bytes=LOG_CONTEXT_BYTES if r.tail_context_wanted and r.log.read_offset > 0 else 0)

    # -- host down ---------------------------------------------------------------------
    def _host_down(self, host: str, runs: list[WatchedRun], error: str | None, now: float) -> list[Finding]:
        health = self.health.get(host) or HostHealth()
        since = health.down_since_s or now
        new: list[Finding] = []
        for r in runs:
            r.state.state = "unreachable"
            r.state.host_sample = self.hosts.get(host)
            r.state.updated_s = now
            f = Finding(kind="unreachable", severity="warning",
                        summary=f"host {host} unreachable since {time.strftime('%H:%M:%S', time.localtime(since))}",
                        evidence=(error or "no answer",),
                        hint="the watch keeps retrying with backoff; check the host, its network and sshd",
                        first_seen_s=now, run_id=r.record.run_id)
            new += self._record_findings(r, [f])
        return new

    # -- one run -----------------------------------------------------------------------
    def _apply(self, r: WatchedRun, reading: HostReading, now: float) -> tuple[TickObservation, list[Finding]]:
        st = r.state
        rd = reading.runs.get(r.record.run_id) or RunReading(run_id=r.record.run_id, error="probe returned nothing")
        host_sample = self._host_sample_for(r, reading, rd)
        obs = TickObservation(run_id=r.record.run_id, time_s=now, host=host_sample)
        st.host_sample = host_sample
        st.updated_s = now
        if rd.error:
            st.state = "unreachable"
            f = Finding(kind="unreachable", severity="warning",
                        summary=f"{r.record.target}: run files unreadable", evidence=(rd.error,),
                        hint="is the container running? `pct status <vmid>` on the host",
                        first_seen_s=now, run_id=r.record.run_id)
            return obs, self._record_findings(r, [f])
        if rd.launch is not None:
            r.launch_read = True
            if st.oom_kill_at_launch is None and isinstance(rd.launch.get("oom_kill_at_launch"), int):
                st.oom_kill_at_launch = rd.launch["oom_kill_at_launch"]
            if st.started_s is None and isinstance(rd.launch.get("started_s"), (int, float)):
                st.started_s = float(rd.launch["started_s"])
        elif not r.launch_read:
            r.launch_asks += 1
            r.launch_read = r.launch_asks >= 10   # no launch.json (not dfctl's launch): stop asking
        found: list[Finding] = []
        # log -> lines -> scan
        lines = self._follow_log(r, rd, reading, now, obs)
        samples: list[ProgressSample] = []
        wandb_seen: WandbInfo | None = None
        for line in lines:
            parsed = r.parser.parse(line) if r.parser is not None else None
            if parsed is None:
                continue
            if getattr(parsed, "progress", None) is not None:
                p = parsed.progress
                if p.time_s is None:
                    p.time_s = now
                samples.append(p)
            if getattr(parsed, "milestone", None):
                name = parsed.milestone[0] if isinstance(parsed.milestone, tuple) else str(parsed.milestone)
                st.milestones.setdefault(name, now)
            if getattr(parsed, "wandb", None) is not None:
                wandb_seen = parsed.wandb
        if lines:
            st.log_tail = (st.log_tail + lines)[-LOG_TAIL_LEN:]
            found += self._guarded("scan_lines", r, lambda: _detectors().scan_lines(
                lines, obs.first_line_no, now, r.record.run_id))
        # metrics/wandb first: at a step both report, the history keeps their source and
        # time (stale_log compares them with the log's last growth)
        if wandb_seen is not None:        # the log's word first; the .wandb file's overrides it
            st.wandb = _merge_wandb(st.wandb, wandb_seen)
        samples = (self._follow_metrics(r, rd, now) + self._follow_wandb(r, rd, st) + self._poll_wandb_api(r, st)
                   + samples)
        obs.wandb = st.wandb
        if st.wandb is not None and st.wandb.run_id and st.wandb.run_id != r.record.wandb_run_id:
            r.record.wandb_run_id = st.wandb.run_id          # the registry learns it once
            self.store.update_run(r.record.run_id, wandb_run_id=st.wandb.run_id)
        fresh = self._add_progress(r, samples, now)
        obs.progress = fresh
        if fresh and self.on_progress is not None:
            try:
                self.on_progress(r.record.run_id, fresh)
            except Exception:  # noqa: BLE001 - history is a side channel; never end the watch
                pass
        # process
        proc = rd.process
        if rd.tree_cpu_ticks is not None and reading.uptime_s is not None:
            proc.cpu_pct = cpu_pct(*(r.prev_cpu or (None, None)), rd.tree_cpu_ticks, reading.uptime_s,
                                   reading.clk_tck)
            r.prev_cpu = (rd.tree_cpu_ticks, reading.uptime_s)
        st.process = proc
        obs.process = proc
        st.gpus = self._gpus_for(r, reading, rd)
        if st.gpus:
            if st.gpus_seen_since_s is None:
                st.gpus_seen_since_s = now
            idle_pct = _detectors().IDLE_UTIL_PCT
            for g in st.gpus:
                if g.util_pct is not None and g.util_pct > idle_pct:
                    st.gpu_busy_seen_s[g.index] = now
        st.state = _run_state(st, proc)
        new = self._record_findings(r, found)      # text findings first: evaluate() reads them
        new += self._record_findings(r, self._guarded("evaluate", r, lambda: _detectors().evaluate(st, r.cfg, now)))
        # persist the cursor only now: every line it covers has been scanned
        self.store.set_cursor(Cursor(run_id=r.record.run_id, log_inode=r.log.inode, log_offset=r.log.offset,
                                     log_line_no=r.log.line_no, metrics_offset=r.metrics_offset,
                                     wandb_offset=r.wandb_offset))
        self._maybe_done(r, rd, now)
        return obs, new

    def _follow_log(self, r: WatchedRun, rd: RunReading, reading: HostReading, now: float,
                    obs: TickObservation) -> list[str]:
        st = r.state
        lr = rd.log
        if lr is None or not lr.exists:
            st.log = replace(st.log, size_bytes=None, rotated=False)
            return []
        if r.tail_context_wanted:
            r.tail_context_wanted = False
            if lr.context and not lr.rotated and not st.log_tail:
                before, _ = split_lines(lr.context)
                st.log_tail = before[1 if lr.context_start > 0 else 0:][-LOG_TAIL_LEN:]  # [0] may be cut
        chunk = r.log.feed(lr.data, start=lr.start, inode=lr.inode, rotated=lr.rotated)
        if chunk.consumed and self.on_log_bytes is not None:
            self.on_log_bytes(r.record.run_id, r.log.offset - len(chunk.consumed), chunk.consumed)
        grew = r.log_size_seen is None or (lr.size_bytes or 0) > r.log_size_seen or chunk.rotated
        if r.log_size_seen is None and lr.mtime_s is not None and reading.host.time_s is not None:
            # first sight: the log last grew at its mtime, on the host's clock
            st.last_log_growth_s = now - max(0.0, reading.host.time_s - lr.mtime_s)
        elif grew:
            st.last_log_growth_s = now
        r.log_size_seen = lr.size_bytes
        st.log = LogStatus(path=r.record.log_path, inode=lr.inode, size_bytes=lr.size_bytes, mtime_s=lr.mtime_s,
                           offset_bytes=r.log.offset, rotated=chunk.rotated)
        obs.log = st.log
        obs.new_lines = chunk.lines
        obs.first_line_no = chunk.first_line_no
        return chunk.lines

    def _follow_metrics(self, r: WatchedRun, rd: RunReading, now: float) -> list[ProgressSample]:
        m = rd.metrics
        if m is None or not m.exists:
            return []
        if m.start != r.metrics_offset:    # truncated or replaced: the probe restarted at 0
            r.metrics_offset = m.start
        end = m.data.rfind(b"\n")
        if end < 0:
            return []
        out = []
        for raw in m.data[:end].split(b"\n"):
            sample = _metrics_sample(raw)
            if sample is not None:
                if sample.time_s is None:
                    sample.time_s = now
                out.append(sample)
        r.metrics_offset = m.start + end + 1
        return out

    def _follow_wandb(self, r: WatchedRun, rd: RunReading, st: RunState) -> list[ProgressSample]:
        if rd.wandb is None or not rd.wandb.exists or not rd.wandb_path:
            return []
        try:
            if r.wandb_reader is None or r.wandb_path != rd.wandb_path:
                r.wandb_reader = _wandb_reader(rd.wandb_path, r.wandb_offset if r.wandb_path in (None, rd.wandb_path) else 0)
                r.wandb_path = rd.wandb_path
            reader = r.wandb_reader
            if rd.wandb.start != reader.offset:
                return []    # the probe read from an offset the reader is not at; next tick asks right
            batch = reader.feed(rd.wandb.data, rd.wandb.start)
        except Exception as exc:  # noqa: BLE001 - a bad wandb file must not end the watch
            r.wandb_reader = None
            st.wandb = _merge_wandb(st.wandb, WandbInfo(mode="offline", offline_dir=rd.wandb_path,
                                                        state=f"unreadable: {exc}"[:120]))
            return []
        r.wandb_offset = reader.offset
        run_dir = rd.wandb_path.rsplit("/", 1)[0]
        info = WandbInfo(run_id=batch.run_id, mode="offline" if "/offline-run-" in rd.wandb_path else "online",
                         offline_dir=run_dir, state=batch.state)
        st.wandb = _merge_wandb(st.wandb, info)
        for p in batch.progress:
            p.source = "wandb"
        return list(batch.progress)

    def _guarded(self, what: str, r: WatchedRun, call: Callable[[], list[Finding]]) -> list[Finding]:
        """A detector bug costs that detector's findings for this tick, never the watch:
        the error is kept in `errors` (the CLI prints it once) and the cursor still moves."""
        try:
            return list(call())
        except Exception as exc:  # noqa: BLE001
            msg = f"{what} failed on run {r.record.run_id}: {type(exc).__name__}: {exc}"
            if msg not in self.errors:
                self.errors.append(msg)
            return []

    def _poll_wandb_api(self, r: WatchedRun, st: RunState) -> list[ProgressSample]:
        """An online run whose transaction log we cannot read (no wandb/ dir in the run
        dir): poll wandb.Api() on its own thread; the tick only takes what has arrived."""
        if r.wandb_path is not None or st.wandb is None or not st.wandb.url:
            return []
        if r.wandb_api is None:
            if not os.environ.get("WANDB_API_KEY") or r.wandb_api_failed:
                return []
            try:
                from controller.wandb_api import ApiPoller
                r.wandb_api = ApiPoller(st.wandb.url.split("://", 1)[-1].split("/", 1)[-1])
            except Exception:  # noqa: BLE001 - not a run URL we can poll
                r.wandb_api_failed = True
                return []
        r.wandb_api.poll_async()
        batch = r.wandb_api.latest()
        if batch.state and batch.state != "unknown":
            st.wandb = _merge_wandb(st.wandb, WandbInfo(state=batch.state))
        return list(batch.progress)

    def _add_progress(self, r: WatchedRun, samples: list[ProgressSample], now: float) -> list[ProgressSample]:
        """Merge samples from log/metrics/wandb into the bounded history (one per step)."""
        st = r.state
        fresh: list[ProgressSample] = []
        for s in sorted(samples, key=lambda x: x.step):
            last = st.progress[-1] if st.progress else None
            if last is not None and s.step == last.step:
                for f in fields(ProgressSample):
                    if getattr(last, f.name) is None and getattr(s, f.name) is not None:
                        setattr(last, f.name, getattr(s, f.name))
                continue
            if last is not None and s.step < last.step and any(p.step == s.step for p in st.progress[-50:]):
                continue   # an older step from a slower source: already known
            st.progress.append(s)
            fresh.append(s)
            if r.last_step is None or s.step > r.last_step:
                r.last_step = s.step
                st.last_progress_s = now
        if len(st.progress) > PROGRESS_HISTORY_LEN:
            del st.progress[:len(st.progress) - PROGRESS_HISTORY_LEN]
        return fresh

    def _host_sample_for(self, r: WatchedRun, reading: HostReading, rd: RunReading) -> HostSample:
        hs = replace(reading.host)
        cg = None
        if r.target.kind == "pct" and r.target.vmid is not None:
            ct = reading.containers.get(int(r.target.vmid))
            cg = ct.cgroup if ct else None
        else:
            cg = rd.cgroup
            if cg is not None and cg.path and cg.version:
                r.cgroup_seen = {"version": cg.version, "path": cg.path}
        if cg is not None:
            hs.oom_kill_count, hs.mem_peak_bytes, hs.mem_limit_bytes = cg.oom_kill_count, cg.peak_bytes, cg.limit_bytes
        return hs

    def _gpus_for(self, r: WatchedRun, reading: HostReading, rd: RunReading) -> list[GpuSample]:
        """The GPUs this run uses: those whose compute apps are its processes (NSpid maps
        a container's pids), else those its container uses, else every GPU seen."""
        gpus = [replace(g, users=[]) for g in reading.host.gpus]
        if not gpus:
            return []
        by_uuid = {g.uuid: g for g in gpus}
        tree = set(rd.tree_pids)
        vmid = int(r.target.vmid) if r.target.kind == "pct" and r.target.vmid is not None else None
        mine, ct = set(), set()
        for p in reading.host.gpu_processes:
            g = by_uuid.get(p.gpu_uuid)
            if g is None:
                continue
            ns = reading.gpu_pid_nspids.get(p.pid) or [p.pid]
            in_ct = vmid is not None and p.vmid == vmid
            if (vmid is None and p.pid in tree) or (in_ct and ns[-1] in tree):
                mine.add(p.gpu_uuid)
                continue                      # labelled by the run id below
            g.users.append(f"ct {p.vmid}" if p.vmid is not None else f"pid {p.pid}")
            if in_ct:
                ct.add(p.gpu_uuid)
        chosen = mine or ct
        for g in gpus:
            if g.uuid in mine:
                g.users = [r.record.run_id] + [u for u in g.users if not u.startswith("ct ")]
        return [g for g in gpus if g.uuid in chosen] if chosen else gpus

    def _record_findings(self, r: WatchedRun, found: list[Finding]) -> list[Finding]:
        if not found:
            return []
        found = [f if f.run_id else replace(f, run_id=r.record.run_id) for f in found]
        known = {f.key for f in r.state.findings}
        fresh = [f for f in found if f.key not in known]
        stored = self.store.add_findings(r.record.run_id, fresh)
        for f in fresh:
            r.state.findings.append(f)
            known.add(f.key)
        for f in stored:
            if self.on_finding is not None:
                try:
                    self.on_finding(r.state, f)
                except Exception:  # noqa: BLE001 - a notifier must not end the watch
                    pass
        return stored

    def _maybe_done(self, r: WatchedRun, rd: RunReading, now: float) -> None:
        """A run is done once it ended AND its files are read to the end (one more tick
        after the process ends, so the last lines -- the traceback -- are scanned)."""
        st = r.state
        if st.state not in ENDED_STATES:
            r.ended_ticks = 0
            return
        capped = [f for f in (rd.log, rd.metrics) if f is not None and f.exists
                  and (f.size_bytes or 0) > f.start + len(f.data)]
        if capped:
            return   # more bytes than one read: the rest comes next tick
        r.ended_ticks += 1
        if r.ended_ticks >= 2:
            r.done = True
            ended = st.state
            try:
                self.store.update_run(r.record.run_id, state=ended, exit_code=st.process.exit_code, ended_s=now)
            except Exception:  # noqa: BLE001 - the registry row is informational here
                pass

    # -- verdict -----------------------------------------------------------------------
    def exit_code(self) -> int:
        """The worst verdict over every watched run (0 healthy, 4 failure, 5 regression)."""
        findings = [f for r in self.runs for f in r.state.findings if f.kind != "unreachable"]
        return _detectors().verdict_exit_code(findings)


def _run_state(st: RunState, proc) -> str:
    if proc.state in ("exited", "zombie"):
        if proc.stopped_by:
            return "stopped"        # an operator's stop (dfctl stop, deploy --replace), whatever the code
        code = proc.exit_code
        if code == 0:
            return "finished"
        return "failed"
    if proc.state == "running":
        return "running" if st.progress or "first_step" in st.milestones else "starting"
    return "starting"


def _merge_wandb(old: WandbInfo | None, new: WandbInfo) -> WandbInfo:
    if old is None:
        return new
    out = replace(old)
    for f in fields(WandbInfo):
        v = getattr(new, f.name)
        if v is not None and not (f.name == "mode" and v == "unknown"):
            setattr(out, f.name, v)
    return out


_METRIC_FLOATS = tuple(f.name for f in fields(ProgressSample) if f.name not in ("step", "source"))


def _metrics_sample(raw: bytes) -> ProgressSample | None:
    """One metrics.jsonl line (README contract) -> ProgressSample; junk -> None."""
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        return None
    s = ProgressSample(step=int(step), source="metrics")
    for k in _METRIC_FLOATS:
        v = row.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(s, k, float(v))
    return s


def _wandb_reader(path: str, offset: int):
    """An OfflineRunReader fed with bytes the probe fetched (the file may be remote)."""
    from pathlib import PurePosixPath

    from controller import wandb_offline as wo

    reader = wo.OfflineRunReader.__new__(wo.OfflineRunReader)
    reader.path = PurePosixPath(path)
    reader.offset = 0
    reader.corrupt_blocks = 0
    reader._acc = wo._RunAccumulator()
    reader._acc.run_id = reader._run_id_from_name()
    reader.offset = offset
    return reader


def _default_transport(target: TargetConfig) -> Transport:
    try:
        from controller.transport.factory import open_host_transport
    except ImportError:
        from controller.transport.local import LocalTransport
        return LocalTransport()
    return open_host_transport(target)
