"""clip_grad_norm_(error_if_nonfinite=True) on a model whose loss overflows to inf."""
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(8, 4) * (1.0 if step < 2 else 1e30)
    loss = (model(x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    print(f"step {step}: loss={loss.item():.4f} grad_norm={norm.item():.4f}", flush=True)
    opt.step()
