"""Benchmark of the bundled DFlash trainer on GPUs (figures go to bench/results/trainer.md).

    python bench/trainer.py --out DIR            # GPU: bench-1b config (~1.1B target, ~270M drafter)
    python bench/trainer.py --out DIR --quick    # CPU smoke run of the same code (tiny config)

What it measures, in one process tree on one machine:
  1. ceilings: a bf16 8192^3 matmul (TFLOP/s) on this GPU
  2. target prefill: real target tokens per second (frozen forward to the deepest feature layer)
  3. drafter fwd+bwd: step time on precomputed features; FLOPs counted from the shapes -> MFU
  4. end to end (the real CLI, `python -m trainer`): sequential vs threaded pipeline on one GPU,
     eager vs --compile-drafter, and 1 target GPU + 1 drafter GPU; tok/s from metrics.jsonl,
     GPU busy fraction from NVML (utilization.gpu, sampled at 10 Hz) over the measured window,
     peak allocator memory.
"""

from __future__ import annotations

import argparse
import json
import os
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
from trainer.pipeline import BatchingSpec, BatchPositions, _host_tensors, host_batch_for, run_target  # noqa: E402
from trainer.replicas import DrafterReplicas  # noqa: E402
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


def drafter_flops(cfg, batch) -> float:
    """Model FLOPs of one drafter fwd+bwd on the batch's (padded) shapes.

    Trainable matmuls count 3x forward (fwd, grad-input, grad-weight), fc 2x (its input
    needs no gradient), attention 3x (fwd, dQ/dK/dV ~2x), lm_head 2x (logits and the gradient
    to the hidden rows; the frozen weight gets none). Recompute from checkpointing is not
    counted (this is MFU, not HFU)."""
    t, dc = cfg.target, cfg.drafter
    s, length, _ = batch.features.shape
    a, bk = batch.block_ids.shape[1], batch.block_ids.shape[2]
    q = a * bk
    h, d = t.hidden_size, dc.head_dim
    k_feat = len(dc.target_layers)
    fc = 2 * s * length * k_feat * h * h
    q_o = 2 * s * q * h * dc.num_heads * d * 2
    kv = 2 * s * (length + q) * h * dc.num_kv_heads * d * 2
    mlp = 2 * s * q * 3 * h * dc.intermediate_size
    anchors = batch.anchors.float()
    pairs = float((bk * (anchors + bk)).sum())                        # each query: context < anchor + own block
    attn = 4 * dc.num_heads * d * pairs
    n_valid = float((batch.labels != -100).sum())
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
        except Exception as exc:  # noqa: BLE001 — no NVML: report busy fraction as unknown
            print(f"bench: NVML unavailable ({exc}); no busy fractions")
            self._nvml = None

    def __enter__(self):
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self):
        while not self._stop.is_set():
            utils = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            self.samples.append((time.time(), utils))
            time.sleep(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()

    def busy(self, t0: float, t1: float) -> list[float] | None:
        window = [u for t, u in self.samples if t0 <= t <= t1]
        if not window:
            return None
        return [float(np.mean([w[i] for w in window])) / 100.0 for i in range(len(window[0]))]


# ---------------------------------------------------------------------------------------- stages
def measure_matmul() -> float:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 10 * 2 * 8192 ** 3 / (start.elapsed_time(end) / 1e3) / 1e12


def micro(cfg, data_dir: Path, device: torch.device, n_batches: int, cuda: bool) -> dict:
    """Target prefill and drafter fwd+bwd on fixed batches, timed with events."""
    dtype = torch.bfloat16 if cuda else torch.float32
    ds = ArrowDataset(data_dir)
    tc, dc = cfg.train, cfg.drafter
    plan = BucketPlan(ds, block_size=dc.block_size, token_budget=tc.token_budget, max_length=tc.max_length,
                      num_buckets=tc.num_buckets, max_batch_samples=tc.max_batch_samples)
    spec = BatchingSpec(block_size=dc.block_size, max_anchors=dc.max_anchors, max_length=tc.max_length,
                        mask_token_id=cfg.target.vocab_size - 1, seed=0, len_multiple=128 if cuda else 1,
                        anchor_multiple=128 // dc.block_size if cuda else 1)
    pos = BatchPositions(plan, start_pos=0, world=1, rank=0, replicas=1)
    hbs = [host_batch_for(ds, pos, spec, i) for i in range(n_batches)]
    target = load_target(cfg.target, dc.target_layers, path=None, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def timed(fn, reps):
        sync()
        t0 = time.perf_counter()
        for i in range(reps):
            fn(i)
        sync()
        return time.perf_counter() - t0

    host = [_host_tensors(hb, cuda) for hb in hbs]
    timed(lambda i: target(host[i % 2]["input_ids"].to(device)), 2)
    t_target = timed(lambda i: target(host[i]["input_ids"].to(device)), n_batches)
    real_tokens = sum(hb.num_tokens for hb in hbs)
    padded_tokens = sum(hb.input_ids.size for hb in hbs)
    tflop_target = sum(target_flops(cfg, hb.lengths, hb.input_ids.shape[1]) for hb in hbs)
    out = {"target_prefill_tok_per_s": real_tokens / t_target,
           "target_prefill_padded_tok_per_s": padded_tokens / t_target,
           "target_tflops": tflop_target / t_target / 1e12,
           "batches": n_batches, "real_tokens": real_tokens, "padded_tokens": padded_tokens}
    feats = [run_target(target, host[i], hbs[i], device, device, None) for i in range(min(4, n_batches))]
    with torch.device(device):
        drafter = Drafter(cfg.target, dc)
    drafter.init_weights(1)
    drafter.embed_tokens.to(dtype)
    drafter.lm_head.to(dtype)
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    drafter.train()
    reps = DrafterReplicas([drafter], [device], lr=tc.lr, weight_decay=0.0, grad_clip=1.0, total_steps=1000,
                           warmup_frac=0.04, min_lr_frac=0.1, gamma=dc.loss_gamma, chunk_rows=dc.loss_chunk_tokens,
                           use_flex=cuda, autocast_dtype=dtype if cuda else None)
    t_compile = timed(lambda i: reps.step([feats[i % len(feats)]]), 3)
    n_steps = 2 * len(feats)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t_drafter = timed(lambda i: reps.step([feats[i % len(feats)]]), n_steps)
    flops = sum(drafter_flops(cfg, feats[i % len(feats)]) for i in range(n_steps))
    out.update({
        "drafter_step_s": t_drafter / n_steps,
        "drafter_warmup_s": t_compile,
        "drafter_tflops": flops / t_drafter / 1e12,
        "drafter_mfu_datasheet": flops / t_drafter / 1e12 / PEAK_BF16_TFLOPS,
        "drafter_tok_per_s": sum(f.num_tokens for f in (feats[i % len(feats)] for i in range(n_steps))) / t_drafter,
        "drafter_trainable_params": sum(p.numel() for p in reps.params),
        "drafter_peak_gib": torch.cuda.max_memory_allocated(device) / 2 ** 30 if cuda else None,
        "target_params": sum(p.numel() for p in target.parameters()),
    })
    return out


def end_to_end(name: str, cfg_name: str, data_dir: Path, work: Path, extra: list[str], steps: int,
               sampler: BusySampler | None, gpus: list[int], timeout_s: float) -> dict:
    run_dir = work / f"run-{name}"
    cmd = [sys.executable, "-u", "-m", "trainer", "--config", cfg_name, "--data", str(data_dir), "--run-dir",
           str(run_dir), "--steps", str(steps), "--log-every", "5", *extra]
    env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    t0 = time.time()
    with open(work / f"log-{name}.txt", "w") as log:
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    recs = []
    mfile = run_dir / "metrics.jsonl"
    if mfile.exists():
        recs = [json.loads(line) for line in mfile.read_text().splitlines() if line.strip()]
    out = {"name": name, "rc": rc, "wall_s": time.time() - t0, "records": len(recs)}
    measured = [r for r in recs if r["step"] > 10]        # the first 10 steps: warm-up and compiles
    if len(measured) >= 2:
        t_first = recs[recs.index(measured[0]) - 1]["time_s"]
        t_last = measured[-1]["time_s"]
        steps_done = measured[-1]["step"] - recs[recs.index(measured[0]) - 1]["step"]
        tokens = sum(r["tok_per_s"] * r["step_time_s"] * 5 for r in measured)
        out.update({"tok_per_s": tokens / (t_last - t_first), "step_time_s": (t_last - t_first) / steps_done,
                    "data_wait_s": float(np.mean([r["data_wait_s"] for r in measured])),
                    "mem_peak_gib": max(r["mem_peak_gib"] for r in recs), "loss_first": recs[0]["loss"],
                    "loss_last": recs[-1]["loss"]})
        if sampler is not None:
            busy = sampler.busy(t_first, t_last)
            if busy is not None:
                out["busy"] = {f"gpu{g}": round(busy[g], 3) for g in gpus}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="CPU smoke run (tiny config)")
    ap.add_argument("--samples", type=int, default=1500)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--only", default="", help="comma list of e2e runs to do (default all)")
    args = ap.parse_args()
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available() and not args.quick
    cfg_name = "bench-1b" if cuda else "tiny"
    cfg = get_preset(cfg_name)
    results: dict = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "config": cfg_name,
                     "torch": torch.__version__}
    if cuda:
        results["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        results["matmul_bf16_tflops"] = measure_matmul()
    data_dir = work / f"data-{cfg_name}"
    if not data_dir.exists():
        t0 = time.time()
        write_dataset(data_dir, args.samples if cuda else 400, min_len=cfg.synth_min_len, max_len=cfg.synth_max_len,
                      vocab=cfg.target.vocab_size)
        results["synth_write_s"] = time.time() - t0

    def save():
        (work / "trainer-bench.json").write_text(json.dumps(results, indent=2, default=str))

    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    try:
        results["micro"] = micro(cfg, data_dir, device, 8 if cuda else 3, cuda)
    except Exception as exc:  # noqa: BLE001 — keep going: the e2e runs are still worth having
        import traceback

        traceback.print_exc()
        results["micro"] = {"error": repr(exc)}
    save()
    print(json.dumps(results["micro"], indent=1, default=str), flush=True)
    torch.cuda.empty_cache() if cuda else None

    dev = ["--device", "cuda"] if cuda else ["--device", "cpu"]
    runs = [("sequential", dev + ["--sequential"]), ("pipeline", dev)]
    n_gpu = torch.cuda.device_count() if cuda else 0
    if n_gpu >= 2:
        runs.append(("split-1+1", dev + ["--target-devices", "0", "--drafter-devices", "1"]))
    if cuda:                      # inductor on a 2-core CPU box takes minutes: GPU only
        runs.append(("compiled", dev + ["--compile-drafter"]))
    only = {x for x in args.only.split(",") if x}
    results["e2e"] = []
    with BusySampler(list(range(n_gpu))) if cuda else _Null() as sampler:
        for name, extra in runs:
            if only and name not in only:
                continue
            r = end_to_end(name, cfg_name, data_dir, work, extra, args.steps if cuda else 20,
                           sampler if cuda else None, list(range(n_gpu)), (200 if name == "compiled" else 130) if cuda else 300)
            print(json.dumps(r, default=str), flush=True)
            results["e2e"].append(r)
            save()
    by = {r["name"]: r for r in results["e2e"]}
    if "tok_per_s" in by.get("sequential", {}) and "tok_per_s" in by.get("pipeline", {}):
        results["pipeline_over_sequential"] = by["pipeline"]["tok_per_s"] / by["sequential"]["tok_per_s"]
    if "tok_per_s" in by.get("split-1+1", {}) and "tok_per_s" in by.get("sequential", {}):
        results["split_over_sequential"] = by["split-1+1"]["tok_per_s"] / by["sequential"]["tok_per_s"]
    if "tok_per_s" in by.get("compiled", {}) and "tok_per_s" in by.get("pipeline", {}):
        results["compiled_over_eager"] = by["compiled"]["tok_per_s"] / by["pipeline"]["tok_per_s"]
    save()
    print("\n| run | rc | tok/s | step s | data wait s | peak GiB | busy | loss first->last |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results["e2e"]:
        print(f"| {r['name']} | {r['rc']} | {r.get('tok_per_s', float('nan')):.0f} | "
              f"{r.get('step_time_s', float('nan')):.3f} | {r.get('data_wait_s', float('nan')):.3f} | "
              f"{r.get('mem_peak_gib', float('nan')):.1f} | {r.get('busy')} | "
              f"{r.get('loss_first', float('nan')):.3f}->{r.get('loss_last', float('nan')):.3f} |")
    for k in ("pipeline_over_sequential", "split_over_sequential", "compiled_over_eager"):
        if k in results:
            print(f"{k}: {results[k]:.2f}")
    return 0


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    raise SystemExit(main())
