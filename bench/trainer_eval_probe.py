"""Why does `python -m trainer.eval_decode`'s training-time estimate differ from the run's own
eval_accept_len on a GPU (run 11: 1.000 beside 4.583) when on the CPU they agree?

    python3 bench/trainer_eval_probe.py RUN_DIR DATA_DIR --eval-fraction F [--seed S]

The same checkpoint and the same held-out rows, the estimate computed every way the run and
the tool differ, one variable at a time, one JSON line each:
  - dtype: the tool casts the drafter to bf16; the run keeps fp32 master weights under bf16
    autocast (the target is bf16 in both);
  - attention: the tool's dense-mask SDPA; the run's flex BlockMask (lengths padded to 128);
  - the RMSNorm: the fused F.rms_norm path on CUDA; the float32 reference path beside it.
A diagnostic for one device call (issue 23), not a benchmark: no timing. What it found (trainer
run 12): every variant agrees; the 1.000 was four other rows of all-or-nothing data, and
trainer.eval_decode now scores the run's own eval batches.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
# run as a script, bench/ is sys.path[0], and its trainer.py would shadow the trainer package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from trainer import eval_decode, model  # noqa: E402
from trainer.data import ArrowDataset, make_host_batch, split_eval_rows  # noqa: E402
from trainer.loss import accept_len, dflash_loss  # noqa: E402


@torch.no_grad()
def estimate(target, drafter, dataset, rows, *, seed: int, use_flex: bool, autocast: torch.dtype | None) -> dict:
    dc = drafter.cfg
    dev = drafter.fc.weight.device
    accepted = blocks = 0.0
    mult = 128 if use_flex else 1
    ctx = torch.autocast(dev.type, dtype=autocast) if autocast else contextlib.nullcontext()
    with ctx:
        for r in rows:
            hb = make_host_batch(dataset, np.array([r]), seq=0, epoch=0, seed=seed, block_size=dc.block_size,
                                 max_anchors=dc.max_anchors, max_length=8192, mask_token_id=dc.mask_token_id,
                                 len_multiple=mult, anchor_multiple=128 // dc.block_size if use_flex else 1)
            if not hb.anchor_valid.any():
                continue
            _, feats = target.logits_and_features(torch.from_numpy(hb.input_ids).to(dev))
            hidden = drafter(feats, torch.from_numpy(hb.block_ids).to(dev), torch.from_numpy(hb.anchors).to(dev),
                             use_flex=use_flex)
            labels = torch.from_numpy(hb.labels).to(dev)
            out = dflash_loss(hidden, labels, drafter.lm_head.weight, gamma=dc.loss_gamma, chunk_rows=4096)
            accepted += float(out.accepted)
            blocks += float(out.count[1])
    return {"accept_len": accept_len(accepted, blocks), "blocks": blocks,
            "hidden_finite": bool(torch.isfinite(hidden).all()), "hidden_absmax": float(hidden.abs().max())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("data")
    ap.add_argument("--eval-fraction", type=float, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of this script (no flex)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    ds = ArrowDataset(Path(args.data))
    _, held = split_eval_rows(len(ds), args.eval_fraction, args.seed)
    rows = held[:args.rows]
    recorded = [json.loads(line) for line in (Path(args.run_dir) / "metrics.jsonl").read_text().splitlines()
                if '"eval_accept_len"' in line]
    print(json.dumps({"run_eval_accept_len": recorded[-1].get("eval_accept_len") if recorded else None,
                      "rows": [int(r) for r in rows]}), flush=True)

    fused_forward = model.RMSNorm.forward

    def reference_forward(self, x):     # the CPU path, on CUDA too
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight.to(dtype) * x32.to(dtype)

    for dtype_name in ("bf16-cast", "fp32-autocast"):
        load_dtype = torch.bfloat16 if dtype_name == "bf16-cast" else torch.float32
        target, drafter, _, facts = eval_decode.load_models(Path(args.run_dir), None, args.seed, dev, load_dtype)
        target = target.to(torch.bfloat16)
        autocast = None if dtype_name == "bf16-cast" else torch.bfloat16
        for use_flex in (False, True) if dev.type == "cuda" else (False,):
            for norm in ("fused", "reference"):
                model.RMSNorm.forward = fused_forward if norm == "fused" else reference_forward
                try:
                    r = estimate(target, drafter, ds, rows, seed=args.seed, use_flex=use_flex, autocast=autocast)
                except Exception as exc:  # noqa: BLE001 — a diagnostic: say which variant broke and go on
                    r = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                print(json.dumps({"dtype": dtype_name, "flex": use_flex, "norm": norm, **r}), flush=True)
        model.RMSNorm.forward = fused_forward
        if dtype_name == "bf16-cast":
            plan = eval_decode.eval_plan(ds, held, facts.train, drafter.cfg.block_size, args.seed)
            tool = eval_decode.training_estimate(target, drafter, ds, plan, seed=args.seed, max_length=8192,
                                                 eval_batches=8)
            print(json.dumps({"tool_training_estimate": tool.accept_len, "rows": tool.rows}), flush=True)
        del target, drafter
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
