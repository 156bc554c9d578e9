"""The seeds' problem, reproduced with the real trainer in a real (rig) container: launched
the seeds' way (`nohup python -m trainer … > log`, no -u, no PYTHONUNBUFFERED) its log stays
stale while metrics.jsonl advances, and `dfctl watch` says so; with PYTHONUNBUFFERED=1 (what
`dfctl deploy` sets) the same trainer's log is live and nothing is flagged."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from controller.watch import Watch
from tests.deploy_support import wait_for
from tests.test_watch_rig import ct_record

ROOT = Path(__file__).resolve().parents[1]


def launch_trainer_in_ct(host, name: str, *, unbuffered: bool) -> Path:
    run_dir = host.workspace_dir / name
    run_dir.mkdir(parents=True, exist_ok=True)
    env = f"PYTHONPATH={ROOT} WANDB_MODE=disabled OMP_NUM_THREADS=1" + (" PYTHONUNBUFFERED=1" if unbuffered else "")
    args = (f"-m trainer --config tiny --data /workspace/{name}/data --synthetic-samples 600 "
            f"--run-dir /workspace/{name} --steps 400 --log-every 2")
    inner = f"echo $$ > pid; {env} {sys.executable} {args} > train.log 2>&1; echo $? > exit_code"
    r = host.ct_exec(200, ["sh", "-c", f"cd /workspace/{name}; setsid nohup sh -c '{inner}' </dev/null >/dev/null 2>&1 &"])
    assert r.returncode == 0, r.stderr
    wait_for(lambda: (run_dir / "pid").exists(), timeout_s=30, what="run started in CT")
    return run_dir


@pytest.mark.rig
def test_real_trainer_launched_the_seeds_way_is_flagged_stale_and_unbuffered_is_not(rig, rig_host, tmp_path):
    host = rig_host
    seeds_way = launch_trainer_in_ct(host, "seeds-way", unbuffered=False)
    dfctl_way = launch_trainer_in_ct(host, "unbuffered", unbuffered=True)
    store = RunStore(tmp_path / "reg.sqlite")
    try:
        for name in ("seeds-way", "unbuffered"):
            store.add_run(ct_record(rig, host, name, stale_log_s=6.0))
        w = Watch(store.runs(), store, gpu=False)
        by_name = {s.name: s for s in w.states}
        stale, live = by_name["seeds-way"], by_name["unbuffered"]
        deadline = time.monotonic() + 150
        live_since = None             # when the unbuffered run's first progress line was read
        # one loop for both: until the seeds' way is flagged AND the unbuffered run has been
        # read for longer than its own 6 s threshold (so "never stale" means something)
        while not (any(f.kind == "stale_log" for f in stale.findings)
                   and live_since is not None and time.monotonic() - live_since > 6.0 + 1.5):
            assert time.monotonic() < deadline, f"no stale_log: {[f.kind for f in stale.findings]}, log {stale.log.size_bytes}"
            w.tick()
            if live_since is None and live.progress:
                live_since, size0 = time.monotonic(), live.log.size_bytes or 0
            time.sleep(0.5)
        (f,) = [f for f in stale.findings if f.kind == "stale_log"]
        assert "PYTHONUNBUFFERED" in f.hint
        assert stale.progress and all(p.source == "metrics" for p in stale.progress)   # metrics advanced
        # the same trainer with PYTHONUNBUFFERED=1: its log grew line by line, never stale
        assert (live.log.size_bytes or 0) > size0 and live.progress
        assert (dfctl_way / "train.log").read_text().count("[progress]") >= 2
        assert (seeds_way / "train.log").read_text().count("[progress]") == 0   # still in Python's buffer
        assert not any(f.kind == "stale_log" for f in live.findings)
        w.close()
    finally:
        for d in (seeds_way, dfctl_way):
            pid = (d / "pid").read_text().strip()
            host.ct_exec(200, ["sh", "-c", f"kill -9 -{pid} 2>/dev/null; true"])
