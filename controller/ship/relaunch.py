"""Resume a run as a NEW run linked to it: same release, the previous run's args plus the
declared changes, from the newest complete checkpoint along its chain.

Why a new run and not a restart in place: the previous run's log, metrics and checkpoints
are never overwritten (house rule), and the registry then holds the chain
(previous_run_id, attempt) that `dfctl runs` and `compare-runs --chain` show.

Why the target decides: the launch is one exec of remote/launcher.py that, under the
workdir's deploy lock, refuses if the previous run's dir already has a `resumed_by`
marker, else starts the new run and writes the marker. Two controllers -- sharing a
registry or not -- can both decide to resume a run; exactly one launches, the other gets
AlreadyResumedError and launches nothing. The checkpoint is found there too (the bundled
trainer's checkpoints/latest, else the highest step-*.pt), walking back the chain when
the previous run died before its first save; none anywhere: a fresh start, said so.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping

from controller.errors import BadInputError, DeployError
from controller.playbook import Playbook, TargetConfig, changed_args, load_playbook
from controller.ship.deploy import LOCK_WAIT_S, lock_owner
from controller.ship.launch import LaunchedRun, launch_registered, launch_spec
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import target_label

RESUME_FLAG = "--resume-from"
"""The bundled trainer's flag (trainer/train.py): a run dir or a checkpoint file of another run."""
RESUME_FROM = "{resume_from}"
"""Placeholder the target's launcher replaces with the checkpoint it found (remote/launcher.py)."""


def without_resume(args: list[str]) -> list[str]:
    """`args` without a resume of their own (`--resume`, `--resume-from X`, `--resume-from=X`):
    each resume names its own checkpoint."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == RESUME_FLAG:
            skip = True
            continue
        if a == "--resume" or a.startswith(RESUME_FLAG + "="):
            continue
        out.append(a)
    return out


def resume_args(previous_args: list[str], changes: Mapping[str, str]) -> list[str]:
    """The resumed run's argv: the previous run's, the changes applied, the resume flag last."""
    return changed_args(without_resume([str(a) for a in previous_args]), dict(changes)) + [RESUME_FLAG, RESUME_FROM]


def chain_dirs(store: RunStore, previous: RunRecord) -> list[str]:
    """Run dirs to look for a checkpoint in, newest first: the previous run, then back its chain."""
    out: list[str] = []
    rec: RunRecord | None = previous
    seen: set[str] = set()
    while rec is not None and rec.run_id not in seen:
        seen.add(rec.run_id)
        if rec.run_dir:
            out.append(rec.run_dir)
        rec = store.get_run(rec.previous_run_id) if rec.previous_run_id and store.has_run(rec.previous_run_id) \
            else None
    return out


def source_playbook(previous: RunRecord) -> Playbook:
    """The playbook file the run came from, loaded again: the registry keeps no env values
    (a hash of each), so the file is where the resumed run's environment comes from."""
    if not previous.playbook_path or not os.path.isfile(previous.playbook_path):
        raise BadInputError(f"run {previous.run_id}: its playbook {previous.playbook_path or '(none recorded)'} "
                            f"is not readable here; a resume needs it for the run's environment",
                            hint="run the watch where the run was deployed from")
    return load_playbook(previous.playbook_path)


def launch_resume(store: RunStore, transport: Transport, previous: RunRecord, pb: Playbook, target: TargetConfig,
                  workdir: str, changes: Mapping[str, str], *, resume_from_dirs: list[str], lock_for: str,
                  resume_marker: str | None = None, environ: Mapping[str, str] | None = None) -> LaunchedRun:
    """The one way a resume is launched, here or on another target (ship/move.py): `pb` run
    on `target` in `workdir` with the previous run's args plus `changes` and the resume flag,
    pinned to its release, linked to it in the registry, under the workdir's deploy lock
    (`lock_for` says whose). A launch the target refused leaves no row claiming a resume."""
    prev_args = list(((previous.playbook or {}).get("run") or {}).get("args") or pb.run.args)
    pb = dataclasses.replace(pb, target=target,
                             run=dataclasses.replace(pb.run, args=tuple(resume_args(prev_args, changes))))
    spec = launch_spec(pb, workdir, previous.name, environ)
    spec.update(release_id=previous.release_id, resume_of=previous.run_dir, resume_from_dirs=resume_from_dirs,
                lock={"owner": lock_owner(lock_for), "lock_wait_s": LOCK_WAIT_S})
    if resume_marker is not None:
        spec["resume_marker"] = resume_marker
    try:
        return launch_registered(store, transport, pb, workdir, spec, git_commit=previous.git_commit,
                                 git_dirty=previous.git_dirty, previous_run_id=previous.run_id,
                                 attempt=previous.attempt + 1)
    except DeployError:
        # the target answered and started nothing: no row may say this run was resumed
        if store.has_run(spec["run_id"]) and store.get_run(spec["run_id"]).pid is None:
            store.remove_run(spec["run_id"])
        raise


def relaunch(store: RunStore, transport: Transport, previous: RunRecord, changes: Mapping[str, str], *,
             playbook: Playbook | None = None, environ: Mapping[str, str] | None = None) -> LaunchedRun:
    """Launch the resume of `previous` on its own target (its workdir, its release), linked to
    it in the registry. AlreadyResumedError: another controller resumed it first."""
    if previous.is_job or previous.job_id is not None:
        raise BadInputError(f"run {previous.run_id}: resuming a [[nodes]] job is not supported yet")
    if not previous.release_id:
        raise BadInputError(f"run {previous.run_id}: no release recorded; nothing to resume with")
    pb = playbook or source_playbook(previous)
    own = target_of(previous)
    target = dataclasses.replace(pb.target, **{k: getattr(own, k) for k in ("kind", "host", "port", "user", "vmid",
                                                                          "workdir")})
    return launch_resume(store, transport, previous, pb, target, previous.workdir, changes,
                         resume_from_dirs=chain_dirs(store, previous), lock_for=f"resume of {previous.run_id}",
                         environ=environ)


def describe(run: LaunchedRun, previous: RunRecord) -> str:
    """One line: what the resume started and from where."""
    ck = run.info.get("resumed_from")
    return (f"resumed {previous.run_id} as {run.run_id} (pid {run.pid}) on {target_label(target_of(previous))}, "
            f"release {run.release_id}, " + (f"from {ck}" if ck else "no checkpoint anywhere in its chain: a fresh start"))
