"""compare-runs: several runs side by side -- which was faster, by how much, and why.

For each run: tok/s median / p10 / p90 over the warm window (the same window and quantiles
as controller/judge/throughput_window.py, and a registry run's own playbook warm-up, so "12.4K" here is
the watch's 12.4K, computed column-wise so
10 runs of 1M rows take well under the 2 s budget), step time, samples/s, time to first
logged step, peak GPU memory, loss and tau at steps every run reached (interpolated, so
runs logging every 10 and every 25 steps, or resumed at step 500, line up), the end state
(finished / OOM / crash / killed / running, from the detectors on the log and the exit
code), and only the config keys that differ.

The verdict against the baseline is judged from the runs' own spread, not a fixed "5%":
a moving-block bootstrap of the warm-window median (blocks keep the autocorrelation of
consecutive throughput samples) gives a 95% interval of the ratio run/baseline; a run is
"faster" or "slower by X%" only when that interval excludes 1, else "within noise
(-X% … +Y%)", the interval as it is (a median's is often lopsided).
Seeded, so the same inputs print the same verdicts.

The package: `load` (RUN arguments -> LoadedRun, through controller.adopt.importers), `stats`
(summaries, alignment, verdicts), `render` (table, Markdown, JSON, CSV), `plot` (--plot).
"""

from controller.compare.load import resolve
from controller.compare.plot import PLOT_SIZE_PX, write_plot
from controller.compare.render import (
    columns_fit,
    headline,
    render_csv,
    render_json,
    render_markdown,
    render_table,
    render_table_by_run,
    table_rows,
    to_jsonable,
    window_text,
)
from controller.compare.stats import (
    DEFAULT_WARMUP_S,
    DEFAULT_WARMUP_STEPS,
    STATE_LABEL,
    Columns,
    Comparison,
    RunSummary,
    Window,
    compare,
    summarise,
    warm_mask,
    warmup_caption,
    warmup_for,
)

__all__ = [
    "resolve", "write_plot", "PLOT_SIZE_PX", "columns_fit", "headline", "render_csv", "render_json", "render_markdown", "render_table",
    "render_table_by_run", "table_rows", "to_jsonable", "window_text", "DEFAULT_WARMUP_S", "DEFAULT_WARMUP_STEPS",
    "STATE_LABEL", "Columns", "Comparison", "RunSummary", "Window", "compare", "summarise", "warm_mask",
    "warmup_caption", "warmup_for",
]
