"""A healthy run full of nan/inf words: anomaly mode switched on (its start-up warning), an
attention mask of -inf, nan_to_num, numpy's invalid-value warning on a metric over an empty
class, a config dump naming the NaN checks; the loss is finite and falls
(tests/test_detectors_shapes_nonfinite_messages.py: must stay quiet)."""
import numpy as np
import torch

print("config: detect_anomaly: True, skip_nan_check: False, nan_to_num: True, check_finite: True, terminate_on_nan: False")
torch.autograd.set_detect_anomaly(True)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
mask = torch.triu(torch.full((3, 3), float("-inf")), diagonal=1)
print("causal mask:", mask)
x, y = torch.randn(64, 4), torch.randn(64, 1)
for step in range(5):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    opt.step()
    print(f"step {step} loss {loss.item():.4f} grad_norm {norm.item():.4f}", flush=True)
hits, counts = np.array([3.0, 0.0]), np.array([4.0, 0.0])
print("per-class recall:", hits / counts)  # class 1 has no samples: 0/0
print("nan_to_num:", torch.nan_to_num(torch.tensor([float("nan"), 1.0])))
print("done: skipped 0 non-finite steps, best loss so far inf -> %.4f" % loss.item())
