"""trainer/loss_kernel.py against loss._ce_chunk's arithmetic, on fresh random logits.

Runs where Triton is importable: on a CUDA device (the tuned kernel), else on the CPU under
Triton's interpreter (TRITON_INTERPRET=1, set before the module is loaded again): the test
command installs Triton 3.6.0 (pyproject's dev extra), so CI runs it on the CPU; it ran on the
H200 too (BENCHMARKS.md, trainer run 11). Seeds are fixed: CI draws the same logits each run."""

import importlib
import os

import pytest
import torch

CUDA = torch.cuda.is_available()
_was = os.environ.get("TRITON_INTERPRET")
if not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"      # read when Triton is first imported
try:
    import triton  # noqa: F401
except ImportError:
    if _was is None:
        os.environ.pop("TRITON_INTERPRET", None)
    pytest.skip("Triton is not importable here", allow_module_level=True)


@pytest.fixture(scope="module")
def kernel():
    from trainer import loss_kernel

    mod = importlib.reload(loss_kernel)        # its kernels decorated under this process's mode
    yield mod, torch.device("cuda" if CUDA else "cpu")
    if _was is None:
        os.environ.pop("TRITON_INTERPRET", None)


def _reference(logits, labels, w):
    """loss._ce_chunk's pass over given logits: fp32 math, the gradient rounded once."""
    x = logits.float()
    lse = torch.logsumexp(x, dim=-1)
    loss = ((lse - x.gather(1, labels[:, None]).squeeze(1)) * w).sum()
    onehot = torch.nn.functional.one_hot(labels, x.shape[1]).float()
    return loss, x.argmax(dim=-1), ((torch.exp(x - lse[:, None]) - onehot) * w[:, None]).to(logits.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_argmax_and_gradient_equal_the_reference(kernel, dtype):
    mod, dev = kernel
    g = torch.Generator().manual_seed(20261202)                  # derandomized, as CI runs every test
    n, v = (64, 151936) if dev.type == "cuda" else (5, 9001)      # V not a multiple of any tile
    logits = (torch.randn(n, v, generator=g) * 4).to(dtype)
    logits[1, 3] = logits[1].max() + 2
    logits[1, v - 2] = logits[1, 3]                               # a tie: the first index wins, as torch's
    labels = torch.randint(0, v, (n,), generator=g)
    labels[0] = v - 1                                             # the last column (the masked tail tile)
    w = torch.rand(n, generator=g)
    ref_loss, ref_pred, ref_grad = _reference(logits, labels, w)
    buf = logits.to(dev).clone()
    loss, pred = mod.ce_rows_inplace(buf, labels.to(dev), w.to(dev))
    assert torch.equal(pred.cpu(), ref_pred) and pred[1].item() == 3
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    # the gradient over the logits' own storage, every element written: bf16 within one
    # rounding of the reference's; fp32 within 1e-5 of the largest (the running log-sum-exp
    # is summed in another order than torch.logsumexp: on the H200 up to 1.3e-6 at -0.99)
    diff = (buf.cpu().float() - ref_grad.float()).abs()
    if dtype == torch.bfloat16:
        bound = torch.finfo(dtype).eps * ref_grad.float().abs().clamp(min=2 ** -14) + 1e-7
    else:
        bound = torch.full_like(diff, 1e-5 * ref_grad.abs().max().item())
    assert torch.isfinite(buf).all() and bool((diff <= bound).all()), diff.max().item()


def test_a_chunk_through_dflash_loss_equals_the_inductor_path(kernel):
    """CUDA only: the whole chunked loss (matmuls included) with kernel='triton' and
    kernel='inductor' -- loss, hits and the gradient to the hidden rows."""
    mod, dev = kernel
    if dev.type != "cuda":
        pytest.skip("the inductor path is CUDA's")
    from trainer.loss import dflash_loss

    g = torch.Generator(device=dev).manual_seed(20261202)
    s, a, bk, h, v = 2, 64, 16, 512, 151936
    weight = (torch.randn(v, h, device=dev, generator=g) * 0.02).bfloat16()
    labels = torch.randint(0, v, (s, a, bk), device=dev, generator=g)
    labels[..., 0] = -100
    base = torch.randn(s, a, bk, h, device=dev, generator=g).bfloat16()
    out = {}
    for name in ("triton", "inductor"):
        hidden = base.clone().requires_grad_(True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            res = dflash_loss(hidden, labels, weight, gamma=7.0, chunk_rows=1000, kernel=name)
        res.loss_sum.backward()
        out[name] = (res.loss_sum.item(), res.correct.cpu(), hidden.grad.float())
    assert out["triton"][0] == pytest.approx(out["inductor"][0], rel=1e-5)
    assert torch.equal(out["triton"][1], out["inductor"][1])
    rel = (out["triton"][2] - out["inductor"][2]).norm() / out["inductor"][2].norm()
    assert rel < 1e-2, rel.item()
