"""Make the multi-node job fixtures: real torchrun, two "nodes" on this machine.

    .venv/bin/python tests/corpus/jobs/generate.py [--only NAME ...]

Each scenario runs two torchrun processes -- `--nnodes 2 --node-rank 0|1 --nproc-per-node
2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT` -- each with its own log (stdout
and stderr together, unbuffered, as dfctl launches a node), over job_worker.py with gloo.
The logs go to <name>/node0.log and node1.log; index.json keeps the command, which global
ranks each node got (c10d's rendezvous assigns them, not --node-rank; the workers say so
in a side file, never in the log) and the failure: the rank, its node, what happened. The
checkout's path is replaced by /src; nothing else is edited.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
INDEX = HERE / "index.json"

SCENARIOS = {
    # name: (mode, bad global rank, extra torchrun args, what the reader must name)
    "sigkill-rank3": ("sigkill", 3, [], "signal"),
    "oom-rank1": ("oom", 1, [], "oom"),
    "hang-rank2": ("hang", 2, [], "timeout"),
    "restart-rank2": ("restart", 2, ["--max-restarts", "1"], None),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(node: int, port: int, mode: str, bad: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
            "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", "fixture-job", *extra, str(HERE / "job_worker.py"), mode, "--bad-rank", str(bad)]


def run_scenario(name: str) -> dict:
    mode, bad, extra, kind = SCENARIOS[name]
    out = HERE / name
    out.mkdir(exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory() as truth:
        procs = []
        for node in (0, 1):
            env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", JOB_TRUTH_DIR=truth,
                       JOB_NODE=str(node))
            log = open(out / f"node{node}.log", "wb")
            procs.append((subprocess.Popen(torchrun_argv(node, port, mode, bad, extra), stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                           cwd=ROOT), log))
        codes = []
        for p, log in procs:
            codes.append(p.wait(timeout=180))
            log.close()
        ranks: dict[str, list[int]] = {"0": [], "1": []}
        for f in sorted(Path(truth).iterdir()):
            node, rank = f.name.split("-")
            ranks[node[4:]].append(int(rank[4:]))
    venv_root = Path(sys.prefix).resolve().parent      # .venv may be a link into another checkout
    for node in (0, 1):
        p = out / f"node{node}.log"
        p.write_bytes(p.read_bytes().replace(str(venv_root).encode(), b"/src").replace(str(ROOT).encode(), b"/src"))
    ranks = {k: sorted(set(v)) for k, v in ranks.items()}
    bad_node = next(int(k) for k, v in ranks.items() if bad in v)
    cmd = " ".join(torchrun_argv(0, port, mode, bad, extra)).replace(str(ROOT), "/src").replace(sys.executable, "python")
    return {"name": name, "command": cmd + "   (and --node-rank 1 in a second process)", "exit_codes": codes,
            "node_ranks": ranks, "first": {"rank": bad, "node": bad_node, "kind": kind} if kind else None,
            "restarted": "--max-restarts" in extra}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    index = {e["name"]: e for e in json.loads(INDEX.read_text())} if INDEX.exists() else {}
    for name in args.only or list(SCENARIOS):
        index[name] = run_scenario(name)
        print(name, index[name]["exit_codes"], index[name]["node_ranks"], flush=True)
    INDEX.write_text(json.dumps([index[k] for k in sorted(index)], indent=1) + "\n")


if __name__ == "__main__":
    main()
