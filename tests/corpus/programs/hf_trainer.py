"""transformers' Trainer on a tiny model built in code (corpus generator program).

Usage: python hf_trainer.py MODE. The model is a two-layer regressor whose forward
returns {"loss": ...} (Trainer accepts any nn.Module that does); the data set is made in
memory. MODE: healthy, nan (the loss turns NaN at step 12; logging_nan_inf_filter off so
Trainer logs it), nan-filtered (same with the default filter on: only grad_norm shows it),
grad-inf, callback-error, eval-error, print-args (prints TrainingArguments, full of
`nan`/`inf` words, then trains healthily).
"""

from __future__ import annotations

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

    def forward(self, x=None, labels=None):
        self.calls += 1
        out = self.net(x)
        loss = torch.nn.functional.mse_loss(out.squeeze(-1), labels)
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


class Boom(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        if state.global_step == 9:
            raise ValueError(f"custom metric callback got an empty batch at step {state.global_step}")


def main() -> None:
    mode = sys.argv[1]
    model = Tiny(nan_from=12 if mode.startswith("nan") else None, inf_from=12 if mode == "grad-inf" else None)
    args = TrainingArguments(
        output_dir="/tmp/corpus-hf-out", per_device_train_batch_size=8, max_steps=24, logging_steps=3,
        learning_rate=1e-3, report_to=[], save_strategy="no", disable_tqdm=False, use_cpu=True,
        logging_nan_inf_filter=(mode != "nan"), eval_strategy="steps" if mode == "eval-error" else "no",
        eval_steps=6, seed=0)
    if mode == "print-args":
        print(args)
    callbacks = [Boom()] if mode == "callback-error" else []
    eval_ds = Data(16) if mode == "eval-error" else None
    if eval_ds is not None:
        eval_ds.__getitem__ = None  # noqa: B010 -- replaced below, a real failure inside evaluate()

        class Broken(Data):
            def __getitem__(self, i):
                return {"x": self.x[i][:4], "labels": self.y[i]}
        eval_ds = Broken(16)
    trainer = Trainer(model=model, args=args, train_dataset=Data(), eval_dataset=eval_ds, callbacks=callbacks)
    trainer.train()
    print("done", flush=True)


if __name__ == "__main__":
    main()
