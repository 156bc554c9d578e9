"""torch.amp.GradScaler on CPU starting far too high: it skips its first steps while it halves, then trains."""
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127, growth_interval=2000)
for step in range(10):
    x = torch.randn(8, 4) * 4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = (model(x) ** 2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped = scaler.get_scale() < before
    print(f"step {step} loss={loss.item():.4f} scale={scaler.get_scale():.1f}" + (" (inf/nan grads: step skipped)" if skipped else ""), flush=True)
print("training done")
