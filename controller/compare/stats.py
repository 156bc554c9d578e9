"""compare-runs' statistics: one run's columns -> its summary (warm-window tok/s through
controller.judge.throughput_window, step time, memory, loss/tau at aligned steps), the moving-block
bootstrap verdict against a baseline, and the Comparison every renderer prints."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from controller.adopt.importers import CONFIG_NOISE_KEYS, LoadedRun
from controller.errors import BadInputError
from controller.judge.throughput_window import tok_quantiles, warm_window

DEFAULT_WARMUP_S = 60.0
DEFAULT_WARMUP_STEPS = 3
ALIGNED_POINTS = 3
BOOTSTRAP_RESAMPLES = 400
BOOTSTRAP_MAX_SAMPLES = 1500
MIN_VERDICT_SAMPLES = 3
PLOT_MAX_POINTS = 2000
"""Points per series kept for the plot (thinned evenly)."""
STATE_LABEL = {"finished": "finished", "oom": "OOM", "crash": "crash", "killed": "killed", "stopped": "stopped",
               "running": "running", "unknown": "unknown"}


LAST_VALUE_METRICS = ("accept_len", "eval_loss", "eval_accept_len", "eval_accept_len_decode")
"""Shown as each run's last known value: accept_len (serving's accepted length per block,
README) and the held-out eval, which the trainer reports only every --eval-every steps
(eval_accept_len_decode: measured by decoding, the figure to set beside published ones)."""


@dataclass
class Columns:
    """One run's progress as arrays, one row per step (first seen wins), step order."""

    step: np.ndarray
    time_s: np.ndarray
    tok_per_s: np.ndarray
    samples_per_s: np.ndarray
    step_time_s: np.ndarray
    loss: np.ndarray
    tau: np.ndarray
    accept_len: np.ndarray
    eval_loss: np.ndarray
    eval_accept_len: np.ndarray
    eval_accept_len_decode: np.ndarray
    mem_peak_gib: np.ndarray                    # one element: the run's maximum (NaN if unknown)
    trainer_time_s: np.ndarray | None = None    # time_s on the trainer's clock (NaN for log lines); None: = time_s

    def finite_series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) where the metric is known; computed once per metric."""
        cache = self.__dict__.setdefault("_finite", {})
        if name not in cache:
            y = getattr(self, name)
            ok = np.isfinite(y)
            cache[name] = (self.step, y) if ok.all() else (self.step[ok], y[ok])
        return cache[name]

    @classmethod
    def from_table(cls, table: pa.Table) -> "Columns":
        def col(name: str, dtype: type = np.float64) -> np.ndarray:
            if name not in table.schema.names:   # an imported table without the newer metrics
                return np.full(table.num_rows, np.nan)
            return table.column(name).to_numpy(zero_copy_only=False).astype(dtype, copy=False) \
                if table.num_rows else np.empty(0, dtype)

        step = col("step", np.int64)
        arrays = {n: col(n) for n in ("time_s", "tok_per_s", "samples_per_s", "step_time_s", "loss", "tau",
                                      *LAST_VALUE_METRICS)}
        # Only its maximum is used: computed by Arrow, no 1M-row conversion.
        peak = pc.max(table.column("mem_peak_gib")).as_py() if table.num_rows else None
        arrays["mem_peak_gib"] = np.array([np.nan if peak is None else peak])
        if "source" in table.schema.names and table.num_rows:
            # a log line's time is when the watch read it: throughput.trainer_times' rule
            from_log = pc.fill_null(pc.equal(table.column("source"), "log"), False).to_numpy(zero_copy_only=False)
            if from_log.any():
                arrays["trainer_time_s"] = np.where(from_log, np.nan, arrays["time_s"])
        if step.size > 1 and not np.all(step[1:] > step[:-1]):
            # Duplicated steps (log + metrics + wandb) or out of order: keep each step's first row.
            _, first = np.unique(step, return_index=True)
            step = step[first]
            arrays = {n: a if n == "mem_peak_gib" else a[first] for n, a in arrays.items()}
        return cls(step=step, **arrays)


@dataclass
class Window:
    """The warm window a run's throughput figures are taken over."""

    first_step: int | None
    last_step: int | None
    samples: int
    samples_total: int
    warm: bool                     # False: too short to skip start-up, every sample used
    start_s: float | None = None   # seconds after the run's first sample
    end_s: float | None = None


def warm_mask(c: Columns, warmup_s: float, warmup_steps: int) -> tuple[np.ndarray | slice, bool]:
    """throughput.warm_window over this run's columns (the one warm window of every figure)."""
    useful = np.isfinite(c.tok_per_s) | np.isfinite(c.step_time_s) | np.isfinite(c.samples_per_s)
    times = c.time_s if c.trainer_time_s is None else c.trainer_time_s
    return warm_window(times, useful, warmup_s, warmup_steps)


def _median(a: np.ndarray) -> float | None:
    ok = np.isfinite(a)
    if not ok.all():
        a = a[ok]
    return float(np.median(a)) if a.size else None


def bootstrap_medians(x: np.ndarray, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """Medians of moving-block bootstrap resamples of the series `x` (in time order)."""
    if x.size > BOOTSTRAP_MAX_SAMPLES:  # evenly thinned: keeps the spread, bounds the cost
        x = x[np.linspace(0, x.size - 1, BOOTSTRAP_MAX_SAMPLES).round().astype(np.int64)]
    n = x.size
    block = max(1, int(round(n ** (1 / 3))))
    n_blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(resamples, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :n]
    return np.median(x[idx], axis=1)


@dataclass
class RunSummary:
    """One run's row of the comparison (what every output format prints)."""

    label: str
    source: str
    kind: str
    end_state: str
    end_detail: str
    exit_code: int | None
    window: Window
    tok_per_s: dict[str, float | None]          # median, p10, p90
    step_time_s: float | None
    samples_per_s: float | None
    time_to_first_step_s: float | None
    peak_mem_gib: float | None                  # the trainer's mem_peak_gib: its GPUs summed, or CPU peak RSS
    loss_at: dict[int, float | None] = field(default_factory=dict)
    tau_at: dict[int, float | None] = field(default_factory=dict)
    last: dict[str, float | None] = field(default_factory=dict)   # LAST_VALUE_METRICS -> last known value
    config: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    delta_pct: float | None = None              # + faster / - slower than the baseline
    ci_pct: tuple[float, float] | None = None   # 95% interval of delta_pct
    is_baseline: bool = False
    memory_device: str | None = None            # "cuda" | "cpu": what peak_mem_gib measures, when known
    gpu_device_peak_mem_gib: float | None = None   # nvidia-smi: the fullest single GPU (the watch's samples)
    wandb_run_id: str | None = None
    # kept for alignment, verdicts and the plot (bounded: no full 1M-row columns)
    loss_series: tuple[np.ndarray, np.ndarray] | None = None   # (steps, loss) where known
    tau_series: tuple[np.ndarray, np.ndarray] | None = None
    log_interval: int | None = None             # median steps between logged losses
    warm_tok: np.ndarray | None = None          # warm-window tok/s, thinned to BOOTSTRAP_MAX_SAMPLES
    plot_minutes: np.ndarray | None = None      # thinned (minutes since first sample, tok/s)
    plot_tok: np.ndarray | None = None
    plot_steps: np.ndarray | None = None        # thinned (step, loss)
    plot_loss: np.ndarray | None = None
    plot_tok_steps: np.ndarray | None = None    # the steps of plot_tok (a step x axis)
    plot_tau_steps: np.ndarray | None = None    # thinned (step, tau)
    plot_tau: np.ndarray | None = None
    plot_clock: tuple[np.ndarray, np.ndarray] | None = None   # thinned (step, minutes since first sample)
    start_s: float | None = None
    warmup_s: float = DEFAULT_WARMUP_S            # the warm-up this run's window was taken with
    warmup_steps: int = DEFAULT_WARMUP_STEPS


@dataclass
class Comparison:
    runs: list[RunSummary]
    baseline_label: str | None
    baseline_tok_per_s: float | None
    aligned_steps: list[int]
    config_keys: list[str]
    warmup_s: float | None                      # the warm-up every run shared; None when runs differ
    warmup_steps: int | None


def summarise(run: LoadedRun, warmup_s: float, warmup_steps: int) -> RunSummary:
    c = Columns.from_table(run.progress)
    mask, is_warm = warm_mask(c, warmup_s, warmup_steps)
    tok = c.tok_per_s[mask]
    good = np.isfinite(tok) & (tok > 0)
    if not good.all():
        tok = tok[good]
    q = tok_quantiles(tok)
    stats: dict[str, float | None] = {k: (q[k] if q else None) for k in ("median", "p10", "p90")}
    steps = c.step[mask]
    times = c.time_s[mask]
    n_window = (mask.stop - mask.start) if isinstance(mask, slice) else int(mask.sum())
    fin = np.flatnonzero(np.isfinite(c.time_s[:1000])) if c.time_s.size else np.empty(0, np.int64)
    if fin.size == 0 and c.time_s.size > 1000:
        fin = np.flatnonzero(np.isfinite(c.time_s))
    t_first = float(c.time_s[fin[0]]) if fin.size else None
    tt = times if times.size and np.isfinite(times[0]) and np.isfinite(times[-1]) and np.isfinite(times).all() \
        else times[np.isfinite(times)]
    window = Window(
        first_step=int(steps[0]) if steps.size else None, last_step=int(steps[-1]) if steps.size else None,
        samples=n_window, samples_total=int(c.step.size), warm=is_warm,
        start_s=float(tt.min() - t_first) if tt.size and t_first is not None else None,
        end_s=float(tt.max() - t_first) if tt.size and t_first is not None else None)
    # (min/max, not first/last: a resumed run's samples may not be in clock order)
    ttfs = None
    if run.start_s is not None and t_first is not None and t_first >= run.start_s:
        ttfs = t_first - run.start_s
    mem = c.mem_peak_gib[np.isfinite(c.mem_peak_gib)]
    peak = float(mem.max()) if mem.size else None   # the trainer's own figure, never nvidia-smi's
    summary = RunSummary(
        label=run.label, source=run.source, kind=run.kind, end_state=run.end_state, end_detail=run.end_detail,
        exit_code=run.exit_code, window=window, tok_per_s=stats,
        step_time_s=_median(c.step_time_s[mask]), samples_per_s=_median(c.samples_per_s[mask]),
        time_to_first_step_s=ttfs, peak_mem_gib=peak, config=dict(run.config), wandb_run_id=run.wandb_run_id,
        memory_device=run.memory_device, gpu_device_peak_mem_gib=run.gpu_peak_mem_gib,
        loss_series=c.finite_series("loss"), tau_series=c.finite_series("tau"),
        log_interval=_interval(c.finite_series("loss")[0]), warm_tok=_thin1(tok, BOOTSTRAP_MAX_SAMPLES),
        start_s=run.start_s, warmup_s=warmup_s, warmup_steps=warmup_steps)
    for name in LAST_VALUE_METRICS:
        _, known = c.finite_series(name)
        summary.last[name] = float(known[-1]) if known.size else None
    minutes = elapsed_minutes(c)
    summary.plot_minutes, summary.plot_tok = _thin(minutes, c.tok_per_s)
    summary.plot_tok_steps, _ = _thin(c.step.astype(np.float64), c.tok_per_s)
    summary.plot_steps, summary.plot_loss = _thin(c.step.astype(np.float64), c.loss)
    summary.plot_tau_steps, summary.plot_tau = _thin(c.step.astype(np.float64), c.tau)
    summary.plot_clock = _thin(c.step.astype(np.float64), minutes)   # step -> minutes, for a time x axis
    return summary


def _interval(steps: np.ndarray) -> int | None:
    if steps.size < 2:
        return None
    head = steps[: min(steps.size, 10_001)]
    return int(np.median(np.diff(head)))


def _thin1(x: np.ndarray, n: int) -> np.ndarray:
    """At most n evenly spaced elements, order kept (a copy: the full array can be freed)."""
    if x.size <= n:
        return np.array(x, copy=True)
    return x[np.linspace(0, x.size - 1, n).round().astype(np.int64)]


def aligned_steps(runs: list[RunSummary], points: int = ALIGNED_POINTS) -> list[int]:
    """Steps every run with a loss reached (else the union's), evenly spread, rounded to a
    multiple of the coarsest log interval so at least one run logged them exactly."""
    ranges, intervals = [], []
    for r in runs:
        ends = [(int(s[0][0]), int(s[0][-1])) for s in (r.loss_series, r.tau_series) if s is not None and s[0].size]
        if ends:
            ranges.append((min(a for a, _ in ends), max(b for _, b in ends)))
        if r.log_interval:
            intervals.append(r.log_interval)
    if not ranges:
        return []
    lo, hi = max(a for a, _ in ranges), min(b for _, b in ranges)
    if lo > hi:  # no common range: use the union, runs outside show n/a
        lo, hi = min(a for a, _ in ranges), max(b for _, b in ranges)
    grid = max(intervals) if intervals else 1
    picks = []
    for k in range(1, points + 1):
        s = lo + (hi - lo) * k / points
        snapped = int(math.floor(s / grid) * grid) if grid > 1 else int(round(s))
        if snapped < lo:
            snapped = int(round(s))
        picks.append(min(max(snapped, lo), hi))
    return sorted(set(picks))


def value_at(series: tuple[np.ndarray, np.ndarray] | None, step: int) -> float | None:
    """Linear interpolation of (steps, values) at `step`, only inside the logged range."""
    if series is None:
        return None
    x, y = series
    if x.size == 0 or step < x[0] or step > x[-1]:
        return None
    return float(np.interp(step, x, y))


def differing_config(runs: list[RunSummary]) -> list[str]:
    """Config keys whose values are not the same in every run (noise keys left out)."""
    keys = sorted({k for r in runs for k in r.config if not CONFIG_NOISE_KEYS.search(k)})
    with_config = [r for r in runs if r.config]
    if len(with_config) < 2:
        return []
    return [k for k in keys if len({json.dumps(r.config.get(k), sort_keys=True, default=str) for r in with_config}) > 1]


def judge(run: RunSummary, base: RunSummary | None, base_tok: float | None, seed: int = 0) -> None:
    """Fill verdict, delta_pct and ci_pct of `run` against the baseline run or number."""
    rng = np.random.default_rng(seed)
    med = run.tok_per_s["median"]
    if med is None:
        run.verdict = "no throughput" + (f" ({STATE_LABEL.get(run.end_state, run.end_state)})"
                                         if run.end_state not in ("finished", "running", "unknown") else "")
        return
    if base_tok is None:
        run.verdict = "no baseline"
        return
    x = _warm_tok(run)
    run.delta_pct = (med / base_tok - 1.0) * 100.0
    base_x = _warm_tok(base) if base is not None else None
    if x.size < MIN_VERDICT_SAMPLES or (base_x is not None and base_x.size < MIN_VERDICT_SAMPLES):
        run.verdict = f"too few samples ({x.size}) to judge: {run.delta_pct:+.1f}%"
        return
    meds = bootstrap_medians(x, rng)
    base_meds = bootstrap_medians(base_x, rng) if base_x is not None else np.full(meds.size, base_tok)
    ratio = meds / base_meds
    lo, hi = (np.quantile(ratio, [0.025, 0.975]) - 1.0) * 100.0
    run.ci_pct = (float(lo), float(hi))
    if lo > 0:
        run.verdict = f"faster by {run.delta_pct:.1f}%"
    elif hi < 0:
        run.verdict = f"slower by {-run.delta_pct:.1f}%"
    else:
        run.verdict = f"within noise ({interval_text(run.ci_pct)})"


def interval_text(ci_pct: tuple[float, float]) -> str:
    """'-7.2% … +70.7%': both ends as they are. A bootstrap interval of a median is often
    lopsided, and `±70.7%` would claim the run may be 70% slower when it may not."""
    lo, hi = ci_pct
    return f"{lo:+.1f}% … {hi:+.1f}%"


def _warm_tok(r: RunSummary) -> np.ndarray:
    return r.warm_tok if r.warm_tok is not None else np.empty(0)


def warmup_for(run: LoadedRun, warmup_s: float | None, warmup_steps: int | None) -> tuple[float, int]:
    """The warm-up a run is summarised with: what the caller gave (the CLI's --warmup-s /
    --warmup-steps), else the run's own playbook's, else the defaults."""
    own_s, own_steps = run.warmup or (DEFAULT_WARMUP_S, DEFAULT_WARMUP_STEPS)
    return (own_s if warmup_s is None else warmup_s), (own_steps if warmup_steps is None else warmup_steps)


def compare(runs: Iterable[LoadedRun], *, baseline: LoadedRun | int | None = None,
            baseline_tok_per_s: float | None = None, warmup_s: float | None = None,
            warmup_steps: int | None = None) -> Comparison:
    """Summaries, aligned steps, config diff and verdicts.

    `warmup_s` / `warmup_steps` apply to every run when given; None means each run's own
    (warmup_for).

    `runs` may be a generator: each run is summarised as it arrives and its progress table
    released (LoadedRun.progress is emptied), so 10 runs of 1M rows never sit in memory
    together. `baseline` is a run (shown first when not among `runs`) or an index into
    `runs`; with neither baseline given, the first run is the baseline."""
    summaries: list[RunSummary] = []
    for r in runs:
        summaries.append(summarise(r, *warmup_for(r, warmup_s, warmup_steps)))
        r.progress = r.progress.slice(0, 0)
    if not summaries:
        raise BadInputError("compare-runs: give at least one RUN")
    base_summary: RunSummary | None = None
    if isinstance(baseline, int):
        base_summary = summaries[baseline]
    elif baseline is not None:
        match = next((s for s in summaries if s.source == baseline.source), None)
        if match is None:
            match = summarise(baseline, *warmup_for(baseline, warmup_s, warmup_steps))
            summaries.insert(0, match)
        base_summary = match
    elif baseline_tok_per_s is None:
        base_summary = summaries[0]
    if base_summary is not None:
        base_summary.is_baseline = True
        base_tok = base_summary.tok_per_s["median"]
    else:
        base_tok = baseline_tok_per_s
    seen: dict[str, int] = {}
    for s in summaries:  # two RUNs with one name (a run dir and its wandb dir): keep both apart
        seen[s.label] = seen.get(s.label, 0) + 1
        if seen[s.label] > 1:
            s.label = f"{s.label} #{seen[s.label]}"
    steps = aligned_steps(summaries)
    for s in summaries:
        s.loss_at = {k: value_at(s.loss_series, k) for k in steps}
        s.tau_at = {k: value_at(s.tau_series, k) for k in steps}
        if s.is_baseline:
            s.verdict = "baseline"
            continue
        judge(s, base_summary, base_tok)
    used = {(s.warmup_s, s.warmup_steps) for s in summaries}
    shared_s, shared_steps = used.pop() if len(used) == 1 else (None, None)
    return Comparison(runs=summaries, baseline_label=base_summary.label if base_summary else None,
                      baseline_tok_per_s=base_tok, aligned_steps=steps, config_keys=differing_config(summaries),
                      warmup_s=shared_s, warmup_steps=shared_steps)


def warmup_caption(cmp: Comparison) -> str:
    """What the warm window skipped: once when every run shared it, else per run."""
    if cmp.warmup_s is not None and cmp.warmup_steps is not None:   # shared: both or neither
        return f"warm window: skips the first {cmp.warmup_steps + 1} samples and the first {cmp.warmup_s:g} s"
    each = ", ".join(f"{r.label} {r.warmup_steps + 1} samples/{r.warmup_s:g} s" for r in cmp.runs)
    return f"warm window per run (its playbook's, else the defaults): skips the first {each}"


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most PLOT_MAX_POINTS evenly spaced points where both are known (pick, then filter:
    no pass over the full arrays)."""
    if x.size > PLOT_MAX_POINTS:
        idx = np.linspace(0, x.size - 1, PLOT_MAX_POINTS).round().astype(np.int64)
        x, y = x[idx], y[idx]
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def elapsed_minutes(c: Columns) -> np.ndarray:
    """Minutes since the run's first sample; from the samples' clock, else rebuilt from
    step times (a log without timestamps) -- steps between samples x step time."""
    if c.step.size == 0:
        return np.empty(0)
    t = c.time_s
    if math.isfinite(t[0]) and math.isfinite(t[-1]):
        return (t - t[0]) / 60.0
    known_t = np.flatnonzero(np.isfinite(t))
    if known_t.size >= max(2, t.size // 2):
        return (t - t[known_t[0]]) / 60.0
    st = np.where(np.isfinite(c.step_time_s), c.step_time_s, 0.0)
    gaps = np.diff(c.step, prepend=c.step[:1] if c.step.size else c.step)
    return np.cumsum(st * gaps) / 60.0
