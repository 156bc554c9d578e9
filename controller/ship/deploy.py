"""Put a bundle on a target as an immutable release and switch `current` to it atomically.

Layout under the target's workdir:

    releases/<content id>/       one complete, verified release per content id
    releases/.tmp-<id>-<rand>-<pid>/   a transfer in progress (removed by the next deploy
                                 once the script <pid> is gone)
    .deploy.lock, .deploy.owner  the deploy lock (flock) and who holds it
    current -> releases/<id>     replaced by rename(2): never missing, never half-written
    runs/<run id>/               see launch.py

One round trip decides what is needed (`test -d releases/<id>`, `readlink current`; for a
CT this reads its files from the node through /proc/<init pid>/root, no pct start-up): an
unchanged bundle transfers nothing. Otherwise the bundle goes as ONE tar stream into a
temp dir, is checked with `sha256sum -c` against the manifest, renamed to releases/<id>
and only then is `current` switched. All of this runs as one remote script (ship/push.py's,
the one content-addressed push, which also ships dfctl's py-spy); the rename and
switch hold a flock on the workdir (waited for up to LOCK_WAIT_S, then LockedError), and
so does a launch's live-run check and start (remote/launcher.py), so the check and the
launch of an exclusive run are one step no other deploy can interleave with. A controller
killed at any moment leaves at worst a temp dir: the stream ends early, tar or the
checksum fails, the script removes its temp dir and the kernel drops the lock.
"""

from __future__ import annotations

import os
import posixpath
import re
import secrets as _secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from controller.errors import BadInputError, DeployError, LockedError, UnreachableError
from controller.playbook import TargetConfig
from controller.ship.bundle import Bundle, ProgressReader
from controller.ship.push import LOCKED_EXIT, PUSH_FAILURES, PushForm, push_argv
from controller.transport.base import Transport
from controller.transport.factory import describe_command
from controller.transport.pct import PctTransport

_TIMEOUT_PROBE_S = 60.0

# Positional args: $1 workdir, $2 release id. Prints `have|missing` and current's target.
# $R is empty, or (pct) the CT's root as seen from the host (PctTransport.run_host_view).
PROBE_SCRIPT = r"""W=${R:-}$1; ID=$2
if [ -d "$W/releases/$ID" ]; then echo have; else echo missing; fi
readlink "$W/current" 2>/dev/null || echo
"""
# The push itself is ship/push.py's PUSH_SCRIPT (a tree into releases/, then `current`).

LOCK_WAIT_S = 10.0
"""How long a deploy step waits for the deploy lock: it is held only for the short steps
(rename + switch; a launch's live-run check + start), so a longer wait means a stuck holder."""


@dataclass
class DeployResult:
    """What a deploy did, for the CLI and --json."""

    release_id: str
    release_dir: str
    workdir: str
    previous: str | None           # release id `current` pointed at before
    transferred_bytes: int = 0
    files: int = 0
    switched: bool = False
    duration_s: float = 0.0


def resolve_workdir(target: TargetConfig, project_root: str | Path) -> str:
    """Absolute workdir: local targets resolve relative paths against the project root."""
    w = target.workdir
    if target.kind == "local":
        return str((Path(project_root) / os.path.expanduser(w)).resolve())
    if not w.startswith("/"):
        raise BadInputError(f"target.workdir: {w!r} must be an absolute path on {target.kind} targets")
    return posixpath.normpath(w)


def lock_owner(nonce: str) -> str:
    """What `.deploy.owner` says while this deploy holds the lock (shown to a refused one)."""
    return (f"dfctl pid {os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} deploy {nonce}")


def plan_commands(transport: Transport, workdir: str, bundle: Bundle) -> list[str]:
    """The exact commands a deploy runs (the dry run prints these; nothing is executed)."""
    if isinstance(transport, PctTransport):
        probe_cmd = describe_command(transport.host, transport.host_view_argv(PROBE_SCRIPT, [workdir, bundle.content_id]))
    else:
        probe_cmd = describe_command(transport, ["sh", "-c", PROBE_SCRIPT, "sh", workdir, bundle.content_id])
    return [
        probe_cmd,
        describe_command(transport, _release_push(workdir, bundle.content_id, "tree"))
        + f"  < tar stream of {len(bundle.files)} files ({bundle.total_bytes} bytes)   [only when releases/{bundle.content_id} is missing]",
    ]


def _release_push(workdir: str, release_id: str, form: PushForm, *, nonce: str = "<rand>",
                  owner: str = "<owner>") -> list[str]:
    """The push of a release: a tree into releases/<id>, then `current` switched to it."""
    return push_argv(workdir, "releases", release_id, form, nonce=nonce, owner=owner, link="current",
                     lock_wait_s=LOCK_WAIT_S)


def probe(transport: Transport, workdir: str, release_id: str) -> tuple[bool, str | None]:
    """(release present?, release id `current` points at)."""
    if isinstance(transport, PctTransport):
        r = transport.run_host_view(PROBE_SCRIPT, [workdir, release_id], timeout_s=_TIMEOUT_PROBE_S)
    else:
        r = transport.run(["sh", "-c", PROBE_SCRIPT, "sh", workdir, release_id], timeout_s=_TIMEOUT_PROBE_S)
    if not r.ok:
        raise DeployError(f"deploy to {transport.name}: cannot inspect {workdir}: {r.summary()}")
    lines = r.stdout_text.splitlines() + ["", ""]
    cur = lines[1].strip() or None
    return lines[0].strip() == "have", (posixpath.basename(cur.rstrip("/")) if cur else None)


def deploy_bundle(transport: Transport, workdir: str, bundle: Bundle, *,
                  on_progress: Callable[[int, int], None] | None = None,
                  timeout_s: float = 3600.0) -> DeployResult:
    """Make releases/<id> exist and `current` point at it, transferring only if needed."""
    t0 = time.monotonic()
    rid = bundle.content_id
    have, previous = probe(transport, workdir, rid)
    result = DeployResult(rid, posixpath.join(workdir, "releases", rid), workdir, previous,
                          files=len(bundle.files))
    if have and previous == rid:
        result.duration_s = time.monotonic() - t0
        return result
    nonce = _secrets.token_hex(4)
    argv = _release_push(workdir, rid, "none" if have else "tree", nonce=nonce, owner=lock_owner(nonce))
    sent = [0]
    stream = None
    if not have:
        tar, size = bundle.tar_file()

        def count(n: int) -> None:
            sent[0] += n
            if on_progress:
                on_progress(sent[0], size)

        stream = ProgressReader(tar, count)
    r = transport.run(argv, stdin=stream, timeout_s=timeout_s)
    result.transferred_bytes = sent[0]
    if r.exited == LOCKED_EXIT:
        raise LockedError(f"deploy to {transport.name}: {r.stderr_text.strip()}",
                          hint="another deploy to this target is running; wait for it and retry")
    if r.exited == 255 and b"[dfctl] connection lost" in r.stderr:
        raise UnreachableError(f"deploy to {transport.name}: the connection was lost mid-deploy; `current` "
                               f"still points at {previous or 'nothing'} (nothing was switched)",
                               hint="rerun the deploy once the host answers; a partial copy is removed then")
    if not r.ok:
        what = PUSH_FAILURES.get(r.exited, "the deploy script failed")
        if b"No space left on device" in r.stderr:
            # tar's last lines ("Exiting with failure status") would hide the cause
            what = f"the target's disk is full (No space left on device under {workdir}); the partial copy was removed"
        raise DeployError(f"deploy to {transport.name}: {what}; `current` still points at "
                          f"{previous or 'nothing'}: {r.summary()}")
    result.switched = True
    result.duration_s = time.monotonic() - t0
    return result


# Positional args: $1 workdir, $2 how many newest releases to keep, $3 "delete" or "list",
# then the release ids live runs use. Holds the deploy lock, so no deploy switches `current`
# to a release while it is being removed. Prints `current=<id>`, then one `keep <id> <why>`
# or `remove <id>` line per release, newest first.
PRUNE_SCRIPT = r"""set -u
W=${R:-}$1; KEEP=$2; MODE=$3; shift 3
[ -d "$W/releases" ] || { echo "current="; exit 0; }
exec 9>>"$W/.deploy.lock" || exit 70
flock -w 10 9 || { echo "the deploy lock $W/.deploy.lock is held: a deploy is running" >&2; exit 75; }
CUR=$(readlink "$W/current" 2>/dev/null); CUR=${CUR#releases/}
echo "current=$CUR"
cd "$W/releases" || exit 70
i=0
for n in $(ls -1t); do
  case "$n" in .*|*[!A-Za-z0-9._-]*) continue;; esac
  [ -d "$n" ] && [ ! -L "$n" ] || continue
  i=$((i+1))
  if [ "$n" = "$CUR" ]; then echo "keep $n current"; continue; fi
  live=""; for p in "$@"; do [ "$p" = "$n" ] && live=1; done
  if [ -n "$live" ]; then echo "keep $n live-run"; continue; fi
  if [ "$i" -le "$KEEP" ]; then echo "keep $n newest"; continue; fi
  if [ "$MODE" = delete ]; then rm -rf -- "$n" || exit 74; fi
  echo "remove $n"
done
"""


@dataclass
class PruneResult:
    """What `prune_releases` kept (with why: current, live-run, newest) and removed."""

    current: str | None
    kept: dict[str, str]
    removed: list[str]
    dry_run: bool


def prune_releases(transport: Transport, workdir: str, *, keep: int, live_release_ids: list[str],
                   dry_run: bool = False) -> PruneResult:
    """Remove releases/<id> that are neither `current`, nor used by a live run, nor among the
    `keep` newest -- under the deploy lock, in one round trip."""
    if keep < 0:
        raise BadInputError(f"--keep {keep}: must be 0 or more")
    safe = [r for r in live_release_ids if r and re.fullmatch(r"[A-Za-z0-9._-]+", r)]
    argv = ["sh", "-c", PRUNE_SCRIPT, "sh", workdir, str(keep), "list" if dry_run else "delete", *safe]
    r = transport.run(argv, timeout_s=300)
    if r.exited == LOCKED_EXIT:
        raise LockedError(f"prune {transport.name}:{workdir}: {r.stderr_text.strip()}",
                          hint="wait for the deploy to finish, then prune again")
    if not r.ok:
        raise DeployError(f"prune {transport.name}:{workdir}: the prune script failed: {r.summary()}")
    current, kept, removed = None, {}, []
    for line in r.stdout_text.splitlines():
        if line.startswith("current="):
            current = line.split("=", 1)[1] or None
        elif line.startswith("keep "):
            _, rid, why = (line.split(" ", 2) + [""])[:3]
            kept[rid] = why
        elif line.startswith("remove "):
            removed.append(line.split(" ", 1)[1])
    return PruneResult(current=current, kept=kept, removed=removed, dry_run=dry_run)
