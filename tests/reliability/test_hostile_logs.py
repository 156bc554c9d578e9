"""Hostile log content: invalid UTF-8, NULs, ANSI escapes, `\\r` storms and 100 MB without a
newline. `dfctl check-log` and the watcher's log cursor must stay within bounded memory
(peak RSS of a real process, measured with wait4, against the same process on a 1 KB log),
never crash, and still find the CUDA OOM that follows the junk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DFCTL = str(ROOT / ".venv" / "bin" / "dfctl")
OOM = (b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
       b"capacity of 79.11 GiB of which 1.12 GiB is free.\n")
BIG_MIB = 100
# Peak RSS a 100 MB log may add over a 1 KB one (the splitter's line cap is 64 KiB, the read
# chunk 1 MiB, the probe's read cap 1 MiB; generous for allocator slack on a loaded box).
RSS_SLACK_MIB = 48


def write_hostile(path: Path, big_mib: int) -> None:
    with open(path, "wb") as fh:
        fh.write(b"\x1b[32mstarting\x1b[0m caf\xc3\xa9 \xff\xfe bad utf-8 \x00\x00 nul\n")
        fh.write(b"tqdm 1%\r tqdm 2%\r tqdm 3%\r\n")
        block = (b"A\x00\xff\x1b[1m" * 16384)[: 1 << 16]
        for _ in range(big_mib * 16):           # big_mib MiB with no newline at all
            fh.write(block)
        fh.write(b"\n" + OOM)


# The measured command runs under this small launcher: Linux keeps a process's peak RSS
# across exec, so a child forked straight from pytest (hundreds of MiB) would report
# pytest's size. The launcher is a bare `python -S` (~10 MiB): that is the floor.
LAUNCHER = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execvp(sys.argv[2], sys.argv[2:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")


def run_measured(argv: list[str], **kw) -> tuple[int, str, str, float]:
    """Run a process to completion; (exit code, stdout, stderr, its own peak RSS in MiB)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rss_file = Path(d) / "maxrss"
        p = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, str(rss_file), *argv], capture_output=True,
                           timeout=300, **kw)
        return (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"),
                int(rss_file.read_text()) / 1024)


def run_measured_together(argvs: list[list[str]], **kw) -> list[tuple[int, str, str, float]]:
    """run_measured of each argv at once (the 1 KB log's process need not wait for the 100 MB
    one's): each peak RSS is still its own process's, from its own launcher's wait4."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(argvs)) as pool:
        return list(pool.map(lambda argv: run_measured(argv, **kw), argvs))


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    small, big = d / "small.log", d / "big.log"
    write_hostile(small, 0)
    write_hostile(big, BIG_MIB)
    assert big.stat().st_size > BIG_MIB << 20
    return small, big


def test_check_log_100mb_no_newline_bounded_rss_finds_oom(logs):
    small, big = logs
    results = {}
    measured = run_measured_together([[DFCTL, "check-log", str(p), "--json"] for p in (small, big)])
    for p, (code, out, err, rss) in zip((small, big), measured, strict=True):
        assert code == 4, err                                   # the OOM after the junk is found
        doc = json.loads(out)
        assert [f["kind"] for f in doc["findings"]].count("oom") == 1
        assert "Traceback" not in err
        results[p.name] = rss
    assert results["big.log"] < results["small.log"] + RSS_SLACK_MIB, results
    Path(ROOT / "bench" / "results").mkdir(exist_ok=True)
    _note("check-log", results)


WATCH_SCRIPT = r"""
import json, resource, sys, time
from dataclasses import asdict
from controller.playbook import WatchConfig
from controller.store.runstore import RunRecord, RunStore
from controller.watch import Watch
run_dir, log, db, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = WatchConfig(interval_s=0.5)
store = RunStore(db)
store.add_run(RunRecord(run_id="hostile", name="hostile", target_kind="local", target="local", run_dir=run_dir,
                        log_path=log, pid=pid, started_s=time.time(), playbook={"target": {"kind": "local"}, "watch": asdict(cfg)}))
w = Watch(store.runs(), store, gpu=False)
got = 0
def on_bytes(rid, off, data):
    global got
    got += len(data)
w.on_log_bytes = on_bytes
end = time.monotonic() + 120
ticks = 0
while not w.all_done and time.monotonic() < end:
    w.tick(); ticks += 1
w.close()
st = w.states[0]
print(json.dumps({"ticks": ticks, "done": w.all_done, "bytes": got, "state": st.state,
                  "kinds": sorted({f.kind for f in st.findings}), "tail_max": max(map(len, st.log_tail or [""]))}))
"""


def test_watcher_cursor_100mb_no_newline_bounded_rss(logs, tmp_path):
    small, big = logs
    results, argvs = {}, []
    for p in (small, big):
        run_dir = tmp_path / p.stem
        run_dir.mkdir()
        (run_dir / "exit_code").write_text("1\n")            # the run has ended: read to the end, then stop
        gone = subprocess.Popen(["true"])
        gone.wait()                                          # a pid that no longer runs
        os.symlink(p, run_dir / "train.log")
        argvs.append([sys.executable, "-c", WATCH_SCRIPT, str(run_dir), str(run_dir / "train.log"),
                      str(tmp_path / f"{p.stem}.sqlite"), str(gone.pid)])
    for p, (code, out, err, rss) in zip((small, big), run_measured_together(argvs, cwd=ROOT), strict=True):
        assert code == 0, err
        doc = json.loads(out.strip().splitlines()[-1])
        assert doc["done"] and doc["bytes"] == p.stat().st_size       # every byte, exactly once
        assert "oom" in doc["kinds"] and doc["tail_max"] <= 70_000     # lines capped at 64 KiB
        results[p.name] = rss
    assert results["big.log"] < results["small.log"] + RSS_SLACK_MIB, results
    _note("watch cursor", results)


def _note(what: str, rss: dict[str, float]) -> None:
    """Leave the figure where RELIABILITY.md's author picks it up (tests never fail on it)."""
    path = Path(os.environ.get("DFCTL_RELIABILITY_FIGURES", "/tmp/dfctl-reliability-figures.jsonl"))
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps({"what": what, "peak_rss_mib": rss}) + "\n")
    except OSError:
        pass
