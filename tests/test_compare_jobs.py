"""compare-runs with a multi-node job: the job is one run, compared on its aggregate
throughput (each step's tok/s summed over the nodes that report it) against a single-node
run; histories are real Parquet files written by the history writer."""

from __future__ import annotations

import json
import subprocess
import sys

from controller.records import ProgressSample
from controller.store.history import append_progress
from controller.store.runstore import RunRecord, RunStore
from tests.job_support import ROOT

T0 = 1_795_000_000.0


def _samples(tok: float, steps=range(1, 41)) -> list[ProgressSample]:
    return [ProgressSample(step=s, time_s=T0 + 2 * s, tok_per_s=tok + (s % 3), loss=5.0 - s * 0.05, source="metrics")
            for s in steps]


def _row(run_id: str, **kw) -> RunRecord:
    return RunRecord(run_id=run_id, name=kw.pop("name", run_id), target_kind=kw.pop("target_kind", "local"),
                     target=kw.pop("target", "local"), started_s=T0, state="finished", exit_code=0,
                     playbook={"watch": {"warmup_s": 0, "warmup_steps": 0}}, **kw)


def test_a_job_is_compared_on_the_sum_of_its_nodes_throughput():
    store = RunStore()
    store.add_run(_row("job-a", name="job-a", target_kind="job", target="job: 2 nodes (local, local)"))
    for i, tok in enumerate((1000.0, 3000.0)):      # a trainer that reports per node: summed
        store.add_run(_row(f"job-a.node{i}", name="job-a", job_id="job-a", node_rank=i))
        append_progress(f"job-a.node{i}", _samples(tok))
    store.add_run(_row("single", name="single"))
    append_progress("single", _samples(2000.0))
    store.close()
    p = subprocess.run([sys.executable, "-m", "controller", "compare-runs", "job-a", "single", "--baseline", "single",
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 5), p.stderr
    doc = json.loads(p.stdout)
    runs = {r["label"]: r for r in doc["runs"]}
    job, single = runs["job-a"], runs["single"]
    assert job["source"] == "job-a" and job["end_state"] == "finished"
    # per step (1000 + k) + (3000 + k) against (2000 + k), k = step % 3: twice the single run's
    assert job["tok_per_s"]["median"] == 4002.0 and single["tok_per_s"]["median"] == 2001.0
    assert job["window"]["last_step"] == 40 and job["loss_at"]["40"] == 3.0   # loss from the lowest node
    assert job["verdict"] == "faster by 100.0%" and job["delta_pct"] == 100.0
