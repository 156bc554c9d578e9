"""The registry's findings table: what the detectors found of each run, once per kind and summary.

Apart from RunStore (which opens the database and hands this its connection) because a finding's
life -- recorded, cleared when its cause went away, live again when it holds again, its
evidence grown by a later stack dump -- is its own set of rules. One row per (run, kind,
summary): the registry de-duplicates on that key, which is why summaries avoid
ever-changing numbers (controller/judge/__init__.py).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Iterable

from controller.records import Finding


class FindingTable:
    """Rows of the `findings` table (schema in runstore.py, beside the other tables)."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def add(self, run_id: str, found: Iterable[Finding]) -> list[Finding]:
        """Record findings; returns only those not recorded before (for --notify). A finding
        recorded and since cleared that holds again is live again and returned: it is news."""
        new: list[Finding] = []
        for f in found:
            cur = self._db.execute(
                "INSERT INTO findings (run_id, kind, summary, severity, first_seen_s, evidence, hint, line) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, kind, summary) DO UPDATE SET cleared_s = NULL "
                "WHERE cleared_s IS NOT NULL",
                (run_id, f.kind, f.summary, f.severity, f.first_seen_s, json.dumps(list(f.evidence)),
                 f.hint, f.line))
            if cur.rowcount:
                new.append(f)
        return new

    def clear(self, run_id: str, finding: Finding, cleared_s: float) -> None:
        """The finding's cause went away at cleared_s: the record keeps it, marked so."""
        self._db.execute("UPDATE findings SET cleared_s = ? WHERE run_id = ? AND kind = ? AND summary = ?",
                         (cleared_s, run_id, finding.kind, finding.summary))

    def update_evidence(self, run_id: str, finding: Finding) -> None:
        """A recorded finding's evidence grown later (the automatic stack dump's frames)."""
        self._db.execute("UPDATE findings SET evidence = ? WHERE run_id = ? AND kind = ? AND summary = ?",
                         (json.dumps(list(finding.evidence)), run_id, finding.kind, finding.summary))

    def of_run(self, run_id: str) -> list[Finding]:
        rows = self._db.execute(
            "SELECT * FROM findings WHERE run_id = ? ORDER BY first_seen_s", (run_id,)).fetchall()
        return [Finding(kind=r["kind"], severity=r["severity"], summary=r["summary"],
                        evidence=tuple(json.loads(r["evidence"] or "[]")), hint=r["hint"] or "",
                        first_seen_s=r["first_seen_s"], line=r["line"], run_id=run_id,
                        cleared_s=r["cleared_s"]) for r in rows]
