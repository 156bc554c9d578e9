"""accept_len measured the way a serving engine gets it: by decoding.

    python -m trainer.eval_decode CHECKPOINT|RUN_DIR|EXPORT --prompts DATA [--target-model DIR]
        [--eval-fraction F --seed S] [--num-prompts N] [--max-new-tokens M] [--json]

Why: the training-time `accept_len` scores blocks at random anchors inside the data's own
completions, which over-weights easy stretches (issue 23: 1.73 from training, 1.375 from z-lab's
inference loop on the same held-out prompts). Serving drafts from each prompt's end, on the
target's own greedy continuation. This module does exactly that:

  prefill: the target's greedy token after the prompt; then, block by block from the
  prompt's end (position `start`): the drafter fills [last token, MASK x (B-1)] from the
  target's features of every position before `start`; the target verifies the block
  greedily; accepted = the drafted prefix equal to the target's argmax; the block yields
  accepted + 1 tokens (the bonus token), capped by max_new_tokens; accept_len = the mean of
  that over all blocks of all prompts.

The convention is z-lab dflash's `dflash_generate` (model.py, temperature 0: the
`acceptance_lengths` it returns), and tests/trainer/test_eval_decode.py holds this loop to
it per block. No KV cache: the target re-reads the sequence for each block (its features at
accepted positions equal what a cache would hold); a tool for a few hundred prompts, not a server.

Prompts: the samples' tokens before their first supervised one, from the rows that training
held out (`split_eval_rows` with the run's --eval-fraction and --seed, read from the
checkpoint unless given; those with enough supervised tokens, as the run's eval keeps them).

The training-time estimate beside it is the run's own `eval_accept_len`, recomputed: the same
held-out batches (the first --eval-batches of the run's eval plan), the same anchors (the
drafter's max_anchors, drawn by the run's seed), the run's max_length. Why so exact: on data
whose completions repeat one id (the bench presets' synthetic data) a prompt's blocks are all
right or all wrong, so an estimate over a few other rows said 1.000 where the run said 4.583
(BENCHMARKS.md, trainer run 12).

Exit codes: 0 measured; 2 bad input (source, data, shapes).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .config import ConfigError, TargetConfig, TrainConfig
from .data import ArrowDataset, BucketPlan, DataError, make_host_batch, split_eval_rows
from .loss import IGNORE, accept_len, dflash_loss
from .pipeline import BatchPositions

EXIT_OK, EXIT_USAGE = 0, 2


@dataclass
class DecodeResult:
    per_prompt: list[list[int]]          # accepted + 1 per block, in decode order
    output_ids: list[list[int]]          # prompt + generated tokens

    @property
    def accept_len(self) -> float:
        blocks = [n for p in self.per_prompt for n in p]
        return float(np.mean(blocks)) if blocks else 0.0


@torch.no_grad()
def decode_prompt(target, drafter, prompt: list[int], max_new_tokens: int) -> tuple[list[int], list[int]]:
    """(accepted + 1 per block, output ids) of one greedy speculative decode."""
    dev, tdev = drafter.fc.weight.device, target.embed_weight.device
    bk, mask_id = drafter.cfg.block_size, drafter.cfg.mask_token_id
    n = len(prompt)
    max_length = n + max_new_tokens
    seq = list(prompt)
    logits, feats = target.logits_and_features(torch.tensor([seq], device=tdev))
    feats = feats.to(dev)
    seq.append(int(logits[0, -1].argmax()))
    start, lens = n, []
    while start + 1 < max_length:
        verify = min(bk, max_length - start)
        block = [seq[start]] + [mask_id] * (verify - 1)
        if verify > 1:
            block_ids = torch.tensor([[block]], device=dev)
            hidden = drafter(feats[:, :start], block_ids, torch.tensor([[start]], device=dev), use_flex=False)
            block[1:] = (hidden[0, 0, 1:] @ drafter.lm_head.weight.t()).argmax(-1).tolist()
        logits, feats = target.logits_and_features(torch.tensor([seq[:start] + block], device=tdev))
        feats = feats.to(dev)
        posterior = logits[0, start:start + verify].argmax(-1).tolist()
        accepted = 0
        while accepted < verify - 1 and block[accepted + 1] == posterior[accepted]:
            accepted += 1
        seq = seq[:start] + block[:accepted + 1] + [posterior[accepted]]
        produced = min(accepted + 1, max_length - start - 1)
        start += produced
        lens.append(produced)
    return lens, seq[:min(start + 1, max_length)]


def decode(target, drafter, prompts: list[list[int]], max_new_tokens: int,
           autocast_dtype: torch.dtype | None = None) -> DecodeResult:
    """Every prompt decoded; `autocast_dtype`: the trainer's (fp32 master weights, bf16 target)."""
    import contextlib

    dev = drafter.fc.weight.device
    ctx = torch.autocast(dev.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    per, outs = [], []
    was_training = drafter.training
    drafter.eval()
    try:
        with ctx:
            for p in prompts:
                lens, out = decode_prompt(target, drafter, p, max_new_tokens)
                per.append(lens)
                outs.append(out)
    finally:
        drafter.train(was_training)
    return DecodeResult(per, outs)


def prompts_of(dataset: ArrowDataset, rows: np.ndarray, max_prompt_tokens: int) -> list[list[int]]:
    """Each sample's tokens before its first supervised one (at least one token), the last
    `max_prompt_tokens` of them."""
    out = []
    for r in rows:
        ids, mask = dataset.sample(int(r))
        first = int(np.argmax(mask != 0)) if (mask != 0).any() else len(ids)
        prompt = [int(x) for x in ids[:max(1, first)]]
        out.append(prompt[-max_prompt_tokens:])
    return out


@dataclass
class RunFacts:
    """What a checkpoint recorded of its run that the evaluation repeats: the held-out split
    (seed, eval_fraction) and the batching (the train config's lengths and budget). An
    export records none of it: the flags' values, or every row."""
    seed: int | None = None
    eval_fraction: float | None = None
    train: dict = field(default_factory=dict)


@dataclass
class Estimate:
    accept_len: float
    rows: int                 # held-out samples scored
    blocks: int               # anchored blocks scored


def eval_plan(dataset: ArrowDataset, rows: np.ndarray, train_cfg: dict, block_size: int, seed: int) -> BucketPlan:
    """The run's eval plan over its held-out rows (trainer/train.py _data): the same
    buckets, so the same batches and the same kept rows."""
    tc = TrainConfig(**{k: v for k, v in train_cfg.items() if k in TrainConfig.__dataclass_fields__})
    return BucketPlan(dataset, rows=rows, block_size=block_size, token_budget=tc.token_budget,
                      max_length=tc.max_length, num_buckets=tc.num_buckets,
                      max_batch_samples=tc.max_batch_samples, seed=seed)


@torch.no_grad()
def training_estimate(target, drafter, dataset: ArrowDataset, plan: BucketPlan, *, seed: int, max_length: int,
                      eval_batches: int) -> Estimate:
    """The trainer's eval_accept_len (random anchors in the samples' completions), one
    sample at a time over the rows of the first `eval_batches` batches of its eval plan:
    a sample's anchors depend on (seed, epoch 0, row) only, not on the batch it is in."""
    dev = drafter.fc.weight.device
    dc = drafter.cfg
    positions = BatchPositions(plan, start_pos=0, world=1, rank=0, replicas=1)
    rows = [int(r) for seq in range(min(eval_batches, plan.num_batches)) for r in positions.rows(seq)[1]]
    accepted = blocks = 0.0
    for r in rows:
        hb = make_host_batch(dataset, np.array([r]), seq=0, epoch=0, seed=seed, block_size=dc.block_size,
                             max_anchors=dc.max_anchors, max_length=max_length, mask_token_id=dc.mask_token_id)
        labels = torch.from_numpy(hb.labels).to(dev)
        if not hb.anchor_valid.any() or not (labels != IGNORE).any():
            continue
        _, feats = target.logits_and_features(torch.from_numpy(hb.input_ids).to(dev))
        hidden = drafter(feats, torch.from_numpy(hb.block_ids).to(dev), torch.from_numpy(hb.anchors).to(dev),
                         use_flex=False)
        out = dflash_loss(hidden, labels, drafter.lm_head.weight, gamma=dc.loss_gamma, chunk_rows=4096)
        accepted += float(out.accepted)
        blocks += float(out.count[1])
    return Estimate(accept_len(accepted, blocks), len(rows), int(blocks))


def load_models(source: Path, target_model: str | None, seed: int | None, device: torch.device,
                dtype: torch.dtype):
    """(full target, drafter sharing its embedding and lm_head, target config, RunFacts) from
    a checkpoint / run directory (its recorded configs; a random target from the run's seed,
    or `seed` when given, unless --target-model) or an export directory (needs --target-model)."""
    from . import checkpoint
    from .export import ExportError, configs_of, find_checkpoint, load_export
    from .model import Drafter, hf_config_to_target, load_target

    target_cfg: TargetConfig | None = None
    facts = RunFacts()
    if target_model and Path(target_model, "config.json").exists():
        target_cfg = hf_config_to_target(json.loads(Path(target_model, "config.json").read_text()))
    if (source / "config.json").is_file() and (source / "model.safetensors").is_file():
        if target_cfg is None:
            raise ConfigError(f"{source}: an export names no target; pass --target-model DIR")
        drafter = load_export(source, target_cfg)
    else:
        try:
            state = checkpoint.load(find_checkpoint(source))
        except ExportError as exc:
            raise ConfigError(str(exc)) from None
        recorded_target, dcfg = configs_of(state, source)
        data = state.get("data") or {}
        facts = RunFacts(seed=data.get("seed"), eval_fraction=data.get("eval_fraction"),
                         train=dict(state["config"].get("train") or {}))
        target_cfg = target_cfg or recorded_target
        drafter = Drafter(target_cfg, dcfg)
        missing = drafter.load_state_dict(state["drafter"], strict=False)
        if missing.unexpected_keys:
            raise ConfigError(f"{source}: unexpected drafter keys {missing.unexpected_keys[:3]}")
    drafter.cfg.validate(target_cfg)
    target_seed = seed if seed is not None else (facts.seed or 0)
    target = load_target(target_cfg, drafter.cfg.target_layers, path=target_model, device=device, dtype=dtype,
                         seed=target_seed, full=True)
    drafter = drafter.to(device=device, dtype=dtype).eval()
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    return target, drafter, target_cfg, facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.eval_decode", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="checkpoint file, run directory (latest checkpoint) or export directory")
    ap.add_argument("--prompts", required=True, help="dataset directory (Arrow): its held-out rows give the prompts")
    ap.add_argument("--target-model", default=None, help="the target's Qwen3 safetensors directory "
                                                         "(default: the checkpoint's random target, --seed)")
    ap.add_argument("--eval-fraction", type=float, default=None,
                    help="the run's --eval-fraction: prompts come from the rows it held out (default: what the "
                         "checkpoint recorded; an export: 0, every row)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the run's --seed: held-out rows, anchors, random target (default: the checkpoint's; 0)")
    ap.add_argument("--eval-batches", type=int, default=8,
                    help="the run's --eval-batches: held-out batches the training-time estimate scores")
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-prompt-tokens", type=int, default=4096)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    try:
        dataset = ArrowDataset(Path(args.prompts))
        target, drafter, _, facts = load_models(Path(args.source), args.target_model, args.seed, dev, dtype)
        seed = args.seed if args.seed is not None else (facts.seed or 0)
        fraction = args.eval_fraction if args.eval_fraction is not None else (facts.eval_fraction or 0.0)
        _, held = split_eval_rows(len(dataset), fraction, seed)
        plan = eval_plan(dataset, held if fraction > 0 else np.arange(len(dataset)), facts.train,
                         drafter.cfg.block_size, seed)
        rows = plan.kept_rows[:args.num_prompts]
        result = decode(target, drafter, prompts_of(dataset, rows, args.max_prompt_tokens), args.max_new_tokens)
        max_length = int(facts.train.get("max_length") or args.max_prompt_tokens * 2)
        estimate = training_estimate(target, drafter, dataset, plan, seed=seed, max_length=max_length,
                                     eval_batches=args.eval_batches)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    blocks = sum(len(p) for p in result.per_prompt)
    doc = {"eval_accept_len_decode": result.accept_len, "eval_accept_len": estimate.accept_len,
           "prompts": len(rows), "blocks": blocks, "estimate_rows": estimate.rows,
           "estimate_blocks": estimate.blocks, "eval_fraction": fraction, "seed": seed,
           "max_new_tokens": args.max_new_tokens, "block_size": drafter.cfg.block_size}
    if args.json:
        print(json.dumps(doc))
    else:
        print(f"eval_accept_len_decode={result.accept_len:.4f} (greedy decode, {blocks} blocks from "
              f"{len(rows)} prompts' ends; compare this with published figures)")
        print(f"eval_accept_len={estimate.accept_len:.4f} (training-time estimate, as the run computes it: "
              f"{estimate.blocks} blocks at random anchors in {estimate.rows} held-out samples)")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
