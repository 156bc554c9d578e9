"""The last log lines, with carriage-return progress redraws (tqdm) collapsed to the latest.

The probe already treats `\r` as a line end (FIELD-NOTES), so one tqdm bar arrives as many
consecutive lines that differ only in their numbers: keep the last of each such run. Lines
are cleaned of ANSI escapes and control bytes so a hostile log cannot move the cursor.
"""

from __future__ import annotations

import re

from rich.text import Text

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_REDRAW = re.compile(r"\d+%\|| \d+(\.\d+)?(it/s|s/it)\b|\[\d+:\d+<")
_DIGITS = re.compile(r"\d+(\.\d+)?")


def clean_line(line: str) -> str:
    """The text after the last `\r` redraw, without ANSI escapes or control bytes."""
    parts = [p for p in line.split("\r") if p.strip()]
    line = parts[-1] if parts else ""
    line = _ANSI.sub("", line).replace("\t", "    ")
    return _CONTROL.sub("", line).rstrip("\n")


def collapse_redraws(lines: list[str]) -> list[str]:
    """Clean each line; of consecutive progress-bar redraws of the same shape keep the last."""
    out: list[str] = []
    shape_prev = None
    for raw in lines:
        line = clean_line(raw)
        if not line.strip():
            shape_prev = None
            continue
        m = _REDRAW.search(line)
        shape = _DIGITS.sub("#", line[: m.start()]).rstrip() if m else None  # "Loading shards: " etc.
        if shape is not None and shape == shape_prev and out:
            out[-1] = line
        else:
            out.append(line)
        shape_prev = shape
    return out


def log_lines(log_tail: list[str], width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """The newest `max_lines` collapsed lines, each cut to the width."""
    if max_lines <= 0:
        return []
    lines = collapse_redraws(log_tail)[-max_lines:]
    if not lines:
        return [Text("(log empty)", style="dim")]
    out = []
    for line in lines:
        style = "red" if re.search(r"Error|Traceback|Killed|out of memory", line) else ""
        out.append(Text(line, style=style, no_wrap=True, overflow="ellipsis"))
    return out
