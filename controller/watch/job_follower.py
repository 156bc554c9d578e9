"""JobFollower: a multi-node job as one watched thing -- its members' states folded into a JobState.

Each node of a job is a member row followed by its own RunFollower, exactly like a single
run (its cursor, findings and history under its own id); the Watch probes hosts as
always, so a job adds no probe. After each tick the job's follower reads what that tick
brought for its members: every new log line goes through that node's RankEventReader
(controller/judge/ranks.py), each probe's clock offset is kept, and the fold gives
the job's aggregate tok/s, its state, torchrun's restarts and -- once ranks fail -- the
first failure with the rest as its consequences. That finding is recorded once, under
the job's own run id, once every node is over (ended, its torchrun gave up, or each of
its ranks has shown its failure), so the rank it names is judged on all the evidence,
not the first node's.
"""

from __future__ import annotations

from controller import judge
from controller.judge.first_failure import failure_finding
from controller.judge.ranks import NodeClock, RankEvent, RankEventReader, RestartSeen, first_failure
from controller.records import (
    ENDED_STATES,
    Finding,
    FirstFailure,
    JobNode,
    JobState,
    RankOutcome,
    RestartEvent,
    RunState,
    RunStatus,
    TickObservation,
)
from controller.store.runstore import RunRecord, RunStore
from controller.watch.follower import RunFollower

MAX_EVENTS = 2000          # failure evidence kept per job (a crash loop must not grow without bound)


class JobFollower:
    """One job: its member followers (owned by the Watch), one reader per node."""

    def __init__(self, job: RunRecord, members: list[RunFollower], store: RunStore, *, interval_s: float):
        self.record, self.members, self.store, self.interval_s = job, members, store, interval_s
        self.readers = {self.node_of(m): RankEventReader(self.node_of(m)) for m in members}
        self.events: list[RankEvent] = []
        self.clocks: dict[int, NodeClock] = {}
        dist = (job.playbook or {}).get("distributed") or {}
        nproc = dist.get("nproc_per_node")
        self.world_size = int(nproc) * len(members) if isinstance(nproc, int) else None
        restarts = dist.get("max_restarts")
        self.max_restarts = int(restarts) if isinstance(restarts, int) else 0
        self.state = JobState(job_id=job.run_id, name=job.name, target=job.target, release_id=job.release_id,
                              started_s=job.started_s, state="starting")
        self.state.findings = store.findings(job.run_id)
        self.judged = any(f.kind in judge.FAILURE_KINDS for f in self.state.findings)
        self.ended_recorded = False
        self.dirty = False

    @staticmethod
    def node_of(m: RunFollower) -> int:
        return m.record.node_rank if m.record.node_rank is not None else 0

    @property
    def restarts(self) -> list[RestartSeen]:
        return [r for reader in self.readers.values() for r in reader.restarts]

    def observe(self, observations: dict[str, TickObservation], now: float) -> list[Finding]:
        """Fold this tick's member observations; the job's new findings (recorded)."""
        for m in self.members:
            obs = observations.get(m.record.run_id)
            if obs is None:
                continue
            node = self.node_of(m)
            hs = obs.host
            if hs is not None and hs.clock_offset_s is not None:
                self.clocks[node] = NodeClock(hs.clock_offset_s, hs.clock_uncertainty_s or 0.0)
            if obs.new_lines:
                new = self.readers[node].feed(obs.new_lines, obs.first_line_no, now, self.interval_s)
                self.events += new
                self.dirty = self.dirty or bool(new) or len(self.restarts) != len(self.state.restarts)
        del self.events[:-MAX_EVENTS]
        self.fold(now)
        found = self.judge(now)
        if not self.ended_recorded and all(m.done for m in self.members):
            self.ended_recorded = True     # the job row says how the job ended, as a run's row does
            try:
                self.store.update_run(self.record.run_id, state=self.state.state, ended_s=now)
            except Exception:  # noqa: BLE001 - the registry row is informational here
                pass
        return found

    def fold(self, now: float) -> None:
        st = self.state
        st.nodes = [self.node_row(m) for m in self.members]
        figures = [n.tok_per_s for n in st.nodes if n.tok_per_s is not None]
        st.tok_per_s = sum(figures) if figures else None
        steps = [(m.state.progress[-1].step, m.state.progress[-1].loss) for m in self.members if m.state.progress]
        if steps:
            st.step, st.loss = max(steps, key=lambda s: s[0])
        st.state = job_state([m.state for m in self.members])
        st.restarts = [RestartEvent(node_rank=r.node, time_s=self.controller_time(r.node, r.time_s, r.time_source),
                                    attempts_left=r.attempts_left, max_restarts=r.max_restarts, line=r.text)
                       for r in sorted(self.restarts, key=lambda r: (r.node, r.line))]
        if self.dirty:                       # only new evidence changes the answer
            nproc = self.world_size // len(self.members) if self.world_size and self.members else None
            st.first_failure = first_failure(self.events, self.clocks, self.world_size, self.restarts, nproc,
                                             {node: r.ranks_seen for node, r in self.readers.items()})
            self.dirty = False
        st.updated_s = now
        st.exit_code = self.exit_code()

    def controller_time(self, node: int, t: float, source: str) -> float:
        if source == "seen":
            return t
        return t - (self.clocks.get(node) or NodeClock()).offset_s

    def node_row(self, m: RunFollower) -> JobNode:
        s = m.state
        last = s.progress[-1] if s.progress else None
        clock = self.clocks.get(self.node_of(m))
        return JobNode(node_rank=self.node_of(m), run_id=m.record.run_id, target=m.record.target, host=m.record.host,
                       vmid=m.record.vmid, state=s.state, process=s.process, gpus=s.gpus,
                       step=last.step if last else None, tok_per_s=last.tok_per_s if last else None,
                       last_line=next((x for x in reversed(s.log_tail) if x.strip()), None), findings=list(s.findings),
                       clock_offset_s=clock.offset_s if clock else None,
                       clock_uncertainty_s=clock.uncertainty_s if clock else None)

    def judge(self, now: float) -> list[Finding]:
        """The first-failure finding, once every node is over -- ended, its torchrun gave up
        (ChildFailedError), or (no max_restarts) each of its ranks has shown its failure --
        so the rank named is judged on every node's evidence, and a failure torchrun
        restarts the workers after is not the job's end."""
        ff = self.state.first_failure
        if self.judged or ff is None:
            return []
        over = set(ff.agents_failed)
        if self.max_restarts == 0:       # with restarts left, failed ranks may be restarted: wait for the agents
            over |= self.nodes_all_failed(ff)
        if not all(m.state.state in ENDED_STATES or self.node_of(m) in over for m in self.members):
            return []
        if all(m.state.state in ("finished", "stopped") for m in self.members):
            return []              # a failure torchrun recovered from (a restart), or an operator's stop
        if any(m.state.process.stopped_by for m in self.members):
            return []              # `dfctl stop` (its stop_request is read before the ranks' SIGTERM lines)
        self.judged = True
        f = failure_finding(ff, self.node_labels(), self.clocks, self.record.run_id, now,
                            restarts=len(self.state.restarts))
        stored = self.store.add_findings(self.record.run_id, [f])
        self.state.findings.extend(stored)
        self.state.exit_code = self.exit_code()
        return stored

    def nodes_all_failed(self, ff: FirstFailure) -> set[int]:
        """Nodes every one of whose ranks (nproc_per_node) has shown its failure: nothing
        earlier can still come from them (a rank's log is in order)."""
        if self.world_size is None or not self.members:
            return set()
        nproc = self.world_size // len(self.members)
        seen: dict[int, set] = {}
        items: list[FirstFailure | RankOutcome] = [ff, *ff.consequences]
        for o in items:
            who = o.rank if o.rank is not None else (None, o.local_rank)
            if who != (None, None):
                seen.setdefault(o.node, set()).add(who)
        return {n for n, ranks in seen.items() if len(ranks) >= nproc}

    def node_labels(self) -> dict[int, str]:
        return {self.node_of(m): m.record.target for m in self.members}

    def exit_code(self) -> int:
        found = [f for f in self.state.findings]
        found += [f for m in self.members for f in m.state.findings if f.kind != "unreachable"]
        return judge.verdict_exit_code(found)

    @property
    def done(self) -> bool:
        return all(m.done for m in self.members)


def job_state(states: list[RunState]) -> RunStatus:
    """The job's one state: failed if any node failed, running while any node runs,
    finished only when every node finished."""
    names: list[RunStatus] = [s.state for s in states]
    if not names:
        return "unknown"
    if "failed" in names:
        return "failed"
    if all(n in ENDED_STATES for n in names):
        return "finished" if all(n == "finished" for n in names) else (
            "stopped" if "stopped" in names else names[0])
    if "running" in names:
        return "running"
    if "unreachable" in names:
        return "unreachable"
    return "starting"
