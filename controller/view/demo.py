"""Sample state for `python -m controller.view.dashboard`, the tests and the benchmark.

The user's case from the seeds: three eager runs on an 8xH200 CT 200 -- train_eager_restored
(finished, slow), train_eager_unpadded (OOM-ended) and train_eager_dynamiccopy (running at
12.4K tok/s against the 21.5K reference) -- plus optional extra runs for a bigger fleet.
Deterministic for a given `now_s`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from controller.records import Finding, GpuSample, HostSample, ProcessState, ProgressSample, RunState, WandbInfo

if TYPE_CHECKING:
    from controller.records import JobState

BASELINE_TOK_PER_S = 21_500.0


def sample_gpus(n: int = 8, users: tuple[str, ...] = ("ct 200",), *, missing_power_of: int | None = 3) -> list[GpuSample]:
    """n H200s: 0-4 hold targets (busy), 5-7 drafters (one idling); one power reading unreadable."""
    gpus = []
    for i in range(n):
        busy = i != 6
        gpus.append(GpuSample(
            index=i, uuid=f"GPU-{i:08x}-demo", name="NVIDIA H200",
            util_pct=(97.0 - 3 * (i % 3)) if busy else 2.0,
            mem_used_mib=(118_000.0 + 1700 * i) if i < 5 else 71_500.0,
            mem_total_mib=143_771.0,
            temp_c=52.0 + 2 * i if busy else 34.0,
            power_w=None if i == missing_power_of else (640.0 - 9 * i if busy else 88.0),
            users=list(users)))
    return gpus


def sample_progress(now_s: float, *, tok_per_s: float, n: int, interval_s: float = 15.0,
                    start_step: int = 0, log_every: int = 20) -> list[ProgressSample]:
    """n progress samples ending now: a slow start-up ramp, then noise around tok_per_s."""
    out = []
    for k in range(n):
        ramp = min(1.0, (k + 1) / 4)
        noise = 1 + 0.03 * math.sin(k * 1.7)
        tok = tok_per_s * ramp * noise
        out.append(ProgressSample(
            step=start_step + (k + 1) * log_every, time_s=now_s - (n - 1 - k) * interval_s,
            tok_per_s=tok, samples_per_s=tok / 1750, step_time_s=log_every * interval_s / log_every,
            data_wait_s=0.004, loss=6.0 * math.exp(-k / 60) + 1.1, acc=0.08 + 0.3 * (1 - math.exp(-k / 80)),
            tau=1.2 + 1.5 * (1 - math.exp(-k / 80)), mem_alloc_gib=58.1, mem_peak_gib=71.3, lr=6e-4,
            source="metrics"))
    return out


def sample_states(now_s: float, n_runs: int = 3) -> list[RunState]:
    """The seeds' three runs (+ healthy filler runs up to n_runs, at most 8)."""
    host = HostSample(host="pve1", time_s=now_s, gpus=sample_gpus(), oom_kill_count=0)
    restored = RunState(
        run_id="train_eager_restored-20261128T0912Z", name="train_eager_restored",
        target="pct 200 on pve1", host="pve1", vmid=200, release_id="r-3f2a91c",
        started_s=now_s - 7200, state="finished", process=ProcessState(state="exited", exit_code=0),
        wandb=WandbInfo(run_id="a81kx2p0", url="https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/a81kx2p0",
                        mode="online", state="finished"),
        progress=sample_progress(now_s - 3600, tok_per_s=14_100, n=120), baseline_tok_per_s=BASELINE_TOK_PER_S,
        findings=[Finding(kind="regression", severity="warning", first_seen_s=now_s - 5000,
                          summary="14.1K tok/s, 34% below the 21.5K baseline",
                          evidence=("rolling median 14.1K over steps 400-2400",),
                          hint="compare with the reference run: dfctl compare-runs")])
    oom_line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 5 has a total "
                "capacity of 139.81 GiB of which 1.21 GiB is free.")
    unpadded = RunState(
        run_id="train_eager_unpadded-20261128T1030Z", name="train_eager_unpadded",
        target="pct 200 on pve1", host="pve1", vmid=200, release_id="r-77c0d4e",
        started_s=now_s - 2400, state="failed", process=ProcessState(state="exited", exit_code=1),
        wandb=WandbInfo(run_id="q3m9vv1t", mode="offline", offline_dir="/workspace/wandb/offline-run-x-q3m9vv1t"),
        progress=[], baseline_tok_per_s=BASELINE_TOK_PER_S,
        log_tail=["Loading 5 target models...", "  Target 0 on cuda:0...", "Traceback (most recent call last):",
                  oom_line],
        findings=[Finding(kind="oom", severity="critical", first_seen_s=now_s - 2000, line=4,
                          summary="CUDA OOM on GPU 5 (tried 4.50 GiB, 1.21 GiB free)", evidence=(oom_line,),
                          hint="the eager input-buffer cache keeps a buffer set per shape: gate it behind --compile-drafter")])
    dyn_log = [
        "Loading dataset from /workspace/tokenized_completions...",
        "  1095082 samples loaded (Arrow-backed, lazy access)",
        "Batches per epoch: 59823 (min=6 max=64 avg=18.3)",
        "[milestone] dataset_loaded samples=1095082",
        "Loading 5 target models...",
        "  Target 0 on cuda:0...",
        "Loading checkpoint shards:  40%|████      | 4/10 [00:09<00:13,  2.21s/it]",
        "Loading checkpoint shards:  70%|███████   | 7/10 [00:15<00:06,  2.18s/it]",
        "Loading checkpoint shards: 100%|██████████| 10/10 [00:22<00:00,  2.20s/it]",
        "[milestone] first_step",
    ]
    progress = sample_progress(now_s, tok_per_s=12_400, n=160)
    dyn_log += [f"[progress] step={p.step} loss={p.loss:.4f} acc={p.acc:.4f} tau={p.tau:.3f} "
                f"tok_per_s={p.tok_per_s:.1f} samples_per_s={p.samples_per_s:.2f}" for p in progress[-6:]]
    dynamic = RunState(
        run_id="train_eager_dynamiccopy-20261128T1115Z", name="train_eager_dynamiccopy",
        target="pct 200 on pve1", host="pve1", vmid=200, release_id="r-9b1e5aa",
        started_s=now_s - 2700, state="running",
        process=ProcessState(state="running", pid=48211, cpu_pct=310.0, rss_bytes=96 << 30, threads=41),
        wandb=WandbInfo(run_id="khjugi7w", url="https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w",
                        mode="online", state="running"),
        gpus=sample_gpus(), host_sample=host, progress=progress, log_tail=dyn_log,
        last_progress_s=now_s - 4, last_log_growth_s=now_s - 4, baseline_tok_per_s=BASELINE_TOK_PER_S,
        findings=[
            Finding(kind="regression", severity="warning", first_seen_s=now_s - 600,
                    summary="12.4K tok/s, 42% below the 21.5K baseline",
                    evidence=("rolling median 12.4K tok/s over 3 windows (steps 1200-3200)",),
                    hint="profile the drafter threads (GIL): py-spy dump --pid 48211"),
            Finding(kind="gpu_idle", severity="warning", first_seen_s=now_s - 300,
                    summary="GPU 6 idle (2%) while 7 GPUs work",
                    evidence=("utilization.gpu: 97,94,91,97,94,91,2,97",),
                    hint="check drafter thread 1's queue: is the hidden-state queue starved?"),
        ])
    states = [restored, unpadded, dynamic]
    for k in range(3, min(max(n_runs, 1), 8)):
        extra = RunState(
            run_id=f"sweep-lr{k}-20261128T12{k:02d}Z", name=f"sweep-lr{k}", target=f"pct {200 + k} on pve2",
            host="pve2", vmid=200 + k, release_id="r-9b1e5aa", started_s=now_s - 900 * k, state="running",
            process=ProcessState(state="running", pid=1000 + k), gpus=sample_gpus(8, (f"ct {200 + k}",)),
            progress=sample_progress(now_s, tok_per_s=20_000 + 300 * k, n=40), last_progress_s=now_s - 2,
            baseline_tok_per_s=BASELINE_TOK_PER_S)
        states.append(extra)
    return states[: max(1, n_runs)] if n_runs < 3 else states


def sample_job(now_s: float) -> tuple[list[RunState], JobState]:
    """A 2-node job (pve1 / pve2, CT 200, 8 GPUs each) whose rank 11 ran out of memory: the
    members' states and the JobState the job block draws (the issue's example)."""
    from controller.records import FirstFailure, JobNode, JobState, RankOutcome, RestartEvent

    job_id = "train-2n-20261201T030000Z"
    states = []
    for i, host in enumerate(("pve1", "pve2")):
        st = RunState(run_id=f"{job_id}.node{i}", name=f"train-2n node{i}", target=f"pct 200 on {host}", host=host, vmid=200,
                      state="failed", started_s=now_s - 3600,
                      process=ProcessState(state="exited", pid=4242 + i, exit_code=1, rss_bytes=38 << 30),
                      gpus=sample_gpus(users=(f"{job_id}.node{i}",), missing_power_of=None),
                      progress=sample_progress(now_s - 60, tok_per_s=43_000.0, n=40) if i == 0 else [],
                      log_tail=["[rank3]: RuntimeError: ... Connection reset by peer"] if i == 0 else
                      ["[rank11]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB. GPU 3 ..."])
        states.append(st)
    t_fail = now_s - 50
    cons = tuple(RankOutcome(node=0 if r < 8 else 1, rank=r, local_rank=r % 8, kind="timeout",
                             what="timed out in ALLREDUCE", time_s=t_fail + 600) for r in range(16) if r != 11)
    ff = FirstFailure(node=1, rank=11, local_rank=3, kind="oom", what="CUDA OOM (tried 2.10 GiB) on GPU 3",
                      time_s=t_fail, uncertainty_s=0.004, time_source="line", own_failure=True, consequences=cons,
                      agents_failed=(0, 1))
    from controller.judge.first_failure import failure_finding

    finding = failure_finding(ff, {0: "pct 200 on pve1", 1: "pct 200 on pve2"}, {}, job_id, now_s)
    nodes = [JobNode(node_rank=i, run_id=s.run_id, target=s.target, host=s.host, vmid=200, state=s.state,
                     process=s.process, gpus=s.gpus, step=s.progress[-1].step if s.progress else None,
                     tok_per_s=s.progress[-1].tok_per_s if s.progress else None, last_line=s.log_tail[-1])
             for i, s in enumerate(states)]
    job = JobState(job_id=job_id, name="train-2n", target="job: 2 nodes (pct 200 on pve1, pct 200 on pve2)",
                   state="failed", nodes=nodes, tok_per_s=nodes[0].tok_per_s, step=nodes[0].step,
                   restarts=[RestartEvent(node_rank=1, time_s=now_s - 1800, attempts_left=-1, max_restarts=-1)],
                   first_failure=ff, findings=[finding], exit_code=4)
    return states, job
