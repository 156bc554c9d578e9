"""A tiny regression whose loss goes NaN in backward, run under torch.autograd anomaly mode."""
import torch
torch.manual_seed(0)
w = torch.nn.Parameter(torch.tensor([1.0, -1.0]))
opt = torch.optim.SGD([w], lr=0.1)
with torch.autograd.set_detect_anomaly(True):
    for step in range(3):
        x = torch.tensor([0.5, 0.0]) if step < 2 else torch.tensor([0.0, 0.0])
        loss = torch.sqrt((w * x).abs()).sum()  # sqrt'(0) -> inf * 0 -> nan
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
