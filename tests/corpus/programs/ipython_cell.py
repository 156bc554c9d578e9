# Run with `ipython --colors=nocolor ipython_cell.py MODE` (corpus generator program):
# IPython prints its own traceback shape (the exception name and "Traceback (most recent
# call last)" on one line, "----> N" markers, "File path:line" frames).
import sys

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "shape"
model = torch.nn.Linear(8, 4)
for step in range(1, 11):
    x = torch.randn(4, 8 if mode != "shape" or step < 6 else 5)
    loss = model(x).pow(2).mean()
    if mode == "nan" and step >= 5:
        loss = loss * float("nan")
    print(f"step {step}: loss={loss.item():.4f}")
    if mode == "keyerror" and step == 4:
        batch = {"input_ids": x}
        batch["attention_mask"]
    if mode == "tempting" and step == 3:
        import warnings
        warnings.warn("ErrorDocument schema v1 is deprecated; nan_policy='raise' ignored", FutureWarning, stacklevel=1)
        print("eval: error_rate=0.0 nan_count=0 oom_retries=0 failed=0")
    if mode == "assert" and step == 7:
        assert loss.item() < 0, f"loss went positive at step {step}"
print("cell done")
