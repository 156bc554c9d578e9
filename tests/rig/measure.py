"""Time the rig itself: set-up of 2 and 8 hosts, ssh and pct exec costs, teardown.

    .venv/bin/python -m tests.rig.measure      (prints one markdown table row set)

Not a test: figures depend on the machine's load; bench/results/rig.md keeps a dated run.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import time

from tests.rig.rig import Rig


def median_s(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    started = time.perf_counter()
    rig = Rig.create(hosts=2)
    two_s = time.perf_counter() - started
    try:
        h = rig.hosts[0]
        ssh_true = median_s(lambda: subprocess.run(h.ssh_argv("true"), check=True))
        ssh_pct = median_s(lambda: subprocess.run(h.ssh_argv(shlex.join(["pct", "exec", "200", "--", "true"])),
                                                  check=True))
        host_pct = median_s(lambda: h.host_exec(["pct", "exec", "200", "--", "true"], check=True))
        host_push = median_s(lambda: h.host_exec(["pct", "push", "200", "/etc/hostname", "/workspace/x"],
                                                 check=True))
        smi = median_s(lambda: h.host_exec(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv"], check=True))
        started = time.perf_counter()
        rig.ensure_hosts(8)
        six_more_s = time.perf_counter() - started
    finally:
        started = time.perf_counter()
        rig.close()
        teardown_s = time.perf_counter() - started
    load = os.getloadavg()[0]
    print(f"| backend | {rig.backend} |\n| load average (1 min) at end | {load:.1f} |")
    for name, value in [("2 hosts ready (cold, incl. stale check)", two_s), ("+6 hosts (to 8)", six_more_s),
                        ("teardown of 8 hosts", teardown_s), ("ssh rig-hostN true (new connection)", ssh_true),
                        ("ssh … pct exec 200 -- true", ssh_pct), ("pct exec 200 -- true on the host", host_pct),
                        ("pct push (one small file) on the host", host_push),
                        ("nvidia-smi stand-in query", smi)]:
        print(f"| {name} | {value * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
