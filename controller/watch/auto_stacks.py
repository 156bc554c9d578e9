"""The watch's automatic stack dump: when a run is found hung or its log stale, take ONE
py-spy dump of it (once per finding), off the tick, and put each thread's top frames into
the finding's evidence -- "3 threads in Queue.get (queue.py:171) from drafter_loop
(pipeline.py:212)" is what saves the operator an hour.

Off the tick: dumps run on a small thread pool; the tick only asks `finished()` (never
waits), so a slow or stuck dump cannot delay any run's tick beyond its own tick_wait_s.
Bounded: py-spy's own timeout per process on the target (launcher.stacks), a cap on
processes, and an overall deadline after which a dump is given up (its finding keeps its
evidence unchanged). A dump that fails (ptrace denied) is reported once, as one evidence
line saying why, and never retried for that finding.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from controller.records import Finding
from controller.ship.stacks import StackDump, StacksError, evidence_lines
from controller.store.runstore import RunRecord

DUMP_ON_KINDS = ("hang", "stale_log")
DEFAULT_DEADLINE_S = 60.0

DumpFn = Callable[[RunRecord], StackDump]


def dump_record(record: RunRecord, timeout_s: float = 15.0) -> StackDump:
    """The default DumpFn: the run's own target and transport (cached per host). An attached
    run is checked by pid + start time + the pid namespace attach recorded, as `dfctl stacks`
    checks it (take_stacks -> controller/probe/node_identity.py): a reused pid is not dumped."""
    from controller.ship.stacks import take_stacks
    from controller.store.runstore import RunStore, target_of
    from controller.transport.factory import open_transport

    pid_ns = None
    if record.origin == "attached":
        store = RunStore()   # this worker thread's own connection
        try:
            pid_ns = (store.attachment(record.run_id) or {}).get("pid_ns")
        finally:
            store.close()
    target = target_of(record)
    return take_stacks(open_transport(target), target, record, timeout_s=timeout_s, pid_ns=pid_ns)


@dataclass
class DumpOutcome:
    finding: Finding               # the finding, its evidence now holding the frames (or why not)
    dump: StackDump | None
    error: str | None


class AutoStacks:
    """Once per (run, finding): one dump in the background; finished ones collected per tick."""

    def __init__(self, dump: DumpFn = dump_record, *, deadline_s: float = DEFAULT_DEADLINE_S, workers: int = 2,
                 kinds: tuple[str, ...] = DUMP_ON_KINDS):
        self._dump = dump
        self.deadline_s = deadline_s
        self.kinds = kinds
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dfctl-stacks")
        self._asked: set[tuple[str, str, str]] = set()
        self._pending: dict[tuple[str, str, str], tuple[Finding, Future, float]] = {}

    def consider(self, record: RunRecord, finding: Finding, now_s: float | None = None) -> bool:
        """Queue a dump for this finding if it is one that wants frames and has none yet."""
        key = (record.run_id, finding.kind, finding.summary)
        if finding.kind not in self.kinds or key in self._asked:
            return False
        self._asked.add(key)
        self._pending[key] = (finding, self._pool.submit(self._dump, record),
                              time.monotonic() if now_s is None else now_s)
        return True

    def finished(self, now_s: float | None = None) -> list[DumpOutcome]:
        """Dumps done (or given up) since the last call; never blocks."""
        now = time.monotonic() if now_s is None else now_s
        out = []
        for key, (finding, fut, started) in list(self._pending.items()):
            if fut.done():
                del self._pending[key]
                out.append(self._outcome(finding, fut))
            elif now - started > self.deadline_s:
                del self._pending[key]
                fut.cancel()
                line = f"stacks: no dump within {self.deadline_s:.0f} s (py-spy did not answer); not retried"
                out.append(DumpOutcome(_with(finding, [line]), None, line))
        return out

    @staticmethod
    def _outcome(finding: Finding, fut: Future) -> DumpOutcome:
        try:
            dump = fut.result()
        except StacksError as exc:
            line = f"stacks: {exc.message}"
            return DumpOutcome(_with(finding, [line]), None, exc.message)
        except Exception as exc:  # noqa: BLE001 - a dump's failure must never end the watch
            line = f"stacks: dump failed: {type(exc).__name__}: {exc}"
            return DumpOutcome(_with(finding, [line]), None, line)
        return DumpOutcome(_with(finding, evidence_lines(dump)), dump, None)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _with(finding: Finding, lines: list[str]) -> Finding:
    return dataclasses.replace(finding, evidence=(*finding.evidence, *lines))
