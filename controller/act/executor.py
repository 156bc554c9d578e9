"""Carrying out the recovery decision after each watch tick (`dfctl watch --recover`).

Per watched run: decide() (controller/act/recovery.py) on its state, then act -- a resume
stops the old run first when it still lives (SIGTERM: the bundled trainer saves a
checkpoint), launches the linked run (controller/ship/relaunch.py; on the next target of
recover.targets, controller/ship/move.py: release and checkpoint carried there first) and
adds it to the watch; a stop or resume of a hang waits until the watch's automatic stack dump of it is
saved (or has concluded it cannot be taken: that is said). Every action is said once
(`say`) and recorded in the registry's actions table. Acting runs inside the tick: a
resume costs that tick the old run's stop grace and one launch exec.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from controller.act.recovery import Action, decide
from controller.errors import AlreadyResumedError, DfctlError, SourceUnreadableError, UnreachableError
from controller.playbook import TargetConfig, recover_config_from
from controller.records import Finding
from controller.ship.launch import stop_recorded
from controller.ship.move import describe_move, relaunch_on
from controller.ship.relaunch import describe, relaunch
from controller.store.runstore import RunRecord, RunStore, target_of
from controller.transport.base import Transport

if TYPE_CHECKING:
    from controller.watch.follower import RunFollower
    from controller.watch.tick import Watch

Say = Callable[[str, dict[str, Any]], None]
"""say(line, doc): one action, as a line a person reads and as a JSON-able document."""

RETRY_AFTER_FAILURE_S = 10.0
"""A resume that failed (target unreachable, launch refused) is tried again no sooner; the
same failure again is not said or recorded again."""


def _open(record: RunRecord) -> Transport:
    return _open_target(target_of(record))


def _open_target(target: TargetConfig) -> Transport:
    from controller.transport.factory import open_transport

    return open_transport(target)


class Recoverer:
    """Decides and acts for every run of one Watch, once per tick (call after_tick)."""

    def __init__(self, store: RunStore, say: Say, *, transport_for: Callable[[RunRecord], Transport] = _open,
                 open_target: Callable[[TargetConfig], Transport] = _open_target,
                 clock: Callable[[], float] = time.time):
        self.store, self.say, self.transport_for, self.clock = store, say, transport_for, clock
        self.open_target = open_target          # a resume on another target (recover.targets)
        self._said: set[tuple[str, ...]] = set()
        self._failed_at: dict[str, float] = {}
        self._last_failure: dict[str, str] = {}
        self._stopped_for_resume: dict[str, Action] = {}
        self._waiting: set[str] = set()        # runs with a decision due later (window, back-off, stacks)
        self._finished: set[str] = set()       # runs acted on for good (resumed, stopped, given up)

    @property
    def pending(self) -> bool:
        """A decision is still due for some run: the watch must not end yet."""
        return bool(self._waiting)

    def after_tick(self, watch: Watch) -> list[dict[str, Any]]:
        """Decide and act for each run; returns the documents of what was done this tick."""
        done: list[dict[str, Any]] = []
        for r in list(watch.runs):
            rec = r.record
            if rec.run_id in self._finished or rec.job_id is not None or rec.is_job:
                continue
            now = self.clock()
            successor = self.store.successor(rec.run_id)
            action = decide(r.state, recover_config_from(rec.playbook), rec.attempt, now,
                            successor=successor.run_id if successor else None)
            if rec.run_id in self._stopped_for_resume and successor is None:
                # stopped by us for a resume whose launch failed: now it reads as an
                # operator's stop, which decide() never acts on -- the resume is still ours
                action = self._stopped_for_resume[rec.run_id]
            self._waiting.discard(rec.run_id)
            if action.kind == "none":
                if action.due_s is not None:
                    self._waiting.add(rec.run_id)
                    self._once(rec.run_id, ("wait", *(action.finding.key if action.finding else ())),
                               "waiting", action.reason, now)
                continue
            if now < self._failed_at.get(rec.run_id, float("-inf")) + RETRY_AFTER_FAILURE_S:
                self._waiting.add(rec.run_id)
                continue
            if action.after_stacks and not self._stacks_done(watch, rec, action.finding):
                self._waiting.add(rec.run_id)
                self._once(rec.run_id, ("stacks",), "waiting", f"{action.reason}: waiting for its stack dump", now)
                continue
            doc = self._act(watch, r, action, now)
            if doc is not None:
                done.append(doc)
        return done

    def exit_code(self, watch: Watch) -> int:
        """The watch's verdict with recovery: each chain is judged by its newest run (a run
        resumed and healthy since is not a failure of the watch)."""
        from controller import judge

        newest = [r for r in watch.runs if self.store.successor(r.record.run_id) is None]
        return judge.verdict_exit_code([f for r in newest for f in r.state.findings if f.kind != "unreachable"]
                                       + [f for j in watch.jobs for f in j.state.findings])

    # -- the actions -------------------------------------------------------------------
    def _act(self, watch: Watch, r: RunFollower, action: Action, now: float) -> dict[str, Any] | None:
        rec = r.record
        if action.kind == "give_up":
            self._finished.add(rec.run_id)
            return self._record(rec.run_id, "give_up", action.reason, now)
        try:
            transport = self.transport_for(rec)
            if action.kind == "stop":
                self._stop(transport, rec, r, "dfctl watch --recover")
                self._finished.add(rec.run_id)
                return self._record(rec.run_id, "stop", action.reason, now)
            if action.target is not None:
                return self._move(watch, r, action, transport, now)
            if self._stop(transport, rec, r, "dfctl watch --recover (resume)"):
                self._stopped_for_resume[rec.run_id] = action
            run = relaunch(self.store, transport, rec, action.changes)
        except AlreadyResumedError as exc:
            self._finished.add(rec.run_id)
            return self._record(rec.run_id, "refused", f"{action.reason}: {exc.message}", now)
        except SourceUnreadableError as exc:
            self._finished.add(rec.run_id)
            return self._record(rec.run_id, "give_up", f"{action.reason}: {exc.message}", now)
        except DfctlError as exc:
            self._failed_at[rec.run_id] = now
            self._waiting.add(rec.run_id)
            reason = f"{action.reason}: {exc.message}"
            if self._last_failure.get(rec.run_id) == reason:
                return None              # the same failure again (a long outage): tried, not said again
            self._last_failure[rec.run_id] = reason
            return self._record(rec.run_id, "failed", reason, now)
        self._finished.add(rec.run_id)
        watch.add_run(self.store.get_run(run.run_id))
        return self._record(rec.run_id, "resume", f"{action.reason}: {describe(run, rec)}", now, run.run_id)

    def _move(self, watch: Watch, r: RunFollower, action: Action, transport: Transport,
              now: float) -> dict[str, Any]:
        """A resume on the next target of recover.targets (controller/ship/move.py). The old
        run is stopped first when it may live; when its target cannot be reached -- often the
        reason to move -- it is not, and the line says so."""
        rec = r.record
        note = ""
        try:
            if self._stop(transport, rec, r, "dfctl watch --recover (resume elsewhere)"):
                self._stopped_for_resume[rec.run_id] = action
        except UnreachableError as exc:
            note = f" (the old run could not be stopped: {exc.message})"
        assert action.target is not None
        moved = relaunch_on(self.store, rec, action.changes, action.target, transport_for=self.transport_for,
                            open_target=self.open_target)
        self._finished.add(rec.run_id)
        watch.add_run(self.store.get_run(moved.run.run_id))
        return self._record(rec.run_id, "resume", f"{action.reason}: {describe_move(moved, rec)}{note}", now,
                            moved.run.run_id)

    def _stop(self, transport: Transport, rec: RunRecord, r: RunFollower, by: str) -> bool:
        """Stop the run if a process of it may still live (SIGTERM, its stop_grace_s, SIGKILL);
        whether it was stopped here."""
        if r.state.state in ("failed", "finished", "stopped", "ended") or rec.pid is None \
                or rec.run_id in self._stopped_for_resume:
            return False
        grace = float(((rec.playbook or {}).get("run") or {}).get("stop_grace_s", 60.0))
        res = stop_recorded(self.store, transport, rec, grace, by=by)
        if res.get("left"):
            raise DfctlError(f"run {rec.run_id}: processes still alive after SIGKILL: {res['left']}")
        return True

    def _stacks_done(self, watch: Watch, rec: RunRecord, f: Finding | None) -> bool:
        """The hang's stack dump is saved in the registry -- or the watch's dump of it has
        concluded without one (its evidence says why), or the watch takes no dumps."""
        if watch.auto_stacks is None:
            return True
        since = (f.first_seen_s or 0.0) if f is not None else 0.0
        if any(taken >= since - 1.0 for taken, _ in self.store.stacks(rec.run_id)):
            return True
        live = next((x for x in watch.states if x.run_id == rec.run_id), None)
        held = [x for x in (live.findings if live else []) if f is not None and x.key == f.key]
        return any(line.startswith("stacks:") for x in held for line in x.evidence)

    # -- saying and recording ----------------------------------------------------------
    def _record(self, run_id: str, kind: str, reason: str, now: float, new_run_id: str | None = None) -> dict[str, Any]:
        self.store.add_action(run_id, now, kind, reason, new_run_id)
        doc = {"run_id": run_id, "action": kind, "reason": reason, "new_run_id": new_run_id, "time_s": now}
        self.say(f"recover {run_id}: {kind}: {reason}", doc)
        return doc

    def _once(self, run_id: str, key: tuple[str, ...], kind: str, reason: str, now: float) -> None:
        k = (run_id, *key)
        if k in self._said:
            return
        self._said.add(k)
        self.say(f"recover {run_id}: {kind}: {reason}",
                 {"run_id": run_id, "action": kind, "reason": reason, "new_run_id": None, "time_s": now})
