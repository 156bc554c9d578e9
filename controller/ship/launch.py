"""Start a run detached and unbuffered on a target, and find out later how it is doing.

The target side is controller/remote/launcher.py, sent as `python -c <source>` with its JSON
input (secrets included) on stdin: one exec per launch, nothing installed on the target,
no secret in any argv. The run directory layout (the watcher reads it):

    <workdir>/runs/<name>-<UTC yyyymmddTHHMMSSZ>[-N]/
        train.log    stdout+stderr of the trainer (python -u, PYTHONUNBUFFERED=1)
        pid          the wrapper's pid = session leader = process group id
        exit_code    written by the wrapper when the trainer ends (128+N for signal N)
        launch.json  run_id, name, argv, release_id, started_s, oom_kill_at_launch, env names
        env          0600, the run's environment incl. secrets; deleted once the wrapper read it
        metrics.jsonl, wandb/   written by the trainer (it gets --run-dir via {run_dir})
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from controller import remote
from controller.errors import (
    AlreadyResumedError,
    ContainerStateError,
    DeployError,
    DfctlError,
    HostKeyError,
    LockedError,
    RemoteCommandError,
    RunConflictError,
    StaleRunError,
    UnreachableError,
)
from controller.playbook import Playbook, TargetConfig, looks_secret
from controller.records import ENDED_STATES
from controller.ship.deploy import LOCK_WAIT_S, lock_owner
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import describe_command, target_label

LAUNCHER_SOURCE = remote.script("launcher")


@dataclass
class LaunchedRun:
    run_id: str
    run_dir: str
    pid: int
    release_id: str
    started_s: float
    info: dict[str, Any]

    @property
    def log_path(self) -> str:
        return f"{self.run_dir}/train.log"


def remote_python(target: TargetConfig) -> str:
    """The interpreter on the target. On local targets "python3" means the one running dfctl."""
    if target.kind == "local" and target.python in ("python3", "python"):
        return sys.executable
    return target.python


def make_run_id(name: str, now_s: float | None = None) -> str:
    """`<name>-<UTC yyyymmddTHHMMSSZ>`; the target adds -2, -3… if that dir exists."""
    return f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now_s if now_s is not None else time.time()))}"


def split_env(playbook: Playbook, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(plain env, secrets). Secrets: secret_env names read from `environ`, plus playbook
    env entries whose names look secret. Missing secret_env names are simply not sent."""
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for k, v in playbook.run.env.items():
        (secret if looks_secret(k) or k in playbook.run.secret_env else plain)[k] = v
    for k in playbook.run.secret_env:
        if k in environ:
            secret[k] = environ[k]
    return plain, secret


def _remote(transport: Transport, target: TargetConfig, command: str, spec: dict, timeout_s: float = 120.0) -> dict:
    argv = [remote_python(target), "-c", LAUNCHER_SOURCE, command]
    r = transport.run(argv, stdin=json.dumps(spec).encode(), timeout_s=timeout_s)
    lines = r.stdout_text.strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        raise RemoteCommandError(f"{command} on {transport.name} failed: {r.summary()}", result=r)
    if reply.get("conflict"):
        raise conflict_error(target, [(c["run_id"], c.get("pid")) for c in reply["conflict"]])
    if reply.get("resumed"):
        raise AlreadyResumedError(f"{command} on {transport.name}: {reply['error']}",
                                  hint=f"another controller resumed it: dfctl watch {reply['resumed']}")
    if reply.get("locked"):
        raise LockedError(f"{command} on {transport.name}: {reply['error']}",
                          hint="another deploy to this target is running; wait for it and retry")
    if "error" in reply:
        raise DeployError(f"{command} on {transport.name}: {reply['error']}")
    return reply


def launch_spec(playbook: Playbook, workdir: str, name: str | None = None,
                environ: Mapping[str, str] | None = None) -> dict:
    plain, secret = split_env(playbook, os.environ if environ is None else environ)
    run_name = name or playbook.run.name
    return {"workdir": workdir, "run_id": make_run_id(run_name), "name": run_name,
            "python": remote_python(playbook.target), "module": playbook.run.module,
            "args": list(playbook.run.args), "env": plain, "secrets": secret, "path": playbook.target.path}


def launch_command(transport: Transport, target: TargetConfig) -> str:
    """The exact launch command (dry run); its JSON input goes on stdin."""
    src = f"<launcher.py source, {len(LAUNCHER_SOURCE)} chars>"
    return describe_command(transport, [remote_python(target), "-c", src, "launch"]) + "  < JSON spec on stdin (secrets never in argv)"


def _connection_lost(exc: DfctlError) -> bool:
    """The launch exec's outcome is unknown: the command may or may not have run."""
    if isinstance(exc, UnreachableError) and not isinstance(exc, (HostKeyError, ContainerStateError)):
        return True
    return isinstance(exc, RemoteCommandError) and exc.result is not None and exc.result.exited in (124, 255)


def launch_run(transport: Transport, playbook: Playbook, workdir: str, *, name: str | None = None,
               environ: Mapping[str, str] | None = None, spec: dict | None = None,
               retry_s: float = 60.0) -> LaunchedRun:
    """Start the run; returns as soon as the trainer process exists.

    A connection lost with the launch in flight leaves its outcome unknown, so the same
    launch (same run id) is asked again in `adopt` mode until the host answers: the
    target's mkdir of the run dir decides which attempt starts the run, and a later one
    reports that run instead of starting a second. (reliability suite:
    test_connection_lost_mid_launch_no_duplicate_run)"""
    spec = spec if spec is not None else launch_spec(playbook, workdir, name, environ)
    try:
        info = _remote(transport, playbook.target, "launch", spec)
    except (UnreachableError, RemoteCommandError) as exc:
        if not _connection_lost(exc):
            raise
        info = _adopt_after_drop(transport, playbook.target, spec, exc, retry_s)
    return LaunchedRun(info["run_id"], info["run_dir"], int(info["pid"]), info["release_id"],
                       float(info["started_s"]), info)


def _adopt_after_drop(transport: Transport, target: TargetConfig, spec: dict, first: DfctlError,
                      retry_s: float) -> dict:
    again = {**spec, "adopt": True}
    end = time.monotonic() + retry_s
    last: DfctlError = first
    while time.monotonic() < end:
        host = getattr(transport, "host", None)       # pct: reconnect the node's connection
        for t in (host, transport):
            if t is not None and hasattr(t, "close"):
                t.close()
        try:
            return _remote(transport, target, "launch", again)
        except (UnreachableError, RemoteCommandError) as exc:
            if not _connection_lost(exc):
                raise
            last = exc
        time.sleep(1.0)
    raise UnreachableError(
        f"launch of {spec['run_id']} on {transport.name}: the connection was lost with the launch in "
        f"flight and the target did not answer again within {retry_s:g} s ({last.message})",
        hint="the run is registered as `launching`; `dfctl runs` shows whether it started")


def register_launch(store: RunStore, spec: dict, playbook: Playbook, *, workdir: str,
                    git_commit: str | None, git_dirty: bool | None, previous_run_id: str | None = None,
                    attempt: int = 0) -> RunRecord:
    """Record the run as `launching` BEFORE the launch exec, under the exact run id the
    target will use: a controller killed or cut off mid-launch leaves a row that `dfctl
    runs` resolves (the run dir's pid file), never a run nobody knows about."""
    base, n = spec["run_id"], 1
    t = playbook.target
    while True:                              # same name within the same second: -2, -3, ...
        run_id = base if n == 1 else f"{base}-{n}"
        run_dir = f"{workdir}/runs/{run_id}"
        rec = RunRecord(
            run_id=run_id, name=spec["name"], target_kind=t.kind, target=target_label(t), host=t.host,
            vmid=t.vmid, workdir=workdir, run_dir=run_dir, log_path=f"{run_dir}/train.log", pid=None,
            release_id=None, git_commit=git_commit, git_dirty=git_dirty, playbook=playbook.for_registry(),
            playbook_path=_abs_source(playbook.source), started_s=time.time(), state="launching",
            previous_run_id=previous_run_id, attempt=attempt)
        if store.add_run_if_new(rec):        # atomic: two controllers on one registry cannot both take it
            break
        n += 1
    spec["run_id"], spec["exact"] = run_id, True
    return rec


def _abs_source(source: str) -> str:
    """The playbook's path made absolute (a resume reloads the file from a watch that may
    run in another directory); "<memory>" stays as it is."""
    return os.path.abspath(source) if os.path.isfile(source) else source


def launch_registered(store: RunStore, transport: Transport, playbook: Playbook, workdir: str, spec: dict, *,
                      git_commit: str | None, git_dirty: bool | None, previous_run_id: str | None = None,
                      attempt: int = 0) -> LaunchedRun:
    """Register the run (`launching`), launch it, record what the target answered. A
    launch the target refused leaves the row `failed`: nothing runs. An exclusive run's
    target checks for live runs and starts this one under the deploy lock, in one exec:
    of two deploys at once exactly one launches, the other gets RunConflictError naming
    it (and its row is removed: no run dir was made). `previous_run_id`/`attempt`: a resume
    (controller/ship/relaunch.py) links the new run to the one it continues."""
    rec = register_launch(store, spec, playbook, workdir=workdir, git_commit=git_commit, git_dirty=git_dirty,
                          previous_run_id=previous_run_id, attempt=attempt)
    if playbook.run.exclusive:
        mine = [r for r in store.target_runs() if r.run_id != rec.run_id and r.state not in ENDED_STATES
                and target_identity(target_of(r)) == target_identity(playbook.target)]
        spec["exclusive"] = exclusive_check(mine, rec.run_id)
    try:
        run = launch_run(transport, playbook, workdir, spec=spec)
    except (RunConflictError, LockedError):
        store.remove_run(rec.run_id)
        raise
    except DeployError:
        store.update_run(rec.run_id, state="failed")   # the target answered: nothing runs
        raise
    finish_launch(store, run)
    return run


def exclusive_check(others: list[RunRecord], run_id: str) -> dict[str, Any]:
    """spec["exclusive"] of a launch: the target re-checks these runs of it under the deploy
    lock and starts run `run_id` only if none lives (launcher.launch)."""
    return {"runs": [{**_status_entry(r), "run_id": r.run_id} for r in others],
            "lock_wait_s": LOCK_WAIT_S, "owner": lock_owner(f"launch {run_id}")}


def finish_launch(store: RunStore, run: LaunchedRun) -> None:
    """The launch answered: the row gets the pid, release and start time."""
    store.update_run(run.run_id, pid=run.pid, release_id=run.release_id, started_s=run.started_s,
                     run_dir=run.run_dir, log_path=run.log_path, state="running")


def record_run(store: RunStore, run: LaunchedRun, playbook: Playbook, *, workdir: str,
               git_commit: str | None, git_dirty: bool | None) -> RunRecord:
    t = playbook.target
    rec = RunRecord(
        run_id=run.run_id, name=run.info.get("name", playbook.run.name), target_kind=t.kind,
        target=target_label(t), host=t.host, vmid=t.vmid, workdir=workdir, run_dir=run.run_dir,
        log_path=run.log_path, pid=run.pid, release_id=run.release_id, git_commit=git_commit,
        git_dirty=git_dirty, playbook=playbook.for_registry(), playbook_path=playbook.source,
        started_s=run.started_s, state="running")
    store.add_run(rec)
    return rec


def attached_pid_ns(store: RunStore, records: list[RunRecord]) -> dict[str, str | None]:
    """The pid namespace attach recorded for each attached run among `records` (read here,
    on the registry's thread, for a status read that may run on another)."""
    return {r.run_id: (store.attachment(r.run_id) or {}).get("pid_ns") for r in records if r.origin == "attached"}


def runs_status(transport: Transport, target: TargetConfig, records: list[RunRecord],
                store: RunStore | None = None, pid_ns_of: Mapping[str, str | None] | None = None) -> list[dict]:
    """For each record: exists, alive_pids, exit_code, log_size (one exec for all). On a pct
    target whether the run's process lives is the node's view (node_identity: the pid in the
    CT, and for an attached run its start time and the namespace in `store`'s attachment
    row, or `pid_ns_of`'s), not what the CT's /proc, which its root can fake, tells the exec
    inside the CT."""
    spec = {"runs": [_status_entry(r) for r in records]}
    statuses = _remote(transport, target, "status", spec)["runs"]
    if target.kind != "pct":
        return statuses
    from controller.probe.node_identity import check_on_node

    if pid_ns_of is None:
        pid_ns_of = attached_pid_ns(store, records) if store is not None else {}
    for rec, st in zip(records, statuses):
        pid = rec.pid or st.get("pid")
        if not pid or not st.get("exists"):
            continue
        pid_ns = pid_ns_of.get(rec.run_id) if rec.origin == "attached" else None
        verdict = check_on_node(target, dataclasses.replace(rec, pid=int(pid)), pid_ns)
        if not verdict.present and (rec.origin == "attached" or verdict.fake_proc):
            # (a launched run's group may outlive its leader: the CT's real procfs lists it)
            st["alive_pids"] = []
            if rec.origin == "attached":
                st["gone"] = verdict.other_process or "gone"
        elif verdict.present and verdict.fake_proc:     # alive by the node; the CT's list is no evidence
            st.update(alive_pids=[int(pid)], untrusted_proc=verdict.fake_proc)
    return statuses


def _status_entry(rec: RunRecord) -> dict[str, Any]:
    """What the target side needs to tell whether a run lives: an attached run (no run dir
    or exit_code of ours) by pid + start time."""
    entry: dict[str, Any] = {"run_dir": rec.run_dir, "pid": rec.pid}
    if rec.origin == "attached":
        entry.update(attached=True, start_ticks=rec.pid_start_ticks)
    return entry


def state_of(status: dict, previous: str) -> tuple[str, int | None]:
    """Registry state from a status entry: running | finished | failed | stopped | unknown."""
    if not status.get("exists"):
        return "unknown", None
    code = status.get("exit_code")
    if status.get("alive_pids"):
        return "running", code
    if status.get("attached"):
        # a run dfctl did not launch leaves no exit code: say it ended, never invent one
        return ("stopped" if previous == "stopped" else "ended"), None
    if previous == "stopped" or status.get("stop_requested"):
        return "stopped", code
    if code is None:
        return "failed", None        # gone without an exit code: SIGKILLed (OOM killer, kill -9)
    return ("finished" if code == 0 else "failed"), code


"""Registry states a run never leaves: such runs are not probed again."""


def target_identity(target: TargetConfig) -> tuple:
    """What makes two targets one machine or container (its GPUs): kind, host, port, user, vmid."""
    return (target.kind, target.host, target.port, target.user, target.vmid)


def record_statuses(store: RunStore, records: list[RunRecord], statuses: list[dict]) -> None:
    """What a status read saw goes into the records and the registry: a pid a record lacked
    (registered before its launch answered), a run that has ended."""
    for rec, st in zip(records, statuses):
        if rec.pid is None and st.get("pid"):
            rec.pid = int(st["pid"])
            store.update_run(rec.run_id, pid=rec.pid)
        state, code = state_of(st, rec.state)
        if (state, code) != (rec.state, rec.exit_code) and state != "unknown":
            store.update_run(rec.run_id, state=state, exit_code=code,
                             ended_s=rec.ended_s or (time.time() if state != "running" else None))
        rec.state, rec.exit_code = state, code


def refresh_states(store: RunStore, records: list[RunRecord],
                   open_for: Callable[[RunRecord], tuple[TargetConfig, Transport]]) -> list[tuple[str, str, list[RunRecord]]]:
    """Read the live state of every record not known to have ended, one round trip per
    target, into the records and the registry. Returns the targets that could not be read
    as (label, message, their records), those records set `unknown`; ended runs are not
    asked about (their state is final), so an old target that is gone costs nothing."""
    groups: dict[tuple, list[RunRecord]] = {}
    for rec in records:
        if rec.state not in ENDED_STATES:
            groups.setdefault(target_identity(target_of(rec)), []).append(rec)
    unreadable = []
    for recs in groups.values():
        try:
            target, transport = open_for(recs[0])
            statuses = runs_status(transport, target, recs, store)
        except DfctlError as exc:
            for rec in recs:
                rec.state = "unknown"
            unreadable.append((recs[0].target, exc.message, recs))
            continue
        record_statuses(store, recs, statuses)
    return unreadable


def conflict_error(target: TargetConfig, live: list[tuple[str, int | None]]) -> RunConflictError:
    """The one wording of "a run of this target is still alive" (deploy's early check,
    ship/nodes.py, and the target's own check under the lock)."""
    alive = ", ".join(f"{run_id} (pid {pid or '?'})" for run_id, pid in live)
    return RunConflictError(
        f"{target_label(target)}: run {alive} is still alive; a second run would share its GPUs",
        hint=f"dfctl stop {live[0][0]}, or deploy with --replace (stops it once the new release is in "
             f"place); run.exclusive = false in the playbook allows runs side by side")


def stop_recorded(store: RunStore, transport: Transport, rec: RunRecord, grace_s: float, by: str,
                  successor: str | None = None) -> dict:
    """stop_run, then the registry row `stopped` once no process of the run is left."""
    pid_ns = (store.attachment(rec.run_id) or {}).get("pid_ns") if rec.origin == "attached" else None
    res = stop_run(transport, target_of(rec), rec, grace_s, by=by, successor=successor, pid_ns=pid_ns)
    if not res.get("left"):
        store.update_run(rec.run_id, state="stopped", exit_code=res.get("exit_code"), ended_s=time.time())
    return res


def replace_runs(store: RunStore, transport: Transport, live: list[RunRecord], grace_s: float, successor: str,
                 on_stopped: Callable[[RunRecord, dict], None] | None = None) -> list[dict]:
    """deploy --replace: stop each live run as `dfctl stop` does (the stop marker names the
    successor, so the old run's watch can point at it); a run that will not die stops the
    deploy before anything is launched (the new release is in place, nothing else changed)."""
    stopped = []
    for rec in live:
        res = stop_recorded(store, transport, rec, grace_s, by="dfctl deploy --replace", successor=successor)
        if res.get("left"):
            raise DeployError(f"run {rec.run_id}: processes still alive after SIGKILL: {res['left']}; "
                              f"nothing launched", hint="stop them by hand, then deploy again")
        stopped.append({"run_id": rec.run_id, "signals": res.get("signals") or [], "exit_code": res.get("exit_code")})
        if on_stopped is not None:
            on_stopped(rec, res)
    return stopped


def stop_run(transport: Transport, target: TargetConfig, record: RunRecord, grace_s: float = 10.0,
             by: str = "dfctl stop", successor: str | None = None, pid_ns: str | None = None) -> dict:
    """SIGTERM the run's process group and session, wait grace_s, SIGKILL what is left.
    First the run dir gets a stop_request naming `by` (and the run that replaces it), so
    every watch of the run reports a stop, not a crash, and can point at the successor.
    On a pct target the signals are sent from inside the CT, whose /proc its root can fake:
    first the node's own /proc must show the pid there as the run's (pid + start time +
    `pid_ns`, the namespace attach recorded: controller/probe/node_identity.py); else refused."""
    if record.pid is None:
        raise DeployError(f"run {record.run_id}: no pid recorded; nothing to stop")
    if target.kind == "pct":
        from controller.probe.node_identity import check_on_node

        refused = check_on_node(target, record, pid_ns).refused
        if refused:
            raise StaleRunError(f"run {record.run_id} (pid {record.pid}): {refused}; nothing was signalled",
                                hint=f"nothing of CT {target.vmid} was stopped; `dfctl scan` shows what the node sees")
    spec = {"pid": record.pid, "run_dir": record.run_dir, "grace_s": grace_s, "by": by, "successor": successor}
    if record.origin == "attached":
        spec.update(attached=True, start_ticks=record.pid_start_ticks)
    res = _remote(transport, target, "stop", spec, timeout_s=grace_s + 60)
    if res.get("refused"):
        # the pid was reused: the run is gone and the process now holding its pid is not ours
        raise StaleRunError(f"run {record.run_id}: {res['refused']}; nothing was signalled",
                            hint="the run has ended; `dfctl runs` records it")
    return res
