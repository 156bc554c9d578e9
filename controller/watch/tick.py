"""Watch: the composition of a tick -- one HostPoller per host, one RunFollower per run.

A tick groups the unfinished runs by host, asks every host at once (threads, one round
trip each, cursors in the requests), and hands each host's reading to its runs'
followers. A host still busy with an earlier probe gets no second one: its answer is
applied when it comes (it carries the cursors it was sent with), and meanwhile a slow
host costs the tick at most tick_wait_s -- the other hosts are reported on time. An
unreachable host never crashes a tick: its runs turn `unreachable` with a finding, and
its poller retries with back-off while the others carry on.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from controller import judge
from controller.records import Finding, HostSample, JobState, RunState, TickObservation
from controller.ship.stacks import dump_document
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.watch.auto_stacks import AutoStacks
from controller.watch.follower import FindingHook, LogBytesHook, ProgressHook, RunFollower
from controller.watch.job_follower import JobFollower
from controller.watch.poller import HostHealth, HostPoller, TransportFor, default_transport, host_key
from controller.watch.settings import WatchSettings, resolve_settings

Waiter = Callable[[float], Any]
"""wait(timeout_s): block up to timeout_s; a truthy answer (threading.Event.wait's, once
set) means stop. A falsy answer before timeout_s is a wake-up (`logs -f`: the log's
directory changed): the next tick goes at once. The default sleeps and never stops."""

EARLY_WAKE_S = 0.001
"""A wait that returns more than this before its slot ended woke early (not a timer's slack)."""


def _sleep(timeout_s: float) -> bool:
    time.sleep(timeout_s)
    return False


def ticks_every(interval_s: float, *, clock: Callable[[], float] = time.monotonic,
                wait: Waiter | None = None) -> Iterator[int]:
    """Yield 0, 1, 2, ... one per tick, `interval_s` apart on a fixed schedule.

    Why a schedule and not "sleep interval_s after the work": the work's own time does not
    push later ticks back (no drift). A tick that overran its slot is followed at once by the
    next, re-anchored to now -- not by a full wait, and not by a burst of catch-up ticks.
    A wait woken early (an event, not its timeout) starts the next tick at once, and the
    schedule goes on from there. `clock` and `wait` are injectable so a test drives this
    with a fake clock and an event."""
    wait = wait or _sleep
    due = clock()
    n = 0
    while True:
        yield n
        n += 1
        due += interval_s
        left = due - clock()
        if left <= 0:
            due = clock()           # overran: go now, schedule from here
            left = 0.0
        if wait(left):              # wait(0) still hears a stop
            return
        if clock() < due - EARLY_WAKE_S:
            due = clock()           # woken early: this tick now, the next a full interval on


@dataclass
class TickReport:
    """What one tick produced."""

    time_s: float
    states: list[RunState]
    hosts: list[HostSample]
    new_findings: list[Finding] = field(default_factory=list)
    observations: list[TickObservation] = field(default_factory=list)
    duration_s: float = 0.0
    jobs: list[JobState] = field(default_factory=list)


class Watch:
    """Watches runs from the registry; call tick() every settings.interval_s (the CLI
    owns the loop). `settings` or the WatchSettings fields as keywords (interval_s, ...)."""

    def __init__(self, records: Iterable[RunRecord], store: RunStore, *, settings: WatchSettings | None = None,
                 transport_for: TransportFor | None = None, on_finding: FindingHook | None = None,
                 on_progress: ProgressHook | None = None, on_log_bytes: LogBytesHook | None = None,
                 clock: Callable[[], float] = time.time, **setting_overrides: Any):
        self.store, self.clock = store, clock
        self.errors: list[str] = []               # internal errors survived (detector bugs)
        self.on_tick: Callable[[TickReport], None] | None = None   # after every tick (history)
        records = list(records)
        job_members = {rec.run_id: store.job_members(rec.run_id) for rec in records if rec.target_kind == "job"}
        runs = [m for rec in records for m in (job_members[rec.run_id] if rec.target_kind == "job" else [rec])]
        self._hooks: dict[str, Any] = {"on_finding": on_finding, "on_progress": on_progress, "on_log_bytes": on_log_bytes}
        self._transport_for = transport_for or default_transport
        self.runs = [RunFollower(rec, target_of(rec), store, errors=self.errors, **self._hooks) for rec in runs]
        self.settings = settings or resolve_settings([r.cfg for r in self.runs], **setting_overrides)
        # a job: its members are followed as runs above (no extra probe); the job folds them
        by_id = {r.record.run_id: r for r in self.runs}
        for r in self.runs:
            if r.record.job_id is not None and r.record.node_rank is not None:
                r.state.name = f"{r.record.name} node{r.record.node_rank}"   # rows and lines say which node
        self.jobs = [JobFollower(rec, [by_id[m.run_id] for m in job_members[rec.run_id]], store,
                                 interval_s=self.settings.interval_s)
                     for rec in records if rec.target_kind == "job"]
        self.on_job_finding = on_finding
        self.pollers: dict[str, HostPoller] = {}
        for r in self.runs:
            key = host_key(r.target)
            if key not in self.pollers:
                self.pollers[key] = HostPoller(key, r.target, self.settings, self._transport_for, clock)
        self._pending: dict[str, tuple[Future, list[RunFollower], float]] = {}
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(self.pollers))))
        self.auto_stacks = AutoStacks(deadline_s=self.settings.auto_stacks_deadline_s) \
            if self.settings.auto_stacks else None

    def add_run(self, record: RunRecord) -> RunFollower:
        """Follow one more run from the next tick on (a resume launched by the watch itself,
        controller/act/executor.py), with the watch's hooks and settings; its host gets a
        poller if it has none."""
        r = RunFollower(record, target_of(record), self.store, errors=self.errors, **self._hooks)
        self.runs.append(r)
        key = host_key(r.target)
        if key not in self.pollers:
            self.pollers[key] = HostPoller(key, r.target, self.settings, self._transport_for, self.clock)
        return r

    # -- what the faces read ---------------------------------------------------------
    @property
    def states(self) -> list[RunState]:
        return [r.state for r in self.runs]

    @property
    def hosts(self) -> dict[str, HostSample]:
        return {k: p.sample for k, p in self.pollers.items() if p.sample is not None}

    @property
    def health(self) -> dict[str, HostHealth]:
        return {k: p.health for k, p in self.pollers.items()}

    @property
    def round_trips(self) -> dict[str, int]:
        return {k: p.round_trips for k, p in self.pollers.items()}

    @property
    def agent_hosts(self) -> list[str]:
        """Hosts currently probed through a live agent (the rest: one-shot per tick)."""
        return [k for k, p in self.pollers.items() if p.has_agent]

    @property
    def tick_wait_s(self) -> float:
        return self.settings.tick_wait_s

    @property
    def all_done(self) -> bool:
        return all(r.done for r in self.runs)

    def set_log_bytes_hook(self, hook: LogBytesHook | None) -> None:
        for r in self.runs:
            r.on_log_bytes = hook

    on_log_bytes = property(lambda self: self.runs[0].on_log_bytes if self.runs else None, set_log_bytes_hook)

    def ticks(self, *, clock: Callable[[], float] = time.monotonic, wait: Waiter | None = None) -> Iterator[int]:
        """The loops' pacing: ticks_every(settings.interval_s) -- the CLI loops call tick()
        once per item instead of sleeping themselves."""
        return ticks_every(self.settings.interval_s, clock=clock, wait=wait)

    # -- the tick ----------------------------------------------------------------------
    def tick(self) -> TickReport:
        t0 = time.monotonic()
        self._take_dumps()
        for key, runs in self._unfinished_by_host().items():
            if key not in self._pending:
                pythons: dict[int, str] = {}
                for r in runs:
                    if r.vmid is not None:
                        pythons.setdefault(r.vmid, r.target.python)
                fut = self._pool.submit(self.pollers[key].poll, [r.request() for r in runs], pythons)
                self._pending[key] = (fut, runs, time.monotonic())
        report = TickReport(time_s=0.0, states=self.states, hosts=[])
        for key in list(self._pending):
            fut, runs, submitted = self._pending[key]
            poller = self.pollers[key]
            # a host never reached yet gets its whole connect/probe time (first SSH connect,
            # ProxyJump, agent start-up) on its FIRST try only; after that a slow answer
            # waits for the next tick, so a host dead from the start cannot stall every tick
            wait_s = self.settings.probe_timeout_s if poller.health.first_try else self.settings.tick_wait_s
            try:
                reading, error = fut.result(timeout=max(0.0, t0 + wait_s - time.monotonic()))
            except FutureTimeout:
                poller.timed_out(time.monotonic() - submitted)
                report.new_findings += self._down(poller, runs, poller.sample.error if poller.sample else None)
                continue
            del self._pending[key]
            if reading is None:
                report.new_findings += self._down(poller, runs, error)
                continue
            now = self.clock()
            for r in runs:
                obs, new = r.apply(reading, now)
                report.observations.append(obs)
                report.new_findings += new
                if self.auto_stacks is not None and r.record.pid is not None:
                    for f in new:
                        self.auto_stacks.consider(r.record, f)
        report.time_s, report.hosts = self.clock(), list(self.hosts.values())
        report.new_findings += self._observe_jobs(report)
        report.duration_s = time.monotonic() - t0
        if self.on_tick is not None:
            try:
                self.on_tick(report)
            except Exception as exc:  # noqa: BLE001 - a side record never ends the watch
                self.errors.append(f"on_tick: {exc}")
        return report

    @property
    def job_states(self) -> list[JobState]:
        return [j.state for j in self.jobs]

    def _observe_jobs(self, report: TickReport) -> list[Finding]:
        if not self.jobs:
            return []
        seen = {o.run_id: o for o in report.observations}
        new: list[Finding] = []
        for j in self.jobs:
            try:
                found = j.observe(seen, report.time_s)
            except Exception as exc:  # noqa: BLE001 - a reader bug costs the job layer, never the watch
                msg = f"job {j.record.run_id}: {type(exc).__name__}: {exc}"
                if msg not in self.errors:
                    self.errors.append(msg)
                continue
            new += found
            if self.on_job_finding is not None:
                for f in found:
                    try:
                        self.on_job_finding(job_as_run_state(j.state), f)
                    except Exception:  # noqa: BLE001 - a notifier must not end the watch
                        pass
        report.jobs = self.job_states
        return new

    def _take_dumps(self) -> None:
        """Automatic stack dumps finished since the last tick (never waited for): each
        finding's evidence gains its run's thread frames, and the dump is kept."""
        if self.auto_stacks is None:
            return
        for done in self.auto_stacks.finished():
            f = done.finding
            follower = next((r for r in self.runs if r.record.run_id == f.run_id), None)
            if follower is None:
                continue
            follower.state.findings = [f if k.key == f.key else k for k in follower.state.findings]
            try:
                self.store.update_finding_evidence(follower.record.run_id, f)
                if done.dump is not None:
                    self.store.add_stacks(follower.record.run_id, done.dump.taken_s, dump_document(done.dump))
            except Exception as exc:  # noqa: BLE001 - a side record never ends the watch
                self.errors.append(f"stack dump record: {exc}")

    def _unfinished_by_host(self) -> dict[str, list[RunFollower]]:
        by_host: dict[str, list[RunFollower]] = {}
        for r in self.runs:
            if not r.done:
                by_host.setdefault(host_key(r.target), []).append(r)
        return by_host

    def _down(self, poller: HostPoller, runs: list[RunFollower], error: str | None) -> list[Finding]:
        now = self.clock()
        since = poller.health.down_since_s or now
        return [f for r in runs for f in r.host_down(poller.host, poller.sample, error, since, now)]

    def exit_code(self) -> int:
        """The worst verdict over every watched run and job (0 healthy, 4 failure, 5 regression)."""
        return judge.verdict_exit_code([f for r in self.runs for f in r.state.findings if f.kind != "unreachable"]
                                           + [f for j in self.jobs for f in j.state.findings])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.auto_stacks is not None:
            self.auto_stacks.close()
        for p in self.pollers.values():
            p.close()


def job_as_run_state(js: JobState) -> RunState:
    """A job's face where a run's is expected (the --notify document, a finding line)."""
    return RunState(run_id=js.job_id, name=js.name, target=js.target, release_id=js.release_id,
                    started_s=js.started_s, state=js.state, findings=list(js.findings))
