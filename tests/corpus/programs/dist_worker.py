"""A data-parallel worker over gloo, started by torchrun / accelerate / deepspeed
(corpus generator program).

Usage: <launcher> dist_worker.py MODE [--bad-rank R]. Every rank trains a tiny model and
all-reduces its gradients; rank R (default 1) ends the way MODE says: exception, segv,
abort, sigkill, exit (code 3), gloo-timeout (it stops joining collectives, so the others
time out), nan (its loss turns NaN and the all-reduce spreads it), healthy.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    mode = next(a for a in sys.argv[1:] if not a.startswith("--"))  # deepspeed adds --local_rank=N
    bad = int(sys.argv[sys.argv.index("--bad-rank") + 1]) if "--bad-rank" in sys.argv else 1
    timeout_s = 6 if mode.startswith("gloo-") else 60
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    timeout = datetime.timedelta(seconds=timeout_s)
    if mode.startswith("restart-"):
        # A restarted group must not read the last attempt's gloo addresses from the
        # launcher's store (they are refused: `Gloo connectFullMesh failed`): one key
        # prefix per attempt, as elastic training scripts do.
        base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                             timeout=timeout)
        dist.init_process_group("gloo", timeout=timeout, store=dist.PrefixStore(f"attempt{restart}", base),
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    else:
        dist.init_process_group("gloo", timeout=timeout)
    if mode == "restart-recovers" and restart == 0:
        mode = "exception"   # the first attempt fails; torchrun restarts the group, the second succeeds
    if mode == "restart-exhausted":
        mode = "exception"
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(32, 8)
    y = x.sum(-1, keepdim=True)
    if mode in ("tempting", "restart-recovers") and rank == 0 and restart:
        print("NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_BLOCKING_WAIT=0 timeout=60s nan_check=on", flush=True)
        print("watchdog: heartbeat ok; 0 collective timeouts; 0 ranks killed", flush=True)
    for step in range(1, 31):
        loss = torch.nn.functional.mse_loss(model(x), y)
        if mode == "nan" and rank == bad and step >= 15:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        if rank == bad and step == 15:
            sys.stdout.flush()
            if mode == "exception":
                raise ValueError(f"rank {rank}: batch {step} has 0 tokens after filtering")
            if mode == "segv":
                ctypes.string_at(0)
            if mode == "abort":
                os.abort()
            if mode == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "exit":
                sys.exit(3)
            if mode == "gloo-timeout":
                time.sleep(30)
            if mode == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            if mode == "exit1":
                print(f"rank {rank}: fatal: checkpoint shard missing", file=sys.stderr, flush=True)
                sys.exit(1)
            if mode == "gloo-barrier":
                time.sleep(30)
        if mode == "gloo-barrier" and step == 15:
            dist.barrier()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}/30 | loss {loss.item():.4f} | world {world} | tok/s {8000 + step}", flush=True)
    dist.barrier()
    if rank == 0:
        print("all ranks finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
