"""Lightning's Trainer on a tiny module (corpus generator program).

Usage: python lightning_run.py MODE [--tqdm] (the tqdm bar instead of the rich one). MODE: healthy, nan (the loss turns NaN at batch 10),
step-error (an exception in training_step), val-error (in validation_step),
anomaly (detect_anomaly=True and a NaN made in backward).
"""

from __future__ import annotations

import sys

import lightning as L
import torch


class Tiny(L.LightningModule):
    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        if self.mode == "nan" and self.global_step >= 10:
            loss = loss * float("nan")
        if self.mode == "step-error" and self.global_step == 7:
            raise RuntimeError(f"expected scalar type Float but found Half (batch {i})")
        if self.mode == "oom" and self.global_step == 5:
            torch.empty(1 << 50, dtype=torch.uint8)
        if self.mode == "loss-zero-healthy":
            loss = loss * 0.0  # an auxiliary objective switched off: the logged loss is exactly 0
        if self.mode == "anomaly" and self.global_step == 6:
            w = torch.zeros(2, requires_grad=True)
            loss = loss + (torch.sqrt(w - 1.0) * 0).sum()  # NaN in forward and backward
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        if self.mode == "val-error":
            x = x[:, :3]
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y), prog_bar=True)

    def configure_optimizers(self):
        if self.mode == "optim-error":
            return torch.optim.AdamW(self.parameters(), lr=1e-3, betas=(0.9, 1.5))
        return torch.optim.SGD(self.parameters(), lr=1e-3)


class Checkpointish(L.Callback):
    """A user callback that fails at the end of a training batch (a metric writer)."""

    def on_train_batch_end(self, trainer, module, outputs, batch, i):
        if trainer.global_step == 9:
            raise FileNotFoundError(2, "No such file or directory", "/ckpt/metrics/epoch0.json")


class Tempting(L.Callback):
    """Logs words a grep flags while the run is healthy."""

    def on_train_epoch_end(self, trainer, module):
        module.log_dict({"nan_count": 0.0, "error_rate": 0.02, "oom_retries": 0.0})


def loader(n=256):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(-1)), batch_size=16)


def main() -> None:
    mode = sys.argv[1]
    bars = [L.pytorch.callbacks.TQDMProgressBar()] if "--tqdm" in sys.argv else []
    bars += [Checkpointish()] if mode == "callback-error" else [Tempting()] if mode == "tempting" else []
    trainer = L.Trainer(callbacks=bars, max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        detect_anomaly=(mode == "anomaly"), log_every_n_steps=2,
                        limit_val_batches=2, num_sanity_val_steps=0)
    if mode == "validate-error":
        trainer.validate(Tiny("val-error"), loader(32))
    if mode == "validate-healthy":
        trainer.validate(Tiny("healthy"), loader(32))
    trainer.fit(Tiny(mode), loader(), loader(32))
    print("fit done", flush=True)


if __name__ == "__main__":
    main()
