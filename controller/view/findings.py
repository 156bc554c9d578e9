"""Findings, newest first, coloured by severity, with evidence and the next step."""

from __future__ import annotations

import time

from rich.text import Text

from controller.records import SEVERITY_RANK, Finding
from controller.view.format import SEVERITY_LABEL, SEVERITY_STYLE, known
from controller.view.logtail import clean_line


def newest_first(findings: list[Finding]) -> list[Finding]:
    """Newest first; ties (or unknown times) put the more severe one first."""
    return sorted(findings, key=lambda f: (f.first_seen_s if known(f.first_seen_s) else float("-inf"),
                                           SEVERITY_RANK.get(f.severity, 0)), reverse=True)


def worst(findings: list[Finding]) -> Finding | None:
    """The most severe finding, the newest among equals."""
    ordered = newest_first(findings)
    return max(ordered, key=lambda f: SEVERITY_RANK.get(f.severity, 0)) if ordered else None


def _headline(f: Finding) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    style = SEVERITY_STYLE.get(f.severity, "")
    t.append(f"{SEVERITY_LABEL.get(f.severity, f.severity.upper()[:4]):<4} ", style=style)
    t.append(f"{f.kind:<9} ", style=style)
    if known(f.first_seen_s):
        t.append(time.strftime("%H:%M:%S ", time.localtime(f.first_seen_s)), style="dim")
    t.append(f.summary, style=style if f.severity == "critical" else "")
    return t


def finding_lines(findings: list[Finding], width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """Each finding: a headline; the newest ones also get evidence and hint lines while
    room lasts (the most severe gets them first, so an OOM's evidence is never crowded out)."""
    if max_lines <= 0:
        return []
    if not findings:
        return [Text("no findings", style="green", no_wrap=True)]
    ordered = newest_first(findings)
    heads = min(len(ordered), max_lines)
    spare = max_lines - heads
    details: dict[int, list[Text]] = {}
    for i in sorted(range(heads), key=lambda i: -SEVERITY_RANK.get(ordered[i].severity, 0)):
        f = ordered[i]
        extra: list[Text] = []
        if f.evidence and spare > len(extra):
            extra.append(Text("  │ " + clean_line(f.evidence[-1] if f.kind != "oom" else f.evidence[0]),
                              style="dim", no_wrap=True, overflow="ellipsis"))
        if f.hint and spare > len(extra):
            extra.append(Text("  → " + f.hint, style="italic", no_wrap=True, overflow="ellipsis"))
        spare -= len(extra)
        details[i] = extra
    lines: list[Text] = []
    for i in range(heads):
        lines.append(_headline(ordered[i]))
        lines += details.get(i, [])
    if heads < len(ordered):
        lines[-1] = Text(f"… +{len(ordered) - heads + 1} more findings", style="dim", no_wrap=True)
    return lines
