"""The live terminal dashboard: render(states) -> a Rich renderable (placeholder; issue 5).

It only reads `RunState`s (controller/model.py); the Live loop lives in the watch command.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from controller.model import RunState


def render(states: list[RunState], selected: int = 0) -> RenderableType:
    """The whole screen for these runs; `selected` picks the run shown in full."""
    lines = [f"{s.name or s.run_id}  {s.state}" for s in states]
    return Text("\n".join(lines) or "no runs")
