"""Read a wandb run's `.wandb` transaction log incrementally, by byte offset.

The file (FIELD-NOTES, wandb 0.31) is a LevelDB-style log: a 7-byte header (`:W&B`,
magic 0xBEE1 little-endian, version byte), then 32 KiB blocks of records, each with a
7-byte header (crc32 LE, length u16 LE, type) where type is FULL=1, FIRST=2, MIDDLE=3,
LAST=4; a block's tail shorter than a header is zero padding. The crc32 covers the type
byte and the payload. Each logical record is a `wandb.proto.wandb_internal_pb2.Record`
and is decoded with wandb's own protobuf types (no hand-rolled protobuf).

Why by byte offset: the file grows while the run lives (wandb-core flushes it every
`x_transaction_log_flush_interval` s, 15 by default; `WANDB__TRANSACTION_LOG_FLUSH_INTERVAL=1`
makes it 1 s), and the watcher is killed and restarted. `offset` always sits at the start
of a logical record (or at a block boundary after skipped corruption), so it can be
persisted (the run cursor's `wandb` FileCursor) and resumed with no row lost or repeated. A partial
last record is normal in a live file: we stop before it and pick it up next time. A bad
crc or an impossible header means corruption: skip to the next block, count it, never
raise. `feed()` decodes bytes fetched elsewhere (the probe's remote read) the same way.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path, PurePath
from typing import Any, Iterable, Sequence

from controller.errors import BadInputError
from controller.wandb_io.batch import (
    WandbBatch,
    WandbRunData,
    progress_from_row,
    set_nested,
)

FILE_HEADER_LEN = 7
FILE_IDENT = b":W&B"
FILE_MAGIC = 0xBEE1
BLOCK_LEN = 32 * 1024
RECORD_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_RECORD_HEADER = struct.Struct("<IHB")

READ_CHUNK_BYTES = 4 * 1024 * 1024
# Config/summary keys wandb keeps for itself (wandb.apis.public.runs.WANDB_INTERNAL_KEYS).
WANDB_INTERNAL_KEYS = frozenset({"_wandb", "wandb_version"})

# `wandb/offline-run-20261129_184241-9zbdjupl` and online `wandb/run-20261129_184241-9zbdjupl`
_RUN_DIR_RE = re.compile(r"^(?:offline-)?run-(\d{8}_\d{6})-([A-Za-z0-9_-]+)$")


# --------------------------------------------------------------------------- framing

def check_file_header(header: bytes, where: str) -> None:
    """Raise BadInputError unless `header` is a wandb transaction-log header."""
    if len(header) < FILE_HEADER_LEN or header[:4] != FILE_IDENT or \
            struct.unpack("<H", header[4:6])[0] != FILE_MAGIC:
        raise BadInputError(
            f"{where}: not a wandb transaction log (header {header[:FILE_HEADER_LEN]!r}, "
            f"expected {FILE_IDENT!r} + magic 0xBEE1)")


def decode_frames(data: bytes, start_offset: int) -> tuple[list[bytes], int, int]:
    """Reassemble the complete logical records in `data`, which starts at `start_offset`.

    `start_offset` must be a record start (>= FILE_HEADER_LEN). Returns (payloads,
    end_offset, corrupt) where end_offset is where the next read must start: just after
    the last complete record, or at the FIRST fragment of an unfinished one, or at the
    next block after corruption. Never raises on malformed input.
    """
    payloads: list[bytes] = []
    corrupt = 0
    data_end = start_offset + len(data)
    pos = start_offset
    committed = start_offset
    pending: list[bytes] | None = None
    pending_start = start_offset
    view = memoryview(data)

    def skip_to_next_block(at: int) -> int:
        return at - at % BLOCK_LEN + BLOCK_LEN

    while True:
        left = BLOCK_LEN - pos % BLOCK_LEN
        if left < RECORD_HEADER_LEN:              # zero padding at the block's end
            if pos + left > data_end:
                break
            pos += left
            if pending is None:
                committed = pos
            continue
        if pos + RECORD_HEADER_LEN > data_end:    # partial header: wait for more
            break
        i = pos - start_offset
        crc, length, rtype = _RECORD_HEADER.unpack_from(data, i)
        if rtype == 0 and length == 0 and crc == 0 and not any(view[i:]):
            break                                 # zeros up to EOF: not written yet
        if rtype not in (FULL, FIRST, MIDDLE, LAST) or length > left - RECORD_HEADER_LEN:
            corrupt += 1
            pending = None
            pos = committed = skip_to_next_block(pos)
            continue
        end = pos + RECORD_HEADER_LEN + length
        if end > data_end:                        # partial payload: a live file's tail
            break
        payload = bytes(view[i + RECORD_HEADER_LEN:i + RECORD_HEADER_LEN + length])
        if zlib.crc32(payload, zlib.crc32(bytes((rtype,)))) & 0xFFFFFFFF != crc:
            corrupt += 1
            pending = None
            pos = committed = skip_to_next_block(pos)
            continue
        if rtype == FULL:
            if pending is not None:               # FIRST without LAST: drop it
                corrupt += 1
                pending = None
            payloads.append(payload)
            pos = committed = end
        elif rtype == FIRST:
            if pending is not None:
                corrupt += 1
            pending, pending_start = [payload], pos
            pos = end
        elif pending is None:                     # MIDDLE/LAST without a FIRST
            corrupt += 1
            pos = end
            committed = end
        elif rtype == MIDDLE:
            pending.append(payload)
            pos = end
        else:                                     # LAST
            pending.append(payload)
            payloads.append(b"".join(pending))
            pending = None
            pos = committed = end
    if pending is not None:
        committed = pending_start
    return payloads, committed, corrupt


# --------------------------------------------------------------------------- records

def _json_value(text: str) -> Any:
    try:
        return json.loads(text)       # also takes NaN / Infinity, which wandb writes
    except ValueError:
        return text


def _item_key(item: Any) -> str:
    nested = item.nested_key
    return ".".join(nested) if nested else item.key


def _item_path(item: Any) -> tuple[str, ...]:
    return tuple(item.nested_key) or (item.key,)


_KEY_JSON: dict[str, str] = {}


def _history_row(items: Sequence[Any]) -> dict[str, Any]:   # the slow path reads them again
    """A history record's items -> {key: value}, decoded with one json.loads per row.

    wandb 0.31 writes each value as `value_json` (valid JSON, NaN/Infinity included), so
    the row is assembled as one JSON object text; the per-item path below handles the
    typed value fields and anything that does not parse.
    """
    parts = []
    for item in items:
        vj = item.value_json
        if not vj:
            return _history_row_slow(items)
        key = _item_key(item)
        enc = _KEY_JSON.get(key)
        if enc is None:
            enc = _KEY_JSON.setdefault(key, json.dumps(key)) if len(_KEY_JSON) < 100_000 \
                else json.dumps(key)
        parts.append(enc + ":" + vj)
    try:
        row = json.loads("{" + ",".join(parts) + "}")
    except ValueError:
        return _history_row_slow(items)
    if len(row) != len(parts):           # a duplicated key: keep wandb's last-one-wins order
        return _history_row_slow(items)
    return row


def _history_row_slow(items: Iterable[Any]) -> dict[str, Any]:
    return {_item_key(it): _history_value(it) for it in items}


def _history_value(item: Any) -> Any:
    kind = item.WhichOneof("value")
    if kind is None:
        return _json_value(item.value_json) if item.value_json else None
    if kind == "none":
        return None
    if kind == "json":
        return _json_value(item.json)
    return getattr(item, kind)


class _RunAccumulator:
    """Folds decoded Records into what a WandbBatch / WandbRunData carries.

    Config and summary values are kept as their JSON text per key path and decoded only
    when a batch hands them out: wandb writes a summary update with every history row,
    and only the last value of each key matters.
    """

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.project: str | None = None
        self.entity: str | None = None
        self.exit_code: int | None = None
        self._config_raw: dict[tuple[str, ...], str] = {}
        self._summary_raw: dict[tuple[str, ...], str] = {}

    @property
    def state(self) -> str:
        if self.exit_code is None:
            return "running"
        return "finished" if self.exit_code == 0 else "crashed"

    @property
    def config(self) -> dict[str, Any]:
        return _build_nested(self._config_raw)

    @property
    def summary(self) -> dict[str, Any]:
        return _build_nested(self._summary_raw)

    @staticmethod
    def _apply_updates(raw: dict[tuple[str, ...], str], rec: Any) -> None:
        internal = WANDB_INTERNAL_KEYS
        for item in rec.update:
            path = tuple(item.nested_key) or (item.key,)
            if path[0] not in internal:
                raw.pop(path, None)       # re-insert: later updates apply later
                raw[path] = item.value_json
        for item in rec.remove:
            path = _item_path(item)
            for k in [k for k in raw if k[:len(path)] == path]:
                del raw[k]

    def _apply_config(self, rec: Any) -> None:
        self._apply_updates(self._config_raw, rec)

    def _apply_summary(self, rec: Any) -> None:
        self._apply_updates(self._summary_raw, rec)

    def apply(self, payloads: Iterable[bytes], batch: WandbBatch, *, emit: bool = True) -> None:
        """Decode `payloads` into `batch`; with emit=False only the run's metadata moves."""
        from google.protobuf.message import DecodeError
        from wandb.proto import wandb_internal_pb2 as pb

        config_changed = summary_changed = False
        for payload in payloads:
            rec = pb.Record()  # type: ignore[attr-defined]  # generated protobuf module, no stubs
            try:
                rec.ParseFromString(payload)
            except DecodeError:
                batch.corrupt_blocks += 1
                continue
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                if not emit:
                    continue
                row = _history_row(rec.history.item)
                if "_step" not in row and rec.history.HasField("step"):
                    row["_step"] = rec.history.step.num
                batch.history.append(row)
                sample = progress_from_row(row)
                if sample is not None:
                    batch.progress.append(sample)
            elif kind == "stats":
                if not emit:
                    continue
                ts = rec.stats.timestamp
                row = {"time_s": ts.seconds + ts.nanos / 1e9}
                for it in rec.stats.item:
                    row[it.key] = _json_value(it.value_json)
                batch.system.append(row)
            elif kind == "run":
                run = rec.run
                self.run_id = run.run_id or self.run_id
                self.project = run.project or self.project
                self.entity = run.entity or self.entity
                if len(run.config.update) or len(run.config.remove):
                    self._apply_config(run.config)
                    config_changed = True
                if len(run.summary.update) or len(run.summary.remove):
                    self._apply_summary(run.summary)
                    summary_changed = True
            elif kind == "config":
                self._apply_config(rec.config)
                config_changed = True
            elif kind == "summary":
                self._apply_summary(rec.summary)
                summary_changed = True
            elif kind == "exit":
                self.exit_code = rec.exit.exit_code
        if emit:
            batch.config = self.config if config_changed else None
            batch.summary = self.summary if summary_changed else None
        batch.run_id, batch.project, batch.entity = self.run_id, self.project, self.entity
        batch.exit_code, batch.state = self.exit_code, self.state


def _build_nested(raw: dict[tuple[str, ...], str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, text in raw.items():
        set_nested(out, list(path), _json_value(text))
    return out


# --------------------------------------------------------------------------- finding runs

def _run_dir_sort_key(path: Path) -> tuple[str, float]:
    m = _RUN_DIR_RE.match(path.name)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (m.group(1) if m else "", mtime)


def _wandb_file_in(run_dir: Path) -> Path | None:
    m = _RUN_DIR_RE.match(run_dir.name)
    if m:
        exact = run_dir / f"run-{m.group(2)}.wandb"
        if exact.is_file():
            return exact
    files = sorted(run_dir.glob("*.wandb"))
    return files[0] if files else None


def find_offline_runs(run_dir: str | Path) -> list[Path]:
    """The wandb run directories under `run_dir`, newest last.

    Accepts the trainer's run dir (looks in it, in `<run_dir>/wandb/` and one level
    down), a `wandb/` dir, or one `offline-run-<ts>-<id>` / `run-<ts>-<id>` dir itself.
    Only dirs that hold a `.wandb` file count; `latest-run` (a symlink) is not repeated.
    """
    root = Path(run_dir)
    candidates: list[Path] = []
    for base in (root, root / "wandb"):
        if _RUN_DIR_RE.match(base.name):
            candidates.append(base)
        if base.is_dir():
            try:
                candidates.extend(p for p in base.iterdir() if _RUN_DIR_RE.match(p.name))
            except OSError:
                pass
    seen: set[Path] = set()
    found: list[Path] = []
    for cand in candidates:
        try:
            real = cand.resolve()
        except OSError:
            continue
        if real in seen or cand.is_symlink() or not cand.is_dir():
            continue
        if _wandb_file_in(cand) is not None:
            seen.add(real)
            found.append(cand)
    return sorted(found, key=_run_dir_sort_key)


def resolve_wandb_file(path: str | Path) -> Path:
    """A `.wandb` file, a wandb run dir, or a dir holding wandb runs -> the `.wandb` file."""
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        direct = _wandb_file_in(p) if _RUN_DIR_RE.match(p.name) else None
        if direct is not None:
            return direct
        runs = find_offline_runs(p)
        if runs:
            found = _wandb_file_in(runs[-1])
            if found is not None:
                return found
        raise BadInputError(f"{p}: no wandb run (.wandb file) found in this directory",
                            hint="pass wandb/offline-run-<ts>-<id>/ or its run-<id>.wandb")
    raise BadInputError(f"{p}: no such wandb run file or directory")


# --------------------------------------------------------------------------- the reader

class WandbDecoder:
    """Incremental decoder of one run's `.wandb` bytes, wherever they were read (the
    remote probe ships them; OfflineRunReader reads a local file).

    `offset` is the file offset of the next byte to decode (persist it and start a new
    decoder there later). `feed(data, start)` takes the bytes read at `start` and returns
    the records that completed; the bytes after the last complete record are not
    consumed (fetch them again from the new `offset`).
    """

    def __init__(self, file_name: str, offset: int = 0):
        self.name = file_name
        self.offset = int(offset)
        if self.offset < 0:
            raise BadInputError(f"{file_name}: negative wandb offset {offset}")
        self.corrupt_blocks = 0          # total over this decoder's life
        self._acc = _RunAccumulator()
        self._acc.run_id = self._run_id_from_name()

    @property
    def state(self) -> str:
        return self._acc.state

    @property
    def exit_code(self) -> int | None:
        return self._acc.exit_code

    def feed(self, data: bytes, start: int) -> WandbBatch:
        """Decode bytes of this file that begin at file offset `start` (== self.offset)."""
        if start != self.offset:
            raise BadInputError(
                f"{self.name}: wandb bytes start at {start}, reader is at {self.offset}")
        batch = WandbBatch()
        self._consume(data, batch, emit=True)
        return batch

    # -- internals

    def _run_id_from_name(self) -> str | None:
        m = re.match(r"^run-(.+)\.wandb$", PurePath(self.name).name)
        return m.group(1) if m else None

    def _consume(self, data: bytes, batch: WandbBatch, *, emit: bool) -> int:
        """Decode `data` (starting at self.offset); returns bytes consumed."""
        start = self.offset
        if start < FILE_HEADER_LEN:
            if start + len(data) < FILE_HEADER_LEN:
                self._finish(batch, emit)
                return 0
            if start == 0:
                check_file_header(data[:FILE_HEADER_LEN], self.name)
            data = data[FILE_HEADER_LEN - start:]
            start = FILE_HEADER_LEN
        payloads, end, corrupt = decode_frames(data, start)
        batch.corrupt_blocks += corrupt
        self._acc.apply(payloads, batch, emit=emit)   # adds undecodable payloads
        self.corrupt_blocks += batch.corrupt_blocks
        self.offset = end
        self._finish(batch, emit)
        return end - start

    def _finish(self, batch: WandbBatch, emit: bool) -> None:
        batch.offset = self.offset
        batch.run_id = self._acc.run_id
        batch.project, batch.entity = self._acc.project, self._acc.entity
        batch.exit_code, batch.state = self._acc.exit_code, self._acc.state


class OfflineRunReader(WandbDecoder):
    """Incremental reader of one local run's `.wandb` file.

    `offset` is the number of bytes consumed so far (persist it; `resume_from()` it
    later). Each `read_new()` returns the records that completed since the last call.
    """

    def __init__(self, path: str | Path):
        self.path = resolve_wandb_file(path)
        super().__init__(str(self.path))

    # -- public

    def resume_from(self, offset: int, *, replay_metadata: bool = True) -> None:
        """Continue at a persisted `offset`.

        With replay_metadata (the default) the records before `offset` are decoded once,
        without emitting history, so the run id, config, summary and exit state are known
        again; history and stats rows before the offset are not returned a second time.
        """
        offset = int(offset)
        if offset < 0:
            raise BadInputError(f"{self.path}: negative wandb offset {offset}")
        self._acc = _RunAccumulator()
        self._acc.run_id = self._run_id_from_name()
        self.offset = 0
        if replay_metadata and offset > FILE_HEADER_LEN:
            scratch = WandbBatch()
            self._read(scratch, limit_offset=offset, emit=False)
        self.offset = offset

    def read_new(self, max_bytes: int | None = None) -> WandbBatch:
        """Decode what was appended since the last call (at most ~max_bytes of the file;
        more only when a single record is bigger than that)."""
        batch = WandbBatch()
        self._read(batch, max_bytes=max_bytes)
        return batch

    def feed(self, data: bytes, start_offset: int) -> WandbBatch:
        """Decode bytes of this file fetched elsewhere (e.g. by the remote probe)."""
        return super().feed(data, start_offset)

    # -- internals

    def _read(self, batch: WandbBatch, *, max_bytes: int | None = None,
              limit_offset: int | None = None, emit: bool = True) -> None:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            raise BadInputError(f"{self.path}: wandb run file disappeared") from None
        except OSError as e:
            raise BadInputError(f"{self.path}: cannot read wandb run file: {e.strerror}") from None
        merged = WandbBatch()
        with f:
            size = os.fstat(f.fileno()).st_size
            stop = size if limit_offset is None else min(size, limit_offset)
            budget = max_bytes
            chunk = READ_CHUNK_BYTES if max_bytes is None else max(1, min(READ_CHUNK_BYTES, max_bytes))
            while self.offset < stop:
                want = min(chunk, stop - self.offset)
                if budget is not None:
                    want = min(want, max(budget, 1))
                f.seek(self.offset)
                data = f.read(want)
                if not data:
                    break
                before = self.offset
                part = WandbBatch()
                self._consume(data, part, emit=emit)
                merged.absorb(part)
                if self.offset == before:
                    if len(data) < want or self.offset + len(data) >= stop:
                        break                  # the rest is a partial record: wait for it
                    chunk = want * 2           # one record bigger than the chunk
                    budget = None if budget is None else max(budget, chunk)
                    continue
                if budget is not None:
                    budget -= self.offset - before
                    if budget <= 0:
                        break
        batch.absorb(merged)
        self._finish(batch, emit)


def read_offline_run(path: str | Path) -> WandbRunData:
    """A whole offline (or online-run local) wandb run: history, config, summary, state."""
    reader = OfflineRunReader(path)
    data = WandbRunData(run_id=None, source=str(reader.path))
    while True:
        before = reader.offset
        batch = reader.read_new()
        data.history.extend(batch.history)
        data.system.extend(batch.system)
        if reader.offset == before:
            break
    acc = reader._acc
    data.run_id, data.project, data.entity = acc.run_id, acc.project, acc.entity
    data.state, data.exit_code = acc.state, acc.exit_code
    data.config, data.summary = acc.config, acc.summary
    data.corrupt_blocks = reader.corrupt_blocks
    return data
