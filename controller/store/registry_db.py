"""Opening the registry's SQLite file so that several dfctl processes share it safely.

WAL journal (readers never block the writer), a 30 s busy timeout on every statement,
autocommit (each RunStore method is its own short transaction), rows by column name. A
data directory that cannot hold the file is bad input named by where it came from
(DFCTL_HOME, or the default under ~/.local/share), never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from controller.errors import BadInputError


def open_registry(path: Path, *, from_env: bool) -> sqlite3.Connection:
    """The registry's connection, in WAL mode. `from_env`: the path came from DFCTL_HOME
    or the default (errors name that), not from the caller."""
    db = _connect(path, from_env=from_env)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=30000")
    _use_wal(db)
    return db


def _connect(path: Path, *, from_env: bool) -> sqlite3.Connection:
    """The registry's connection; a data directory that cannot hold it (a file, an
    unwritable or impossible path) is bad input named by its source, not a traceback."""
    where = f"DFCTL_HOME={os.environ['DFCTL_HOME']}" if from_env and os.environ.get("DFCTL_HOME") \
        else str(path.parent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.parent.is_dir():
            raise NotADirectoryError(f"{path.parent} is not a directory")
        return sqlite3.connect(path, timeout=30, isolation_level=None)
    except FileExistsError:
        problem = f"{path.parent} exists and is not a directory"
    except (OSError, sqlite3.Error) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
        problem = f"{path.parent}: {problem}" if str(path.parent) not in problem else problem
    raise BadInputError(f"{where}: cannot hold the dfctl registry: {problem}",
                        hint="point DFCTL_HOME at a writable directory (or unset it: ~/.local/share/dfctl)")


def _use_wal(db: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Put the file in WAL mode (once; a no-op after). Switching needs an exclusive lock,
    and SQLite answers SQLITE_BUSY at once, without calling the busy handler, when two
    openers would deadlock on it -- seen when two `dfctl deploy` started together on a
    fresh registry (one died with "database is locked"). So a busy switch is retried
    until wait_s, the same patience the busy timeout gives every other statement."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
