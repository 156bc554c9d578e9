"""Shared by bench/dashboard.py and bench/compare.py: both write their figures into one
file, bench/results/dashboard.md, each replacing only its own marked section."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "dashboard.md"
TITLE = "# Dashboard, metric history and compare-runs: benchmark figures\n"


def machine() -> str:
    try:
        import psutil

        mem = f", {psutil.virtual_memory().total / 2**30:.0f} GiB"
    except Exception:  # noqa: BLE001
        mem = ""
    return f"{platform.node()} ({platform.system()} {platform.release()}, {os.cpu_count()} cores{mem}, Python {platform.python_version()})"


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def write_section(name: str, body: str, path: Path = RESULTS) -> None:
    """Replace the section between `<!-- begin NAME -->` and `<!-- end NAME -->`
    (appended before any trailing sections if missing); the rest of the file is kept."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else TITLE
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + "\n" + tail.lstrip("\n")
    else:
        marker = "\n## README example"
        if marker in text:
            head, tail = text.split(marker, 1)
            text = head.rstrip() + "\n\n" + block + "\n" + marker.lstrip("\n") + tail
        else:
            text = text.rstrip() + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
