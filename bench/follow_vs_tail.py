"""dfctl's two log followers beside GNU `tail -F`, many runs of each event (issue 24).

Each round runs every case of tests/test_follow_vs_tail.py once (copytruncate,
truncate-and-rewrite with the writer stopped and with it running, delete and recreate,
rename under a nohup'd writer), the cases interleaved so a change in the machine's load
falls on all of them alike. In each run the watch (ticks driven by the test), `dfctl
logs -f` and `tail -F -s 0.1` follow the same writer (1200 lines at ~370/s); a run's
figure is the lines of the 1200 each never delivered. Also summed: the CPU seconds of
the host agents (and their children: the log reader) over the live-writer runs, read
from /proc before each run closes; the cost of following alone: the agent's CPU over
10 s of the writer with no request, beside tail -F's; and (with perf, as root) how soon
after each write each follower read it.

Figures go to bench/results/follow_vs_tail.md. Run: `python -m bench.follow_vs_tail` (30
rounds; FOLLOW_ROUNDS=<n> to change it; ~7 s a run). Through `python -m bench
follow_vs_tail`, BENCHMARKS.md is re-assembled from the results files afterwards.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "follow_vs_tail.md"
ROUNDS = int(os.environ.get("FOLLOW_ROUNDS", "30"))
CASES = {
    "copytruncate": "test_copytruncate",
    "truncate, rewritten longer, writer stopped first": "test_truncate_then_rewrite_longer_before_the_next_read",
    "truncate, rewritten longer at once, writer running": "test_truncate_then_rewrite_longer_under_a_live_writer",
    "delete and recreate": "test_delete_and_recreate",
    "rename under a nohup'd writer": "test_rename_under_a_nohup_writer",
}
LIVE = "truncate, rewritten longer at once, writer running"
FOLLOW_CPU_S = 10.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu_s(root_pid: int, skip: set[int]) -> float:
    """utime + stime of every live process under root_pid but the ones in `skip`."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(name)] = int(fields[1])
        cpu[int(name)] = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    total = 0.0
    for pid in cpu:
        p = pid
        while p in parent and p != root_pid and p not in skip:
            p = parent[p]
        if p == root_pid and pid not in skip and pid != root_pid:
            total += cpu[pid]
    return total


def _one(test: Callable[..., None], t: Any) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="follow-vs-tail-"))
    made: list[Any] = []
    cpu = {"agents_s": 0.0}

    def make(mode: str) -> Any:
        made.append(t.Run(tmp, mode))
        run = made[-1]
        close = run.close

        def close_counting() -> None:          # the agents' CPU, read before they are stopped
            if not cpu["agents_s"]:
                cpu["agents_s"] = _descendants_cpu_s(os.getpid(), {run.writer.pid, run.tail.pid})
            close()
        run.close = close_counting
        return run
    failed = None
    try:
        test(make)
    except AssertionError as exc:
        failed = str(exc)[:200]
    finally:
        for r in made:
            r.close()
    r = made[0]
    want = set(range(t.N_LINES))
    watch = want - {int(m.group(1)) for m in map(t.LINE.match, r.lines) if m}
    stream = want - t.in_files(r.stream_out)
    tail = want - t.in_files(r.tail_out)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"watch": len(watch), "logs_f": len(stream), "tail": len(tail), "failed": failed,
            "agents_cpu_s": cpu["agents_s"]}


def _follow_cpu_s(t: Any, seconds: float) -> tuple[float, float]:
    """(the agent's CPU seconds with its children, tail -F's) while the writer writes for
    `seconds` and no request comes: the cost of following alone, after one read that
    makes the agent follow the log (LogStream.tail, as `dfctl logs -f` starts)."""
    import subprocess
    import sys
    tmp = Path(tempfile.mkdtemp(prefix="follow-cpu-"))
    log = tmp / "train.log"
    log.write_bytes(b"")
    tail = subprocess.Popen(["tail", "-F", "-n", "+1", "-s", "0.1", str(log)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    from controller.store.runstore import RunRecord
    rec = RunRecord(run_id="c", name="c", target_kind="local", target="local", run_dir=str(tmp), log_path=str(log),
                    pid=None, started_s=time.time(), playbook={"target": {"kind": "local"}})
    stream = t.LogStream(rec, poll_s=0.1)
    try:
        stream.tail(1)
        writer = subprocess.Popen([sys.executable, "-c", t.WRITER, "hold", str(log), str(int(seconds * 370))])
        before = _descendants_cpu_s(os.getpid(), {writer.pid, tail.pid})
        tail_before = _cpu_of(tail.pid)
        writer.wait(seconds * 3 + 30)
        time.sleep(0.5)
        return (_descendants_cpu_s(os.getpid(), {writer.pid, tail.pid}) - before, _cpu_of(tail.pid) - tail_before)
    finally:
        stream.close()
        tail.kill()
        tail.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _wake_latency_us(t: Any, seconds: float) -> dict[str, list[float]]:
    """Per write of the writer, how soon each follower read after it (microseconds): the
    first read()/pread64() returning bytes by each of tail -F's, the agents' and their
    children's (the log readers') threads, from `perf trace` (one clock for all; root
    only; {} without perf). The watch ticks every 0.1 s and logs -f polls meanwhile."""
    import bisect
    import re
    import signal
    import subprocess
    if shutil.which("perf") is None:
        return {}
    tmp = Path(tempfile.mkdtemp(prefix="follow-latency-"))
    r = t.Run(tmp, "hold")
    try:
        r.tick_for(0.3)
        names: dict[int, str] = {r.writer.pid: "writer", r.tail.pid: "tail -F"}
        parent = _parents()
        for pid, pp in parent.items():
            if pp == os.getpid() and pid not in names:
                names[pid] = "the agents (either, any thread)"
        for pid, pp in parent.items():
            if names.get(pp) == "the agents (either, any thread)":
                names[pid] = "their log readers (either)"
        tids = {int(tid): who for pid, who in names.items() for tid in os.listdir(f"/proc/{pid}/task")}
        out = tmp / "perf.txt"
        perf = subprocess.Popen(["perf", "trace", "-e", "write,read,pread64", "-t", ",".join(map(str, tids)),
                                 "-o", str(out)], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        end = time.monotonic() + seconds
        while time.monotonic() < end and r.writer.poll() is None:
            r.tick()
            time.sleep(0.1)
        perf.send_signal(signal.SIGINT)
        perf.wait(30)
    finally:
        r.writer.kill()
        r.close()
    text = out.read_text() if out.exists() else ""
    shutil.rmtree(tmp, ignore_errors=True)
    line = re.compile(r"^\s*([\d.]+) \(\s*[\d.]+ ms\): \S+/(\d+) (\w+)\(fd: (\d+).*\)\s+=\s+(-?\d+)")
    events = [(float(m.group(1)), tids.get(int(m.group(2)), "?"), m.group(3), int(m.group(4)), int(m.group(5)))
              for m in map(line.match, text.splitlines()) if m]
    writes = [e[0] for e in events if e[1] == "writer" and e[2] == "write" and e[4] == 52]
    lat: dict[str, list[float]] = {}
    for who in sorted({e[1] for e in events} - {"writer", "?"}):
        reads = sorted(e[0] for e in events if e[1] == who and e[2] in ("read", "pread64") and e[4] > 0 and e[3] > 2)
        for w in writes:
            i = bisect.bisect_left(reads, w)
            if i < len(reads):
                lat.setdefault(who, []).append((reads[i] - w) * 1000.0)
    return lat


def _parents() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                out[int(name)] = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    return out


def _latency_rows(lat: dict[str, list[float]]) -> list[str]:
    rows = ["| follower | writes | p50 | p90 | p99 | max | > 1 ms |", "|---|---|---|---|---|---|---|"]
    for who, us in sorted(lat.items()):
        us.sort()
        n = len(us)
        rows.append(f"| {who} | {n} | {us[n // 2]:.0f} us | {us[int(n * .9)]:.0f} us | {us[int(n * .99)]:.0f} us | "
                    f"{us[-1]:.0f} us | {100 * sum(x > 1000 for x in us) / n:.1f} % |")
    return rows


def main() -> int:
    import sys
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import tests.test_follow_vs_tail as t
    results: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    for i in range(ROUNDS):
        for case, name in CASES.items():
            res = _one(getattr(t, name), t)
            results[case].append(res)
            print(f"[{i + 1}/{ROUNDS}] {case}: watch {res['watch']}, logs -f {res['logs_f']}, tail -F {res['tail']}"
                  + (f"  (assertion: {res['failed']})" if res["failed"] else ""), flush=True)
    follow_cpu = [_follow_cpu_s(t, FOLLOW_CPU_S) for _ in range(3)]
    latency = _wake_latency_us(t, 3.0)
    ended = time.strftime("%H:%M UTC", time.gmtime())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(_report(results, started, ended, load0, os.getloadavg()[0], follow_cpu, latency))
    print(RESULTS.read_text())
    return 0


def _counts(runs: list[dict[str, Any]], who: str) -> str:
    lost = [r[who] for r in runs]
    return f"{sum(1 for n in lost if n)}/{len(lost)} runs lost any, {sum(lost)} lines in all, max {max(lost)}"


def _report(results: dict[str, list[dict[str, Any]]], started: str, ended: str, load0: float,
            load1: float, follow_cpu: list[tuple[float, float]], latency: dict[str, list[float]]) -> str:
    uname = platform.uname()
    out = [f"# dfctl's followers beside tail -F, {ROUNDS} runs of each case", "",
           f"{started} - {ended}; {uname.node}, {os.cpu_count()} cores, {uname.system} {uname.release}; "
           f"load average {load0:.1f} at the start, {load1:.1f} at the end.", "",
           "| case | tail -F | watch | logs -f | watch lost where tail -F lost 0 | logs -f lost where tail -F lost 0 |",
           "|---|---|---|---|---|---|"]
    for case, runs in results.items():
        clean = [r for r in runs if r["tail"] == 0]
        out.append(f"| {case} | {_counts(runs, 'tail')} | {_counts(runs, 'watch')} | {_counts(runs, 'logs_f')} | "
                   f"{sum(1 for r in clean if r['watch'])}/{len(clean)} | "
                   f"{sum(1 for r in clean if r['logs_f'])}/{len(clean)} |")
    live = results[LIVE]
    cpu = sorted(r["agents_cpu_s"] for r in live)
    out += ["", f"The host agents' CPU (both agents and their children) per live-writer run: median "
            f"{cpu[len(cpu) // 2]:.2f} s, max {cpu[-1]:.2f} s (the run is ~3.3 s of writing, the watch ticking "
            "every 0.1 s, logs -f polling once per 20 ms of writes).", "",
            f"Following alone ({FOLLOW_CPU_S:.0f} s of the writer at 370 lines/s, no request): the agent with its "
            "children " + ", ".join(f"{a:.2f}" for a, _ in follow_cpu) + " s of CPU; tail -F "
            + ", ".join(f"{b:.2f}" for _, b in follow_cpu) + " s.", ""]
    if latency:
        out += ["How soon after each write each follower read (perf trace, 3 s of the writer):", ""]
        out += _latency_rows(latency) + [""]
    fails = [(case, r["failed"]) for case, runs in results.items() for r in runs if r["failed"]]
    out.append(f"Runs whose test assertions failed: {len(fails)}" + "".join(f"\n- {c}: {f}" for c, f in fails[:10]))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
