"""Arrow dataset, synthetic data, length buckets, host batches."""

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.data import ArrowDataset, BucketPlan, DataError, make_host_batch, split_eval_rows
from trainer.synth import write_dataset


def _write(path: Path, rows: list[tuple[list[int], list[int]]]) -> Path:
    path.mkdir(parents=True)
    table = pa.table({"input_ids": pa.array([r[0] for r in rows], pa.list_(pa.int32())),
                      "loss_mask": pa.array([r[1] for r in rows], pa.list_(pa.int8()))})
    with pa.OSFile(str(path / "data.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        for batch in table.to_batches(max_chunksize=3):      # several chunks: row addressing across them
            w.write_batch(batch)
    return path


def test_dataset_reads_rows_and_counts_supervised_tokens(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for n in rng.integers(5, 40, size=11):
        ids = rng.integers(1, 100, size=n).tolist()
        mask = (rng.random(n) < 0.6).astype(int).tolist()
        rows.append((ids, mask))
    ds = ArrowDataset(_write(tmp_path / "d", rows))
    assert len(ds) == 11
    for i, (ids, mask) in enumerate(rows):
        got_ids, got_mask = ds.sample(i)
        assert got_ids.tolist() == ids and got_mask.tolist() == mask
        assert ds.lengths[i] == len(ids) and ds.supervised[i] == sum(mask)


def test_hf_stream_format_is_accepted(tmp_path):
    """datasets.save_to_disk writes Arrow *stream* files; they open the same way."""
    table = pa.table({"input_ids": pa.array([[1, 2, 3], [4, 5]], pa.list_(pa.int32())),
                      "loss_mask": pa.array([[0, 1, 1], [1, 1]], pa.list_(pa.int8()))})
    d = tmp_path / "hf"
    d.mkdir()
    with pa.OSFile(str(d / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    ds = ArrowDataset(d)
    assert ds.lengths.tolist() == [3, 2] and ds.supervised.tolist() == [2, 2]


def test_bad_dataset_names_file_and_problem(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        ArrowDataset(tmp_path / "nope")
    d = tmp_path / "bad"
    d.mkdir()
    (d / "x.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DataError, match=r"x\.arrow"):
        ArrowDataset(d)
    d2 = tmp_path / "nomask"
    d2.mkdir()
    t = pa.table({"input_ids": pa.array([[1, 2]], pa.list_(pa.int32()))})
    with pa.OSFile(str(d2 / "a.arrow"), "wb") as sink, pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    with pytest.raises(DataError, match="loss_mask"):
        ArrowDataset(d2)


def test_synthetic_write_is_atomic_and_not_overwritten(tmp_path):
    out = write_dataset(tmp_path / "s", 50, min_len=20, max_len=30, vocab=64, seed=3)
    assert sorted(p.name for p in out.iterdir()) == ["SYNTHETIC", "data.arrow"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]     # no temp dir left
    first = (out / "data.arrow").read_bytes()
    write_dataset(tmp_path / "s", 50, min_len=20, max_len=30, vocab=64, seed=4)  # loses the race: kept
    assert (out / "data.arrow").read_bytes() == first
    ds = ArrowDataset(out)
    ids, mask = ds.sample(7)
    assert 20 <= len(ids) <= 30 and ids.min() >= 1 and ids.max() <= 62
    assert mask[0] == 0 and mask[-1] == 1          # prompt first, completion last


def test_filter_counts_and_seed_log_format(tmp_path):
    rows = [([1] * 40, [0] * 30 + [1] * 10)] * 3 + [([2] * 60, [0] * 10 + [1] * 50)] * 20
    ds = ArrowDataset(_write(tmp_path / "f", rows))
    plan = BucketPlan(ds, block_size=8, token_budget=240, max_length=100, num_buckets=2, max_batch_samples=64)
    assert plan.filtered == 3 and len(plan.kept_rows) == 20          # 10 < 2*8 supervised tokens
    lines = plan.describe()
    assert re.fullmatch(r"Batches per epoch: \d+ \(min=\d+ max=\d+ avg=\d+\.\d\)", lines[0])
    for line in lines[1:]:
        assert re.fullmatch(r"  Bucket \d \[ *\d+, *\d+\): +\d+ batches \( *\d+\.\d%\)", line), line
    # the seed's own line parses with the same expression
    assert re.fullmatch(r"  Bucket \d \[ *\d+, *\d+\): +\d+ batches \( *\d+\.\d%\)",
                        "  Bucket 0 [   0, 770):   2283 batches (  3.8%)")


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(min_value=20, max_value=300), min_size=1, max_size=120),
       budget=st.integers(min_value=300, max_value=2000), buckets=st.integers(min_value=1, max_value=6),
       epoch=st.integers(min_value=0, max_value=3))
def test_every_sample_once_per_epoch_within_budget(lengths, budget, buckets, epoch):
    class FakeDataset:             # BucketPlan reads only these three attributes
        path = "mem"

        def __init__(self, n):
            self.lengths = np.array(n, dtype=np.int32)
            self.supervised = self.lengths.copy()

        def __len__(self):
            return len(self.lengths)

    ds = FakeDataset(lengths)
    plan = BucketPlan(ds, block_size=4, token_budget=budget, max_length=min(300, budget), num_buckets=buckets,
                      max_batch_samples=16)
    batches = plan.epoch_batches(epoch)
    assert len(batches) == plan.num_batches
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(len(lengths)))          # each sample exactly once
    cut = np.minimum(ds.lengths, plan.buckets[-1].hi - 1)
    for b in batches:
        assert 1 <= len(b) <= 16
        assert len(b) * int(cut[b].max()) <= budget                      # padded batch within budget
    assert [len(b) for b in plan.epoch_batches(epoch)] == [len(b) for b in batches]   # deterministic


def test_host_batch_anchors_labels_and_block(tiny_data):
    ds = ArrowDataset(tiny_data)
    rows = np.array([3, 10, 42])
    hb = make_host_batch(ds, rows, seq=0, epoch=0, seed=0, block_size=8, max_anchors=16, max_length=256,
                         mask_token_id=255)
    again = make_host_batch(ds, rows[::-1].copy(), seq=1, epoch=0, seed=0, block_size=8, max_anchors=16,
                            max_length=256, mask_token_id=255)
    assert np.array_equal(hb.anchors[0], again.anchors[2])     # anchors depend on the sample, not the batch
    for i, row in enumerate(rows):
        ids, mask = ds.sample(int(row))
        assert hb.lengths[i] == len(ids)
        for a in range(hb.anchors.shape[1]):
            if not hb.anchor_valid[i, a]:
                assert (hb.labels[i, a] == -100).all()
                continue
            p = hb.anchors[i, a]
            assert mask[p] == 1 and mask[p + 1] == 1            # anchors: p and its next token supervised
            assert hb.block_ids[i, a, 0] == ids[p] and (hb.block_ids[i, a, 1:] == 255).all()
            for k in range(1, 8):
                want = ids[p + k] if p + k < len(ids) and mask[p + k] else -100
                assert hb.labels[i, a, k] == want
            assert hb.labels[i, a, 0] == -100
        assert (np.diff(hb.anchors[i][hb.anchor_valid[i]]) > 0).all()
    assert hb.num_tokens == int(hb.lengths.sum())


def test_cycle_data_repeats_a_few_ids_of_each_sample(tmp_path):
    ds = ArrowDataset(write_dataset(tmp_path / "c", 50, min_len=200, max_len=300, vocab=256, seed=1, cycle=3))
    seen_sets = set()
    for row in range(len(ds)):
        ids, mask = ds.sample(row)
        done = np.asarray(ids)[np.asarray(mask) == 1]
        assert len(set(done.tolist())) <= 3 and np.array_equal(done[3:], done[:-3])   # period 3
        assert done.min() >= 1 and done.max() <= 254
        seen_sets.add(tuple(sorted(set(done.tolist()))))
    assert len(seen_sets) > 40                                  # each sample its own ids


def test_anchors_skip_the_last_prompt_token_of_each_turn(tmp_path):
    """Two turns: prompt, answer, prompt, answer. The anchors are exactly the positions p
    with loss_mask[p] and loss_mask[p+1] (SpecForge's rule); the prompt's last token before
    each answer (mask[p] = 0, mask[p+1] = 1) is not one, nor the answer's last token."""
    mask = [0] * 5 + [1] * 20 + [0] * 6 + [1] * 18
    ids = list(range(1, len(mask) + 1))
    ds = ArrowDataset(_write(tmp_path / "d", [(ids, mask)]))
    hb = make_host_batch(ds, np.array([0]), seq=0, epoch=0, seed=0, block_size=4, max_anchors=1000,
                         max_length=256, mask_token_id=999)
    got = hb.anchors[0][hb.anchor_valid[0]].tolist()
    want = [p for p in range(len(mask) - 1) if mask[p] and mask[p + 1]]
    assert got == want
    assert 4 not in got and 30 not in got                      # the two prompts' last tokens
    assert 24 not in got                                       # the first answer's last token


def test_eval_rows_are_held_out_and_plans_never_share_a_sample(tiny_data):
    ds = ArrowDataset(tiny_data)
    train_rows, eval_rows = split_eval_rows(len(ds), 0.1, seed=3)
    assert len(eval_rows) == 60 and len(train_rows) == 540
    assert not set(train_rows.tolist()) & set(eval_rows.tolist())
    again_train, again_eval = split_eval_rows(len(ds), 0.1, seed=3)
    assert np.array_equal(eval_rows, again_eval)               # the same split on resume
    plan = BucketPlan(ds, block_size=8, token_budget=2048, max_length=256, num_buckets=4, max_batch_samples=16,
                      rows=train_rows)
    seen = np.concatenate(plan.epoch_batches(0))
    assert set(seen.tolist()) <= set(train_rows.tolist())
    assert split_eval_rows(len(ds), 0.0, seed=3)[1].size == 0
    with pytest.raises(DataError, match="eval-fraction"):
        split_eval_rows(len(ds), 1.0, seed=3)


def _rss_anon_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_million_samples_open_in_constant_memory(tmp_path):
    """Anonymous memory (what reading samples into RAM would grow) stays far below the
    dataset's size when a 1M-sample synthetic dataset is opened, bucketed and iterated;
    the samples themselves stay in the file mapping."""
    out = write_dataset(tmp_path / "m", 1_000_000, min_len=24, max_len=40, vocab=256, seed=0,
                        chunk_samples=100_000)
    file_bytes = (out / "data.arrow").stat().st_size
    assert file_bytes > 150 * 2 ** 20
    before = _rss_anon_bytes()
    ds = ArrowDataset(out)
    plan = BucketPlan(ds, block_size=4, token_budget=2048, max_length=64, num_buckets=6, max_batch_samples=64)
    batches = plan.epoch_batches(0)
    after_open = _rss_anon_bytes()
    for rows in batches[:2000]:
        make_host_batch(ds, rows, seq=0, epoch=0, seed=0, block_size=4, max_anchors=8, max_length=64,
                        mask_token_id=255)
    after_iter = _rss_anon_bytes()
    assert len(ds) == 1_000_000 and sum(len(b) for b in batches) == len(plan.kept_rows)
    # index arrays: a few int32/int64 per sample (~40 B) — not the 150+ MiB of tokens
    assert after_open - before < 80 * 2 ** 20, (after_open - before) / 2 ** 20
    assert after_open - before < file_bytes / 2
    assert after_iter - after_open < 16 * 2 ** 20, (after_iter - after_open) / 2 ** 20


def test_newest_complete_checkpoint_ignores_temp_files_and_a_missing_pointer(tmp_path):
    from trainer import checkpoint
    cdir = checkpoint.checkpoint_dir(tmp_path)
    assert checkpoint.newest_complete(tmp_path) is None
    cdir.mkdir(parents=True)
    (cdir / "step-00000004.pt").write_bytes(b"x")
    (cdir / "step-00000008.pt").write_bytes(b"x")
    (cdir / "step-00000012.pt.tmp").write_bytes(b"half")
    assert checkpoint.newest_complete(tmp_path) == cdir / "step-00000008.pt"
    (cdir / "latest").write_text("step-00000004.pt\n")
    assert checkpoint.newest_complete(tmp_path) == cdir / "step-00000004.pt"
