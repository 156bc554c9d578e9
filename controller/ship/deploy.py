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
and only then is `current` switched. All of this runs as one remote script; the rename and
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
from controller.transport.base import Transport
from controller.transport.factory import describe_command
from controller.transport.pct import PctTransport

LOCKED_EXIT = 75
_TIMEOUT_PROBE_S = 60.0

# Positional args: $1 workdir, $2 release id. Prints `have|missing` and current's target.
# $R is empty, or (pct) the CT's root as seen from the host (PctTransport.run_host_view).
PROBE_SCRIPT = r"""W=${R:-}$1; ID=$2
if [ -d "$W/releases/$ID" ]; then echo have; else echo missing; fi
readlink "$W/current" 2>/dev/null || echo
"""

# Positional args: $1 workdir, $2 release id, $3 random suffix, $4 lock owner text,
# $5 "push" (stdin is the tar stream) or "switch" (release already there), $6 seconds to
# wait for the lock. The stream is received and verified into a temp dir of this script's
# own (named with its pid) WITHOUT the lock: a deploy whose link died mid-stream, blocked
# on a stream that never ends, holds no lock (before 2026-12-01 it held it until sshd gave
# up: every other controller was refused meanwhile). The lock covers only the short tail:
# clean temp dirs of dead deploys, rename, switch.
PUSH_SCRIPT = r"""set -u
# A controller killed mid-stream leaves our stdout/stderr without a reader: ignore SIGPIPE,
# so the clean-up below still runs after a message cannot be written.
trap '' PIPE
W=$1; ID=$2; RAND=$3; OWNER=$4; MODE=$5; WAIT=${6:-10}; T=
# alive: the State line of /proc/PID/status, not stat: status escapes the name a process
# chose (fs/proc/array.c, proc_task_name), so no line of it can be forged from inside
alive() { S=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null) && [ -n "$S" ] && [ "$S" != Z ]; }
mkdir -p "$W/releases" "$W/runs" || exit 70
if [ "$MODE" = push ] && [ ! -d "$W/releases/$ID" ]; then
  T="$W/releases/.tmp-$ID-$RAND-$$"
  mkdir "$T" || exit 70
  # cd, not `tar -C`: GNU tar unquotes backslash escapes in -C's argument
  if ! (cd "$T" && tar -x -f -); then
    # GNU tar words a full disk "Wrote only N of M bytes": say it plainly
    set -- $(df -Pk "$T" 2>/dev/null | tail -n 1); A=${4:-}     # before the clean-up frees it
    rm -rf "$T"
    case "$A" in ""|*[!0-9]*) ;; *) [ "$A" -lt 1024 ] && echo "No space left on device: $A KiB free under $W" >&2;; esac
    echo "tar stream incomplete or unreadable" >&2; exit 71
  fi
  if ! out=$(cd "$T" && sha256sum -c .dfctl-sha256sums 2>&1); then
    rm -rf "$T"
    printf '%s\n' "$out" | grep -v ': OK$' | head -n 20 >&2
    exit 72
  fi
elif [ "$MODE" = push ]; then
  cat >/dev/null
fi
exec 9>>"$W/.deploy.lock" || exit 70
if ! flock -w "$WAIT" 9; then
  HELD=$(cat "$W/.deploy.owner" 2>/dev/null || echo unknown)
  echo "deploy lock $W/.deploy.lock is held by: $HELD" >&2
  [ -n "$T" ] && rm -rf "$T"
  exit 75
fi
printf '%s\n' "$OWNER" > "$W/.deploy.owner"
# temp dirs whose deploy script is gone (killed before its own clean-up)
for d in "$W"/releases/.tmp-*; do
  [ -d "$d" ] && [ "$d" != "$T" ] || continue
  P=${d##*-}
  case "$P" in ""|*[!0-9]*) rm -rf "$d";; *) alive "$P" || rm -rf "$d";; esac
done
rm -f "$W"/.current.tmp-*
if [ -n "$T" ] && [ -d "$W/releases/$ID" ]; then
  rm -rf "$T"                       # another deploy put the same release in place meanwhile
elif [ -n "$T" ]; then
  mv -T "$T" "$W/releases/$ID" || { rm -rf "$T"; exit 74; }
elif [ ! -d "$W/releases/$ID" ]; then
  echo "release $ID is missing on the target" >&2; exit 73
fi
ln -s "releases/$ID" "$W/.current.tmp-$RAND" || exit 74
mv -T "$W/.current.tmp-$RAND" "$W/current" || { rm -f "$W/.current.tmp-$RAND"; exit 74; }
echo "switched $ID"
"""

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
        describe_command(transport, ["sh", "-c", PUSH_SCRIPT, "sh", workdir, bundle.content_id, "<rand>",
                                     "<owner>", "push", f"{LOCK_WAIT_S:g}"])
        + f"  < tar stream of {len(bundle.files)} files ({bundle.total_bytes} bytes)   [only when releases/{bundle.content_id} is missing]",
    ]


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
    argv = ["sh", "-c", PUSH_SCRIPT, "sh", workdir, rid, nonce, lock_owner(nonce), "switch" if have else "push",
            f"{LOCK_WAIT_S:g}"]
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
        what = {71: "the transfer was cut short or unreadable", 72: "verification against the manifest failed",
                73: "the release vanished", 74: "could not switch `current`"}.get(r.exited, "the deploy script failed")
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
