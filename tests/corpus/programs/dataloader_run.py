"""A DataLoader with worker processes that fail (corpus generator program).

Usage: python dataloader_run.py MODE. MODE: worker-error (a worker's __getitem__ raises),
worker-killed (a worker is SIGKILLed, as the host OOM killer does), worker-segv,
healthy (workers exit normally; prints worker counts and a "0 errors" summary).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import torch


class Data(torch.utils.data.Dataset):
    def __init__(self, mode):
        self.mode = mode

    def __len__(self):
        return 400

    def __getitem__(self, i):
        if i == 150:
            if self.mode == "worker-error":
                raise ValueError(f"sample {i}: image file truncated (expected 196608 bytes)")
            if self.mode == "worker-killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.mode == "worker-segv":
                ctypes.string_at(0)
            if self.mode == "worker-abort":
                os.abort()
            if self.mode == "worker-slow":
                time.sleep(30)
        return torch.full((4,), float(i))


def main() -> None:
    mode = sys.argv[1]
    dl = torch.utils.data.DataLoader(Data(mode), batch_size=10, num_workers=2,
                                     timeout=3 if mode == "worker-slow" else 0)
    print("dataloader: num_workers=2 batch_size=10 skip_errors=False oom_guard=on", flush=True)
    total = 0.0
    for step, batch in enumerate(dl, 1):
        total += float(batch.sum())
        if step % 5 == 0:
            print(f"step={step} loss={1.0 / step:.4f} samples={step * 10}", flush=True)
    print(f"epoch done: 0 errors, 0 killed workers, total={total:.0f}", flush=True)


if __name__ == "__main__":
    main()
