"""A run's findings as the watch keeps them: live, cleared, recorded once, and the guard
that keeps a detector's bug from ending the watch.

The registry dedupes (a finding is stored once, by run + kind + summary), so a watcher
restarted after a kill records nothing twice; a cleared finding that holds again is live
again and is news (`on_finding`: --notify).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from controller.records import Finding, RunState
from controller.store.runstore import RunStore

FindingHook = Callable[[RunState, Finding], None]


class FindingBook:
    """One run's findings: RunState's live and cleared lists and the registry's record."""

    def __init__(self, state: RunState, store: RunStore, errors: list[str], on_finding: FindingHook | None):
        self.state, self.store, self.errors, self.on_finding = state, store, errors, on_finding
        recorded = store.findings(state.run_id)
        state.findings = [f for f in recorded if f.cleared_s is None]
        state.cleared_findings = [f for f in recorded if f.cleared_s is not None]

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def record(self, found: list[Finding]) -> list[Finding]:
        """Store the findings not live yet; returns those the registry did not hold (news)."""
        if not found:
            return []
        found = [f if f.run_id else replace(f, run_id=self.run_id) for f in found]
        known = {f.key for f in self.state.findings}
        fresh = [f for f in found if f.key not in known]
        stored = self.store.add_findings(self.run_id, fresh)
        self.state.findings.extend(fresh)
        back = {f.key for f in fresh}
        if back and self.state.cleared_findings:   # a cleared finding that holds again is live again
            self.state.cleared_findings = [f for f in self.state.cleared_findings if f.key not in back]
        for f in stored:
            if self.on_finding is not None:
                try:
                    self.on_finding(self.state, f)
                except Exception:  # noqa: BLE001 - a notifier must not end the watch
                    pass
        return stored

    def clear(self, gone: Callable[[Finding], bool], now: float) -> None:
        """Live findings whose cause went away leave the live list for cleared_findings and
        are marked cleared (with when) in the registry, which keeps them."""
        st = self.state
        ended = [f for f in st.findings if gone(f)]
        if not ended:
            return
        done = [replace(f, cleared_s=now) for f in ended]
        st.findings = [f for f in st.findings if f not in ended]
        st.cleared_findings.extend(done)
        for f in done:
            try:
                self.store.clear_finding(self.run_id, f, now)
            except Exception as exc:  # noqa: BLE001 - the record is a side channel; never end the watch
                self.errors.append(f"clear finding: {exc}")

    def guarded(self, what: str, call: Callable[[], list[Finding]]) -> list[Finding]:
        """A detector bug costs that detector's findings for this tick, never the watch:
        the error is kept in `errors` (the CLI prints it once) and the cursor still moves."""
        try:
            return list(call())
        except Exception as exc:  # noqa: BLE001
            self._note(what, exc)
            return []

    def guarded_bool(self, what: str, call: Callable[[], bool]) -> bool:
        """guarded() for a yes/no rule: a bug answers no (the finding stays)."""
        try:
            return bool(call())
        except Exception as exc:  # noqa: BLE001 - a rule bug must not end the watch
            self._note(what, exc)
            return False

    def _note(self, what: str, exc: Exception) -> None:
        msg = f"{what} failed on run {self.run_id}: {type(exc).__name__}: {exc}"
        if msg not in self.errors:
            self.errors.append(msg)
