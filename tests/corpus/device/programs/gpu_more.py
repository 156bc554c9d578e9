"""More healthy GPU runs whose logs hold words a failure reader could trip on (device
corpus program, run on the lent H200 by make_device_logs.sh, section `more`).

    python gpu_more.py MODE

amp-healthy      fp16 autocast with torch.amp.GradScaler starting at 2**20: the first steps'
                 gradients overflow in fp16, so the scaler skips them and halves the scale
                 until it fits -- the normal loss-scale search -- then grows it every 25
                 clean steps; every step prints its loss and scale
compile-healthy  torch.compile(mode="max-autotune-no-cudagraphs") on a bf16 MLP: inductor
                 benchmarks its Triton matmul choices on the GPU, then 30 steps train
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F


def mlp(d: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.GELU(), torch.nn.Linear(d, d), torch.nn.GELU(),
                               torch.nn.Linear(d, 1)).cuda()


def amp_healthy() -> None:
    model = mlp(1024)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**20, growth_interval=25)
    for step in range(1, 81):
        x = torch.randn(512, 1024, device="cuda")
        y = x[:, :8].sum(-1, keepdim=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.mse_loss(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f} loss_scale {scaler.get_scale():.0f}", flush=True)


def compile_healthy() -> None:
    model = mlp(4096).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_fn = torch.compile(model, mode="max-autotune-no-cudagraphs")
    t0 = time.time()
    for step in range(1, 31):
        x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
        y = x[:, :8].sum(-1, keepdim=True)
        loss = F.mse_loss(step_fn(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 1 or step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    mode = sys.argv[1]
    print(f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name(0)}; mode {mode}",
          flush=True)
    {"amp-healthy": amp_healthy, "compile-healthy": compile_healthy}[mode]()
