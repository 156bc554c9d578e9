"""The probe's per-tick file reading before and after issue 11/12 (untrusted-file rules,
fingerprints), side by side in one process: both versions of controller/remote/probe_agent.py
(the stdlib script; the old one from git) read the same run files, interleaved.

  1. one run on this host (root ""): `handle()` of a tick request -- log, metrics, pid,
     exit_code, stop_request, the process table scan -- the agent's whole per-tick work;
  2. one run under a container root (a directory standing for /proc/<init>/root): the old
     `root + path` open against the new resolution inside the root (openat2 RESOLVE_IN_ROOT,
     and the component walk), O_PATH + fstat + reopen, fingerprint checks.

Figures go to bench/results/probe_files.md. Run: `python -m bench probe_files`.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.probe import APPS_QUERY, GPU_QUERY  # noqa: E402
from controller.records import FileCursor, RunCursor  # noqa: E402
from controller.remote import probe_agent  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "probe_files.md"
OLD_COMMIT = "42fd17d"        # main before the rebuilt tick
ROUNDS = 400


def _old_remote() -> types.ModuleType:
    src = subprocess.run(["git", "show", f"{OLD_COMMIT}:controller/probe/remote.py"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    mod = types.ModuleType("old_remote")
    exec(compile(src, "old_remote", "exec"), mod.__dict__)  # noqa: S102 - our own file, from git
    return mod


def _run_dir(base: Path) -> Path:
    rd = base / "workspace" / "run"
    rd.mkdir(parents=True)
    (rd / "train.log").write_bytes(b"".join(b"[progress] step=%d loss=2.5 tok_per_s=21500.0\n" % i for i in range(20000)))
    (rd / "metrics.jsonl").write_bytes(b"".join(b'{"step": %d, "loss": 2.5}\n' % i for i in range(20000)))
    (rd / "pid").write_text(str(os.getpid()))
    return rd


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def main() -> int:
    old = _old_remote()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        rd = _run_dir(base)
        size = (rd / "train.log").stat().st_size
        msize = (rd / "metrics.jsonl").stat().st_size
        ino = (rd / "train.log").stat().st_ino
        with open(rd / "train.log", "rb") as f:
            f.seek(size - 256)
            fp = probe_agent._digest(f.read(256))
            f.seek(0)
            head = probe_agent._digest(f.read(256))
        cur = FileCursor(inode=ino, offset=size, line_no=20000, tail=fp, head=head).to_json()
        run_cursor = RunCursor(log=FileCursor.from_json(cur), metrics=FileCursor(offset=msize)).to_json()
        run_new = {"run_id": "r", "log_path": str(rd / "train.log"), "run_dir": str(rd), "pid": os.getpid(),
                   "cursor": run_cursor, "log_carry": 0, "log_context": 0, "fp_bytes": False}
        run_old = {"run_id": "r", "log_path": str(rd / "train.log"), "run_dir": str(rd), "pid": os.getpid(),
                   "log": {"inode": ino, "offset": size, "context": 0}, "metrics_offset": msize,
                   "wandb": {"path": None, "offset": 0}}
        base_req = {"read_cap_bytes": 1 << 20, "gpu": False, "gpu_query": GPU_QUERY, "apps_query": APPS_QUERY}
        new_req = dict(base_req, runs=[run_new], hold=True)
        old_req = dict(base_req, runs=[run_old])
        ct = str(base)
        rel = "/workspace/run/train.log"
        t = {"handle old": [], "handle new": [], "CT read old": [], "CT read new (openat2)": [],
             "CT read new (walk)": []}
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            old.handle(old_req)
            t1 = time.perf_counter()
            probe_agent.handle(new_req)
            t2 = time.perf_counter()
            old.read_since(ct + rel, ino, size, 1 << 20)
            t3 = time.perf_counter()
            probe_agent.read_since(rel, None, 0, 1 << 20, root=ct, cursor=cur)
            t4 = time.perf_counter()
            probe_agent._FORCE_WALK = True
            probe_agent.read_since(rel, None, 0, 1 << 20, root=ct, cursor=cur)
            probe_agent._FORCE_WALK = False
            t5 = time.perf_counter()
            for k, a, b in (("handle old", t0, t1), ("handle new", t1, t2), ("CT read old", t2, t3),
                            ("CT read new (openat2)", t3, t4), ("CT read new (walk)", t4, t5)):
                t[k].append(b - a)
    m = {k: _median_us(v) for k, v in t.items()}
    rows = [
        ("one run's tick on this host, `handle()` (old → new)",
         f"{m['handle old']:.0f} → {m['handle new']:.0f} µs ({m['handle new'] / m['handle old']:.2f}×)"),
        ("log read under a CT root, cursor at the end (old `root + path`)", f"{m['CT read old']:.0f} µs"),
        ("… inside the root: openat2 RESOLVE_IN_ROOT + O_PATH + fstat + fingerprints",
         f"{m['CT read new (openat2)']:.0f} µs ({m['CT read new (openat2)'] / m['CT read old']:.2f}×)"),
        ("… inside the root: the component walk (kernels without openat2)",
         f"{m['CT read new (walk)']:.0f} µs ({m['CT read new (walk)'] / m['CT read old']:.2f}×)"),
    ]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = [f"# probe file reading — before ({OLD_COMMIT}) and after, one process", "",
            f"Date: {when}. Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}. "
            f"Medians of {ROUNDS} interleaved rounds; other helpers share the cores.", "",
            "| measurement | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    RESULTS.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
