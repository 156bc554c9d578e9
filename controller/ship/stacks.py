"""Where a run is stuck: `py-spy dump` of its Python processes, run where they live.

py-spy (a static binary in its PyPI wheel, a dfctl dependency) is used from the target's
PATH when one is there; otherwise dfctl ships its own copy the way it ships a release:
content-addressed (`<workdir>/tools/py-spy-<sha256[:16]>`), pushed once by the push that ships
releases (ship/push.py), verified by hash after the push, reused by every later dump. The dump itself is remote/launcher.py's `stacks`
command through the run's own transport (inside the CT for a pct target: the pids are
the container's, and ptrace permission is the container's). A dump py-spy may not take
is a StacksError naming CAP_SYS_PTRACE / kernel.yama.ptrace_scope and what to change.
Inside a CT py-spy reads the CT's /proc, which root there can replace: first the node's
own /proc must show the run's process in that CT (controller/probe/node_identity.py), and the CT's /proc be procfs.
"""

from __future__ import annotations

import posixpath
import secrets
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import DfctlError
from controller.playbook import TargetConfig
from controller.ship.bundle import sha256_file
from controller.ship.push import push_argv
from controller.store.runstore import RunRecord
from controller.transport.base import Transport

TOOLS_DIR = "tools"
DUMP_TIMEOUT_S = 20.0


class StacksError(DfctlError):
    """py-spy could not dump the run (ptrace denied, no py-spy, the run is gone)."""

    exit_code = 1


@dataclass(frozen=True)
class Frame:
    function: str
    file: str           # short file name, as py-spy prints it
    line: int | None
    native: bool = False

    def __str__(self) -> str:
        return f"{self.function} ({self.file}:{self.line})" if self.line else f"{self.function} ({self.file})"


@dataclass
class ThreadStack:
    pid: int
    thread_id: int | None
    name: str | None
    active: bool
    owns_gil: bool
    frames: list[Frame] = field(default_factory=list)   # innermost first

    def top(self, n: int = 3, python_only: bool = True) -> list[Frame]:
        frames = [f for f in self.frames if not f.native] if python_only else self.frames
        return (frames or self.frames)[:n]


@dataclass
class StackDump:
    run_id: str
    taken_s: float
    threads: list[ThreadStack]
    errors: list[str]
    native: bool
    py_spy: str          # the binary used on the target, and where it came from
    duration_s: float

    def summary(self) -> str:
        """One sentence an operator reads first: threads grouped by where they are."""
        return summarize(self.threads)


def parse_py_spy_json(pid: int, threads: list[dict[str, Any]]) -> list[ThreadStack]:
    """`py-spy dump --json` (0.4): a list of threads, each with frames innermost first."""
    out = []
    for t in threads or []:
        frames = []
        for f in t.get("frames") or []:
            native = bool(f.get("module")) or not f.get("line")
            frames.append(Frame(function=str(f.get("name") or "?"),
                                file=str(f.get("short_filename") or f.get("filename") or "?"),
                                line=f.get("line") or None, native=native and not str(f.get("filename", "")).endswith(".py")))
        out.append(ThreadStack(pid=int(t.get("pid") or pid), thread_id=t.get("os_thread_id") or t.get("thread_id"),
                               name=t.get("thread_name"), active=bool(t.get("active")),
                               owns_gil=bool(t.get("owns_gil")), frames=frames))
    return out


def _where(t: ThreadStack) -> str:
    top = t.top(1)
    return str(top[0]) if top else "no frames"


def summarize(threads: list[ThreadStack], limit: int = 5) -> str:
    """'3 threads in Queue.get (queue.py:171); MainThread in train_step (train.py:88)' --
    threads with the same innermost Python frame counted together, busiest place first.
    The innermost frame that is not the standard library's waiting machinery names it."""
    places: Counter[str] = Counter()
    names: dict[str, list[str]] = {}
    for t in threads:
        where = _meaningful(t)
        places[where] += 1
        names.setdefault(where, []).append(t.name or str(t.thread_id))
    parts = []
    for where, n in places.most_common(limit):
        who = names[where][0] if n == 1 else f"{n} threads"
        parts.append(f"{who} in {where}")
    if len(places) > limit:
        parts.append(f"{len(places) - limit} more places")
    return "; ".join(parts) if parts else "no Python threads"


_PLUMBING = ("threading.py", "queue.py", "selectors.py", "socket.py", "subprocess.py")


def _meaningful(t: ThreadStack) -> str:
    """The innermost frame outside threading/queue plumbing, with the plumbing frame it waits
    in: 'Queue.get (queue.py:171) from drafter_loop (pipeline.py:212)'."""
    frames = t.top(12)
    if not frames:
        return "no frames"
    first = frames[0]
    for f in frames:
        if f.file not in _PLUMBING:
            if f is first:
                return str(f)
            inner = next((g for g in frames if g.file in _PLUMBING and g.function != "Condition.wait"), first)
            return f"{inner} from {f}"
    return str(first)


def evidence_lines(dump: StackDump, per_thread: int = 3, limit: int = 12) -> list[str]:
    """Each thread's top frames, for a finding's evidence."""
    lines = [f"stacks: {dump.summary()}"]
    for t in dump.threads[:limit]:
        lines.append(f"  pid {t.pid} thread {t.name or t.thread_id}: "
                     + " <- ".join(str(f) for f in t.top(per_thread)))
    return lines


def render_text(dump: StackDump) -> str:
    lines = [f"{dump.run_id}: {len(dump.threads)} thread(s) at {time.strftime('%H:%M:%S', time.gmtime(dump.taken_s))}"
             f" UTC ({'with' if dump.native else 'without'} native frames; {dump.py_spy})", dump.summary(), ""]
    for t in dump.threads:
        flags = ", ".join(x for x in ("active" if t.active else "idle", "holds the GIL" if t.owns_gil else "") if x)
        lines.append(f"pid {t.pid} thread {t.thread_id} \"{t.name or ''}\" ({flags})")
        lines.extend(f"    {'[native] ' if f.native else ''}{f}" for f in t.frames)
    lines.extend(f"error: {e}" for e in dump.errors)
    return "\n".join(lines)


# -- the binary ------------------------------------------------------------------------------
def local_py_spy() -> Path:
    """The py-spy binary of dfctl's own environment (the PyPI wheel puts it beside python)."""
    beside = Path(sys.executable).parent / "py-spy"
    found = beside if beside.exists() else (Path(p) if (p := shutil.which("py-spy")) else None)
    if found is None:
        raise StacksError("py-spy is not installed here (pip install py-spy: a dfctl dependency)")
    return found


_FIND_SCRIPT = r"""p=$(command -v py-spy 2>/dev/null) && { echo "path $p"; exit 0; }
f="$1/py-spy-$2"; [ -x "$f" ] && s=$(sha256sum "$f" 2>/dev/null) && [ "${s%% *}" = "$3" ] && { echo "ours $f"; exit 0; }
echo missing"""



def tools_dir(target: TargetConfig) -> str:
    from controller.ship.bundle import project_root
    from controller.ship.deploy import resolve_workdir

    return f"{resolve_workdir(target, project_root())}/{TOOLS_DIR}"


def ensure_py_spy(transport: Transport, target: TargetConfig, *, push: bool = True) -> tuple[str | None, str]:
    """(path on the target or None, how: 'on the target's PATH' / 'shipped by dfctl' / why not)."""
    try:
        binary: Path | None = local_py_spy()
    except StacksError:
        if push:
            raise
        binary = None                 # doctor: say what the target has, even with none here
    digest = sha256_file(binary) if binary else "0" * 64
    where = tools_dir(target)
    if target.kind == "local":
        if binary is None:
            return None, "not installed here (pip install py-spy)"
        return str(binary), "dfctl's own (local target)"
    r = transport.run(["sh", "-c", _FIND_SCRIPT, "sh", where, digest[:16], digest], timeout_s=60)
    word, _, path = r.stdout_text.strip().partition(" ")
    if word == "path":
        return path, f"on the target's PATH ({path})"
    if word == "ours":
        return path, f"shipped by dfctl ({path}, sha256 {digest[:16]})"
    if not push or binary is None:
        return None, f"not on the target; dfctl ships it to {where} on first use"
    workdir, name = posixpath.dirname(where), f"py-spy-{digest[:16]}"     # where = <workdir>/tools
    with open(binary, "rb") as fh:      # the one content-addressed push (ship/push.py), as a tool
        r = transport.run(push_argv(workdir, TOOLS_DIR, name, "tool", sha256=digest, nonce=secrets.token_hex(4)),
                          stdin=fh, timeout_s=300)
    if not r.ok:
        raise StacksError(f"cannot ship py-spy to {transport.name}:{where}: {r.summary()}")
    path = f"{where}/py-spy-{digest[:16]}"
    return path, f"shipped by dfctl ({path}, sha256 {digest[:16]}, pushed now)"


# -- the dump --------------------------------------------------------------------------------
def ptrace_advice(facts: dict[str, Any], where: str) -> str:
    scope = facts.get("ptrace_scope")
    cap = facts.get("cap_sys_ptrace")
    parts = [f"ptrace of the run is not permitted on {where}"]
    parts.append("dfctl's py-spy there " + ("holds" if cap else "lacks" if cap is False else "may lack")
                 + " CAP_SYS_PTRACE")
    if scope is not None:
        parts.append(f"kernel.yama.ptrace_scope = {scope}")
    return "; ".join(parts)


PTRACE_HINT = ("let py-spy ptrace the run: for an LXC container remove sys_ptrace from lxc.cap.drop in its config "
               "(/etc/pve/lxc/<vmid>.conf) and restart it; docker: --cap-add SYS_PTRACE; or on the node set "
               "`sysctl kernel.yama.ptrace_scope=0` (1 allows root/CAP_SYS_PTRACE only); the run's user may "
               "also run py-spy itself")


def take_stacks(transport: Transport, target: TargetConfig, record: RunRecord, *, native: bool = True,
                timeout_s: float = DUMP_TIMEOUT_S, pid_ns: str | None = None) -> StackDump:
    """One dump of every Python process of the run. Raises StacksError when nothing could be
    dumped (ptrace denied: the message names CAP_SYS_PTRACE and kernel.yama.ptrace_scope)."""
    if record.pid is None:
        raise StacksError(f"run {record.run_id}: no pid recorded; nothing to dump")
    t0 = time.monotonic()
    if target.kind == "pct":
        check_on_node(target, record, pid_ns)
    path, how = ensure_py_spy(transport, target)
    spec = {"pid": record.pid, "py_spy": path, "native": native, "timeout_s": timeout_s,
            "attached": record.origin == "attached", "start_ticks": record.pid_start_ticks}
    reply = _stacks_remote(transport, target, spec, timeout_s)
    threads: list[ThreadStack] = []
    errors: list[str] = []
    used_native = False
    for p in reply.get("processes") or []:
        if "threads" in p:
            threads.extend(parse_py_spy_json(int(p["pid"]), p["threads"]))
            used_native = used_native or bool(p.get("native"))
        else:
            errors.append(f"pid {p['pid']}: {p.get('error')}")
    denied = [p for p in reply.get("processes") or [] if p.get("denied")]
    if not threads:
        if denied:
            raise StacksError(f"run {record.run_id}: {ptrace_advice(reply.get('facts') or {}, transport.name)} "
                              f"(py-spy: {_first_line(denied[0].get('error'))})", hint=PTRACE_HINT)
        if reply.get("gone"):
            raise StacksError(f"run {record.run_id}: {reply.get('error')}; nothing to dump")
        if not reply.get("processes"):
            raise StacksError(f"run {record.run_id}: no Python process of the run is alive on {transport.name}")
        raise StacksError(f"run {record.run_id}: py-spy failed: {'; '.join(errors)[:600]}")
    return StackDump(run_id=record.run_id, taken_s=time.time(), threads=threads, errors=errors, native=used_native,
                     py_spy=how, duration_s=time.monotonic() - t0)


def check_on_node(target: TargetConfig, record: RunRecord, want_ns: str | None = None) -> None:
    """Before py-spy runs inside a CT (where it reads the CT's /proc): the node's own /proc
    shows the run's process there (controller/probe/node_identity.py); else nothing is dumped."""
    from controller.probe.node_identity import check_on_node as node_verdict

    verdict = node_verdict(target, record, want_ns)
    if verdict.refused:
        raise StacksError(f"run {record.run_id}: {verdict.refused}; nothing dumped")
    if not verdict.present:
        raise StacksError(f"run {record.run_id}: pid {record.pid} is no process of CT {target.vmid} on the node; "
                          "nothing dumped")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _stacks_remote(transport: Transport, target: TargetConfig, spec: dict[str, Any], timeout_s: float) -> dict:
    from controller.errors import DeployError
    from controller.ship.launch import _remote

    try:
        return _remote(transport, target, "stacks", spec, timeout_s=timeout_s * 4 + 60)
    except DeployError as exc:
        raise StacksError(exc.message) from None


def dump_document(dump: StackDump) -> dict[str, Any]:
    """What the registry keeps of a dump (and --json prints)."""
    import dataclasses

    return {"run_id": dump.run_id, "taken_s": dump.taken_s, "summary": dump.summary(), "native": dump.native,
            "py_spy": dump.py_spy, "duration_s": dump.duration_s, "errors": dump.errors,
            "threads": [dataclasses.asdict(t) for t in dump.threads]}


def py_spy_check(transport: Transport, target: TargetConfig) -> dict[str, Any]:
    """doctor's row: which py-spy `dfctl stacks` would use on the target (nothing pushed)."""
    try:
        path, how = ensure_py_spy(transport, target, push=False)
    except StacksError as exc:
        return {"check": "py-spy", "ok": None, "detail": exc.message}
    return {"check": "py-spy", "ok": True if path else None, "detail": how}

