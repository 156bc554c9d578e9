"""A DistributedDataParallel training loop over NCCL on CUDA GPUs (device corpus program,
run on the lent H200 by make_device_logs.sh).

    python nccl_run.py MODE [--timeout-s S] [--busy-s S] [--same-gpu]   (or under torchrun)

healthy    30 steps; every backward all-reduces the gradients through NCCL; clean shutdown
straggler  at step 3 the forward pass puts a kernel that spins for --busy-s seconds
           (torch.cuda._sleep) on the stream before the gradient all-reduce: a rank whose
           GPU is stuck. With --timeout-s below --busy-s, ProcessGroupNCCL's watchdog times
           the all-reduce out while the main thread waits in loss.item(); what happens next
           is TORCH_NCCL_ASYNC_ERROR_HANDLING's choice (default: take the process down;
           0: log it and let the run hang on)

--same-gpu puts every rank on cuda:0 (two ranks on one GPU, which NCCL refuses).
Without torchrun the script is its own world of one (RANK 0, WORLD_SIZE 1).
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def flag(name: str, default: float) -> float:
    return float(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


class Net(torch.nn.Module):
    def __init__(self, busy_cycles: int) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1))
        self.busy_cycles = busy_cycles

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.busy_cycles:
            torch.cuda._sleep(self.busy_cycles)  # the GPU is stuck in one long kernel
        return self.body(x)


def main() -> None:
    mode = sys.argv[1]
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(29500 + os.getpid() % 1000)),
                 ("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(k, v)
    local_rank = 0 if "--same-gpu" in sys.argv else int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    timeout_s = flag("--timeout-s", 600)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}/{world} on cuda:{local_rank} ({torch.cuda.get_device_name(local_rank)}), "
          f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, collective timeout {timeout_s:g} s", flush=True)
    torch.manual_seed(rank)
    net = Net(0).cuda()
    model = DDP(net, device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    # ~1.98 GHz SM clock on an H200: cycles for --busy-s seconds of one spinning kernel
    busy_cycles = int(flag("--busy-s", 60) * 1.98e9)
    t0 = time.time()
    for step in range(1, 31):
        x = torch.randn(256, 1024, device="cuda")
        y = x[:, :8].sum(-1, keepdim=True)
        net.busy_cycles = busy_cycles if mode == "straggler" and step == 3 else 0
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"[rank {rank}] step {step} loss {loss.item():.4f} ({time.time() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()
    print(f"[rank {rank}] done", flush=True)


if __name__ == "__main__":
    main()
