"""A data-parallel worker for multi-node job fixtures (tests/corpus/jobs/generate.py).

Usage: torchrun --nnodes 2 --node-rank I ... job_worker.py MODE --bad-rank R [--steps N].
Every rank trains a tiny model over gloo and all-reduces its gradients each step; global
rank R ends the way MODE says at step 12:
  sigkill  -- SIGKILL to itself (what `kill -9` of a worker does; a real signal)
  oom      -- raises the real torch.OutOfMemoryError type with the CUDA allocator's
              wording (FIELD-NOTES "Failure text"): a stand-in, as this machine has no GPU
  hang     -- stops joining collectives (the others time out after 5 s)
  restart  -- SIGKILL on the first attempt only (TORCHELASTIC_RESTART_COUNT 0); the
              restarted group (torchrun --max-restarts 1) trains to the end
Rank 0 prints a progress line every 4 steps with the time, as trainers' loggers do.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    mode = sys.argv[1]
    bad = int(sys.argv[sys.argv.index("--bad-rank") + 1])
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 24
    timeout_s = 5 if mode == "hang" else 60
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    truth = os.environ.get("JOB_TRUTH_DIR")
    if truth:   # which global ranks this node's torchrun got (c10d assigns them): the label, not the log
        with open(os.path.join(truth, f"node{os.environ['JOB_NODE']}-rank{rank}"), "w") as fh:
            fh.write(os.environ.get("LOCAL_RANK", ""))
    torch.manual_seed(rank)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(32, 8)
    y = x.sum(-1, keepdim=True)
    for step in range(1, steps + 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        if rank == bad and step == 12:
            sys.stdout.flush()
            if mode == "sigkill" or (mode == "restart" and attempt == 0):
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "oom":
                raise torch.OutOfMemoryError(
                    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a total capacity of 139.81 GiB "
                    "of which 3.12 GiB is free. Of the allocated memory 131.02 GiB is allocated by PyTorch")
            if mode == "hang":
                time.sleep(30)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(0.05)
        if rank == 0 and step % 4 == 0:
            now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
            print(f"[{now}] [INFO] step={step} loss={loss.item():.4f} tok_per_s={4000 + step}.0 world={world}",
                  flush=True)
    dist.barrier()
    if rank == 0:
        print("all ranks finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
