"""Load run of `dfctl watch`: 64 runs on 8 rig hosts (8 real workloads per host in CT 200,
each writing a progress line and a metrics.jsonl row every 0.25 s), watched for 10 minutes
at a 1 s interval with GPUs (the rig's nvidia-smi stand-in).

Measured per tick: its duration, whether it was complete (every host answered within the
tick, every run `running`), the controller's RSS (psutil) and open fds (/proc/self/fd).
The claim: every tick completes, RSS is flat (last minute vs the first minute after
warm-up), no fd leaks. Figures go to bench/results/load.md and RELIABILITY.md quotes them.
Run: `python -m bench load` (root; the rig needs netns, sshd and LXC). Environment:
DFCTL_LOAD_HOSTS / DFCTL_LOAD_RUNS_PER_HOST / DFCTL_LOAD_SECONDS override 8 / 8 / 600.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from controller.playbook import TargetConfig, WatchConfig  # noqa: E402
from controller.store.runstore import RunRecord, RunStore  # noqa: E402
from controller.transport.factory import close_all  # noqa: E402
from controller.watch import Watch  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "load.md"

WORKLOAD = """
import json, os, time
step = 0
while True:
    step += 1
    print("[progress] step=%d loss=2.5 tok_per_s=21500.0 step_time_s=0.25" % step, flush=True)
    with open("metrics.jsonl", "a") as m:
        m.write(json.dumps({"step": step, "tok_per_s": 21500.0, "loss": 2.5, "time_s": time.time()}) + "\\n")
    time.sleep(0.25)
"""


@dataclass
class LoadStats:
    hosts: int
    runs: int
    duration_s: float
    interval_s: float
    ticks: int = 0
    incomplete_ticks: int = 0
    tick_s: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)
    incomplete_why: list[str] = field(default_factory=list)
    bytes_read: int = 0

    def window(self, values: list, first: bool, span_s: float = 60.0) -> list:
        """Values in the first (after warm-up) or last `span_s` of the run."""
        if not self.times_s:
            return []
        warm = self.times_s[0] + min(30.0, self.duration_s / 4)
        if first:
            return [v for t, v in zip(self.times_s, values) if warm <= t < warm + span_s] or values[:1]
        end = self.times_s[-1]
        return [v for t, v in zip(self.times_s, values) if t > end - span_s] or values[-1:]

    def summary(self) -> dict:
        first_rss = statistics.median(self.window(self.rss_mib, True))
        last_rss = statistics.median(self.window(self.rss_mib, False))
        warm_fds = self.window(self.fds, True)
        after = [f for t, f in zip(self.times_s, self.fds) if t >= self.times_s[0] + min(30.0, self.duration_s / 4)]
        return {
            "hosts": self.hosts, "runs": self.runs, "duration_s": round(self.duration_s, 1),
            "ticks": self.ticks, "incomplete_ticks": self.incomplete_ticks,
            "tick_median_s": round(statistics.median(self.tick_s), 3),
            "tick_p99_s": round(sorted(self.tick_s)[int(0.99 * (len(self.tick_s) - 1))], 3),
            "tick_max_s": round(max(self.tick_s), 3),
            "rss_first_min_mib": round(first_rss, 1), "rss_last_min_mib": round(last_rss, 1),
            "rss_growth_mib": round(last_rss - first_rss, 1), "rss_max_mib": round(max(self.rss_mib), 1),
            "fds_after_warmup_min": min(after or warm_fds), "fds_after_warmup_max": max(after or warm_fds),
            "fd_growth": self.fd_growth(after or warm_fds), "log_kib_read": round(self.bytes_read / 1024, 1),
        }

    @staticmethod
    def fd_growth(after_warmup: list[int]) -> int:
        """A leak is a sustained climb: the median of the last third of the samples after
        warm-up minus the median of the first third. (Max minus min also counted a brief dip
        or rise -- an SSH channel being re-made, or a thread of an earlier test in the same
        pytest worker closing its pipes -- as growth, and failed 1 in ~4 full runs under xdist.)"""
        third = max(1, len(after_warmup) // 3)
        return round(statistics.median(after_warmup[-third:]) - statistics.median(after_warmup[:third]))


def launch_workloads(hosts, runs_per_host: int, tag: str) -> list[tuple]:
    """Start the workloads in each host's CT 200; returns (host, name, run_dir) per run."""
    from tests.test_watch_rig import launch_in_ct

    out = []
    for host in hosts:
        for i in range(runs_per_host):
            name = f"load-{tag}-{i}"
            out.append((host, name, launch_in_ct(host, name, WORKLOAD)))
    return out


def stop_workloads(runs) -> None:
    for host, _name, run_dir in runs:
        try:
            pid = (run_dir / "pid").read_text().strip()
            host.ct_exec(200, ["sh", "-c", f"kill -9 -{pid} 2>/dev/null; true"])
        except OSError:
            pass


def records_for(rig, runs, interval_s: float) -> list[RunRecord]:
    cfg = WatchConfig(interval_s=interval_s)
    recs = []
    for host, name, _ in runs:
        target = TargetConfig(kind="pct", host=host.name, vmid=200, ssh_config=str(rig.ssh_config_path),
                              known_hosts=str(rig.known_hosts_path), python=sys.executable, connect_timeout_s=5.0)
        recs.append(RunRecord(run_id=f"{host.name}-{name}", name=name, target_kind="pct",
                              target=f"pct 200 on {host.name}", host=host.name, vmid=200,
                              run_dir=f"/workspace/{name}", log_path=f"/workspace/{name}/train.log",
                              started_s=time.time(), playbook={"target": asdict(target), "watch": asdict(cfg)}))
    return recs


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def run_load(rig, *, hosts: int, runs_per_host: int, duration_s: float, interval_s: float = 1.0,
             registry: Path | None = None, progress=None) -> LoadStats:
    """Watch hosts x runs_per_host live runs for duration_s; returns the per-tick figures."""
    the_hosts = rig.ensure_hosts(hosts)[:hosts]
    tag = f"{os.getpid()}-{int(time.time())}"
    runs = launch_workloads(the_hosts, runs_per_host, tag)
    tmp = None
    if registry is None:
        tmp = tempfile.TemporaryDirectory(prefix="dfctl-load-")
        registry = Path(tmp.name) / "registry.sqlite"
    store = RunStore(registry)
    recs = records_for(rig, runs, interval_s)
    for r in recs:
        store.add_run(r)
    stats = LoadStats(hosts=hosts, runs=len(recs), duration_s=duration_s, interval_s=interval_s)
    counted = {"bytes": 0}

    def on_bytes(_rid, _off, data):
        counted["bytes"] += len(data)

    w = Watch(store.runs(), store, gpu=True, on_log_bytes=on_bytes, probe_timeout_s=10.0)
    me = psutil.Process()
    try:
        # warm up until every run is seen running (agents started, first reads done)
        end = time.monotonic() + 120
        while time.monotonic() < end and not all(s.state == "running" for s in w.states):
            w.tick()
            time.sleep(0.2)
        t_start = time.monotonic()
        next_at = t_start
        while time.monotonic() - t_start < duration_s:
            rep = w.tick()
            now = time.monotonic() - t_start
            stats.ticks += 1
            stats.tick_s.append(rep.duration_s)
            down = [h.host for h in rep.hosts if not h.reachable]
            not_running = [s.run_id for s in rep.states if s.state != "running"]
            pending = list(getattr(w, "_pending", {}))
            if down or not_running or pending:
                stats.incomplete_ticks += 1
                if len(stats.incomplete_why) < 20:
                    stats.incomplete_why.append(f"t={now:.0f}s down={down} not_running={not_running[:3]} "
                                                f"pending={pending}")
            stats.times_s.append(now)
            stats.rss_mib.append(me.memory_info().rss / 2**20)
            stats.fds.append(fd_count())
            if progress and stats.ticks % 60 == 0:
                progress(stats)
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))
        stats.duration_s = time.monotonic() - t_start
        stats.bytes_read = counted["bytes"]
    finally:
        w.close()
        store.close()
        close_all()
        stop_workloads(runs)
        if tmp is not None:
            tmp.cleanup()
    return stats


def machine() -> str:
    mem = psutil.virtual_memory().total / 2**30
    return (f"{platform.node()} ({platform.system()} {platform.release()}, {os.cpu_count()} cores, {mem:.0f} GiB, "
            f"Python {platform.python_version()})")


def write_results(stats: LoadStats, path: Path = RESULTS) -> dict:
    s = stats.summary()
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"| {k} | {v} |" for k, v in s.items())
    minutes = []
    for m in range(int(stats.duration_s // 60) + 1):
        sel = [(r, f, d) for t, r, f, d in zip(stats.times_s, stats.rss_mib, stats.fds, stats.tick_s)
               if m * 60 <= t < (m + 1) * 60]
        if sel:
            minutes.append(f"| {m} | {statistics.median(r for r, _, _ in sel):.1f} | {max(f for _, f, _ in sel)} | "
                           f"{statistics.median(d for _, _, d in sel):.3f} | {max(d for _, _, d in sel):.3f} |")
    why = "\n".join(f"- {w}" for w in stats.incomplete_why) or "- none"
    path.write_text(f"""# Load: `dfctl watch` over {s['runs']} runs on {s['hosts']} rig hosts

{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine()}; rig: netns + real sshd + real
LXC per host, pct and nvidia-smi stand-ins; each run a real Python workload in CT 200 writing a
progress line and a metrics row every 0.25 s; interval {stats.interval_s:g} s, GPUs on.
Machine shared with other jobs (2 cores), so tick times carry their noise.

| figure | value |
|---|---|
{rows}

Per minute (controller process):

| minute | RSS median MiB | fds max | tick median s | tick max s |
|---|---|---|---|---|
{chr(10).join(minutes)}

Incomplete ticks (a host late or down, or a run not `running`):
{why}
""")
    return s


def main() -> None:
    from tests.rig.rig import Rig

    hosts = int(os.environ.get("DFCTL_LOAD_HOSTS", "8"))
    per = int(os.environ.get("DFCTL_LOAD_RUNS_PER_HOST", "8"))
    seconds = float(os.environ.get("DFCTL_LOAD_SECONDS", "600"))
    rig = Rig.create(hosts=hosts)
    try:
        def progress(st: LoadStats) -> None:
            print(f"load: {st.times_s[-1]:.0f} s, {st.ticks} ticks ({st.incomplete_ticks} incomplete), "
                  f"RSS {st.rss_mib[-1]:.1f} MiB, fds {st.fds[-1]}, tick {st.tick_s[-1]:.3f} s", flush=True)

        stats = run_load(rig, hosts=hosts, runs_per_host=per, duration_s=seconds, progress=progress)
    finally:
        rig.close()
    s = write_results(stats)
    print(s)


if __name__ == "__main__":
    main()
