"""Parquet history: round trip, bounded part count (merging), readers other than ours."""

from __future__ import annotations

import math
import shutil

import duckdb
import pandas as pd
import polars as pl
import pytest

from controller.records import GpuSample, ProgressSample
from controller.store import history


def samples(n, start=0, source="metrics"):
    return [ProgressSample(step=start + i, time_s=1000.0 + i, tok_per_s=100.0 + i, loss=5.0 - i / 1000,
                           tau=None if i % 3 == 0 else 2.0, lr=float("nan") if i == 1 else 6e-4, source=source)
            for i in range(n)]


def test_round_trip_keeps_values_and_unknowns():
    history.append_progress("run-a", samples(5))
    t = history.read_progress("run-a")
    assert t.num_rows == 5
    rows = t.to_pylist()
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0]["tau"] is None and rows[1]["tau"] == 2.0       # None stays null
    assert rows[1]["lr"] is None                                   # NaN is stored as null
    assert rows[2]["tok_per_s"] == 102.0 and rows[2]["source"] == "metrics"
    assert set(t.column_names) == {f.name for f in history.SCHEMAS["progress"]}


def test_many_small_flushes_are_merged_and_nothing_is_lost():
    w = history.HistoryWriter("run-b", rows_per_part=10, fan_in=4)
    for k in range(100):
        w.append_progress(samples(5, start=k * 5))
    w.close()
    files = list((history.history_dir("run-b") / "progress").glob("*.parquet"))
    assert len(files) < 10, files                                  # 50 flushes, merged in tiers
    t = history.read_progress("run-b")
    assert t.column("step").to_pylist() == list(range(500))        # order kept, no duplicates


def test_interrupted_merge_leaves_no_duplicates_for_our_reader(tmp_path):
    w = history.HistoryWriter("run-c", rows_per_part=10, fan_in=4)
    kind_dir = history.history_dir("run-c") / "progress"
    for k in range(3):
        w.append_progress(samples(10, start=k * 10))
    keep = sorted(kind_dir.glob("*.parquet"))[0]
    saved = tmp_path / keep.name
    shutil.copy(keep, saved)
    w.append_progress(samples(10, start=30))                        # 4th part -> merge
    w.close()
    shutil.copy(saved, kind_dir / keep.name)                         # as if deletion never ran
    assert history.read_progress("run-c").column("step").to_pylist() == list(range(40))


def test_time_based_flush_writes_without_close():
    w = history.HistoryWriter("run-d", flush_interval_s=0.0)
    w.append_progress(samples(3))
    assert history.read_progress("run-d").num_rows == 3            # visible before close()


def test_gpus_and_wandb_rows():
    gpus = [GpuSample(index=0, name="H200", util_pct=99.0, mem_used_mib=1.0, mem_total_mib=2.0, users=["ct 200"]),
            GpuSample(index=1, power_w=None, users=[])]
    history.append_gpus("run-e", 1234.5, gpus)
    g = history.read_gpus("run-e").to_pylist()
    assert g[0]["users"] == ["ct 200"] and g[1]["power_w"] is None and g[0]["time_s"] == 1234.5
    history.append_wandb_rows("run-e", [
        {"_step": 3, "_timestamp": 99.0, "train": {"loss": 2.5}, "note": "hi", "ok": True, "inf": math.inf},
    ])
    wb = {r["key"]: r for r in history.read_wandb("run-e").to_pylist()}
    assert wb["train.loss"]["value"] == 2.5 and wb["train.loss"]["step"] == 3
    assert wb["note"]["text"] == "hi" and wb["ok"]["value"] == 1.0 and wb["inf"]["value"] is None


def test_readable_as_is_by_pandas_polars_duckdb():
    w = history.HistoryWriter("run-f", rows_per_part=7)
    for k in range(6):
        w.append_progress(samples(5, start=5 * k))
    w.close()
    d = history.history_dir("run-f") / "progress"
    assert len(list(d.glob("*.parquet"))) > 1
    df = pd.read_parquet(d)
    assert len(df) == 30 and df["tok_per_s"].max() == 104.0 and df["step"].max() == 29
    pdf = pl.read_parquet(str(d / "*.parquet"))
    assert pdf.height == 30 and pdf["step"].sum() == sum(range(30))
    (n, mx), = duckdb.sql(f"SELECT count(*), max(step) FROM '{d}/*.parquet' WHERE run_id = 'run-f'").fetchall()
    assert (n, mx) == (30, 29)


def test_empty_and_bad_ids():
    t = history.read_progress("never-written")
    assert t.num_rows == 0 and "tok_per_s" in t.column_names
    with pytest.raises(ValueError):
        history.history_dir("../etc")
    with pytest.raises(ValueError):
        history.read_table("x", "nope")


def test_table_append_keeps_order_after_buffered_rows():
    from controller.adopt.importers import progress_table

    w = history.HistoryWriter("run-g", rows_per_part=100, fan_in=4)
    w.append_progress(samples(3))                                   # buffered
    w.append_progress_table(progress_table(samples(950, start=3), "run-g"))
    w.append_progress(samples(2, start=953))
    w.close()
    assert history.read_progress("run-g").column("step").to_pylist() == list(range(955))
    assert len(list((history.history_dir("run-g") / "progress").glob("*.parquet"))) < 8


def test_a_step_written_twice_reads_once_first_copy_kept():
    """A watch killed between its history flush and its cursor write writes those rows
    again after the restart; a step metrics.jsonl gave and the .wandb file repeats comes
    twice: read_progress folds both back to one row per step, in append order."""
    first = [ProgressSample(step=s, tok_per_s=1000.0 + s, source="metrics") for s in (10, 20, 30)]
    again = [ProgressSample(step=s, tok_per_s=1.0, source="wandb") for s in (20, 30)]
    later = [ProgressSample(step=40, tok_per_s=1040.0, source="metrics")]
    for batch in (first, again, later):
        history.append_progress("twice", batch)
    rows = history.read_progress("twice").to_pylist()
    assert [(r["step"], r["source"], r["tok_per_s"]) for r in rows] == [
        (10, "metrics", 1010.0), (20, "metrics", 1020.0), (30, "metrics", 1030.0), (40, "metrics", 1040.0)]
    assert history.read_progress("twice", columns=["tok_per_s"]).column_names == ["tok_per_s"]
    assert history.read_progress("twice", columns=["tok_per_s"]).num_rows == 4


def test_part_files_written_before_a_field_was_added_still_read_and_merge():
    """accept_len and eval_* joined the progress schema on 2026-12-01: a history whose older
    part files lack them reads (nulls there), and merging old with new parts keeps every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    added = ("accept_len", "eval_loss", "eval_acc", "eval_tau", "eval_accept_len")
    old_schema = pa.schema([f for f in history.SCHEMAS["progress"] if f.name not in added])
    kind_dir = history.history_dir("run-old") / "progress"
    kind_dir.mkdir(parents=True)
    old = pa.Table.from_pylist([{"run_id": "run-old", "step": s, "time_s": 1000.0 + s, "source": "metrics",
                                 "tok_per_s": 100.0, "loss": 5.0} for s in range(3)], schema=old_schema)
    pq.write_table(old, kind_dir / "p0-000000001-000000003.parquet")
    new = [ProgressSample(step=3 + i, tok_per_s=100.0, loss=4.0, accept_len=2.5, eval_loss=4.5) for i in range(3)]
    history.append_progress("run-old", new)
    t = history.read_progress("run-old")
    assert t.column("step").to_pylist() == [0, 1, 2, 3, 4, 5]
    assert t.column("accept_len").to_pylist() == [None, None, None, 2.5, 2.5, 2.5]
    assert t.column("eval_loss").to_pylist()[3:] == [4.5] * 3
    assert history.read_progress("run-old", columns=["step", "eval_loss"]).num_rows == 6
    # a merge of old and new parts (the tiered compaction) writes the current schema
    w = history.HistoryWriter("run-old", rows_per_part=1, fan_in=2)
    for k in range(6):
        w.append_progress([ProgressSample(step=6 + k, loss=3.0, eval_acc=0.5)])
    w.close()
    t = history.read_progress("run-old")
    assert t.column("step").to_pylist() == list(range(12))
    assert t.column("eval_acc").to_pylist()[6:] == [0.5] * 6 and t.column("eval_acc").to_pylist()[0] is None
    parts = list(kind_dir.glob("*.parquet"))
    assert parts and all("eval_acc" in pq.ParquetFile(p).schema_arrow.names for p in parts)   # old part merged


def test_a_later_row_fills_the_fields_an_earlier_row_for_its_step_lacked():
    """A block-buffered log delivers its `[progress] step=N loss=…` lines after the
    metrics.jsonl rows (step only) for the same steps: the loss must survive the fold
    (first-row-wins dropped it, and compare-runs then had no loss at all -- a flaky
    tests/test_attach_local.py). A field both rows carry keeps the first value."""
    metrics = [ProgressSample(step=s, tok_per_s=100.0 + s, source="metrics") for s in (1, 2, 3)]
    log = [ProgressSample(step=s, tok_per_s=1.0, loss=2.5, source="log") for s in (1, 2, 3)]
    history.append_progress("fill", metrics)
    history.append_progress("fill", log)
    rows = history.read_progress("fill").to_pylist()
    assert [(r["step"], r["tok_per_s"], r["loss"], r["source"]) for r in rows] == [
        (1, 101.0, 2.5, "metrics"), (2, 102.0, 2.5, "metrics"), (3, 103.0, 2.5, "metrics")]


def _raw(run_id: str) -> list[dict]:
    """Every row of the progress files as a user's query reads them (no folding of ours)."""
    d = history.history_dir(run_id) / "progress"
    return pd.read_parquet(d).sort_values("step").to_dict("records")


def test_a_step_written_again_is_not_a_second_row_in_the_files():
    """Issue 26 item 4: at most one row per (run, step) on disk, not only through our reader."""
    history.append_progress("keyed", [ProgressSample(step=s, tok_per_s=1000.0 + s, source="metrics") for s in (1, 2)])
    history.append_progress("keyed", [ProgressSample(step=s, tok_per_s=1.0, source="wandb") for s in (2, 3)])
    history.append_progress("keyed", [ProgressSample(step=3, tok_per_s=2.0), ProgressSample(step=3, tok_per_s=3.0)])
    rows = _raw("keyed")
    assert [(r["step"], r["tok_per_s"], r["source"]) for r in rows] == [
        (1, 1001.0, "metrics"), (2, 1002.0, "metrics"), (3, 1.0, "wandb")]


def test_fields_a_later_row_brings_fill_the_row_on_disk_in_place():
    history.append_progress("keyed-fill", [ProgressSample(step=s, tok_per_s=100.0 + s, source="metrics")
                                           for s in (1, 2, 3)])
    kind_dir = history.history_dir("keyed-fill") / "progress"
    names = sorted(p.name for p in kind_dir.glob("*.parquet"))
    history.append_progress("keyed-fill", [ProgressSample(step=s, tok_per_s=1.0, loss=2.5, source="log")
                                           for s in (2, 3)])
    assert sorted(p.name for p in kind_dir.glob("*.parquet")) == names      # rewritten, no new part
    rows = _raw("keyed-fill")
    assert [(r["step"], r["tok_per_s"], r["loss"]) for r in rows][0][:2] == (1, 101.0)
    assert math.isnan(rows[0]["loss"])
    assert [(r["step"], r["tok_per_s"], r["loss"], r["source"]) for r in rows[1:]] == [
        (2, 102.0, 2.5, "metrics"), (3, 103.0, 2.5, "metrics")]
    assert not list(kind_dir.glob(".*tmp"))


def test_two_writers_at_once_leave_one_row_per_step():
    import threading

    writers = [history.HistoryWriter("keyed-two", rows_per_part=5, fan_in=3) for _ in range(2)]
    go = threading.Barrier(2)

    def feed(w):
        go.wait()
        for k in range(40):
            w.append_progress(samples(3, start=k * 3))
            w.flush("progress")
        w.close()

    threads = [threading.Thread(target=feed, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    rows = _raw("keyed-two")
    assert [r["step"] for r in rows] == list(range(120))
    (n, distinct), = duckdb.sql(f"SELECT count(*), count(DISTINCT step) FROM "
                                f"'{history.history_dir('keyed-two')}/progress/*.parquet'").fetchall()
    assert (n, distinct) == (120, 120)


def test_the_sources_a_dead_merge_left_are_deleted_by_the_next_flush(tmp_path):
    w = history.HistoryWriter("run-dead-merge", rows_per_part=10, fan_in=4)
    kind_dir = history.history_dir("run-dead-merge") / "progress"
    for k in range(3):
        w.append_progress(samples(10, start=k * 10))
        w.flush("progress")
    keep = sorted(kind_dir.glob("*.parquet"))[0]
    saved = tmp_path / keep.name
    shutil.copy(keep, saved)
    w.append_progress(samples(10, start=30))
    w.flush("progress")                                              # 4th part -> merge
    shutil.copy(saved, kind_dir / keep.name)                         # as if deletion never ran
    assert len(pd.read_parquet(kind_dir)) == 50                      # the window a user could see
    w.append_progress(samples(10, start=40))
    w.close()
    assert [r["step"] for r in _raw("run-dead-merge")] == list(range(50))
