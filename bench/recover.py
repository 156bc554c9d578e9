"""Recovery benchmark (issue 25): death -> resumed run's first step, on the local target.

The real bundled trainer on CPU (tests/recover_support.py's playbook: tiny, a checkpoint a step), deployed with a
[recover] playbook and watched by a real `dfctl watch RUN --recover --interval 0.5`
process. Once the run has a checkpoint its training process is killed with SIGKILL; then:
  * death -> action: the watch's resume action (its registry actions row) after the kill
  * death -> first step: the resumed run's first metrics.jsonl record after the kill
  * of which start-up: the resumed run's first step after its own launch (python, torch,
    dataset, checkpoint load: the trainer's part, not the controller's)
REPEATS kills, each in a fresh workdir and registry. Figures go to bench/results/recover.md
and the raw numbers to bench/results/recover.json.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from controller.store.runstore import RunRecord, RunStore
from tests.deploy_support import wait_for
from tests.recover_support import INTERVAL_S, first_progress, kill_every_run_in, trainer_project

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results"
REPEATS = 3

RECOVER = '[recover]\non = ["crash", "oom"]\nbackoff_s = 0\n'
"""The benches' policy: a crash or an OOM resumed at once (bench/recover_move.py adds its targets)."""


@dataclass
class Kill:
    """One kill -9 of a deployed run's training process and what the watch did about it."""

    root: Path                 # the project (its checkout; B's workdir lies under it)
    died_s: float              # time.time() just after the SIGKILL
    checkpoint: Path           # the run's newest checkpoint at the kill
    action: dict               # the registry's first resume or give_up row of the run
    resumed: RunRecord | None  # the run that action launched (None: gave up)
    first: tuple[int, float] | None   # (step, time_s) of the resumed run's first metrics record
    started_s: float | None    # the resumed run's launch.json started_s


def kill_once(tmp: Path, recover: str, *, after_deploy: Callable[[Path], None] = lambda root: None) -> Kill:
    """The CPU trainer (tests/recover_support.py's playbook with `recover`) deployed in a fresh
    project and registry under `tmp` by a `dfctl deploy` process, `after_deploy(root)` run,
    then watched by a `dfctl watch RUN --recover` process; its training process SIGKILLed once
    a checkpoint exists; waited for until the resumed run's first step (or the give-up)."""
    root = tmp / "proj"
    trainer_project(root, recover, name="bench-recover")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "DFCTL_HOME": str(tmp / "home")}
    env.pop("WANDB_API_KEY", None)
    out = subprocess.run([sys.executable, "-m", "controller", "deploy", "pb.toml", "--json"], cwd=root, env=env,
                         capture_output=True, text=True, check=True).stdout
    run = json.loads(out)["run"]
    after_deploy(root)
    watch = subprocess.Popen([sys.executable, "-m", "controller", "watch", run["run_id"], "--recover", "--interval",
                              str(INTERVAL_S), "--json"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        cks = wait_for(lambda: sorted((Path(run["run_dir"]) / "checkpoints").glob("step-*.pt")), 300, what="a checkpoint")
        trainer_pid = json.loads((Path(run["run_dir"]) / "launch.json").read_text())["trainer_pid"]
        os.kill(trainer_pid, signal.SIGKILL)
        died_s = time.time()
        store = RunStore(tmp / "home" / "registry.sqlite")
        try:
            act = wait_for(lambda: [a for a in store.actions(run["run_id"]) if a["action"] in ("resume", "give_up")],
                           120, what="the resume")[0]
            nxt = store.successor(run["run_id"]) if act["action"] == "resume" else None
            first = started_s = None
            if nxt is not None:
                first = wait_for(lambda: first_progress(nxt.run_dir), 300, what="the resumed run's first step")
                started_s = json.loads((Path(nxt.run_dir) / "launch.json").read_text())["started_s"]
        finally:
            store.close()
        return Kill(root, died_s, cks[-1], act, nxt, first, started_s)
    finally:
        watch.send_signal(signal.SIGTERM)
        watch.wait(30)
        kill_every_run_in(Path(run["run_dir"]).parent, root / "wd-b" / "runs")


def once(tmp: Path) -> dict:
    k = kill_once(tmp, RECOVER)
    if k.resumed is None or k.first is None or k.started_s is None:
        raise RuntimeError(k.action["reason"])
    return {"death_to_action_s": k.action["time_s"] - k.died_s, "death_to_first_step_s": k.first[1] - k.died_s,
            "startup_s": k.first[1] - k.started_s, "first_step": k.first[0]}


def main() -> int:
    rows = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory(prefix="dfctl-bench-recover-") as tmp:
            rows.append(once(Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()})"
    (RESULTS / "recover.json").write_text(json.dumps({"measured": stamp, "machine": machine, "interval_s": INTERVAL_S,
                                                      "runs": rows}, indent=1) + "\n")
    lines = [
        "# Recovery: kill -9 -> resumed run's first step (bench/recover.py)", "",
        f"{stamp}, {machine}, shared with other jobs while measured. The real trainer on CPU (tiny, "
        f"--checkpoint-every 1), `dfctl watch --recover --interval {INTERVAL_S:g}` as its own process; "
        f"the training process SIGKILLed once a checkpoint exists; {REPEATS} kills, each in a fresh workdir.", "",
        "| | median | each |", "|---|---|---|",
        f"| death -> resume action | {med('death_to_action_s'):.2f} s | "
        + ", ".join(f"{r['death_to_action_s']:.2f}" for r in rows) + " |",
        f"| death -> resumed run's first step | {med('death_to_first_step_s'):.2f} s | "
        + ", ".join(f"{r['death_to_first_step_s']:.2f}" for r in rows) + " |",
        f"| of which the resumed run's start-up (launch -> first step) | {med('startup_s'):.2f} s | "
        + ", ".join(f"{r['startup_s']:.2f}" for r in rows) + " |", "",
        "The resumed run's first step is the checkpoint's step + 1 every time "
        f"({', '.join(str(r['first_step']) for r in rows)}). The controller's share is the action "
        "(one tick to see the death, then the launch exec); the rest is the trainer starting "
        "(python + torch import, dataset, checkpoint load) on a loaded 2-core machine.",
    ]
    (RESULTS / "recover.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
