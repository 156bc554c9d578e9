"""CLI commands of the compare area: `dfctl compare-runs` and `dfctl import` (wiring only).

compare-runs resolves each RUN (a path, a registry run, a wandb path), summarises and
judges them (controller.compare) and renders one format: a terminal table (default),
--json (one document), --csv (one row per run), --markdown; --plot adds an image (format from its extension). Bad input
raises BadInputError (exit 2), an unreachable wandb API UnreachableError (exit 3); the
mapping to exit codes lives in controller/cli/__init__.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from controller.cli.app import app
from controller.errors import BadInputError


@app.command("compare-runs")
def compare_runs(
    runs: List[str] = typer.Argument(..., metavar="RUN...",
                                     help="Registry run id/name, run directory, log file, metrics.jsonl, "
                                          "offline wandb run dir, or wandb path entity/project/run_id."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="The RUN the others are judged against "
                                                                     "(default: the first RUN)."),
    baseline_tok_s: Optional[float] = typer.Option(None, "--baseline-tok-s", help="Judge against this tok/s instead."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    csv_out: bool = typer.Option(False, "--csv", help="Print CSV, one row per run."),
    markdown_out: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
    plot_path: Optional[Path] = typer.Option(None, "--plot", metavar="FILE",
                                             help="Also write tok/s, loss and τ of every run to this image; the "
                                                  "format follows the extension (.png, .svg, .pdf, …)."),
    plot_x: str = typer.Option("time", "--plot-x", metavar="time|step",
                               help="The x axis of every --plot panel: minutes since the first sample, or step."),
    warmup_s: Optional[float] = typer.Option(None, "--warmup-s", help="Seconds after the first sample left out of "
                                                                     "throughput figures, for every run (default: "
                                                                     "each run's playbook watch.warmup_s, else 60)."),
    chain: bool = typer.Option(False, "--chain", help="Each registry RUN stands for its whole resume chain (first "
                                                      "run to newest resume, `dfctl watch --recover`), side by side."),
    warmup_steps: Optional[int] = typer.Option(None, "--warmup-steps", help="Samples after the first one left out "
                                                                          "of throughput figures, for every run "
                                                                          "(default: each run's playbook, else 3)."),
) -> None:
    """Put runs side by side: tok/s, step time, memory, loss/τ, config diff, verdict."""
    from controller import compare
    from controller.store.runstore import RunStore

    if sum((json_out, csv_out, markdown_out)) > 1:
        raise BadInputError("compare-runs: choose one of --json, --csv, --markdown")
    if baseline is not None and baseline_tok_s is not None:
        raise BadInputError("compare-runs: give --baseline RUN or --baseline-tok-s N, not both")
    if baseline_tok_s is not None and not baseline_tok_s > 0:
        raise BadInputError(f"--baseline-tok-s {baseline_tok_s:g}: must be a positive number")
    if (warmup_s is not None and warmup_s < 0) or (warmup_steps is not None and warmup_steps < 0):
        raise BadInputError("--warmup-s and --warmup-steps must not be negative")
    if plot_path is not None and not plot_path.parent.is_dir():
        raise BadInputError(f"--plot {plot_path}: directory {plot_path.parent} does not exist")
    if plot_path is not None:
        from controller.compare.plot import X_AXES, plot_format

        plot_format(str(plot_path))   # refuse an unknown extension before reading any run
        if plot_x not in X_AXES:
            raise BadInputError(f"--plot-x {plot_x!r}: expected one of {', '.join(X_AXES)}")
    store = RunStore()
    try:
        if chain:
            runs = _chains(runs, store)
        base = None
        if baseline is not None:
            base = runs.index(baseline) if baseline in runs else compare.resolve(baseline, store)
        result = compare.compare(_prefetched(runs, store), baseline=base,
                                 baseline_tok_per_s=baseline_tok_s, warmup_s=warmup_s, warmup_steps=warmup_steps)
    finally:
        store.close()
    if plot_path is not None:
        compare.write_plot(result, str(plot_path), plot_x)
        print(f"dfctl: plot written to {plot_path}", file=sys.stderr)
    if json_out:
        typer.echo(compare.render_json(result))
    elif csv_out:
        typer.echo(compare.render_csv(result), nl=False)
    elif markdown_out:
        typer.echo(compare.render_markdown(result), nl=False)
    else:
        from rich.console import Console

        console = Console()
        fits = compare.columns_fit(result, console.width)
        console.print(compare.render_table(result) if fits else compare.render_table_by_run(result, console.width))


def _chains(specs: list[str], store) -> list[str]:
    """--chain: each RUN that names a registry run becomes the ids of its chain, in order
    (a RUN that is a file or a wandb path stays itself); a run listed twice, once."""
    from controller.errors import UnknownRunError

    out: list[str] = []
    for spec in specs:
        try:
            ids = [r.run_id for r in store.chain(store.get_run(spec).run_id)]
        except UnknownRunError:
            ids = [spec]
        out += [i for i in ids if i not in out]
    return out


def _prefetched(specs: list[str], store):
    """Resolve RUNs one ahead on a thread: the next run's Parquet is read (Arrow releases the
    GIL) while this one is summarised; at most two runs' tables are in memory at once."""
    from concurrent.futures import ThreadPoolExecutor

    from controller import compare
    from controller.store.runstore import RunStore

    def load(spec: str):
        local = RunStore(store.path)  # sqlite connections stay on their thread
        try:
            return compare.resolve(spec, local)
        finally:
            local.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(load, specs[0])
        for nxt in specs[1:] + [None]:
            current = pending.result()
            if nxt is not None:
                pending = pool.submit(load, nxt)
            yield current


@app.command("import")
def import_cmd(
    source: str = typer.Argument(..., help="A finished run's log file, run directory, metrics.jsonl, offline "
                                           "wandb run dir, or wandb path entity/project/run_id."),
    name: Optional[str] = typer.Option(None, "--name", help="Name to register it under (default: from the source)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Bring a run into the registry and the metric history, so compare-runs can name it."""
    import json

    from controller.adopt.importers import import_run
    from controller.store.runstore import RunStore

    store = RunStore()
    try:
        record, loaded = import_run(source, name=name, store=store)
    finally:
        store.close()
    doc = {"run_id": record.run_id, "name": record.name, "kind": loaded.kind, "samples": loaded.progress.num_rows,
           "end_state": loaded.end_state, "end_detail": loaded.end_detail, "wandb_run_id": loaded.wandb_run_id}
    if json_out:
        typer.echo(json.dumps(doc, ensure_ascii=False))
    else:
        typer.echo(f"imported {record.name} as {record.run_id}: {doc['samples']} progress samples, "
                   f"end state {loaded.end_state}" + (f" ({loaded.end_detail})" if loaded.end_detail else ""))
