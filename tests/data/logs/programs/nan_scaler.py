"""torch.amp.GradScaler on CPU (bf16 autocast, scaler enabled): overflow from step 3 on."""
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
for step in range(12):
    x = torch.randn(8, 4) * (1.0 if step < 3 else 1e38)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = (model(x) ** 2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    print(f"step {step} loss={loss.item():.4f} grad_norm={gn.item():.4f} scale={scaler.get_scale():.1f}", flush=True)
