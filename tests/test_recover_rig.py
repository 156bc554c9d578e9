"""Recovery on the rig (real sshd, real LXC CT 200, pct stand-in): the bundled trainer
deployed into the CT with a [recover] playbook, `dfctl watch --recover` as its own process;
the training process killed with SIGKILL resumes by itself as a new linked run in the CT,
from its checkpoint, with the same release; `runs` shows the chain."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from tests.deploy_support import dfctl, wait_for
from tests.recover_support import Watcher
from tests.test_deploy_rig import PROJECT, live_pids_of_run, target_toml

pytestmark = pytest.mark.rig


def _first_step(path: Path) -> int | None:
    if not path.exists():
        return None
    line = path.read_text().split("\n", 1)[0]
    return json.loads(line)["step"] if line.endswith("}") else None


def test_a_crashed_run_in_a_ct_resumes_by_itself(rig, rig_host, tmp_path, capsys, monkeypatch):
    workdir = f"/workspace/dfctl-recover-{os.getpid()}"
    pb = tmp_path / "ct200.toml"
    pb.write_text(f"""[target]
{target_toml(rig, rig_host, workdir)}
[bundle]
paths = ["trainer"]
[run]
name = "rig-rec"
module = "trainer"
args = ["--config", "tiny", "--data", "{{workdir}}/data/synth", "--synthetic-samples", "300",
        "--run-dir", "{{run_dir}}", "--steps", "100000", "--log-every", "1", "--checkpoint-every", "5",
        "--device", "cpu", "--prefetch-workers", "1"]
env = {{ WANDB_MODE = "disabled", OMP_NUM_THREADS = "1" }}
[watch]
interval_s = 0.5
[recover]
on = ["crash", "oom"]
backoff_s = 0
""")
    monkeypatch.chdir(PROJECT)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    ct = rig_host.vmid_running
    host_dir = rig_host.container_path(ct, run["run_dir"])
    w = Watcher(run["run_id"])
    nxt = None
    try:
        wait_for(lambda: list((host_dir / "checkpoints").glob("step-*.pt")), timeout_s=240, what="a checkpoint")
        trainer = [p for p in live_pids_of_run(run["run_id"])
                   if b"-m\0trainer\0" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(trainer) == 1, trainer
        os.kill(trainer[0], signal.SIGKILL)             # seen from the host: the CT's processes are in its pid table
        wait_for(lambda: (host_dir / "exit_code").exists(), timeout_s=60, what="the wrapper's exit code")
        try:
            line = wait_for(lambda: w.saw(rf"recover {run['run_id']}: resume: "), timeout_s=120, what="the resume")
        except AssertionError:
            raise AssertionError(f"no resume; the watch said {w.lines[-12:]}") from None
        store = RunStore()
        nxt = store.successor(run["run_id"])
        assert nxt is not None and nxt.target == f"pct {ct} on {rig_host.name}"
        assert (nxt.release_id, nxt.attempt, nxt.workdir) == (run["release_id"], 1, workdir)
        store.close()
        ck = line.split(" from ", 1)[1]
        assert ck.startswith(f"{run['run_dir']}/checkpoints/step-")
        first = wait_for(lambda: _first_step(rig_host.container_path(ct, nxt.run_dir) / "metrics.jsonl"),
                         timeout_s=240, what="the resumed run's first step in the CT")
        assert first == int(Path(ck).name[5:13]) + 1
        assert live_pids_of_run(nxt.run_id)
        code, out, _ = dfctl(capsys, "runs")
        assert f"chain: {run['run_id']} -> this (attempt 1) -> (newest)" in out
    finally:
        w.stop()
        for run_id in [run["run_id"]] + ([nxt.run_id] if nxt is not None else []):
            for pid in live_pids_of_run(run_id):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
