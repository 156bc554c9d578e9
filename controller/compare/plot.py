"""compare-runs --plot: throughput over time and loss by step of every run, one image."""

from __future__ import annotations

from controller.compare.stats import STATE_LABEL, Comparison
from controller.errors import BadInputError
from controller.widgets.format import si

PLOT_SIZE_PX = (1200, 500)
PLOT_DPI = 100


def write_plot(cmp: Comparison, path: str) -> str:
    """tok/s over time (left, baseline dashed) and loss by step (right), as a PNG of
    PLOT_SIZE_PX pixels. matplotlib's Agg backend: no display needed."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    w, h = PLOT_SIZE_PX
    fig, (ax_tok, ax_loss) = plt.subplots(1, 2, figsize=(w / PLOT_DPI, h / PLOT_DPI), dpi=PLOT_DPI)
    for r in cmp.runs:
        if r.plot_tok is None or (r.plot_tok.size == 0 and r.plot_loss.size == 0):
            ax_tok.plot([], [], label=f"{r.label} ({STATE_LABEL.get(r.end_state, r.end_state)}, no samples)")
            continue
        x, y = r.plot_minutes, r.plot_tok
        suffix = " (baseline)" if r.is_baseline else ("" if r.end_state in ("finished", "running") else
                                                     f" ({STATE_LABEL.get(r.end_state, r.end_state)})")
        ax_tok.plot(x, y, label=r.label + suffix, linewidth=1.2)
        ax_loss.plot(r.plot_steps, r.plot_loss, label=r.label, linewidth=1.2)
    if cmp.baseline_tok_per_s:
        ax_tok.axhline(cmp.baseline_tok_per_s, color="black", linestyle="--", linewidth=1,
                       label=f"baseline {si(cmp.baseline_tok_per_s)}")
    ax_tok.set_title("throughput")
    ax_tok.set_xlabel("minutes since first sample")
    ax_tok.set_ylabel("tok/s")
    ax_tok.grid(alpha=0.3)
    ax_tok.legend(fontsize=8, loc="best")
    ax_loss.set_title("loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss")
    ax_loss.grid(alpha=0.3)
    if ax_loss.lines:
        ax_loss.legend(fontsize=8, loc="best")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=PLOT_DPI, format="png")
    except OSError as exc:
        raise BadInputError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path
