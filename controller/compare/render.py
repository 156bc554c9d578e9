"""compare-runs' outputs of one Comparison: the terminal table (one column per run, or one
block per run when the columns would not fit), Markdown, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any

from controller.compare.stats import STATE_LABEL, Comparison, RunSummary, Window, warmup_caption
from controller.records import to_jsonable as records_to_jsonable

if TYPE_CHECKING:
    from rich.console import Group, JustifyMethod  # rich is imported lazily (start-up time)
    from rich.table import Table

PEAK_TRAINER_LABEL = "peak mem (trainer: Σ its GPUs or CPU RSS)"
PEAK_DEVICE_LABEL = "GPU mem, fullest device (nvidia-smi)"
MEMORY_MEASURES = {"cuda": "cuda_allocator_peak_summed_over_gpus", "cpu": "cpu_peak_rss"}
"""What the trainer's mem_peak_gib is: torch.cuda.max_memory_allocated summed over the
process's GPUs, or on CPU resource.getrusage().ru_maxrss (trainer/metrics.py:memory_gib) --
never one GPU's memory, which only nvidia-smi's samples give (PEAK_DEVICE_LABEL)."""


def _peak_text(r: RunSummary, unit: str) -> str:
    if r.peak_mem_gib is None:
        return "n/a"
    how = {"cuda": " Σ GPUs", "cpu": " CPU RSS"}.get(r.memory_device or "", "")
    return _num(r.peak_mem_gib, 1) + unit + how


def _tok(v: float | None) -> str:
    """A tok/s figure spelled as the watch, check-log and the dashboard spell it."""
    from controller.view.throughput_panel import tok_text

    return tok_text(v)


def _num(v: float | None, digits: int) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _duration(v: float | None) -> str:
    from controller.view.format import duration

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
    add("tok/s median", [_tok(r.tok_per_s["median"]) for r in R])
    add("tok/s p10–p90", [f"{_tok(r.tok_per_s['p10'])}–{_tok(r.tok_per_s['p90'])}" if r.tok_per_s["median"] else "n/a"
                          for r in R])
    add("vs baseline", [r.verdict for r in R])
    add("warm window", [window_text(r.window) for r in R])
    add("step time", [_num(r.step_time_s, 3) + ("s" if r.step_time_s is not None else "") for r in R])
    add("samples/s", [_num(r.samples_per_s, 2) for r in R])
    add("time to first step", [_duration(r.time_to_first_step_s) for r in R])
    add(PEAK_TRAINER_LABEL, [_peak_text(r, " GiB") for r in R])
    if any(r.gpu_device_peak_mem_gib is not None for r in R):
        add(PEAK_DEVICE_LABEL, [(_num(r.gpu_device_peak_mem_gib, 1) + " GiB")
                                if r.gpu_device_peak_mem_gib is not None else "n/a" for r in R])
    for k in cmp.aligned_steps:
        add(f"loss @ step {k}", [_num(r.loss_at.get(k), 4) for r in R])
    for k in cmp.aligned_steps:
        add(f"τ @ step {k}", [_num(r.tau_at.get(k), 3) for r in R])
    for name, label, digits in (("accept_len", "accept_len (last)", 2), ("eval_loss", "eval loss (last)", 4),
                                ("eval_accept_len", "eval accept_len (last)", 2),
                                ("eval_accept_len_decode", "eval accept_len decoded (last)", 2)):
        if any(r.last.get(name) is not None for r in R):
            add(label, [_num(r.last.get(name), digits) for r in R])
    for key in cmp.config_keys:
        add(f"config {key}", [_cfg(r.config.get(key, "—")) for r in R])
    return rows


def _cfg(v: Any) -> str:
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."


def headline(cmp: Comparison) -> str:
    if cmp.baseline_label:
        return f"baseline: {cmp.baseline_label} ({_tok(cmp.baseline_tok_per_s)} tok/s median)"
    return f"baseline: {_tok(cmp.baseline_tok_per_s)} tok/s (given)"


def render_table(cmp: Comparison) -> Table:
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


def render_table_by_run(cmp: Comparison, width: int | None = None) -> Table | Group:
    """Runs down, metrics across: for many runs (or a narrow terminal). Loss and τ at the
    last aligned step; the config keys that differ get a second table. Columns that do
    not fit `width` are left out, least important first (the caption says which)."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table

    last = cmp.aligned_steps[-1] if cmp.aligned_steps else None
    styles = {"oom": "bold red", "crash": "red", "killed": "red", "finished": "green", "running": "cyan"}
    # (header, min width when wrapped (0 = never wrap), justify, cell per run); display order.
    cols: list[tuple[str, int, JustifyMethod, list[str]]] = [
        ("run", 12, "left", [r.label + (" (baseline)" if r.is_baseline else "") for r in cmp.runs]),
        ("end", 8, "left", [STATE_LABEL.get(r.end_state, r.end_state) for r in cmp.runs]),
        ("tok/s", 0, "right", [_tok(r.tok_per_s["median"]) for r in cmp.runs]),
        ("p10–p90", 0, "right", [f"{_tok(r.tok_per_s['p10'])}–{_tok(r.tok_per_s['p90'])}" if r.tok_per_s["median"]
                                 else "n/a" for r in cmp.runs]),
        ("vs baseline", 12, "left", [r.verdict for r in cmp.runs]),
        ("step s", 0, "right", [_num(r.step_time_s, 3) for r in cmp.runs]),
        ("samp/s", 0, "right", [_num(r.samples_per_s, 2) for r in cmp.runs]),
        ("1st step", 0, "right", [_duration(r.time_to_first_step_s) for r in cmp.runs]),
        ("peak mem", 0, "right", [_peak_text(r, "G") for r in cmp.runs]),
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
            "peak_mem_measures": MEMORY_MEASURES.get(r.memory_device or ""),
            "gpu_device_peak_mem_gib": r.gpu_device_peak_mem_gib,
            "loss_at": {str(k): v for k, v in r.loss_at.items()}, "tau_at": {str(k): v for k, v in r.tau_at.items()},
            "last": dict(r.last),
            "config_diff": {k: r.config.get(k) for k in cmp_keys},
            "verdict": r.verdict, "delta_pct": r.delta_pct,
            "ci95_pct": list(r.ci_pct) if r.ci_pct else None,
        }

    cmp_keys = cmp.config_keys
    return records_to_jsonable({
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
