"""One cursor per followed file: metrics.jsonl and the .wandb file are followed like the log
(dev + inode + offset + head and tail fingerprints), and the registry keeps each file's
cursor in one JSON form (older registries' bare-int offsets migrated)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path

from controller.follow.cursor import FileFollower
from controller.playbook import TargetConfig, WatchConfig
from controller.probe.readings import FileRead
from controller.records import FileCursor, RunCursor
from controller.remote import probe_agent
from controller.store.runstore import RunRecord, RunStore
from controller.watch import Watch
from controller.watch.progress_files import MetricsFollower


def _rows(steps: range, pad: str = "") -> bytes:
    return "".join('{"step": %d, "loss": 1.5%s}\n' % (i, pad) for i in steps).encode()


def _read(path: Path, f: FileFollower) -> FileRead:
    fr = FileRead.from_doc(probe_agent.read_since(str(path), None, 0, 1 << 20, cursor=f.file_cursor().to_json(),
                                                  fp_bytes=f.wants_fingerprint_bytes))
    assert fr is not None
    return fr


def test_metrics_rewritten_past_the_old_offset_is_read_from_its_start(tmp_path):
    """Truncated and at once rewritten with shorter rows, longer than before: no size check
    sees it; the tail fingerprint does, and the new file is read from byte 0."""
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_rows(range(50), pad=', "note": "' + "x" * 60 + '"'))
    m = MetricsFollower(FileCursor())
    steps = [s.step for s in m.take(_read(path, m.file), 1.0)]
    assert steps == list(range(50)) and m.offset == path.stat().st_size
    old_size, inode = m.offset, path.stat().st_ino
    steps = [s.step for s in m.take(_read(path, m.file), 2.0)]     # the fingerprint bytes arrive
    assert steps == [] and m.cursor().tail and m.cursor().head
    with open(path, "r+b") as fh:                                  # same inode, shorter rows, longer file
        fh.truncate(0)
        fh.write(_rows(range(400)))
    assert path.stat().st_ino == inode and path.stat().st_size > old_size
    fr = _read(path, m.file)
    assert fr.rotated and fr.event == "truncated" and fr.start == 0
    assert [s.step for s in m.take(fr, 3.0)] == list(range(400))


def test_a_file_on_another_device_with_the_same_inode_is_another_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_rows(range(10)))
    st = path.stat()
    cur = FileCursor(inode=st.st_ino, dev=st.st_dev + 1, offset=st.st_size)
    doc = probe_agent.read_since(str(path), None, 0, 1 << 20, cursor=cur.to_json())
    assert doc["rotated"] and doc["event"] == "replaced" and doc["start"] == 0 and doc["dev"] == st.st_dev
    same = FileCursor(inode=st.st_ino, dev=st.st_dev, offset=st.st_size)
    doc = probe_agent.read_since(str(path), None, 0, 1 << 20, cursor=same.to_json())
    assert not doc["rotated"] and doc["start"] == st.st_size


def test_the_registry_keeps_each_file_cursor_as_json_and_migrates_bare_offsets(tmp_path):
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)
    db.execute("CREATE TABLE cursors (run_id TEXT PRIMARY KEY, log_inode INTEGER, log_offset INTEGER, "
               "log_line_no INTEGER, metrics_offset INTEGER, wandb_offset INTEGER, updated_s REAL, "
               "log_fingerprint TEXT, log_head TEXT, progress_step INTEGER)")
    db.execute("INSERT INTO cursors VALUES ('r', 7, 100, 3, 5, 9, 0, '100:%s', NULL, 12)" % ("a" * 40))
    db.commit()
    db.close()
    store = RunStore(old)
    want = RunCursor(FileCursor(inode=7, offset=100, line_no=3, tail="100:" + "a" * 40), FileCursor(offset=5),
                     FileCursor(offset=9), 12)
    assert store.get_cursor("r") == want
    db = sqlite3.connect(old)
    (log, metrics, wandb), = db.execute("SELECT log_cursor, metrics_cursor, wandb_cursor FROM cursors").fetchall()
    db.close()
    assert json.loads(metrics) == FileCursor(offset=5).to_json() and json.loads(wandb)["offset"] == 9
    assert json.loads(log)["inode"] == 7
    new = RunCursor(FileCursor(inode=8, dev=2049, offset=10, line_no=1, tail="10:" + "b" * 40, head="10:" + "b" * 40),
                    FileCursor(inode=9, dev=2049, offset=20, tail="20:" + "c" * 40), FileCursor(), None)
    store.set_cursor("r", new)
    assert RunStore(old).get_cursor("r") == new


def test_a_restarted_watch_reads_a_metrics_file_rewritten_while_it_was_away(tmp_path):
    """The first watch reads metrics.jsonl to its end and stores its cursor (fingerprints
    included); while no watch runs the file is truncated and rewritten longer with other
    rows; the next watch's probe sees the bytes before the cursor changed and reads the
    new file from its start: the steps past the last delivered one all come, none twice."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    metrics = run_dir / "metrics.jsonl"
    metrics.write_bytes(_rows(range(60), pad=', "note": "' + "y" * 80 + '"'))
    (run_dir / "train.log").write_text("")
    rec = RunRecord(run_id="m", name="m", target_kind="local", target="local", run_dir=str(run_dir),
                    log_path=str(run_dir / "train.log"), started_s=time.time(),
                    playbook={"target": asdict(TargetConfig()), "watch": asdict(WatchConfig(interval_s=0.5))})
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(rec)
    delivered: list[int] = []
    first = Watch(store.runs(), store, gpu=False, persistent=False)
    try:
        for _ in range(20):
            for o in first.tick().observations:
                delivered += [p.step for p in o.progress]
            if store.get_cursor("m").metrics.tail:
                break
    finally:
        first.close()
    cur = store.get_cursor("m").metrics
    assert delivered == list(range(60)) and cur.offset == metrics.stat().st_size and cur.tail and cur.head
    assert cur.inode == metrics.stat().st_ino and cur.dev == metrics.stat().st_dev
    size_before = metrics.stat().st_size
    with open(metrics, "r+b") as fh:
        fh.truncate(0)
        fh.write(_rows(range(300)))
    assert metrics.stat().st_size > size_before
    second = Watch(store.runs(), store, gpu=False, persistent=False)
    try:
        for _ in range(20):
            for o in second.tick().observations:
                delivered += [p.step for p in o.progress]
            if delivered[-1] == 299:
                break
    finally:
        second.close()
    assert delivered == list(range(300))
    assert store.get_cursor("m").metrics.offset == os.stat(metrics).st_size
