"""DeepSpeed's real DynamicLossScaler driven by real fp16 gradients on CPU (corpus
generator program).

Usage: python ds_loss_scaler.py MODE. The model's gradients are cast to fp16 and
multiplied by the current scale, as DeepSpeed's FP16 optimizer does; the scaler's
update_scale prints DeepSpeed's real messages.
MODE: healthy (the default init scale 2**32 overflows for the first steps: the normal
loss-scale search, then steady), collapse (the loss explodes at step 40: every step
overflows until the scale is at its minimum and DeepSpeed raises), hysteresis (the same
with delayed_shift=2, which prints the hysteresis wording first).
"""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import torch
from deepspeed.runtime.fp16 import loss_scaler
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
from deepspeed.utils import logger as ds_logger


def main() -> None:
    mode = sys.argv[1]
    # One process is rank 0: the scaler only asks deepspeed.comm for the rank to decide who
    # logs. (deepspeed.init_distributed on CPU JIT-builds a shared-memory op first, minutes
    # on 2 cores, so the rank is answered here instead.)
    loss_scaler.dist = SimpleNamespace(get_rank=lambda: 0)
    # INFO, as the deepspeed launcher's --log_level=info sets it (DeepSpeed's default is WARNING)
    ds_logger.setLevel(logging.INFO)
    for h in ds_logger.handlers:
        h.setLevel(logging.INFO)
    scaler = DynamicLossScaler(init_scale=2 ** 32, scale_window=50, min_scale=1,
                               delayed_shift=2 if mode == "hysteresis" else 1, consecutive_hysteresis=False)
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, 32)
    y = x.sum(-1, keepdim=True)
    skipped = 0
    for step in range(1, 121):
        loss = torch.nn.functional.mse_loss(model(x), y)
        if mode != "healthy" and step >= 40:
            loss = loss * 1e6 * step  # the loss explodes: fp16 cannot hold the scaled gradients
        opt.zero_grad()
        (loss * scaler.cur_scale).backward()
        # (has_overflow_serial itself fails in 0.19.8: a staticmethod-less helper; same check here)
        overflow = any(not torch.isfinite(p.grad.to(torch.float16)).all() for p in model.parameters())
        scaler.update_scale(overflow)
        if overflow:
            skipped += 1
        else:
            for p in model.parameters():
                p.grad /= scaler.cur_scale
            opt.step()
        if step % 10 == 0:
            print(f"steps: {step} loss: {loss.item():.4f} iter time (s): 0.412 samples/sec: 155.3 "
                  f"loss_scale: {scaler.cur_scale} skipped: {skipped}", flush=True)
    print("training done", flush=True)


if __name__ == "__main__":
    main()
