"""Multi-node deploy benchmark on the test rig: one release to 1, 2 and 4 nodes at once.

A [[nodes]] job's deploy reaches every node and pushes the bundle to each concurrently
(controller.ship.nodes.deploy_nodes: one thread and one tar stream per node), so its time should
stay near one node's. Side by side in one run, interleaved per repeat, on 4 fake hosts
(real sshd, real LXC CT 200 each, the pct stand-in), every case cold (new SSH connections,
as a fresh `dfctl deploy` process has) into a new workdir:
  * first deploy to 1, 2, 4 nodes (concurrent)
  * the same 4 nodes one after another (what a loop over single-node deploys costs)
  * unchanged redeploy to 4 nodes (nothing sent)
Figures go to bench/results/deploy_nodes.md.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results" / "deploy_nodes.md"
REPEATS = 5
SIZES = (1, 2, 4)


def _playbook(rig, n: int, workdir: str):
    from controller.playbook import parse_playbook

    nodes = "".join(f"""[[nodes]]
kind = "pct"
host = "{h.name}"
vmid = {h.vmid_running}
addr = "10.200.254.{10 * h.index}"
workdir = "{workdir}"
ssh_config = "{rig.ssh_config_path}"
""" for h in rig.hosts[:n])
    return parse_playbook(nodes + '[bundle]\npaths = ["trainer"]\n', "bench")


def _case(n: int) -> str:
    return f"{n} node{'s' if n > 1 else ''} at once"


def main() -> int:
    sys.path.insert(0, str(PROJECT))
    from controller.ship.bundle import build_bundle
    from controller.ship.deploy import deploy_bundle
    from controller.ship.nodes import deploy_nodes, open_nodes
    from controller.store.runstore import RunStore
    from controller.transport.factory import close_all
    from tests.rig.rig import Rig

    work = Path(tempfile.mkdtemp(prefix="dfctl-bench-nodes-"))
    shutil.copytree(PROJECT / "trainer", work / "trainer", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    store = RunStore(work / "registry.sqlite")
    rig = Rig.create(hosts=4)
    times: dict[str, list[float]] = {_case(n): [] for n in SIZES}
    times.update({"4 nodes one after another": [], "4 nodes unchanged": []})
    try:
        bundle = build_bundle(work, _playbook(rig, 1, "/w").bundle)

        def concurrent(n: int, workdir: str) -> float:
            close_all()
            nodes = open_nodes(_playbook(rig, n, workdir), work)
            t0 = time.perf_counter()
            deploy_nodes(nodes, build_bundle(work, nodes[0].playbook.bundle), store, check_live=True)
            return time.perf_counter() - t0

        for i in range(REPEATS):
            for n in SIZES:
                times[_case(n)].append(concurrent(n, f"/workspace/bench-nodes/n{n}-{i}"))
            times["4 nodes unchanged"].append(concurrent(4, f"/workspace/bench-nodes/n4-{i}"))
            close_all()
            nodes = open_nodes(_playbook(rig, 4, f"/workspace/bench-nodes/seq-{i}"), work)
            t0 = time.perf_counter()
            for n in nodes:
                deploy_bundle(n.transport, n.workdir, build_bundle(work, n.playbook.bundle))
            times["4 nodes one after another"].append(time.perf_counter() - t0)
        close_all()
    finally:
        rig.close()
        close_all()
        store.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    one = med[_case(1)]
    lines = [
        "# Multi-node deploy benchmark (bench/deploy_nodes.py)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
        f"load average {os.getloadavg()[0]:.1f} at the end (other jobs shared the machine)",
        "- rig: 4 fake hosts (real OpenSSH sshd each in its own network namespace, no added latency), real LXC "
        "CT 200 on each, pct stand-in",
        f"- bundle: trainer/ = {len(bundle.files)} files, {bundle.total_bytes} bytes; {REPEATS} repeats, cases "
        "interleaved in each repeat, median shown; every case cold (new SSH connections) into a new workdir",
        "- a job's deploy (controller.ship.nodes.deploy_nodes): per node, in one thread each, the live-run check "
        "(none in a new workdir: no run is known there), then the release probe + one tar-stream push + verify + switch",
        "",
        "| case | median s | vs 1 node | runs (s) |",
        "|---|---:|---:|---|",
    ]
    for k, v in times.items():
        lines.append(f"| {k} | {med[k]:.3f} | {med[k] / one:.2f}x | {', '.join(f'{x:.2f}' for x in v)} |")
    lines += [
        "",
        f"4 nodes at once cost {med[_case(4)] / one:.2f}x one node; one after another {med['4 nodes one after another'] / one:.2f}x. "
        "On this 2-core machine the 4 concurrent pushes share the CPUs (sshd, tar and sha256sum of every "
        "node run here), so the ratio is an upper bound; on real nodes the per-node work runs on each node.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
