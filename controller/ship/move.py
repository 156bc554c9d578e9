"""Resume a run on ANOTHER target ([recover] targets): the same release and the newest
checkpoint of its chain carried there first, then the linked run launched there.

What a move does, in order (each step one exec or one stream):
1. the release: if the new target lacks releases/<release id>, it is shipped -- from the
   local checkout when the bundle built from it has that content id, else carried from the
   old target's releases/<id> as a tar stream -- by the one content-addressed push
   (ship/push.py) under the new target's deploy lock, never switching its `current`: the
   resume pins its release, and a run deployed there by hand keeps its code.
2. the checkpoint: the newest complete one along the chain (the launcher's own rule:
   checkpoints/latest, else the highest step-*.pt) is found on the run's own target with its
   size and sha256, carried as a stream into <new workdir>/moved-in/<old run id>/checkpoints/
   and verified there (sha256 by the push; size by the count carried).
3. the launch: as a resume on its own target (ship/relaunch.py), with --resume-from the copy.
   The "resumed once" marker cannot go into the old run's dir (not on this target): it is
   moved-in/<old run id>/resumed_by on the new one, written under its deploy lock -- two
   controllers deciding the same attempt pick the same target (decide() is pure), so
   exactly one launches.

The very reason to move may be that the old target is down. Then the checkpoint's run dirs
are tried on the new target itself (a shared filesystem sees the same paths): found there,
the new run resumes from it in place; not found, SourceUnreadableError names the old target
and nothing is launched (the executor gives up). A release that is neither on the new
target nor in the checkout needs the old target too.
"""

from __future__ import annotations

import posixpath
import secrets as _secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from controller.errors import BadInputError, DeployError, DfctlError, LockedError, SourceUnreadableError
from controller.playbook import Playbook, TargetConfig, load_playbook
from controller.ship.bundle import build_bundle, project_root
from controller.ship.carry import SourceReadError, carry
from controller.ship.deploy import LOCK_WAIT_S, lock_owner, probe, resolve_workdir
from controller.ship.launch import LaunchedRun
from controller.ship.push import LOCKED_EXIT, push_argv
from controller.ship.relaunch import launch_resume, source_playbook
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport
from controller.transport.factory import target_label

MOVED_IN_DIR = "moved-in"
"""<workdir>/moved-in/<old run id>/: what a move brought to this target for that run (the
checkpoint copy under checkpoints/, the resumed_by marker)."""

# Positional args: run dirs, newest first. Prints "<size> <sha256> <path>" of the newest
# complete checkpoint of the first dir that has one (remote/launcher.py newest_checkpoint's
# rule), nothing when none has; exit 3 when one was found but could not be read.
FIND_SCRIPT = r"""for d in "$@"; do
  c=$d/checkpoints; f=
  if [ -f "$c/latest" ]; then n=$(head -n 1 "$c/latest"); [ -n "$n" ] && [ -f "$c/$n" ] && f=$c/$n; fi
  if [ -z "$f" ]; then n=$(ls -1 "$c" 2>/dev/null | grep '^step-.*\.pt$' | sort | tail -n 1); [ -n "$n" ] && f=$c/$n; fi
  [ -n "$f" ] || continue
  s=$(wc -c < "$f") && h=$(sha256sum "$f") || exit 3
  echo "$s ${h%% *} $f"; exit 0
done
"""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    size_bytes: int
    sha256: str


@dataclass
class Moved:
    """What a move did, for the action's one line."""

    run: LaunchedRun
    target: str                      # the new target's label
    workdir: str
    release: str                     # "already there" | "shipped from the checkout" | "carried from <old>"
    checkpoint: str                  # what was carried / used, or why none


def find_checkpoint(transport: Transport, run_dirs: list[str]) -> Checkpoint | None:
    """The newest complete checkpoint of the first of `run_dirs` that has one, on `transport`."""
    if not run_dirs:
        return None
    r = transport.run(["sh", "-c", FIND_SCRIPT, "sh", *run_dirs], timeout_s=600)
    if not r.ok:
        raise DeployError(f"{transport.name}: cannot read the checkpoints of {', '.join(run_dirs)}: {r.summary()}")
    line = r.stdout_text.strip()
    if not line:
        return None
    size, digest, path = line.split(" ", 2)
    return Checkpoint(path, int(size), digest)


def target_playbook(previous: RunRecord, target_file: str) -> Playbook:
    """The [recover] targets entry's playbook, relative to the original playbook's directory."""
    base = Path(previous.playbook_path or ".").parent
    path = base / target_file
    if not path.is_file():
        raise BadInputError(f"run {previous.run_id}: recover.targets: no playbook {path} "
                            f"(relative to {base}, the run's playbook's directory)")
    return load_playbook(path)


def ship_release(previous: RunRecord, pb: Playbook, root: Path, old: Transport, dest: Transport,
                 workdir: str) -> str:
    """Make releases/<the run's release> exist on `dest` (never switching `current`); how."""
    rid = previous.release_id or ""
    if probe(dest, workdir, rid)[0]:
        return "already there"
    nonce = _secrets.token_hex(4)
    argv = push_argv(workdir, "releases", rid, "tree", nonce=nonce, owner=lock_owner(f"release for a move {nonce}"),
                     link="-", lock_wait_s=LOCK_WAIT_S)
    try:
        bundle = build_bundle(root, pb.bundle)
        checkout = f"the checkout at {root} holds another ({bundle.content_id})"
    except DfctlError as exc:                      # not the checkout the run came from: A has it
        bundle, checkout = None, f"the checkout at {root} cannot build it ({exc.message})"
    if bundle is not None and bundle.content_id == rid:
        tar, _ = bundle.tar_file()
        r = dest.run(argv, stdin=tar, timeout_s=3600)
        if r.exited == LOCKED_EXIT:
            raise LockedError(f"release {rid} to {dest.name}: {r.stderr_text.strip()}")
        if not r.ok:
            raise DeployError(f"release {rid} to {dest.name}: {r.summary()}")
        return "shipped from the checkout"
    src = posixpath.join(previous.workdir, "releases", rid)
    try:
        carry(old, ["tar", "-c", "-f", "-", "--exclude=__pycache__", "-C", src, "."], dest, argv)
    except SourceReadError as exc:               # B's own failures (disk full, the lock) are retried instead
        raise SourceUnreadableError(
            f"release {rid} is not on {dest.name}, {checkout}, and "
            f"{old.name} ({src}) cannot be read: {exc.message}") from None
    return f"carried from {old.name}"


def carry_checkpoint(store: RunStore, previous: RunRecord, dest: Transport, workdir: str,
                     transport_for: Callable[[RunRecord], Transport]) -> tuple[list[str], str]:
    """(the launcher's resume_from_dirs on `dest`, what was done) for the newest checkpoint
    along the chain of `previous`."""
    chain: list[RunRecord] = []
    rec: RunRecord | None = previous
    while rec is not None and rec.run_id not in {c.run_id for c in chain}:
        chain.append(rec)
        rec = store.get_run(rec.previous_run_id) if rec.previous_run_id and store.has_run(rec.previous_run_id) \
            else None
    for i, rec in enumerate(chain):
        source = transport_for(rec)
        try:
            found = find_checkpoint(source, [rec.run_dir] if rec.run_dir else [])
        except DfctlError as exc:
            rest = [c.run_dir for c in chain[i:] if c.run_dir]
            here = find_checkpoint(dest, rest)            # a shared filesystem: the same paths from there
            where = f"{target_label(target_of(rec))} (workdir {rec.workdir})"
            if here is not None:
                return rest, f"{here.path} read in place: {where} cannot be read ({exc.message})"
            raise SourceUnreadableError(
                f"the old target {where} cannot be read ({exc.message}) and {dest.name} sees no checkpoint "
                f"of {', '.join(rest)}: nothing launched") from None
        if found is None:
            continue
        sub = posixpath.join(MOVED_IN_DIR, previous.run_id, "checkpoints")
        name = posixpath.basename(found.path)
        nonce = _secrets.token_hex(4)
        try:
            carry(source, ["cat", found.path], dest,
                  push_argv(workdir, sub, name, "file", sha256=found.sha256, nonce=nonce, owner="-"),
                  expect_bytes=found.size_bytes)
        except DfctlError as exc:
            raise DeployError(f"checkpoint {found.path} from {source.name} to {dest.name}: {exc.message}") from None
        return [posixpath.join(workdir, MOVED_IN_DIR, previous.run_id)], \
            f"{found.path} carried from {source.name} ({found.size_bytes} bytes, sha256 {found.sha256[:12]} verified)"
    return [], "no checkpoint anywhere in its chain: a fresh start"


def relaunch_on(store: RunStore, previous: RunRecord, changes: Mapping[str, str], target_file: str, *,
                transport_for: Callable[[RunRecord], Transport], open_target: Callable[[TargetConfig], Transport],
                environ: Mapping[str, str] | None = None) -> Moved:
    """Resume `previous` on the target of playbook `target_file` (see the module docstring)."""
    if previous.is_job or previous.job_id is not None:
        raise BadInputError(f"run {previous.run_id}: moving a [[nodes]] job is not supported")
    if not previous.release_id:
        raise BadInputError(f"run {previous.run_id}: no release recorded; nothing to resume with")
    pb = source_playbook(previous)
    new_target = target_playbook(previous, target_file).target
    root = project_root(Path(previous.playbook_path or ".").parent)
    workdir = resolve_workdir(new_target, root)
    dest = open_target(new_target)
    old = transport_for(previous)
    release = ship_release(previous, pb, root, old, dest, workdir)
    dirs, checkpoint = carry_checkpoint(store, previous, dest, workdir, transport_for)
    run = launch_resume(store, dest, previous, pb, new_target, workdir, changes, resume_from_dirs=dirs,
                        lock_for=f"resume of {previous.run_id} moved here", environ=environ,
                        resume_marker=posixpath.join(workdir, MOVED_IN_DIR, previous.run_id, "resumed_by"))
    return Moved(run, target_label(new_target), workdir, release, checkpoint)


def describe_move(m: Moved, previous: RunRecord) -> str:
    """One line: what the move started, where, and what it carried."""
    return (f"resumed {previous.run_id} as {m.run.run_id} (pid {m.run.pid}) on {m.target} ({m.workdir}), "
            f"moved from {target_label(target_of(previous))} ({previous.workdir}); release {m.run.release_id} "
            f"{m.release}; checkpoint {m.checkpoint}")
