"""Workers started by torch.multiprocessing.spawn, as Lightning's ddp_spawn strategy and
many scripts do (corpus generator program).

Usage: python mp_spawn.py MODE. Worker 1 ends the way MODE says: segv, exception, healthy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import torch
import torch.multiprocessing as mp


def worker(rank: int, mode: str) -> None:
    model = torch.nn.Linear(8, 1)
    x = torch.randn(16, 8)
    for step in range(1, 21):
        loss = model(x).pow(2).mean()
        loss.backward()
        if rank == 0 and step % 5 == 0:
            print(f"[worker {rank}] step={step} loss={loss.item():.4f}"
                  + (" nan_skipped=0 errors=0 oom_retries=0" if mode == "tempting" else ""), flush=True)
        if rank == 1 and step == 10:
            if mode == "segv":
                ctypes.string_at(0)
            if mode == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "abort":
                os.abort()
            if mode == "exit":
                sys.exit(3)
            if mode == "exception":
                raise KeyError(f"worker {rank}: missing key 'attention_mask' in batch {step}")


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=2, join=True)
    print("all workers done", flush=True)
