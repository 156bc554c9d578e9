"""Helpers for the recovery tests: a tiny resumable program (a stand-in for the trainer
where the trainer is not the point -- the lock and chain tests; tests/test_recover_local.py
runs the real trainer), a deployed project, a previous run that died, and `dfctl watch
--recover` as a real process (Watcher).

The program keeps the bundled trainer's checkpoint layout (checkpoints/step-N.pt, a
`latest` pointer, written by rename) so the target's launcher finds its checkpoints as it
finds the trainer's."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

from controller.act.executor import Recoverer
from controller.playbook import Playbook, load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.ship.launch import LaunchedRun, launch_registered, launch_spec
from controller.store.runstore import RunStore
from controller.transport.local import LocalTransport
from controller.watch import Watch
from tests.deploy_support import make_project, wait_for

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 0.5
"""The recovery tests' watch interval."""

RESUMABLE = '''"""A resumable counter: --resume-from DIR_OR_FILE continues at the saved step."""
import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--run-dir", required=True)
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--interval-s", type=float, default=0.05)
p.add_argument("--checkpoint-every", type=int, default=5)
p.add_argument("--token-budget", type=int, default=64)
p.add_argument("--resume-from", default=None)
p.add_argument("--hang-after", type=int, default=0)
a = p.parse_args()
start = 0
if a.resume_from:
    src = a.resume_from
    if os.path.isdir(src):
        src = os.path.join(src, "checkpoints", open(os.path.join(src, "checkpoints", "latest")).read().strip())
    start = int(open(src).read())
    print("resume: %s step=%d" % (src, start))
print("[milestone] first_step token_budget=%d" % a.token_budget, flush=True)
cdir = os.path.join(a.run_dir, "checkpoints")
os.makedirs(cdir, exist_ok=True)
for step in range(start + 1, a.steps + 1):
    time.sleep(a.interval_s)
    print("[progress] step=%d loss=%.4f" % (step, 10.0 / step), flush=True)
    if a.hang_after and step == a.hang_after:
        time.sleep(3600)      # a hang: alive, silent, idle
    if step % a.checkpoint_every == 0:
        path = os.path.join(cdir, "step-%08d.pt" % step)
        open(path + ".tmp", "w").write(str(step))
        os.replace(path + ".tmp", path)
        open(os.path.join(cdir, "latest.tmp"), "w").write(os.path.basename(path) + "\\n")
        os.replace(os.path.join(cdir, "latest.tmp"), os.path.join(cdir, "latest"))
print("done")
'''


def resumable_project(root: Path, *, recover: str = "", args: str = '"--steps", "100000"',
                      target: str = 'kind = "local"', run_extra: str = "") -> tuple[Path, Playbook]:
    """A project with resumable/ and its playbook (pb.toml) for `target` (the [target]
    table's body), `run_extra` added to [run], `recover` appended raw."""
    make_project(root, git=False, extra_files={"resumable/__init__.py": b"",
                                                "resumable/__main__.py": RESUMABLE.encode()})
    pb = root / "pb.toml"
    pb.write_text(f"""
[target]
{target}
[bundle]
paths = ["resumable"]
[run]
name = "res"
module = "resumable"
args = ["--run-dir", "{{run_dir}}", "--token-budget", "64", {args}]
env = {{ WANDB_MODE = "disabled" }}
{run_extra}
[watch]
interval_s = 0.2
{recover}
""")
    return root, load_playbook(pb)


TRAINER_ARGS = ('"--config", "tiny", "--data", "{workdir}/data/synth", "--synthetic-samples", "300", '
                '"--run-dir", "{run_dir}", "--steps", "100000", "--log-every", "1", "--checkpoint-every", "1", '
                '"--device", "cpu", "--prefetch-workers", "1", "--token-budget", "2048"')
"""The CPU trainer's args in every recovery test and bench: tiny, a checkpoint every step
(a kill finds one a step after the first; a resume continues at the saved step + 1 all the
same), the tiny preset's own token budget written out (an OOM change halves it to 1024)."""


def trainer_playbook(path: Path, recover: str, *, target: str = 'kind = "local"', name: str = "rec",
                     run_extra: str = "") -> Path:
    """The bundled trainer on CPU as a playbook at `path` for `target` (the [target] table's
    body), `run_extra` added to [run], `recover` appended raw: the one recipe the recovery
    tests (local, move, rig) and bench/recover*.py share."""
    path.write_text(f"""[target]
{target}
[bundle]
paths = ["trainer"]
[run]
name = "{name}"
module = "trainer"
args = [{TRAINER_ARGS}]
env = {{ WANDB_MODE = "disabled", OMP_NUM_THREADS = "1" }}
stop_grace_s = 60
{run_extra}
[watch]
interval_s = {INTERVAL_S}
{recover}
""")
    return path


def trainer_project(root: Path, recover: str, *, name: str = "rec") -> Path:
    """A project holding a copy of the bundled trainer and its CPU playbook (pb.toml, local
    target) with `recover`."""
    make_project(root, git=False)
    shutil.copytree(ROOT / "trainer", root / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    return trainer_playbook(root / "pb.toml", recover, name=name)


def first_progress(run_dir: str) -> tuple[int, float] | None:
    """(step, time_s) of the run's first metrics.jsonl record."""
    p = Path(run_dir) / "metrics.jsonl"
    if not p.exists():
        return None
    line = p.read_text().split("\n", 1)[0]
    if not line.endswith("}"):
        return None
    doc = json.loads(line)
    return doc["step"], doc["time_s"]


def deploy_and_launch(root: Path, pb: Playbook, store: RunStore) -> LaunchedRun:
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    return launch_registered(store, t, pb, workdir, launch_spec(pb, workdir), git_commit=None, git_dirty=None)


def checkpoints(run_dir: str) -> list[str]:
    d = Path(run_dir) / "checkpoints"
    return sorted(p.name for p in d.glob("step-*.pt")) if d.is_dir() else []


def kill_group(run: LaunchedRun) -> None:
    """kill -9 of the run's whole process group: wrapper and program die at once, no exit code."""
    os.killpg(run.pid, signal.SIGKILL)
    wait_for(lambda: not _alive(run.pid), what=f"pid {run.pid} gone")


def kill_trainer(run: LaunchedRun) -> None:
    """kill -9 of the training process alone (launch.json's trainer_pid): its wrapper records
    exit 137, as after the kernel's OOM killer or an operator's kill -9 of the trainer."""
    os.kill(int(run.info["trainer_pid"]), signal.SIGKILL)
    wait_for(lambda: os.path.exists(os.path.join(run.run_dir, "exit_code")), what="the wrapper's exit_code")


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def watch_until(w: Watch, rec: Recoverer | None, cond: Callable[[], T], timeout_s: float, what: str) -> T:
    """Tick the watch on its own schedule (and, given `rec`, its recovery step after each
    tick) until cond() holds; fail naming `what` after timeout_s."""
    end = time.monotonic() + timeout_s
    for _ in w.ticks():
        w.tick()
        if rec is not None:
            rec.after_tick(w)
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            break
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class Watcher:
    """`dfctl watch RUN --recover` as a real process; its stdout lines collected as they come."""

    def __init__(self, run_id: str, *extra: str, env: dict[str, str] | None = None):
        env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "controller", "watch", run_id, "--recover",
                                      "--interval", str(INTERVAL_S), *extra], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.seen_s: list[float] = []          # when each line came (time.time())
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen_s.append(time.time())
            self.lines.append(line.rstrip("\n"))

    def saw(self, pattern: str, *, after_s: float = float("-inf")) -> str | None:
        """The first line matching `pattern` that came after `after_s` (time.time())."""
        rx = re.compile(pattern)
        seen = list(zip(list(self.seen_s), list(self.lines)))
        return next((ln for t, ln in seen if t > after_s and rx.search(ln)), None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def kill_every_run_in(*runs_dirs: Path) -> None:
    """A test's cleanup: SIGKILL the process group of every run in these runs/ folders (a
    run and the resumes made of it, here or on a move's target), whichever are still
    alive; a folder that was never made is skipped."""
    for parent in runs_dirs:
        for d in parent.iterdir() if parent.is_dir() else []:
            pid = (d / "pid").read_text().strip() if (d / "pid").exists() else ""
            if pid:
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def kill_every_run_beside(run_dir: str) -> None:
    """kill_every_run_in the runs/ folder of run_dir (the run and the resumes made of it there)."""
    kill_every_run_in(Path(run_dir).parent)
