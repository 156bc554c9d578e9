"""One training job across several nodes: launch torchrun on each, stop them together, and
keep the job as ONE run in the registry. (Its deploy, the same release to every node at once,
is every deploy's: ship/nodes.py, strung together with the launch in ship/plan.py.)

What each node runs (launched by remote/launcher.py exactly as a single-node run: detached,
unbuffered, a wrapper whose pid is the process group, exit_code, a 0600 env file):

    python -u -m torch.distributed.run --nnodes N --nproc-per-node P
        --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id <job id>
        --rdzv-conf is_host=<1 on node 0>,join_timeout=<s> --local-addr <node addr>
        --max-restarts R --tee 3 --log-dir <run dir>/torchelastic -m <module> <args>

Why these flags:
- no --node-rank: the c10d rendezvous numbers the nodes itself, in the sorted order of their
  (--local-addr, pid) (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, the rank
  assignment over sorted(state.participants)); torchrun only warns that a --node-rank is
  ignored there (torch/distributed/run.py:866). So global rank 0 is on the node whose addr
  sorts first, which is node 0 when the addrs sort in node order (the rig's and local
  nodes' do); the registry's node_rank is the playbook's order.
- c10d rendezvous: node 0's torchrun hosts the TCPStore at the endpoint (is_host=1 says so
  explicitly: torchrun's own guess compares the endpoint with the machine's names and
  addresses, and two local nodes at 127.0.0.1 would both guess "host"); the others connect.
- --local-addr: the address the other nodes reach this node at; torchrun publishes it as the
  workers' MASTER_ADDR (its default, the FQDN, often does not resolve on the other nodes).
- --tee 3 with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:" : every worker line
  reaches train.log prefixed with its GLOBAL rank (`[rank3]: Traceback ...`), and a copy of
  each worker's stdout/stderr stays under <run dir>/torchelastic/ (torchrun's own layout).
  torchrun's agent messages (rendezvous, ChildFailedError) are unprefixed.

The registry layout is runstore's job contract: one job row (target_kind "job") and one
member row per node (run id <job>.node<i>), every node's run dir <workdir>/runs/<job id>.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping

from controller.errors import BadInputError, DfctlError
from controller.playbook import Playbook
from controller.records import ENDED_STATES
from controller.ship.launch import (
    LaunchedRun,
    exclusive_check,
    launch_run,
    launch_spec,
    make_run_id,
    refresh_states,
    stop_run,
)
from controller.ship.nodes import JobNode, node_error, node_label, on_each, same_target
from controller.store.runstore import JOB_KIND, RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import open_transport, target_label

LOG_PREFIX_TEMPLATE = "[rank${rank}]:"
"""torchrun's per-line prefix of worker output (its Template macros: rank = global rank)."""
TORCHELASTIC_LOG_DIR = "torchelastic"
"""Under the run dir: torchrun's per-attempt, per-rank copies of worker stdout/stderr (--tee)."""
ABORT_GRACE_S = 5.0
"""A job aborted during launch: the nodes already started get this long after SIGTERM."""


def job_label(pb: Playbook) -> str:
    return f"job: {len(pb.nodes)} nodes ({', '.join(node_label(n) for n in pb.nodes)})"


def torchrun_args(pb: Playbook, rank: int, job_id: str) -> list[str]:
    """The argv after `python -u -m torch.distributed.run` on node `rank` ({run_dir} is
    expanded on the target)."""
    d = pb.distributed
    rdzv_conf = f"is_host={1 if rank == 0 else 0},join_timeout={int(d.rdzv_timeout_s)}"
    return ["--nnodes", str(len(pb.nodes)), "--nproc-per-node", str(d.nproc_per_node),
            "--rdzv-backend", d.rdzv_backend, "--rdzv-endpoint", pb.rdzv_endpoint(), "--rdzv-id", job_id,
            "--rdzv-conf", rdzv_conf, "--local-addr", pb.nodes[rank].reach_addr,
            "--max-restarts", str(d.max_restarts), "--tee", "3",
            "--log-dir", "{run_dir}/" + TORCHELASTIC_LOG_DIR, "-m", pb.run.module, *pb.run.args]


def node_spec(n: JobNode, job_id: str, name: str, environ: Mapping[str, str] | None = None) -> dict:
    """launcher's input for one node: torchrun as the module, the exact run dir name."""
    spec = launch_spec(n.playbook, n.workdir, name, environ)
    spec.update(run_id=job_id, exact=True, module="torch.distributed.run",
                args=torchrun_args(n.playbook, n.rank, job_id))
    spec["env"] = {**spec["env"], **n.playbook.distributed.env,
                   "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": LOG_PREFIX_TEMPLATE}
    return spec


def register_job(store: RunStore, pb: Playbook, nodes: list[JobNode], name: str, *,
                 git_commit: str | None, git_dirty: bool | None) -> tuple[RunRecord, list[RunRecord]]:
    """The job row and its member rows, `launching`, BEFORE any launch exec (as
    launch.register_launch does for one run): a controller killed mid-launch leaves rows
    that name every node's run dir. The job id is unique in the registry (-2, -3...)."""
    base, k = make_run_id(name), 1
    registry_pb = pb.for_registry()
    now = time.time()
    while True:
        job_id = base if k == 1 else f"{base}-{k}"
        job = RunRecord(run_id=job_id, name=name, target_kind=JOB_KIND, target=job_label(pb),
                        git_commit=git_commit, git_dirty=git_dirty, playbook=registry_pb,
                        playbook_path=pb.source, started_s=now, state="launching")
        if store.add_run_if_new(job):
            break
        k += 1
    members = []
    for n in nodes:
        run_dir = f"{n.workdir}/runs/{job_id}"
        rec = RunRecord(run_id=f"{job_id}.node{n.rank}", name=name, target_kind=n.node.kind,
                        target=target_label(n.node), host=n.node.host, vmid=n.node.vmid, workdir=n.workdir,
                        run_dir=run_dir, log_path=f"{run_dir}/train.log", git_commit=git_commit,
                        git_dirty=git_dirty, playbook={**registry_pb, "target": dataclasses.asdict(n.node)},
                        playbook_path=pb.source, started_s=now, state="launching", job_id=job_id,
                        node_rank=n.rank)
        store.add_run(rec)
        members.append(rec)
    return job, members


def launch_job(store: RunStore, pb: Playbook, nodes: list[JobNode], *, name: str | None = None,
               git_commit: str | None = None, git_dirty: bool | None = None,
               environ: Mapping[str, str] | None = None) -> tuple[RunRecord, list[LaunchedRun]]:
    """Register the job, then launch torchrun on every node at once. A node whose launch
    fails aborts the job: the nodes that started are stopped (their process groups, as
    `dfctl stop` does), every row is left `failed`, and JobNodeError names the node."""
    run_name = name or pb.run.name
    job, members = register_job(store, pb, nodes, run_name, git_commit=git_commit, git_dirty=git_dirty)
    specs = {n.rank: node_spec(n, job.run_id, run_name, environ) for n in nodes}
    if pb.run.exclusive:
        for n in nodes:    # the target re-checks under the deploy lock, as a single run's launch does
            mine = [r for r in store.target_runs() if r.job_id != job.run_id and r.state not in ENDED_STATES
                    and same_target(r, n)]
            specs[n.rank]["exclusive"] = exclusive_check(mine, job.run_id)
    results = on_each(nodes, lambda n: launch_run(n.transport, n.playbook, n.workdir, spec=specs[n.rank]))
    failed = [(n, exc) for n, _, exc in results if exc is not None]
    launched = {n.rank: run for n, run, exc in results if exc is None}
    for rank, run in launched.items():
        store.update_run(members[rank].run_id, pid=run.pid, release_id=run.release_id, started_s=run.started_s,
                         run_dir=run.run_dir, log_path=run.log_path, state="running")
        members[rank].pid = run.pid
    if failed:
        _abort(store, job, members, nodes, launched)
        n, exc = failed[0]
        raise node_error(n, exc, "unreachable" if exc.exit_code == 3 else "launch failed")
    first = launched[0]
    store.update_run(job.run_id, release_id=first.release_id, started_s=min(r.started_s for r in launched.values()),
                     state="running")
    return store.get_run(job.run_id), [launched[n.rank] for n in nodes]


def _abort(store: RunStore, job: RunRecord, members: list[RunRecord], nodes: list[JobNode],
           launched: dict[int, LaunchedRun]) -> None:
    """Stop what started (all at once), mark every row failed."""
    started = [n for n in nodes if n.rank in launched]
    on_each(started, lambda n: stop_run(n.transport, n.node, members[n.rank], ABORT_GRACE_S,
                                      by=f"dfctl deploy: job aborted ({job.run_id})"))
    now = time.time()
    for rec in [job, *members]:
        store.update_run(rec.run_id, state="failed", ended_s=now)


def job_state(members: list[RunRecord]) -> str:
    """The job row's state from its members': running while any node runs; once all have
    ended, stopped if any was stopped (by dfctl), else failed if any failed, else finished."""
    states = {m.state for m in members}
    if not members:
        return "unknown"
    for live in ("running", "launching", "launched"):
        if live in states:
            return "running" if live == "running" else live
    if "unknown" in states:
        return "unknown"
    if "stopped" in states:
        return "stopped"
    if "failed" in states:
        return "failed"
    return "finished" if states == {"finished"} else "failed"


def settle_job(store: RunStore, job: RunRecord, members: list[RunRecord]) -> None:
    """Write the job row's state (and end time) from its members' current states."""
    state = job_state(members)
    if state == "unknown" or state == job.state:
        return
    ended = [m.ended_s for m in members if m.ended_s]
    store.update_run(job.run_id, state=state,
                     ended_s=(max(ended) if ended else time.time()) if state in ENDED_STATES else None)
    job.state = state


def stop_job(store: RunStore, job: RunRecord, grace_s: float, *, by: str = "dfctl stop",
             reach: Callable[[RunRecord], Transport] | None = None) -> list[tuple[RunRecord, dict | None, DfctlError | None]]:
    """Every node's process group stopped at once (SIGTERM, grace_s, SIGKILL), each member
    row `stopped` once nothing of it is left, then the job row. Per node: (member, stop
    reply or None, our error or None): a node that cannot be reached does not keep the
    others running."""
    members = store.job_members(job.run_id)
    todo = [m for m in members if m.pid is not None]     # an ended node's stop only confirms it
    transports = {m.run_id: (reach or (lambda rec: open_transport(target_of(rec))))(m) for m in todo}

    def one(m: RunRecord) -> dict:
        return stop_run(transports[m.run_id], target_of(m), m, grace_s, by=by)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(todo)), thread_name_prefix="job-stop") as pool:
        futures = {m.run_id: pool.submit(_catching, one, m) for m in todo}
    out: list[tuple[RunRecord, dict | None, DfctlError | None]] = []
    for m in todo:                          # the registry on this thread (SQLite)
        res, exc = futures[m.run_id].result()
        if res is not None and not res.get("left"):
            store.update_run(m.run_id, state="stopped", exit_code=res.get("exit_code"), ended_s=time.time())
        out.append((m, res, exc))
    if not any(exc or (res or {}).get("left") for _, res, exc in out):
        store.update_run(job.run_id, state="stopped", ended_s=time.time())
    return out


def _catching(fn: Callable[[RunRecord], dict], rec: RunRecord) -> tuple[dict | None, DfctlError | None]:
    try:
        return fn(rec), None
    except DfctlError as exc:
        return None, exc


def member_for_node(store: RunStore, job: RunRecord, node: int) -> RunRecord:
    """The job's member row of node rank `node` (`dfctl logs JOB --node i`)."""
    members = store.job_members(job.run_id)
    for m in members:
        if m.node_rank == node:
            return m
    raise BadInputError(f"run {job.run_id}: no node {node} (the job has nodes 0..{len(members) - 1})")


def refresh_with_jobs(store: RunStore, records: list[RunRecord],
                      open_for: Callable[[RunRecord], tuple[Any, Transport]]) -> list[tuple[str, str, list[RunRecord]]]:
    """launch.refresh_states for a listing that holds job rows: a job's members are read
    (one round trip per target, as any run), then the job row's state is set from theirs.
    A job whose node could not be read is listed with that node's error (its records)."""
    jobs = [r for r in records if r.is_job]
    members = {j.run_id: store.job_members(j.run_id) for j in jobs}
    singles = [r for r in records if not r.is_job]
    unreadable = refresh_states(store, singles + [m for ms in members.values() for m in ms], open_for)
    for j in jobs:
        settle_job(store, j, members[j.run_id])
        for _, message, recs in list(unreadable):
            unread = [m for m in members[j.run_id] if any(m is r for r in recs)]
            if unread:
                unreadable.append((f"{j.run_id} node {unread[0].node_rank}", message, [j]))
                break
    return unreadable
