"""A policy-gradient loop whose policy network's output goes NaN: torch.distributions'
argument validation (on by default) raises `Expected parameter loc ... but found invalid
values:` with the NaN tensor printed on the lines below (tests/test_detectors_shapes_nonfinite_messages.py)."""
import torch

torch.manual_seed(0)
policy = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(policy.parameters(), lr=1e4)  # a learning rate that makes the weights blow up
for step in range(20):
    obs = torch.randn(4, 3)
    loc = policy(obs)
    dist = torch.distributions.Normal(loc, torch.ones_like(loc))
    act = dist.sample()
    loss = -(dist.log_prob(act).sum(-1) * 1e3).mean() + (loc ** 4).mean()
    if step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    opt.zero_grad()
    loss.backward()
    opt.step()
