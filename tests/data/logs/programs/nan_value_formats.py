"""A training loop whose loss goes Inf then NaN (a least-squares fit with a step size far too large),
printed in the shapes loops print their values with no message saying "nan detected" (k13nanvalue,
2026-12-03, torch 2.13.0+cpu, numpy 2.4.6, pandas 3.1.1, PyYAML 6.0.4). `python nan_value_formats.py
FORMAT [ok]`: FORMAT is tensor | numpy | jsonl | yaml | frame; `ok` runs the same loop with a sane step
size, and prints what a healthy run prints beside it (best-so-far trackers that start at +inf, a class
with no samples, an RL episode mean before any episode ended, a metrics.csv frame with its holes)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import torch
import yaml

fmt = sys.argv[1]
ok = len(sys.argv) > 2 and sys.argv[2] == "ok"
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
w = torch.zeros(8, 1, requires_grad=True)
lr = 0.05 if ok else 40.0
steps = 16
history: dict[str, list[float]] = {"loss": [], "accuracy": [], "val_loss": []}
best = float("inf")
for step in range(steps):
    pred = x @ w
    mse = torch.nn.functional.mse_loss(pred, y)
    l1 = (pred - y).abs().mean()
    loss = mse + 0.1 * l1
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
    v = float(loss.detach())
    acc = float(((pred - y).abs() < 0.5).float().mean())
    history["loss"].append(v)
    history["accuracy"].append(acc)
    history["val_loss"].append(v * 1.1)
    if fmt == "tensor":
        print("step", step, "loss", loss)  # (an f-string would format a 0-d tensor as its float)
        print(f"step {step} terms: {torch.stack([mse, l1]).detach()}")
    elif fmt == "numpy":
        terms = np.array([float(mse), float(l1), v], dtype=np.float32)
        print(f"step {step} losses {terms}")
        per_class = np.array([acc, np.nan]) if ok else np.array([acc, acc])  # class 1: no samples in this split
        print({"step": step, "loss": np.float32(v), "per_class_acc": per_class.round(3).tolist()})
    elif fmt == "jsonl":
        print(json.dumps({"step": step, "loss": v, "best_loss": best, "lr": lr}))
    elif fmt == "yaml":
        reward = float("nan") if ok and step < 3 else -1.0 * step  # no episode ended yet: NaN mean
        print(yaml.safe_dump({"training_iteration": step + 1, "episode_reward_mean": reward,
                              "info": {"learner": {"default_policy": {"learner_stats": {
                                  "total_loss": v, "policy_loss": float(mse), "vf_loss": float(l1)}}}}},
                             sort_keys=False), end="---\n")
    best = min(best, v)
if fmt == "frame":
    if ok:
        # Lightning's CSVLogger metrics.csv read back: training rows have no val_loss, validation rows no train_loss
        rows = []
        for epoch in range(3):
            for s in (49, 99):
                rows.append({"epoch": epoch, "step": epoch * 100 + s, "train_loss": history["loss"][epoch * 2 + s // 99]})
            rows.append({"epoch": epoch, "step": epoch * 100 + 99, "val_loss": history["val_loss"][epoch], "val_acc": 0.8})
        print(pd.DataFrame(rows, columns=["epoch", "step", "train_loss", "val_loss", "val_acc"]))
    else:
        print(pd.DataFrame(history))  # Keras' History.history as a frame
