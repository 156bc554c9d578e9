"""`dfctl deploy` and `dfctl stop` as ship/ does them: a single run is a job of one node.

A deploy of a [target] and of a [[nodes]] job take the same steps, in this order, over the
plan's nodes (ship/nodes.py): an exclusive run's live runs read on every node at once (a
deploy refused, exit 2, before anything is pushed while one lives, unless --replace); the
release pushed to every node at once; --replace's stops (a single run); the launch: one
registered run (launch.launch_registered) or torchrun on every node (job.launch_job). A
stop is the run's process group, or every node's at once; a prune keeps what a live run uses. The CLI passes a ShipReport
(a transfer's progress, a release in place, a run stopped) and renders what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from controller.errors import BadInputError, DfctlError
from controller.playbook import Playbook, RunConfig, TargetConfig
from controller.ship.bundle import Bundle, build_bundle, local_git_state
from controller.ship.deploy import DeployResult, PruneResult, plan_commands, prune_releases
from controller.ship.job import job_label, launch_job, stop_job, torchrun_args
from controller.ship.launch import (
    LaunchedRun,
    launch_command,
    launch_registered,
    launch_spec,
    make_run_id,
    replace_runs,
    stop_recorded,
)
from controller.ship.nodes import JobNode, live_on_nodes, open_nodes, push_to_nodes, refuse_if_live, single_node
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import open_transport, target_label


@dataclass
class ShipReport:
    """What the caller hears while a deploy runs (each hook optional, called on this thread
    except `progress`, which a job's nodes call from theirs)."""

    progress: Callable[[JobNode, int, int], None] | None = None    # bytes sent of a node's tar stream
    released: Callable[[JobNode, DeployResult], None] | None = None  # a node's release is in place
    stopped: Callable[[RunRecord, dict], None] | None = None         # --replace stopped a run


@dataclass
class ShipPlan:
    """One deploy: the playbook, its bundle and the nodes it goes to (one for a single run)."""

    playbook: Playbook
    root: Path
    bundle: Bundle
    nodes: list[JobNode]

    @property
    def is_job(self) -> bool:
        return self.playbook.is_job

    @property
    def label(self) -> str:
        """The target as messages and --json name it."""
        return job_label(self.playbook) if self.is_job else target_label(self.playbook.target)


@dataclass
class Shipped:
    """What a deploy did: the release per node, the runs --replace stopped, what it launched."""

    releases: list[DeployResult]
    stopped: list[dict] | None = None       # --replace (None: no run was live)
    job: RunRecord | None = None            # a job's row
    launched: list[LaunchedRun] = field(default_factory=list)   # per node, rank order


def plan_deploy(pb: Playbook, root: str | Path) -> ShipPlan:
    """The bundle built and every node reached (connections open lazily)."""
    nodes = open_nodes(pb, root) if pb.is_job else [single_node(pb, root)]
    return ShipPlan(pb, Path(root), build_bundle(root, pb.bundle), nodes)


def live_runs(plan: ShipPlan, store: RunStore, *, launch: bool) -> dict[int, list[RunRecord]]:
    """Per node, the runs a launch of this exclusive playbook would meet (none without a launch)."""
    if not launch or not plan.playbook.run.exclusive:
        return {n.rank: [] for n in plan.nodes}
    return live_on_nodes(plan.nodes, store)


@dataclass
class DryRun:
    """What a deploy would run, per node (nothing executed)."""

    commands: list[list[str]]               # per node: the exact commands
    torchrun: list[list[str]] | None        # a job: per node, what torchrun runs


def dry_run(plan: ShipPlan, *, launch: bool) -> DryRun:
    """The exact commands of each node's deploy (and launch: always shown for a job)."""
    if not plan.is_job:
        n = plan.nodes[0]
        cmds = plan_commands(n.transport, n.workdir, plan.bundle)
        return DryRun([cmds + [launch_command(n.transport, n.node)] if launch else cmds], None)
    job_id = make_run_id(plan.playbook.run.name)
    return DryRun([plan_commands(n.transport, n.workdir, plan.bundle) + [launch_command(n.transport, n.node)]
                   for n in plan.nodes],
                  [["python", "-u", "-m", "torch.distributed.run", *torchrun_args(plan.playbook, n.rank, job_id)]
                   for n in plan.nodes])


def ship(plan: ShipPlan, store: RunStore, *, launch: bool = True, replace: bool = False, name: str | None = None,
         report: ShipReport | None = None, live: dict[int, list[RunRecord]] | None = None) -> Shipped:
    """Deploy the plan's release to every node and (unless launch=False) launch the run.
    `live`: the live runs already read (live_runs), else read here."""
    report = report or ShipReport()
    pb = plan.playbook
    if replace and plan.is_job:
        raise BadInputError("--replace: not for a [[nodes]] job yet", hint="dfctl stop JOB first")
    if live is None:
        live = live_runs(plan, store, launch=launch)
    if not replace:
        refuse_if_live(plan.nodes, live)
    releases = push_to_nodes(plan.nodes, plan.bundle, report.progress)
    if report.released is not None:
        for n, r in zip(plan.nodes, releases):
            report.released(n, r)
    out = Shipped(releases)
    if not launch:
        return out
    commit, dirty = local_git_state(plan.root)
    if plan.is_job:
        out.job, out.launched = launch_job(store, pb, plan.nodes, name=name, git_commit=commit, git_dirty=dirty)
        return out
    n = plan.nodes[0]
    spec = launch_spec(pb, n.workdir, name)
    if live.get(n.rank):
        out.stopped = replace_runs(store, n.transport, live[n.rank], pb.run.stop_grace_s, successor=spec["run_id"],
                                   on_stopped=report.stopped)
    out.launched = [launch_registered(store, n.transport, pb, n.workdir, spec, git_commit=commit, git_dirty=dirty)]
    return out


def prune(pb: Playbook, root: str | Path, store: RunStore, *, keep: int, dry_run: bool = False) -> PruneResult:
    """Old releases of the playbook's target removed (a job's: pb.for_node first): never
    `current`, never one a live run uses -- the live runs read as a deploy reads them."""
    n = single_node(pb, root)
    live = live_on_nodes([n], store)[n.rank]
    return prune_releases(n.transport, n.workdir, keep=keep, dry_run=dry_run,
                          live_release_ids=[r.release_id for r in live if r.release_id])


# -- stop --------------------------------------------------------------------------------------
def open_for(rec: RunRecord) -> tuple[TargetConfig, Transport]:
    """The target a registry row names, and a transport to it."""
    target = target_of(rec)
    return target, open_transport(target)


def grace_of(rec: RunRecord, grace_s: float | None) -> float:
    """Seconds between SIGTERM and SIGKILL: as given, else the grace the run's playbook gave
    it (run.stop_grace_s: the trainer checkpoints in it), else RunConfig's default."""
    if grace_s is not None:
        return grace_s
    return float(((rec.playbook or {}).get("run") or {}).get("stop_grace_s") or RunConfig().stop_grace_s)


@dataclass
class Stopped:
    """A stop's outcome per node: (member row, stop reply or None, our error or None). A
    single run is one row whose error, if any, was raised instead."""

    run: RunRecord
    nodes: list[tuple[RunRecord, dict | None, DfctlError | None]]

    @property
    def left(self) -> list[tuple[RunRecord, list[Any]]]:
        """Rows with processes still alive after SIGKILL, and their pids."""
        return [(m, res["left"]) for m, res, _ in self.nodes if res and res.get("left")]

    @property
    def unreached(self) -> list[tuple[RunRecord, DfctlError]]:
        return [(m, exc) for m, _, exc in self.nodes if exc is not None]


def stop(store: RunStore, rec: RunRecord, grace_s: float | None = None, *, by: str = "dfctl stop") -> Stopped:
    """SIGTERM the run's process group (a job: every node's at once), wait, SIGKILL what is
    left; the registry rows `stopped` once nothing is left. A single run's unreachable target
    raises; a job's unreachable node is reported and the others are stopped all the same."""
    grace = grace_of(rec, grace_s)
    if rec.is_job:
        return Stopped(rec, stop_job(store, rec, grace, by=by, reach=lambda m: open_for(m)[1]))
    _, transport = open_for(rec)
    return Stopped(rec, [(rec, stop_recorded(store, transport, rec, grace, by=by), None)])
