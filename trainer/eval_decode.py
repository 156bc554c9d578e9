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
held out (`split_eval_rows` with the run's --eval-fraction and --seed).

Exit codes: 0 measured; 2 bad input (source, data, shapes).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .config import ConfigError, TargetConfig
from .data import ArrowDataset, DataError, make_host_batch, split_eval_rows
from .loss import IGNORE, accept_len, dflash_loss

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


@torch.no_grad()
def training_estimate(target, drafter, dataset: ArrowDataset, rows: np.ndarray, *, seed: int,
                      max_anchors: int, max_length: int, gamma: float) -> float:
    """The training-time accept_len (random anchors in the samples' completions, the
    trainer's eval_accept_len) on the same rows, for the line beside the decoded one."""
    dev = drafter.fc.weight.device
    dc = drafter.cfg
    accepted = blocks = 0.0
    for r in rows:
        hb = make_host_batch(dataset, np.array([r]), seq=0, epoch=0, seed=seed, block_size=dc.block_size,
                             max_anchors=max_anchors, max_length=max_length, mask_token_id=dc.mask_token_id)
        if not hb.anchor_valid.any():
            continue
        _, feats = target.logits_and_features(torch.from_numpy(hb.input_ids).to(dev))
        hidden = drafter(feats, torch.from_numpy(hb.block_ids).to(dev), torch.from_numpy(hb.anchors).to(dev),
                         use_flex=False)
        labels = torch.from_numpy(hb.labels).to(dev)
        if not (labels != IGNORE).any():
            continue
        out = dflash_loss(hidden, labels, drafter.lm_head.weight, gamma=gamma, chunk_rows=4096)
        accepted += float(out.accepted)
        blocks += float(out.count[1])
    return accept_len(accepted, blocks)


def load_models(source: Path, target_model: str | None, seed: int, device: torch.device, dtype: torch.dtype):
    """(full target, drafter sharing its embedding and lm_head, target config) from a
    checkpoint / run directory (its recorded configs; a random target from --seed unless
    --target-model) or an export directory (needs --target-model)."""
    from . import checkpoint
    from .export import ExportError, configs_of, find_checkpoint, load_export
    from .model import Drafter, hf_config_to_target, load_target

    target_cfg: TargetConfig | None = None
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
        target_cfg = target_cfg or recorded_target
        drafter = Drafter(target_cfg, dcfg)
        missing = drafter.load_state_dict(state["drafter"], strict=False)
        if missing.unexpected_keys:
            raise ConfigError(f"{source}: unexpected drafter keys {missing.unexpected_keys[:3]}")
    drafter.cfg.validate(target_cfg)
    target = load_target(target_cfg, drafter.cfg.target_layers, path=target_model, device=device, dtype=dtype,
                         seed=seed, full=True)
    drafter = drafter.to(device=device, dtype=dtype).eval()
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    return target, drafter, target_cfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.eval_decode", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="checkpoint file, run directory (latest checkpoint) or export directory")
    ap.add_argument("--prompts", required=True, help="dataset directory (Arrow): its held-out rows give the prompts")
    ap.add_argument("--target-model", default=None, help="the target's Qwen3 safetensors directory "
                                                         "(default: the checkpoint's random target, --seed)")
    ap.add_argument("--eval-fraction", type=float, default=0.0,
                    help="the run's --eval-fraction: prompts come from the rows it held out (0: every row)")
    ap.add_argument("--seed", type=int, default=0, help="the run's --seed (held-out rows, random target)")
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
        _, held = split_eval_rows(len(dataset), args.eval_fraction, args.seed)
        rows = (held if args.eval_fraction > 0 else np.arange(len(dataset)))[:args.num_prompts]
        target, drafter, _ = load_models(Path(args.source), args.target_model, args.seed, dev, dtype)
        result = decode(target, drafter, prompts_of(dataset, rows, args.max_prompt_tokens), args.max_new_tokens)
        estimate = training_estimate(target, drafter, dataset, rows, seed=args.seed, max_anchors=512,
                                     max_length=args.max_prompt_tokens * 2, gamma=7.0)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    blocks = sum(len(p) for p in result.per_prompt)
    doc = {"eval_accept_len_decode": result.accept_len, "eval_accept_len": estimate, "prompts": len(rows),
           "blocks": blocks, "max_new_tokens": args.max_new_tokens, "block_size": drafter.cfg.block_size}
    if args.json:
        print(json.dumps(doc))
    else:
        print(f"eval_accept_len_decode={result.accept_len:.4f} (greedy decode, {blocks} blocks from "
              f"{len(rows)} prompts' ends; compare this with published figures)")
        print(f"eval_accept_len={estimate:.4f} (training-time estimate: random anchors in the same samples)")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
