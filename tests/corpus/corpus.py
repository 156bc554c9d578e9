"""The labelled corpus: loading it, deriving its capture variants, and judging a reader.

`entries()` yields every committed log (logs/, made by generate.py by running the real
frameworks; cited/, lines only hardware or services we lack print, each beside its
source; device/, made on a lent NVIDIA H200 by device/programs/make_device_logs.sh;
pasted/, logs users pasted into public issues, verbatim, with their `owner/repo#N`) with
its label and its `part`. A pasted log is held out by its repository (`pasted_heldout`,
the rule of tests/corpus/README.md), computed here, never stored. `VARIANTS` are the ways people capture the same output --
derived by a committed transform, not generated again:

- wrapped:   hard-wrapped at 80 columns, as a terminal copy is (tokens cut in two);
- prefixed:  every line under a launcher prefix (`[rank3]: `, `[default0]:`,
             `(RayTrainWorker pid=3369) [rank7]: `, `[1,0]<stderr>:`) and a logger's
             timestamp, chosen per log;
- ansi:      exception names, numbers and levels coloured with ANSI escapes;
- cr:        progress-looking lines joined with `\\r` instead of `\\n` (tqdm's redraw);
- quoted:    pasted into markdown: a ``` fence or `> ` quote markers.

A variant must classify like its original: same expected kinds, and a healthy log stays
quiet. `judge` runs the check-log path (split_lines over the bytes, TextScanner) and
returns the failure kinds found and whether the `must` words appear in a summary.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAILURE_KINDS = ("oom", "crash", "hang", "nan")
LABELLED_KINDS = FAILURE_KINDS + ("recompile",)


@dataclass(frozen=True)
class Entry:
    name: str
    framework: str
    path: Path
    expect: tuple[str, ...]
    must: tuple[str, ...]
    heldout: bool
    source: str = ""          # cited: file and line of the wording; pasted: owner/repo#N
    part: str = "generated"   # "generated" | "cited" | "device" | "pasted"
    sample: str = ""          # pasted: the date of a held-out sample drawn after the readers (index "sample")

    @property
    def healthy(self) -> bool:
        return not any(k in FAILURE_KINDS for k in self.expect)


PARTS = ("generated", "cited", "device", "pasted")
PASTED = HERE / "pasted"
HELDOUT_BUCKETS = 3
"""A pasted log is held out iff its repository's SHA-1 (as an integer) mod 10 is below this:
the split is by repository, fixed before any rule was written for the pasted part."""


def pasted_heldout(source: str) -> bool:
    """The held-out rule of the pasted part: by the `owner/repo` of `owner/repo#N`."""
    repo = source.split("#", 1)[0].strip().lower()
    return int(hashlib.sha1(repo.encode()).hexdigest(), 16) % 10 < HELDOUT_BUCKETS


def _as_tuple(v) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):  # a collector's "oom" for ["oom"]: the same label, one spelling
        return (v,) if v else ()
    return tuple(str(x) for x in v)


def pasted_entries() -> Iterator[Entry]:
    """The pasted part: every tests/corpus/pasted/index-*.json, its logs in pasted/logs/.
    An entry whose log is missing or whose source names no repository is left out (a
    collector's commit in progress), never guessed."""
    for idx_path in sorted(PASTED.glob("index-*.json")):
        for name, e in sorted(json.loads(idx_path.read_text()).items()):
            path = PASTED / "logs" / f"{name}.log"
            source = str(e.get("source") or "")
            if not path.exists() or "/" not in source.split("#", 1)[0]:
                continue
            yield Entry(name, str(e.get("framework") or "unknown").lower(), path, _as_tuple(e.get("expect")),
                        _as_tuple(e.get("must")), pasted_heldout(source), source, "pasted", str(e.get("sample") or ""))


def entries() -> Iterator[Entry]:
    for part, idx_path in (("generated", HERE / "index.json"), ("cited", HERE / "cited" / "index.json"),
                           ("device", HERE / "device" / "index.json")):
        if not idx_path.exists():
            continue
        for name, e in json.loads(idx_path.read_text()).items():
            path = idx_path.parent / ("logs" if idx_path.parent == HERE else "") / f"{name}.log"
            if not path.exists():
                continue
            yield Entry(name, e["framework"], path, tuple(e.get("expect", ())), tuple(e.get("must", ())),
                        bool(e.get("heldout")), e.get("source", ""), part)
    yield from pasted_entries()


# -- variants -------------------------------------------------------------------------

def _seed(text: str) -> int:
    return int(hashlib.sha1(text[:4096].encode("utf-8", "replace")).hexdigest()[:8], 16)


def wrapped(text: str, width: int = 80) -> str:
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


PREFIXES = ("[rank3]: ", "[default0]:", "(RayTrainWorker pid=3369) [rank7]: ", "[1,0]<stderr>:",
            "[2026-12-01 10:00:00,123] [INFO] ", "2026-12-01T10:00:00.123Z ", "12345 | ")


def prefixed(text: str) -> str:
    p = PREFIXES[_seed(text) % len(PREFIXES)]
    return "\n".join(p + line if line else line for line in text.split("\n"))


_ANSI_TARGETS = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)|INFO|WARNING|ERROR|nan|\d+(?:\.\d+)?)\b")


def ansi(text: str) -> str:
    return _ANSI_TARGETS.sub(lambda m: f"\x1b[1;31m{m.group(0)}\x1b[0m", text)


_PROGRESS = re.compile(r"\d+%\||\bstep[ =]\d+|\bEpoch \d+|it/s\]")


def cr_joined(text: str) -> str:
    lines = text.split("\n")
    out = []
    for line in lines:
        if out and _PROGRESS.search(line) and _PROGRESS.search(out[-1]) and len(out[-1]) < 4000:
            out[-1] += "\r" + line
        else:
            out.append(line)
    return "\n".join(out)


def quoted(text: str) -> str:
    if _seed(text) % 2:
        return "```\n" + text.rstrip("\n") + "\n```\n"
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


VARIANTS: dict[str, Callable[[str], str]] = {
    "wrapped": wrapped, "prefixed": prefixed, "ansi": ansi, "cr": cr_joined, "quoted": quoted,
}
PASTED_VARIANTS = ("quoted", "prefixed")
"""A pasted log is already captured text (wrapped, coloured, redrawn as its user's terminal
made it): only the ways it is passed on again apply -- quoted into markdown once more, or
collected through a launcher/logger that prefixes each line."""


def variants_of(entry: Entry) -> tuple[str, ...]:
    return PASTED_VARIANTS if entry.part == "pasted" else tuple(VARIANTS)


# -- judging ----------------------------------------------------------------------------

def scan_bytes(data: bytes, chunk: int = 1 << 20, scanner=None):
    """The check-log path: split_lines over `chunk`-byte reads, fed to a TextScanner."""
    import controller

    # the tree as built, or an older commit's flat one (bench/detectors.py): told by the package's
    # own files -- a failed import would be answered by the editable install's finder instead
    if (Path(controller.__file__).parent / "judge").is_dir():
        from controller.follow.logparse import flush_carry, split_lines
        from controller.judge import TextScanner
    else:
        from controller.detectors import TextScanner  # type: ignore[no-redef]
        from controller.logparse import flush_carry, split_lines  # type: ignore[no-redef]

    scanner = scanner or TextScanner(now_s=0.0)
    carry = b""
    for i in range(0, len(data), chunk):
        lines, carry = split_lines(data[i:i + chunk], carry)
        scanner.feed(lines)
    scanner.feed(flush_carry(carry))
    scanner.finish()
    return scanner.all_findings()


@dataclass(frozen=True)
class Verdict:
    found: tuple[str, ...]        # labelled kinds found
    missing: tuple[str, ...]      # expected kinds not found
    false_alarm: tuple[str, ...]  # failure kinds found in a healthy log
    must_missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.false_alarm and not self.must_missing


def judge(entry: Entry, findings) -> Verdict:
    kinds = sorted({f.kind for f in findings if f.kind in LABELLED_KINDS})
    missing = tuple(k for k in entry.expect if k not in kinds)
    false_alarm = tuple(k for k in kinds if k in FAILURE_KINDS) if entry.healthy else ()
    summaries = " | ".join(f.summary for f in findings)
    must_missing = tuple(w for w in entry.must if w not in summaries)
    return Verdict(tuple(kinds), missing, false_alarm, must_missing)
