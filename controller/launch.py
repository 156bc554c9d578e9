"""Start a run detached and unbuffered on a target, and find out later how it is doing.

The target side is controller/launch_remote.py, sent as `python -c <source>` with its JSON
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

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from controller import launch_remote
from controller.errors import DeployError, RemoteCommandError
from controller.playbook import SECRET_NAME_RE, Playbook, TargetConfig
from controller.runstore import RunRecord, RunStore
from controller.transport.base import Transport
from controller.transport.factory import describe_command, target_label

LAUNCHER_SOURCE = Path(launch_remote.__file__).read_text(encoding="utf-8")


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
    plain, secret = {}, {}
    for k, v in playbook.run.env.items():
        (secret if SECRET_NAME_RE.search(k) or k in playbook.run.secret_env else plain)[k] = v
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
    src = f"<launch_remote.py source, {len(LAUNCHER_SOURCE)} chars>"
    return describe_command(transport, [remote_python(target), "-c", src, "launch"]) + "  < JSON spec on stdin (secrets never in argv)"


def launch_run(transport: Transport, playbook: Playbook, workdir: str, *, name: str | None = None,
               environ: Mapping[str, str] | None = None) -> LaunchedRun:
    """Start the run; returns as soon as the trainer process exists."""
    info = _remote(transport, playbook.target, "launch", launch_spec(playbook, workdir, name, environ))
    return LaunchedRun(info["run_id"], info["run_dir"], int(info["pid"]), info["release_id"],
                       float(info["started_s"]), info)


def record_run(store: RunStore, run: LaunchedRun, playbook: Playbook, *, workdir: str,
               git_commit: str | None, git_dirty: bool | None) -> RunRecord:
    t = playbook.target
    rec = RunRecord(
        run_id=run.run_id, name=run.info.get("name", playbook.run.name), target_kind=t.kind,
        target=target_label(t), host=t.host, vmid=t.vmid, workdir=workdir, run_dir=run.run_dir,
        log_path=run.log_path, pid=run.pid, release_id=run.release_id, git_commit=git_commit,
        git_dirty=git_dirty, playbook=playbook.redacted(), playbook_path=playbook.source,
        started_s=run.started_s, state="running")
    store.add_run(rec)
    return rec


def runs_status(transport: Transport, target: TargetConfig, records: list[RunRecord]) -> list[dict]:
    """For each record: exists, alive_pids, exit_code, log_size (one exec for all)."""
    spec = {"runs": [{"run_dir": r.run_dir, "pid": r.pid} for r in records]}
    return _remote(transport, target, "status", spec)["runs"]


def state_of(status: dict, previous: str) -> tuple[str, int | None]:
    """Registry state from a status entry: running | finished | failed | stopped | unknown."""
    if not status.get("exists"):
        return "unknown", None
    code = status.get("exit_code")
    if status.get("alive_pids"):
        return "running", code
    if previous == "stopped":
        return "stopped", code
    if code is None:
        return "failed", None        # gone without an exit code: SIGKILLed (OOM killer, kill -9)
    return ("finished" if code == 0 else "failed"), code


def stop_run(transport: Transport, target: TargetConfig, record: RunRecord, grace_s: float = 10.0) -> dict:
    """SIGTERM the run's process group and session, wait grace_s, SIGKILL what is left."""
    if record.pid is None:
        raise DeployError(f"run {record.run_id}: no pid recorded; nothing to stop")
    spec = {"pid": record.pid, "run_dir": record.run_dir, "grace_s": grace_s}
    return _remote(transport, target, "stop", spec, timeout_s=grace_s + 60)
