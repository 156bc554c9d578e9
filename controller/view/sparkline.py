"""A small block chart of a series over the run's life, with a baseline drawn through it.

Rows of eighth blocks, one column per time bucket. The baseline is a horizontal `─` line in
the row where it falls, visible wherever a column does not reach it, so "how far below the
reference" reads at a glance; columns are coloured by their deficit against the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from controller.view.format import known, si

_BLOCKS = " ▁▂▃▄▅▆▇█"


def resample(values: Sequence[float | None], xs: Sequence[float | None], width: int) -> list[float | None]:
    """Mean of the known values in each of `width` equal x buckets (None for an empty bucket)."""
    pts = [(x, v) for x, v in zip(xs, values) if known(v) and known(x)]
    if not pts or width <= 0:
        return [None] * max(width, 0)
    x0, x1 = pts[0][0], pts[-1][0]
    if len(pts) <= width or x1 <= x0:
        # Fewer points than columns: one column per point, right-aligned like a scrolling chart.
        tail = [v for _, v in pts[-width:]]
        return [None] * (width - len(tail)) + tail
    sums = [0.0] * width
    counts = [0] * width
    span = x1 - x0
    for x, v in pts:
        i = min(width - 1, int((x - x0) / span * width))
        sums[i] += v
        counts[i] += 1
    return [s / c if c else None for s, c in zip(sums, counts)]


def _column_style(value: float, baseline: float | None) -> str:
    if not known(baseline) or baseline <= 0:
        return "cyan"
    ratio = value / baseline
    return "green" if ratio >= 0.95 else ("yellow" if ratio >= 0.85 else "red")


AXIS_WIDTH = 7
"""Cells of the y-axis gutter: a value like `21.5K` and a tick (`┤`)."""


def _axis_labels(rows: int, top: float, base_row: int | None, baseline: float | None) -> dict[int, tuple[str, str]]:
    """{row: (label, style)}: the scale's top, 0 at the bottom, the baseline's value on its row."""
    labels = {rows - 1: (si(top), "dim"), 0: ("0", "dim")}
    if base_row is not None and known(baseline):
        labels[base_row] = (si(baseline), "yellow")
    return labels


def chart(values: Sequence[float | None], xs: Sequence[float | None], width: int, rows: int,
          baseline: float | None = None, *, axis: bool = False) -> list[Text]:
    """`rows` lines of `width` cells; the top of the scale is max(series, baseline) + 5%.
    With `axis`, the first AXIS_WIDTH cells are a y-axis: the top value, 0, and the
    baseline's value on the row its line is drawn in."""
    if width <= 0 or rows <= 0:
        return []
    gutter = AXIS_WIDTH if axis and width > AXIS_WIDTH + 8 else 0
    width -= gutter
    cols = resample(values, xs, width)
    top = max([v for v in cols if v is not None] + ([baseline] if known(baseline) else []), default=0.0)
    top = top * 1.05 if top > 0 else 1.0
    heights = [None if v is None else max(0, round(v / top * rows * 8)) for v in cols]
    base_row: int | None = None
    base_h = 0                                                # read only in base_row's row
    if known(baseline) and baseline > 0:
        base_h = round(baseline / top * rows * 8)             # in eighths from the bottom
        base_row = min(rows - 1, base_h // 8)                 # 0 = bottom row
    labels = _axis_labels(rows, top, base_row, baseline) if gutter else {}
    lines = []
    for r in range(rows - 1, -1, -1):
        line = Text(no_wrap=True, overflow="crop")
        if gutter:
            label, style = labels.get(r, ("", "dim"))
            line.append(label.rjust(gutter - 1)[-(gutter - 1):], style=style)
            line.append("┤" if r in labels else "│", style="dim")
        for v, h in zip(cols, heights):
            cell_h = 0 if h is None else min(8, max(0, h - r * 8))
            if r == base_row and (h is None or h < base_h):  # the column stays below the line
                line.append("─", style="dim yellow")
            elif h is None or v is None:                      # (h is None exactly when v is)
                line.append(" ")
            else:
                line.append(_BLOCKS[cell_h], style=_column_style(v, baseline))
        lines.append(line)
    return lines
