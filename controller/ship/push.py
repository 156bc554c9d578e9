"""The one content-addressed push: an object named by its content lands on the target once,
verified there, and appears under its name only by rename(2).

Two kinds of object go this way: a release (ship/deploy.py: a tree, sent as one tar stream
that holds its own sha256 manifest, after which `current` is switched to it under the deploy
lock) and dfctl's own py-spy (ship/stacks.py: one executable file, checked against its
sha256). Both land in `<workdir>/<subdir>/<name>` from a temp `.tmp-<name>-<rand>-<pid>`
beside it; a push killed at any moment leaves at worst that temp, which the next push
removes once the script whose pid it names is gone.
"""

from __future__ import annotations

from typing import Literal

LOCKED_EXIT = 75
"""The push script's exit status when the deploy lock stayed held for the whole wait."""

PushForm = Literal["tree", "tool", "file", "none"]

# Positional args: $1 workdir, $2 subdir (releases | tools), $3 name (the content id), $4 form,
# $5 sha256 of a tool or file ("-" for a tree), $6 random suffix, $7 lock owner text, $8 the link
# beside the subdir to switch to it ("current"; "-": take the deploy lock for the rename but
# switch nothing -- a release shipped for a resume elsewhere, ship/move.py; "" for neither),
# $9 seconds to wait for the lock.
# form: tree -- stdin is a tar stream holding .dfctl-sha256sums, skipped when the name is there;
#       tool -- stdin is the file, made executable, replacing what is there (the caller's
#               check found it missing or not matching its sha256);
#       file -- as tool, but a plain file (mode 644): a checkpoint carried to another target;
#       none -- no stream: the object is already there (only the switch).
# The stream is received and verified into a temp of this script's own (named with its pid)
# WITHOUT the lock: a push whose link died mid-stream, blocked on a stream that never ends,
# holds no lock (before 2026-12-01 it held it until sshd gave up: every other controller was
# refused meanwhile). The lock (only with a link to switch) covers the short tail: clean the
# temps of dead pushes, rename, switch.
PUSH_SCRIPT = r"""set -u
# A controller killed mid-stream leaves our stdout/stderr without a reader: ignore SIGPIPE,
# so the clean-up below still runs after a message cannot be written.
trap '' PIPE
W=$1; SUB=$2; NAME=$3; FORM=$4; SUM=$5; RAND=$6; OWNER=$7; LINK=$8; WAIT=${9:-10}; D="$W/$SUB"; T=
# alive: the State line of /proc/PID/status, not stat: status escapes the name a process
# chose (fs/proc/array.c, proc_task_name), so no line of it can be forged from inside
alive() { S=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null) && [ -n "$S" ] && [ "$S" != Z ]; }
mkdir -p "$D" || exit 70
[ -z "$LINK" ] || [ "$LINK" = - ] || mkdir -p "$W/runs" || exit 70
if [ "$FORM" = tool ] || [ "$FORM" = file ] || { [ "$FORM" = tree ] && [ ! -d "$D/$NAME" ]; }; then
  T="$D/.tmp-$NAME-$RAND-$$"
  if [ "$FORM" = tree ]; then
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
  else
    cat > "$T" || { rm -f "$T"; echo "stream incomplete or unwritable" >&2; exit 71; }
    H=$(sha256sum "$T"); [ "${H%% *}" = "$SUM" ] || { rm -f "$T"; echo "hash mismatch after push" >&2; exit 72; }
    if [ "$FORM" = tool ]; then M=755; else M=644; fi
    chmod "$M" "$T" || { rm -f "$T"; exit 70; }
  fi
elif [ "$FORM" = tree ]; then
  cat >/dev/null
fi
if [ -n "$LINK" ]; then
  exec 9>>"$W/.deploy.lock" || exit 70
  if ! flock -w "$WAIT" 9; then
    HELD=$(cat "$W/.deploy.owner" 2>/dev/null || echo unknown)
    echo "deploy lock $W/.deploy.lock is held by: $HELD" >&2
    [ -n "$T" ] && rm -rf "$T"
    exit 75
  fi
  printf '%s\n' "$OWNER" > "$W/.deploy.owner"
fi
# temps whose push script is gone (killed before its own clean-up)
for d in "$D"/.tmp-*; do
  [ -e "$d" ] && [ "$d" != "$T" ] || continue
  P=${d##*-}
  case "$P" in ""|*[!0-9]*) rm -rf "$d";; *) alive "$P" || rm -rf "$d";; esac
done
if [ "$FORM" = tool ] || [ "$FORM" = file ]; then
  mv -f "$T" "$D/$NAME" || { rm -f "$T"; exit 74; }
  echo "pushed $D/$NAME"
elif [ -n "$T" ] && [ -d "$D/$NAME" ]; then
  rm -rf "$T"                       # another push put the same object in place meanwhile
elif [ -n "$T" ]; then
  mv -T "$T" "$D/$NAME" || { rm -rf "$T"; exit 74; }
elif [ ! -e "$D/$NAME" ]; then
  echo "$SUB/$NAME is missing on the target" >&2; exit 73
fi
[ -n "$LINK" ] && [ "$LINK" != - ] || exit 0
rm -f "$W/.$LINK.tmp-"*
ln -s "$SUB/$NAME" "$W/.$LINK.tmp-$RAND" || exit 74
mv -T "$W/.$LINK.tmp-$RAND" "$W/$LINK" || { rm -f "$W/.$LINK.tmp-$RAND"; exit 74; }
echo "switched $NAME"
"""

PUSH_FAILURES = {71: "the transfer was cut short or unreadable", 72: "verification against the manifest failed",
                 73: "the release vanished", 74: "could not switch `current`"}
"""What the push script's exit statuses mean (LOCKED_EXIT apart)."""


def push_argv(workdir: str, subdir: str, name: str, form: PushForm, *, sha256: str = "-", nonce: str = "<rand>",
              owner: str = "<owner>", link: str = "", lock_wait_s: float = 10.0) -> list[str]:
    """The one command that pushes `name` into <workdir>/<subdir> (stdin: the stream of `form`)."""
    return ["sh", "-c", PUSH_SCRIPT, "sh", workdir, subdir, name, form, sha256, nonce, owner, link,
            f"{lock_wait_s:g}"]
