"""The registry's cursors table: how far a watcher has read each run's files.

One row per run; each followed file's cursor (controller/records.py FileCursor: dev,
inode, offset, line count, tail and head fingerprints) is one JSON column in its one
JSON form, so `sqlite3 registry.sqlite 'SELECT * FROM cursors'` reads as what it is.

Older registries kept the cursor flat: the log's inode/offset/line/fingerprint columns
and bare-int offsets for metrics.jsonl and the .wandb file. Opening one migrates those
rows in place, once: each becomes the JSON form (a bare int is a FileCursor with that
offset and nothing else known, so the next read of that file checks its size only and
then fingerprints it). The old columns stay (SQLite keeps columns) but are not read
again once a row is in the JSON form.
"""

from __future__ import annotations

import json
import sqlite3
import time

from controller.records import FOLLOWED_FILES, FileCursor, RunCursor

SCHEMA = """
CREATE TABLE IF NOT EXISTS cursors (
  run_id TEXT PRIMARY KEY, log_cursor TEXT, metrics_cursor TEXT, wandb_cursor TEXT,
  progress_step INTEGER, updated_s REAL
);
"""

_COLUMNS = {f"{name}_cursor": "TEXT" for name in FOLLOWED_FILES} | {"progress_step": "INTEGER",
                                                                    "updated_s": "REAL"}
_FLAT_COLUMNS = ("log_inode", "log_offset", "log_line_no", "log_fingerprint", "log_head",
                 "metrics_offset", "wandb_offset")
"""The flat spelling of an older registry's rows (read only by the migration)."""


class CursorTable:
    """Reads and writes RunCursors; migrates an older registry's flat rows on open."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db
        db.executescript(SCHEMA)
        have = {r[1] for r in db.execute("PRAGMA table_info(cursors)")}
        for name, kind in _COLUMNS.items():
            if name not in have:
                db.execute(f"ALTER TABLE cursors ADD COLUMN {name} {kind}")
        if "log_offset" in have:
            self._migrate_flat_rows(have)

    def _migrate_flat_rows(self, have: set[str]) -> None:
        """Rows written before the per-file cursor: rewritten in the JSON form (idempotent,
        so two dfctl processes opening the same old registry at once agree)."""
        flat = [c for c in _FLAT_COLUMNS if c in have]
        rows = self._db.execute(f"SELECT run_id, {', '.join(flat)} FROM cursors "
                                "WHERE log_cursor IS NULL AND metrics_cursor IS NULL AND wandb_cursor IS NULL"
                                ).fetchall()
        for row in rows:
            doc = {k: row[k] for k in flat if row[k] is not None}
            cur = RunCursor.from_json(doc)
            self._db.execute("UPDATE cursors SET log_cursor = ?, metrics_cursor = ?, wandb_cursor = ? "
                             "WHERE run_id = ? AND log_cursor IS NULL",
                             (*(_text(cur.file(n)) for n in FOLLOWED_FILES), row["run_id"]))

    def get(self, run_id: str) -> RunCursor:
        row = self._db.execute("SELECT log_cursor, metrics_cursor, wandb_cursor, progress_step FROM cursors "
                               "WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return RunCursor()
        log, metrics, wandb = (FileCursor.from_json(json.loads(row[f"{n}_cursor"] or "null")) for n in FOLLOWED_FILES)
        return RunCursor(log, metrics, wandb, row["progress_step"])

    def set(self, run_id: str, cur: RunCursor) -> None:
        self._db.execute("INSERT OR REPLACE INTO cursors (run_id, log_cursor, metrics_cursor, wandb_cursor, "
                         "progress_step, updated_s) VALUES (?, ?, ?, ?, ?, ?)",
                         (run_id, *(_text(cur.file(n)) for n in FOLLOWED_FILES), cur.progress_step, time.time()))


def _text(cur: FileCursor) -> str:
    return json.dumps(cur.to_json(), sort_keys=True)
