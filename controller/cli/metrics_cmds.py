"""CLI command `dfctl export-metrics`: every live run of the registry, served for Prometheus.

Wiring only: a MetricsEndpoint (controller/expose/scrape_endpoint.py) fed by a LiveFleet
(controller/expose/live_fleet.py) ticking on the watch's own schedule; the progress it
reads goes to the runs' Parquet history as `dfctl watch` writes it, since it moves the same
registry cursors. Runs until SIGINT/SIGTERM/SIGHUP (exit 130).
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from controller.cli.app import app
from controller.cli.interrupts import interrupts_unwind, raise_if_interrupted
from controller.cli.watch_cmds import PROGRESS_SEED_LEN, _HistoryHook, _report_errors, metrics_endpoint, tick_hooks


@app.command("export-metrics")
def export_metrics(
    metrics_port: int = typer.Option(..., "--metrics-port", metavar="PORT", help="Serve at http://ADDR:PORT/metrics (0: a free "
                                                                   "port, named on stderr)."),
    metrics_addr: Optional[str] = typer.Option(None, "--metrics-addr", metavar="ADDR", help="Address to listen on (default "
                                                                            "127.0.0.1)."),
    interval: Optional[float] = typer.Option(None, "--interval", min=0.05, help="Seconds between ticks, for "
                                                                                "every run (default 2)."),
) -> None:
    """Serve every live run's step, tok/s, loss, GPUs, findings and state for Prometheus, until stopped.

    The registry is read again every tick: a run deployed meanwhile is watched from its next
    tick on; one that ended keeps its last figures until the next run joins."""
    from controller.expose.live_fleet import LiveFleet
    from controller.playbook import WatchConfig
    from controller.store.runstore import RunStore
    from controller.watch.tick import ticks_every

    store = RunStore()
    try:
        endpoint = metrics_endpoint(metrics_port, metrics_addr)
    except BaseException:
        store.close()
        raise
    history = _HistoryHook()
    interval_s = interval if interval is not None else WatchConfig().interval_s
    fleet = LiveFleet(store, on_tick=tick_hooks(history.record_gpus, endpoint.collector.publish_report),
                      on_watch=lambda w: _HistoryHook.seed(w, keep=PROGRESS_SEED_LEN),
                      on_progress=history, interval_s=interval_s)
    shown: set = set()
    try:
        with interrupts_unwind():   # SIGTERM/SIGHUP unwind through the finally below
            for _ in ticks_every(interval_s):
                raise_if_interrupted()   # one a `__del__` swallowed (controller/cli/interrupts.py)
                for run_id in fleet.refresh():
                    print(f"dfctl: export-metrics: watching {run_id}", file=sys.stderr, flush=True)
                fleet.tick()
                if fleet.watch is not None:
                    _report_errors(fleet.watch, shown)
    finally:
        fleet.close()
        history.close()
        endpoint.close()
        store.close()
