"""Per-run metric history as plain Parquet files that pandas, polars and DuckDB read as-is.

Why Parquet parts: a watched run appends a few rows per tick for days. Rewriting one file
per tick would cost O(history) each time; keeping everything in memory would grow without
bound. So a writer buffers rows (bounded: `rows_per_part`, or `flush_interval_s` of age),
writes each buffer as one new *part* file, and merges small parts into bigger ones
(LSM-style tiers, streamed row group by row group, so memory stays bounded by one row
group however long the run). Every file is a complete Parquet file with the same schema.

Layout, under the run store (`runstore.data_dir()`, i.e. $DFCTL_HOME):

    history/<run_id>/progress/p<level>-<first>-<last>.parquet
    history/<run_id>/gpus/p<level>-<first>-<last>.parquet
    history/<run_id>/wandb/p<level>-<first>-<last>.parquet
    history/<run_id>/meta.json        # how the run was imported: source, config, end state

A step is kept once, on disk: at most one progress row per (run, step) in the files,
whatever the number of writers (two watches of one run, a watch restarted after a kill
that wrote rows its cursor did not yet cover, metrics.jsonl and later the .wandb file
reporting the same step). Every flush and merge of a run's history holds that run's lock
(`history/<run_id>/.lock`, flock: released by the kernel when its holder dies, SIGKILL
included), and a progress flush is an idempotent append keyed by step: rows whose step is
on disk already are dropped, and the fields they bring that the row on disk lacks (a
metrics.jsonl row without the loss the log line has) fill that row in place -- its part
file is rewritten under the same name (write + rename: a reader sees the old or the new
file whole). A field both rows have keeps the first value. Rows and cursor are thus never
out of step in the direction that loses a row, and the repeats the other direction costs
never reach the files. `read_progress()` still folds repeats, for histories written before
2026-12-02.

`first`/`last` are the part sequence numbers a file covers; a merged file covers the range of
the parts it replaced. A merge writes the new file first and deletes its sources after, so a
reader globbing `*.parquet` in that instant may see rows twice; `read_progress()` and
friends never do (they drop files whose range lies inside another file's range), and the
next flush deletes the sources of a merge that died before it could.

Reading, as-is:

    pandas:  pd.read_parquet("~/.local/share/dfctl/history/<run_id>/progress")
    polars:  pl.read_parquet("…/history/<run_id>/progress/*.parquet")
    DuckDB:  SELECT step, tok_per_s FROM '…/history/*/progress/*.parquet' WHERE run_id = '…'

Schemas (all nullable except the keys; units in the names; float64 unless said):

progress -- one training progress point (controller.records.ProgressSample):
    run_id string, step int64, time_s (unix s), source string ("log" | "metrics" | "wandb"),
    tok_per_s, samples_per_s, step_time_s, data_wait_s, loss, acc, tau, mem_alloc_gib,
    mem_peak_gib, lr, accept_len, eval_loss, eval_acc, eval_tau, eval_accept_len (the last five
    absent from files written before 2026-12-01: read as null), eval_accept_len_decode (from
    2026-12-02)

gpus -- one nvidia-smi row per GPU per tick (controller.records.GpuSample):
    run_id string, time_s (unix s), index int32, uuid string, name string, util_pct,
    mem_used_mib, mem_total_mib, temp_c, power_w, clocks_event_reasons string,
    users list<string>

wandb -- free-form wandb history rows in long form (one row per key per step), so rows with
different keys share one schema:
    run_id string, step int64 (wandb `_step`), time_s (`_timestamp`), key string (nested
    keys joined with "."), value (numbers and booleans), text string (anything else, JSON)
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from controller.records import GpuSample, ProgressSample, finite_or_none

PROGRESS_FLOAT_FIELDS = ("tok_per_s", "samples_per_s", "step_time_s", "data_wait_s", "loss", "acc", "tau",
                         "mem_alloc_gib", "mem_peak_gib", "lr",
                         # added 2026-12-01 (accept_len, held-out eval): older part files lack them,
                         # read_table and _merge fill them with nulls (conform_to)
                         "accept_len", "eval_loss", "eval_acc", "eval_tau", "eval_accept_len",
                         # added 2026-12-02 (trainer.eval_decode)
                         "eval_accept_len_decode")
GPU_FLOAT_FIELDS = ("util_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w")

SCHEMAS: dict[str, pa.Schema] = {
    "progress": pa.schema(
        [pa.field("run_id", pa.string(), nullable=False), pa.field("step", pa.int64(), nullable=False),
         pa.field("time_s", pa.float64()), pa.field("source", pa.string())]
        + [pa.field(name, pa.float64()) for name in PROGRESS_FLOAT_FIELDS]),
    "gpus": pa.schema(
        [pa.field("run_id", pa.string(), nullable=False), pa.field("time_s", pa.float64()),
         pa.field("index", pa.int32(), nullable=False), pa.field("uuid", pa.string()), pa.field("name", pa.string())]
        + [pa.field(name, pa.float64()) for name in GPU_FLOAT_FIELDS]
        + [pa.field("clocks_event_reasons", pa.string()), pa.field("users", pa.list_(pa.string()))]),
    "wandb": pa.schema(
        [pa.field("run_id", pa.string(), nullable=False), pa.field("step", pa.int64()), pa.field("time_s", pa.float64()),
         pa.field("key", pa.string(), nullable=False), pa.field("value", pa.float64()), pa.field("text", pa.string())]),
}
KINDS = tuple(SCHEMAS)

_PART = re.compile(r"^p(\d+)-(\d+)-(\d+)\.parquet$")
MERGED_ROW_GROUP_ROWS = 65_536
COMPRESSION = "lz4"
"""LZ4 (raw): decodes about twice as fast as zstd for ~35% more bytes; compare-runs reads
whole histories (10 runs x 1M rows within 2 s), so read speed wins."""


def history_root() -> Path:
    """history/ under the run store's data directory (honours $DFCTL_HOME)."""
    from controller.store.runstore import data_dir

    return data_dir() / "history"


def history_dir(run_id: str, root: Path | None = None) -> Path:
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise ValueError(f"history: bad run id {run_id!r}")
    return (root or history_root()) / run_id


_finite = finite_or_none


# -- part files -------------------------------------------------------------------------

def _parts(kind_dir: Path) -> list[tuple[int, int, int, Path]]:
    """(level, first, last, path) of every part file present, oldest range first."""
    out = []
    try:
        names = os.listdir(kind_dir)
    except FileNotFoundError:
        return []
    for name in names:
        m = _PART.match(name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), kind_dir / name))
    out.sort(key=lambda p: (p[1], -p[2]))
    return out


def live_parts(kind_dir: Path) -> list[Path]:
    """The files a reader should read: drop any whose range lies inside another's (a merge
    in progress, or one that crashed between writing the merged file and deleting sources)."""
    parts = _parts(kind_dir)
    live: list[Path] = []
    cover_last = -1
    for _level, _first, last, path in parts:  # sorted by first asc, widest range first
        if last <= cover_last:
            continue
        live.append(path)
        cover_last = max(cover_last, last)
    return live


def _publish(table: pa.Table, kind_dir: Path, level: int, first: int, last: int) -> Path:
    """Write a complete file under a temporary name, then link it into place atomically."""
    kind_dir.mkdir(parents=True, exist_ok=True)
    final = kind_dir / f"p{level}-{first:09d}-{last:09d}.parquet"
    tmp = kind_dir / f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    pq.write_table(table, tmp, compression=COMPRESSION)
    try:
        os.link(tmp, final)  # fails if the name exists: never overwrite another writer's part
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _merge(kind_dir: Path, sources: list[tuple[int, int, int, Path]], level: int, schema: pa.Schema) -> None:
    """Stream `sources` into one file of `level` (bounded memory), then delete them."""
    first, last = min(s[1] for s in sources), max(s[2] for s in sources)
    final = kind_dir / f"p{level}-{first:09d}-{last:09d}.parquet"
    tmp = kind_dir / f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    with pq.ParquetWriter(tmp, schema, compression=COMPRESSION) as writer:
        for _, _, _, path in sorted(sources, key=lambda s: s[1]):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=MERGED_ROW_GROUP_ROWS):
                if batch.schema != schema:   # a part written before a field was added
                    batch = conform_to(pa.Table.from_batches([batch]), schema).to_batches()[0]
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= MERGED_ROW_GROUP_ROWS:
                    writer.write_table(pa.Table.from_batches(pending, schema=schema))
                    pending, pending_rows = [], 0
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema=schema))
    try:
        os.link(tmp, final)
    except FileExistsError:
        tmp.unlink(missing_ok=True)
        return
    tmp.unlink(missing_ok=True)
    for _, _, _, path in sources:
        path.unlink(missing_ok=True)


def compact(kind_dir: Path, kind: str, *, fan_in: int = 16) -> int:
    """Merge every run of `fan_in` parts of one level into a part of the next level; repeat
    upwards. Returns how many merges ran. Safe to call any time; cheap when nothing to do."""
    merges = 0
    while True:
        live = set(live_parts(kind_dir))
        parts = [p for p in _parts(kind_dir) if p[3] in live]
        by_level: dict[int, list[tuple[int, int, int, Path]]] = {}
        for p in parts:
            by_level.setdefault(p[0], []).append(p)
        todo = next(((lvl, ps) for lvl, ps in sorted(by_level.items()) if len(ps) >= fan_in), None)
        if todo is None:
            return merges
        level, ps = todo
        _merge(kind_dir, sorted(ps, key=lambda p: p[1])[:fan_in], level + 1, SCHEMAS[kind])
        merges += 1


# -- one row per step on disk ----------------------------------------------------------

LOCK_FILE = ".lock"


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """The run's history lock: every process that writes or merges its parts holds it
    (flock, so a holder killed at any moment releases it). Outside the kind folders: a
    reader of `progress/` never sees it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # releases the lock


def drop_covered_parts(kind_dir: Path) -> int:
    """Delete the part files whose range lies inside another's: the sources of a merge
    that died after writing its file. Only under the run lock (no merge is under way then)."""
    live = set(live_parts(kind_dir))
    gone = 0
    for *_, path in _parts(kind_dir):
        if path not in live:
            path.unlink(missing_ok=True)
            gone += 1
    return gone


def _step_range(path: Path) -> tuple[int, int] | None:
    """(min, max) step of a part from its footer's statistics (no data read); None: empty."""
    md = pq.ParquetFile(path).metadata
    idx = md.schema.to_arrow_schema().get_field_index("step")
    lo: int | None = None
    hi: int | None = None
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        if rg.num_rows == 0:
            continue
        stats = rg.column(idx).statistics
        if stats is None or not stats.has_min_max:
            steps = pq.ParquetFile(path).read(columns=["step"]).column("step")
            return (pc.min(steps).as_py(), pc.max(steps).as_py()) if len(steps) else None
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    return None if lo is None or hi is None else (int(lo), int(hi))


def _fill_part(disk: pa.Table, rows: pa.Table) -> pa.Table | None:
    """`disk` with each null field of a row whose step `rows` has filled from it (first
    value wins: a field already on disk stays); None when `rows` brings nothing new."""
    idx = pc.index_in(disk.column("step").combine_chunks(), value_set=rows.column("step").combine_chunks())
    cols, gained = [], False
    for f in disk.schema:
        col = disk.column(f.name).combine_chunks()
        if f.name in ("run_id", "step"):
            cols.append(col)
            continue
        brought = pc.take(rows.column(f.name).combine_chunks(), idx)
        if not gained:
            gained = bool(pc.any(pc.and_(pc.is_null(col), pc.is_valid(brought))).as_py())
        cols.append(pc.coalesce(col, brought))
    return pa.Table.from_arrays(cols, schema=disk.schema) if gained else None


def _rewrite(path: Path, table: pa.Table) -> None:
    """Replace a part's content under its own name (atomic rename; the run lock is held)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.fill.tmp")
    pq.write_table(table, tmp, compression=COMPRESSION)
    os.replace(tmp, path)


StepRanges = dict[tuple[str, int, int], tuple[int, int] | None]


def _step_range_cached(path: Path, cache: StepRanges) -> tuple[int, int] | None:
    """_step_range, remembered per file version (name, inode, mtime): a writer's flush then
    reads only the footers of parts it has not seen (half the cost of a tick's flush)."""
    st = path.stat()
    key = (path.name, st.st_ino, st.st_mtime_ns)
    if key not in cache:
        if len(cache) > 4096:
            cache.clear()
        cache[key] = _step_range(path)
    return cache[key]


def keyed_progress(kind_dir: Path, table: pa.Table, cache: StepRanges | None = None) -> pa.Table:
    """The rows of `table` (progress schema) whose step is not on disk yet, one per step;
    the fields the others bring fill the rows on disk. Under the run lock. The common case
    -- every step past the last on disk -- reads only the parts' footers."""
    table = one_row_per_step(table)
    if not table.num_rows:
        return table
    cache = {} if cache is None else cache
    ranges = [(p, r) for p in live_parts(kind_dir) if (r := _step_range_cached(p, cache)) is not None]
    lo, hi = pc.min(table.column("step")).as_py(), pc.max(table.column("step")).as_py()
    for path, (first_step, last_step) in ranges:
        if last_step < lo or first_step > hi:
            continue
        disk = conform_to(pq.ParquetFile(path).read(), SCHEMAS["progress"])
        known = pc.is_in(table.column("step"), value_set=disk.column("step").combine_chunks())
        if not pc.any(known).as_py():
            continue
        filled = _fill_part(disk, table.filter(known))
        if filled is not None:
            _rewrite(path, filled)
        table = table.filter(pc.invert(known))
        if not table.num_rows:
            break
    return table


# -- writer -----------------------------------------------------------------------------

class HistoryWriter:
    """Appends one run's rows; buffers at most `rows_per_part` rows per kind in memory.

    A buffer becomes a part file when it is full, when its oldest row is older than
    `flush_interval_s` (checked on append), on `flush()` and on `close()`. Rows still in
    the buffer are lost if the process is killed, so a watcher calls `flush("progress")`
    after each tick's rows and *before* it persists the cursor that covers them: a kill
    before the flush re-reads the rows (the cursor did not move), a kill after it sends
    them again, and the keyed flush keeps one row per step (module docstring).
    """

    def __init__(self, run_id: str, *, root: Path | None = None, rows_per_part: int = 8192,
                 flush_interval_s: float = 10.0, fan_in: int = 16):
        self.run_id = run_id
        self.dir = history_dir(run_id, root)
        self.rows_per_part = rows_per_part
        self.flush_interval_s = flush_interval_s
        self.fan_in = fan_in
        self._cols: dict[str, dict[str, list]] = {k: {f.name: [] for f in SCHEMAS[k]} for k in KINDS}
        self._rows: dict[str, int] = {k: 0 for k in KINDS}
        self._oldest: dict[str, float | None] = {k: None for k in KINDS}
        self._lock = threading.Lock()
        self._step_ranges: StepRanges = {}   # the progress parts' step ranges seen (keyed_progress)

    # -- appends ------------------------------------------------------------------------
    def append_progress(self, samples: Iterable[ProgressSample]) -> int:
        n = 0
        with self._lock:
            cols = self._cols["progress"]
            for s in samples:
                cols["run_id"].append(self.run_id)
                cols["step"].append(int(s.step))
                cols["time_s"].append(_finite(s.time_s))
                cols["source"].append(s.source)
                for name in PROGRESS_FLOAT_FIELDS:
                    cols[name].append(_finite(getattr(s, name)))
                n += 1
            self._added("progress", n)
        return n

    def append_progress_table(self, table: pa.Table) -> int:
        """Append a whole table with the progress schema (an import, a benchmark): written
        straight to part files of at most `rows_per_part` rows, no per-row Python objects."""
        table = table.select([f.name for f in SCHEMAS["progress"]]).cast(SCHEMAS["progress"])
        with self._lock:
            self._flush_kind("progress")  # keep append order: buffered rows first
            with run_lock(self.dir):
                self._write_locked("progress", table)
        return table.num_rows

    def append_gpus(self, time_s: float | None, gpus: Iterable[GpuSample]) -> int:
        n = 0
        with self._lock:
            cols = self._cols["gpus"]
            for g in gpus:
                cols["run_id"].append(self.run_id)
                cols["time_s"].append(_finite(time_s))
                cols["index"].append(int(g.index))
                cols["uuid"].append(g.uuid)
                cols["name"].append(g.name)
                for name in GPU_FLOAT_FIELDS:
                    cols[name].append(_finite(getattr(g, name)))
                cols["clocks_event_reasons"].append(g.clocks_event_reasons)
                cols["users"].append(list(g.users))
                n += 1
            self._added("gpus", n)
        return n

    def append_wandb_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """wandb history rows (`_step`, `_timestamp`, any keys; nested dicts flattened)."""
        n = 0
        with self._lock:
            cols = self._cols["wandb"]
            for row in rows:
                step = row.get("_step")
                step = int(step) if isinstance(step, (int, float)) and math.isfinite(step) else None
                ts = _finite(row.get("_timestamp"))
                for key, value in _flatten(row):
                    if key in ("_step", "_timestamp"):
                        continue
                    num, text = _value(value)
                    cols["run_id"].append(self.run_id)
                    cols["step"].append(step)
                    cols["time_s"].append(ts)
                    cols["key"].append(key)
                    cols["value"].append(num)
                    cols["text"].append(text)
                    n += 1
            self._added("wandb", n)
        return n

    def _added(self, kind: str, n: int) -> None:
        if not n:
            return
        now = time.monotonic()
        oldest = self._oldest[kind]
        if oldest is None:
            oldest = self._oldest[kind] = now
        self._rows[kind] += n
        if self._rows[kind] >= self.rows_per_part or now - oldest >= self.flush_interval_s:
            self._flush_kind(kind)

    # -- flushing -----------------------------------------------------------------------
    def _flush_kind(self, kind: str) -> None:
        if not self._rows[kind]:
            return
        table = pa.Table.from_pydict(self._cols[kind], schema=SCHEMAS[kind])
        with run_lock(self.dir):
            self._write_locked(kind, table)
        self._cols[kind] = {f.name: [] for f in SCHEMAS[kind]}
        self._rows[kind] = 0
        self._oldest[kind] = None

    def _write_locked(self, kind: str, table: pa.Table) -> None:
        """Publish `table` as parts of at most rows_per_part rows (progress: keyed by step,
        see keyed_progress), then merge; the run lock is held."""
        kind_dir = self.dir / kind
        drop_covered_parts(kind_dir)
        if kind == "progress":
            table = keyed_progress(kind_dir, table, self._step_ranges)
        for start in range(0, table.num_rows, self.rows_per_part):
            self._publish_part(kind, table.slice(start, self.rows_per_part))
        compact(kind_dir, kind, fan_in=self.fan_in)

    def _publish_part(self, kind: str, table: pa.Table) -> None:
        kind_dir = self.dir / kind
        seq = max((p[2] for p in _parts(kind_dir)), default=-1) + 1
        while True:
            try:
                _publish(table, kind_dir, 0, seq, seq)
                return
            except FileExistsError:
                seq += 1  # another writer took this number

    def flush(self, kind: str | None = None) -> None:
        """Write the buffered rows of `kind` (default: every kind) as part files now."""
        if kind is not None and kind not in SCHEMAS:
            raise ValueError(f"history: unknown kind {kind!r} (one of {', '.join(KINDS)})")
        with self._lock:
            for k in (kind,) if kind else KINDS:
                self._flush_kind(k)

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flatten(row: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and not value.get("_type"):
            yield from _flatten(value, name + ".")
        else:
            yield name, value


def _value(value: Any) -> tuple[float | None, str | None]:
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)):
        f = float(value)
        return (f, None) if math.isfinite(f) else (None, str(f))
    if isinstance(value, str):
        return None, value
    try:
        return None, json.dumps(value, default=str)
    except (TypeError, ValueError):
        return None, str(value)


# -- one-shot helpers and readers -------------------------------------------------------

def append_progress(run_id: str, samples: Iterable[ProgressSample], *, root: Path | None = None) -> int:
    """Write these samples now (one part file); for a stream, hold a HistoryWriter instead."""
    with HistoryWriter(run_id, root=root) as w:
        return w.append_progress(samples)


def append_gpus(run_id: str, time_s: float | None, gpus: Iterable[GpuSample], *, root: Path | None = None) -> int:
    with HistoryWriter(run_id, root=root) as w:
        return w.append_gpus(time_s, gpus)


def append_wandb_rows(run_id: str, rows: Iterable[Mapping[str, Any]], *, root: Path | None = None) -> int:
    with HistoryWriter(run_id, root=root) as w:
        return w.append_wandb_rows(rows)


def read_table(run_id: str, kind: str, *, root: Path | None = None, columns: list[str] | None = None) -> pa.Table:
    """Every flushed row of one kind, in append order; an empty table (right schema) if none."""
    if kind not in SCHEMAS:
        raise ValueError(f"history: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    schema = SCHEMAS[kind]
    paths = live_parts(history_dir(run_id, root) / kind)
    if columns:
        schema = pa.schema([schema.field(c) for c in columns])
    if not paths:
        return schema.empty_table()
    # ParquetFile.read, not pq.read_table: no dataset layer (which imports pandas, ~0.3 s).
    tables = []
    for p in paths:
        f = pq.ParquetFile(p)
        have = set(f.schema_arrow.names)
        tables.append(conform_to(f.read(columns=[c for c in columns if c in have] if columns else None), schema))
    return pa.concat_tables(tables)


def conform_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order: a column a part file written by an older
    dfctl lacks is all null, so histories written before a field was added still read."""
    if table.schema == schema:
        return table
    cols = [table.column(f.name).cast(f.type) if f.name in table.schema.names else pa.nulls(table.num_rows, f.type)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def read_progress(run_id: str, *, root: Path | None = None, columns: list[str] | None = None) -> pa.Table:
    """One row per step, in step order, each field its first known value (see the module
    docstring for why a step can be written more than once)."""
    wanted = list(columns) if columns else None
    read_cols = wanted if wanted is None or "step" in wanted else [*wanted, "step"]
    table = one_row_per_step(read_table(run_id, "progress", root=root, columns=read_cols))
    return table.select(wanted) if wanted is not None and read_cols != wanted else table


def one_row_per_step(table: pa.Table) -> pa.Table:
    """`table` folded to one row per step, in step order (a backfilled gap lands where it
    belongs): each column takes the first non-null value written for that step. The
    common case (steps strictly increasing) costs one vectorised comparison."""
    n = table.num_rows
    if n < 2:
        return table
    steps = table.column("step").combine_chunks()
    if pc.all(pc.greater(steps.slice(1), steps.slice(0, n - 1))).as_py():
        return table
    others = [c for c in table.column_names if c != "step"]
    # use_threads=False: "first" is then the first in row (write) order; nulls are skipped
    folded = table.group_by("step", use_threads=False).aggregate([(c, "first") for c in others])
    folded = folded.rename_columns([c[:-len("_first")] if c.endswith("_first") else c for c in folded.column_names])
    return folded.sort_by("step").select(table.column_names).cast(table.schema)


def backfill_progress(run_id: str, samples: Iterable[ProgressSample], *, root: Path | None = None) -> int:
    """Append the samples whose step the history lacks (a gap left by a watch of an older
    dfctl, killed before its only flush); returns how many. Idempotent: a second call
    finds nothing missing."""
    have = set(read_table(run_id, "progress", root=root, columns=["step"]).column("step").to_pylist())
    missing = [s for s in samples if s.step not in have]
    if missing:
        append_progress(run_id, missing, root=root)
    return len(missing)


BACKFILL_CHECKED_FILE = "backfill_checked_bytes"


def backfill_checked_bytes(run_id: str, *, root: Path | None = None) -> int:
    """How much of the run's metrics.jsonl a backfill has already compared with the
    history (0: none): a watch of this dfctl writes rows before the cursor that passes
    them, so those bytes never need reading back again."""
    try:
        return int((history_dir(run_id, root) / BACKFILL_CHECKED_FILE).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def set_backfill_checked_bytes(run_id: str, n: int, *, root: Path | None = None) -> None:
    d = history_dir(run_id, root)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{BACKFILL_CHECKED_FILE}.tmp"
    tmp.write_text(f"{int(n)}\n")
    os.replace(tmp, d / BACKFILL_CHECKED_FILE)


def read_gpus(run_id: str, *, root: Path | None = None) -> pa.Table:
    return read_table(run_id, "gpus", root=root)


def read_wandb(run_id: str, *, root: Path | None = None) -> pa.Table:
    return read_table(run_id, "wandb", root=root)


def has_history(run_id: str, *, root: Path | None = None) -> bool:
    d = history_dir(run_id, root)
    return any(live_parts(d / kind) for kind in KINDS)


def write_meta(run_id: str, meta: Mapping[str, Any], *, root: Path | None = None) -> Path:
    """meta.json: where an imported run came from, its config and end state (JSON-safe)."""
    d = history_dir(run_id, root)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
    os.replace(tmp, d / "meta.json")
    return d / "meta.json"


def read_meta(run_id: str, *, root: Path | None = None) -> dict[str, Any]:
    try:
        return json.loads((history_dir(run_id, root) / "meta.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
