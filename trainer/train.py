"""The trainer's entry point: arguments, set-up, the step loop, checkpoints, signals, OOM.

    python -u -m trainer --config tiny --data DIR --synthetic-samples 4000 --run-dir DIR \\
        --steps 300 --log-every 10 [--target-devices 0,1,2,3,4] [--drafter-devices 5,6,7] ...

Exit codes: 0 finished; 1 unexpected error or CUDA out of memory (the allocator's numbers
are printed first, and torch's own OutOfMemoryError text); 2 bad input (config, data,
arguments, a --resume / --resume-from that cannot be exact); 143 stopped by SIGTERM after
saving a checkpoint (resume with --resume, or --resume-from RUN_DIR into a new run dir).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import checkpoint, resume_source, step_profile
from .config import FULL, PRESETS, SLIDING, SLIDING_MASKS, ConfigError, RunConfig, get_preset, with_overrides
from .data import ArrowDataset, BucketPlan, DataError, split_eval_rows
from .loss import LOSS_KERNELS
from .metrics import ProgressReporter, WandbLogger, milestone, say, summarise_metrics
from .model import Drafter, HuggingFaceTarget, hf_config_to_target, load_target
from .pipeline import BatchingSpec, BatchPositions, Pipeline, host_batch_for, host_tensors, launch_guard, run_target
from .replicas import DrafterReplicas
from .synth import write_dataset

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_SIGTERM = 0, 1, 2, 143
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
DRAFTER_STREAMS = ("default", "high")      # --drafter-stream
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
    ap.add_argument("--compile-target", action="store_true",
                    help="torch.compile the target's decoder layers (the bundled Qwen3 target; issue 23: the "
                         "target prefill is a third of a compiled step, 43 %% -> 56 %% MFU compiled)")
    ap.add_argument("--compile-mode", choices=COMPILE_MODES, default="default",
                    help="torch.compile mode for --compile-drafter / --compile-target (max-autotune-no-cudagraphs: "
                         "inductor times its own GEMM templates against cuBLAS; minutes more compiling)")
    ap.add_argument("--loss-kernel", choices=LOSS_KERNELS, default="inductor",
                    help="CUDA: the loss's pass over the logits through inductor (default) or as one in-place Triton "
                         "kernel (trainer/loss_kernel.py: 11 %% faster per chunk, no faster end to end on an H200)")
    ap.add_argument("--drafter-stream", choices=DRAFTER_STREAMS, default="default",
                    help="CUDA: the drafter's steps on the device's default stream, or on a high-priority one so "
                         "that the target's kernels (their own stream) fill the gaps instead of contending")
    ap.add_argument("--profile-steps", type=_profile_steps, default=None, metavar="A:B",
                    help="torch.profiler over optimizer steps A..B: a trace and a kernel table in <run-dir>/profile")
    ap.add_argument("--grad-checkpointing", action="store_true", help="recompute draft layers in backward")
    ap.add_argument("--checkpoint-every", type=int, default=0, help="save every N steps (0: only on SIGTERM/end)")
    resume_how = ap.add_mutually_exclusive_group()
    resume_how.add_argument("--resume", action="store_true", help="continue from <run-dir>/checkpoints/latest")
    resume_how.add_argument("--resume-from", default=None, metavar="PATH",
                            help="continue another run: its run dir (its newest complete checkpoint) or a "
                                 "checkpoint file; this run writes to its own --run-dir (exit 2 if PATH has no "
                                 "complete checkpoint or another config)")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after N steps of this invocation with a checkpoint (time-sliced jobs; resume later)")
    ap.add_argument("--target-model", default=None, help="safetensors file or model directory for the target")
    ap.add_argument("--wandb-project", default="dfctl-dflash")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sequential", action="store_true", help="no threads: data, target, drafter one after another")
    ap.add_argument("--target-layers", type=_int_list, default=None,
                    help="comma-separated target layers feeding the drafter (default: the preset's for its own "
                         "target, else spread from 1 to n-3 as the reference does)")
    ap.add_argument("--draft-layers", type=int, default=None, help="drafter depth (preset's otherwise)")
    ap.add_argument("--mask-token-id", type=int, default=None,
                    help="id fed in the MASK slots; the serving config must use the same (exported)")
    ap.add_argument("--draft-layer-types", type=_layer_types, default=None,
                    help="comma-separated per draft layer: full or sliding (default: the preset's, else the "
                         "--init-drafter's config.json, else all full)")
    ap.add_argument("--sliding-window", type=int, default=None, help="a sliding layer's window W (positions)")
    ap.add_argument("--sliding-mask", choices=SLIDING_MASKS, default=None,
                    help="how a sliding window is counted: inference (the engines' rule, default) or training "
                         "(speculators' training mask)")
    ap.add_argument("--eval-fraction", type=float, default=0.0, help="share of samples held out for evaluation")
    ap.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (a multiple of --log-every)")
    ap.add_argument("--eval-batches", type=int, default=8, help="held-out batches per evaluation")
    ap.add_argument("--eval-decode-prompts", type=int, default=4,
                    help="held-out prompts decoded per evaluation for eval_accept_len_decode (the serving "
                         "way: trainer/eval_decode.py); 0: none")
    ap.add_argument("--eval-decode-tokens", type=int, default=32, help="tokens generated per decoded prompt")
    ap.add_argument("--init-drafter", default=None,
                    help="start from a DFlash drafter directory (trainer.export's or the reference's) to fine-tune")
    return ap.parse_args(argv)


def _profile_steps(text: str) -> tuple[int, int]:
    try:
        return step_profile.parse_steps(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def _layer_types(text: str) -> tuple[str, ...]:
    names = {"full": FULL, "sliding": SLIDING, FULL: FULL, SLIDING: SLIDING}
    out = tuple(names.get(x.strip()) for x in text.split(",") if x.strip())
    if not out or None in out:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated full / sliding")
    return out  # type: ignore[return-value]  # None was refused above


def init_drafter_config(path: Path) -> dict:
    """What a DFlash drafter directory's config.json says about the shape it was trained
    with (the MASK id, layer types, window, feature layers): --init-drafter starts from those
    unless a flag says otherwise. {} when it has no config.json."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        return {}
    try:
        raw = json.loads(cfg_file.read_text())
    except ValueError as exc:
        raise ConfigError(f"--init-drafter {cfg_file}: not JSON ({exc})") from None
    dflash = raw.get("dflash_config") if isinstance(raw.get("dflash_config"), dict) else {}
    out: dict = {}
    if dflash.get("mask_token_id") is not None:
        out["mask_token_id"] = int(dflash["mask_token_id"])
    if dflash.get("target_layer_ids"):
        out["target_layers"] = tuple(int(x) for x in dflash["target_layer_ids"])
    if raw.get("layer_types"):
        out["layer_types"] = tuple(raw["layer_types"])
    if raw.get("sliding_window") and SLIDING in (raw.get("layer_types") or ()):
        out["sliding_window"] = int(raw["sliding_window"])
    return out


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


@dataclass
class Session:
    """What a run holds between build and close (one per process)."""

    args: argparse.Namespace
    cfg: RunConfig
    world: int
    rank: int
    run_dir: Path
    dataset: ArrowDataset
    plan: BucketPlan
    eval_plan: BucketPlan | None
    spec: BatchingSpec
    targets: list
    target_devices: list[torch.device]
    drafter_devices: list[torch.device]
    replicas: DrafterReplicas
    start_step: int = 0
    next_pos: int = 0
    pipeline: Pipeline | None = None
    reporter: ProgressReporter | None = None
    wandb_logger: WandbLogger | None = None
    term: _Termination = field(default_factory=_Termination)
    resumed: dict = field(default_factory=dict)    # joins the first metrics.jsonl record after a resume

    def out(self, line: str) -> None:
        if self.rank == 0:
            say(line)

    @property
    def layout(self) -> dict:
        return {"world": self.world, "replicas": len(self.drafter_devices)}


def run(args: argparse.Namespace) -> RunResult:
    """build -> resume -> start -> train_loop -> close."""
    s = build(args)
    resume(s)
    start(s)
    exit_code, step = EXIT_ERROR, s.start_step
    try:
        exit_code, step = train_loop(s)
    finally:
        close(s, exit_code, failed=sys.exc_info()[0] is not None)
    return RunResult(exit_code, step, s.reporter.history)


def _distributed(args: argparse.Namespace) -> tuple[int, int, int, str]:
    """(world, rank, local_rank, device kind); joins the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    kind = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is visible")
    if world > 1:
        import torch.distributed as dist

        if kind == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl" if kind == "cuda" else "gloo")
        # every rank, once: under torchrun's `[rankN]:` prefix this tells a watcher which
        # global ranks each node holds before anything fails (a SIGKILLed worker says nothing,
        # and its agent names only its local rank)
        say(f"[dist] rank={rank} local_rank={local_rank} world_size={world} joined")
    return world, rank, local_rank, kind


def run_config(args: argparse.Namespace) -> RunConfig:
    """The preset, with the target's own config.json (when --target-model has one) and the
    CLI's shape flags applied, feature layers derived and validated against that target."""
    get_preset(args.config)                   # the name, and the preset as it stands, are valid
    cfg = PRESETS[args.config]                # unresolved: derived fields follow the final target
    target = None
    if args.target_model and Path(args.target_model, "config.json").exists():
        cfg_file = Path(args.target_model, "config.json")
        try:
            target = hf_config_to_target(json.loads(cfg_file.read_text()))
        except KeyError as exc:
            raise ConfigError(f"{cfg_file}: missing {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{cfg_file}: not a model config ({exc})") from None
    if cfg.needs_target_model and not args.target_model:
        raise ConfigError(f"--config {cfg.name} needs --target-model (a random {cfg.target.num_layers}-layer "
                          "target is no use for this drafter)")
    init = init_drafter_config(Path(args.init_drafter)) if args.init_drafter else {}
    mask_token_id = args.mask_token_id if args.mask_token_id is not None else init.get("mask_token_id")
    if mask_token_id is None and args.target_model:
        mask_token_id = tokenizer_mask_id(Path(args.target_model))
    layer_types = args.draft_layer_types or init.get("layer_types")
    if args.draft_layer_types is None and args.draft_layers is not None and layer_types \
            and len(layer_types) != args.draft_layers:
        layer_types = None            # --draft-layers wins over the init drafter's depth
    draft_layers = args.draft_layers if args.draft_layers is not None else \
        (len(layer_types) if layer_types else None)
    return with_overrides(cfg, token_budget=args.token_budget or None, target=target,
                          target_layers=args.target_layers or init.get("target_layers"), draft_layers=draft_layers,
                          mask_token_id=mask_token_id, layer_types=layer_types,
                          sliding_window=args.sliding_window or init.get("sliding_window"),
                          sliding_mask=args.sliding_mask)


MASK_TOKEN = "<|MASK|>"   # the token the reference adds for DFlash (SpecForge / z-lab)


def tokenizer_mask_id(model_dir: Path) -> int | None:
    """The MASK id the target's tokenizer defines, if any: its `mask_token`, else a
    `<|MASK|>` added token, read from tokenizer_config.json's `added_tokens_decoder` or
    tokenizer.json's `added_tokens` (the files transformers writes). None when neither says."""
    added: dict[str, int] = {}
    mask_name = None
    tc_file, tj_file = model_dir / "tokenizer_config.json", model_dir / "tokenizer.json"
    try:
        if tc_file.is_file():
            tc = json.loads(tc_file.read_text())
            mask = tc.get("mask_token")
            mask_name = mask.get("content") if isinstance(mask, dict) else mask
            for idx, tok in (tc.get("added_tokens_decoder") or {}).items():
                if isinstance(tok, dict) and "content" in tok:
                    added[tok["content"]] = int(idx)
        if tj_file.is_file():
            for tok in json.loads(tj_file.read_text()).get("added_tokens") or []:
                if isinstance(tok, dict) and "content" in tok and "id" in tok:
                    added.setdefault(tok["content"], int(tok["id"]))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{model_dir}: unreadable tokenizer files ({exc})") from None
    for name in (mask_name, MASK_TOKEN):
        if name and name in added:
            return added[name]
    return None


def _data(args: argparse.Namespace, cfg: RunConfig, out) -> tuple[ArrowDataset, BucketPlan, BucketPlan | None]:
    """The dataset (written first if synthetic and absent), the training plan over the rows
    not held out, and the eval plan over those that are (None without --eval-fraction)."""
    data_path = Path(args.data)
    if not data_path.exists():
        if args.synthetic_samples <= 0:
            raise DataError(f"dataset {data_path} does not exist (pass --synthetic-samples N to create one)")
        out(f"Writing {args.synthetic_samples} synthetic samples to {data_path}...")
        write_dataset(data_path, args.synthetic_samples, min_len=cfg.synth_min_len, max_len=cfg.synth_max_len,
                      vocab=cfg.synth_vocab or cfg.target.vocab_size, seed=args.seed, cycle=cfg.synth_cycle)
    out(f"Loading dataset from {data_path}...")
    dataset = ArrowDataset(data_path)
    train_rows, eval_rows = split_eval_rows(len(dataset), args.eval_fraction, args.seed)
    dc, tc = cfg.drafter, cfg.train
    plan_args = dict(block_size=dc.block_size, token_budget=tc.token_budget, max_length=tc.max_length,
                     num_buckets=tc.num_buckets, max_batch_samples=tc.max_batch_samples, seed=args.seed)
    plan = BucketPlan(dataset, rows=train_rows, **plan_args)
    eval_plan = BucketPlan(dataset, rows=eval_rows, **plan_args) if len(eval_rows) else None
    out(f"  {len(dataset)} samples loaded (Arrow-backed, lazy access)")
    out(f"  {plan.filtered} samples filtered (< {plan.min_supervised} supervised tokens = 2 x block_size), "
        f"{len(plan.kept_rows)} kept")
    if eval_plan is not None:
        out(f"  {len(eval_plan.kept_rows)} samples held out for evaluation (--eval-fraction {args.eval_fraction})")
    return dataset, plan, eval_plan


def _models(args, cfg: RunConfig, target_devices, drafter_devices, dtype, out) -> tuple[list, list[Drafter]]:
    """The frozen target on each target device and a drafter replica on each drafter device."""
    dc = cfg.drafter
    out(f"\nLoading {len(target_devices)} target models...")
    targets = []
    for i, dev in enumerate(target_devices):
        out(f"  Target {i} on {dev}...")
        if args.target_model and _is_foreign_hf(args.target_model):
            targets.append(HuggingFaceTarget(args.target_model, dc.target_layers, dev, dtype))
        else:
            # the decode evaluation needs the target's logits: every layer (forward still
            # stops after the deepest feature layer)
            full = bool(args.eval_every and args.eval_decode_prompts > 0)
            targets.append(load_target(cfg.target, dc.target_layers, path=args.target_model, device=dev,
                                       dtype=dtype, seed=args.seed, full=full))
        if args.compile_target:
            compile_target_layers(targets[-1], out, _mode(args))
        out(f"[milestone] target_loaded index={i} device={dev}")
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
                layer.compile(dynamic=None, mode=_mode(args))     # automatic: a dim that changes (samples per batch) turns dynamic
        d.train()
        drafters.append(d)
    return targets, drafters


def _compiled(args) -> bool:
    """Compiled models on more than one thread (see pipeline.LAUNCH_LOCK)."""
    return bool(args.compile_drafter or args.compile_target) and not args.sequential


def _mode(args) -> str | None:
    return None if args.compile_mode == "default" else args.compile_mode


def compile_target_layers(target, out, mode: str | None = None) -> None:
    """--compile-target: each decoder layer of our TargetModel through inductor (automatic
    dynamic shapes: the batch's sample count and length vary). The norms, RoPE products,
    SwiGLU and residual adds fuse around the matmuls and SDPA. A transformers-loaded target
    (HuggingFaceTarget) is left as it is: its layers take other arguments."""
    layers = getattr(getattr(target, "model", None), "layers", None)
    if isinstance(target, HuggingFaceTarget) or layers is None:
        out("[compile] --compile-target: a transformers target is not compiled (left eager)")
        return
    for layer in layers:
        layer.compile(dynamic=None, mode=mode)


def _init_from(drafters: list[Drafter], path: Path, out) -> None:
    """Fine-tuning: every replica starts from a DFlash drafter directory's weights (the
    reference names: fc, hidden_norm, layers.N.*, norm); the shapes must be this run's."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if not files:
        raise ConfigError(f"--init-drafter {path}: no *.safetensors files")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_file(str(f)))
    want = dict(drafters[0].trainable_parameters())
    missing, extra = sorted(set(want) - set(weights)), sorted(set(weights) - set(want))
    bad = [k for k in want if k in weights and weights[k].shape != want[k].shape]
    if missing or extra or bad:
        raise ConfigError(f"--init-drafter {path}: does not fit this drafter (missing {missing[:3]}, "
                          f"unexpected {extra[:3]}, other shape {bad[:3]})")
    with torch.no_grad():
        for d in drafters:
            for name, p in d.trainable_parameters():
                p.copy_(weights[name])
    out(f"init: drafter weights from {path} ({len(weights)} tensors)")


def _batching(args, cfg: RunConfig, plan: BucketPlan, use_flex: bool) -> BatchingSpec:
    """--compile-drafter: a few fixed shapes (lengths padded to bucket edges, anchors to the
    maximum) so the compiled graphs settle; eager mode keeps every batch's own shape."""
    dc, tc = cfg.drafter, cfg.train
    anchor_multiple = 128 // dc.block_size if use_flex else 1
    length_steps: tuple[int, ...] = ()
    fixed_anchors = None
    if args.compile_drafter:
        step = 128 if use_flex else 1
        length_steps = tuple(sorted({-(-min(b.hi - 1, tc.max_length) // step) * step for b in plan.buckets}))
        fixed_anchors = -(-dc.max_anchors // anchor_multiple) * anchor_multiple
    return BatchingSpec(block_size=dc.block_size, max_anchors=dc.max_anchors, max_length=tc.max_length,
                        mask_token_id=dc.mask_token_id, seed=args.seed, len_multiple=128 if use_flex else 1,
                        anchor_multiple=anchor_multiple, length_steps=length_steps, fixed_anchors=fixed_anchors)


def build(args: argparse.Namespace) -> Session:
    """Config, data, devices, models, optimizer: everything but the threads."""
    if args.eval_every and (not args.eval_fraction or args.eval_every % max(1, args.log_every)):
        raise ConfigError(f"--eval-every {args.eval_every} needs --eval-fraction > 0 and must be a multiple of "
                          f"--log-every {args.log_every} (its numbers join that step's progress record)")
    world, rank, local_rank, kind = _distributed(args)
    out = say if rank == 0 else (lambda line: None)
    cfg = run_config(args)
    dc, tc = cfg.drafter, cfg.train
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    dataset, plan, eval_plan = _data(args, cfg, out)
    if rank == 0:
        milestone("dataset_loaded", samples=len(dataset))
    for line in plan.describe():
        out(line)
    default_index = local_rank if world > 1 else 0
    target_devices = _device_list(args.target_devices, kind, default_index)
    drafter_devices = _device_list(args.drafter_devices, kind, default_index)
    cuda = kind == "cuda"
    if args.drafter_stream != "default" and len(drafter_devices) > 1:
        raise ConfigError(f"--drafter-stream {args.drafter_stream}: one drafter replica only "
                          f"(--drafter-devices {args.drafter_devices} names {len(drafter_devices)})")
    dtype = getattr(torch, tc.dtype) if cuda else torch.float32
    if cuda:
        import importlib

        importlib.import_module("torch._dynamo").config.recompile_limit = RECOMPILE_LIMIT
        torch._logging.set_logs(recompiles=True)
        out(f"[compile] recompile_limit={RECOMPILE_LIMIT}; recompiles are logged (torch._logging recompiles=True)")
        from . import loss_kernel

        missing = args.loss_kernel == "triton" and not loss_kernel.available()
        out(f"[loss] logits pass: {'inductor (Triton is not importable)' if missing else args.loss_kernel}; "
            f"compile mode {args.compile_mode}")
    targets, drafters = _models(args, cfg, target_devices, drafter_devices, dtype, out)
    if args.init_drafter:
        _init_from(drafters, Path(args.init_drafter), out)
    replicas = DrafterReplicas(
        drafters, drafter_devices, lr=tc.lr, weight_decay=tc.weight_decay, grad_clip=tc.grad_clip,
        total_steps=args.steps, warmup_frac=tc.warmup_frac, min_lr_frac=tc.min_lr_frac, gamma=dc.loss_gamma,
        chunk_rows=dc.loss_chunk_tokens, use_flex=cuda, autocast_dtype=dtype if cuda else None,
        process_group_world=world, compiled=args.compile_drafter, loss_kernel=args.loss_kernel)
    trainable = sum(p.numel() for p in replicas.params)
    out(f"Drafter: {trainable / 1e6:.1f}M trainable parameters x {len(drafters)} replica(s); "
        f"target layers {list(dc.target_layers)} of {cfg.target.num_layers}; block {dc.block_size}; "
        f"layer types {','.join(t.split('_')[0] for t in dc.layer_types)}; rope_theta {dc.rope_theta:g}; "
        f"mask_token_id {dc.mask_token_id}; world {world}")
    return Session(args=args, cfg=cfg, world=world, rank=rank, run_dir=run_dir, dataset=dataset, plan=plan,
                   eval_plan=eval_plan, spec=_batching(args, cfg, plan, cuda), targets=targets,
                   target_devices=target_devices, drafter_devices=drafter_devices, replicas=replicas)


def data_facts(s: Session) -> dict:
    return resume_source.data_facts(seed=s.args.seed, eval_fraction=s.args.eval_fraction, samples=len(s.dataset),
                                    batches_per_epoch=s.plan.num_batches)


def resume(s: Session) -> None:
    """--resume (this run dir) / --resume-from PATH (another run's): weights, optimizer,
    scheduler, RNG and the data position of the newest complete checkpoint, after
    resume_source has checked that the config and data order are the checkpoint's."""
    if s.args.resume_from:
        flag = "--resume-from"
        ck = resume_source.source_checkpoint(Path(s.args.resume_from))
    elif s.args.resume:
        flag = "--resume"
        found = resume_source.own_checkpoint(s.run_dir)
        if found is None:
            s.out(f"resume: no checkpoint under {checkpoint.checkpoint_dir(s.run_dir)}; starting fresh")
            return
        ck = found
    else:
        return
    state = resume_source.load_checked(ck, flag)
    changes = resume_source.check_compatible(state, ck, flag, s.cfg.to_dict(), data_facts(s))
    missing = s.replicas.master.load_state_dict(state["drafter"], strict=False)
    if missing.unexpected_keys:
        raise ConfigError(f"{flag} {ck}: unexpected drafter keys {missing.unexpected_keys[:3]}")
    s.replicas.optimizer.load_state_dict(state["optimizer"])
    s.replicas.scheduler.load_state_dict(state["scheduler"])
    s.replicas.sync_replicas()
    checkpoint.restore_rng(state)
    s.start_step = int(state["step"])
    s.next_pos = resume_source.data_position(state, s.plan.num_batches)
    if s.args.resume_from and s.rank == 0:
        resume_source.write_link(s.run_dir, ck, s.start_step)
    s.resumed = {"resumed_from": str(ck), "resumed_step": s.start_step, "resumed_next_batch_pos": s.next_pos}
    s.out(f"resume: {ck} step={s.start_step} next_batch_pos={s.next_pos}"
          + (f" (changed: {'; '.join(changes)}; data position mapped by epoch share, not exact)" if changes else ""))
    if s.rank == 0:
        milestone("resumed", step=s.start_step, path=ck)


def start(s: Session) -> None:
    """The pipeline's threads, the reporter, wandb and the SIGTERM handler."""
    positions = BatchPositions(s.plan, start_pos=s.next_pos, world=s.world, rank=s.rank,
                               replicas=len(s.drafter_devices))
    s.pipeline = Pipeline(dataset=s.dataset, positions=positions, spec=s.spec, targets=s.targets,
                          target_devices=s.target_devices, drafter_devices=s.drafter_devices,
                          prefetch_workers=s.args.prefetch_workers, sequential=s.args.sequential,
                          compiled=_compiled(s.args))
    if s.rank == 0:
        s.wandb_logger = WandbLogger(s.args.wandb_project, s.run_dir,
                                     {**s.cfg.to_dict(), "args": vars(s.args), **s.layout})
    s.reporter = ProgressReporter(run_dir=s.run_dir, block_size=s.cfg.drafter.block_size, log_every=s.args.log_every,
                                  devices=s.target_devices + s.drafter_devices, wandb_logger=s.wandb_logger,
                                  enabled=s.rank == 0, first_record_extra=s.resumed)
    s.term.install()
    if s.args.drafter_stream == "high" and s.drafter_devices[0].type == "cuda":
        _drafter_on_high_priority_stream(s.drafter_devices, s.out)
    s.pipeline.start()


def _drafter_on_high_priority_stream(devices: list[torch.device], out) -> None:
    """--drafter-stream high: the step loop's (this thread's) current stream on each drafter
    device becomes a high-priority one. Everything this thread launches after -- steps,
    metrics, evaluation, checkpoints -- runs on it, in order; the new stream first waits for
    what the default stream has queued (the weights' initialisation). One replica only
    (build refuses more): replica threads would launch on their own default streams, out of
    order with this thread's optimizer step."""
    for dev in devices:
        with torch.cuda.device(dev):
            # a number past the range maps to the highest priority (torch/cuda/streams.py Stream)
            stream = torch.cuda.Stream(device=dev, priority=-100)
            stream.wait_stream(torch.cuda.current_stream(dev))
            torch.cuda.set_stream(stream)
    out(f"[stream] drafter steps on a high-priority stream (priority {getattr(stream, 'priority', '?')}; "
        "the target's stream: 0, the lowest)")


def save(s: Session, step: int) -> None:
    """The one save path (periodic, --stop-after, SIGTERM, the end): rank 0 writes."""
    if s.rank != 0:
        return
    per_step = s.world * len(s.drafter_devices)
    path = checkpoint.save(s.run_dir, step=step, next_pos=s.next_pos + (step - s.start_step) * per_step,
                           drafter_state=s.replicas.master.trainable_state_dict(),
                           optimizer=s.replicas.optimizer, scheduler=s.replicas.scheduler,
                           config=s.cfg.to_dict(), layout=s.layout, data=data_facts(s))
    milestone("checkpoint_saved", step=step, path=path)


def train_loop(s: Session) -> tuple[int, int]:
    """Steps until --steps, --stop-after or SIGTERM; (exit code, steps done). Every way out
    saves a checkpoint (once: a periodic save on that step counts)."""
    args = s.args
    step = s.start_step
    exit_code = EXIT_OK
    profiler = step_profile.StepProfiler(args.profile_steps, s.run_dir, s.drafter_devices[0].type == "cuda",
                                         s.out) if args.profile_steps and s.rank == 0 else None
    while step < args.steps:
        if profiler is not None:
            profiler.before(step + 1)
        t0 = time.perf_counter()
        batches = s.pipeline.next_step_batches()
        wait = time.perf_counter() - t0
        with launch_guard(_compiled(args)):
            metrics = s.replicas.step(batches)
        step += 1
        if profiler is not None:
            profiler.after(step)
        if step == s.start_step + 1 and s.rank == 0:
            milestone("first_step")
        evaluation = evaluate(s) if args.eval_every and step % args.eval_every == 0 else None
        s.reporter.update(step, metrics, tokens=sum(b.num_tokens for b in batches) * s.world,
                          samples=sum(b.num_samples for b in batches) * s.world, data_wait_s=wait,
                          lr=s.replicas.last_lr, evaluation=evaluation)
        del batches
        saved = bool(args.checkpoint_every) and step % args.checkpoint_every == 0
        if saved:
            save(s, step)
        stop = None
        if args.stop_after and step - s.start_step >= args.stop_after and step < args.steps:
            stop = f"--stop-after {args.stop_after}"
        if _stop_requested(s.term.requested, s.world, s.drafter_devices[0]):
            stop, exit_code = "SIGTERM", EXIT_SIGTERM
        if stop or step == args.steps:
            s.out(f"{stop or 'finished'}: {'saving a' if not saved else 'saved the'} checkpoint at step {step}"
                  + (" and stopping" if stop else ""))
            if not saved:
                save(s, step)
            break
    if profiler is not None:
        profiler.stop()              # the run ended inside the window: what was traced is written
    if s.world > 1:
        _check_ranks_agree(s.replicas, s.out)
    s.out(f"[done] steps={step} exit_code={exit_code}")
    return exit_code, step


def evaluate(s: Session) -> dict:
    """Loss, acc, tau and accept_len of the master drafter on the held-out batches (at most
    --eval-batches of them, the same ones every time), no gradient, keys prefixed eval_."""
    assert s.eval_plan is not None
    positions = BatchPositions(s.eval_plan, start_pos=0, world=1, rank=0, replicas=1)
    dev = s.drafter_devices[0]
    with launch_guard(_compiled(s.args)):
        return _evaluate(s, positions, dev)


def _evaluate(s: Session, positions: BatchPositions, dev: torch.device) -> dict:
    total = None
    for seq in range(min(s.args.eval_batches, s.eval_plan.num_batches)):
        hb = host_batch_for(s.dataset, positions, s.spec, seq)
        batch = run_target(s.targets[0], host_tensors(hb, False), hb, s.target_devices[0], dev, None)
        vec = s.replicas.evaluate(batch)
        total = vec if total is None else total + vec
    summary = summarise_metrics(total.float().cpu().tolist(), s.cfg.drafter.block_size)
    out = {f"eval_{k}": summary[k] for k in ("loss", "acc", "tau", "accept_len")}
    if s.args.eval_decode_prompts > 0:
        # the serving convention beside the training-time estimate (README: compare this one
        # with published figures): greedy decode from the held-out prompts' ends
        from .eval_decode import decode, prompts_of

        rows = s.eval_plan.kept_rows[:s.args.eval_decode_prompts]
        prompts = prompts_of(s.dataset, rows, s.cfg.train.max_length - s.args.eval_decode_tokens)
        out["eval_accept_len_decode"] = decode(s.targets[0], s.replicas.master, prompts, s.args.eval_decode_tokens,
                                               autocast_dtype=s.replicas.autocast_dtype).accept_len
    return out


def close(s: Session, exit_code: int, *, failed: bool) -> None:
    """Stop the threads, flush metrics, finish wandb, leave the process group."""
    if s.pipeline is not None:
        s.pipeline.stop()
    s.replicas.close()
    if s.reporter is not None:
        s.reporter.close()
    s.term.restore()
    if s.wandb_logger is not None:
        s.wandb_logger.finish(exit_code=1 if failed or exit_code not in (EXIT_OK, EXIT_SIGTERM) else 0)
    if s.world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()


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
    cfg_file = Path(path, "config.json")
    if not cfg_file.exists():
        return False
    return json.loads(cfg_file.read_text()).get("model_type") not in (None, "qwen3")


def _check_ranks_agree(replicas: DrafterReplicas, out) -> None:
    import torch.distributed as dist

    checksum = torch.stack([p.detach().double().sum() for p in replicas.params]).sum().item()
    # every rank says its own (each node's log then carries its replica's checksum: a
    # multi-node job's sync is checked from the nodes' own words, not rank 0's summary)
    say(f"[dist] rank={dist.get_rank()} params_checksum={checksum:.10e}")
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
