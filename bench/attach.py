"""`dfctl scan` benchmark on the test rig: a node with 8 CTs x 4 training processes.

Side by side, in one run, on one fake host (real sshd, real LXC CTs, pct stand-in):
  * `dfctl scan` of the 8 CTs: ONE round trip (controller/probe/scan_remote.py on the node,
    each CT read through /proc/<CT init>/root) -- cold (a new SSH connection, as a fresh
    `dfctl` process has) and warm (the connection reused)
  * the seeds' way: one `ssh … pct exec <vmid> -- ps …` per CT, each a new OpenSSH process
  * the same `ps` per CT through dfctl's own reused connection (pct exec per CT), which
    separates the per-connection cost from the per-container exec cost
Every case must find all 32 processes (ps output counted, scan rows counted).
Figures go to bench/results/attach.md.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results" / "attach.md"
VMIDS = tuple(range(210, 218))
PER_CT = 4
REPEATS = 5

PROGRAM = ("import sys, time\n"
           "while True:\n"
           "    print('[progress] step=1', flush=True)\n"
           "    time.sleep(1)\n")


def _start_processes(host, python: str) -> None:
    for vmid in VMIDS:
        host.add_container(vmid)
        lines = ["mkdir -p /workspace/bench"]
        for i in range(PER_CT):
            d = f"/workspace/bench/run{i}"
            lines.append(f"mkdir -p {d}; printf %s {shlex.quote(PROGRAM)} > {d}/train.py; cd {d}; "
                         f"nohup {python} {d}/train.py --run {i} > {d}/train.log 2>&1 < /dev/null &")
        r = host.ct_exec(vmid, ["sh", "-c", "\n".join(lines)], timeout_s=60)
        assert r.returncode == 0, r.stderr


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    sys.path.insert(0, str(PROJECT))
    from bench.deploy import _cpu_model
    from controller.playbook import TargetConfig
    from controller.scan import scan_target
    from controller.transport.factory import close_all, open_host_transport
    from controller.transport.pct import PctTransport
    from tests.rig.rig import Rig

    python = os.path.realpath(sys.executable)
    rig = Rig.create(hosts=1)
    try:
        host = rig.hosts[0]
        _start_processes(host, python)
        target = TargetConfig(kind="pct", host=host.name, vmid=VMIDS[0], ssh_config=str(rig.ssh_config_path),
                              workdir="/var/tmp/dfctl")

        def scan_once() -> tuple[float, int, int]:
            t0 = time.perf_counter()
            report = scan_target(target, VMIDS)
            dt = time.perf_counter() - t0
            found = sum(1 for p in report.processes if "/workspace/bench/run" in " ".join(p.argv))
            return dt, found, report.round_trips

        deadline = time.monotonic() + 60
        while scan_once()[1] < len(VMIDS) * PER_CT:     # every process started
            assert time.monotonic() < deadline, "not all 32 processes came up"
            time.sleep(0.2)
        cold, warm, seeds, reused = [], [], [], []
        for _ in range(REPEATS):
            close_all()
            dt, found, trips = scan_once()
            assert found == len(VMIDS) * PER_CT and trips == 1
            cold.append(dt)
            dt, found, _ = scan_once()
            assert found == len(VMIDS) * PER_CT
            warm.append(dt)
            t0 = time.perf_counter()
            n = 0
            for vmid in VMIDS:
                r = subprocess.run(host.ssh_argv("pct", "exec", str(vmid), "--", "ps", "-eo",
                                                 "pid,user,lstart,pcpu,rss,args"),
                                   capture_output=True, text=True, timeout=60)
                n += r.stdout.count("/workspace/bench/run")
            seeds.append(time.perf_counter() - t0)
            assert n == len(VMIDS) * PER_CT, n
            node = open_host_transport(target)
            t0 = time.perf_counter()
            n = 0
            for vmid in VMIDS:
                r = PctTransport(node, vmid).run(["ps", "-eo", "pid,user,lstart,pcpu,rss,args"], timeout_s=60)
                n += r.stdout_text.count("/workspace/bench/run")
            reused.append(time.perf_counter() - t0)
            assert n == len(VMIDS) * PER_CT, n
        close_all()
    finally:
        rig.close()
        close_all()
    load = os.getloadavg()[0]
    lines = [
        "# `dfctl scan`: 8 CTs x 4 processes (bench/attach.py)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {os.cpu_count()} cores, {_cpu_model()}; load average {load:.1f} during the run "
        "(other jobs shared the machine)",
        "- rig: one fake node (real OpenSSH sshd in a network namespace, no added latency), 8 real LXC CTs, "
        "4 Python processes each writing a log; pct stand-in",
        f"- {REPEATS} repeats, median shown; every case found all 32 processes",
        "",
        "| case | round trips | median s |",
        "|---|---:|---:|",
        f"| `dfctl scan` of the 8 CTs, cold (new SSH connection) | 1 | {_median(cold):.3f} |",
        f"| `dfctl scan`, warm (connection reused) | 1 | {_median(warm):.3f} |",
        f"| seeds' way: `ssh … pct exec <vmid> -- ps …` per CT (8 OpenSSH processes) | 8 | {_median(seeds):.3f} |",
        f"| `pct exec … ps` per CT over one reused connection | 8 | {_median(reused):.3f} |",
        "",
        f"Seeds' way / scan (cold): **{_median(seeds) / _median(cold):.1f}x**; per-CT exec over a reused "
        f"connection / scan (warm): {_median(reused) / _median(warm):.1f}x. The scan also reads what `ps` "
        "cannot give: each process's stdout/stderr targets, open log, metrics.jsonl and wandb files, "
        "PYTHONUNBUFFERED (one fact), GPUs. On a real node each `pct exec` adds pct's Perl start-up and "
        "each connection a network round trip, which the scan pays once.",
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
