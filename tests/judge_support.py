"""What the shape tests of the judge (tests/test_detectors_shapes*.py) share: a text read as
check-log reads it, and the failure kinds found in it."""

from __future__ import annotations

from controller.judge import TextScanner
from controller.records import Finding

FAILURE_KINDS = ("oom", "crash", "hang", "nan")


def final_read(lines: list[str]) -> list[Finding]:
    """check-log's path: the whole text, then finish() (the text is final)."""
    sc = TextScanner(now_s=0.0)
    sc.feed(lines)
    sc.finish()
    return sc.all_findings()


def failure_kinds(findings, kinds: tuple[str, ...] = FAILURE_KINDS) -> list[str]:
    """The failure kinds among `findings`, sorted, once each (notes and warnings of other
    kinds -- stale_log, throughput -- left out)."""
    return sorted({f.kind for f in findings if f.kind in kinds})


def summaries_by_kind(lines: list[str]) -> dict[str, list[str]]:
    """The final read's failure findings' summaries, by kind (the shape tests of rounds ten
    and eleven each had a copy)."""
    out: dict[str, list[str]] = {}
    for f in final_read(lines):
        if f.kind in FAILURE_KINDS:
            out.setdefault(f.kind, []).append(f.summary)
    return out
