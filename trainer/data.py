"""Tokenized completions on disk: memory-mapped Arrow, length buckets under a token budget,
and the CPU side of a batch (padding, anchors, labels).

Why memory-mapped: the user's dataset holds over a million samples; reading it into RAM
costs minutes and tens of GiB. The Arrow IPC buffers are used in place (numpy views into
the mapping); the only per-sample state kept in memory is a few int32 arrays (lengths,
supervised-token counts, the epoch's order), a few bytes a sample.

Accepted layouts: a directory of `*.arrow` files in Arrow IPC file format (what
trainer.synth writes) or stream format (what Hugging Face `datasets.save_to_disk` writes),
or a single such file. Columns: `input_ids` list<int>, `loss_mask` list<int>.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa


class DataError(ValueError):
    """The dataset cannot be used; the message names the file and what is wrong."""


def _open_table(path: Path) -> pa.Table:
    source = pa.memory_map(str(path), "r")
    try:
        return pa.ipc.open_file(source).read_all()
    except pa.ArrowInvalid:
        source = pa.memory_map(str(path), "r")
        try:
            return pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid as exc:
            raise DataError(f"{path}: not an Arrow IPC file or stream ({exc})") from None


def _list_views(chunk: pa.Array, path: Path, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) numpy views of one list chunk, without copying the values."""
    if not (pa.types.is_list(chunk.type) or pa.types.is_large_list(chunk.type)):
        raise DataError(f"{path}: column {column!r} is {chunk.type}, expected a list of integers")
    if chunk.null_count:
        raise DataError(f"{path}: column {column!r} has {chunk.null_count} null rows")
    offsets = chunk.offsets.to_numpy(zero_copy_only=False)
    values = chunk.values.to_numpy(zero_copy_only=True)
    return offsets, values


class ArrowDataset:
    """Samples addressed by row number, read lazily from memory-mapped Arrow.

    `lengths[i]` and `supervised[i]` (tokens with loss_mask=1) are computed once at open,
    chunk by chunk, so the temporary memory is bounded by the largest record batch.
    """

    def __init__(self, path: str | Path):
        root = Path(path)
        if root.is_dir():
            files = sorted(root.glob("*.arrow"))
        elif root.is_file():
            files = [root]
        else:
            raise DataError(f"dataset {root} does not exist")
        if not files:
            raise DataError(f"dataset {root}: no *.arrow files in the directory")
        self.path = root
        self._ids: list[tuple[np.ndarray, np.ndarray]] = []
        self._mask: list[tuple[np.ndarray, np.ndarray]] = []
        lengths, supervised, chunk_rows = [], [], []
        for f in files:
            table = _open_table(f)
            for col in ("input_ids", "loss_mask"):
                if col not in table.column_names:
                    raise DataError(f"{f}: missing column {col!r} (has {table.column_names})")
            for ids_chunk, mask_chunk in zip(table.column("input_ids").chunks, table.column("loss_mask").chunks):
                ids_off, ids_val = _list_views(ids_chunk, f, "input_ids")
                m_off, m_val = _list_views(mask_chunk, f, "loss_mask")
                n = len(ids_off) - 1
                length = np.diff(ids_off).astype(np.int32)
                if not np.array_equal(length, np.diff(m_off)):
                    raise DataError(f"{f}: input_ids and loss_mask lengths differ in some rows")
                csum = np.zeros(len(m_val) + 1, dtype=np.int32)
                np.cumsum(m_val != 0, out=csum[1:])
                supervised.append((csum[m_off[1:]] - csum[m_off[:-1]]).astype(np.int32))
                del csum
                lengths.append(length)
                chunk_rows.append(n)
                self._ids.append((ids_off, ids_val))
                self._mask.append((m_off, m_val))
        self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
        self.supervised = np.concatenate(supervised) if supervised else np.zeros(0, np.int32)
        self._chunk_start = np.zeros(len(chunk_rows) + 1, dtype=np.int64)
        np.cumsum(chunk_rows, out=self._chunk_start[1:])

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def sample(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, loss_mask) of one row as numpy views into the mapping."""
        c = int(np.searchsorted(self._chunk_start, row, side="right") - 1)
        local = row - int(self._chunk_start[c])
        off, val = self._ids[c]
        moff, mval = self._mask[c]
        return val[off[local]:off[local + 1]], mval[moff[local]:moff[local + 1]]


@dataclass(frozen=True)
class Bucket:
    """Samples whose (cut) length lies in [lo, hi), batched `batch_samples` at a time."""

    lo: int
    hi: int
    batch_samples: int
    rows: np.ndarray              # dataset row numbers in this bucket


class BucketPlan:
    """Length buckets under a token budget; a deterministic shuffled batch order per epoch.

    Every kept sample is in exactly one bucket and, each epoch, in exactly one batch.
    A batch of a bucket holds at most `budget // max_len_in_bucket` samples (so padded to
    its longest sample it stays within the budget), capped at `max_batch_samples`.
    """

    def __init__(self, dataset: ArrowDataset, *, block_size: int, token_budget: int, max_length: int,
                 num_buckets: int, max_batch_samples: int, seed: int = 0, rows: np.ndarray | None = None):
        self.seed = seed
        self.min_supervised = 2 * block_size
        candidates = np.arange(len(dataset), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        keep = dataset.supervised[candidates] >= self.min_supervised
        self.total_samples = int(candidates.shape[0])
        self.kept_rows = candidates[keep]
        self.filtered = self.total_samples - int(self.kept_rows.shape[0])
        if self.kept_rows.shape[0] == 0:
            raise DataError(f"dataset {dataset.path}: no sample has >= {self.min_supervised} supervised tokens")
        lengths = np.minimum(dataset.lengths[self.kept_rows], max_length)
        quantiles = np.quantile(lengths, np.linspace(0, 1, num_buckets + 1)[1:-1])
        inner = sorted({int(-(-q // 16) * 16) for q in quantiles} - {0})
        edges = [0] + [e for e in inner if e <= max_length] + [max_length + 1]
        self.buckets: list[Bucket] = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            sel = (lengths >= lo) & (lengths < hi)
            if not sel.any():
                continue
            longest = int(lengths[sel].max())
            per_batch = max(1, min(max_batch_samples, token_budget // longest))
            self.buckets.append(Bucket(lo, hi, per_batch, self.kept_rows[sel]))
        self.batches_per_bucket = [-(-len(b.rows) // b.batch_samples) for b in self.buckets]
        self.num_batches = int(sum(self.batches_per_bucket))

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The epoch's batches (arrays of row numbers), in a shuffled order fixed by (seed, epoch)."""
        rng = np.random.default_rng([self.seed, epoch])
        batches: list[np.ndarray] = []
        for bucket in self.buckets:
            rows = rng.permutation(bucket.rows)
            batches.extend(np.array_split(rows, -(-len(rows) // bucket.batch_samples)))
        order = rng.permutation(len(batches))
        return [batches[i] for i in order]

    def batch_size_stats(self) -> tuple[int, int, float]:
        lo, hi = None, 0
        for bucket, n in zip(self.buckets, self.batches_per_bucket):
            m = len(bucket.rows)                    # np.array_split: m % n parts of m//n + 1, the rest m//n
            small = m // n
            big = small + (1 if m % n else 0)
            lo = small if lo is None else min(lo, small)
            hi = max(hi, big)
        return int(lo), int(hi), float(len(self.kept_rows) / self.num_batches)

    def describe(self) -> list[str]:
        """The start-up lines, in the seed log's format."""
        lo, hi, avg = self.batch_size_stats()
        lines = [f"Batches per epoch: {self.num_batches} (min={lo} max={hi} avg={avg:.1f})"]
        for i, (bucket, n) in enumerate(zip(self.buckets, self.batches_per_bucket)):
            pct = 100.0 * n / self.num_batches
            lines.append(f"  Bucket {i} [{bucket.lo:4d},{bucket.hi:4d}): {n:6d} batches ({pct:5.1f}%)")
        return lines


def split_eval_rows(num_rows: int, eval_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, eval rows): a fixed share of the dataset held out, drawn by `seed`, so
    eval metrics come from samples the drafter never trains on (and stay the same across
    resumes). `eval_fraction` 0 holds nothing out."""
    if not 0.0 <= eval_fraction < 1.0:
        raise DataError(f"--eval-fraction {eval_fraction}: expected a share in [0, 1)")
    order = np.random.default_rng([seed, 7]).permutation(num_rows)
    n_eval = int(round(num_rows * eval_fraction))
    if eval_fraction > 0 and n_eval == 0:
        n_eval = 1
    return np.sort(order[n_eval:]).astype(np.int64), np.sort(order[:n_eval]).astype(np.int64)


@dataclass
class HostBatch:
    """One batch on the host, ready for the target and the drafter (numpy; tensors made later).

    Shapes: S samples, L padded length, A anchors per sample (padded), Bk block size.
    """

    seq: int                      # global position of this batch in the run's batch stream
    rows: np.ndarray              # [S] dataset rows
    input_ids: np.ndarray         # [S, L] int64, 0-padded
    lengths: np.ndarray           # [S] int64 real lengths
    anchors: np.ndarray           # [S, A] int64 anchor positions, ascending; padding anchors = 0
    anchor_valid: np.ndarray      # [S, A] bool
    block_ids: np.ndarray         # [S, A, Bk] int64: [anchor token, MASK, ...]
    labels: np.ndarray            # [S, A, Bk] int64: token at anchor+k, -100 where unsupervised/absent/slot 0
    num_tokens: int               # sum of real lengths (target tokens)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def make_host_batch(dataset: ArrowDataset, rows: np.ndarray, *, seq: int, epoch: int, seed: int,
                    block_size: int, max_anchors: int, max_length: int, mask_token_id: int,
                    len_multiple: int = 1, anchor_multiple: int = 1, fixed_len: int | None = None,
                    fixed_anchors: int | None = None) -> HostBatch:
    """Read `rows`, cut to max_length, pad, and sample anchors.

    Anchors are positions p that are supervised and whose next token is too; up to max_anchors per sample,
    drawn without replacement by an RNG seeded with (seed, epoch, row), so a sample gets the
    same anchors whatever batch or worker it lands in (replica and resume tests rely on it).
    `fixed_len` / `fixed_anchors` pad to one shape (compiled drafter only).
    """
    samples = [dataset.sample(int(r)) for r in rows]
    lengths = np.array([min(len(ids), max_length) for ids, _ in samples], dtype=np.int64)
    length = fixed_len or _round_up(int(lengths.max()), len_multiple)
    s = len(rows)
    input_ids = np.zeros((s, length), dtype=np.int64)
    supervised = np.zeros((s, length), dtype=bool)
    chosen: list[np.ndarray] = []
    for i, (ids, mask) in enumerate(samples):
        n = int(lengths[i])
        input_ids[i, :n] = ids[:n]
        supervised[i, :n] = mask[:n] != 0
        # p such that tokens p and p+1 are both supervised (SpecForge's rule): a block anchored on
        # the prompt's last token never occurs at inference, where drafting starts after the
        # first generated token.
        candidates = np.nonzero(supervised[i, :n - 1] & supervised[i, 1:n])[0]
        rng = np.random.default_rng([seed, epoch, int(rows[i])])
        if len(candidates) > max_anchors:
            candidates = np.sort(rng.choice(candidates, size=max_anchors, replace=False))
        chosen.append(candidates)
    num_anchors = fixed_anchors or _round_up(max(1, max(len(c) for c in chosen)), anchor_multiple)
    anchors = np.zeros((s, num_anchors), dtype=np.int64)
    valid = np.zeros((s, num_anchors), dtype=bool)
    for i, c in enumerate(chosen):
        anchors[i, :len(c)] = c
        valid[i, :len(c)] = True
    k = np.arange(block_size)
    target_pos = anchors[:, :, None] + k                       # [S, A, Bk]
    in_range = target_pos < lengths[:, None, None]
    clipped = np.minimum(target_pos, length - 1)
    gather_rows = np.arange(s)[:, None, None]
    labels = np.where(in_range & supervised[gather_rows, clipped] & valid[:, :, None],
                      input_ids[gather_rows, clipped], -100)
    labels[:, :, 0] = -100
    block_ids = np.full((s, num_anchors, block_size), mask_token_id, dtype=np.int64)
    block_ids[:, :, 0] = input_ids[np.arange(s)[:, None], anchors]
    return HostBatch(seq=seq, rows=np.asarray(rows), input_ids=input_ids, lengths=lengths, anchors=anchors,
                     anchor_valid=valid, block_ids=block_ids, labels=labels, num_tokens=int(lengths.sum()))
