"""Hold GPU memory and keep the GPU busy until killed, so nvidia-smi has something to show
(device corpus program: the nvidia-smi fixtures beside the logs were read while this ran).

    python gpu_holder.py GIB
"""

from __future__ import annotations

import sys

import torch

held = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print(f"holding {held.numel() / 2**30:.0f} GiB on {torch.cuda.get_device_name(0)}; busy", flush=True)
while True:
    for _ in range(50):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
