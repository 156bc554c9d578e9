"""A program that refused its command line: argparse (and click/typer) print a usage
line and then `prog: error: what` and exit 2 -- often the only text a failed launch
leaves (a misspelled flag in a playbook's args, issue 13.3)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from controller.judge.repair import Line

_USAGE = re.compile(r"^\s*[Uu]sage: \S")
_ERROR = re.compile(r"^(?P<prog>\S+(?: \S+){0,2}): error: (?P<msg>.+)$|^Error: (?P<click>(?:No such option|Missing "
                    r"(?:argument|option)|Invalid value|Got unexpected extra argument).*)$")
LOOKAHEAD_LINES = 30


def usage_errors(lines: Sequence[Line]) -> list[tuple[int, int, str]]:
    """(usage line index, error line index, 'prog: error: msg') for each refusal."""
    out = []
    usage_at: dict[str, int] = {}
    for i, ln in enumerate(lines):
        text = ln.text
        if "sage:" in text and _USAGE.match(text):
            usage_at[ln.key] = i
            continue
        if "rror" not in text:
            continue
        start = usage_at.get(ln.key)
        if start is None or i - start > LOOKAHEAD_LINES:
            continue
        m = _ERROR.match(text.strip())
        if m:
            out.append((start, i, text.strip()))
            del usage_at[ln.key]
    return out
