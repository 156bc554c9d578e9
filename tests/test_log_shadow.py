"""The probe agent's LogShadow (controller/remote/probe_agent.py): a held log read between
requests keeps the bytes past the watcher's cursor, so a truncation that comes before the
next request destroys none of them; memory is capped, what the cap drops is told as
lost_bytes; the guards on what is opened hold (a FIFO is never followed), and a one-shot
probe follows nothing. The real agent and follower thread run in test_follow_vs_tail.py;
here the agent's functions run in-process and the thread's step (pump_shadows) is called
where the thread would have woken -- reading in-process, and (the `reader` tests) fed by a
real log reader process (remote/log_reader.py) forked from this one, as the agent forks it."""

from __future__ import annotations

import os
import time

import pytest

from controller.probe.readings import FileRead
from controller.remote import log_reader
from controller.remote import probe_agent as pa


@pytest.fixture(autouse=True)
def fresh_agent():
    yield
    for sh in pa._SHADOWS.values():
        sh.close()
    pa._SHADOWS.clear()
    for f, _ in pa._HELD.values():
        f.close()
    pa._HELD.clear()
    for reader in pa._READER:
        reader.stop()
    pa._READER.clear()
    pa._BY_READING.clear()


@pytest.fixture
def reader():
    """The agent's log reader process, started as serve() starts it."""
    r = log_reader.LogReader(pa._take_event)
    assert r.start()
    pa._READER.append(r)
    return r


def lines(a: int, b: int) -> bytes:
    return b"".join(b"line %06d\n" % i for i in range(a, b))


def read(path, cursor, *, hold=True):
    return pa.read_since(str(path), None, 0, 1 << 20, cursor=cursor, hold=hold, fp_bytes=True)


def cursor_after(doc) -> dict:
    data = FileRead.from_doc(doc).data
    return {"inode": doc["inode"], "dev": doc["dev"], "offset": doc["start"] + len(data)}


def test_a_truncation_after_the_last_read_loses_nothing_the_agent_read(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 100))
    cur = cursor_after(read(log, {}))
    with log.open("ab") as f:
        f.write(lines(100, 150))
    pa.pump_shadows()                                  # the follower thread, woken by the writes
    with open(log, "r+b") as f:                        # truncated, at once rewritten longer
        f.truncate(0)
        f.write(b"rewrite\n" * 1000)
    saved = read(log, cur)
    got = FileRead.from_doc(saved)
    assert saved["saved"] and not got.rotated and got.start == cur["offset"] and got.lost_bytes == 0
    assert got.data == lines(100, 150)
    new = FileRead.from_doc(read(log, cursor_after(saved)))
    assert new.rotated and new.start == 0 and new.event == "truncated"
    assert new.data == b"rewrite\n" * 1000


def test_the_cap_drops_the_oldest_and_says_how_many(tmp_path, monkeypatch):
    monkeypatch.setattr(pa, "SHADOW_CAP_BYTES", 1000)
    monkeypatch.setattr(pa, "SHADOW_MIN_CAP_BYTES", 0)
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    more = lines(10, 510)                              # 6,000 bytes past the cursor
    with log.open("ab") as f:
        f.write(more)
    pa.pump_shadows()
    assert all(len(sh.buf) <= 1000 for sh in pa._SHADOWS.values())
    os.truncate(log, 0)
    got = FileRead.from_doc(read(log, cur))
    assert got.lost_bytes == len(more) - 1000 and got.start == cur["offset"] + got.lost_bytes
    assert got.data == more[-1000:]


def test_a_whole_file_is_read_from_the_file_and_the_shadow_trimmed_to_the_cursor(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    with log.open("ab") as f:
        f.write(lines(10, 20))
    pa.pump_shadows()
    doc = read(log, cur)
    assert "saved" not in doc and FileRead.from_doc(doc).data == lines(10, 20)
    read(log, cursor_after(doc))
    (sh,) = pa._SHADOWS.values()
    assert sh.base == cursor_after(doc)["offset"] and not sh.buf


def test_a_fifo_is_never_followed_and_a_one_shot_probe_follows_nothing(tmp_path):
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    doc = read(fifo, {})
    assert not doc["exists"] and "FIFO" in doc["error"] and not pa._SHADOWS
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 3))
    assert FileRead.from_doc(read(log, {}, hold=False)).data == lines(0, 3)
    assert not pa._SHADOWS


def test_a_huge_jump_is_not_read_through_and_the_logs_share_one_cap(tmp_path, monkeypatch):
    """Untrusted input: a CT's log can grow by a terabyte at once (a sparse hole): the
    agent keeps its cap's worth of the newest bytes and reads no more than that."""
    monkeypatch.setattr(pa, "SHADOW_TOTAL_CAP_BYTES", 3 * 4096)
    monkeypatch.setattr(pa, "SHADOW_MIN_CAP_BYTES", 4096)
    logs = [tmp_path / f"run{i}.log" for i in range(4)]
    for log in logs:
        log.write_bytes(lines(0, 10))
    curs = [cursor_after(read(log, {})) for log in logs]
    assert sorted(sh.cap for sh in pa._SHADOWS.values()) == [4096] * 4   # 3 x 4 KiB / 4, but at least 4 KiB
    os.truncate(logs[0], 1 << 40)                       # a 1 TiB hole past the cursor
    t0 = time.monotonic()
    pa.pump_shadows()
    assert time.monotonic() - t0 < 1.0
    sh = pa._SHADOWS[("", str(logs[0]))]
    assert len(sh.buf) == 4096 and sh.end == 1 << 40 and not sh.cut
    assert sh.dropped == (1 << 40) - 4096 - curs[0]["offset"]
    os.truncate(logs[0], 0)
    got = FileRead.from_doc(read(logs[0], curs[0]))
    assert got.lost_bytes == sh.dropped and got.data == b"\0" * 4096


def test_a_line_appended_to_the_emptied_file_then_overwritten_is_kept(tmp_path):
    """truncate, a line from the O_APPEND writer into the empty file, then the rewrite over
    it from offset 0 (test_follow_vs_tail's live-writer case): each content is delivered
    in turn -- the old one's unread tail, the line, the rewrite -- each from its start."""
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    with log.open("ab") as f:
        f.write(lines(10, 15))
    pa.pump_shadows()
    os.truncate(log, 0)
    pa.pump_shadows()
    with log.open("ab") as f:                          # the writer, O_APPEND: at offset 0
        f.write(lines(15, 16))
    pa.pump_shadows()
    with open(log, "r+b") as f:                        # the rewrite, from offset 0, over it
        f.write(b"rewrite\n" * 100)
    pa.pump_shadows()
    got = []
    for _ in range(3):
        doc = read(log, cur)
        got.append(FileRead.from_doc(doc))
        cur = cursor_after(doc)
    assert got[0].data == lines(10, 15) and not got[0].rotated
    assert got[1].data == lines(15, 16) and got[1].rotated and got[1].start == 0 and got[1].event == "truncated"
    assert got[2].data == b"rewrite\n" * 100 and got[2].rotated and got[2].start == 0


def test_reader_the_process_keeps_what_a_truncation_destroys(tmp_path, reader):
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 100))
    cur = cursor_after(read(log, {}))
    (sh,) = pa._SHADOWS.values()
    assert sh.rid is not None and sh.reading is None          # read by the reader, not in-process
    with log.open("ab") as f:
        f.write(lines(100, 150))
    assert reader.sync()                                # the reader has read them (and sent them)
    assert bytes(sh.buf) == lines(100, 150)
    with open(log, "r+b") as f:                        # truncated, at once rewritten longer
        f.truncate(0)
        f.write(b"rewrite\n" * 1000)
    got = FileRead.from_doc(read(log, cur))
    assert got.saved and not got.rotated and got.start == cur["offset"] and got.data == lines(100, 150)
    new = FileRead.from_doc(read(log, cursor_after(read(log, cur))))
    assert new.rotated and new.start == 0 and new.event == "truncated" and new.data == b"rewrite\n" * 1000


def test_reader_the_emptied_file_and_its_rewrite_are_each_kept(tmp_path, reader):
    """The generations, read by the reader process: each content in turn, from its start."""
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    with log.open("ab") as f:
        f.write(lines(10, 15))
    assert reader.sync()
    os.truncate(log, 0)
    assert reader.sync()
    with log.open("ab") as f:
        f.write(lines(15, 16))
    assert reader.sync()
    with open(log, "r+b") as f:
        f.write(b"rewrite\n" * 100)
    assert reader.sync()
    got = []
    for _ in range(3):
        doc = read(log, cur)
        got.append(FileRead.from_doc(doc))
        cur = cursor_after(doc)
    assert [g.data for g in got] == [lines(10, 15), lines(15, 16), b"rewrite\n" * 100]
    assert not got[0].rotated and got[1].rotated and got[2].rotated and got[2].start == 0


def _cut_inside_the_request(tmp_path, caught_up) -> FileRead:
    """The request caught up, then the file was cut before its own read of it."""
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    cur["tail"] = pa._digest(lines(0, 10)[-pa.FP_BYTES:])   # as the controller's cursor has it
    with log.open("ab") as f:
        f.write(lines(10, 20))
    caught_up()
    real_pick = pa._pick_file

    def cut_then_pick(*args, **kwargs):
        with open(log, "r+b") as f:
            f.truncate(0)
            f.write(b"rewrite\n" * 100)
        return real_pick(*args, **kwargs)
    pa._pick_file = cut_then_pick
    try:
        got = FileRead.from_doc(read(log, cur))
    finally:
        pa._pick_file = real_pick
    assert got.saved and not got.rotated and got.start == cur["offset"], got
    return got


def test_a_cut_seen_by_the_request_first_is_answered_from_what_was_read(tmp_path):
    """...the lines read before the cut are the answer, not the file anew (which lost them)."""
    assert _cut_inside_the_request(tmp_path, pa.pump_shadows).data == lines(10, 20)


def test_reader_a_cut_seen_by_the_request_first_is_answered_from_what_was_read(tmp_path, reader):
    assert _cut_inside_the_request(tmp_path, reader.sync).data == lines(10, 20)


def test_reader_that_dies_is_replaced_by_reading_in_process(tmp_path, reader):
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 10))
    cur = cursor_after(read(log, {}))
    with log.open("ab") as f:
        f.write(lines(10, 20))
    assert reader.sync()
    os.kill(reader.pid, 9)
    with log.open("ab") as f:
        f.write(lines(20, 30))
    pa.pump_shadows()                                  # the sync fails: read here from where it was
    (sh,) = pa._SHADOWS.values()
    assert not reader.alive and sh.rid is None and sh.reading is not None
    os.truncate(log, 0)
    got = FileRead.from_doc(read(log, cur))
    assert got.saved and got.data == lines(10, 30)
