"""Helpers shared by the deploy-area tests: a tiny project with a real Python program that
writes a growing log (a stand-in for the trainer only where the trainer is not the point),
and polling with deadlines (no fixed sleeps)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

TICKER = '''"""A real program that writes a growing log until --steps ticks are done."""
import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--run-dir", required=True)
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--interval-s", type=float, default=0.05)
p.add_argument("--exit-code", type=int, default=0)
a = p.parse_args()
print("started cwd=%s run_dir=%s has_key=%s" % (os.getcwd(), a.run_dir, bool(os.environ.get("WANDB_API_KEY"))))
for i in range(a.steps):
    print("[progress] step=%d" % i)
    time.sleep(a.interval_s)
print("done")
sys.exit(a.exit_code)
'''


def make_project(root: Path, *, git: bool = True, extra_files: dict[str, bytes] | None = None) -> Path:
    """A project with ticker/ (the program), a .gitignore, and optionally a git repo."""
    (root / "ticker").mkdir(parents=True, exist_ok=True)
    (root / "ticker" / "__init__.py").write_text("")
    (root / "ticker" / "__main__.py").write_text(TICKER)
    (root / ".gitignore").write_text("*.log\n/data/\n")
    for rel, data in (extra_files or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if git:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t"}
        subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "init"], check=True, env=env)
    return root


def ticker_playbook(root: Path, *, kind: str = "local", extra_target: str = "", args: str = '"--steps", "100000"',
                    name: str = "tick", env: str = "{ WANDB_MODE = \"offline\" }", paths: str = '["ticker"]',
                    extra_run: str = "") -> Path:
    pb = root / "pb.toml"
    pb.write_text(f"""
[target]
kind = "{kind}"
{extra_target}
[bundle]
paths = {paths}
[run]
name = "{name}"
module = "ticker"
args = ["--run-dir", "{{run_dir}}", {args}]
env = {env}
{extra_run}
""")
    return pb


def only_error_doc(out: str, code: int) -> bool:
    """stdout of a command that failed: nothing, or (with --json) exactly one
    `{"error": {"code": N, ...}}` document with its exit code -- no half result."""
    if out == "":
        return True
    import json

    lines = out.splitlines()
    if len(lines) != 1:
        return False
    doc = json.loads(lines[0])
    return set(doc) == {"error"} and doc["error"]["code"] == code


def wait_for(cond: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.05, what: str = "condition") -> T:
    """Poll cond() until it returns something truthy; fail with `what` after timeout_s."""
    end = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def all_cmdlines() -> list[bytes]:
    """Every /proc/*/cmdline readable on this machine (the rig's containers share the pid table)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    out.append(fh.read())
            except OSError:
                pass
    return out


def live_processes_of_run(run_id: str) -> list[tuple[int, int]]:
    """(pid, session id) of every live (not zombie) process whose environment names the run
    (DFCTL_RUN_ID, which the launcher sets and every child inherits)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = open(f"/proc/{name}/environ", "rb").read()
            raw = open(f"/proc/{name}/stat", "rb").read().decode(errors="replace")
        except OSError:
            continue
        f = raw[raw.rfind(")") + 2:].split()
        if f[0] not in ("Z", "X") and f"DFCTL_RUN_ID={run_id}".encode() in env.split(b"\0"):
            out.append((int(name), int(f[3])))
    return out


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session or process group is sid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = open(f"/proc/{name}/stat", "rb").read().decode(errors="replace")
        except OSError:
            continue
        f = raw[raw.rfind(")") + 2:].split()
        if f[0] != "Z" and (int(f[2]) == sid or int(f[3]) == sid):
            out.append(int(name))
    return out


# A deploy run in a child process so a test can SIGKILL "the controller" mid-transfer.
# Each MiB sent is followed by a pause, so the kill lands while the stream is flowing.
SLOW_DEPLOY = r'''
import sys, time
from controller.playbook import load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.transport.factory import open_transport
pb = load_playbook(sys.argv[1]); root = sys.argv[2]
b = build_bundle(root, pb.bundle)
def slow(done, total):
    print("progress", done, total, flush=True)
    time.sleep(0.3)
deploy_bundle(open_transport(pb.target), resolve_workdir(pb.target, root), b, on_progress=slow)
print("finished", flush=True)
'''


def dfctl(capsys, *argv: str) -> tuple[int, str, str]:
    """The real CLI in-process: (exit code, stdout, stderr); cached connections closed after,
    so each call starts like a fresh `dfctl` process."""
    from controller.cli import main
    from controller.transport.factory import close_all

    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        close_all()
    out, err = capsys.readouterr()
    return code, out, err


# A real `dfctl deploy` in a child process that, once its early live-run check has passed
# (no run alive), writes <barrier>/ready-<tag> and waits for <barrier>/go: N of them let go
# at once all believe the target free -- the race of two operators deploying the same
# playbook at the same moment, made certain instead of likely.
BARRIER_DEPLOY = r'''
import os, sys, time
import controller.ship.plan as plan
barrier, tag = sys.argv[1], sys.argv[2]
real = plan.live_runs
def live_runs(*a, **k):
    live = real(*a, **k)
    open(os.path.join(barrier, "ready-" + tag), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.02)
    return live
plan.live_runs = live_runs
from controller.cli import main
main(sys.argv[3:])
'''


def race_deploys(n: int, playbook: Path, cwd: Path, barrier: Path, timeout_s: float = 240.0) -> list[tuple[int, str, str]]:
    """n `dfctl deploy PLAYBOOK --json` children let go together past their live-run check;
    (exit code, stdout, stderr) of each."""
    barrier.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    children = [subprocess.Popen([sys.executable, "-c", BARRIER_DEPLOY, str(barrier), str(i), "deploy", str(playbook),
                                  "--json"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for i in range(n)]
    try:
        wait_for(lambda: len(list(barrier.glob("ready-*"))) == n or any(c.poll() is not None for c in children),
                 timeout_s=timeout_s, what=f"{n} deploys past their live-run check")
        (barrier / "go").write_text("")
        outs = [c.communicate(timeout=timeout_s) for c in children]
        return [(c.returncode, out, err) for c, (out, err) in zip(children, outs)]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
