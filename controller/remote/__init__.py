"""The stdlib-only kit that runs on the node: the probe agent (with its log reader), the process
scan, the launcher (and proc_stat, the one /proc/<pid>/stat parser, which all three use).

Nothing here imports anything of ours (tests/test_house.py): each file is shipped as text and
run by the node's own Python, which may be as old as 3.6 and has none of our packages.
`script()` is the one way the controller side takes that text, so every script is assembled
the same way: a script that builds on another (the scan runs inside the probe's bootstrap)
is the concatenation of both, the later one's `main` winning. Every script is preceded by
proc_stat.py's text (INCLUDED): the kit splits /proc/<pid>/stat lines in that one place; each
script imports those names only when it is imported as a module (tests, type checks).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

KIT_DIR = Path(__file__).resolve().parent
KIT_SCRIPTS = ("proc_stat", "log_reader", "probe_agent", "process_scan", "launcher")
INCLUDED = ("proc_stat",)
"""Shipped ahead of every script, once."""
NEEDS = {"probe_agent": ("log_reader",)}
"""Scripts shipped ahead of a script that builds on them (the agent forks its log reader)."""


@lru_cache(maxsize=None)
def script(*names: str) -> str:
    """The text shipped for `names` (kit modules, in order), read once per process."""
    unknown = [n for n in names if n not in KIT_SCRIPTS]
    if not names or unknown:
        raise ValueError(f"not a script of the remote kit: {unknown or names!r} (kit: {', '.join(KIT_SCRIPTS)})")
    wanted = [d for n in names for d in NEEDS.get(n, ()) + (n,)]
    names = INCLUDED + tuple(n for i, n in enumerate(wanted) if n not in INCLUDED and n not in wanted[:i])
    parts = [(KIT_DIR / f"{n}.py").read_text(encoding="utf-8") for n in names]
    return "".join(p if i == 0 else f"\n\n# ---- {names[i]}.py ----\n{p}" for i, p in enumerate(parts))
