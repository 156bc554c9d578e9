"""Number, duration and "unknown" formatting shared by every widget.

One place decides how a missing value looks (`n/a`, nvitop's rule: unknown for that field
only) and how big numbers are shortened (`21.5K tok/s`), so the fleet row and the full view
never disagree about the same figure.
"""

from __future__ import annotations

import math
from typing import TypeGuard

NA = "n/a"

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_LABEL = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}
STATE_STYLE = {
    "running": "green", "starting": "cyan", "finished": "blue", "failed": "bold red", "stopped": "yellow",
    "ended": "blue", "unreachable": "bold magenta", "unknown": "dim",
}


def known(value: float | None) -> TypeGuard[float]:
    """True for a finite number (None, NaN and Inf are all "unknown" on screen)."""
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def si(value: float | None, digits: int = 1) -> str:
    """21534.2 -> '21.5K', 1.2e6 -> '1.2M', 950 -> '950'; unknown -> 'n/a'."""
    if not known(value):
        return NA
    v = float(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= limit:
            return f"{v / limit:.{digits}f}{suffix}"
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.{digits}f}"


def num(value: float | None, digits: int = 2) -> str:
    """Fixed decimals, or 'n/a'."""
    return f"{float(value):.{digits}f}" if known(value) else NA


def duration(seconds: float | None) -> str:
    """Seconds -> '59s', '2m05s', '1h02m', '2d03h'; unknown or negative -> 'n/a'."""
    if not known(seconds) or seconds < 0:
        return NA
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def deficit_pct(value: float | None, baseline: float | None) -> float | None:
    """How far below the baseline, in % (negative = above it); None when either is unknown."""
    if not known(value) or not known(baseline) or baseline <= 0:
        return None
    return (baseline - value) / baseline * 100.0


def deficit_text(value: float | None, baseline: float | None) -> tuple[str, str]:
    """('-42.3%', style) for the deficit against the baseline; ('', '') without a baseline."""
    d = deficit_pct(value, baseline)
    if d is None:
        return ("", "")
    style = "green" if d <= 5 else ("yellow" if d <= 15 else "bold red")
    return (f"{-d:+.1f}%", style)
