"""Horizontal bars (utilisation, memory) drawn with eighth-block characters."""

from __future__ import annotations

from rich.text import Text

from controller.view.format import NA

_PARTIAL = " ▏▎▍▌▋▊▉"


def level_style(fraction: float) -> str:
    """Green while there is room, yellow when high, red when nearly full."""
    return "red" if fraction >= 0.95 else ("yellow" if fraction >= 0.80 else "green")


def bar(fraction: float | None, width: int, *, style: str | None = None) -> Text:
    """A bar `width` cells wide; an unknown fraction draws 'n/a' in the same width."""
    if width <= 0:
        return Text("")
    if fraction is None:
        return Text(NA.center(width)[:width], style="dim")
    f = min(1.0, max(0.0, float(fraction)))
    eighths = round(f * width * 8)
    full, part = divmod(eighths, 8)
    body = "█" * full + (_PARTIAL[part] if part and full < width else "")
    text = Text(body, style=style or level_style(f))
    text.append("·" * (width - len(body)), style="bright_black")
    return text
