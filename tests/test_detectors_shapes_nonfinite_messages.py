"""NaN/Inf messages of issue 22 (helper k13nanmsg): what training frameworks print when a loss, a
gradient or a network output goes non-finite, from their source -- TensorFlow's check_numerics
callback, Paddle's FLAGS_check_nan_inf and its GradScaler, MMDetection's CheckInvalidLossHook,
Lightning 1.x's detect_nan_parameters, Stable-Baselines3's VecCheckNan, detectron2's Boxes.clip,
torch.distributions' argument check (run for real on CPU), OpenAI-diffusion's lg_loss_scale --
each beside a healthy text full of the same words that must stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.judge.distribution_args import nan_argument
from controller.judge.loss_scale import LossScaleTrajectory
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def _nan_summaries(lines: list[str]) -> list[str]:
    return [f.summary for f in _final(lines) if f.kind == "nan"]


# -- the frameworks' per-op / per-tensor checks (rules.py `op-output-nonfinite`) --------------------------

@pytest.mark.parametrize("line, said", [
    # tensorflow/python/debug/lib/check_numerics_callback.py get_check_numerics_error_message
    ('!!! Detected Infinity or NaN in output 0 of eagerly-executing op "RealDiv" (# of outputs: 1) !!!', "RealDiv"),
    ('!!! Detected Infinity or NaN in output 1 of graph op "Log" (# of outputs: 2) !!!', "op Log output 1"),
    # paddle/fluid/framework/details/nan_inf_utils_detail.h PrintForDifferentLevel
    ("There are NAN or INF (num_nan=3, num_inf=0, num_zero=0) in [device=gpu:0, op=matmul_v2, "
     "tensor=linear_0.tmp_0, dtype=fp32].", "3 NaN and 0 Inf"),
    ("[PRECISION] [ERROR] in [device=gpu:0, op=matmul_v2, tensor=linear_1.tmp_0, dtype=fp32], numel=4096, "
     "num_nan=12, num_inf=0, num_zero=0, max=1.0e+00, min=-1.0e+00, mean=nan", "12 NaN"),
    # paddle/fluid/framework/operator.cc CheckTensorNANOrInf
    ("Operator mul output Tensor mul_0.tmp_0 contains Inf.", "mul_0.tmp_0 contains Inf"),
    # mmdet/engine/hooks/checkloss_hook.py (the logger's INFO line; the AssertionError itself is bare)
    ("2024-01-01 12:00:00,000 - mmdet - INFO - loss become infinite or NaN!", "CheckInvalidLossHook"),
    # lightning 1.x utilities/finite_checks.py detect_nan_parameters
    ("ValueError: Detected nan and/or inf values in `layer.weight`. Check your forward pass for numerically "
     "unstable operations.", "layer.weight"),
    # stable_baselines3/common/vec_env/vec_check_nan.py (the policy's actions)
    ("ValueError: found nan in actions.", "actions are nan"),
    # detectron2/structures/boxes.py Boxes.clip
    ("AssertionError: Box tensor contains infinite or NaN!", "predicted boxes"),
])
def test_a_framework_check_naming_what_went_non_finite_is_nan(line, said):
    summaries = _nan_summaries([line])
    assert any(said in s for s in summaries), summaries


@pytest.mark.parametrize("line", [
    # Paddle at FLAGS_check_nan_inf_level=3 prints every tensor: without [ERROR] and counts it is clean
    "[PRECISION] in [device=gpu:0, op=matmul_v2, tensor=linear_1.tmp_0, dtype=fp32], numel=4096, num_zero=0, "
    "max=1.0e+00, min=-1.0e+00, mean=1.0e-02",
    "[PRECISION] [ERROR] in [device=gpu:0, op=add, tensor=x, dtype=fp32], numel=8, num_nan=0, num_inf=0, num_zero=8, "
    "max=0, min=0, mean=0",
    "FLAGS_check_nan_inf=1 FLAGS_check_nan_inf_level=3",
    "I1203 check_numerics_callback.py Enabled check-numerics callback in thread MainThread",
    "2024-01-01 12:00:00,000 - mmdet - INFO - Config: custom_hooks = [dict(type='CheckInvalidLossHook', interval=50)]",
    "Trainer(terminate_on_nan=True, detect_anomaly=False)",
    # the environment's observations are its data, not the training's output
    "UserWarning: found nan in observations.",
    "env = VecCheckNan(env, raise_exception=True)  # raises on nan in actions or observations",
])
def test_the_same_words_in_configs_and_clean_reports_stay_quiet(line):
    assert _kinds(_final([line])) == []


# -- torch.distributions' argument check (distribution_args.py), real output ------------------------------

def test_a_policy_whose_gaussian_mean_went_nan_is_read_from_torch_distributions_check():
    """programs/nan_distribution.py: SGD at lr 1e4 blows the policy up; only step 0's loss is printed,
    then `ValueError: Expected parameter loc ... Real(), but found invalid values:` over a NaN tensor."""
    lines = _read("torch_nan_distribution.log")
    assert _kinds(_final(lines)) == ["crash", "nan"]
    assert any("Normal distribution's parameter loc is NaN" in s for s in _nan_summaries(lines))


def test_a_healthy_run_full_of_nan_words_stays_quiet():
    """programs/nan_words_healthy.py: a config naming the NaN checks, an attention mask of -inf,
    clip_grad_norm_(error_if_nonfinite=True) on finite norms, numpy's `invalid value encountered in
    divide` on an empty class's recall, nan_to_num, `best loss so far inf -> 0.8856`."""
    assert _kinds(_final(_read("torch_nan_words_healthy.log"))) == []


HEAD = ("ValueError: Expected parameter {p} (Tensor of shape (2,)) of distribution {d}(loc: torch.Size([2]), "
        "scale: torch.Size([2])) to satisfy the constraint {c}, but found invalid values:")


@pytest.mark.parametrize("p, d, c, values, nan", [
    ("loc", "Normal", "Real()", "tensor([0., nan])", True),
    # Real()'s check is value == value: failing it proves a NaN even when the summary elides it
    ("loc", "Normal", "Real()", "tensor([[ 0.6326,  0.4567,  ..., -0.0232]])", True),
    ("loc", "MultivariateNormal", "IndependentConstraint(Real(), 1)", "tensor([nan, nan])", True),
    ("scale", "Normal", "GreaterThan(lower_bound=0.0)", "tensor([nan, 1.])", True),
    # a negative scale, an unnormalised probability vector (printed as +-inf logits): not NaN
    ("scale", "Normal", "GreaterThan(lower_bound=0.0)", "tensor([ 1., -1.])", False),
    ("probs", "Categorical", "Simplex()", "tensor([inf, -inf])", False),
])
def test_the_argument_check_counts_only_what_proves_nan(p, d, c, values, nan):
    said = nan_argument(HEAD.format(p=p, d=d, c=c), [], [values])
    assert (said is not None) == nan


def test_a_sample_outside_the_support_counts_only_when_it_is_a_learnt_parameter():
    """log_prob's check of its value: the caller's data (a Tensor) is not the training's NaN; a
    Parameter is (pasted scverse/scvi-tools#2830's title names `value argument (Parameter of shape ...)`)."""
    msg = ("ValueError: Expected value argument ({t} of shape (2,)) to be within the support (Real()) of the "
           "distribution Normal(loc: torch.Size([2]), scale: torch.Size([2])), but found invalid values:")
    assert nan_argument(msg.format(t="Tensor"), [], ["tensor([nan, 0.])"]) is None
    assert nan_argument(msg.format(t="Parameter"), [], ["tensor([nan, 0.])"]) is not None


def test_a_message_split_by_a_parameters_repr_is_read_across_its_lines():
    """Pasted JinmiaoChenLab/scTM#6: `Normal(loc: Parameter containing:` / `tensor([nan], ...)) to satisfy
    the constraint Real(), but found invalid values:` -- the head two lines above, whose ValueError ended
    the run (the IPython traceback's header is not in the paste: the head line names the exception)."""
    lines = (PASTED / "jinmiaochenlab_sctm-6.log").read_text().splitlines()
    assert any("parameter loc is NaN" in s for s in _nan_summaries(lines))
    assert _kinds(_final(lines)) == ["crash", "nan"]


# -- loss scalers' wordings (loss_scale.py) ----------------------------------------------------------------

def _scale(lines: list[str]) -> LossScaleTrajectory:
    t = LossScaleTrajectory()
    for n, line in enumerate(lines, 1):
        t.feed(line, line.lower(), n)
    return t


def test_paddles_grad_scaler_halving_below_its_floor_is_a_collapse_and_its_first_steps_are_not():
    """python/paddle/amp/grad_scaler.py: `Found inf or nan, current scale is: {}, decrease to: {}*{}`;
    the new scale is the product (pasted PaddlePaddle/PaddleClas#2457, PaddlePaddle/Paddle#37021)."""
    cascade = (PASTED / "paddlepaddle_paddleclas-2457.log").read_text().splitlines()
    t = _scale(cascade)
    assert t.collapsed and t.last == pytest.approx(5.960464477539063e-08 * 0.5)
    assert "nan" in _kinds(_final(cascade))
    start = [f"Found inf or nan, current scale is: {s}, decrease to: {s}*0.5" for s in (65536.0, 32768.0)]
    assert not _scale(start).collapsed
    assert _kinds(_final(start + ["[2022/11/08] ppcls INFO: [Train][Epoch 1/800] loss: 2.44099"])) == []


def test_openai_diffusions_lg_loss_scale_is_a_base_two_logarithm():
    """improved_diffusion/train_util.py: `Found NaN, decreased lg_loss_scale to {lg}` from 20.0, and the
    logger's `| lg_loss_scale | ... |`: at or below 0 the scale is 1 or less (pasted tomeramit/SegDiff#20);
    the first steps down from 20 are the scaler's search (pasted researchmm/MM-Diffusion#23)."""
    assert _scale(["| lg_loss_scale | -0.821   |"]).collapsed
    assert "nan" in _kinds(_final((PASTED / "tomeramit_segdiff-20.log").read_text().splitlines()))
    healthy = ["Found NaN, decreased lg_loss_scale to 19.0", "Found NaN, decreased lg_loss_scale to 18.0",
               "| lg_loss_scale | 18.5     |", "| loss          | 0.0312   |"]
    assert not _scale(healthy).collapsed
    assert _kinds(_final(healthy)) == []
    # a logarithm is never read as a scale itself: `lg_loss_scale 0.5` is 2 ** 0.5, above 1
    assert not _scale(["| lg_loss_scale | 0.5 |"]).collapsed
