"""compare-runs --plot: throughput, loss and tau (the accepted length per block) of every
run, one panel each, all over the same x axis (minutes since the first sample, or step).

What a reader needs to trust the picture is on it: the warm-up each run's verdict leaves
out is shaded in that run's colour, the baseline is a dashed line with its value, and each
verdict with its 95% interval is in the title. The format follows the file's extension
(png, svg, pdf, …: whatever matplotlib's Agg canvas writes); any other extension is refused
before any run is read (`plot_format`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from controller.compare.stats import STATE_LABEL, Comparison, RunSummary, interval_text
from controller.errors import BadInputError
from controller.view.format import si

if TYPE_CHECKING:
    from matplotlib.figure import Figure  # matplotlib is imported lazily (start-up time)

PLOT_SIZE_PX = (1500, 500)
PLOT_DPI = 100
X_AXES = ("time", "step")


def supported_formats() -> dict[str, str]:
    """{extension: description} of the formats matplotlib's canvas writes here."""
    from matplotlib.backend_bases import FigureCanvasBase

    return dict(FigureCanvasBase.get_supported_filetypes())


def plot_format(path: str) -> str:
    """The image format `path`'s extension names; BadInputError for none or an unknown one."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    formats = supported_formats()
    if ext not in formats:
        names = ", ".join(sorted(formats))
        what = f"extension .{ext}" if ext else "no extension"
        raise BadInputError(f"--plot {path}: {what} names no image format this matplotlib writes",
                            hint=f"end the file name in one of: {names}")
    return ext


def _x(r: RunSummary, steps: np.ndarray, x_axis: str) -> np.ndarray:
    """The x of values logged at `steps`: the steps, or their minutes (interpolated on the
    run's own step -> clock series)."""
    if x_axis == "step" or r.plot_clock is None or r.plot_clock[0].size < 2:
        return steps
    clock_steps, clock_min = r.plot_clock
    return np.interp(steps, clock_steps, clock_min)


def _warmup_end(r: RunSummary, x_axis: str) -> float | None:
    w = r.window
    if not w.warm:
        return None
    if x_axis == "step":
        return float(w.first_step) if w.first_step is not None else None
    return w.start_s / 60.0 if w.start_s is not None else None


def _title(cmp: Comparison) -> str:
    bits = []
    for r in cmp.runs:
        if r.is_baseline or not r.verdict:
            continue
        ci = f" (95% CI {interval_text(r.ci_pct)})" if r.ci_pct else ""
        bits.append(f"{r.label}: {r.verdict}{ci}")
    base = f"vs {cmp.baseline_label or si(cmp.baseline_tok_per_s)}" if cmp.baseline_tok_per_s else ""
    return (f"{base} — " if base and bits else base) + "; ".join(bits)


def write_plot(cmp: Comparison, path: str, x_axis: str = "time") -> str:
    """Three panels (tok/s, loss, tau) over one x axis, PLOT_SIZE_PX pixels, in the format
    of `path`'s extension (SVG keeps its text as text)."""
    fmt = plot_format(path)
    import matplotlib.pyplot as plt

    fig = build_figure(cmp, x_axis)
    try:
        with plt.rc_context({"svg.fonttype": "none"}):
            fig.savefig(path, dpi=PLOT_DPI, format=fmt)
    except OSError as exc:
        raise BadInputError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path


def build_figure(cmp: Comparison, x_axis: str = "time") -> Figure:
    """The matplotlib Figure of write_plot (Agg backend: no display needed)."""
    if x_axis not in X_AXES:
        raise BadInputError(f"--plot-x {x_axis!r}: expected one of {', '.join(X_AXES)}")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    w, h = PLOT_SIZE_PX
    fig, (ax_tok, ax_loss, ax_tau) = plt.subplots(1, 3, figsize=(w / PLOT_DPI, h / PLOT_DPI), dpi=PLOT_DPI,
                                                  sharex=True)
    for r in cmp.runs:
        state = STATE_LABEL.get(r.end_state, r.end_state)
        if r.plot_tok is None or r.plot_loss is None or (r.plot_tok.size == 0 and r.plot_loss.size == 0):
            ax_tok.plot([], [], label=f"{r.label} ({state}, no samples)")
            continue
        assert r.plot_minutes is not None and r.plot_tok_steps is not None and r.plot_steps is not None  # thinned together
        suffix = " (baseline)" if r.is_baseline else ("" if r.end_state in ("finished", "running") else f" ({state})")
        x_tok = r.plot_minutes if x_axis == "time" else r.plot_tok_steps
        (line,) = ax_tok.plot(x_tok, r.plot_tok, label=r.label + suffix, linewidth=1.2)
        color = line.get_color()
        ax_loss.plot(_x(r, r.plot_steps, x_axis), r.plot_loss, label=r.label, linewidth=1.2, color=color)
        if r.plot_tau is not None and r.plot_tau.size and r.plot_tau_steps is not None:
            ax_tau.plot(_x(r, r.plot_tau_steps, x_axis), r.plot_tau, label=r.label, linewidth=1.2, color=color)
        end = _warmup_end(r, x_axis)
        if end is not None:
            start = float(x_tok[0]) if x_tok.size else 0.0
            for ax in (ax_tok, ax_loss, ax_tau):
                ax.axvspan(start, end, color=color, alpha=0.08, linewidth=0)
    if cmp.baseline_tok_per_s:
        ax_tok.axhline(cmp.baseline_tok_per_s, color="black", linestyle="--", linewidth=1,
                       label=f"baseline {si(cmp.baseline_tok_per_s)}")
    xlabel = "minutes since first sample" if x_axis == "time" else "step"
    for ax, title, ylabel in ((ax_tok, "throughput (shaded: warm-up left out)", "tok/s"), (ax_loss, "loss", "loss"),
                              (ax_tau, "τ (accepted length per block)", "τ")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_tok.legend(fontsize=8, loc="best")
    if not ax_tau.lines:
        ax_tau.text(0.5, 0.5, "no τ logged", transform=ax_tau.transAxes, ha="center", va="center", alpha=0.6)
    title = _title(cmp)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
