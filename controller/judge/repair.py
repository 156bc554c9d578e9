"""Line repair: give every rule the line a person would read, whatever was wrapped
around it.

Logs reach dfctl as people capture them: through launchers that prefix every line
(torchrun `[rank3]:` / `[default0]:`, Ray `(task, pid=3369) `, mpirun `[1,0]<stderr>:`,
srun `0: `, docker compose `trainer-1  | `, `kubectl logs --prefix` `[pod/NAME/C] `,
torch_xla's pod launcher `<time> 10.164.0.60 [2] ` (torch_xla/distributed/xla_dist.py
`_get_logger`: `'%(asctime)-12s %(clientip)s [%(ordinal)s] %(message)s'`), journald
`Dec 02 13:00:00 host python[41234]: `), loggers that put a timestamp and a level
first (`[2026-12-01 15:44:52,260] [WARNING] [file.py:213:func]`, glog `W1201
15:45:39.195000 18174 path:1028]`, loguru `2026-12-02 13:00:00.123 | INFO | m:f:42 - `),
pastes quoted with markdown `> `, indented four spaces (a markdown code block) or
numbered `12 | `, ANSI colour, and terminal copies hard-wrapped at the terminal's width
(a token cut in two). `repair` peels those layers
off so the rules and structure readers see the bare text, and keeps the launcher part
as the line's *key* -- interleaved ranks are read apart, never mixed.

Nothing is lost: each repaired line remembers which input line it started at, so
evidence keeps the original line numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from controller.follow.logparse import clean_text

_KEY_PREFIX = re.compile(
    r"\[(?:rank|default)?\d+\]:\s?"                         # torchrun / elastic --tee
    r"|\[\d+,\d+\]<std(?:out|err)>:\s?"                     # mpirun --tag-output
    r"|\((?:[\w.-]+,?\s)?(?:[\w.]+=[\w.:-]+,?\s)*pid=\d+(?:,\s*ip=[\w.:-]+)?\)\s"   # Ray / vLLM workers
    r"|\d{1,4}: (?=\s*\S)"                                   # srun --label (indented lines too)
    r"|[a-z0-9][\w.-]*[-_.]\d+ +\| "                         # docker compose: `trainer-1  | `, `train_1  | `
    r"|\[pod/[\w.-]+/[\w.-]+\] "                             # kubectl logs --prefix: `[pod/NAME/CONTAINER] `
    r"|\d{1,3}(?:\.\d{1,3}){3} \[\d+\] "                     # torch_xla's xla_dist: `<time> <ip> [<ordinal>] `
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./-]+\[\d+\]: "  # journal
    r"|[0-9a-f]{8} \|\| "                                      # Determined task logs: `[<time>] fa88a9df || ` (determined-ai/determined#8915)
)
_NOISE_PREFIX = re.compile(
    r">+ ?(?:- (?=\S))?"                                                # markdown quote (of a list: `> - `, vllm#5060)
    r"|\d{1,7} ?\| "                                                    # numbered paste
    r"|\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[ ,:|-]*"  # (`/`: PaddleOCR, Go's log)
    r"|\[(?:TRACE|DEBUG|INFO |WARN |ERROR|FATAL)\] W-\d+-[\w.-]+ [\w.$]+ - "  # TorchServe's log4j `[%-5p] %t %c - `
    r"|##\[(?:error|warning|notice|debug|command|group|endgroup)\]"      # GitHub Actions' workflow commands
    r"|\[[\w.]{1,60}\](?=\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\])"    # hydra: `[ts][__main__][ERROR] - `
    r"|[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[^\]\s]+\]\s?"         # glog (torch's C++/py warnings)
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+"                           # a bare time of day
    r"|\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)\]?(?::[\w.]*:| ?[:|-]? )"  # log level, but
    r"(?!\([\w.+-]{0,80}(?:\[[^\]\s]{1,40}\])?:[\w:~<>]{1,120}\(\):)\s*"  # not Kaldi's `ERROR (prog[v]:f():` envelope
    r"|\[[\w./-]+\.py:\d+(?::[\w<>]+)?\]\s?"                             # [file.py:123:func], [file.py:123]
    r"|\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? (?:\[?[\w./-]+\.py:\d+\] ?)?"         # vLLM: `03-27 10:29:13 [x.py:620]`, or
    # before the brackets `06-13 02:36:52 async_llm_engine.py:52] ` (vllm-project/vllm vllm/logger.py at 00656a8e:
    # `_FORMAT = "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"`; pasted vllm-project/vllm#5443)
    r"|(?:\|\s*(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s*)?\|\s*[\w.<>-]+:[\w.<>-]+:\d+ - "  # loguru
)
_PREFIX_START = frozenset("[(>0123456789IWEFDNC|JMASO#")
"""A line that starts with none of these has no prefix to peel (the common fast path); a
docker compose service name starts with any letter, so `  | ` early in a line also opens it."""
MAX_LAYERS = 6
WRAP_MIN_WIDTH = 60
WRAP_MAX_WIDTH = 400
WRAP_MIN_FULL_LINES = 3
WRAP_NEAR_CHARS = 5
WRAP_SAMPLE_LINES = 200
TERMINAL_WIDTHS = frozenset((80, 100, 120, 132, 160, 200))
"""Widths terminals are commonly set to: two cut lines at one of them suffice."""


_LINE_START = re.compile(r"Traceback \(|\s+File \"|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b(?::|$)"
                         r"|\[(?:rank|default)\d+\]:|\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]")
"""A line that starts a new line of its own: a line of exactly the width before it is a
line that happened to be that long, not a cut one."""


@dataclass(slots=True)
class Line:
    text: str       # the bare text rules read
    key: str        # the launcher prefix (which rank/worker printed it); "" for none
    src: int        # index of the input line it starts at
    raw: str        # the line as it came (evidence shows this)


_HOST_PREFIX = re.compile(r"[A-Za-z][\w.-]*: (?=\[(?:rank|default)?\d+\]:)")
"""DeepSpeed's multi-node launcher (pdsh) puts the host first: `worker-5: [rank22]: ...`."""


_JSON_LOG = ('{"log":"', '{"log": "')
_JSON_ENDS = ('\\n",', '\\n"')


def json_text(line: str) -> str | None:
    """The text of a line that a capture stored as a JSON string: Docker's json-file log
    driver (what `kubectl logs` reads on a node, `{"log":"...\\n","stream":"stderr",
    "time":"..."}`, moby daemon/logger/jsonfilelog) or a notebook's saved output (`"text":
    [...]` / `"traceback": [...]`, one `"...\\n",` string a line, nbformat v4). None when it
    is not one (the fast path: the first characters or the last tell)."""
    if line.startswith(_JSON_LOG):
        try:
            rec = json.loads(line)
        except ValueError:
            return None
        text = rec.get("log") if isinstance(rec, dict) else None
        return text.rstrip("\n") if isinstance(text, str) else None
    if line.endswith(_JSON_ENDS):
        s = line.strip().rstrip(",")
        if s[:1] == '"':
            try:
                text = json.loads(s)
            except ValueError:
                return None
            return text.rstrip("\n") if isinstance(text, str) else None
    return None


def peel(line: str) -> tuple[str, str]:
    """(key, body): launcher prefixes kept as the key, other decoration dropped (a line
    stored as a JSON string is read as its text first)."""
    if line and (line[0] == "{" or line[-1] in ",\""):
        text = json_text(line)
        if text is not None:
            line = clean_text(text) if "\x1b" in text else text
    if not line or (line[0] not in _PREFIX_START and ": [" not in line[:64] and " | " not in line[:48]
                    and line[8:12] != " || "):
        return "", line
    key = ""
    body = line
    for _ in range(MAX_LAYERS):
        if body and body[0] not in _PREFIX_START and ": [" in body[:64]:
            h = _HOST_PREFIX.match(body)
            if h:
                key += h.group(0).strip()
                body = body[h.end():]
                continue
        if not body or (body[0] not in _PREFIX_START and " | " not in body[:48] and body[8:12] != " || "):
            break
        m = _KEY_PREFIX.match(body)
        if m:
            key += m.group(0).strip()
            body = body[m.end():]
            continue
        m = _NOISE_PREFIX.match(body)
        if m and m.end() > 0:
            body = body[m.end():]
            continue
        break
    return key, body


def _cut_mid_token(lines: Sequence[str], width: int) -> bool:
    """A line of exactly `width` whose text goes on in the next line, cut in a token or at
    one space (`... (2 vs. 0)  ou` / `t of memory`, `== cudaSuccess ` / `(2 vs. 0)`): what a
    terminal copy does to one long line. (Padding or an indented next line is no cut.)"""
    for i in range(len(lines) - 1):
        s, t = lines[i], lines[i + 1]
        if (len(s) != width or len(t) < 2 or not s.strip(s[0]) or _LINE_START.match(t) or t.startswith(("```", "~~~"))
                or t.split(None, 1)[:1] == s.split(None, 1)[:1]):
            continue  # (a next line that begins as this one did is the next line of one format; a fence ends the paste)
        junction = s[-2:] + t[:2]
        if sum(c.isspace() for c in junction) <= 1:
            return True
    return False


def wrap_width(lines: Sequence[str]) -> int | None:
    """The terminal width a hard-wrapped copy was cut at, or None when it does not look
    wrapped: many lines of exactly the longest length, which real logs seldom have -- or,
    in a short paste or one with a single long line, a terminal's width that no line
    exceeds and at which a line's token is cut in two."""
    if len(lines) < 2:
        return None
    lens = list(map(len, lines))
    width = max(lens)
    if not WRAP_MIN_WIDTH <= width <= WRAP_MAX_WIDTH:
        return None
    full = lens.count(width)
    if len(lines) < 8 or full < (2 if width in TERMINAL_WIDTHS else WRAP_MIN_FULL_LINES):
        return width if width in TERMINAL_WIDTHS and _cut_mid_token(lines, width) else None
    # A cut makes a spike exactly at the width; lines of one format (progress lines whose
    # numbers vary by a digit) cluster just below their longest instead.
    near = sum(lens.count(width - k) for k in range(1, WRAP_NEAR_CHARS + 1))
    if near >= full:
        return None
    # ... and a line of one format is followed by another of the same format (the same
    # first characters), where a cut line is followed by the rest of its text (a sample
    # of the cut-looking lines is enough).
    cut = [i for i in range(len(lines) - 1) if lens[i] == width][:WRAP_SAMPLE_LINES]
    same = sum(1 for i in cut if lines[i + 1][:8] == lines[i][:8])
    if same * 2 > len(cut):
        return None
    # Padded screens (every line space-filled to the width) are not wraps. A cut at a word
    # boundary leaves one trailing space (the separator); padding leaves a run of them.
    padded = sum(1 for s in lines if len(s) == width and s.endswith("  "))
    # ... nor is a box drawn to the width (rich's traceback panel: every line ends in `│`)
    boxed = sum(1 for s in lines if len(s) == width and s.endswith(("│", "║", "╮", "╯")))
    return None if (padded + boxed) * 2 > full else width


CODE_BLOCK_INDENT = 4
"""Markdown's indented code block: a paste whose every line starts with four spaces (or a tab)."""
HOST_SAMPLE_LINES = 64
HOST_SHARE = 0.6
_HOST_TOKEN = re.compile(r"([A-Za-z0-9][\w.-]{0,62}): ")
_NOT_HOSTS = frozenset(("INFO", "WARNING", "WARN", "ERROR", "DEBUG", "CRITICAL", "FATAL", "NOTICE", "Traceback"))


def block_indent(lines: Sequence[str]) -> str:
    """The indent every non-blank line of `lines` starts with when the paste was made a
    markdown code block by indenting it (four spaces, or a tab), else "": a traceback's own
    indentation (frames at two spaces) never reaches it on every line. The first unindented
    line ends the test."""
    pad = ""
    for line in lines:
        if not line.strip():
            continue
        if not pad:
            pad = " " * CODE_BLOCK_INDENT if line.startswith(" " * CODE_BLOCK_INDENT) else "\t" if line[0] == "\t" else ""
            if not pad:
                return ""
        elif not line.startswith(pad):
            return ""
    return pad


def host_prefixes(lines: Sequence[str]) -> frozenset[str]:
    """The `host: ` prefixes pdsh (DeepSpeed's and others' multi-node launcher) puts before
    every line of each node, when they start most lines: a token with a digit, `-` or `.`
    in it (`worker-5: `, `node01: `, `10.0.0.2: `) seen three times or more. Tested on the
    first lines of a batch: the launcher prefixes every line, so they tell."""
    counts: dict[str, int] = {}
    seen = 0
    for line in lines:
        if not line.strip():
            continue
        seen += 1
        m = _HOST_TOKEN.match(line)
        if m is not None and m.group(1) not in _NOT_HOSTS and any(c.isdigit() or c in "-." for c in m.group(1)):
            counts[m.group(0)] = counts.get(m.group(0), 0) + 1
        if seen >= HOST_SAMPLE_LINES:
            break
    hosts = frozenset(h for h, n in counts.items() if n >= 3)
    return hosts if hosts and sum(counts[h] for h in hosts) >= HOST_SHARE * seen else frozenset()


GUTTER_MIN_LINES = 4
_GUTTER = re.compile(r" *(\d{1,7})(?:([ \t])|$)")
_FENCE = ("```", "~~~")


def gutter(lines: Sequence[str]) -> bool:
    """A paste copied with its editor's or `cat -n`'s line numbers: under whatever prefix a
    launcher or a markdown quote put first, every line starts with a number, the numbers
    count up by one from line to line (a fence around the paste or an empty line aside), and the gutter shows
    as such -- a source line that was blank keeps its number alone (` 514 `), or a tab
    follows the number (`cat -n`). A script's `step value` series counts up too, but none of
    its lines is a bare number and it is separated by spaces: it keeps its first column."""
    if len(lines) < GUTTER_MIN_LINES:
        return False
    n = None
    shown = False
    for line in lines:
        if line.startswith(_FENCE):
            continue
        body = peel(line)[1]
        if not body:
            continue  # (a quote marker alone, the paste's last line)
        m = _GUTTER.match(body)
        if m is None or (n is not None and int(m.group(1)) != n + 1):
            return False  # (the fast path: a log's first line seldom starts with a number and a space)
        n = int(m.group(1))
        shown = shown or m.group(2) in (None, "\t") or not body[m.end():].strip()
    return shown


def _ungutter(line: str) -> str:
    m = _GUTTER.match(line)
    return line[m.end():] if m is not None else line


PADDED_MIN_LINES = 3


def padded(lines: Sequence[str]) -> bool:
    """A screen copy (tmux, screen, a console window) whose short lines are filled with
    spaces to its width: several lines of exactly the longest length end in a run of
    spaces (a log's own lines seldom do; a cut line, full of text, does not)."""
    if len(lines) < PADDED_MIN_LINES:
        return False
    width = max(map(len, lines))
    return width >= WRAP_MIN_WIDTH and sum(
        1 for s in lines if len(s) == width and s.endswith("  ")) >= PADDED_MIN_LINES


class LazyRepair(Sequence[Line]):
    """The repaired lines of a batch with no hard wrap, each repaired when first read:
    most lines of a healthy log are never read past the batch-wide word search."""

    def __init__(self, lines: Sequence[str]):
        self._lines = lines
        self._done: dict[int, Line] = {}

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> Line: ...
    @overload
    def __getitem__(self, i: slice) -> list[Line]: ...
    def __getitem__(self, i: int | slice) -> Line | list[Line]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self._lines)
        ln = self._done.get(i)
        if ln is None:
            raw = self._lines[i]
            text = clean_text(raw) if ("\x1b" in raw or "\x00" in raw) else raw
            key, body = peel(text)
            ln = self._done[i] = Line(body, key, i, raw)
        return ln


def repaired(lines: Sequence[str]) -> Sequence[Line]:
    """Repaired lines: joined where the batch is hard-wrapped, else repaired lazily. A
    batch whose capture put something on every line first -- a screen's padding, a
    markdown code block's indent, pdsh's `host: `, an editor's line numbers -- is read
    without it (the host kept as the line's key; evidence shows the lines as they came)."""
    given = lines
    numbered = gutter(lines)
    pad = padded(lines)
    if pad:  # (a line cut at a word keeps its one separating space: its length stays the width)
        lines = [line.rstrip() if line.endswith("  ") else line for line in lines]
    indent = block_indent(lines)
    if indent:
        lines = [line[len(indent):] for line in lines]
    hosts = host_prefixes(lines)
    keys: list[str] = []
    if hosts:
        keys = [next((h for h in hosts if line.startswith(h)), "") for line in lines]
        lines = [line[len(k):] for line, k in zip(lines, keys)]
    width = wrap_width(lines)
    rep = repair(lines, width) if width is not None else LazyRepair(lines)
    if not (numbered or pad or indent or hosts):
        return rep
    out = rep if isinstance(rep, list) else list(rep)
    for ln in out:
        if numbered:  # (the number sits under the launcher's or the quote's prefix, over the line's own)
            key, ln.text = peel(_ungutter(ln.text))
            ln.key += key
        if ln.raw == lines[ln.src]:  # (a line joined from a wrap keeps its joined text)
            ln.raw = given[ln.src]
        if keys and keys[ln.src]:
            ln.key = keys[ln.src].strip() + ln.key
    return out


def repair(lines: Sequence[str], width: int | None = None) -> list[Line]:
    """Repaired lines; a line cut at `width` is joined with its continuation."""
    out: list[Line] = []
    i, n = 0, len(lines)
    while i < n:
        raw = lines[i]
        text = raw
        start = i
        if width is not None:
            while (len(text) >= width and i + 1 < n and lines[i + 1] and text.strip(text[0])
                   and not _LINE_START.match(lines[i + 1])):
                i += 1
                text += lines[i]
                if len(lines[i]) < width:
                    break
        if "\x1b" in text or "\x00" in text:
            text = clean_text(text)
        key, body = peel(text)
        out.append(Line(body, key, start, raw if start == i else text))
        i += 1
    return out
