"""/proc/<pid>/stat is split in one place (controller/remote/proc_stat.py), from the LAST ')'.

comm is untrusted input: a container's process names itself (prctl PR_SET_NAME) and may put
')', '(', spaces, digits and newlines in it. The property: whatever comm holds, the pid, the
comm and the kernel's fields come back exactly as the kernel wrote them -- in the kit's
parser, in the controller's (probe/procfs.py) and in the launcher's own readers. Then the
same against real processes that gave themselves hostile names.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from controller import remote
from controller.probe.procfs import parse_stat
from controller.remote import launcher, proc_stat
from controller.remote.proc_stat import PGRP, SESSION, STARTTIME, STATE, split_stat, stat_fields, stat_int

ROOT = Path(__file__).resolve().parents[1]

# comm as a process can set it: up to 15 bytes (TASK_COMM_LEN - 1), anything but NUL
comms = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=15) | st.sampled_from([")", ") Z 1 1 1", "a) R 0 0 0 0", "((", "x\n) S 9", " ", ""])
states = st.sampled_from(list("RSDZTtXIW"))
numbers = st.integers(min_value=0, max_value=2**63 - 1)


def stat_line(pid: int, comm: str, state: str, rest: list[int]) -> str:
    """A line as the kernel writes it (fs/proc/array.c do_task_stat): no escaping of comm."""
    return f"{pid} ({comm}) {state} " + " ".join(str(n) for n in rest) + "\n"


@given(pid=st.integers(min_value=1, max_value=4194304), comm=comms, state=states,
       rest=st.lists(numbers, min_size=49, max_size=49))
@example(pid=7, comm=") Z 1 1 1", state="S", rest=list(range(49)))
@example(pid=7, comm="", state="R", rest=list(range(49)))
def test_any_comm_splits_at_the_last_paren(pid, comm, state, rest):
    text = stat_line(pid, comm, state, rest)
    assert split_stat(text) == (pid, comm, [state, *map(str, rest)])
    f = stat_fields(text)
    assert (f[STATE], stat_int(f, PGRP), stat_int(f, SESSION), stat_int(f, STARTTIME)) == \
        (state, rest[PGRP - 1], rest[SESSION - 1], rest[STARTTIME - 1])
    parsed = parse_stat(text)
    assert parsed is not None
    assert (parsed.pid, parsed.comm, parsed.state, parsed.ppid, parsed.pgrp, parsed.session) == \
        (pid, comm, state, rest[0], rest[1], rest[2])
    assert parsed.cpu_ticks == rest[10] + rest[11] and parsed.threads == rest[16] and parsed.rss_pages == rest[20]
    assert proc_stat.comm_part(text) == f"({comm})"
    # the probe's PidView rewrites a CT's line into the CT's numbering: comm survives as is
    own = pid + 1
    mine = "%d %s %s" % (own, proc_stat.comm_part(text), " ".join(f))
    assert split_stat(mine) == (own, comm, f)


@given(junk=st.text(max_size=40))
@example(junk="12 no parens")
@example(junk="(x) R 1 2 3")
@example(junk="12 (x")
def test_text_that_is_no_stat_line_is_none_not_an_error(junk):
    parts = split_stat(junk)              # never raises
    if parts is not None:                 # `<number> (` ... `)`: a line, however short
        assert parts[0] == int(junk[:junk.find("(")]) and parts[1] == junk[junk.find("(") + 1:junk.rfind(")")]
    if parse_stat(junk) is not None:
        assert parts is not None and len(parts[2]) >= 22
    assert isinstance(stat_fields(junk), list)
    assert stat_int([], STATE) is None and stat_int(["x"], 0) is None


HOSTILE = ") Z 1 1 1 (", "a b) R 0 0", "x\nZ) 1 2"


def test_real_processes_with_hostile_names_read_as_the_kernel_has_them():
    """A child names itself (prctl), then the kit's readers look at it through the real /proc."""
    for name in HOSTILE:
        child = subprocess.Popen([sys.executable, "-c", (
            "import ctypes, sys\n"
            f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "print('named', flush=True)\n"
            "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        try:
            assert child.stdout is not None and child.stdout.readline() == b"named\n"
            text = proc_stat.read_stat(child.pid)
            parts = split_stat(text)
            assert parts is not None and parts[0] == child.pid and parts[1] == name[:15]
            # what the kernel says in status (its own escaped Name and State lines) is the truth
            status = Path(f"/proc/{child.pid}/status").read_text()
            state = re.search(r"^State:\s*(\S)", status, re.M).group(1)
            assert parts[2][STATE] == state
            # the launcher: (state, pgrp, session); its own session (start_new_session)
            assert launcher._proc_stat(child.pid) == (state, child.pid, child.pid)
            assert launcher._start_ticks(child.pid) == stat_int(parts[2], STARTTIME) > 0
            assert launcher._is_python(child.pid)          # by its exe link, whatever its name
            probe = parse_stat(text)
            assert probe is not None and (probe.pid, probe.comm, probe.pgrp, probe.session, probe.ppid) == \
                (child.pid, name[:15], child.pid, child.pid, os.getpid())
        finally:
            child.kill()
            child.wait()


def test_every_kit_script_ships_with_the_one_parser_once():
    src = proc_stat.__file__
    text = Path(src).read_text(encoding="utf-8")
    for names in (("launcher",), ("probe_agent",), ("probe_agent", "process_scan")):
        shipped = remote.script(*names)
        assert shipped.startswith(text) and shipped.count("def split_stat(") == 1, names
        compile(shipped, "kit", "exec")


def test_no_other_module_splits_a_stat_line_by_hand():
    """The hand-written splits the issue counted (`text.rfind(")")` and sed over stat) are gone."""
    found = []
    for p in list((ROOT / "controller").rglob("*.py")) + list((ROOT / "trainer").rglob("*.py")):
        if p.name == "proc_stat.py":
            continue
        body = p.read_text(encoding="utf-8")
        for pattern in ('rfind(")")', "rfind(b\")\")", '/stat")'):
            if pattern in body:
                found.append(f"{p.relative_to(ROOT)}: {pattern}")
    assert found == []
