"""`dfctl export-metrics`: every live run of the registry watched by one Watch, for as long
as the exporter lives.

Why re-read the registry each tick: the exporter outlives the runs it starts with; a run
deployed meanwhile must show up without a restart. The Watch is re-made when a live run
appears that it does not hold (runs -w does the same, controller/cli/runs_live.py): its
followers start from the registry's cursors, so nothing is read twice. A run that ends
stays in the Watch -- its final state and findings are exposed -- until the next re-make;
then it drops out, as a finished process's series do in Prometheus.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from controller.adopt.imported import is_imported
from controller.records import RunState
from controller.store.runstore import LIVE_STATES, RunRecord, RunStore
from controller.watch.tick import TickReport, Watch


def live_records(store: RunStore) -> list[RunRecord]:
    """The registry's live runs (a job once, as its job row; no imported run: nothing to probe)."""
    return [r for r in store.runs() if r.state in LIVE_STATES and not is_imported(r)]


class LiveFleet:
    """Ticks one Watch over the registry's live runs; `watch_kwargs` go to every Watch made
    (interval_s, on_progress, on_finding, gpu, ...); `on_watch` sees each new Watch before
    its first tick (the CLI gives its runs their progress history back there)."""

    def __init__(self, store: RunStore, *, on_tick: Callable[[TickReport], None] | None = None,
                 on_watch: Callable[[Watch], None] | None = None, **watch_kwargs: Any) -> None:
        self.store = store
        self.on_tick = on_tick
        self.on_watch = on_watch
        self.watch_kwargs = watch_kwargs
        self.watch: Watch | None = None
        self.watched: tuple[str, ...] = ()
        self.remakes = 0

    def refresh(self) -> list[str]:
        """Re-read the registry; re-make the Watch when a live run is new to it. Returns the
        ids that joined."""
        records = live_records(self.store)
        joined = [r.run_id for r in records if r.run_id not in self.watched]
        if not joined:
            return []
        if self.watch is not None:
            self.watch.close()
        self.watch = Watch(records, self.store, **self.watch_kwargs)
        self.watch.on_tick = self.on_tick
        if self.on_watch is not None:
            self.on_watch(self.watch)
        self.watched = tuple(r.run_id for r in records)
        self.remakes += 1
        return joined

    def tick(self) -> TickReport:
        """One tick over whatever is watched now; with nothing live, an empty report (the
        exporter still says it ticks)."""
        if self.watch is not None:
            return self.watch.tick()
        report = TickReport(time_s=time.time(), states=[], hosts=[])
        if self.on_tick is not None:
            self.on_tick(report)
        return report

    @property
    def states(self) -> list[RunState]:
        return self.watch.states if self.watch is not None else []

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None
