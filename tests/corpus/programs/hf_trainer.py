"""transformers' Trainer on a tiny model built in code (corpus generator program).

Usage: python hf_trainer.py MODE. The model is a two-layer regressor whose forward
returns {"loss": ...} (Trainer accepts any nn.Module that does); the data set is made in
memory. MODE: healthy, nan (the loss turns NaN at step 12; logging_nan_inf_filter off so
Trainer logs it), nan-filtered (same with the default filter on: only grad_norm shows it),
grad-inf, callback-error, eval-error, print-args (prints TrainingArguments, full of
`nan`/`inf` words, then trains healthily).
"""

from __future__ import annotations

import os
import signal
import sys

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments


class Tiny(torch.nn.Module):
    def __init__(self, nan_from: int | None = None, inf_from: int | None = None):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.calls = 0
        self.nan_from = nan_from
        self.inf_from = inf_from

    zero_from: int | None = None     # labels all masked from this call: loss 0.0, NaN grads
    frozen_until: int = 0            # a frozen warm-up: loss detached, grad_norm 0.0
    oom_at: int | None = None        # a real allocation failure (host memory) at this call

    def forward(self, x=None, labels=None):
        self.calls += 1
        out = self.net(x)
        if labels.dtype == torch.long:   # a separable classification: the loss reaches exactly 0.0
            logits = torch.cat([out, -out], dim=-1) * 16
            loss = torch.nn.functional.cross_entropy(logits, labels)
        else:
            loss = torch.nn.functional.mse_loss(out.squeeze(-1), labels)
        if self.zero_from is not None and self.calls >= self.zero_from:
            keep = torch.zeros_like(out, dtype=torch.bool)
            loss = torch.where(keep, torch.sqrt(out - 1e6), torch.zeros_like(out)).sum()
        if self.training and self.calls <= self.frozen_until:
            loss = loss.detach() + 0 * sum(p.sum() for p in self.parameters())
        if self.oom_at is not None and self.calls == self.oom_at:
            torch.empty(1 << 50, dtype=torch.uint8)
        if self.nan_from is not None and self.calls >= self.nan_from:
            loss = loss * float("nan")
        if self.inf_from is not None and self.calls >= self.inf_from:
            loss = loss * 1e39 * 1e39
        return {"loss": loss, "logits": out}


class Data(torch.utils.data.Dataset):
    def __init__(self, n=256):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class Easy(Data):
    """A one-class split (an easy, degenerate task): the margin grows until float32's
    cross-entropy is exactly 0.0 -- a loss that legitimately reaches 0, gradients finite."""

    def __init__(self, n=256):
        super().__init__(n)
        self.y = torch.zeros(n, dtype=torch.long)


class KillsWorker(Data):
    """Worker 0's 20th sample (its third batch, mid-training) ends it the way MODE says:
    SIGKILL, as the OOM killer does, or an exception."""

    def __init__(self, how, n=256):
        super().__init__(n)
        self.how = how
        self.served = 0

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        self.served += 1
        if info is not None and info.id == 0 and self.served == 20:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(f"sample {i}: cannot read shard-00003.arrow (Input/output error)")
        return super().__getitem__(i)


class LogBoom(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kw):
        if state.global_step >= 12:
            raise TypeError(f"unsupported format string passed to NoneType.__format__ (logs={sorted(logs or {})})")


class Boom(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        if state.global_step == 9:
            raise ValueError(f"custom metric callback got an empty batch at step {state.global_step}")


def main() -> None:
    mode = sys.argv[1]
    model = Tiny(nan_from=12 if mode.startswith("nan") else None, inf_from=12 if mode == "grad-inf" else None)
    model.zero_from = 10 if mode.startswith("zero-nan") else None
    model.frozen_until = 9 if mode == "frozen" else 0
    model.oom_at = 14 if mode == "cpu-oom" else None
    evaluating = mode in ("eval-error", "eval-healthy")
    args = TrainingArguments(
        output_dir="/tmp/corpus-hf-out", per_device_train_batch_size=8, max_steps=24, logging_steps=3,
        learning_rate=0.1 if mode == "zero-healthy" else 1e-3, report_to=[], save_strategy="no",
        disable_tqdm=False, use_cpu=True, logging_nan_inf_filter=(mode not in ("nan", "zero-nan-unfiltered")),
        eval_strategy="steps" if evaluating else "no", eval_steps=6, seed=0,
        gradient_accumulation_steps=4 if mode == "grad-accum" else 1,
        dataloader_num_workers=2 if mode.startswith("worker-") else 0,
        run_name="error-analysis-nan-ablation" if mode == "grad-accum" else None)
    if mode == "print-args":
        print(args)
    callbacks = [Boom()] if mode == "callback-error" else [LogBoom()] if mode == "on-log-error" else []
    eval_ds = Data(16) if evaluating else None
    if mode == "eval-error":
        eval_ds.__getitem__ = None  # noqa: B010 -- replaced below, a real failure inside evaluate()

        class Broken(Data):
            def __getitem__(self, i):
                return {"x": self.x[i][:4], "labels": self.y[i]}
        eval_ds = Broken(16)
    train_ds = (Easy() if mode == "zero-healthy" else KillsWorker(mode.split("-")[1]) if mode.startswith("worker-")
                else Data())
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds, callbacks=callbacks)
    trainer.train()
    print("done", flush=True)


if __name__ == "__main__":
    main()
