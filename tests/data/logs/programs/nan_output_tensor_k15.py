"""Real torch output for the all-NaN tensor-dump reader (issue 22, helper k15nan), run here on CPU
(torch 2.13.0+cpu, Python 3.11), each log the program's stdout+stderr as produced:

  nan_output_tensor_k15.log     python nan_output_tensor_k15.py diverge
  nan_output_tensor_ok_k15.log  python nan_output_tensor_k15.py masked

`diverge`: a small classifier trained with SGD at an absurd
learning rate; each step the loop checks its outputs the way a user debugging NaN does and prints the
output tensor once it holds a NaN. `masked`: a healthy run
that prints per-token scores with the padded positions set to NaN (torch.where) -- NaN beside finite
values, the shape of an attribution or a masked metric, not a network gone NaN."""
import sys

import torch

torch.manual_seed(0)
torch.set_printoptions(precision=4)
mode = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 7))
x = torch.randn(24, 16)
y = torch.randint(0, 7, (24,))
if mode == "diverge":
    opt = torch.optim.SGD(model.parameters(), lr=1e12)
    for step in range(6):
        outputs = model(x)
        loss = torch.nn.functional.cross_entropy(outputs, y)
        print(f"step {step}")
        if int((outputs != outputs).sum()) > 0:
            print("outputs contain NaN")
            print(outputs.detach())
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lengths = torch.tensor([7, 5, 3, 6])
    for step in range(3):
        outputs = model(x)
        loss = torch.nn.functional.cross_entropy(outputs, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}")
    scores = model(x[:4]).softmax(-1).detach()
    pad = torch.arange(7)[None, :] >= lengths[:, None]
    print("per-token scores (padding is nan)")
    print(torch.where(pad, torch.tensor(float("nan")), scores))
