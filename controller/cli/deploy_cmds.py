"""CLI commands of the deploy area: deploy, runs, logs, stop, doctor (wiring only).

Each command parses, calls controller.ship (deploy and stop of a single run or a job: ship/plan.py,
where a single run is a job of one node), and renders. Errors are
our own types (controller.errors) and become exit codes in controller/cli/__init__.py.
--json prints exactly one JSON document on stdout; human hints go to stderr.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from controller.cli.app import app
from controller.errors import BadInputError, DeployError, DfctlError, UnreachableError, one_line
from controller.playbook import Playbook, TargetConfig, check_run_name, load_playbook
from controller.store.runstore import RunRecord, RunStore
from controller.transport.base import Transport

# Heavy modules (paramiko, rich.progress) are imported inside the commands that use them,
# so `dfctl --help` stays fast.


def _err_console():
    from rich.console import Console

    return Console(stderr=True)


def _emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, default=str))


def _with_accept(pb: Playbook, accept: bool) -> Playbook:
    if not accept:
        return pb
    return dataclasses.replace(pb, target=dataclasses.replace(pb.target, accept_new_host_key=True),
                               nodes=tuple(dataclasses.replace(n, accept_new_host_key=True) for n in pb.nodes))


class _LazyProgress:
    """A rich progress bar that appears only once a transfer has taken more than a moment."""

    def __init__(self, label: str, after_s: float = 0.5):
        self.label, self.after_s, self.t0 = label, after_s, time.monotonic()
        self.progress: Any = None       # rich.progress.Progress, imported only when shown
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            if time.monotonic() - self.t0 < self.after_s:
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

            self.progress = Progress("[progress.description]{task.description}", BarColumn(),
                                     DownloadColumn(), TransferSpeedColumn(),
                                     console=_err_console(), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


@app.command()
def deploy(
    playbook: Path = typer.Argument(..., help="Playbook (TOML) naming target, bundle and run."),
    name: Optional[str] = typer.Option(None, "--name", help="Run name (default: run.name of the playbook)."),
    no_launch: bool = typer.Option(False, "--no-launch", help="Deploy the release only; start nothing."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact remote commands; change nothing."),
    accept_new_host_key: bool = typer.Option(False, "--accept-new-host-key",
                                             help="Add an unknown host key to known_hosts (a changed key is always refused)."),
    replace: bool = typer.Option(False, "--replace", help="Stop this target's live runs (SIGTERM, run.stop_grace_s, "
                                                       "SIGKILL) once the new release is in place, then launch."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    follow: bool = typer.Option(False, "--follow", "-f", help="After the launch, stream the log and start-up "
                                                           "milestones until --until; a failure exits with its "
                                                           "finding's code, quoting the cause."),
    until: str = typer.Option("first_step", "--until", metavar="first_step|end",
                              help="With --follow: stop following at the first step, or at the run's end."),
) -> None:
    """Bundle the code, push it as a new release, switch `current`, launch the run detached.

    A run is exclusive by default (run.exclusive): while another run of the target is
    alive, deploy refuses (exit 2, nothing changed) unless --replace."""
    from controller.ship.bundle import project_root
    from controller.ship.plan import ShipReport, live_runs, plan_deploy, ship

    _check_deploy_flags(name, follow=follow, until=until, no_launch=no_launch, dry_run=dry_run)
    pb = _with_accept(load_playbook(playbook), accept_new_host_key)
    if pb.is_job and (replace or follow):
        raise BadInputError(f"{'--replace' if replace else '--follow'}: not for a [[nodes]] job yet",
                            hint="dfctl stop JOB first; dfctl watch JOB follows it")
    plan = plan_deploy(pb, project_root())
    if dry_run and plan.is_job:          # a job's dry run asks its nodes nothing
        return _print_dry_run(plan, None, no_launch=no_launch, replace=replace, json_out=json_out)
    store = RunStore()
    try:
        live = live_runs(plan, store, launch=not no_launch)
        if dry_run:
            return _print_dry_run(plan, live, no_launch=no_launch, replace=replace, json_out=json_out)
        # a single run's transfer shows a bar once it takes a while (a job's nodes push at once: none)
        progress = None if plan.is_job else _LazyProgress(f"deploy {plan.bundle.content_id}")

        def released(n, result) -> None:
            if progress is not None:
                progress.close()
            if not json_out:
                typer.echo(_release_text(result, n.where))

        report = ShipReport(progress=(lambda n, done, total: progress(done, total)) if progress else None,
                            released=released, stopped=None if json_out else _echo_stopped)
        try:
            shipped = ship(plan, store, launch=not no_launch, replace=replace, name=name, report=report, live=live)
        finally:
            if progress is not None:
                progress.close()
    finally:
        store.close()
    out = _shipped_document(plan, shipped)
    if not json_out and shipped.launched:
        _echo_launched(plan, shipped)
    if json_out:
        _emit_json(out)
    if follow and out.get("run") is not None:
        _follow_launched(out["run"]["run_id"], until, json_out)


def _shipped_document(plan, shipped) -> dict[str, Any]:
    """deploy --json: a single run's release and run, or a job's id and a row per node."""
    if plan.is_job:
        return {"target": plan.label, "job": shipped.job.run_id if shipped.job else None, "nodes": [
            {"node": n.rank, "target": n.where, "release": dataclasses.asdict(r),
             "run": _launched_row(shipped.launched[n.rank]) if shipped.launched else None}
            for n, r in zip(plan.nodes, shipped.releases)]}
    out: dict[str, Any] = {"target": plan.label, "release": dataclasses.asdict(shipped.releases[0]), "run": None}
    if shipped.stopped is not None:
        out["stopped"] = shipped.stopped
    if shipped.launched:
        out["run"] = _launched_row(shipped.launched[0])
    return out


def _echo_launched(plan, shipped) -> None:
    if plan.is_job:
        job, launched = shipped.job, shipped.launched
        pids = ", ".join(f"node{i} pid {run.pid}" for i, run in enumerate(launched))
        typer.echo(f"launched job {job.run_id} on {len(launched)} nodes ({pids}); run dir runs/{job.run_id} "
                   f"on each node")
        typer.echo(f"watch it: dfctl watch {job.run_id}; a node's log: dfctl logs {job.run_id} --node N", err=True)
        return
    run = shipped.launched[0]
    typer.echo(f"launched {run.run_id} (pid {run.pid}); log: {run.log_path}")
    typer.echo(f"watch it: dfctl watch {run.run_id}", err=True)


def _print_dry_run(plan, live: dict[int, list[RunRecord]] | None, *, no_launch: bool, replace: bool,
                   json_out: bool) -> None:
    """--dry-run: each node's exact commands (a single run: and the live runs it would meet)."""
    from controller.ship.plan import dry_run

    planned, bundle = dry_run(plan, launch=not no_launch), plan.bundle
    if plan.is_job:
        per_node = [{"node": n.rank, "target": n.where, "commands": cmds, "torchrun": torchrun}
                    for n, cmds, torchrun in zip(plan.nodes, planned.commands, planned.torchrun or [])]
        if json_out:
            _emit_json({"dry_run": True, "target": plan.label, "release_id": bundle.content_id, "nodes": per_node})
            return
        typer.echo(f"# dry run: {len(bundle.files)} files, release {bundle.content_id}, {plan.label}")
        for row in per_node:
            typer.echo(f"# {row['target']}")
            for c in row["commands"]:
                typer.echo(c)
            typer.echo("#   runs: " + " ".join(row["torchrun"]))
        return
    cmds = planned.commands[0]
    live_ids = [r.run_id for r in (live or {}).get(0, [])]
    if json_out:
        _emit_json({"dry_run": True, "target": plan.label, "release_id": bundle.content_id,
                    "files": len(bundle.files), "bytes": bundle.total_bytes, "commands": cmds,
                    "live_runs": live_ids, "would_stop": live_ids if replace else []})
        return
    typer.echo(f"# dry run: {len(bundle.files)} files, release {bundle.content_id}, target {plan.label}")
    if live_ids:
        typer.echo(f"# live on this target: {', '.join(live_ids)} -- "
                   + ("--replace would stop them before the launch" if replace else "a launch would be refused"))
    for c in cmds:
        typer.echo(c)


def node_playbook(pb: Playbook, node: int | None, command: str) -> Playbook:
    """The one-target playbook a per-target command works on: a [[nodes]] playbook's node
    `node` (--node), or the playbook itself."""
    if pb.is_job:
        if node is None or node >= len(pb.nodes):
            raise BadInputError(f"dfctl {command}: {pb.source} has {len(pb.nodes)} [[nodes]]: give --node 0.."
                                f"{len(pb.nodes) - 1}" + (f" (got {node})" if node is not None else ""))
        return pb.for_node(node)
    if node is not None:
        raise BadInputError(f"--node {node}: {pb.source} has one [target], no [[nodes]]")
    return pb


def _check_deploy_flags(name: str | None, *, follow: bool, until: str, no_launch: bool, dry_run: bool) -> None:
    from controller.cli.deploy_follow import UNTIL

    if until not in UNTIL:
        raise BadInputError(f"--until {until!r}: expected one of {', '.join(UNTIL)}")
    if follow and (no_launch or dry_run):
        raise BadInputError("--follow: nothing to follow with --no-launch or --dry-run")
    if name is not None:
        check_run_name(name)


def _follow_launched(run_id: str, until: str, json_out: bool) -> None:
    from controller.cli.deploy_follow import follow_run

    store = RunStore()
    try:
        code = follow_run(store.get_run(run_id), store, until=until, json_out=json_out)
    finally:
        store.close()
    raise typer.Exit(code)


def _release_text(result, target: str) -> str:
    what = (f"transferred {result.transferred_bytes} bytes" if result.transferred_bytes
            else ("unchanged, nothing transferred" if not result.switched else "already present, switched"))
    return (f"release {result.release_id} on {target}: {result.files} files, {what} "
            f"({result.duration_s:.2f} s); current -> releases/{result.release_id}")


def _launched_row(run) -> dict[str, Any]:
    return {"run_id": run.run_id, "run_dir": run.run_dir, "pid": run.pid, "log": run.log_path,
            "release_id": run.release_id, "started_s": run.started_s,
            "oom_kill_at_launch": run.info.get("oom_kill_at_launch"),
            "env_names": run.info.get("env_names", [])}


def _echo_stopped(rec: RunRecord, res: dict) -> None:
    typer.echo(_stopped_text(rec, res) + " (--replace)")


def _stopped_text(rec: RunRecord, res: dict) -> str:
    sent = ", ".join(res.get("signals") or []) or "nothing (already ended)"
    return (f"stopped {rec.run_id}: sent {sent}; no process of the run is left"
            + (f"; exit code {res['exit_code']}" if res.get("exit_code") is not None else ""))


# -- the registry side ---------------------------------------------------------------------
def _open_for(rec: RunRecord) -> tuple[TargetConfig, Transport]:
    from controller.ship.plan import open_for

    return open_for(rec)


def _run_row(rec: RunRecord) -> dict[str, Any]:
    from controller.adopt.imported import imported_end_state, is_imported

    state = imported_end_state(rec)[0] if is_imported(rec) else rec.state   # what the import found
    return {"run_id": rec.run_id, "name": rec.name, "target": rec.target, "workdir": rec.workdir,
            "run_dir": rec.run_dir, "pid": rec.pid, "state": state, "exit_code": rec.exit_code, "release_id": rec.release_id,
            "started_s": rec.started_s, "git_commit": rec.git_commit, "git_dirty": rec.git_dirty,
            "previous_run_id": rec.previous_run_id, "attempt": rec.attempt}


@app.command()
def runs(
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    watch_table: bool = typer.Option(False, "--watch", "-w", help="A live table of every run (state, step/total, "
                                                                 "tok/s, vs baseline, age, worst finding), "
                                                                 "redrawn each --interval until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="Seconds between redraws of --watch."),
) -> None:
    """List known runs with their live state (one round trip per target).

    A target that cannot be read: its runs are listed as `unknown` (with `read_error`
    in --json), the target is named on stderr, and the exit code is 3 (a partial list)."""
    if watch_table:
        if json_out:
            raise BadInputError("dfctl runs: --watch draws a table; --json prints one document: choose one")
        from controller.cli.runs_live import live_table

        raise typer.Exit(live_table(interval))
    from controller.adopt.imported import is_imported
    from controller.ship.job import refresh_with_jobs

    store = RunStore()
    try:
        records = store.runs()
        # an imported run has no process to ask about: its end state is what the import found
        unreadable = refresh_with_jobs(store, [r for r in records if not is_imported(r)], _open_for)
        members = {r.run_id: store.job_members(r.run_id) for r in records if r.is_job}
    finally:
        store.close()
    errors = {rec.run_id: message for label, message, recs in unreadable for rec in recs}
    for label, message, _ in unreadable:
        print(f"dfctl: {label}: {message}", file=sys.stderr)
    nexts = {r.previous_run_id: r.run_id for r in reversed(records) if r.previous_run_id}   # the newest resume wins
    rows = [{**_run_row(r), "next_run_id": nexts.get(r.run_id), "read_error": errors.get(r.run_id)} for r in records]
    for row in rows:                   # a job: its nodes (each one's run dir, pid and state)
        if row["run_id"] in members:
            row["nodes"] = [{"node": m.node_rank, "run_id": m.run_id, "target": m.target, "run_dir": m.run_dir,
                             "pid": m.pid, "state": "unknown" if m.run_id in errors else m.state,
                             "exit_code": m.exit_code,
                             "read_error": errors.get(m.run_id)} for m in members[row["run_id"]]]
            row["run_dir"] = f"runs/{row['run_id']} on {len(row['nodes'])} nodes"
    if json_out:
        _emit_json(rows)
    elif not rows:
        typer.echo("no runs yet (dfctl deploy PLAYBOOK starts one)", err=True)
    else:
        _print_runs_table(rows)
    if unreadable:
        _fail_after_result(UnreachableError(
            f"runs: could not read {', '.join(label for label, _, _ in unreadable)}; the state of its runs "
            f"is unknown (the rest of the list is current)"), json_out)


def _print_runs_table(rows: list[dict[str, Any]]) -> None:
    from controller.view.runs_list import render_runs

    print(render_runs(rows, os.get_terminal_size(1).columns if sys.stdout.isatty() else 160))


@app.command()
def logs(
    run: Optional[str] = typer.Argument(None, help="Run id, name (newest of that name) or unique id prefix "
                                                    "(default: the one live run, else the newest)."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing as the log grows, until the run ends."),
    tail: int = typer.Option(50, "--tail", "-n", min=0, help="Lines from the end to print first (0: none)."),
    node: Optional[int] = typer.Option(None, "--node", min=0, help="A multi-node job's node rank whose "
                                                                  "train.log to print (default 0)."),
) -> None:
    """Print a run's train.log (the tail; with -f, follow it as the watch does: by inode,
    offset and fingerprint, through renames, truncations and deletions). A job's log is
    per node (--node): every worker line carries its global rank, `[rank3]: ...`."""
    from controller.adopt.imported import imported_source, is_imported
    from controller.watch.logstream import LogStream

    store = RunStore()
    try:
        rec = store.get_run(run) if run is not None else store.default_run("logs")
        if rec.is_job:
            from controller.ship.job import member_for_node

            rec = member_for_node(store, rec, node or 0)
        elif node is not None:
            raise BadInputError(f"--node {node}: run {rec.run_id} is not a multi-node job")
    finally:
        store.close()
    if is_imported(rec) and not rec.log_path and not rec.run_dir:
        raise BadInputError(f"run {rec.run_id}: imported from {imported_source(rec)}, which has no log file",
                            hint=f"dfctl compare-runs {rec.name} shows what the import recorded")
    stream = LogStream(rec)
    try:
        out = sys.stdout.buffer
        out.write(stream.tail(tail).data)
        out.flush()
        if follow:
            stream.follow(out, on_event=lambda what: print(f"dfctl: logs: {what}", file=sys.stderr, flush=True))
    finally:
        stream.close()


def _confirmed_default(store: RunStore, yes: bool) -> RunRecord:
    """`dfctl stop` with no RUN: the default run, once the user said yes (or --yes)."""
    rec = store.default_run("stop")
    if yes:
        return rec
    if not sys.stdin.isatty():
        raise BadInputError(f"dfctl stop: no RUN named and no terminal to ask on: would stop {rec.run_id}",
                            hint=f"dfctl stop {rec.run_id}, or dfctl stop --yes")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rec.started_s)) if rec.started_s else "?"
    if not typer.confirm(f"stop {rec.run_id} ({rec.target}, started {started})?", default=False, err=True):
        raise typer.Exit(1)
    return rec


@app.command()
def stop(
    run: Optional[str] = typer.Argument(None, help="Run id, name or unique id prefix (default: the one live "
                                                    "run, else the newest; asks before stopping it)."),
    grace_s: Optional[float] = typer.Option(None, "--grace-s", min=0, max=3600,
                                            help="Seconds between SIGTERM and SIGKILL (default: the run's "
                                                 "playbook run.stop_grace_s, 60 when unset)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Stop the default run without asking."),
) -> None:
    """SIGTERM the run's process group, wait, SIGKILL what is left; confirm nothing is left."""
    from controller.adopt.imported import imported_end_state, imported_source, is_imported
    from controller.ship.plan import stop as stop_run

    store = RunStore()
    try:
        rec = store.get_run(run) if run is not None else _confirmed_default(store, yes)
        if not rec.is_job and is_imported(rec):
            raise BadInputError(f"run {rec.run_id}: imported from {imported_source(rec)} "
                                f"({imported_end_state(rec)[0]}): dfctl started no process to stop")
        stopped = stop_run(store, rec, grace_s, by="dfctl stop")
    finally:
        store.close()
    if rec.is_job:
        return _render_job_stop(stopped, json_out=json_out)
    _, res, _ = stopped.nodes[0]
    if json_out:
        _emit_json({"run_id": rec.run_id, **(res or {})})
    if stopped.left:
        raise DeployError(f"run {rec.run_id}: processes still alive after SIGKILL: {stopped.left[0][1]}")
    if not json_out and res is not None:
        typer.echo(_stopped_text(rec, res))


def _render_job_stop(stopped, *, json_out: bool) -> None:
    """`dfctl stop JOB`: every node's process group at once; a node not reached or with
    processes left is named (exit 3 / 1), the others are stopped all the same."""
    job = stopped.run
    rows = [{"node": m.node_rank, "run_id": m.run_id, "target": m.target, **(res or {}),
             "error": exc.message if exc else None} for m, res, exc in stopped.nodes]
    if json_out:
        _emit_json({"run_id": job.run_id, "nodes": rows})
    if not json_out:
        for m, res, _ in stopped.nodes:
            if res and not res.get("left"):
                typer.echo(f"node{m.node_rank} ({m.target}): " + _stopped_text(m, res))
    if stopped.unreached:
        m, exc = stopped.unreached[0]
        raise UnreachableError(f"job {job.run_id}: node{m.node_rank} ({m.target}): {exc.message}; "
                               f"the other nodes were stopped", hint=f"dfctl stop {job.run_id} again once it answers")
    if stopped.left:
        m, pids = stopped.left[0]
        raise DeployError(f"job {job.run_id}: node{m.node_rank} ({m.target}): processes still alive after SIGKILL: {pids}")


@app.command()
def prune(
    playbook: Path = typer.Argument(..., help="Playbook whose target's releases to prune."),
    keep: int = typer.Option(3, "--keep", min=0, help="Newest releases kept besides `current` and live runs'."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go; remove nothing."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    node: Optional[int] = typer.Option(None, "--node", min=0, help="A [[nodes]] playbook: which node (rank)."),
) -> None:
    """Remove old releases of the target: never `current`, never one a live run uses."""
    from controller.ship.bundle import project_root
    from controller.ship.plan import prune as prune_target
    from controller.transport.factory import target_label

    pb = node_playbook(load_playbook(playbook), node, "prune")
    store = RunStore()
    try:
        res = prune_target(pb, project_root(), store, keep=keep, dry_run=dry_run)
    finally:
        store.close()
    if json_out:
        _emit_json({"target": target_label(pb.target), **dataclasses.asdict(res)})
        return
    verb = "would remove" if dry_run else "removed"
    for rid in res.removed:
        typer.echo(f"{verb} release {rid}")
    for rid, why in res.kept.items():
        typer.echo(f"kept release {rid} ({why.replace('-', ' ')})")
    if not res.removed:
        typer.echo("nothing to prune", err=True)


@app.command()
def doctor(
    playbook: Path = typer.Argument(..., help="Playbook whose target to check."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    node: Optional[int] = typer.Option(None, "--node", min=0, help="A [[nodes]] playbook: which node (rank)."),
) -> None:
    """Check the target: host, host key, pct, CT, python+torch, nvidia-smi, disk, wandb mode."""
    from controller.ship.doctor import failure, run_checks

    checks = run_checks(node_playbook(load_playbook(playbook), node, "doctor"))
    if json_out:
        _emit_json({"playbook": str(playbook), "checks": [dataclasses.asdict(c) for c in checks],
                    "ok": all(c.ok is not False for c in checks)})
    else:
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "warn"}[c.ok]
            typer.echo(f"{mark}  {c.check:<15} {c.detail}")
    error = failure(checks, str(playbook))
    if error is not None:
        _fail_after_result(error, json_out)


def _fail_after_result(error: DfctlError, json_out: bool) -> None:
    """A failure found after the result was printed (doctor's failed checks, runs' partial
    list): with --json that result stays the ONE document on stdout (it says what failed),
    so only the stderr line and the exit code follow; without --json, the usual error."""
    if not json_out:
        raise error
    print(f"dfctl: error: {one_line(error.message)}", file=sys.stderr)
    raise typer.Exit(error.exit_code)
