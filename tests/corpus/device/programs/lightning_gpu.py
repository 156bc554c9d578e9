"""A Lightning run on one CUDA GPU in 16-bit mixed precision (device corpus program, run on
the lent H200 by make_device_logs.sh, section `more`): healthy; Lightning's own start-up
lines (GPU available, AMP, CUDA_VISIBLE_DEVICES, the model summary) and its progress bar.

    python lightning_gpu.py
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    pl.seed_everything(0)
    x = torch.randn(4096, 256)
    data = DataLoader(TensorDataset(x, x[:, :8].sum(-1, keepdim=True)), batch_size=64, shuffle=True)
    trainer = pl.Trainer(accelerator="gpu", devices=1, precision="16-mixed", max_epochs=3, log_every_n_steps=16,
                         enable_checkpointing=False, logger=False)
    trainer.fit(Regressor(), data)
    print(f"final loss {trainer.callback_metrics['loss'].item():.4f}", flush=True)


if __name__ == "__main__":
    main()
