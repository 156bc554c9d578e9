"""Faults under a running `dfctl watch` on the rig (run in CT 200 of a fake Proxmox host).

Already covered elsewhere and not repeated: sshd restarted and link down/up mid-watch with
no byte lost (tests/test_watch_rig.py), a watcher stopped between ticks and restarted
(tests/test_watch.py). Here: sshd killed for a while, the log truncated / rotated /
deleted, the run SIGKILLed, the container stopped, the watcher SIGKILLed at a random
moment mid-tick (a real process), and two watchers of one run at once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from controller.transport.factory import close_all
from controller.watch import Watch
from tests.test_probe import wait_for
from tests.test_watch import tick_until
from tests.test_watch_rig import ct_record, launch_in_ct, stop_ct_run

pytestmark = pytest.mark.rig
ROOT = Path(__file__).resolve().parents[2]

# Appends to train.log itself, one open per line (as a logger with a rotating handler
# would), so rotation and deletion give a new file at the same path.
APPENDER = """
    import os, sys, time
    steps = int(os.environ.get("STEPS", "100000"))
    for n in range(1, steps + 1):
        if os.path.exists("stop"):   # the test has what it needs: end now, not at `steps`
            break
        with open("train.log", "a") as f:
            f.write("[progress] step=%d loss=2.5 tok_per_s=21500.0 step_time_s=0.05\\n" % n)
            if os.path.exists("inject"):
                f.write(open("inject").read() + "\\n")
                os.unlink("inject")
        time.sleep(0.05)
    open("done", "w").write("1")
"""


def inject(run_dir: Path, text: str) -> None:
    tmp = run_dir / "inject.tmp"
    tmp.write_text(text)
    tmp.rename(run_dir / "inject")
    wait_for(lambda: not (run_dir / "inject").exists(), 30, "the line injected")


class Reads:
    """What the watcher delivered, per file generation (a reset to offset 0 starts one)."""

    def __init__(self):
        self.gens: list[list[tuple[int, bytes]]] = [[]]

    def __call__(self, run_id, offset, data):
        if offset == 0 and self.gens[-1]:
            self.gens.append([])
        self.gens[-1].append((offset, data))

    def check_generation(self, gen: list[tuple[int, bytes]], content: bytes) -> None:
        """Contiguous from 0, nothing repeated, and byte-exact against the file."""
        joined = b"".join(d for _, d in gen)
        assert gen[0][0] == 0 and all(b - a == len(d) for (a, d), (b, _) in zip(gen, gen[1:]))
        assert content.startswith(joined), (len(joined), len(content))


def test_log_truncated_rotated_deleted_sshd_killed_run_killed(rig, rig_host, tmp_path):
    host = rig_host
    name = f"rel-watch-{os.getpid()}"
    run_dir = launch_in_ct(host, name, APPENDER)
    log = run_dir / "train.log"
    reads = Reads()
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(ct_record(rig, host, name, connect_timeout_s=2.0))
    w = Watch(store.runs(), store, gpu=False, probe_timeout_s=4.0, on_log_bytes=reads)
    st = lambda: w.states[0]  # noqa: E731
    try:
        tick_until(w, lambda: st().state == "running" and len(reads.gens[0]) >= 3, 60, "running")
        # sshd killed (connects refused) for a while, then back
        host.stop_sshd()
        try:
            tick_until(w, lambda: st().state == "unreachable", 60, "unreachable while sshd is down", interval_s=0.2)
            assert any(f.kind == "unreachable" and host.name in f.summary for f in st().findings)
        finally:
            host.start_sshd()
        n = sum(map(len, reads.gens))
        tick_until(w, lambda: st().state == "running" and sum(map(len, reads.gens)) > n, 90, "recovered")
        # truncated in place (copytruncate): the cursor restarts at 0
        gens = len(reads.gens)
        os.truncate(log, 0)
        tick_until(w, lambda: len(reads.gens) > gens and len(reads.gens[-1]) >= 2, 60, "read after truncation")
        # rotated (renamed away; the writer makes a new file): the old file is read to its
        # end (found by inode in the directory), then the new one from 0 -- nothing lost
        gens = len(reads.gens)
        wait_for(lambda: log.stat().st_size > w.runs[0].log.read_offset + 200, 30, "unread lines in the log")
        log.rename(run_dir / "train.log.1")
        tick_until(w, lambda: len(reads.gens) > gens and len(reads.gens[-1]) >= 2, 60, "read after rotation")
        assert b"".join(d for _, d in reads.gens[gens - 1]) == (run_dir / "train.log.1").read_bytes()
        # deleted: nothing to read for a moment, then a new file -> from 0
        gens = len(reads.gens)
        log.unlink()
        tick_until(w, lambda: len(reads.gens) > gens and len(reads.gens[-1]) >= 2, 60, "read after deletion")
        assert st().state == "running" and not [f for f in st().findings if f.kind in ("crash", "oom")]
        # still detecting: an OOM line in the newest file, then the run SIGKILLed
        inject(run_dir, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        tick_until(w, lambda: any(f.kind == "oom" for f in st().findings), 30, "oom flagged")
        stop_ct_run(host, run_dir)
        tick_until(w, lambda: st().state == "failed", 30, "the SIGKILLed run seen ended")
        tick_until(w, lambda: w.all_done, 30, "watch done")
        reads.check_generation(reads.gens[-1], log.read_bytes())
        assert len(reads.gens) >= 4
        stored = store.findings(st().run_id)
        assert len({f.key for f in stored}) == len(stored)               # nothing stored twice
        assert {"oom", "unreachable"} <= {f.kind for f in stored}
    finally:
        w.close()
        stop_ct_run(host, run_dir)


def test_container_stopped_under_a_running_watch(rig, rig_host, tmp_path):
    host = rig_host
    name = f"rel-ctstop-{os.getpid()}"
    launch_in_ct(host, name, APPENDER)
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(ct_record(rig, host, name, connect_timeout_s=2.0))
    w = Watch(store.runs(), store, gpu=False, probe_timeout_s=4.0)
    try:
        tick_until(w, lambda: w.states[0].state == "running", 60, "running")
        host.stop_container(host.vmid_running)
        tick_until(w, lambda: w.states[0].state in ("unreachable", "failed"), 60, "the stopped CT noticed",
                   interval_s=0.2)
        f = [f for f in w.states[0].findings if f.kind in ("unreachable", "crash", "oom")]
        assert f, [x.kind for x in w.states[0].findings]
        host.start_container(host.vmid_running)
        # the CT is back but its processes are gone: the run ends as failed, the watch ends
        tick_until(w, lambda: w.all_done, 90, "watch done after the CT came back")
        assert w.states[0].state == "failed"
    finally:
        w.close()
        if host.container_state(host.vmid_running) != "RUNNING":
            host.start_container(host.vmid_running)


# A watcher as a real process: every delivered chunk is appended (offset, length, sha) to
# a journal before the tick goes on, so a SIGKILL at any moment leaves what it delivered.
CHILD_WATCH = r"""
import hashlib, json, sys, time
from controller.store.runstore import RunStore
from controller.transport.factory import close_all
from controller.watch import Watch
reg, run_id, journal = sys.argv[1], sys.argv[2], sys.argv[3]
store = RunStore(reg)
fh = open(journal, "a")
def sink(rid, off, data):
    fh.write(json.dumps([off, len(data), hashlib.sha256(data).hexdigest()]) + "\n"); fh.flush()
w = Watch([store.get_run(run_id)], store, gpu=False, on_log_bytes=sink, read_cap_bytes=4096)
print("ready", flush=True)
if len(sys.argv) > 4:      # "hold": start ticking only when told (both watchers from one cursor)
    sys.stdin.readline()
while not w.all_done:
    w.tick()
    time.sleep(0.05)
w.close()
print("done", flush=True)
"""


def spawn_watcher(reg: Path, run_id: str, journal: Path, *, hold: bool = False) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", CHILD_WATCH, str(reg), run_id, str(journal)] + (["hold"] if hold else []),
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                         stdin=subprocess.PIPE if hold else None, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def journal_chunks(path: Path) -> list[tuple[int, int, str]]:
    return [tuple(json.loads(ln)) for ln in path.read_text().splitlines() if ln.strip()]


def assert_covers(chunks, content: bytes, allow_overlap: bool) -> None:
    """The chunks are byte-exact pieces of the file and cover it from 0 with no gap."""
    import hashlib

    end = 0
    for off, n, sha in sorted(chunks):
        assert hashlib.sha256(content[off:off + n]).hexdigest() == sha
        assert off <= end, f"gap: bytes {end}..{off} never read"
        assert allow_overlap or off == end, f"bytes from {off} read twice"
        end = max(end, off + n)
    assert end == len(content.rsplit(b"\n", 1)[0]) + 1 if content.endswith(b"\n") else True


def test_watcher_sigkilled_mid_tick_resumes_and_two_watchers_at_once(rig, rig_host, tmp_path):
    host = rig_host
    name = f"rel-kill-{os.getpid()}"
    run_dir = launch_in_ct(host, name, APPENDER.replace('"100000"', '"400"'))
    reg = tmp_path / "reg.sqlite"
    store = RunStore(reg)
    rec = ct_record(rig, host, name, connect_timeout_s=3.0)
    store.add_run(rec)
    j1, j2, j3 = tmp_path / "w1.jsonl", tmp_path / "w2.jsonl", tmp_path / "w3.jsonl"
    procs = []
    try:
        # watcher 1 is SIGKILLed at a random moment mid-tick, three times, and restarted
        rnd = random.Random(os.getpid())
        for i in range(3):
            p = spawn_watcher(reg, rec.run_id, j1)
            procs.append(p)
            wait_for(lambda i=i: j1.exists() and len(journal_chunks(j1)) > 2 * (i + 1), 60, "watcher 1 reading")
            time.sleep(rnd.uniform(0.0, 0.3))
            p.send_signal(signal.SIGKILL)
            p.wait(10)
        inject(run_dir, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB")
        (run_dir / "stop").write_text("")   # the run ends a step after its OOM line, not 400 steps in
        # then two watchers of the same run at once, to the end of the run
        # both read the registry's cursor before either ticks (else the second may start
        # where the first already is, and its journal need not meet watcher 1's)
        a, b = spawn_watcher(reg, rec.run_id, j2, hold=True), spawn_watcher(reg, rec.run_id, j3, hold=True)
        procs += [a, b]
        for p in (a, b):
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in (a, b):
            assert p.stdout.readline().strip() == "done"
            p.wait(30)
        content = (run_dir / "train.log").read_bytes()
        # watcher 1 across its kills + the watchers after: every byte, exactly as written;
        # a kill may repeat at most what it delivered but had not committed
        first = journal_chunks(j1)
        assert_covers(first + journal_chunks(j2), content, allow_overlap=True)
        assert_covers(first + journal_chunks(j3), content, allow_overlap=True)
        cur = RunStore(reg).get_cursor(rec.run_id)
        assert cur.log_offset == len(content)                           # both agree on the end
        found = RunStore(reg).findings(rec.run_id)
        assert [f.kind for f in found].count("oom") == 1               # found by both, stored once
        assert len({f.key for f in found}) == len(found)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stop_ct_run(host, run_dir)


def test_slow_host_under_watch_bounded_ticks_then_recovers(rig, rig_host, tmp_path):
    """sshd SIGSTOPped (TCP connects, no banner) before the watcher connects: every tick
    still returns within its bound, the run is `unreachable` naming the host, and after
    SIGCONT the watch carries on from the cursor."""
    host = rig_host
    name = f"rel-slow-{os.getpid()}"
    run_dir = launch_in_ct(host, name, APPENDER)
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(ct_record(rig, host, name, connect_timeout_s=2.0))
    close_all()                      # no connection cached from earlier tests: connect anew
    host.sigstop_sshd()
    w = Watch(store.runs(), store, gpu=False, probe_timeout_s=4.0)
    try:
        took = []
        end = time.monotonic() + 60
        while w.states[0].state != "unreachable" and time.monotonic() < end:
            took.append(w.tick().duration_s)
        for _ in range(3):
            took.append(w.tick().duration_s)
        # a never-reached host gets its full probe time on the first tick, later ticks tick_wait_s
        assert w.states[0].state == "unreachable" and took[0] <= 4.0 + 1.0, took
        assert max(took[1:]) <= w.tick_wait_s + 1.0, took
        assert any(host.name in f.summary for f in w.states[0].findings if f.kind == "unreachable")
        host.sigcont_sshd()
        tick_until(w, lambda: w.states[0].state == "running" and w.states[0].log.offset_bytes > 0, 90,
                   "recovered after SIGCONT")
    finally:
        host.sigcont_sshd()
        w.close()
        stop_ct_run(host, run_dir)
