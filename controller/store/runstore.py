"""The local run registry: which runs exist, where they live, and how far we have read them.

SQLite (WAL, busy timeout) under the user's data directory, so two dfctl processes -- a
deploy and a watch, or two watchers -- can share it safely. The watch cursor and findings
live here too: a watcher killed and restarted continues with no log line lost or repeated.
Secrets are never stored: the playbook arrives already redacted.

Jobs (one training spread over several nodes by torchrun; playbook `[[nodes]]`) are ONE run
to the user -- one id, one name -- kept as one job row plus one member row per node:

- the job row: run_id = the job id (launch.make_run_id(name)), target_kind = "job", target a
  label ("job: 2 nodes (pct 200 on pve1, pct 200 on pve2)"), job_id NULL, node_rank NULL,
  playbook = the whole registry playbook (nodes + distributed), state set from its members;
- member rows: run_id = f"{job_id}.node{i}", job_id = the job's id, node_rank = i, the same
  name, that node's target_kind/target/host/vmid/workdir, playbook = the job's registry
  playbook with its "target" key replaced by THAT node's target (so target_of(member) reaches
  the node), run_dir = <node workdir>/runs/<job_id> (one dir name on every node), log_path =
  <run_dir>/train.log, pid = that node's wrapper pid.

Listing (`runs()`) and resolving a name or id prefix (`get_run`, `default_run`) see the job
row and hide member rows; an exact member id still resolves; `job_members(job_id)` lists a
job's members by node rank; `runs(members=True)` is every row (what lives on a target).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from controller.errors import UnknownRunError
from controller.playbook import TargetConfig
from controller.records import Finding, RunCursor
from controller.store.cursors import CursorTable
from controller.store.finding_table import FindingTable
from controller.store.registry_db import open_registry

LIVE_STATES = ("launched", "running")
"""Registry states of a run whose process may still be alive."""


def data_dir() -> Path:
    """$DFCTL_HOME, else $XDG_DATA_HOME/dfctl, else ~/.local/share/dfctl."""
    if os.environ.get("DFCTL_HOME"):
        return Path(os.environ["DFCTL_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dfctl"


@dataclass
class RunRecord:
    """One launched (or deployed) run, as the registry keeps it."""

    run_id: str                       # "<name>-<UTC timestamp>", also the run dir's name
    name: str
    target_kind: str                  # local | ssh | pct
    target: str                       # human: "pct 200 on pve1"
    host: str | None = None
    vmid: int | None = None
    workdir: str = ""
    run_dir: str = ""
    log_path: str = ""
    pid: int | None = None
    release_id: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    playbook: dict[str, Any] = field(default_factory=dict)   # redacted
    playbook_path: str | None = None
    started_s: float | None = None
    wandb_run_id: str | None = None
    state: str = "launched"           # launched | running | finished | failed | stopped | ended | unknown
    exit_code: int | None = None
    ended_s: float | None = None
    origin: str = "launched"          # launched (dfctl deploy) | attached (dfctl attach: started by hand)
    pid_start_ticks: int | None = None
    """/proc/<pid>/stat start time of `pid` (attached runs): with the pid, which process is the run's."""
    job_id: str | None = None
    """A job's member row (one node of a multi-node job): the job row's run id. NULL otherwise."""
    previous_run_id: str | None = None
    """A resume (controller/ship/relaunch.py): the run this one continues; NULL for a first run."""
    attempt: int = 0
    """Resumes before this run in its chain (0: the first run; n: the n-th resume)."""
    node_rank: int | None = None
    """A job member's node rank: its [[nodes]] index (0 hosts the rendezvous; torchrun's c10d numbers
    the nodes by their addrs, the same order when those sort in node order)."""

    @property
    def is_job(self) -> bool:
        """The job row of a multi-node job (its members hold the processes)."""
        return self.target_kind == JOB_KIND


JOB_KIND = "job"
"""target_kind of a job row."""


def target_of(rec: RunRecord) -> TargetConfig:
    """The target a stored run lives on, rebuilt from its row: the playbook's [target] as
    stored, with the row's own columns filling what it lacks. The one converter, so
    `dfctl watch`, `stop`, `runs` and `logs` all reach a run the same way."""
    raw = dict((rec.playbook or {}).get("target") or {})
    known = {f.name for f in fields(TargetConfig)}
    kw = {k: v for k, v in raw.items() if k in known}
    kw.setdefault("kind", rec.target_kind if rec.target_kind in ("local", "ssh", "pct") else "local")
    if rec.host and not kw.get("host"):
        kw["host"] = rec.host
    if rec.vmid is not None and kw.get("vmid") is None:
        kw["vmid"] = rec.vmid
    if rec.workdir and "workdir" not in kw:
        kw["workdir"] = rec.workdir
    return TargetConfig(**kw)


_RUN_COLUMNS_ADDED = {"origin": "TEXT DEFAULT 'launched'", "pid_start_ticks": "INTEGER",
                      "job_id": "TEXT", "node_rank": "INTEGER", "previous_run_id": "TEXT",
                      "attempt": "INTEGER DEFAULT 0"}
_FINDING_COLUMNS_ADDED = {"cleared_s": "REAL"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, name TEXT, target_kind TEXT, target TEXT, host TEXT, vmid INTEGER,
  workdir TEXT, run_dir TEXT, log_path TEXT, pid INTEGER, release_id TEXT, git_commit TEXT,
  git_dirty INTEGER, playbook TEXT, playbook_path TEXT, started_s REAL, wandb_run_id TEXT,
  state TEXT, exit_code INTEGER, ended_s REAL, origin TEXT DEFAULT 'launched', pid_start_ticks INTEGER,
  job_id TEXT, node_rank INTEGER, previous_run_id TEXT, attempt INTEGER DEFAULT 0
);
CREATE TABLE IF NOT EXISTS attachments (
  run_id TEXT PRIMARY KEY, doc TEXT
);
CREATE TABLE IF NOT EXISTS stacks (
  run_id TEXT, taken_s REAL, doc TEXT, PRIMARY KEY (run_id, taken_s)
);
CREATE TABLE IF NOT EXISTS actions (
  run_id TEXT, time_s REAL, action TEXT, reason TEXT, new_run_id TEXT, PRIMARY KEY (run_id, time_s, action)
);
CREATE TABLE IF NOT EXISTS findings (
  run_id TEXT, kind TEXT, summary TEXT, severity TEXT, first_seen_s REAL, evidence TEXT,
  hint TEXT, line INTEGER, cleared_s REAL, PRIMARY KEY (run_id, kind, summary)
);
"""


class RunStore:
    """The registry database. Cheap to open; every method is one short transaction."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else data_dir() / "registry.sqlite"
        self._db = open_registry(self.path, from_env=path is None)
        self._db.executescript(_SCHEMA)
        self._cursors = CursorTable(self._db)
        self._findings = FindingTable(self._db)
        self._add_missing_columns("runs", _RUN_COLUMNS_ADDED)
        self._add_missing_columns("findings", _FINDING_COLUMNS_ADDED)
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass

    def _add_missing_columns(self, table: str, columns: dict[str, str]) -> None:
        """A registry written by an older dfctl lacks the newer columns: add them (NULL)."""
        have = {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns.items():
            if name not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    def close(self) -> None:
        self._db.close()

    # -- runs ---------------------------------------------------------------------------
    def add_run(self, rec: RunRecord) -> None:
        row = asdict(rec)
        row["playbook"] = json.dumps(row["playbook"], sort_keys=True)
        row["git_dirty"] = None if rec.git_dirty is None else int(rec.git_dirty)
        cols = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        self._db.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", row)

    def add_run_if_new(self, rec: RunRecord) -> bool:
        """add_run unless that run id is taken (False then): the check and the insert are one
        statement, so of two controllers registering the same id at once one gets it."""
        try:
            self.add_run(rec)
        except sqlite3.IntegrityError:
            return False
        return True

    def update_run(self, run_id: str, **changes: Any) -> None:
        allowed = {f.name for f in fields(RunRecord)} - {"run_id"}
        bad = set(changes) - allowed
        if bad:
            raise ValueError(f"unknown run fields: {sorted(bad)}")
        if "playbook" in changes:
            changes["playbook"] = json.dumps(changes["playbook"], sort_keys=True)
        sets = ", ".join(f"{k} = :{k}" for k in changes)
        self._db.execute(f"UPDATE runs SET {sets} WHERE run_id = :run_id", {**changes, "run_id": run_id})

    def remove_run(self, run_id: str) -> None:
        """Forget a run that never started (its launch was refused before a run dir existed)."""
        self._db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    @staticmethod
    def _record(row: sqlite3.Row) -> RunRecord:
        d = dict(row)
        d["playbook"] = json.loads(d["playbook"] or "{}")
        d["git_dirty"] = None if d["git_dirty"] is None else bool(d["git_dirty"])
        d["origin"] = d.get("origin") or "launched"
        d["attempt"] = d.get("attempt") or 0
        return RunRecord(**d)

    def runs(self, *, members: bool = False) -> list[RunRecord]:
        """All runs, newest first: a job once (its job row), its member rows only with
        members=True (every row: what runs on some target, job rows included)."""
        where = "" if members else "WHERE job_id IS NULL"
        rows = self._db.execute(f"SELECT * FROM runs {where} ORDER BY started_s DESC, run_id DESC").fetchall()
        return [self._record(r) for r in rows]

    def target_runs(self) -> list[RunRecord]:
        """Every row whose processes live on one target -- single runs and job members, not
        job rows (a job's target is its members'): what a conflict or status check asks about."""
        return [r for r in self.runs(members=True) if not r.is_job]

    def job_members(self, job_id: str) -> list[RunRecord]:
        """A job's member rows (one per node), by node rank."""
        rows = self._db.execute("SELECT * FROM runs WHERE job_id = ? ORDER BY node_rank", (job_id,)).fetchall()
        return [self._record(r) for r in rows]

    def default_run(self, command: str) -> RunRecord:
        """The run a command means when none is named -- where that is unambiguous: the one
        live run (launched/running), else with none live the newest run; several live runs
        are bad input naming them (a RUN argument picks one)."""
        runs = self.runs()
        if not runs:
            raise UnknownRunError(f"dfctl {command}: no runs in the registry ({self.path})",
                                  hint="dfctl deploy PLAYBOOK starts one; dfctl import SOURCE brings one in")
        live = [r for r in runs if r.state in LIVE_STATES and r.target_kind != "import"]
        if len(live) > 1:
            raise UnknownRunError(f"dfctl {command}: {len(live)} runs are live ({', '.join(r.run_id for r in live[:5])}); "
                                  f"name one", hint=f"dfctl {command} RUN (`dfctl runs` lists them)")
        return live[0] if live else runs[0]

    def successor(self, run_id: str) -> RunRecord | None:
        """The run launched to continue this one (a resume), if any: the newest such row."""
        row = self._db.execute("SELECT * FROM runs WHERE previous_run_id = ? ORDER BY started_s DESC LIMIT 1",
                               (run_id,)).fetchone()
        return self._record(row) if row is not None else None

    def chain(self, run_id: str) -> list[RunRecord]:
        """Every run of this run's resume chain, first run first: back along previous_run_id,
        then forward along successors (a cycle, which no launch makes, ends the walk)."""
        rec = self.get_run(run_id)
        seen = {rec.run_id}
        back = [rec]
        while back[0].previous_run_id and back[0].previous_run_id not in seen and self.has_run(back[0].previous_run_id):
            back.insert(0, self.get_run(back[0].previous_run_id))
            seen.add(back[0].run_id)
        nxt = self.successor(rec.run_id)
        while nxt is not None and nxt.run_id not in seen:
            back.append(nxt)
            seen.add(nxt.run_id)
            nxt = self.successor(nxt.run_id)
        return back

    def has_run(self, run_id: str) -> bool:
        """Is this exact run id registered?"""
        return self._db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def get_run(self, ref: str) -> RunRecord:
        """A run by exact id (a job member's too), by name (the newest of that name), or by
        unique id prefix; a name or prefix means the job, never one of its member rows."""
        row = self._db.execute("SELECT * FROM runs WHERE run_id = ?", (ref,)).fetchone()
        if row is None:
            row = self._db.execute(
                "SELECT * FROM runs WHERE name = ? AND job_id IS NULL ORDER BY started_s DESC LIMIT 1",
                (ref,)).fetchone()
        if row is None:
            rows = self._db.execute(
                "SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\' AND job_id IS NULL",
                (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",)).fetchall()
            if len(rows) > 1:
                raise UnknownRunError(f"run {ref!r}: ambiguous, matches {', '.join(r['run_id'] for r in rows[:5])}")
            row = rows[0] if rows else None
        if row is None:
            raise UnknownRunError(f"run {ref!r}: not in the registry ({self.path}); `dfctl runs` lists known runs")
        return self._record(row)

    # -- cursors ------------------------------------------------------------------------
    def get_cursor(self, run_id: str) -> RunCursor:
        return self._cursors.get(run_id)

    def set_cursor(self, run_id: str, cur: RunCursor) -> None:
        self._cursors.set(run_id, cur)

    # -- attached runs ------------------------------------------------------------------
    def set_attachment(self, run_id: str, doc: dict[str, Any]) -> None:
        """What `dfctl attach` learnt about a run it did not launch (controller.adopt.attach)."""
        self._db.execute("INSERT OR REPLACE INTO attachments VALUES (?, ?)", (run_id, json.dumps(doc, sort_keys=True)))

    def attachment(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT doc FROM attachments WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row["doc"]) if row else None

    def add_run_with_attachment(self, rec: RunRecord, doc: dict[str, Any]) -> None:
        """Both rows or neither: an attach never leaves half a run behind."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self.add_run(rec)
            self.set_attachment(rec.run_id, doc)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- stack dumps --------------------------------------------------------------------
    def add_stacks(self, run_id: str, taken_s: float, doc: dict[str, Any]) -> None:
        """One `py-spy dump` of the run's processes (controller.ship.stacks)."""
        self._db.execute("INSERT OR REPLACE INTO stacks VALUES (?, ?, ?)", (run_id, taken_s, json.dumps(doc)))

    def stacks(self, run_id: str) -> list[tuple[float, dict[str, Any]]]:
        rows = self._db.execute("SELECT taken_s, doc FROM stacks WHERE run_id = ? ORDER BY taken_s",
                                (run_id,)).fetchall()
        return [(r["taken_s"], json.loads(r["doc"])) for r in rows]

    # -- recovery actions ---------------------------------------------------------------
    def add_action(self, run_id: str, time_s: float, action: str, reason: str, new_run_id: str | None = None) -> None:
        """What `dfctl watch --recover` did about a run (controller/act/executor.py): resume,
        stop, give_up, refused (another controller resumed it), failed."""
        self._db.execute("INSERT OR REPLACE INTO actions VALUES (?, ?, ?, ?, ?)",
                         (run_id, time_s, action, reason, new_run_id))

    def actions(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT * FROM actions WHERE run_id = ? ORDER BY time_s", (run_id,)).fetchall()
        return [dict(r) for r in rows]

    # -- findings (controller/store/finding_table.py) ---------------------------------------
    def add_findings(self, run_id: str, found: Iterable[Finding]) -> list[Finding]:
        return self._findings.add(run_id, found)

    def clear_finding(self, run_id: str, finding: Finding, cleared_s: float) -> None:
        self._findings.clear(run_id, finding, cleared_s)

    def update_finding_evidence(self, run_id: str, finding: Finding) -> None:
        self._findings.update_evidence(run_id, finding)

    def findings(self, run_id: str) -> list[Finding]:
        return self._findings.of_run(run_id)
