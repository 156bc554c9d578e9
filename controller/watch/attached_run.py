"""The watch's side of a run dfctl did not launch (dfctl attach): what attach recorded
(the registry's `attachments` row) applied tick by tick. The rules themselves are pure and
live in adopt/attached.py; this keeps what they need between ticks."""

from __future__ import annotations

from typing import Any

from controller.adopt.attached import ended_verdict, explain_stale_log
from controller.records import Finding, RunState
from controller.store.runstore import RunStore


class AttachedRun:
    """An attached run's facts: its pid namespace, the oom_kill counter first seen, its end."""

    def __init__(self, run_id: str, store: RunStore, attachment: dict[str, Any]):
        self.run_id, self.store, self.attachment = run_id, store, attachment
        self.end_judged = False

    @property
    def pid_ns(self) -> str | None:
        return self.attachment.get("pid_ns")

    def note_facts(self, st: RunState) -> None:
        """The CT cgroup's oom_kill counter when the watch first saw the run (its launch is
        unknown), and `stopped` once `dfctl stop` recorded it so; gone otherwise is `ended`
        -- exit code unknown, never invented."""
        hs = st.host_sample
        if st.oom_kill_at_launch is None and hs is not None and hs.oom_kill_count is not None \
                and st.process.state == "running":
            st.oom_kill_at_launch = hs.oom_kill_count
        if st.state in ("finished", "failed"):
            try:
                stopped = self.store.get_run(self.run_id).state == "stopped"
            except Exception:  # noqa: BLE001 - the registry row is informational here
                stopped = False
            st.state = "stopped" if stopped else "ended"

    def judged(self, found: list[Finding], st: RunState, now: float) -> list[Finding]:
        """The state's findings with a stale_log explained by what attach saw, and the
        run's closing verdict once it has ended (judged once)."""
        found = [explain_stale_log(f, st, self.attachment, now) for f in found]
        if self.end_judged or st.state != "ended":
            return found
        self.end_judged = True
        after = st.host_sample.oom_kill_count if st.host_sample else None
        f = ended_verdict(self.run_id, st.findings, st.log_tail, st.oom_kill_at_launch, after, now)
        return found + ([f] if f is not None else [])
