"""The trainer's entry point: arguments, set-up, the step loop, checkpoints, signals, OOM.

    python -u -m trainer --config tiny --data DIR --synthetic-samples 4000 --run-dir DIR \\
        --steps 300 --log-every 10 [--target-devices 0,1,2,3,4] [--drafter-devices 5,6,7] ...

Exit codes: 0 finished; 1 unexpected error or CUDA out of memory (the allocator's numbers
are printed first, and torch's own OutOfMemoryError text); 2 bad input (config, data,
arguments); 143 stopped by SIGTERM after saving a checkpoint (resume with --resume).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import checkpoint
from .config import ConfigError, get_preset, with_overrides
from .data import ArrowDataset, BucketPlan, DataError
from .metrics import ProgressReporter, WandbLogger, milestone, say
from .model import Drafter, HuggingFaceTarget, hf_config_to_target, load_target
from .pipeline import BatchingSpec, BatchPositions, Pipeline
from .replicas import DrafterReplicas
from .synth import write_dataset

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_SIGTERM = 0, 1, 2, 143
RECOMPILE_LIMIT = 16    # deliberate: dynamic-shape flex/drafter graphs settle within a few; more is a storm


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m trainer", description="DFlash drafter trainer (dfctl's bundled workload)")
    ap.add_argument("--config", default="tiny", help="preset name (trainer/config.py): tiny, bench-1b, qwen36-27b-dflash")
    ap.add_argument("--data", required=True, help="dataset directory (Arrow) or file")
    ap.add_argument("--synthetic-samples", type=int, default=0,
                    help="if --data does not exist, first write a synthetic dataset of N samples there")
    ap.add_argument("--run-dir", required=True, help="metrics.jsonl, checkpoints and wandb files go here")
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps to train (total, resume included)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--target-devices", default=None, help="comma-separated CUDA indices for target workers")
    ap.add_argument("--drafter-devices", default=None, help="comma-separated CUDA indices for drafter replicas")
    ap.add_argument("--prefetch-workers", type=int, default=4)
    ap.add_argument("--token-budget", type=int, default=None, help="target tokens per batch (preset's otherwise)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda if available otherwise cpu")
    ap.add_argument("--compile-drafter", action="store_true", help="torch.compile the draft layers (fixed shapes)")
    ap.add_argument("--grad-checkpointing", action="store_true", help="recompute draft layers in backward")
    ap.add_argument("--checkpoint-every", type=int, default=0, help="save every N steps (0: only on SIGTERM/end)")
    ap.add_argument("--resume", action="store_true", help="continue from <run-dir>/checkpoints/latest")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after N steps of this invocation with a checkpoint (time-sliced jobs; resume later)")
    ap.add_argument("--target-model", default=None, help="safetensors file or model directory for the target")
    ap.add_argument("--wandb-project", default="dfctl-dflash")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sequential", action="store_true", help="no threads: data, target, drafter one after another")
    return ap.parse_args(argv)


def _device_list(spec: str | None, kind: str, default_index: int) -> list[torch.device]:
    """CUDA: the listed indices. CPU: as many 'cpu' workers as listed (tests use 0,1)."""
    if spec is None or spec == "":
        indices = [default_index]
    else:
        try:
            indices = [int(x) for x in spec.split(",") if x.strip() != ""]
        except ValueError:
            raise ConfigError(f"device list {spec!r}: expected comma-separated integers") from None
    if kind == "cpu":
        return [torch.device("cpu") for _ in indices]
    count = torch.cuda.device_count()
    bad = [i for i in indices if not 0 <= i < count]
    if bad:
        raise ConfigError(f"device list {spec!r}: CUDA device(s) {bad} do not exist ({count} visible)")
    return [torch.device("cuda", i) for i in indices]


@dataclass
class RunResult:
    exit_code: int
    steps_done: int = 0
    history: list[dict] = field(default_factory=list)


class _Termination:
    """SIGTERM sets a flag; the step loop saves a checkpoint at the next step boundary."""

    def __init__(self):
        self.requested = False
        self._old = None

    def install(self) -> None:
        try:
            self._old = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:           # not the main thread (in-process tests): no handler
            self._old = None

    def _handle(self, signum, frame):
        self.requested = True

    def restore(self) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


def _report_oom(devices: list[torch.device]) -> None:
    traceback.print_exc()
    for idx in sorted({d.index or 0 for d in devices if d.type == "cuda"}):
        gib = 1024 ** 3
        say(f"[oom] device=cuda:{idx} alloc_gib={torch.cuda.memory_allocated(idx) / gib:.2f} "
            f"peak_alloc_gib={torch.cuda.max_memory_allocated(idx) / gib:.2f} "
            f"reserved_gib={torch.cuda.memory_reserved(idx) / gib:.2f} "
            f"peak_reserved_gib={torch.cuda.max_memory_reserved(idx) / gib:.2f}")
        say(torch.cuda.memory_summary(idx, abbreviated=True))


def run(args: argparse.Namespace) -> RunResult:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    kind = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is visible")
    out = say if rank == 0 else (lambda line: None)
    if world > 1:
        import torch.distributed as dist

        if kind == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl" if kind == "cuda" else "gloo")

    cfg = get_preset(args.config)
    target_path = args.target_model
    if target_path and Path(target_path, "config.json").exists():
        import json

        raw = json.loads(Path(target_path, "config.json").read_text())
        raw = raw.get("text_config", raw)       # multimodal wrappers nest the decoder's config
        try:
            cfg = with_overrides(cfg, target=hf_config_to_target(raw))
        except KeyError as exc:
            raise ConfigError(f"{target_path}/config.json: missing {exc}") from None
    if cfg.needs_target_model and not target_path:
        raise ConfigError(f"--config {cfg.name} needs --target-model (a random {cfg.target.num_layers}-layer "
                          "target is no use for this drafter)")
    if args.token_budget:
        cfg = with_overrides(cfg, token_budget=args.token_budget)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)

    # -- data --------------------------------------------------------------------------
    data_path = Path(args.data)
    if not data_path.exists():
        if args.synthetic_samples <= 0:
            raise DataError(f"dataset {data_path} does not exist (pass --synthetic-samples N to create one)")
        out(f"Writing {args.synthetic_samples} synthetic samples to {data_path}...")
        write_dataset(data_path, args.synthetic_samples, min_len=cfg.synth_min_len, max_len=cfg.synth_max_len,
                      vocab=cfg.target.vocab_size, seed=args.seed)
    out(f"Loading dataset from {data_path}...")
    dataset = ArrowDataset(data_path)
    dc, tc = cfg.drafter, cfg.train
    plan = BucketPlan(dataset, block_size=dc.block_size, token_budget=tc.token_budget, max_length=tc.max_length,
                      num_buckets=tc.num_buckets, max_batch_samples=tc.max_batch_samples, seed=args.seed)
    out(f"  {len(dataset)} samples loaded (Arrow-backed, lazy access)")
    out(f"  {plan.filtered} samples filtered (< {plan.min_supervised} supervised tokens = 2 x block_size), "
        f"{len(plan.kept_rows)} kept")
    if rank == 0:
        milestone("dataset_loaded", samples=len(dataset))
    for line in plan.describe():
        out(line)

    # -- devices and models ------------------------------------------------------------
    default_index = local_rank if world > 1 else 0
    target_devices = _device_list(args.target_devices, kind, default_index)
    drafter_devices = _device_list(args.drafter_devices, kind, default_index)
    cuda = kind == "cuda"
    dtype = getattr(torch, tc.dtype) if cuda else torch.float32
    use_flex = cuda
    if cuda:
        import importlib

        importlib.import_module("torch._dynamo").config.recompile_limit = RECOMPILE_LIMIT
        torch._logging.set_logs(recompiles=True)
        out(f"[compile] recompile_limit={RECOMPILE_LIMIT}; recompiles are logged (torch._logging recompiles=True)")
    out(f"\nLoading {len(target_devices)} target models...")
    targets = []
    for i, dev in enumerate(target_devices):
        out(f"  Target {i} on {dev}...")
        if target_path and _is_foreign_hf(target_path):
            targets.append(HuggingFaceTarget(target_path, dc.target_layers, dev, dtype))
        else:
            targets.append(load_target(cfg.target, dc.target_layers, path=target_path, device=dev, dtype=dtype,
                                       seed=args.seed))
        if rank == 0:
            milestone("target_loaded", index=i, device=dev)
    drafters = []
    for dev in drafter_devices:
        with torch.device(dev):
            d = Drafter(cfg.target, dc)
        d.init_weights(args.seed + 1)          # the same seed on every replica; synced again below
        d.embed_tokens.to(dtype)
        d.lm_head.to(dtype)
        d.share_target_weights(targets[0].embed_weight, targets[0].lm_head_weight)
        d.grad_checkpointing = args.grad_checkpointing
        if args.compile_drafter:
            for layer in d.layers:
                layer.compile(dynamic=None)     # automatic: a dim that changes (samples per batch) turns dynamic
        d.train()
        drafters.append(d)
    replicas = DrafterReplicas(
        drafters, drafter_devices, lr=tc.lr, weight_decay=tc.weight_decay, grad_clip=tc.grad_clip,
        total_steps=args.steps, warmup_frac=tc.warmup_frac, min_lr_frac=tc.min_lr_frac, gamma=dc.loss_gamma,
        chunk_rows=dc.loss_chunk_tokens, use_flex=use_flex, autocast_dtype=dtype if cuda else None,
        process_group_world=world, compiled=args.compile_drafter)
    trainable = sum(p.numel() for p in replicas.params)
    out(f"Drafter: {trainable / 1e6:.1f}M trainable parameters x {len(drafters)} replica(s); "
        f"target layers {list(dc.target_layers)}; block {dc.block_size}; world {world}")

    # -- resume ------------------------------------------------------------------------
    start_step, next_pos = 0, 0
    layout = {"world": world, "replicas": len(drafters)}
    if args.resume:
        ck = checkpoint.latest(run_dir)
        if ck is None:
            out(f"resume: no checkpoint under {checkpoint.checkpoint_dir(run_dir)}; starting fresh")
        else:
            state = checkpoint.load(ck)
            missing = replicas.master.load_state_dict(state["drafter"], strict=False)
            if missing.unexpected_keys:
                raise ConfigError(f"{ck}: unexpected drafter keys {missing.unexpected_keys[:3]}")
            replicas.optimizer.load_state_dict(state["optimizer"])
            replicas.scheduler.load_state_dict(state["scheduler"])
            replicas.sync_replicas()
            start_step, next_pos = int(state["step"]), int(state["next_pos"])
            out(f"resume: {ck} step={start_step} next_batch_pos={next_pos}")

    # -- pipeline ----------------------------------------------------------------------
    anchor_multiple = 128 // dc.block_size if use_flex else 1
    # --compile-drafter: a few fixed shapes (lengths padded to bucket edges, anchors to the
    # maximum) so the compiled graphs settle; eager mode keeps every batch's own shape.
    length_steps: tuple[int, ...] = ()
    fixed_anchors = None
    if args.compile_drafter:
        step = 128 if use_flex else 1
        length_steps = tuple(sorted({-(-min(b.hi - 1, tc.max_length) // step) * step for b in plan.buckets}))
        fixed_anchors = -(-dc.max_anchors // anchor_multiple) * anchor_multiple
    spec = BatchingSpec(block_size=dc.block_size, max_anchors=dc.max_anchors, max_length=tc.max_length,
                        mask_token_id=dc.mask_token_id if dc.mask_token_id >= 0 else cfg.target.vocab_size - 1,
                        seed=args.seed, len_multiple=128 if use_flex else 1, anchor_multiple=anchor_multiple,
                        length_steps=length_steps, fixed_anchors=fixed_anchors)
    positions = BatchPositions(plan, start_pos=next_pos, world=world, rank=rank, replicas=len(drafters))
    pipeline = Pipeline(dataset=dataset, positions=positions, spec=spec, targets=targets,
                        target_devices=target_devices, drafter_devices=drafter_devices,
                        prefetch_workers=args.prefetch_workers, sequential=args.sequential)
    wandb_logger = None
    if rank == 0:
        wandb_logger = WandbLogger(args.wandb_project, run_dir, {**cfg.to_dict(), "args": vars(args), **layout})
    reporter = ProgressReporter(run_dir=run_dir, block_size=dc.block_size, log_every=args.log_every,
                                devices=target_devices + drafter_devices, wandb_logger=wandb_logger,
                                enabled=rank == 0)
    term = _Termination()
    term.install()
    result = RunResult(EXIT_OK, start_step)
    per_step = world * len(drafters)

    def save(step: int) -> None:
        if rank == 0:
            path = checkpoint.save(run_dir, step=step, next_pos=next_pos + (step - start_step) * per_step,
                                   drafter_state=replicas.master.trainable_state_dict(),
                                   optimizer=replicas.optimizer, scheduler=replicas.scheduler,
                                   config=cfg.to_dict(), layout=layout)
            milestone("checkpoint_saved", step=step, path=path)

    exit_code = EXIT_OK
    pipeline.start()
    try:
        step = start_step
        while step < args.steps:
            t0 = time.perf_counter()
            batches = pipeline.next_step_batches()
            wait = time.perf_counter() - t0
            metrics = replicas.step(batches)
            step += 1
            if step == start_step + 1 and rank == 0:
                milestone("first_step")
            reporter.update(step, metrics, tokens=sum(b.num_tokens for b in batches) * world,
                            samples=sum(b.num_samples for b in batches) * world, data_wait_s=wait,
                            lr=replicas.last_lr)
            del batches
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                save(step)
            if args.stop_after and step - start_step >= args.stop_after and step < args.steps:
                out(f"--stop-after {args.stop_after}: saving a checkpoint at step {step} and stopping")
                if not (args.checkpoint_every and step % args.checkpoint_every == 0):
                    save(step)
                break
            if _stop_requested(term.requested, world, drafter_devices[0]):
                out(f"SIGTERM: saving a checkpoint at step {step} and stopping")
                if not (args.checkpoint_every and step % args.checkpoint_every == 0):
                    save(step)
                exit_code = EXIT_SIGTERM
                break
        else:
            if args.checkpoint_every and step % args.checkpoint_every:
                save(step)
        result.steps_done = step
        if world > 1:
            _check_ranks_agree(replicas, out)
        out(f"[done] steps={step} exit_code={exit_code}")
    finally:
        failed = sys.exc_info()[0] is not None
        pipeline.stop()
        replicas.close()
        reporter.close()
        term.restore()
        if wandb_logger is not None:
            wandb_logger.finish(exit_code=1 if failed or exit_code not in (EXIT_OK, EXIT_SIGTERM) else 0)
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
    result.exit_code = exit_code
    result.history = reporter.history
    return result


def _stop_requested(local: bool, world: int, device: torch.device) -> bool:
    """Under torchrun every rank must stop at the same step (a rank that stops alone leaves
    the others hanging in the next all-reduce): the SIGTERM flag is all-reduced (max)."""
    if world <= 1:
        return local
    import torch.distributed as dist

    flag = torch.tensor([1.0 if local else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _is_foreign_hf(path: str) -> bool:
    """A model directory whose config.json names a model type other than qwen3."""
    import json

    cfg_file = Path(path, "config.json")
    if not cfg_file.exists():
        return False
    return json.loads(cfg_file.read_text()).get("model_type") not in (None, "qwen3")


def _check_ranks_agree(replicas: DrafterReplicas, out) -> None:
    import torch.distributed as dist

    checksum = torch.stack([p.detach().double().sum() for p in replicas.params]).sum().item()
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, checksum)
    agree = all(abs(g - gathered[0]) <= 1e-9 * max(1.0, abs(gathered[0])) for g in gathered)
    out(f"[dist] ranks={len(gathered)} params_in_sync={'true' if agree else 'false'} checksum={gathered[0]:.10e}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    devices_for_oom: list[torch.device] = []
    if torch.cuda.is_available():
        devices_for_oom = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    try:
        return run(args).exit_code
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except torch.OutOfMemoryError:
        _report_oom(devices_for_oom)
        return EXIT_ERROR
