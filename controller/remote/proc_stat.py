"""/proc/<pid>/stat, split in one place for the whole remote kit and the controller.

A stat line is `pid (comm) state ppid pgrp session ...` (proc(5)). comm is the process's own
choice (prctl PR_SET_NAME, or its executable's name): a container's process may put ')',
'(' , spaces, digits or a newline in it, and the kernel writes it unescaped (fs/proc/array.c,
do_task_stat). Everything after the LAST ')' is written by the kernel, so that is where the
line is split; a split at the first ')', or on spaces, lets a process forge its state, its
process group or its start time.

Shipped as text before every script of the kit (controller.remote.script) and imported by
controller/probe/procfs.py, so the node and the controller split the same way. Must run on
Python >= 3.6, stdlib only, no annotations (the node's Python may be old).
"""

# Indexes into split_stat's fields: field N of proc(5) is fields[N - 3].
STATE = 0          # (3)  R S D Z T X ...
PPID = 1           # (4)
PGRP = 2           # (5)
SESSION = 3        # (6)
UTIME = 11         # (14) clock ticks
STIME = 12         # (15) clock ticks
NUM_THREADS = 17   # (20)
STARTTIME = 19     # (22) clock ticks after boot: with the pid, it names one process
RSS = 21           # (24) pages


def split_stat(text):
    # type: (str | None) -> tuple[int, str, list[str]] | None
    """(pid, comm, fields after comm) of one stat line, or None when it is not one."""
    if not text:
        return None
    lp, rp = text.find("("), text.rfind(")")
    if lp < 0 or rp < lp:
        return None
    try:
        pid = int(text[:lp])
    except ValueError:
        return None
    return pid, text[lp + 1:rp], text[rp + 1:].split()


def stat_fields(text):
    # type: (str | None) -> list[str]
    """The fields after comm (fields[STATE] is the state letter); [] when not a stat line."""
    parts = split_stat(text)
    return parts[2] if parts else []


def stat_int(fields, index):
    # type: (list[str], int) -> int | None
    """fields[index] as an int, or None when the line is short or the field not a number."""
    try:
        return int(fields[index])
    except (IndexError, ValueError):
        return None


def comm_part(text):
    # type: (str) -> str
    """`(comm)` as the line has it, parentheses included (a rewritten line keeps it as is)."""
    return text[text.find("("):text.rfind(")") + 1]


def read_stat(pid, proc="/proc"):
    # type: (int | str, str) -> str | None
    """The text of <proc>/<pid>/stat, or None when the process is gone (or unreadable)."""
    try:
        with open("%s/%s/stat" % (proc, pid), "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
