"""Benchmark of the wandb sources (controller/wandb_io/offline_reader.py, controller/wandb_io/api_poller.py).

Side by side in one run:
  1. whole-run read of a real offline `.wandb` file (20,000 steps of the trainer's keys,
     written by wandb itself) vs a 200-step one: MB/s and rows/s;
  2. the watch tick: `read_new()` with the cursor at the end (nothing new) and with ten new
     rows, on the 200-step file vs the 20,000-step file -- the tick must not grow with the
     file (target ratio ~1);
  3. a watcher restart: `resume_from(offset)` replaying the metadata of the big file;
  4. the API poller against the stand-in server: how long `poll_async()` and `latest()`
     take while a fetch hangs on a slow server (must be ~0: the tick never waits), and one
     incremental fetch (ms, requests per fetch).
Figures go to bench/results/wandb.md. Run: `python -m bench wandb`.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.wandb_io.api_poller import ApiPoller  # noqa: E402
from controller.wandb_io.offline_reader import OfflineRunReader, read_offline_run  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "wandb.md"

WRITER = r'''
import sys, wandb
steps = int(sys.argv[2])
run = wandb.init(project="bench", entity="ops", dir=sys.argv[1], config={"lr": 6e-4})
for step in range(steps):
    run.log({"loss": 5.0 / (step + 1), "acc": step / 1e5, "tau": 1.0 + step / 1e4,
             "tok_per_s": 20000.0 + step % 500, "samples_per_s": 10.0, "step_time_s": 0.8,
             "data_wait_s": 0.004, "mem_alloc_gib": 23.5, "mem_peak_gib": 25.0, "lr": 6e-4},
            step=step)
run.finish()
'''


def write_run(base: Path, steps: int) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    script = base / "writer.py"
    script.write_text(WRITER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    subprocess.run([sys.executable, str(script), str(base), str(steps)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return OfflineRunReader(base).path


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def offset_before_last_rows(path: Path, rows: int) -> int:
    """The reader offset (a record boundary) from which about `rows` history rows remain."""
    reader = OfflineRunReader(path)
    tail_from = path.stat().st_size - 100_000
    while reader.offset < tail_from:             # fast-forward in 4 KB reads
        reader.read_new(max_bytes=4096)
    steps = []                                   # (offset before the read, rows it returned)
    while True:
        before = reader.offset
        batch = reader.read_new(max_bytes=1)     # one record (or a few) per read
        steps.append((before, len(batch.history)))
        if reader.offset == before:
            break
    remaining = 0
    for before, n in reversed(steps):
        remaining += n
        if remaining >= rows:
            return before
    return 7


def tick_fns(path: Path):
    """(tick with nothing new, tick with ~10 new rows), the cursor placed as in a watch."""
    at_end = OfflineRunReader(path)
    at_end.resume_from(path.stat().st_size, replay_metadata=False)
    start = offset_before_last_rows(path, 10)

    def ten_rows():
        r = OfflineRunReader(path)
        r.resume_from(start, replay_metadata=False)
        return len(r.read_new().history)
    return at_end.read_new, ten_rows


def interleaved_medians(fns: dict[str, object], repeat: int) -> dict[str, float]:
    """Median time of each fn, measured alternately so machine load hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def bench_offline(tmp: Path) -> list[str]:
    small = write_run(tmp / "small", 200)
    big = write_run(tmp / "big", 20_000)
    lines = ["## Offline `.wandb` reader", "",
             "| file | size | whole read | MB/s | rows/s | idle tick | tick reading the last rows + end records |",
             "|---|---|---|---|---|---|---|"]
    fns = {}
    for label, path in (("small", small), ("big", big)):
        fns[f"{label} idle"], fns[f"{label} ten"] = tick_fns(path)
    tick = interleaved_medians(fns, 100)
    for label, path in (("200 steps", small), ("20,000 steps", big)):
        key = "small" if path == small else "big"
        read_offline_run(path)                       # warm imports
        whole = median_s(lambda path=path: read_offline_run(path), 3)
        rows = len(read_offline_run(path).history)
        size_mb = path.stat().st_size / 1e6
        lines.append(f"| {label} | {size_mb:.2f} MB | {whole * 1e3:.0f} ms | {size_mb / whole:.1f} | "
                     f"{rows / whole:,.0f} | {tick[key + ' idle'] * 1e6:.0f} µs | "
                     f"{tick[key + ' ten'] * 1e3:.2f} ms for {fns[key + ' ten']()} rows "
                     f"({tick[key + ' ten'] / fns[key + ' ten']() * 1e6:.0f} µs/row) |")
    r_idle = tick["big idle"] / tick["small idle"]
    r_ten = (tick["big ten"] / fns["big ten"]()) / (tick["small ten"] / fns["small ten"]())
    restart = OfflineRunReader(big)
    size = big.stat().st_size
    replay = median_s(lambda: restart.resume_from(size), 3)
    lines += ["", f"Tick cost, big file / small file: idle {r_idle:.2f}×, per new row {r_ten:.2f}× "
              "(target ≈ 1: a tick reads only the bytes since the cursor).",
              f"Watcher restart on the big file (`resume_from` replaying run/config/summary/exit "
              f"records, no history emitted): {replay * 1e3:.0f} ms.", ""]
    return lines


def bench_api() -> list[str]:
    from tests.wandb_standin.server import StandinWandbServer  # the stand-in (loopback)
    key = "0123456789abcdef0123456789abcdef01234567"
    lines = ["## API poller (against the loopback stand-in server)", ""]
    with StandinWandbServer(key) as srv:
        warm = ApiPoller("ops/dfctl-test/live01", base_url=srv.url, api_key=key, timeout_s=5,
                         min_interval_s=0)
        warm.fetch_new()                                          # start wandb-core
        fresh = ApiPoller("ops/dfctl-test/live01", base_url=srv.url, api_key=key, timeout_s=5,
                          min_interval_s=0)
        n0 = len(srv.requests)
        t0 = time.perf_counter()
        fresh.fetch_new()
        first_fetch = time.perf_counter() - t0
        first_requests = len(srv.requests) - n0
        srv.append_history("ops/dfctl-test/live01", [{"_step": 60 + i, "loss": 0.1} for i in range(10)])
        n0 = len(srv.requests)
        t0 = time.perf_counter()
        got = fresh.fetch_new()
        incr_fetch = time.perf_counter() - t0
        incr_requests = len(srv.requests) - n0
        assert len(got.history) == 10
        slow = ApiPoller("ops/dfctl-test/live01", base_url=srv.url, api_key=key, timeout_s=3,
                         min_interval_s=0, max_attempts=1)
        srv.inject("*", delay_s=4, times=1000)
        slow.poll_async()
        poll_calls, latest_calls = [], []
        for _ in range(200):
            t0 = time.perf_counter()
            slow.poll_async()
            poll_calls.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            slow.latest()
            latest_calls.append(time.perf_counter() - t0)
        srv.clear_faults()
        slow.wait(30)
    lines += ["| measure | value |", "|---|---|",
              f"| first fetch, 60 rows (login + Run + RunHistoryKeys + RunParquetHistory + HistoryPage) "
              f"| {first_fetch * 1e3:.0f} ms, {first_requests} requests |",
              f"| incremental fetch, 10 new rows | {incr_fetch * 1e3:.0f} ms, {incr_requests} requests |",
              f"| `poll_async()` while a fetch hangs (median of 200) | {statistics.median(poll_calls) * 1e6:.1f} µs |",
              f"| `latest()` while a fetch hangs (median of 200) | {statistics.median(latest_calls) * 1e6:.1f} µs |",
              "", "4 requests per incremental fetch: at W&B's ~50 requests/min (free tier, "
              "FIELD-NOTES) one run can be polled about every 5 s; `min_interval_s` defaults to 10.", ""]
    return lines


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="dfctl-bench-wandb-"))
    try:
        lines = ["# wandb sources benchmark", "",
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {platform.node()} · "
                 f"{os.cpu_count()} CPUs · Python {platform.python_version()} · wandb "
                 f"{__import__('wandb').__version__} · machine shared with other jobs", ""]
        lines += bench_offline(tmp)
        lines += bench_api()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
