"""The nodes a deploy reaches, and the two steps every deploy takes on all of them at once:
the live-run check of an exclusive run, then the push of the release.

A single run is a deploy of one node (single_node: its [target]); a [[nodes]] job, of each
of its nodes (open_nodes). Both go through the same steps here (ship/plan.py strings them
together); only messages differ: a job's node is named in its errors (`nodes[1] (...)`),
a single run's error is its target's own, as it always was.

The registry is read and written on the calling thread only (SQLite connections stay on
theirs); what a node's thread needs from it is read before (attach's pid namespaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from controller.errors import DfctlError, JobNodeError, RunConflictError
from controller.playbook import Playbook, TargetConfig
from controller.records import ENDED_STATES
from controller.ship.bundle import Bundle
from controller.ship.deploy import DeployResult, deploy_bundle, resolve_workdir
from controller.ship.launch import attached_pid_ns, conflict_error, record_statuses, runs_status, target_identity
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import open_transport, target_label


@dataclass
class JobNode:
    """One node of a deploy as deploy, launch and stop reach it: a job's node, or a single
    run's one target (in_job False)."""

    rank: int
    node: TargetConfig            # a job's NodeConfig, or a single run's [target]
    playbook: Playbook            # the playbook with this node as its target
    transport: Transport
    workdir: str
    in_job: bool = True

    @property
    def where(self) -> str:
        """How messages name this node: `nodes[1] (pct 200 on pve2)`; a single run: its target."""
        return f"nodes[{self.rank}] ({node_label(self.node)})" if self.in_job else target_label(self.node)


def node_label(node: TargetConfig) -> str:
    """A node's target label; local nodes by workdir (a job may have several)."""
    label = target_label(node)
    return f"{label}:{node.workdir}" if node.kind == "local" else label


def open_nodes(pb: Playbook, project_root: str | Path) -> list[JobNode]:
    """Each node's transport (connections open lazily) and absolute workdir."""
    return [JobNode(i, node, pb.for_node(i), open_transport(node), resolve_workdir(node, project_root))
            for i, node in enumerate(pb.nodes)]


def single_node(pb: Playbook, project_root: str | Path) -> JobNode:
    """A single run's one node: its [target]."""
    return JobNode(0, pb.target, pb, open_transport(pb.target), resolve_workdir(pb.target, project_root),
                   in_job=False)


def on_each(nodes: list[JobNode], fn: Callable[[JobNode], Any]) -> list[tuple[JobNode, Any, DfctlError | None]]:
    """fn on every node at once (one thread each; one node: on this thread); (node, result,
    our error) per node, in rank order."""
    def one(n: JobNode) -> tuple[JobNode, Any, DfctlError | None]:
        try:
            return n, fn(n), None
        except DfctlError as exc:
            return n, None, exc

    if len(nodes) == 1:
        return [one(nodes[0])]
    from concurrent.futures import ThreadPoolExecutor  # (a single run's deploy needs no thread)

    with ThreadPoolExecutor(max_workers=max(1, len(nodes)), thread_name_prefix="job-node") as pool:
        return list(pool.map(one, nodes))


def node_error(n: JobNode, exc: DfctlError, what: str) -> DfctlError:
    """A job node's error, named by the node; a live-run conflict stays bad input (exit 2).
    A single run's error is raised as it came."""
    if not n.in_job:
        return exc
    message = f"{n.where}: {what}: {exc.message}"
    if isinstance(exc, RunConflictError):
        return RunConflictError(message, hint=exc.hint)
    return JobNodeError(message, hint=exc.hint)


def raise_first(results: list[tuple[JobNode, Any, DfctlError | None]], what: str) -> None:
    """The first failing node (by rank), named: `what` failed there, or it was unreachable."""
    for n, _, exc in results:
        if exc is not None:
            raise node_error(n, exc, "unreachable" if exc.exit_code == 3 else what)


def same_target(rec: RunRecord, n: JobNode) -> bool:
    return target_identity(target_of(rec)) == target_identity(n.node)


def live_on_nodes(nodes: list[JobNode], store: RunStore) -> dict[int, list[RunRecord]]:
    """Each node's live runs: the registry's runs of that machine or container not known to
    have ended, asked about on every node at once (one exec each), what was seen recorded
    (a run that ended unseen is recorded so, and does not count). Why deploy asks: a second
    training launched into a container whose GPUs the first still holds ends in a CUDA OOM,
    or halves both runs."""
    runs = store.target_runs()
    known = {n.rank: [r for r in runs if r.state not in ENDED_STATES and same_target(r, n)] for n in nodes}
    pid_ns = attached_pid_ns(store, [r for rs in known.values() for r in rs])
    asked = [n for n in nodes if known[n.rank]]
    results = on_each(asked, lambda n: runs_status(n.transport, n.node, known[n.rank], pid_ns_of=pid_ns))
    raise_first(results, "status read failed")
    for n, statuses, _ in results:
        record_statuses(store, known[n.rank], statuses)
    return {n.rank: [r for r in known[n.rank] if r.state == "running"] for n in nodes}


def refuse_if_live(nodes: list[JobNode], live: dict[int, list[RunRecord]]) -> None:
    """An exclusive run's deploy while another run of a node lives: exit 2, nothing changed."""
    for n in nodes:
        if live.get(n.rank):
            raise node_error(n, conflict_error(n.node, [(r.run_id, r.pid) for r in live[n.rank]]),
                             "deploy refused")


def push_to_nodes(nodes: list[JobNode], bundle: Bundle,
                  on_progress: Callable[[JobNode, int, int], None] | None = None) -> list[DeployResult]:
    """The release on every node at once (ship/deploy.py: probe, one tar stream, switch);
    the first failing node (by rank) is raised, naming it."""
    def one(n: JobNode) -> DeployResult:
        progress = (lambda done, total: on_progress(n, done, total)) if on_progress else None
        return deploy_bundle(n.transport, n.workdir, bundle, on_progress=progress)

    results = on_each(nodes, one)
    raise_first(results, "deploy failed")
    return [res for _, res, _ in results]


def deploy_nodes(nodes: list[JobNode], bundle: Bundle, store: RunStore, *, check_live: bool,
                 on_progress: Callable[[JobNode, int, int], None] | None = None) -> list[DeployResult]:
    """Every node reached, checked for live runs (an exclusive run: refused before anything is
    pushed while one lives) and given the release, all at once. Nothing is launched here."""
    if check_live:
        refuse_if_live(nodes, live_on_nodes(nodes, store))
    return push_to_nodes(nodes, bundle, on_progress)
