"""How findings carry their evidence: clipped lines, a bounded count, signal names."""

from __future__ import annotations

import signal as _signal
from collections.abc import Iterable
from dataclasses import replace

from controller.records import Finding

EVIDENCE_LINE_CHARS = 600
EVIDENCE_LINES = 10
FAILURE_KINDS = ("oom", "crash", "hang", "nan")


def clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= EVIDENCE_LINE_CHARS else line[:EVIDENCE_LINE_CHARS] + " …"


def bounded(evidence: Iterable[str]) -> tuple[str, ...]:
    return tuple(clip(e) for e in list(evidence)[:EVIDENCE_LINES])


def with_evidence(f: Finding, evidence: Iterable[str]) -> Finding:
    return replace(f, evidence=bounded(evidence))


def signal_name(signum: int) -> str | None:
    try:
        return _signal.Signals(signum).name
    except (ValueError, AttributeError):
        return None


def signal_suffix(signum: int) -> str:
    name = signal_name(signum)
    return f", {name}" if name else ""
