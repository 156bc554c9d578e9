"""Synthetic tokenized completions in the trainer's Arrow schema, with structure a drafter
can learn, of any size.

Schema (one Arrow IPC file, `data.arrow`, many record batches):
    input_ids  list<int32>   the tokens
    loss_mask  list<int8>    1 where the token is supervised (the completion), 0 for the prompt

Each sample is a random prompt (unsupervised) followed by a completion made of segments;
inside a segment the tokens step through an arithmetic progression with the segment's own
stride. A drafter that reads the context (the previous token or two, via the target's hidden
states) can predict several tokens ahead, so loss falls and tau rises measurably within
minutes on a CPU; the segment changes keep it from being trivial.

Generation is vectorised per chunk of samples, so a million short samples take seconds, and
the write is atomic (temp dir + rename) so two runs never see half a dataset.

    python -m trainer.synth --out DIR --samples N [--min-len 48 --max-len 160 --vocab 256]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

DATA_FILE = "data.arrow"
SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))])
SEGMENT_TOKENS = 24      # completion tokens per progression segment
MAX_STRIDE = 5           # strides are drawn from 1..MAX_STRIDE


def _chunk(rng: np.random.Generator, n: int, min_len: int, max_len: int, vocab: int,
           cycle: int = 0) -> pa.RecordBatch:
    """`n` samples as one record batch; token ids stay in [1, vocab-2] (0 = pad, vocab-1 = MASK).
    `cycle` > 0: each completion repeats `cycle` ids of its own instead (see write_dataset)."""
    lengths = rng.integers(min_len, max_len + 1, size=n, dtype=np.int64)
    prompt_len = np.maximum(1, (lengths * rng.uniform(0.1, 0.3, size=n)).astype(np.int64))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    sample = np.repeat(np.arange(n), lengths)
    pos = np.arange(total, dtype=np.int64) - offsets[:-1][sample]
    in_completion = pos >= prompt_len[sample]
    cpos = pos - prompt_len[sample]
    segment = np.where(in_completion, cpos // SEGMENT_TOKENS, 0)
    # Per (sample, segment) stride and start, drawn from one table indexed by a flat id.
    max_segments = int((max_len + SEGMENT_TOKENS - 1) // SEGMENT_TOKENS) + 1
    seg_id = sample * max_segments + segment
    starts = rng.integers(0, vocab - 2, size=n * max_segments)
    span = vocab - 2
    # A fixed successor permutation of the vocabulary (the same for every sample and seed):
    # inside a segment token i+1 = succ(token i), so slot k of a block is succ^k(anchor).
    # succ_pow[k] = succ applied k times, so a token is one lookup, not k passes over them all.
    succ = np.random.default_rng(12345).permutation(span)
    succ_pow = np.empty((SEGMENT_TOKENS, span), dtype=np.int64)
    succ_pow[0] = np.arange(span)
    for k in range(1, SEGMENT_TOKENS):
        succ_pow[k] = succ[succ_pow[k - 1]]
    progression = succ_pow[cpos % SEGMENT_TOKENS, starts[seg_id]]
    if cycle:
        own = rng.integers(0, span, size=(n, cycle))
        progression = own[sample, np.maximum(cpos, 0) % cycle]
    progression = progression + 1
    noise = rng.integers(1, vocab - 1, size=total)
    tokens = np.where(in_completion, progression, noise).astype(np.int32)
    mask = in_completion.astype(np.int8)
    offsets32 = pa.array(offsets.astype(np.int32))
    ids = pa.ListArray.from_arrays(offsets32, pa.array(tokens))
    loss = pa.ListArray.from_arrays(offsets32, pa.array(mask))
    return pa.RecordBatch.from_arrays([ids, loss], schema=SCHEMA)


def write_dataset(out_dir: str | os.PathLike, samples: int, *, min_len: int = 48, max_len: int = 160,
                  vocab: int = 256, seed: int = 0, chunk_samples: int = 65536, cycle: int = 0) -> Path:
    """Write `samples` synthetic samples to `out_dir` atomically; return the directory.

    `cycle` > 0: each completion is `cycle` ids of its own, repeated in order (a loop, as
    degenerate generations are). Why: at 8K context the successor data did not train the
    benchmark drafter (acc at chance, BENCHMARKS.md runs 7-8): its signal sits in one key
    out of ~8K. Here the whole context carries it -- attention's average already names the
    sample's ids, and the anchor names the phase -- so a long-context run learns.

    If `out_dir` appears meanwhile (another run won the race), the other run's copy is kept.
    """
    if samples < 1 or min_len < 2 or max_len < min_len or vocab < 8:
        raise ValueError(f"synth: bad sizes samples={samples} min_len={min_len} max_len={max_len} vocab={vocab}")
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        rng = np.random.default_rng(seed)
        with pa.OSFile(str(tmp / DATA_FILE), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
            left = samples
            while left > 0:
                n = min(chunk_samples, left)
                writer.write_batch(_chunk(rng, n, min_len, max_len, vocab, cycle))
                left -= n
        (tmp / "SYNTHETIC").write_text(
            f"samples={samples} min_len={min_len} max_len={max_len} vocab={vocab} seed={seed} cycle={cycle}\n")
        try:
            os.rename(tmp, out)
        except OSError:
            if not (out / DATA_FILE).exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.synth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="dataset directory to create")
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--min-len", type=int, default=48)
    ap.add_argument("--max-len", type=int, default=160)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cycle", type=int, default=0, help="completions repeat N ids of their own (0: progressions)")
    args = ap.parse_args(argv)
    if Path(args.out).exists():
        print(f"synth: {args.out} exists; not overwriting")
        return 2
    out = write_dataset(args.out, args.samples, min_len=args.min_len, max_len=args.max_len,
                        vocab=args.vocab, seed=args.seed, cycle=args.cycle)
    print(f"synth: wrote {args.samples} samples to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
