"""The traceback reader: the final exception of a Python traceback, with or without its
header, in CPython's and IPython's shapes, read per launcher prefix so interleaved ranks
never mix.

Shapes it reads (lines already repaired, see repair.py):
- CPython: `Traceback (most recent call last):`, frames `  File "p.py", line 3, in f`
  with code and caret lines, then `ExcName: message`; chains joined by "During handling
  of the above exception..." / "The above exception was the direct cause..." (the last
  exception of a chain is the one reported).
- Headerless: an excerpt that starts mid-traceback (a paste, a log that rotated): the
  first `File "...", line N, in f` frame opens it. The exception must follow within a
  few lines of the last frame, or it is not a traceback at all; an exception name with no
  message must follow the last frame or its code directly.
- IPython/Colab: `RuntimeError      Traceback (most recent call last)` on one line,
  `File /p.py:6` / `Cell In[3], line 5` frames, `----> 6 code` markers, `12 frames`.
- Old IPython (< 8): `/p/x.py in fit(self, x)` / `<ipython-input-3-...> in <module>()` frames
  with `--> 593` markers; they open a headerless traceback too (a notebook paste often
  starts in the middle).
- Ray's wrapped exceptions: `ray.exceptions.RayTaskError(OutOfMemoryError): ...`.
- A header glued onto a progress bar (`38%|███▊ | 9/24 [...]Traceback (most recent ...`).

A traceback still open when the text ends -- frames, and no exception line after them --
is returned apart (`open_at_end`): a reader of a finished log (check-log) sees a crash
being printed when the output stopped; a live reader cannot tell it from one being written
right now, so only a caller that knows the text is final judges it (scan.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.judge.repair import Line

TB_START = "Traceback (most recent call last)"
PADDLE_CALL_STACKS = "C++ Call Stacks (More useful to developers):"
"""Paddle 1.x's enforce error (PaddlePaddle/Paddle paddle/fluid/platform/enforce.h GetTraceBackString:
`sout << "C++ Call Stacks (More useful to developers):"`, then frames `Sprintf("%-3d %s\\n", idx++, demangled)`
and `Error Message Summary:`): printed only as part of an error being raised, so it opens a traceback whose
frames are C++ frames (pasted PaddlePaddle/PaddleDetection#1198, cut before its message)."""
LOGGING_ERROR = "--- Logging error ---"
"""What CPython's logging prints when a handler fails to emit a record (Lib/logging/__init__.py,
Handler.handleError): the exception's traceback, then `Call stack:` with the frames of the
logging call and `Message: ...` / `Arguments: ...`. Logging goes on after it, so neither the
traceback nor the call stack is a crash (torchrun's agent prints one when the SIGTERM of a
`dfctl stop` lands inside a log call)."""
CALL_STACK = "Call stack:"
GDB_PY_BT = "Traceback (most recent call first):"
"""gdb's `py-bt` (CPython's Tools/gdb/libpython.py, class PyBacktrace: `print ('Traceback (most recent
call first):')`): the Python stack of a live process someone attached to, innermost frame first --
printed by a debugger, not raised; its frames are not a traceback being written (pasted
deepspeedai/DeepSpeed#1969)."""
STACK_DUMP = re.compile(r"^(?:(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):"
                        r"|Stack \(most recent call first\):|~+ Stack of .{1,200} \(\d+\) ~+)\s*$")
"""A stack DUMP's header, printed by a watcher, not raised: CPython's faulthandler (its dump of every
thread, `Thread 0x00007f82eb3976c0 (most recent call first):`, `Current thread 0x...` for the thread
that dumps, `Stack (most recent call first):` for one thread alone -- Python/traceback.c
_Py_DumpTracebackThreads, frames `  File "p.py", line 5 in f` without the comma; real output of
dump_traceback_later in tests/data/logs/faulthandler-timeout-hang.log) and pytest-timeout's
`~~~ Stack of MainThread (140578756983680) ~~~` (pytest-dev/pytest-timeout pytest_timeout.py
dump_stacks, line 550 at 16edd491cb2d). Its frames run to where the program is, not to an
exception: a dump that ends the text is not a traceback cut off (a timer's dump is read as a
hang by stack_dumps.py; a fatal signal's faulthandler dump comes after `Fatal Python error: ...`,
which rules.py reads as the crash)."""
TB_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<func>.+?)\s*$')
_IPY_HEADER = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)")
_IPY_FRAME = re.compile(r"^(?:File \[?(?P<file>\S.*?):(?P<line>\d+)\]?(?:\([^)]*\))?(?:, in (?P<func>[^\s(]+)(?:\(.*\))?)?"
                        r"|Cell In\[\d+\], \[?line (?P<cline>\d+)\]?(?:\([^)]*\))?)\s*$")
"""(VS Code's notebook output links them: `Cell In[4], [line 1](vscode-notebook-cell:...)`. IPython 8 ends a
frame with the function's argument list, `File ~/x.py:336, in annotate_function.<locals>.wrapper(*args, **kwargs)`
(pasted google-deepmind/mujoco#1484).)"""
_OLD_IPY_FRAME = re.compile(r"^(?P<file>(?:[A-Za-z]:)?[/\\~.]?\S*?\.py|<ipython-input-[^>]+>|<string>) in "
                            r"(?P<func><?[\w.]+>?)\(.*$")
_RICH_FRAME = re.compile(r"^(?P<file>[^\s:│][^\s:]*?\.py):(?P<line>\d+)(?: in ?(?P<func>\S*))?\s*$")
"""rich's traceback (Lightning, typer, accelerate's pretty errors): boxed in `│ ... │`, frames
`/p/x.py:267 in apply` (the box may wrap a long path: the frame is the piece with `:N in`)."""
_CPP_FRAME = re.compile(r"^\d+\s+\S+::\S")
"""Paddle's `C++ Traceback (most recent call last):` frames: `8   paddle::framework::Run(...)`."""
_INDENTED_EXC = re.compile(r"^\s+(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
"""Two threads' tracebacks printed into each other leave one's exception line indented."""
_PARTIAL_FRAME = re.compile(r'^\s*File "')
"""A frame line the paste or the output cut (`  File "train.py", l`): the traceback's last line."""
_RICH_TAIL = re.compile(r"^:(?P<line>\d+)(?: in ?(?P<func>\S*))?\s*$")
"""... or cut just before `:539 in fit`, the path on the line above."""
_RICH_BOX = "│╭╰"
_IPY_CODE = re.compile(r"^\s*(?:-*>\s*|❱\s*)?(?:\d+|\[\d+\](?:\([^)]*\))?)(?:\s|$)")
"""(a linked line number whose link target the paste lost stays `[335]`: pasted google-deepmind/mujoco#1484)"""
_EXC_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*?(?:Error|Exception)(?=\()|[A-Za-z_][\w.]*)"
                       r"(?:\((?P<inner>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\))?(?::\s?(?P<msg>.*))?$")
_THREAD = re.compile(r"^Exception in thread (?P<name>.+?):?\s*$")
_COLAB_FRAMES = re.compile(r"^\s*\d+ frames?\s*$|^\s*\[\.\.\. skipping")
MAX_GAP_HEADED = 20
"""Lines of other text (same prefix) a headed traceback may hold between frames before
it is given up (a progress line printed in between, a logger's line)."""
MAX_GAP_HEADERLESS = 3


@dataclass
class Traceback:
    start: int                          # index (into the repaired lines) of the header or first frame
    frames: list[int] = field(default_factory=list)
    headed: bool = False
    ipython_name: str | None = None     # the header's exception name ("" for old IPython frames)
    thread: str | None = None
    ignored: bool = False               # "Exception ignored in": Python printed it and went on
    exc: int | None = None              # index of the exception line
    name: str = ""
    message: str = ""
    superseded: bool = False            # a chained exception follows: that one is reported
    gap: int = 0
    inner: str = ""                     # Ray's RayTaskError(OutOfMemoryError): the wrapped exception
    last: int = 0                       # index of its last frame or code line
    seen_exception: str = ""            # an indented exception line among its lines (interleaved threads)

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def _is_code(text: str) -> bool:
    return not text.strip() or text.startswith((" ", "\t")) or text.lstrip().startswith(("^", "~", "|", "+"))


def read_tracebacks(lines: Sequence[Line], open_at_end: list[Traceback] | None = None) -> list[Traceback]:
    """Every completed traceback in `lines`, in order of its exception line; with
    `open_at_end`, the tracebacks still open at the last line are appended to it."""
    done: list[Traceback] = []
    open_tb: dict[str, Traceback] = {}
    pending_thread: dict[str, str] = {}
    pending_ignored: dict[str, bool] = {}
    last_done: dict[str, Traceback] = {}
    for i, ln in enumerate(lines):
        text = ln.text
        key = ln.key
        tb = open_tb.get(key)
        rich = text[:1] in _RICH_BOX
        if rich:
            text = text.strip(" │")
        if tb is None and not rich and "Traceback" not in text and "File" not in text and "Exception" not in text \
                and "Cell In" not in text and not text.startswith(TB_CHAIN) and "Logging error" not in text \
                and CALL_STACK not in text and ".py in " not in text and "> in " not in text \
                and "call first" not in text and "~ Stack of " not in text and "C++ Call" not in text:
            continue
        if text.strip() == LOGGING_ERROR:
            pending_ignored[key] = True
            continue
        if text.strip() == CALL_STACK and last_done.get(key) is not None and last_done[key].ignored:
            # the logging call's own frames, closed by `Message: ...`: printed, not raised
            open_tb[key] = Traceback(start=i, headed=True, ignored=True)
            continue
        if text.startswith(TB_CHAIN):
            prev = last_done.get(key)
            if prev is not None:
                prev.superseded = True
                if prev.ignored:  # one chain is one printing: a logging error's chain is printed too
                    pending_ignored[key] = True
            continue
        m = _THREAD.match(text)
        if m:
            pending_thread[key] = m.group("name")
            continue
        if text.strip() == GDB_PY_BT or STACK_DUMP.match(text.strip()):
            open_tb[key] = Traceback(start=i, headed=True, ignored=True)
            continue
        if text.startswith("Exception ignored in"):
            pending_ignored[key] = True
            continue
        if text.strip() == PADDLE_CALL_STACKS:
            open_tb[key] = Traceback(start=i, headed=True, thread=pending_thread.pop(key, None))
            continue
        if TB_START in text:
            ipy = _IPY_HEADER.match(text)
            if rich:  # its code lines are numbered, as IPython's are
                open_tb[key] = Traceback(start=i, headed=True, ipython_name="",
                                         thread=pending_thread.pop(key, None))
                continue
            keep = tb if tb is not None and not tb.frames else None
            open_tb[key] = Traceback(start=keep.start if keep is not None else i, headed=True,
                                     ipython_name=ipy.group("name") if ipy else None,
                                     thread=pending_thread.pop(key, None) or (keep.thread if keep is not None else None),
                                     ignored=pending_ignored.pop(key, False))
            continue
        fm = _FRAME.match(text)
        old_ipy = False
        if fm is None and (tb is not None and tb.ipython_name):
            fm = _IPY_FRAME.match(text)
        if fm is None and rich:
            fm = _RICH_FRAME.match(text) or _RICH_TAIL.match(text)
            old_ipy = fm is not None
        if fm is None and tb is not None and tb.headed and _CPP_FRAME.match(text):
            fm = _CPP_FRAME.match(text)
        if fm is None and (".py in " in text or "> in " in text):
            fm = _OLD_IPY_FRAME.match(text)
            old_ipy = fm is not None
        if fm is not None:
            if tb is None:
                tb = open_tb[key] = Traceback(start=i, thread=pending_thread.pop(key, None))
            if old_ipy and not tb.ipython_name:
                tb.ipython_name = ""  # its code lines are numbered (`--> 593 ...`), as IPython's are
            tb.frames.append(i)
            tb.gap = 0
            tb.last = i
            continue
        if tb is None:
            continue
        if _PARTIAL_FRAME.match(text):
            tb.frames.append(i)
            tb.gap = 0
            tb.last = i
            continue
        if _is_code(text) or _COLAB_FRAMES.match(text) or (tb.ipython_name is not None and _IPY_CODE.match(text)):
            if text.strip():
                tb.last = i
                if not rich and _INDENTED_EXC.match(text):
                    tb.seen_exception = text.strip()
            continue
        em = None if rich else _EXC_LINE.match(text.strip())  # (inside rich's box: a wrapped frame's piece)
        if em and (tb.frames or tb.ipython_name) and (em.group("msg") or tb.headed or tb.gap == 0):
            # (an excerpt's frames without a header: a name with no message -- `KeyboardInterrupt` -- ends
            # them only right after their last frame or code line; after other text, a word alone on its line
            # (`EVALUATE`, `Config:`) is the program's output going on, pasted DeepLabCut/DeepLabCut#1047)
            tb.exc, tb.name, tb.message = i, em.group("name"), (em.group("msg") or "").strip()
            tb.inner = em.group("inner") or ""
            del open_tb[key]
            done.append(tb)
            last_done[key] = tb
            continue
        tb.gap += 1
        if tb.gap > (MAX_GAP_HEADED if tb.headed else MAX_GAP_HEADERLESS):
            del open_tb[key]
    if open_at_end is not None:
        open_at_end.extend(tb for tb in open_tb.values() if not tb.ignored)
    return done


_SITE = ("site-packages", "dist-packages", "/lib/python", "<frozen ", "/torch/", "\\lib\\")


def user_frame(lines: Sequence[Line], tb: Traceback) -> int | None:
    """The innermost frame in the user's own code (not a library's), if any."""
    for idx in reversed(tb.frames):
        if not any(s in lines[idx].text for s in _SITE):
            return idx
    return None


def python_frame(text: str) -> tuple[str, str, str] | None:
    """(file with `/` separators, line, function) of CPython's frame line `File "F", line N, in
    f` (a traceback's, faulthandler's or gdb py-bt's), or None: the one reading of a frame line
    for the readers that look at which function a stack was in (stopped_wait.py, line_scan.py's
    gdb and collective-timeout readers)."""
    m = _FRAME.match(text)
    if m is None:
        return None
    return m.group("file").replace("\\", "/"), m.group("line"), m.group("func")


def frame_location(text: str) -> str:
    """' at file.py:12 in func' for a frame line, or ''."""
    import os

    m = _FRAME.match(text) or _IPY_FRAME.match(text) or _RICH_FRAME.match(text.strip(" │"))
    if not m:
        old = _OLD_IPY_FRAME.match(text)
        if old:
            return f" at {os.path.basename(old.group('file'))} in {old.group('func')}"
        tail = _RICH_TAIL.match(text.strip(" │"))
        return f" at line {tail.group('line')}" + (f" in {tail.group('func')}" if tail.group("func") else "") if tail else ""
    if m.group("file"):
        func = m.groupdict().get("func")
        return f" at {os.path.basename(m.group('file'))}:{m.group('line')}" + (f" in {func}" if func else "")
    return f" at cell line {m.group('cline')}"


_CARETS = re.compile(r"(?P<pad>\s*)(?P<marks>[~^](?:[~^ ]*[~^])?)\s*$")
MAX_EXPRESSION_CHARS = 80


def failing_expression(lines: Sequence[Line], tb: Traceback, frame: int) -> str:
    """The sub-expression CPython (3.11+) marks with `^`/`~` under a frame's code line --
    `loss.item()` in `print(f"... {loss.item():.4f}")` -- or "" when it marks none (the
    whole line failed, an older Python, an IPython frame, or interleaved ranks garbled it).

    The caret line is aligned with the code line as printed, so the columns select the
    expression -- columns of the lines as they came (less ANSI colour), because a
    launcher prefix or timestamp that repair peels may take the indentation with it; both
    lines carry the same prefix, so their columns still agree."""
    from controller.follow.logparse import clean_text

    code_i, caret_i = frame + 1, frame + 2
    end = tb.exc if tb.exc is not None else len(lines)
    if caret_i >= end or code_i in tb.frames or caret_i in tb.frames:
        return ""
    code = lines[code_i].text.strip()
    if not code or _CARETS.fullmatch(lines[caret_i].text) is None:
        return ""
    raw_code, raw_carets = clean_text(lines[code_i].raw), clean_text(lines[caret_i].raw)
    m = _CARETS.search(raw_carets)
    at = raw_code.find(code)
    if m is None or at < 0:
        return ""
    start, stop = m.start("marks"), m.end("marks")
    if start < at or stop > at + len(code) or (start > 0 and (raw_code[start - 1].isalnum() or raw_code[start - 1] == "_")):
        return ""  # not aligned with the code line (a mark outside it, or starting inside a name)
    expr = raw_code[start:stop].strip()
    if not expr or expr == code:
        return ""
    return expr if len(expr) <= MAX_EXPRESSION_CHARS else expr[:MAX_EXPRESSION_CHARS - 3] + "..."
