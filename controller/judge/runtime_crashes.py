"""Crash reports printed by runtimes other than CPython: a training or serving job in Rust
(candle, burn, tokenizers, safetensors), Go (ollama, operators), the JVM (DL4J, Spark, DJL),
.NET (ML.NET, TorchSharp), Node (tfjs-node), Julia (Flux) or R (torch/keras for R) ends with
its runtime's own report of the uncaught error, and no Python traceback at all.

Each shape is the runtime's default report, read from its source or from real output made
here (tests/data/logs/crashlang_*.log, tests/data/logs/programs/crashlang/):
- Rust: std's default panic hook, `thread '<name>' panicked at <file>:<line>:<col>:` and the
  message on the next line (Rust >= 1.73; rust-lang/rust library/std/src/panicking.rs
  default_hook's `write_msg`, `"\\nthread '{name}' panicked at {location}:\\n{msg}"` @b9245bdb919c;
  rustc 1.95 adds the thread id, `thread 'main' (6541) panicked at`), before 1.73
  `thread 'main' panicked at '<msg>', src/main.rs:2:5` (rust-lang/rust#112849). The process
  exits 101; a panic in a worker thread is printed the same way and usually ends the job.
- Go: `panic: <value>` (go1.19.8 src/runtime/panic.go:601 printpanics; `[recovered]` at :604) or
  `fatal error: <what>` (panic.go:1044 fatalthrow's print), then `goroutine <id> [<status>]:`
  (src/runtime/traceback.go:1028 goroutineheader) and the frames; the process exits 2. `panic:`
  is an ordinary word, so the goroutine header must follow, except after `panic: runtime error:`
  (the runtime's own errors, src/runtime/error.go's "runtime error: " prefix), which no healthy
  line starts with -- a report cut off after its first line is a crash being printed.
- JVM: `Exception in thread "<name>" <class>: <message>` (openjdk/jdk
  src/java.base/share/classes/java/lang/ThreadGroup.java uncaughtException,
  `System.err.print("Exception in thread \\"" + t.getName() + "\\" ")` then printStackTrace @240349422ecb),
  `\\tat` frames and `Caused by: <class>: <message>` (Throwable.java CAUSE_CAPTION): the last
  cause named is the root one. A thread other than main dying is a crash of that worker.
- .NET: `Unhandled exception. <class>: <message>` (.NET 5+), `Unhandled Exception: <class>: ...`
  (.NET Framework, .NET Core 2/3), inner exceptions after ` ---> ` (the runtime's wording as users
  paste it; not read in dotnet/runtime's source this round).
- Node: an uncaught exception or rejection prints the throwing line, a caret, the error with
  its `    at` frames, and (Node >= 17) `Node.js v<version>` as its last line (real output of
  Node v20.20.2 here); the error line above the frames is the report's name.
- Julia: `ERROR: LoadError: <what>` (an error escaping a script run by `julia file.jl`, which
  includes it; the wording as users paste it, not read in Julia's source this round).
- R: `Error in <call> : <message>` or `Error: <message>`, then Rscript's `Execution halted`
  (R's src/main/errors.c jump_to_top_ex when not interactive); in the console the error comes
  straight after the echoed command, whose lines R prompts with `> ` and `+ ` (options prompt /
  continue): pasted skeydan/Deep-Learning-and-Scientific-Computing-with-R-torch#2.
- Go, headerless: a paste that starts at a goroutine's header (`goroutine 51 [running]:`, Go >= 1.23's
  `goroutine 51 gp=0x... m=12 mp=0x... [running]:`) whose first frame is the runtime's crash path
  (`runtime.throw(`, `runtime.sigpanic()`, `runtime.fatalpanic(`, `panic(`) is a crash too: a
  SIGQUIT dump or `debug.Stack()` shows goroutines where they run, not in those frames.

Java's OutOfMemoryError, .NET's OutOfMemoryException, Julia's OutOfMemoryError, Go's
`fatal error: runtime: out of memory` and R's `cannot allocate vector of size` are memory
running out (kind oom), the others crashes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from controller.judge.repair import Line

WORDS = ("panicked at", "goroutine", "runtime error", "exception", "node.js v", "loaderror", "execution halted",
         "error in ")
"""Lower-case words of which a batch must hold one for this reader to run (each is in
STRUCTURE_WORDS in line_scan.py; "exception" stands for the JVM's and .NET's reports)."""

GO_LOOKAHEAD_LINES = 8
"""`panic: <value>` to its `goroutine N [running]:` header: a blank line, `[signal SIGSEGV: ...`,
and a `[recovered]` chain's nested `panic:` lines (one each) come between."""
TRACE_LOOKAHEAD_LINES = 200
"""How far a JVM/.NET trace's `Caused by:` / ` ---> ` lines are followed for the root cause."""
NODE_LOOKBACK_LINES = 60
"""`Node.js v20.20.2` back to the error line above its `    at` frames (and an error's printed
own properties, `{ code: 'ENOENT' }`)."""
R_LOOKAHEAD_LINES = 12
"""`Error in f() : msg` to Rscript's `Execution halted` (a message wraps; `Calls:` and a
traceback's numbered lines may come between)."""

_RUST = re.compile(r"^thread '(?P<thread>[^']{0,200})'(?: \(\d+\))? panicked at "
                   r"(?:'(?P<old>.{0,400}?)', )?(?P<loc>[^\s']{1,300}?\.rs:\d+:\d+):?\s*$")
_GO_PANIC = re.compile(r"^(?:panic|fatal error): (?P<what>\S.{0,300}?)\s*$")
_GO_GOROUTINE = re.compile(r"^goroutine \d+ (?:gp=0x[0-9a-f]+ m=\S+ (?:mp=0x[0-9a-f]+ )?)?\[[\w ,.:-]{1,80}\]:\s*$")
_GO_CRASH_FRAME = re.compile(r"^(?:runtime\.(?:throw|fatalthrow|fatalpanic|sigpanic)|panic)\(")
GO_FRAME_LINES = 3
"""Lines after a goroutine header in which its crash-path frame must be (the first frame, its file line)."""
_JVM = re.compile(r"^Exception in thread \"(?P<thread>[^\"]{1,200})\" (?P<cls>[A-Za-z_$][\w$]*(?:\.[\w$]+)+)"
                  r"(?::\s*(?P<msg>.*))?$")
_JVM_CAUSE = re.compile(r"^Caused by: (?P<cls>[A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\s*(?P<msg>.*))?$")
_JVM_TRACE = re.compile(r"^\s+at \S|^\s+\.\.\. \d+ (?:more|common frames omitted)|^Caused by: |^\s+Suppressed: ")
_DOTNET = re.compile(r"^Unhandled [Ee]xception[.:] (?P<cls>[A-Za-z_][\w`]*(?:\.[\w`]+)+)(?::\s*(?P<msg>.*))?$")
_DOTNET_INNER = re.compile(r"^\s*---> (?P<cls>[A-Za-z_][\w`]*(?:\.[\w`]+)+)(?::\s*(?P<msg>.*))?$")
_NODE_VERSION = re.compile(r"^Node\.js v\d+\.\d+\.\d+\s*$")
_NODE_ERROR = re.compile(r"^(?:Uncaught )?(?P<cls>[A-Z]\w*(?:Error|Exception)|Error|\[UnhandledPromiseRejection)"
                         r"(?: \[\w+\])?: (?P<msg>\S.{0,300})$")
_JULIA = re.compile(r"^(?:ERROR: )?LoadError: (?P<what>\S.{0,300})$")
"""(repair.py peels `ERROR: ` as a level prefix: the text holds `LoadError: ...`, the raw line the whole)"""
_R_ERROR = re.compile(r"^Error(?: in (?P<call>.{1,200}?))? ?: *(?P<msg>\S.{0,300})?$")
_R_HALTED = "Execution halted"
_R_PROMPT = ("> ", "+ ")

_OOM_CLASSES = ("OutOfMemoryError", "OutOfMemoryException")


@dataclass(frozen=True)
class RuntimeCrash:
    start: int      # the report's first line (index into the batch's lines)
    at: int         # the line that names the failure
    kind: str       # "crash" or "oom"
    summary: str


def _short(msg: str | None, n: int = 160) -> str:
    return (msg or "").strip()[:n]


def _named(cls: str, msg: str | None) -> str:
    m = _short(msg)
    return f"{cls}: {m}" if m else cls


def _kind(name: str) -> str:
    return "oom" if any(c in name for c in _OOM_CLASSES) else "crash"


def _same(lines: Sequence[Line], i: int, j: int) -> bool:
    return lines[i].key == lines[j].key


def _rust(lines: Sequence[Line], i: int, m: re.Match) -> RuntimeCrash:
    msg = m.group("old")
    if msg is None:
        nxt = next((j for j in range(i + 1, min(len(lines), i + 3)) if _same(lines, i, j) and lines[j].text.strip()),
                   None)
        msg = lines[nxt].text if nxt is not None else ""
    return RuntimeCrash(i, i, "crash", f"Rust panic in thread '{m.group('thread')}' at {m.group('loc')}"
                                       + (f": {_short(msg)}" if _short(msg) else ""))


def _go(lines: Sequence[Line], i: int, m: re.Match) -> RuntimeCrash | None:
    what = m.group("what")
    text = lines[i].text
    confirmed = text.startswith("panic: runtime error:")
    for j in range(i + 1, min(len(lines), i + 1 + GO_LOOKAHEAD_LINES)):
        if _same(lines, i, j) and _GO_GOROUTINE.match(lines[j].text):
            confirmed = True
            break
    if not confirmed:
        return None
    if text.startswith("fatal error:"):
        kind = "oom" if "out of memory" in what else "crash"
        return RuntimeCrash(i, i, kind, f"Go runtime fatal error: {_short(what)}")
    return RuntimeCrash(i, i, "crash", f"Go panic: {_short(what)}")


def _jvm(lines: Sequence[Line], i: int, m: re.Match) -> RuntimeCrash:
    name, at = _named(m.group("cls"), m.group("msg")), i
    for j in range(i + 1, min(len(lines), i + 1 + TRACE_LOOKAHEAD_LINES)):
        if not _same(lines, i, j):
            continue
        t = lines[j].text
        if not _JVM_TRACE.match(t):
            break
        c = _JVM_CAUSE.match(t)
        if c:
            name, at = _named(c.group("cls"), c.group("msg")), j
    kind = _kind(m.group("cls")) if _kind(name) == "crash" else "oom"
    return RuntimeCrash(i, at, kind, f"uncaught JVM exception in thread \"{m.group('thread')}\": {name}")


def _dotnet(lines: Sequence[Line], i: int, m: re.Match) -> RuntimeCrash:
    name = _named(m.group("cls"), (m.group("msg") or "").split(" ---> ")[0])
    inner = m.group("msg") or ""
    if " ---> " in inner:
        c = _DOTNET_INNER.match(inner[inner.rindex(" ---> "):])
        if c:
            name = _named(c.group("cls"), c.group("msg"))
    return RuntimeCrash(i, i, _kind(name), f"unhandled .NET exception: {name}")


def _node(lines: Sequence[Line], i: int) -> RuntimeCrash:
    for j in range(i - 1, max(-1, i - 1 - NODE_LOOKBACK_LINES), -1):
        if not _same(lines, i, j):
            continue
        e = _NODE_ERROR.match(lines[j].text)
        if e:
            cls = e.group("cls").lstrip("[")
            return RuntimeCrash(j, j, "crash", f"Node.js died of an uncaught error: {_named(cls, e.group('msg'))}")
    return RuntimeCrash(i, i, "crash", "Node.js died of an uncaught error (its report ends with the Node.js version)")


def _r(lines: Sequence[Line], i: int) -> RuntimeCrash | None:
    for j in range(i - 1, max(-1, i - 1 - R_LOOKAHEAD_LINES), -1):
        if not _same(lines, i, j):
            continue
        e = _R_ERROR.match(lines[j].text)
        if e:
            msg = e.group("msg") or (lines[j + 1].text if j + 1 < i else "")
            kind = "oom" if "cannot allocate vector of size" in msg else "crash"
            where = f" in {_short(e.group('call'), 80)}" if e.group("call") else ""
            return RuntimeCrash(j, j, kind, f"R error{where}: {_short(msg)} (Rscript halted)")
    return None


def _r_console(lines: Sequence[Line], i: int, m: re.Match) -> RuntimeCrash | None:
    prev = next((j for j in range(i - 1, max(-1, i - 4), -1) if _same(lines, i, j) and lines[j].text.strip()), None)
    if prev is None or not lines[prev].text.startswith(_R_PROMPT):
        return None
    msg = m.group("msg") or ""
    kind = "oom" if "cannot allocate vector of size" in msg else "crash"
    where = f" in {_short(m.group('call'), 80)}" if m.group("call") else ""
    return RuntimeCrash(i, i, kind, f"R error{where}: {_short(msg)} (the console's command failed)")


def _go_headerless(lines: Sequence[Line], i: int) -> RuntimeCrash | None:
    for j in range(i + 1, min(len(lines), i + 1 + GO_FRAME_LINES)):
        if _same(lines, i, j) and _GO_CRASH_FRAME.match(lines[j].text.strip()):
            return RuntimeCrash(i, i, "crash", f"Go program crashed (goroutine trace in {lines[j].text.strip()[:60]})")
    return None


def runtime_crashes(lines: Sequence[Line]) -> list[RuntimeCrash]:
    """Each other-runtime crash report in the lines (see the module's docstring)."""
    out: list[RuntimeCrash] = []
    go_seen = False  # a Go report already read: its goroutine headers are its own
    for i, ln in enumerate(lines):
        text = ln.text
        if not text or len(text) > 2000:
            continue
        head = text[:1]
        found: RuntimeCrash | None = None
        if head == "t" and "panicked at" in text:
            m = _RUST.match(text)
            found = _rust(lines, i, m) if m else None
        elif head in "pf" and (text.startswith("panic: ") or text.startswith("fatal error: ")):
            m = _GO_PANIC.match(text)
            found = _go(lines, i, m) if m else None
        elif head == "E" and text.startswith("Exception in thread \""):
            m = _JVM.match(text)
            found = _jvm(lines, i, m) if m else None
        elif head in "EL" and text.startswith(("ERROR: LoadError: ", "LoadError: ")) and "ERROR: LoadError: " in ln.raw:
            m = _JULIA.match(text)
            if m:
                found = RuntimeCrash(i, i, _kind(m.group("what")), f"Julia error: {_short(m.group('what'))}")
        elif head == "U" and text.startswith("Unhandled"):
            m = _DOTNET.match(text)
            found = _dotnet(lines, i, m) if m else None
        elif head == "N" and _NODE_VERSION.match(text):
            found = _node(lines, i)
        elif head == "E" and text.strip() == _R_HALTED:
            found = _r(lines, i)
        elif head == "E" and text.startswith("Error in "):
            m = _R_ERROR.match(text)
            found = _r_console(lines, i, m) if m else None
        elif head == "g" and text.startswith("goroutine ") and not go_seen:
            if _GO_GOROUTINE.match(text):
                found = _go_headerless(lines, i)
        if found is not None:
            out.append(found)
            go_seen = go_seen or found.summary.startswith("Go ")
    return out
