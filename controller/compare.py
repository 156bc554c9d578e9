"""compare-runs: several runs side by side -- which was faster, by how much, and why.

For each run: tok/s median / p10 / p90 over the warm window (the same window and quantiles
as controller/throughput.py, and a registry run's own playbook warm-up, so "12.4K" here is
the watch's 12.4K, computed column-wise so
10 runs of 1M rows take well under the 2 s budget), step time, samples/s, time to first
logged step, peak GPU memory, loss and tau at steps every run reached (interpolated, so
runs logging every 10 and every 25 steps, or resumed at step 500, line up), the end state
(finished / OOM / crash / killed / running, from the detectors on the log and the exit
code), and only the config keys that differ.

The verdict against the baseline is judged from the runs' own spread, not a fixed "5%":
a moving-block bootstrap of the warm-window median (blocks keep the autocorrelation of
consecutive throughput samples) gives a 95% interval of the ratio run/baseline; a run is
"faster" or "slower by X%" only when that interval excludes 1, else "within noise (±Y%)".
Seeded, so the same inputs print the same verdicts.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from controller import history
from controller.errors import BadInputError, UnknownRunError
from controller.importers import (
    CONFIG_NOISE_KEYS,
    WANDB_PATH_RE,
    LoadedRun,
    config_from_args,
    end_state,
    load_path,
    read_run_dir,
    read_wandb_path,
)
from controller.throughput import tok_quantiles, warm_window

DEFAULT_WARMUP_S = 60.0
DEFAULT_WARMUP_STEPS = 3
ALIGNED_POINTS = 3
PROGRESS_COLUMNS = ("step", "time_s", "tok_per_s", "samples_per_s", "step_time_s", "loss", "tau", "mem_peak_gib")
"""The progress columns compare-runs reads (of a 1M-row history, only these are decoded)."""
LOCAL_METRICS_MAX_BYTES = 256 << 20
"""A registry run's local metrics.jsonl up to this size is read when it holds more steps
than the history (a run the watch saw only in part)."""
BOOTSTRAP_RESAMPLES = 400
BOOTSTRAP_MAX_SAMPLES = 1500
MIN_VERDICT_SAMPLES = 3
STATE_LABEL = {"finished": "finished", "oom": "OOM", "crash": "crash", "killed": "killed", "stopped": "stopped",
               "running": "running", "unknown": "unknown"}


# -- resolving RUN arguments ------------------------------------------------------------

def resolve(spec: str, store=None) -> LoadedRun:
    """A RUN argument -> LoadedRun. Tried in order: an existing path (log file, metrics.jsonl,
    run directory, wandb run dir or file), a registry run id/name, a wandb path."""
    from pathlib import Path

    from controller.runstore import RunStore

    if Path(spec).expanduser().exists():
        return load_path(spec)
    store = store or RunStore()
    try:
        record = store.get_run(spec)
    except UnknownRunError as exc:
        if WANDB_PATH_RE.match(spec) and spec.count("/") >= 2:
            return read_wandb_path(spec)
        raise BadInputError(
            f"run {spec!r}: not a file or directory, not in the registry, and not a wandb path "
            f"entity/project/run_id", hint=str(exc.message)) from None
    return from_registry(record, store)


def from_registry(record, store) -> LoadedRun:
    """A registry run: its Parquet history (+ meta.json of an import), else its local run dir."""
    from pathlib import Path

    meta = history.read_meta(record.run_id)
    table = history.read_progress(record.run_id, columns=list(PROGRESS_COLUMNS))
    warmup = playbook_warmup(record.playbook)
    findings = store.findings(record.run_id)
    if table.num_rows == 0 and record.run_dir and Path(record.run_dir).is_dir():
        loaded = read_run_dir(record.run_dir, label=record.name)
        loaded.source = record.run_id
        loaded.kind = "registry"
        loaded.warmup = warmup
        return loaded
    if table.num_rows == 0 and not meta:
        raise BadInputError(f"run {record.name!r} ({record.run_id}): no metric history recorded yet and its run "
                            f"directory {record.run_dir or '?'} is not on this machine",
                            hint="watch it (dfctl watch) or import its log/wandb run (dfctl import)")
    config = meta.get("config") or config_from_args(((record.playbook or {}).get("run") or {}).get("args") or ())
    if meta.get("end_state"):
        state, detail = meta["end_state"], meta.get("end_detail", "")
    elif record.run_dir and Path(record.run_dir).is_dir():
        # A local run: its directory knows best (exit_code file, the log's OOM/crash, pid),
        # and its metrics.jsonl has every step even when the watch saw only part of the run.
        metrics = Path(record.run_dir) / "metrics.jsonl"
        fuller = metrics.is_file() and metrics.stat().st_size <= LOCAL_METRICS_MAX_BYTES
        local = read_run_dir(record.run_dir, label=record.name, with_progress=fuller)
        state, detail = local.end_state, local.end_detail
        config = {**config, **local.config}
        if local.progress.num_rows > table.num_rows:
            table = local.progress
    else:
        state, detail = end_state(findings, record.exit_code,
                                  alive=record.state in ("running", "launched"),
                                  stopped_by="dfctl stop" if record.state == "stopped" else None)
    gpus = history.read_table(record.run_id, "gpus", columns=["mem_used_mib"])
    peak = pa.compute.max(gpus.column("mem_used_mib")).as_py() if gpus.num_rows else None
    return LoadedRun(label=record.name, source=record.run_id, kind="registry", progress=table,
                     start_s=meta.get("start_s") or record.started_s, end_state=state, end_detail=detail,
                     exit_code=record.exit_code if record.exit_code is not None else meta.get("exit_code"),
                     config=config, findings=findings, wandb_run_id=record.wandb_run_id,
                     log_path=record.log_path or None, run_dir=record.run_dir or None,
                     gpu_peak_mem_gib=peak / 1024 if peak is not None else None, warmup=warmup)


def playbook_warmup(playbook: dict[str, Any] | None) -> tuple[float, int] | None:
    """(warmup_s, warmup_steps) of a registered run's [watch] table, None when it has none
    (then compare-runs' defaults apply). Why: the watch judged the run by these values; a
    compare with other ones printed other numbers for the same run (playbooks/local.toml's
    10 s warm-up against the 60 s default made the demo run "short run: start-up included")."""
    from controller.playbook import watch_config_from

    raw = (playbook or {}).get("watch") or {}
    if "warmup_s" not in raw and "warmup_steps" not in raw:
        return None
    cfg = watch_config_from(playbook)
    return float(cfg.warmup_s), int(cfg.warmup_steps)


# -- statistics -------------------------------------------------------------------------

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
    mem_peak_gib: np.ndarray                    # one element: the run's maximum (NaN if unknown)

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
        def col(name: str, dtype=np.float64) -> np.ndarray:
            return table.column(name).to_numpy(zero_copy_only=False).astype(dtype, copy=False) \
                if table.num_rows else np.empty(0, dtype)

        step = col("step", np.int64)
        arrays = {n: col(n) for n in ("time_s", "tok_per_s", "samples_per_s", "step_time_s", "loss", "tau")}
        # Only its maximum is used: computed by Arrow, no 1M-row conversion.
        peak = pc.max(table.column("mem_peak_gib")).as_py() if table.num_rows else None
        arrays["mem_peak_gib"] = np.array([np.nan if peak is None else peak])
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
    return warm_window(c.time_s, useful, warmup_s, warmup_steps)


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
    peak_mem_gib: float | None
    loss_at: dict[int, float | None] = field(default_factory=dict)
    tau_at: dict[int, float | None] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    delta_pct: float | None = None              # + faster / - slower than the baseline
    ci_pct: tuple[float, float] | None = None   # 95% interval of delta_pct
    is_baseline: bool = False
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
    peak = float(mem.max()) if mem.size else run.gpu_peak_mem_gib
    summary = RunSummary(
        label=run.label, source=run.source, kind=run.kind, end_state=run.end_state, end_detail=run.end_detail,
        exit_code=run.exit_code, window=window, tok_per_s=stats,
        step_time_s=_median(c.step_time_s[mask]), samples_per_s=_median(c.samples_per_s[mask]),
        time_to_first_step_s=ttfs, peak_mem_gib=peak, config=dict(run.config), wandb_run_id=run.wandb_run_id,
        loss_series=c.finite_series("loss"), tau_series=c.finite_series("tau"),
        log_interval=_interval(c.finite_series("loss")[0]), warm_tok=_thin1(tok, BOOTSTRAP_MAX_SAMPLES),
        start_s=run.start_s, warmup_s=warmup_s, warmup_steps=warmup_steps)
    summary.plot_minutes, summary.plot_tok = _thin(elapsed_minutes(c), c.tok_per_s)
    summary.plot_steps, summary.plot_loss = _thin(c.step.astype(np.float64), c.loss)
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
        ends = [(int(x[0]), int(x[-1])) for x, _ in (r.loss_series, r.tau_series) if x is not None and x.size]
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
        run.verdict = f"within noise (±{max(abs(lo), abs(hi)):.1f}%)"


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
    if cmp.warmup_s is not None:
        return f"warm window: skips the first {cmp.warmup_steps + 1} samples and the first {cmp.warmup_s:g} s"
    each = ", ".join(f"{r.label} {r.warmup_steps + 1} samples/{r.warmup_s:g} s" for r in cmp.runs)
    return f"warm window per run (its playbook's, else the defaults): skips the first {each}"


# -- output -----------------------------------------------------------------------------

def _si(v: float | None) -> str:
    from controller.widgets.format import si

    return si(v)


def _num(v: float | None, digits: int) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _duration(v: float | None) -> str:
    from controller.widgets.format import duration

    return duration(v)


def window_text(w: Window) -> str:
    if w.first_step is None:
        return "no samples"
    text = f"steps {w.first_step}–{w.last_step}, {w.samples} of {w.samples_total} samples"
    if w.start_s is not None and w.end_s is not None:
        text += f", t+{_duration(w.start_s)}–{_duration(w.end_s)}"
    if not w.warm:
        text += ", short run: start-up included"
    return text


def table_rows(cmp: Comparison) -> list[tuple[str, list[str]]]:
    """(metric, one cell per run): the human table, metrics down, runs across."""
    rows: list[tuple[str, list[str]]] = []
    R = cmp.runs

    def add(name: str, cells: list[str]) -> None:
        rows.append((name, cells))

    add("end state", [STATE_LABEL.get(r.end_state, r.end_state) + (f" ({r.end_detail})" if r.end_detail and
        r.end_state not in ("finished",) else "") for r in R])
    add("tok/s median", [_si(r.tok_per_s["median"]) for r in R])
    add("tok/s p10–p90", [f"{_si(r.tok_per_s['p10'])}–{_si(r.tok_per_s['p90'])}" if r.tok_per_s["median"] else "n/a"
                          for r in R])
    add("vs baseline", [r.verdict for r in R])
    add("warm window", [window_text(r.window) for r in R])
    add("step time", [_num(r.step_time_s, 3) + ("s" if r.step_time_s is not None else "") for r in R])
    add("samples/s", [_num(r.samples_per_s, 2) for r in R])
    add("time to first step", [_duration(r.time_to_first_step_s) for r in R])
    add("peak GPU mem", [(_num(r.peak_mem_gib, 1) + " GiB") if r.peak_mem_gib is not None else "n/a" for r in R])
    for k in cmp.aligned_steps:
        add(f"loss @ step {k}", [_num(r.loss_at.get(k), 4) for r in R])
    for k in cmp.aligned_steps:
        add(f"τ @ step {k}", [_num(r.tau_at.get(k), 3) for r in R])
    for key in cmp.config_keys:
        add(f"config {key}", [_cfg(r.config.get(key, "—")) for r in R])
    return rows


def _cfg(v: Any) -> str:
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."


def headline(cmp: Comparison) -> str:
    if cmp.baseline_label:
        return f"baseline: {cmp.baseline_label} ({_si(cmp.baseline_tok_per_s)} tok/s median)"
    return f"baseline: {_si(cmp.baseline_tok_per_s)} tok/s (given)"


def render_table(cmp: Comparison):
    """A Rich table for the terminal (the default output)."""
    from rich.table import Table

    t = Table(title=headline(cmp), title_justify="left", show_lines=False)
    t.add_column("", style="bold", no_wrap=True)
    for r in cmp.runs:
        t.add_column(r.label + (" (baseline)" if r.is_baseline else ""), overflow="fold")
    styles = {"oom": "bold red", "crash": "red", "killed": "red", "finished": "green", "running": "cyan"}
    for name, cells in table_rows(cmp):
        if name == "end state":
            cells = [f"[{styles.get(r.end_state, '')}]{c}[/]" if styles.get(r.end_state) else c
                     for r, c in zip(cmp.runs, cells)]
        elif name == "vs baseline":
            cells = [f"[red]{c}[/]" if c.startswith("slower") else f"[green]{c}[/]" if c.startswith("faster") else c
                     for c in cells]
        else:
            from rich.markup import escape
            cells = [escape(c) for c in cells]
        t.add_row(name, *cells)
    t.caption = f"{warmup_caption(cmp)}; verdicts from a block-bootstrap 95% interval of the median ratio"
    t.caption_justify = "left"
    return t


def columns_fit(cmp: Comparison, width: int) -> bool:
    """Whether the metrics-down, runs-across table fits `width` columns (~22 cells a run)."""
    return 30 + 22 * len(cmp.runs) <= width


def render_table_by_run(cmp: Comparison, width: int | None = None):
    """Runs down, metrics across: for many runs (or a narrow terminal). Loss and τ at the
    last aligned step; the config keys that differ get a second table. Columns that do
    not fit `width` are left out, least important first (the caption says which)."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table

    last = cmp.aligned_steps[-1] if cmp.aligned_steps else None
    styles = {"oom": "bold red", "crash": "red", "killed": "red", "finished": "green", "running": "cyan"}
    # (header, min width when wrapped (0 = never wrap), justify, cell per run); display order.
    cols: list[tuple[str, int, str, list[str]]] = [
        ("run", 12, "left", [r.label + (" (baseline)" if r.is_baseline else "") for r in cmp.runs]),
        ("end", 8, "left", [STATE_LABEL.get(r.end_state, r.end_state) for r in cmp.runs]),
        ("tok/s", 0, "right", [_si(r.tok_per_s["median"]) for r in cmp.runs]),
        ("p10–p90", 0, "right", [f"{_si(r.tok_per_s['p10'])}–{_si(r.tok_per_s['p90'])}" if r.tok_per_s["median"]
                                 else "n/a" for r in cmp.runs]),
        ("vs baseline", 12, "left", [r.verdict for r in cmp.runs]),
        ("step s", 0, "right", [_num(r.step_time_s, 3) for r in cmp.runs]),
        ("samp/s", 0, "right", [_num(r.samples_per_s, 2) for r in cmp.runs]),
        ("1st step", 0, "right", [_duration(r.time_to_first_step_s) for r in cmp.runs]),
        ("peak mem", 0, "right", [(_num(r.peak_mem_gib, 1) + "G") if r.peak_mem_gib is not None else "n/a"
                                  for r in cmp.runs]),
    ]
    if last is not None:
        cols += [(f"loss@{last}", 0, "right", [_num(r.loss_at.get(last), 4) for r in cmp.runs]),
                 (f"τ@{last}", 0, "right", [_num(r.tau_at.get(last), 3) for r in cmp.runs])]
    priority = ["run", "end", "tok/s", "vs baseline", "p10–p90", f"loss@{last}", f"τ@{last}", "step s",
                "samp/s", "peak mem", "1st step"]
    need = {h: (min_w or max(len(h), *(len(c) for c in cells))) + 3 for h, min_w, _, cells in cols}
    room = (width or 10 ** 6) - 1
    keep: set[str] = set()
    for h in priority:
        if h in need and need[h] <= room:
            keep.add(h)
            room -= need[h]
    dropped = [h for h, *_ in cols if h not in keep]
    t = Table(title=headline(cmp), title_justify="left")
    shown = [c for c in cols if c[0] in keep]
    for h, min_w, just, _ in shown:
        t.add_column(h, justify=just, overflow="fold", no_wrap=not min_w, min_width=min_w or None)
    for i, r in enumerate(cmp.runs):
        row = []
        for h, _, _, cells in shown:
            cell = escape(cells[i])
            if h == "end" and r.end_state in styles:
                cell = f"[{styles[r.end_state]}]{cell}[/]"
            elif h == "vs baseline" and r.verdict.startswith(("slower", "faster")):
                cell = f"[{'red' if r.verdict.startswith('slower') else 'green'}]{cell}[/]"
            row.append(cell)
        t.add_row(*row)
    t.caption = (warmup_caption(cmp)
                 + (f"; left out for width: {', '.join(dropped)}" if dropped else "")
                 + " (--json has everything)")
    t.caption_justify = "left"
    if not cmp.config_keys:
        return t
    c = Table(title="config keys that differ", title_justify="left")
    c.add_column("run")
    for key in cmp.config_keys:
        c.add_column(escape(key), overflow="fold")
    for r in cmp.runs:
        c.add_row(escape(r.label), *[escape(_cfg(r.config.get(k, "—"))) for k in cmp.config_keys])
    return Group(t, c)


def render_markdown(cmp: Comparison) -> str:
    head = "| | " + " | ".join(r.label + (" (baseline)" if r.is_baseline else "") for r in cmp.runs) + " |"
    sep = "|---|" + "---|" * len(cmp.runs)
    lines = [f"{headline(cmp)}", "", head, sep]
    for name, cells in table_rows(cmp):
        cells = [c.replace("|", "\\|") for c in cells]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_jsonable(cmp: Comparison) -> dict[str, Any]:
    def run(r: RunSummary) -> dict[str, Any]:
        w = r.window
        return {
            "label": r.label, "source": r.source, "kind": r.kind, "is_baseline": r.is_baseline,
            "end_state": r.end_state, "end_detail": r.end_detail, "exit_code": r.exit_code,
            "wandb_run_id": r.wandb_run_id,
            "window": {"first_step": w.first_step, "last_step": w.last_step, "samples": w.samples,
                       "samples_total": w.samples_total, "warm": w.warm, "start_s": w.start_s, "end_s": w.end_s},
            "warmup": {"seconds": r.warmup_s, "samples": r.warmup_steps},
            "tok_per_s": r.tok_per_s, "step_time_s": r.step_time_s, "samples_per_s": r.samples_per_s,
            "time_to_first_step_s": r.time_to_first_step_s, "peak_mem_gib": r.peak_mem_gib,
            "loss_at": {str(k): v for k, v in r.loss_at.items()}, "tau_at": {str(k): v for k, v in r.tau_at.items()},
            "config_diff": {k: r.config.get(k) for k in cmp_keys},
            "verdict": r.verdict, "delta_pct": r.delta_pct,
            "ci95_pct": list(r.ci_pct) if r.ci_pct else None,
        }

    cmp_keys = cmp.config_keys
    from controller.records import _clean

    return _clean({
        "baseline": {"label": cmp.baseline_label, "tok_per_s": cmp.baseline_tok_per_s},
        "warmup": {"seconds": cmp.warmup_s, "samples": cmp.warmup_steps},
        "aligned_steps": cmp.aligned_steps, "config_keys": cmp.config_keys,
        "runs": [run(r) for r in cmp.runs],
    })


def render_json(cmp: Comparison) -> str:
    return json.dumps(to_jsonable(cmp), indent=2, ensure_ascii=False)


def render_csv(cmp: Comparison) -> str:
    """One row per run; aligned metrics as loss@<step> / tau@<step>, config as config.<key>."""
    doc = to_jsonable(cmp)
    header = ["label", "source", "kind", "is_baseline", "end_state", "end_detail", "exit_code",
              "window_first_step", "window_last_step", "window_samples", "warm", "tok_per_s_median",
              "tok_per_s_p10", "tok_per_s_p90", "step_time_s", "samples_per_s", "time_to_first_step_s",
              "peak_mem_gib", "verdict", "delta_pct", "ci95_low_pct", "ci95_high_pct"]
    header += [f"loss@{k}" for k in cmp.aligned_steps] + [f"tau@{k}" for k in cmp.aligned_steps]
    header += [f"config.{k}" for k in cmp.config_keys]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in doc["runs"]:
        ci = r["ci95_pct"] or [None, None]
        row = [r["label"], r["source"], r["kind"], r["is_baseline"], r["end_state"], r["end_detail"], r["exit_code"],
               r["window"]["first_step"], r["window"]["last_step"], r["window"]["samples"], r["window"]["warm"],
               r["tok_per_s"]["median"], r["tok_per_s"]["p10"], r["tok_per_s"]["p90"], r["step_time_s"],
               r["samples_per_s"], r["time_to_first_step_s"], r["peak_mem_gib"], r["verdict"], r["delta_pct"],
               ci[0], ci[1]]
        row += [r["loss_at"].get(str(k)) for k in cmp.aligned_steps] + [r["tau_at"].get(str(k)) for k in cmp.aligned_steps]
        row += [json.dumps(r["config_diff"].get(k)) if not isinstance(r["config_diff"].get(k), str)
                else r["config_diff"].get(k) for k in cmp.config_keys]
        w.writerow(["" if v is None else v for v in row])
    return buf.getvalue()


# -- plot -------------------------------------------------------------------------------

PLOT_SIZE_PX = (1200, 500)
PLOT_DPI = 100
PLOT_MAX_POINTS = 2000


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


def plot(cmp: Comparison, path: str) -> str:
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
                       label=f"baseline {_si(cmp.baseline_tok_per_s)}")
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
