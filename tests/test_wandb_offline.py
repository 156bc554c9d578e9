"""The offline `.wandb` reader, on run files written by the real wandb library (0.31).

The runs are written once per session by subprocesses running `wandb.init(mode=offline)`
(wandb start-up is slow), then read whole, incrementally, while live, truncated at many
points and with damaged bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.errors import BadInputError
from controller.wandb_io.offline_reader import (
    BLOCK_LEN,
    OfflineRunReader,
    decode_frames,
    find_offline_runs,
    read_offline_run,
)

STEPS = 200
BIG_NOTE_CHARS = 70_000   # a config value > 2 blocks: its record spans FIRST/MIDDLE/LAST

# Logs the trainer's metric keys (README output contract) with values derived from the
# step, so the test can check the mapping against the numbers the run logged.
WRITER = r'''
import os, sys, time, wandb
mode, steps, delay_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
run = wandb.init(project="dfctl-test", entity="ops", dir=os.environ["RUN_DIR"],
                 config={"lr": 6e-4, "batch_size": 4, "layout": mode,
                         "note": "n" * int(os.environ.get("BIG_NOTE_CHARS", "0"))})
for step in range(steps):
    run.log({"loss": 5.0 / (step + 1), "acc": step / 1000.0, "tau": 1.0 + step / 100.0,
             "tok_per_s": 20000.0 + step, "samples_per_s": 10.0 + step / 10.0,
             "step_time_s": 0.8, "data_wait_s": 0.004, "mem_alloc_gib": 23.5,
             "mem_peak_gib": 25.0, "lr": 6e-4, "phase": "train", "nested": {"x": step}},
            step=step)
    if delay_s:
        time.sleep(delay_s)
    if mode == "crash" and step == 19:
        raise RuntimeError("injected crash at step 19")
run.summary["best_tok_per_s"] = 20000.0 + steps - 1
run.finish()
'''


def writer_env(run_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", RUN_DIR=str(run_dir),
               # wandb 0.31 reads WANDB__<X> into the x_<x> setting: flush every 1 s
               WANDB__TRANSACTION_LOG_FLUSH_INTERVAL="1", **extra)
    return env


def start_writer(run_dir: Path, mode: str, steps: int, delay_s: float, **extra: str):
    run_dir.mkdir(parents=True, exist_ok=True)
    script = run_dir / "writer.py"
    script.write_text(WRITER)
    return subprocess.Popen([sys.executable, str(script), mode, str(steps), str(delay_s)],
                            env=writer_env(run_dir, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=run_dir)


@pytest.fixture(scope="session")
def written_runs(tmp_path_factory):
    """A finished run (with a >64 KiB config record) and a crashed one, written in parallel."""
    base = tmp_path_factory.mktemp("wandb-runs")
    finished = start_writer(base / "finished", "finished", STEPS, 0.0,
                            BIG_NOTE_CHARS=str(BIG_NOTE_CHARS))
    crashed = start_writer(base / "crashed", "crash", STEPS, 0.0)
    out_f = finished.communicate(timeout=240)
    crashed.communicate(timeout=240)
    assert finished.returncode == 0, out_f[1].decode()[-2000:]
    assert crashed.returncode != 0
    return {"finished": base / "finished", "crashed": base / "crashed"}


def full_rows(run_dir: Path) -> list[dict]:
    return read_offline_run(run_dir).history


def same_rows(a: list[dict], b: list[dict]) -> bool:
    """Row lists equal (NaN-free data here, so == is exact)."""
    return a == b


# ----------------------------------------------------------------------------- whole runs

def test_finished_run_history_config_summary_state(written_runs):
    data = read_offline_run(written_runs["finished"])
    assert data.state == "finished" and data.exit_code == 0
    assert data.project == "dfctl-test" and data.entity == "ops"
    assert data.run_id and Path(data.source).name == f"run-{data.run_id}.wandb"
    assert [r["_step"] for r in data.history] == list(range(STEPS))
    assert data.config["lr"] == 6e-4 and data.config["batch_size"] == 4
    assert len(data.config["note"]) == BIG_NOTE_CHARS       # FIRST/MIDDLE/LAST reassembled
    assert "_wandb" not in data.config
    assert data.summary["best_tok_per_s"] == 20000.0 + STEPS - 1
    assert data.summary["_step"] == STEPS - 1
    assert data.corrupt_blocks == 0
    row = data.history[7]
    assert row["phase"] == "train" and row["nested.x"] == 7
    progress = data.progress
    assert [p.step for p in progress] == list(range(STEPS))
    p = progress[7]
    assert p.source == "wandb"
    assert p.tok_per_s == 20007.0 and p.loss == pytest.approx(5.0 / 8)
    assert p.acc == pytest.approx(0.007) and p.tau == pytest.approx(1.07)
    assert p.samples_per_s == pytest.approx(10.7) and p.step_time_s == 0.8
    assert p.mem_alloc_gib == 23.5 and p.mem_peak_gib == 25.0 and p.lr == 6e-4
    assert p.time_s == row["_timestamp"] and p.time_s > 1.6e9


def test_crashed_run_has_nonzero_exit_and_state(written_runs):
    data = read_offline_run(written_runs["crashed"])
    assert data.exit_code not in (None, 0)
    assert data.state == "crashed"
    assert [r["_step"] for r in data.history] == list(range(20))


def test_find_offline_runs_newest_last_and_online_dir_names(written_runs, tmp_path):
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    src_f = find_offline_runs(written_runs["finished"])
    src_c = find_offline_runs(written_runs["crashed"])
    assert len(src_f) == 1 and len(src_c) == 1
    # An older offline run and a newer online-style run dir holding the same kind of file.
    old = wandb_dir / "offline-run-20200101_000000-aaaa1111"
    shutil.copytree(src_c[0], old)
    run_id = src_f[0].name.split("-")[-1]
    online = wandb_dir / f"run-20991231_235959-{run_id}"
    shutil.copytree(src_f[0], online)
    (wandb_dir / "latest-run").symlink_to(online)
    found = find_offline_runs(tmp_path)
    assert [p.name for p in found] == [old.name, online.name]
    assert find_offline_runs(online) == [online]
    # A trainer run dir resolves to the newest run.
    assert OfflineRunReader(tmp_path).path.parent == online
    assert find_offline_runs(tmp_path / "nothing-here") == []


def test_bad_paths_are_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="no such wandb run"):
        OfflineRunReader(tmp_path / "missing")
    with pytest.raises(BadInputError, match="no wandb run"):
        OfflineRunReader(tmp_path)
    not_wandb = tmp_path / "run-x.wandb"
    not_wandb.write_bytes(b"hello world, not a wandb file")
    with pytest.raises(BadInputError, match="not a wandb transaction log"):
        OfflineRunReader(not_wandb).read_new()


# ----------------------------------------------------------------------------- incremental

def test_incremental_small_reads_and_resume_match_the_whole_run(written_runs):
    full = full_rows(written_runs["finished"])
    reader = OfflineRunReader(written_runs["finished"])
    rows: list[dict] = []
    saved_offset = None
    for _ in range(10_000):
        batch = reader.read_new(max_bytes=3000)
        rows.extend(batch.history)
        assert batch.offset == reader.offset
        if saved_offset is None and len(rows) >= 50:
            saved_offset = reader.offset
            rows_at_save = len(rows)
        if reader.offset >= reader.path.stat().st_size:
            break
    assert same_rows(rows, full)
    # A watcher restarted at the persisted offset continues with nothing repeated.
    again = OfflineRunReader(written_runs["finished"])
    again.resume_from(saved_offset)
    rest = again.read_new()
    assert same_rows(full[:rows_at_save] + rest.history, full)
    assert rest.state == "finished" and again.exit_code == 0   # exit seen after the offset
    assert rest.project == "dfctl-test"                         # replayed run metadata
    # Reading at the end returns nothing new.
    assert again.read_new().history == []


def test_live_run_read_while_written(tmp_path):
    """The file grows while we read: union of the reads == the finished run, no repeats."""
    run_dir = tmp_path / "live"
    proc = start_writer(run_dir, "live", STEPS, 0.02)
    try:
        deadline = time.monotonic() + 120
        reader = None
        while reader is None and time.monotonic() < deadline:
            runs = find_offline_runs(run_dir)
            if runs and list(runs[-1].glob("*.wandb")):
                reader = OfflineRunReader(runs[-1])
            else:
                time.sleep(0.05)
        assert reader is not None, "wandb never created its .wandb file"
        rows: list[dict] = []
        reads_while_live = []
        while time.monotonic() < deadline:
            batch = reader.read_new(max_bytes=4096)   # small: cuts through records
            rows.extend(batch.history)
            if proc.poll() is None:
                reads_while_live.append(len(rows))
            elif not batch.history and batch.state != "running":
                break
            time.sleep(0.05)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    rows.extend(reader.read_new().history)
    partial = [n for n in reads_while_live if 0 < n < STEPS]
    assert partial, f"no read saw a partly written run: {reads_while_live[-5:]}"
    assert same_rows(rows, full_rows(run_dir))
    assert [r["_step"] for r in rows] == list(range(STEPS))
    assert reader.state == "finished"


# ----------------------------------------------------------------------------- damage

@pytest.fixture(scope="module")
def finished_bytes(written_runs):
    path = OfflineRunReader(written_runs["finished"]).path
    return path.read_bytes(), full_rows(written_runs["finished"])


def _read_prefix_then_rest(data: bytes, cut: int) -> tuple[list[dict], list[dict]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run-cut.wandb"
        path.write_bytes(data[:cut])
        reader = OfflineRunReader(path)
        first = reader.read_new().history
        with open(path, "ab") as f:                 # the run goes on writing
            f.write(data[cut:])
        rest = reader.read_new().history
        assert reader.corrupt_blocks == 0
    return first, rest


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(0.0, 1.0))
def test_truncated_anywhere_gives_a_prefix_then_the_rest(finished_bytes, frac):
    data, full = finished_bytes
    cut = int(frac * len(data))
    first, rest = _read_prefix_then_rest(data, cut)
    assert same_rows(first, full[:len(first)])
    assert same_rows(first + rest, full)


def test_truncated_at_every_byte_across_a_block_boundary(finished_bytes):
    data, full = finished_bytes
    assert len(data) > 3 * BLOCK_LEN
    for cut in list(range(0, 20)) + list(range(BLOCK_LEN - 20, BLOCK_LEN + 20)) + \
            list(range(4 * BLOCK_LEN + 1000, 4 * BLOCK_LEN + 1040)):
        first, rest = _read_prefix_then_rest(data, cut)
        assert same_rows(first + rest, full), cut


def test_bad_crc_skips_to_next_block_and_counts_it(finished_bytes, tmp_path):
    data, full = finished_bytes
    damaged = bytearray(data)
    assert len(data) > 5 * BLOCK_LEN
    damaged[4 * BLOCK_LEN + 5000] ^= 0xFF          # a history record in block 4
    path = tmp_path / "run-damaged.wandb"
    path.write_bytes(bytes(damaged))
    got = read_offline_run(path)
    assert got.corrupt_blocks >= 1
    assert 0 < len(got.history) < len(full)
    it = iter(full)                                # rows are an in-order subset
    assert all(any(row == f for f in it) for row in got.history)
    assert got.history[-1] == full[-1]             # later blocks still read
    assert got.state == "finished" and got.project == "dfctl-test"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=0, max_size=3000), at=st.integers(7, 200_000))
def test_random_garbage_never_raises(finished_bytes, garbage, at):
    data, full = finished_bytes
    at = min(at, len(data))
    payloads, end, corrupt = decode_frames(data[7:at] + garbage + data[at:], 7)
    assert 7 <= end <= len(data) + len(garbage) + BLOCK_LEN
    assert corrupt >= 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caps=st.lists(st.integers(1, 20_000), min_size=1, max_size=8))
def test_feed_bytes_fetched_elsewhere_in_capped_pieces(finished_bytes, written_runs, caps):
    """The probe reads `cap` bytes from the cursor on the remote side and feeds them here."""
    data, full = finished_bytes
    reader = OfflineRunReader(written_runs["finished"])   # path only names the run
    rows: list[dict] = []
    i = 0
    while reader.offset < len(data):
        cap = caps[i % len(caps)]
        i += 1
        piece = data[reader.offset:reader.offset + cap]
        before = reader.offset
        rows.extend(reader.feed(piece, reader.offset).history)
        if reader.offset == before:                   # a record longer than the cap:
            caps = [c * 2 for c in caps]              # the caller fetches more next time
    assert same_rows(rows, full)
    assert reader.state == "finished"
    with pytest.raises(BadInputError, match="reader is at"):
        reader.feed(b"", 0)
