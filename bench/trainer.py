"""Benchmark of the bundled DFlash trainer on GPUs (figures go to bench/results/trainer.md).

    python bench/trainer.py --out DIR [--jsonl FILE] [--budget-s 495]   # GPU: bench-1b config
    python bench/trainer.py --out DIR --quick                           # CPU smoke run (tiny config)

What it measures, in one process tree on one machine, in phases ordered by value, each with
its own hard timeout inside one overall budget (a phase that would not fit is recorded as
skipped); every result is appended to --jsonl as soon as it exists, so a call cut short
still leaves what it measured:
  0. setup: bf16 8192^3 matmul ceiling, GPU0->GPU1 peer access and copy bandwidth, data
  1. split: `--sequential` with 1 target GPU + 1 drafter GPU (target forward on GPU0, then
     the drafter step on GPU1, one thread, a device sync between stages) vs the threaded
     1+1 pipeline; drafter-GPU busy fraction from NVML (utilization.gpu at 10 Hz)
  2. micro: target prefill, and drafter fwd+bwd+AdamW eager (GPU0) and --compile-drafter
     (GPU1; on a one-GPU machine after the eager one) on the same batches, CUDA-event timing, one FLOP count (the
     eager shapes: padding the compiled mode adds is not counted as work) -> MFU
  3. one GPU: `--sequential` (GPU0) and the threaded pipeline (GPU1) at the same time
  4. --compile-drafter end to end on one GPU, vs phase 3's eager pipeline
  4b. --compile-drafter --sequential on one GPU (the compiled one-GPU pipeline's baseline)
  4c. --compile-drafter --compile-target on one GPU, pipeline and --sequential (issue 23)
  4d. issue 23's last round, one after another on one GPU, all --compile-drafter
     --compile-target: today's loss pass (--loss-kernel inductor) beside the Triton one
     (--loss-kernel triton); opt-in extras `lk-budget` (Triton, --token-budget 73728) and
     `lk-autotune` (Triton, --compile-mode max-autotune-no-cudagraphs)
  4e. opt-in `lk-cdt`: the Triton run beside the same run with inductor's coordinate-descent
     tuning (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1), LK_REPEAT times
  4f. opt-in `streams`: the Triton run beside `--drafter-stream high`, each traced by
     `--profile-steps` over the 3 steps after its window (trainer/step_profile.py)
  4g. opt-in `today-vs-best`: the issue's `--compile-drafter` run beside the fastest
     (`--compile-drafter --compile-target --loss-kernel triton`), LK_REPEAT times
tok/s from metrics.jsonl over steps 11..N; MFU two ways: tok/s x the micro phase's FLOP per
token (`mfu_datasheet`, as before) and the window's own batches counted (`mfu_window`,
window_flops: the micro constant comes from the longest buckets only); the first steps' losses are compared across the
sequential / pipeline / split runs (they must be identical: a run is a function of
(seed, step)).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from trainer.config import get_preset  # noqa: E402
from trainer.data import ArrowDataset, BucketPlan  # noqa: E402
from trainer.model import Drafter, load_target  # noqa: E402
from trainer.pipeline import BatchingSpec, BatchPositions, host_batch_for, host_tensors, run_target  # noqa: E402
from trainer.replicas import DrafterReplicas  # noqa: E402
from trainer.step_profile import streams_summary  # noqa: E402
from trainer.synth import write_dataset  # noqa: E402

PEAK_BF16_TFLOPS = 989.0   # H100/H200 SXM dense bf16, datasheet


# ---------------------------------------------------------------------------------------- FLOPs
def target_flops(cfg, lengths: np.ndarray, padded_len: int) -> float:
    """Forward FLOPs of the target up to its deepest feature layer, on the padded batch."""
    t, layers = cfg.target, max(cfg.drafter.target_layers) + 1
    h, d = t.hidden_size, t.head_dim
    per_tok = 2 * (h * t.num_heads * d * 2 + h * t.num_kv_heads * d * 2 + 3 * h * t.intermediate_size)
    tokens = len(lengths) * padded_len
    attn = 2 * 2 * t.num_heads * d * len(lengths) * padded_len * padded_len / 2   # causal half
    return layers * (per_tok * tokens + attn)


def drafter_flops_host(cfg, hb) -> float:
    """drafter_flops from a HostBatch (the same shapes the DeviceBatch would have)."""
    s, length = hb.input_ids.shape
    return _drafter_flops(cfg, s, length, hb.block_ids.shape[1], hb.block_ids.shape[2],
                          torch.from_numpy(hb.anchors).float(), float((hb.labels != -100).sum()))


def drafter_flops(cfg, batch) -> float:
    s, length, _ = batch.features.shape
    return _drafter_flops(cfg, s, length, batch.block_ids.shape[1], batch.block_ids.shape[2],
                          batch.anchors.float().cpu(), float((batch.labels != -100).sum()))


def _eager_batching(cfg, ds, cuda: bool) -> tuple[BucketPlan, dict, BatchPositions]:
    """(plan, BatchingSpec keywords, positions) of a one-GPU run, seed 0, as train.py makes its
    eager batches: one construction for `micro` and `window_flops`, so the FLOPs the window
    counts are those of the batches the micro phase times."""
    tc, dc = cfg.train, cfg.drafter
    plan = BucketPlan(ds, block_size=dc.block_size, token_budget=tc.token_budget, max_length=tc.max_length,
                      num_buckets=tc.num_buckets, max_batch_samples=tc.max_batch_samples)
    common = dict(block_size=dc.block_size, max_anchors=dc.max_anchors, max_length=tc.max_length,
                  mask_token_id=dc.mask_token_id, seed=0, len_multiple=128 if cuda else 1,
                  anchor_multiple=128 // dc.block_size if cuda else 1)
    return plan, common, BatchPositions(plan, start_pos=0, world=1, rank=0, replicas=1)


def window_flops(cfg, data_dir: Path, first_seq: int, end_seq: int) -> tuple[float, int]:
    """(model FLOPs, real target tokens) of the batches an e2e run trained on in its timed
    window: seq first_seq .. end_seq - 1 of epoch 0, rebuilt here in the eager shapes (as
    train.py's plan and positions make them for a one-GPU run, seed 0; the compiled mode's
    extra padding is not counted, as in `micro`).

    Why: the micro phase's FLOP per token comes from its first 4 drafter batches, all from
    the two longest buckets (6 x 7040, 8 x 5888), where the drafter does 4.58 GFLOP a token;
    a short bucket's batch (21 x 2176) does 14.3, and a run's window mixes them all (4.90 on
    steps 11-35). tok/s x the micro constant therefore understates the work a window did;
    this counts it batch by batch (the same FLOP functions, the same formula)."""
    ds = ArrowDataset(data_dir)
    _, common, pos = _eager_batching(cfg, ds, cuda=True)
    spec = BatchingSpec(**common)
    flops, tokens = 0.0, 0
    for seq in range(first_seq, end_seq):
        hb = host_batch_for(ds, pos, spec, seq)
        flops += target_flops(cfg, hb.lengths, hb.input_ids.shape[1]) + drafter_flops_host(cfg, hb)
        tokens += hb.num_tokens
    return flops, tokens


def _drafter_flops(cfg, s, length, a, bk, anchors, n_valid) -> float:
    """Model FLOPs of one drafter fwd+bwd on the batch's (padded) shapes.

    Trainable matmuls count 3x forward (fwd, grad-input, grad-weight), fc 2x (its input
    needs no gradient), attention 3x (fwd, dQ/dK/dV ~2x), lm_head 2x (logits and the gradient
    to the hidden rows; the frozen weight gets none). Recompute from checkpointing is not
    counted (this is MFU, not HFU)."""
    t, dc = cfg.target, cfg.drafter
    q = a * bk
    h, d = t.hidden_size, dc.head_dim
    k_feat = len(dc.target_layers)
    fc = 2 * s * length * k_feat * h * h
    q_o = 2 * s * q * h * dc.num_heads * d * 2
    kv = 2 * s * (length + q) * h * dc.num_kv_heads * d * 2
    mlp = 2 * s * q * 3 * h * dc.intermediate_size
    pairs = float((bk * (anchors + bk)).sum())                        # each query: context < anchor + own block
    attn = 4 * dc.num_heads * d * pairs
    lm = 2 * n_valid * h * t.vocab_size
    return 2 * fc + dc.num_layers * (3 * (q_o + kv + mlp) + 3 * attn) + 2 * lm


# ---------------------------------------------------------------------------------------- GPU sampling
class BusySampler:
    """utilization.gpu per GPU at 10 Hz through NVML (nvidia-smi's source), with timestamps."""

    def __init__(self, indices: list[int]):
        self.samples: list[tuple[float, list[int]]] = []
        self._stop = threading.Event()
        self._thread = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self._nvml = pynvml
        except Exception as exc:  # noqa: BLE001 — no pynvml: nvidia-smi's own 100 ms loop instead
            print(f"bench: pynvml unavailable ({exc}); sampling `nvidia-smi -lms 100`")
            self._nvml = None
        self._indices = indices
        self._smi = None

    def __enter__(self):
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
        else:
            self._smi = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                                          "-lms", "100"], stdout=subprocess.PIPE, text=True)
            self._thread = threading.Thread(target=self._smi_loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self):
        while not self._stop.is_set():
            utils = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            self.samples.append((time.time(), utils))
            time.sleep(0.1)

    def _smi_loop(self):
        row: dict[int, int] = {}
        for line in self._smi.stdout:
            try:
                idx, util = (int(x) for x in line.split(","))
            except ValueError:
                continue
            row[idx] = util
            if all(i in row for i in self._indices):
                self.samples.append((time.time(), [row[i] for i in self._indices]))
                row = {}

    def __exit__(self, *exc):
        self._stop.set()
        if self._smi is not None:
            self._smi.terminate()
            self._smi.wait()
        if self._thread:
            self._thread.join(timeout=5)

    def busy(self, t0: float, t1: float) -> list[float] | None:
        window = [u for t, u in self.samples if t0 <= t <= t1]
        if not window:
            return None
        return [float(np.mean([w[i] for w in window])) / 100.0 for i in range(len(window[0]))]


# ---------------------------------------------------------------------------------------- stages
def _events_time_s(fn, reps: int, cuda: bool) -> float:
    """Seconds for `reps` calls of fn(i): CUDA events around the loop on GPU, host clock on CPU."""
    if not cuda:
        t0 = time.perf_counter()
        for i in range(reps):
            fn(i)
        return time.perf_counter() - t0
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(reps):
        fn(i)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def measure_matmul() -> float:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    t = _events_time_s(lambda i: a @ b, 10, True)
    return 10 * 2 * 8192 ** 3 / t / 1e12


def measure_peer_copy() -> dict:
    """GPU0 -> GPU1: peer access, and the bandwidth of a 1 GiB copy (the size of one batch's
    hidden states), CUDA events on the source's stream."""
    out = {"peer_access_0_to_1": torch.cuda.can_device_access_peer(0, 1)}
    src = torch.randn(2 ** 29, device="cuda:0", dtype=torch.bfloat16)
    dst = torch.empty(2 ** 29, device="cuda:1", dtype=torch.bfloat16)
    dst.copy_(src)
    with torch.cuda.device(0):
        t = _events_time_s(lambda i: dst.copy_(src), 5, True)  # noqa: F821 (runs before the del below)
    out["copy_gib_per_s"] = 5 * 1.0 / t
    del src, dst
    torch.cuda.empty_cache()
    return out


def micro(cfg, data_dir: Path, device: torch.device, n_batches: int, cuda: bool, compiled: bool,
          profile_path: Path | None = None) -> dict:
    """Target prefill (eager mode only) and drafter fwd+bwd+step on fixed batches, CUDA events.

    Both modes use the same rows and anchors; FLOPs are counted on the eager shapes for both
    (the compiled mode's extra padding to bucket edges / max anchors is not useful work)."""
    dtype = torch.bfloat16 if cuda else torch.float32
    ds = ArrowDataset(data_dir)
    tc, dc = cfg.train, cfg.drafter
    plan, common, pos = _eager_batching(cfg, ds, cuda)
    anchor_multiple = common["anchor_multiple"]
    spec = BatchingSpec(**common)
    hbs = [host_batch_for(ds, pos, spec, i) for i in range(n_batches)]
    n_feat = min(4, n_batches)
    if compiled:                  # as train.py builds them for --compile-drafter
        step = 128 if cuda else 1
        spec_c = BatchingSpec(**common, length_steps=tuple(sorted({-(-min(b.hi - 1, tc.max_length) // step) * step
                                                                   for b in plan.buckets})),
                              fixed_anchors=-(-dc.max_anchors // anchor_multiple) * anchor_multiple)
        hbs_run = [host_batch_for(ds, pos, spec_c, i) for i in range(n_feat)]
    else:
        hbs_run = hbs[:n_feat]
    target = load_target(cfg.target, dc.target_layers, path=None, device=device, dtype=dtype)
    out: dict = {"mode": "compiled" if compiled else "eager", "batches": n_batches}
    if not compiled:
        host = [host_tensors(hb, cuda) for hb in hbs]
        _events_time_s(lambda i: target(host[i % 2]["input_ids"].to(device)), 2, cuda)
        t_target = _events_time_s(lambda i: target(host[i]["input_ids"].to(device)), n_batches, cuda)
        real_tokens = sum(hb.num_tokens for hb in hbs)
        padded_tokens = sum(hb.input_ids.size for hb in hbs)
        tflop_target = sum(target_flops(cfg, hb.lengths, hb.input_ids.shape[1]) for hb in hbs)
        out.update({"target_prefill_tok_per_s": real_tokens / t_target,
                    "target_prefill_padded_tok_per_s": padded_tokens / t_target,
                    "target_step_s": t_target / n_batches,
                    "target_tflops": tflop_target / t_target / 1e12, "real_tokens": real_tokens,
                    "padded_tokens": padded_tokens})
    if not compiled:
        out.update(measure_handoff(host, device, cuda))
    feats = [run_target(target, host_tensors(hb, cuda), hb, device, device, None) for hb in hbs_run]
    with torch.device(device):
        drafter = Drafter(cfg.target, dc)
    drafter.init_weights(1)
    drafter.embed_tokens.to(dtype)
    drafter.lm_head.to(dtype)
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    if compiled:
        import importlib

        importlib.import_module("torch._dynamo").config.recompile_limit = 16
        torch._logging.set_logs(recompiles=True)
        for layer in drafter.layers:
            layer.compile(dynamic=None)
    drafter.train()
    reps = DrafterReplicas([drafter], [device], lr=tc.lr, weight_decay=0.0, grad_clip=1.0, total_steps=1000,
                           warmup_frac=0.04, min_lr_frac=0.1, gamma=dc.loss_gamma, chunk_rows=dc.loss_chunk_tokens,
                           use_flex=cuda, autocast_dtype=dtype if cuda else None, compiled=compiled)
    t0 = time.perf_counter()
    warm = 2 * len(feats) if compiled else 3           # compiled: every shape twice (automatic dynamic settles)
    _events_time_s(lambda i: reps.step([feats[i % len(feats)]]), warm, cuda)
    out["drafter_warmup_s"] = time.perf_counter() - t0
    n_steps = 2 * len(feats)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t_drafter = _events_time_s(lambda i: reps.step([feats[i % len(feats)]]), n_steps, cuda)
    flops = sum(drafter_flops_host(cfg, hbs[i % len(feats)]) for i in range(n_steps))   # eager shapes, both modes
    out.update({
        "drafter_step_s": t_drafter / n_steps,
        "drafter_tflops": flops / t_drafter / 1e12,
        "drafter_mfu_datasheet": flops / t_drafter / 1e12 / PEAK_BF16_TFLOPS,
        "drafter_tok_per_s": sum(hbs[i % len(feats)].num_tokens for i in range(n_steps)) / t_drafter,
        "drafter_gflop_per_batch": flops / n_steps / 1e9,
        "drafter_trainable_params": sum(p.numel() for p in reps.params),
        "drafter_peak_gib": torch.cuda.max_memory_allocated(device) / 2 ** 30 if cuda else None,
        "target_params": sum(p.numel() for p in target.parameters()),
        "shapes": [list(f.features.shape[:2]) + [f.block_ids.shape[1]] for f in feats],
    })
    if profile_path is not None:
        _profile_steps(lambda i: reps.step([feats[i % len(feats)]]), len(feats), cuda, profile_path)
    return out


def measure_handoff(host: list[dict], device: torch.device, cuda: bool) -> dict:
    """The pipeline's two small stages (issue 18's model): the pinned host batch's copy to
    the device (per batch, CUDA events) and one queue hand-off between two threads (the
    put -> get latency of queue.Queue, median of 2,000 round trips)."""
    import queue as _queue

    def copy(i):
        for t in host[i % len(host)].values():
            t.to(device, non_blocking=True)

    copy(0)
    t_copy = _events_time_s(copy, len(host), cuda) / len(host)
    ping, pong = _queue.Queue(), _queue.Queue()

    def echo():
        while (item := ping.get()) is not None:
            pong.put(item)

    th = threading.Thread(target=echo, daemon=True)
    th.start()
    trips = []
    for i in range(2000):
        t0 = time.perf_counter()
        ping.put(i)
        pong.get()
        trips.append(time.perf_counter() - t0)
    ping.put(None)
    th.join()
    return {"h2d_copy_s": t_copy, "h2d_bytes": sum(t.numel() * t.element_size() for t in host[0].values()),
            "queue_handoff_s": float(np.median(trips)) / 2}


def _profile_steps(fn, n: int, cuda: bool, path: Path) -> None:
    """torch.profiler over n more drafter steps (after the timed ones, so the timing is
    clean): the kernels by self device time, to see where eager time goes."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for i in range(n):
            fn(i)
        if cuda:
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    path.write_text(f"# {n} drafter steps\n" + prof.key_averages().table(sort_by=key, row_limit=60, max_name_column_width=90))


def parse_run(run_dir: Path) -> list[dict]:
    mfile = run_dir / "metrics.jsonl"
    if not mfile.exists():
        return []
    return [json.loads(line) for line in mfile.read_text().splitlines() if line.strip()]


def summarise_run(name: str, rc, wall_s: float, recs: list[dict], sampler, gpus: list[int]) -> dict:
    out = {"name": name, "rc": rc, "wall_s": round(wall_s, 1), "records": len(recs),
           "losses": [round(r["loss"], 6) for r in recs]}
    measured = [r for r in recs if r["step"] > 10]        # the first 10 steps: warm-up and compiles
    if len(measured) >= 2:
        before = recs[recs.index(measured[0]) - 1]
        t_first, t_last = before["time_s"], measured[-1]["time_s"]
        steps_done = measured[-1]["step"] - before["step"]
        tokens = sum(r["tok_per_s"] * r["step_time_s"] * (r["step"] - p["step"])
                     for p, r in zip([before] + measured[:-1], measured))
        out.update({"tok_per_s": tokens / (t_last - t_first), "step_time_s": (t_last - t_first) / steps_done,
                    "window_steps": [before["step"] + 1, measured[-1]["step"]],
                    "data_wait_s": float(np.mean([r["data_wait_s"] for r in measured])),
                    "mem_peak_gib": max(r["mem_peak_gib"] for r in recs), "loss_first": recs[0]["loss"],
                    "loss_last": recs[-1]["loss"], "window_s": t_last - t_first,
                    "acc_first": recs[0]["acc"], "acc_last": recs[-1]["acc"],
                    "accept_len_first": recs[0].get("accept_len"), "accept_len_last": recs[-1].get("accept_len"),
                    "curve": [[r["step"], round(r["loss"], 4), round(r["acc"], 4), round(r.get("accept_len", 0.0), 3)]
                              for r in recs]})
        if sampler is not None:
            busy = sampler.busy(t_first, t_last)
            if busy is not None:
                out["busy"] = {f"gpu{g}": round(busy[g], 3) for g in gpus}
    return out


class Bench:
    """The orchestrator: phases of child processes (one per GPU at a time), one budget."""

    def __init__(self, args, cuda: bool):
        self.args, self.cuda = args, cuda
        self.work = Path(args.out)
        self.work.mkdir(parents=True, exist_ok=True)
        self.deadline = time.time() + args.budget_s
        self.jsonl = Path(args.jsonl) if args.jsonl else self.work / "trainer-bench.jsonl"
        self.job_env: dict[str, dict[str, str]] = {}    # a run's own environment on top of ours (lk-cdt)
        self.results: dict = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                              "torch": torch.__version__, "e2e": [], "micro": {}}

    def record(self, kind: str, obj: dict) -> None:
        line = dict(obj, kind=kind, t_s=round(time.time() - (self.deadline - self.args.budget_s), 1))
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps(line, default=str) + "\n")
        print(json.dumps(line, default=str), flush=True)
        (self.work / "trainer-bench.json").write_text(json.dumps(self.results, indent=2, default=str))

    def left_s(self) -> float:
        return self.deadline - time.time()

    def run_group(self, jobs: list[tuple[str, list[str], str | None]], timeout_s: float, min_s: float) -> list:
        """Run jobs (name, argv, CUDA_VISIBLE_DEVICES or None) at once; kill all at timeout.
        Returns [(name, rc, wall_s)]; a group that cannot get min_s is skipped."""
        budget = min(timeout_s, self.left_s() - 3)
        if budget < min_s:
            for name, _, _ in jobs:
                self.record("skipped", {"name": name, "left_s": round(self.left_s(), 1)})
            return []
        procs = []
        t0 = time.time()
        for name, argv, visible in jobs:
            env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1", **self.job_env.get(name, {}))
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            log = open(self.work / f"log-{name}.txt", "w")
            procs.append((name, subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True), log))
        out = []
        for name, proc, log in procs:
            try:
                rc = proc.wait(timeout=max(0.1, t0 + budget - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)      # its own session: the child and its workers only
                proc.wait()
                rc = "timeout"
            log.close()
            out.append((name, rc, time.time() - t0))
        return out

    def e2e_argv(self, name: str, extra: list[str], steps: int) -> list[str]:
        return [sys.executable, "-u", "-m", "trainer", "--config", self.cfg_name, "--data", str(self.data_dir),
                "--run-dir", str(self.work / f"run-{name}"), "--steps", str(steps), "--log-every", "5",
                *extra]

    def e2e_group(self, runs: list[tuple[str, list[str], str | None, list[int]]], timeout_s: float, min_s: float,
                  steps: int, sampler) -> None:
        done = self.run_group([(n, self.e2e_argv(n, extra, steps), vis) for n, extra, vis, _ in runs],
                              timeout_s, min_s)
        gpus_of = {n: g for n, _, _, g in runs}
        for name, rc, wall in done:
            r = summarise_run(name, rc, wall, parse_run(self.work / f"run-{name}"), sampler, gpus_of[name])
            if "window_steps" in r and self.cuda:     # the window's own batches, counted (window_flops)
                first, last = r["window_steps"]
                flops, tokens = window_flops(self.cfg, self.data_dir, first - 1, last)
                r["window_tflop"] = flops / 1e12
                r["window_tokens_recounted"] = tokens       # equals tok/s x window_s when the batches are right
                r["mfu_window"] = flops / r["window_s"] / 1e12 / PEAK_BF16_TFLOPS
            traces = sorted((self.work / f"run-{name}" / "profile").glob("trace-*.json.gz"))
            if traces:            # --profile-steps: what the trace's CUDA streams did (trainer/step_profile.py)
                r["streams"] = streams_summary(traces[0]).to_dict()
            self.results["e2e"].append(r)
            self.record("e2e", r)

    def micro_group(self, modes: list[tuple[str, bool, str | None]], timeout_s: float, min_s: float) -> None:
        jobs = []
        for name, compiled, visible in modes:
            argv = [sys.executable, "-u", str(Path(__file__).resolve()), "--out", str(self.work), "--phase", "micro",
                    "--micro-json", str(self.work / f"micro-{name}.json")] + (["--compile"] if compiled else []) + \
                   (["--quick"] if not self.cuda else []) + \
                   (["--profile-to", str(self.work / f"profile-{name}.txt")] if self.args.profile else [])
            jobs.append((f"micro-{name}", argv, visible))
        for name, rc, wall in self.run_group(jobs, timeout_s, min_s):
            f = self.work / f"{name}.json"
            r = json.loads(f.read_text()) if f.exists() else {"error": f"rc={rc}, no result (see log-{name}.txt)"}
            r.update({"rc": rc, "wall_s": round(wall, 1)})
            self.results["micro"][name] = r
            self.record("micro", dict(r, name=name))

    def main(self) -> int:
        cuda, args = self.cuda, self.args
        self.cfg_name = "bench-1b" if cuda else "tiny"
        cfg = self.cfg = get_preset(self.cfg_name)
        n_gpu = torch.cuda.device_count() if cuda else 0
        setup: dict = {"config": self.cfg_name, "torch": torch.__version__, "budget_s": args.budget_s}
        if cuda:
            setup["gpus"] = [torch.cuda.get_device_name(i) for i in range(n_gpu)]
            setup["matmul_bf16_tflops"] = measure_matmul()
            torch.cuda.empty_cache()
            if n_gpu >= 2:
                setup.update(measure_peer_copy())
        self.data_dir = self.work / f"data-{self.cfg_name}"
        if not self.data_dir.exists():
            t0 = time.time()
            write_dataset(self.data_dir, args.samples if cuda else 400, min_len=cfg.synth_min_len,
                          max_len=cfg.synth_max_len, vocab=cfg.synth_vocab or cfg.target.vocab_size,
                          cycle=cfg.synth_cycle)
            setup["synth_write_s"] = time.time() - t0
        self.results["setup"] = setup
        self.record("setup", setup)

        dev = ["--device", "cuda"] if cuda else ["--device", "cpu"]
        # the split phases' devices: 1 target + 1 drafter by default; a machine of more GPUs
        # can balance the stages, e.g. SPLIT_TARGET_DEVICES=0 SPLIT_DRAFTER_DEVICES=1,2
        t_dev = os.environ.get("SPLIT_TARGET_DEVICES", "0")
        d_dev = os.environ.get("SPLIT_DRAFTER_DEVICES", "1")
        split = ["--target-devices", t_dev, "--drafter-devices", d_dev]
        split_gpus = sorted({int(x) for x in (t_dev + "," + d_dev).split(",") if x.strip()})
        self.split_drafter_gpus = [int(x) for x in d_dev.split(",") if x.strip()]
        steps = args.steps if cuda else 20
        two = n_gpu >= 2 or not cuda
        g0, g1 = ("0", "1") if cuda else (None, None)
        only = {x for x in args.only.split(",") if x}
        want = (lambda n: not only or n in only)
        with BusySampler(list(range(n_gpu))) if cuda else _Null() as sampler:
            # 0. learning curves (issue 15): the threaded pipeline, eager then --compile-drafter,
            #    --curve-steps each; loss/acc/accept_len first -> last beside tok/s
            if cuda and want("curve"):
                cs = args.curve_steps
                self.e2e_group([("curve-eager", dev, g0, [0])], 60 + 1.2 * cs, 60, cs, sampler)
                self.e2e_group([("curve-compiled", dev + ["--compile-drafter"], g0, [0])], 120 + 1.1 * cs, 90, cs,
                               sampler)
            # 1. the split: sequential (one thread, stages never overlap) vs threaded pipeline
            if two and want("split"):
                self.e2e_group([("seq-split", dev + ["--sequential"] + split, None, split_gpus)], 130, 40, steps, sampler)
                self.e2e_group([("pipe-split", dev + split, None, split_gpus)], 100, 40, steps, sampler)
            # 1b. opt-in (`--only split-compiled`): the same pair with --compile-drafter
            if two and cuda and only and "split-compiled" in only:
                comp = ["--compile-drafter"]
                each_s = float(os.environ.get("SPLIT_COMPILED_TIMEOUT_S", "200"))   # a short lease can ask for less
                self.e2e_group([("seq-split-compiled", dev + ["--sequential"] + split + comp, None, split_gpus)], each_s, 60,
                               steps, sampler)
                self.e2e_group([("pipe-split-compiled", dev + split + comp, None, split_gpus)], each_s, 60, steps, sampler)
            # 2. components: eager on GPU0 and compiled on GPU1 at once (compiled: GPU only)
            #    (`micro-eager`: the eager one alone -- what the MFU formula needs)
            if want("micro") or (only and "micro-eager" in only):
                eager_only = not want("micro")
                modes = [("eager", False, g0)] + ([("compiled", True, g1)] if cuda and n_gpu >= 2 and not eager_only
                                                  else [])
                self.micro_group(modes, 170, 60)
                if cuda and n_gpu == 1 and not eager_only:   # one GPU: the compiled component after the eager one
                    self.micro_group([("compiled", True, g0)], 170, 60)
            # 3. one GPU: sequential on GPU0 and the pipeline on GPU1 at once
            if want("onegpu"):
                if cuda and n_gpu >= 2:
                    self.e2e_group([("seq-1gpu", dev + ["--sequential"], "0", [0]),
                                    ("pipe-1gpu", dev, "1", [1])], 100, 40, steps, sampler)
                else:
                    self.e2e_group([("seq-1gpu", dev + ["--sequential"], g0, [0])], 300, 20, steps, sampler)
                    self.e2e_group([("pipe-1gpu", dev, g0, [0])], 300, 20, steps, sampler)
            # 4. --compile-drafter end to end (GPU only: inductor on a 2-core CPU takes minutes)
            if cuda and want("compiled"):
                self.e2e_group([("compiled-1gpu", dev + ["--compile-drafter"], "0", [0])], 200, 60, steps, sampler)
            # 4c. issue 23: the target's layers compiled too (--compile-target), pipeline and
            #     sequential, beside phase 4's run of today's code in the same call
            if cuda and want("compiled-target"):
                both = dev + ["--compile-drafter", "--compile-target"]
                self.e2e_group([("compiled-target-1gpu", both, "0", [0])], 200, 60, steps, sampler)
                self.e2e_group([("compiled-target-seq-1gpu", both + ["--sequential"], "0", [0])], 200, 60, steps,
                               sampler)
            # 4d. issue 23's last round: the loss's logits pass, today's beside the Triton kernel
            if cuda and want("loss-kernel"):
                both = dev + ["--compile-drafter", "--compile-target"]
                for r in range(int(os.environ.get("LK_REPEAT", "1"))):     # A B A B: the spread of each
                    tag = f"-r{r + 1}" if r else ""
                    for kernel in ("inductor", "triton"):
                        self.e2e_group([(f"lk-{kernel}{tag}-1gpu", both + ["--loss-kernel", kernel], "0", [0])],
                                       200, 60, steps, sampler)
            if cuda and only and "lk-budget" in only:
                self.e2e_group([("lk-triton-tb73728-1gpu", dev + ["--compile-drafter", "--compile-target",
                                                                  "--loss-kernel", "triton", "--token-budget", "73728"],
                                 "0", [0])],
                               200, 60, steps, sampler)
            if cuda and only and "lk-autotune" in only:
                self.e2e_group([("lk-triton-autotune-1gpu", dev + ["--compile-drafter", "--compile-target",
                                                                   "--loss-kernel", "triton",
                                                                   "--compile-mode", "max-autotune-no-cudagraphs"],
                                 "0", [0])], 300, 60, steps, sampler)
            # 4e. opt-in (`--only lk-cdt`): the Triton run beside the same run with inductor's
            #     coordinate-descent tuning of its generated kernels (norms, SwiGLU, RoPE, casts),
            #     A B A B (LK_REPEAT); torch/_inductor/config.py reads the environment variable
            if cuda and only and "lk-cdt" in only:
                both = dev + ["--compile-drafter", "--compile-target", "--loss-kernel", "triton"]
                self.job_env.update({f"lk-triton-cdt{t}-1gpu": {"TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1"}
                                     for t in ("", "-r2", "-r3")})
                for r in range(int(os.environ.get("LK_REPEAT", "1"))):
                    tag = f"-r{r + 1}" if r else ""
                    names = (f"lk-triton{tag}-1gpu", f"lk-triton-cdt{tag}-1gpu")
                    for name in names[1:] if os.environ.get("LK_CDT_ONLY") == "1" else names:
                        self.e2e_group([(name, both, "0", [0])], float(os.environ.get("LK_CDT_S", "240")), 60,
                                       steps, sampler)
            # 4f. opt-in (`--only streams`): the Triton run beside the same run with the drafter
            #     on a high-priority stream (--drafter-stream high), A B A B (LK_REPEAT); each
            #     traced by torch.profiler over the 3 steps after its timed window
            #     (--profile-steps), so the trace's streams say where an e2e step's time goes
            if cuda and only and "streams" in only:
                both = dev + ["--compile-drafter", "--compile-target", "--loss-kernel", "triton",
                              "--profile-steps", f"{steps + 1}:{steps + 3}"]
                for r in range(int(os.environ.get("LK_REPEAT", "1"))):
                    tag = f"-r{r + 1}" if r else ""
                    for name, extra in ((f"lk-triton{tag}-1gpu", []),
                                        (f"lk-triton-hiprio{tag}-1gpu", ["--drafter-stream", "high"])):
                        self.e2e_group([(name, both + extra, "0", [0])], float(os.environ.get("LK_CDT_S", "200")),
                                       60, steps + 3, sampler)
            # 4g. opt-in (`--only today-vs-best`): the compiled run (`--compile-drafter`,
            #     as filed: 42.9 %) beside the fastest (+ --compile-target, Triton loss pass),
            #     A B A B (LK_REPEAT), each run's window counted batch by batch (mfu_window)
            if cuda and only and "today-vs-best" in only:
                best = dev + ["--compile-drafter", "--compile-target", "--loss-kernel", "triton"]
                for r in range(int(os.environ.get("LK_REPEAT", "1"))):
                    tag = f"-r{r + 1}" if r else ""
                    for name, argv in ((f"compiled{tag}-1gpu", dev + ["--compile-drafter"]),
                                       (f"lk-triton{tag}-1gpu", best)):
                        self.e2e_group([(name, argv, "0", [0])], float(os.environ.get("LK_CDT_S", "200")), 60,
                                       steps, sampler)
            # 4b. the same compiled work done sequentially on one GPU: the one-GPU pipeline
            #     ratio with the faster drafter (the target's share of a step grows)
            if cuda and want("compiled-seq"):
                self.e2e_group([("compiled-seq-1gpu", dev + ["--compile-drafter", "--sequential"], "0", [0])],
                               200, 60, steps, sampler)
        self.finish()
        return 0

    def finish(self) -> None:
        res = self.results
        by = {r["name"]: r for r in res["e2e"]}
        ratios = {}
        for num, den, key in (("pipe-split", "seq-split", "split_pipeline_over_sequential"),
                              ("pipe-1gpu", "seq-1gpu", "onegpu_pipeline_over_sequential"),
                              ("pipe-split", "seq-1gpu", "split_pipeline_over_onegpu_sequential"),
                              ("compiled-1gpu", "pipe-1gpu", "compiled_over_eager_e2e"),
                              ("compiled-1gpu", "compiled-seq-1gpu", "onegpu_compiled_pipeline_over_sequential"),
                              ("compiled-target-1gpu", "compiled-1gpu", "compiled_target_over_compiled_e2e"),
                              ("compiled-target-seq-1gpu", "compiled-1gpu", "compiled_target_seq_over_compiled_e2e"),
                              ("lk-triton-1gpu", "lk-inductor-1gpu", "triton_loss_over_inductor_loss_e2e"),
                              ("lk-triton-tb73728-1gpu", "lk-inductor-1gpu", "triton_tb73728_over_inductor_loss_e2e"),
                              ("lk-triton-r2-1gpu", "lk-inductor-r2-1gpu", "triton_loss_over_inductor_loss_e2e_r2"),
                              ("lk-triton-autotune-1gpu", "lk-inductor-1gpu", "triton_autotune_over_inductor_loss_e2e"),
                              ("lk-triton-hiprio-1gpu", "lk-triton-1gpu", "high_priority_drafter_over_default_e2e"),
                              ("lk-triton-1gpu", "compiled-1gpu", "best_over_issue_compiled_e2e"),
                              ("lk-triton-r2-1gpu", "compiled-r2-1gpu", "best_over_issue_compiled_e2e_r2"),
                              ("lk-triton-hiprio-r2-1gpu", "lk-triton-r2-1gpu", "high_priority_drafter_over_default_e2e_r2"),
                              ("pipe-split-compiled", "seq-split-compiled", "split_compiled_pipeline_over_sequential")):
            if "tok_per_s" in by.get(num, {}) and "tok_per_s" in by.get(den, {}):
                ratios[key] = by[num]["tok_per_s"] / by[den]["tok_per_s"]
        me, mc = res["micro"].get("micro-eager", {}), res["micro"].get("micro-compiled", {})
        if "drafter_step_s" in me and "drafter_step_s" in mc:
            ratios["compiled_over_eager_drafter_step"] = me["drafter_step_s"] / mc["drafter_step_s"]
        # losses: identical across the eager runs (same seed, same steps)
        same = [by[n]["losses"] for n in ("seq-1gpu", "pipe-1gpu", "seq-split", "pipe-split") if by.get(n, {}).get("losses")]
        if len(same) >= 2:
            k = min(len(x) for x in same)
            ratios["losses_compared_records"] = k
            ratios["losses_max_abs_diff"] = max(abs(a - b) for x in same[1:] for a, b in zip(same[0][:k], x[:k]))
        ps = by.get("pipe-split", {})
        if "busy" in ps and "step_time_s" in ps:
            drafter_busy = [ps["busy"][f"gpu{g}"] for g in self.split_drafter_gpus if f"gpu{g}" in ps["busy"]]
            idle = 1.0 - sum(drafter_busy) / max(1, len(drafter_busy))     # mean over the drafter GPUs
            waiting = ps["data_wait_s"] / ps["step_time_s"]      # the drafter waiting for the target: explained
            ratios["split_drafter_gpu_idle"] = idle
            ratios["split_drafter_gpu_idle_waiting_for_target"] = waiting
            ratios["split_drafter_gpu_idle_unexplained"] = max(0.0, idle - waiting)
            if "drafter_step_s" in me:
                ratios["split_step_over_drafter_component"] = ps["step_time_s"] / me["drafter_step_s"]
        if "target_tflops" in me and "drafter_tflops" in me:
            flop_per_tok = (me["target_tflops"] * 1e12 / me["target_prefill_tok_per_s"]
                            + me["drafter_tflops"] * 1e12 / me["drafter_tok_per_s"])
            for r in res["e2e"]:
                if "tok_per_s" in r:
                    r["mfu_datasheet"] = r["tok_per_s"] * flop_per_tok / 1e12 / PEAK_BF16_TFLOPS
                    ratios[f"{r['name']}_mfu_datasheet"] = r["mfu_datasheet"]
        for r in res["e2e"]:
            if "mfu_window" in r:
                ratios[f"{r['name']}_mfu_window"] = r["mfu_window"]
        res["ratios"] = ratios
        self.record("summary", ratios)
        print("\n| run | rc | tok/s | step s | data wait s | peak GiB | busy | loss first->last | acc | accept_len |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in res["e2e"]:
            print(f"| {r['name']} | {r['rc']} | {r.get('tok_per_s', float('nan')):.0f} | "
                  f"{r.get('step_time_s', float('nan')):.3f} | {r.get('data_wait_s', float('nan')):.3f} | "
                  f"{r.get('mem_peak_gib', float('nan')):.1f} | {r.get('busy')} | "
                  f"{r.get('loss_first', float('nan')):.4f}->{r.get('loss_last', float('nan')):.4f} | "
                  f"{r.get('acc_first', float('nan')):.3f}->{r.get('acc_last', float('nan')):.3f} | "
                  f"{r.get('accept_len_first') or float('nan'):.2f}->{r.get('accept_len_last') or float('nan'):.2f} |")
        for name, m in res["micro"].items():
            print(f"{name}: drafter {m.get('drafter_step_s', float('nan')):.3f} s/step, "
                  f"MFU {m.get('drafter_mfu_datasheet', float('nan')):.3f}, "
                  f"target {m.get('target_prefill_tok_per_s', float('nan')):.0f} tok/s")
        for k, v in ratios.items():
            print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="CPU smoke run (tiny config)")
    ap.add_argument("--samples", type=int, default=1500)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--curve-steps", type=int, default=150, help="steps of each learning-curve run (phase curve)")
    ap.add_argument("--budget-s", type=float, default=495.0, help="overall wall-clock budget for all phases")
    ap.add_argument("--jsonl", default="", help="append each result here as it lands (default OUT/trainer-bench.jsonl)")
    ap.add_argument("--only", default="", help="comma list of phases: split,micro,onegpu,compiled,compiled-target,compiled-seq,loss-kernel (default all); split-compiled, micro-eager, lk-budget, lk-autotune, lk-cdt, streams, today-vs-best only when named")
    ap.add_argument("--phase", default="", help=argparse.SUPPRESS)       # internal: a child's one job
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--micro-json", default="", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help="micro phase: also torch.profiler tables (profile-*.txt in --out)")
    ap.add_argument("--profile-to", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cuda = torch.cuda.is_available() and not args.quick
    if args.phase == "micro":
        cfg_name = "bench-1b" if cuda else "tiny"
        device = torch.device("cuda", 0) if cuda else torch.device("cpu")
        r = micro(get_preset(cfg_name), Path(args.out) / f"data-{cfg_name}", device, 8 if cuda else 3, cuda,
                  args.compile, Path(args.profile_to) if args.profile_to else None)
        Path(args.micro_json).write_text(json.dumps(r, default=str))
        print(json.dumps(r, default=str))
        return 0
    return Bench(args, cuda).main()


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    raise SystemExit(main())
