"""Real OOM and healthy memory-report output (issue 22, k13oomsrc); one case a process:
python oom_wordings.py numpy|torch-cpu|torch-cuda|cupy|pylist|healthy"""
import sys

c = sys.argv[1]
print("case", c, flush=True)
if c == "numpy":
    import numpy as np
    np.ones((2**22, 2**22))
elif c == "torch-cpu":
    import torch
    torch.empty(2**44)
elif c == "torch-cuda":
    import torch
    keep = torch.empty(2**28, device="cuda")
    torch.empty(2**40, device="cuda")
elif c == "cupy":
    import cupy
    cupy.empty(2**40, dtype=cupy.float32)
elif c == "pylist":
    [0] * (2**62)
elif c == "healthy":
    import torch
    m = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for step in range(3):
        loss = m(torch.randn(256, 1024, device="cuda")).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        a, mx, r = (f(0) / 2**20 for f in (torch.cuda.memory_allocated, torch.cuda.max_memory_allocated,
                                             torch.cuda.memory_reserved))
        print(f"step {step} loss {loss.item():.4f} memory_allocated {a:.1f} MiB max_memory_allocated {mx:.1f} MiB "
              f"memory_reserved {r:.1f} MiB", flush=True)
    free, total = torch.cuda.mem_get_info()
    print(f"mem_get_info: free {free / 2**30:.2f} GiB of {total / 2**30:.2f} GiB")
    print(torch.cuda.memory_summary(abbreviated=True))
