"""The CUDA RMSNorm (trainer/model.py: F.rms_norm, one fused kernel) against the float32
elementwise formula it replaced: outputs and gradients under bf16 autocast, whether the
same values give the same bits (again, and at a 2-byte-offset address), and fwd+bwd time,
on one 49K-token x 2048 batch. `python3 bench/checks/rmsnorm_cuda.py` (GPU)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from trainer.model import RMSNorm  # noqa: E402


def elementwise(x, w, eps=1e-6):
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return w.to(x.dtype) * x32.to(x.dtype)


def ms_per_call(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / reps


def main():
    torch.manual_seed(0)
    x = torch.randn(49152, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    norm = RMSNorm(2048).cuda()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y, y_ref = norm(x), elementwise(x, norm.weight)
    g = torch.randn_like(y)
    gx, gw = torch.autograd.grad(y, (x, norm.weight), g)
    gx_ref, gw_ref = torch.autograd.grad(y_ref, (x, norm.weight), g)

    def fwd_bwd(f):
        def run():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = f()
            out.backward(g)
        return run

    # reproducibility: the same values again, and the same values at a 2-byte-offset address
    y2 = norm(x)
    gx2, gw2 = torch.autograd.grad(norm(x), (x, norm.weight), g)
    buf = torch.empty(x.numel() + 1, device="cuda", dtype=x.dtype)
    shifted = buf[1:].view_as(x)
    shifted.copy_(x.detach())
    shifted.requires_grad_(True)
    y3 = norm(shifted)
    gx3, gw3 = torch.autograd.grad(y3, (shifted, norm.weight), g)
    repro = {"same_input_y_equal": torch.equal(y, y2), "same_input_grads_equal": torch.equal(gx, gx2) and torch.equal(gw, gw2),
             "offset_input_y_equal": torch.equal(y, y3), "offset_y_max_abs_diff": (y.float() - y3.float()).abs().max().item(),
             "offset_grads_equal": torch.equal(gx, gx3) and torch.equal(gw, gw3)}
    fused = ms_per_call(fwd_bwd(lambda: norm(x)))
    ref = ms_per_call(fwd_bwd(lambda: elementwise(x, norm.weight)))
    print({"dtype_out": str(y.dtype), "y_max_abs_diff": (y.float() - y_ref.float()).abs().max().item(),
           "gx_max_rel_diff": ((gx - gx_ref).float().abs().max() / gx_ref.float().abs().max()).item(),
           "gw_max_rel_diff": ((gw - gw_ref).abs().max() / gw_ref.abs().max()).item(),
           "fused_fwd_bwd_ms": fused, "elementwise_fwd_bwd_ms": ref, "speedup": ref / fused, **repro})


if __name__ == "__main__":
    main()
