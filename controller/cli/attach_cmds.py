"""CLI commands for runs dfctl did not launch: scan, attach, stacks (wiring only).

`dfctl scan` lists the training processes of a target, `dfctl attach` registers one of
them as a run (then watch / logs / stop / compare-runs treat it like any other), and
`dfctl stacks` prints a run's Python stacks (py-spy). The work is in controller.probe.scan,
controller.adopt.attach and controller.ship.stacks; errors map to exit codes in controller/cli/__init__.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from controller.cli.app import app
from controller.errors import one_line
from controller.playbook import Playbook, TargetConfig, load_playbook
from controller.store.runstore import RunStore, target_of

DEFAULT_REMOTE_WORKDIR = "/var/tmp/dfctl"
"""Where dfctl keeps its tools (py-spy) on a --target given without a playbook."""

_TARGET_HELP = ("Instead of a playbook: local, ssh:HOST or pct:HOST:VMID (VMID: a number, a comma list, "
                "or all = every running CT of the node).")


def _emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, default=str))


def _resolve_target(playbook: Optional[Path], target: Optional[str], ssh_config: Optional[str],
                    python: Optional[str]) -> tuple[TargetConfig, tuple[int, ...] | str | None, Playbook | None]:
    import dataclasses

    from controller.errors import BadInputError
    from controller.probe.scan import parse_target_spec

    if (playbook is None) == (target is None):
        raise BadInputError("give a PLAYBOOK or --target (one of them)")
    if playbook is not None:
        pb = load_playbook(playbook)
        if pb.is_job:
            raise BadInputError(f"attach: {playbook} is a [[nodes]] job playbook; attach takes one target "
                                f"(a playbook with [target], or --target)")
        return pb.target, None, pb
    t, vmids = parse_target_spec(target or "", ssh_config=ssh_config, python=python)
    if t.kind != "local":
        t = dataclasses.replace(t, workdir=DEFAULT_REMOTE_WORKDIR)
    return t, vmids, None


def _mib(n: int | float | None) -> str:
    return "-" if n is None else f"{n / (1 << 20):.0f} MiB"


def _process_row(p) -> dict[str, Any]:
    log = p.log
    return {"where": p.where, "vmid": p.vmid, "pid": p.pid, "ppid": p.ppid, "pgid": p.pgid, "sid": p.sid,
            "user": p.user, "uid": p.uid, "argv": p.argv, "cwd": p.cwd, "start_s": p.start_s,
            "start_ticks": p.start_ticks, "cpu_pct": p.cpu_pct, "rss_bytes": p.rss_bytes, "threads": p.threads,
            "gpus": [{"index": g.index, "uuid": g.uuid, "used_mib": g.used_mib} for g in p.gpus],
            "log": None if log is None else {"path": log.path, "inode": log.inode, "size_bytes": log.size_bytes,
                                             "deleted": log.deleted},
            "stdout": None if p.stdout is None else {"target": p.stdout.target, "kind": p.stdout.kind},
            "stderr": None if p.stderr is None else {"target": p.stderr.target, "kind": p.stderr.kind},
            "env": p.env_facts(), "metrics_jsonl": p.metrics_paths, "wandb_run_dirs": p.wandb_run_dirs,
            "nested_in": p.nested_in}


@app.command()
def scan(
    playbook: Optional[Path] = typer.Argument(None, help="Playbook whose target to scan."),
    target: Optional[str] = typer.Option(None, "--target", help=_TARGET_HELP),
    ssh_config: Optional[str] = typer.Option(None, "--ssh-config", help="ssh_config file for --target hosts."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """List the training processes of a target (host or CTs) in one round trip per host:
    pid, user, command, cwd, start, CPU, RSS, GPUs, the log each writes, wandb/metrics files.

    Exit codes: 0 ok · 2 bad input · 3 host or CT unreachable."""
    from controller.probe.scan import scan_target

    t, vmids, _ = _resolve_target(playbook, target, ssh_config, None)
    report = scan_target(t, vmids)
    for e in report.errors:
        print(f"dfctl: {e}", file=sys.stderr)
    if json_out:
        _emit_json({"host": report.host, "processes": [_process_row(p) for p in report.processes],
                    "errors": report.errors, "gpu_error": report.gpu_error, "round_trips": report.round_trips,
                    "round_trip_s": report.round_trip_s})
        return
    if not report.processes:
        typer.echo(f"no training processes on {report.host}", err=True)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def shown(value: str) -> Text:
        # container-made text (argv, paths, user names): control characters escaped, no markup
        return Text(one_line(value))

    table = Table("where", "pid", "user", "started (UTC)", "CPU", "RSS", "GPUs")
    table.add_column("stdout", no_wrap=True)
    table.add_column("log")
    table.add_column("command")
    for p in report.processes:
        started = time.strftime("%m-%d %H:%M:%S", time.gmtime(p.start_s)) if p.start_s else "-"
        log = p.log.path + (" (deleted)" if p.log.deleted else "") if p.log else "-"
        # "buffered": a file without PYTHONUNBUFFERED / -u -- the log lags the run
        stdout = "buffered" if p.block_buffered else (p.stdout.kind or "-") if p.stdout else "-"
        gpus = ",".join(str(g.index if g.index is not None else g.uuid) for g in p.gpus) or "-"
        table.add_row(p.where, ("└ " if p.nested_in else "") + str(p.pid), shown(p.user or str(p.uid)), started,
                      f"{p.cpu_pct:.0f}%" if p.cpu_pct is not None else "-", _mib(p.rss_bytes), gpus, stdout,
                      shown(log), shown(" ".join(p.argv)[:160]))
    import os

    # a terminal's own width; piped, COLUMNS if set (a wide table for a file), else 200
    env_columns = os.environ.get("COLUMNS", "").strip()
    if sys.stdout.isatty():
        columns = os.get_terminal_size(1).columns
    else:
        columns = int(env_columns) if env_columns.isdigit() else 200
    Console(width=max(120, columns)).print(table)
    if report.gpu_error:
        typer.echo(f"GPUs: {report.gpu_error}", err=True)


def attach_sentence(att) -> list[str]:
    """What attach says about the run it registered (also the facts a stale_log names)."""
    rec, doc = att.record, att.attachment
    log = doc.get("log")
    env = doc.get("env") or {}
    lines = [f"attached {rec.run_id}: {doc['where']} pid {rec.pid} (group {doc['pgid']}), "
             f"log {log['path'] if log else '(none)'}"]
    if env.get("block_buffered"):
        lines.append("stdout is a regular file and PYTHONUNBUFFERED is unset: the log is block-buffered and lags "
                     "the run (dfctl deploy --replace relaunches it unbuffered)")
    src = doc.get("sources") or {}
    got = [x for x in (", ".join(src.get("metrics_jsonl") or []), ", ".join(src.get("wandb_run_dirs") or [])) if x]
    lines.append("progress from: " + ("; ".join(got + (["its log lines"] if src.get("log_progress_format") else []))
                                      or "the log only"))
    if src.get("wandb_url") or src.get("wandb_run_id"):
        lines.append(f"wandb: {src.get('wandb_url') or src.get('wandb_run_id')}")
    return lines


@app.command()
def attach(
    playbook: Optional[Path] = typer.Argument(None, help="Playbook whose target holds the run (its [watch] applies)."),
    target: Optional[str] = typer.Option(None, "--target", help=_TARGET_HELP),
    pid: Optional[int] = typer.Option(None, "--pid", help="The run's process id (as seen where it runs)."),
    log: Optional[str] = typer.Option(None, "--log", help="The log file the run writes (path where it runs)."),
    match: Optional[str] = typer.Option(None, "--match", help="Regex over the command lines; must name one run."),
    name: Optional[str] = typer.Option(None, "--name", help="Run name in the registry."),
    ssh_config: Optional[str] = typer.Option(None, "--ssh-config", help="ssh_config file for --target hosts."),
    python: Optional[str] = typer.Option(None, "--python", help="Python in the CT (for the pct fallback)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Register a run dfctl did not launch, so watch, logs, stop, stacks and compare-runs
    work on it. Ambiguous, gone or unfollowable: exit 2, nothing registered.

    Exit codes: 0 attached · 2 bad input (no such run, ambiguous, gone) · 3 unreachable."""
    from controller.adopt.attach import Selector, attach_run

    t, vmids, pb = _resolve_target(playbook, target, ssh_config, python)
    att = attach_run(t, Selector(pid=pid, log=log, match=match), vmids=vmids, name=name, playbook=pb)
    if json_out:
        import dataclasses

        _emit_json({"run": dataclasses.asdict(att.record), "attachment": att.attachment})
        return
    for line in attach_sentence(att):
        typer.echo(one_line(line))
    typer.echo(f"watch it: dfctl watch {att.record.run_id}", err=True)


@app.command()
def stacks(
    run: str = typer.Argument(..., help="Run id, name or unique id prefix."),
    native: bool = typer.Option(True, "--native/--no-native", help="Include native (C/C++) frames where permitted."),
    timeout_s: float = typer.Option(20.0, "--timeout-s", help="Seconds one py-spy dump may take."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """The run's Python stacks (py-spy dump, every thread), taken where the run lives; kept
    in the registry. ptrace not permitted: a message naming CAP_SYS_PTRACE and
    kernel.yama.ptrace_scope.

    Exit codes: 0 ok · 1 no dump (ptrace denied, no Python process) · 2 unknown run · 3 unreachable."""
    from controller.ship.stacks import dump_document, render_text, take_stacks
    from controller.transport.factory import open_transport

    store = RunStore()
    try:
        rec = store.get_run(run)
        tgt = target_of(rec)
        dump = take_stacks(open_transport(tgt), tgt, rec, native=native, timeout_s=timeout_s,
                           pid_ns=(store.attachment(rec.run_id) or {}).get("pid_ns"))
        doc = dump_document(dump)
        store.add_stacks(rec.run_id, dump.taken_s, doc)
    finally:
        store.close()
    if json_out:
        _emit_json(doc)
    else:
        typer.echo("\n".join(one_line(line) for line in render_text(dump).splitlines()))
