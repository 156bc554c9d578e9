"""NaN/Inf shapes of issue 22 (helper k12nan): the frameworks' own finiteness checks run for real
(torch on CPU: anomaly mode, clip_grad_norm_(error_if_nonfinite=True), GradScaler), the value
spellings and key shapes the metric reader missed (the old MSVC runtime's `1.#QNAN0` / `-1.#IND00`,
TRL's `loss/policy_avg`, Keras' `Training loss (for one batch) at step N: nan`), each beside a healthy
text that must stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def _nan_summaries(lines: list[str]) -> list[str]:
    return [f.summary for f in _final(lines) if f.kind == "nan"]


# -- real torch logs (tests/data/logs/programs/make_nan_logs.sh, torch 2.13.0+cpu) ------------------------

def test_anomaly_mode_names_the_backward_function_that_returned_nan():
    """torch/csrc/autograd/python_anomaly_mode.cpp warns, then the engine raises `Function 'AbsBackward0'
    returned nan values in its 0th output.` (rules.py `anomaly`): NaN, and the exception ends the run."""
    lines = _read("torch_nan_anomaly.log")
    assert sorted(set(_kinds(_final(lines)))) == ["crash", "nan"]
    assert any("AbsBackward0" in s for s in _nan_summaries(lines))


def test_clip_grad_norm_error_if_nonfinite_is_a_nan_gradient_norm():
    """torch/nn/utils/clip_grad.py _get_total_norm raises `The total norm of order 2.0 for gradients from
    `parameters` is non-finite, so it cannot be clipped` (rules.py `framework-nan-check`)."""
    lines = _read("torch_nan_clip.log")
    assert "nan" in _kinds(_final(lines))
    assert any("clip_grad_norm_" in s for s in _nan_summaries(lines))


def test_a_grad_scaler_whose_loss_stays_inf_is_nan_and_one_that_finds_its_scale_is_healthy():
    """torch.amp.GradScaler('cpu'): inputs scaled to 1e38 make every loss inf while the scale halves each
    step (NaN); a scaler started at 2**127 skips its first steps, halving, then trains (healthy)."""
    assert any("loss = inf" in s for s in _nan_summaries(_read("torch_nan_scaler.log")))
    assert _kinds(_final(_read("torch_nan_scaler_ok.log"))) == []


# -- the old Microsoft C runtime's NaN/Inf spellings (boost libs/math/example/nonfinite_signaling_NaN.cpp) --

@pytest.mark.parametrize("line, value", [
    ("iter 100: loss 1.#QNAN0, time 20ms", "nan"),
    ("Epoch 3, loss = -1.#IND00", "-nan"),
    ("step 40 train_loss: 1.#INF00 lr 0.001", "inf"),
    (" 1021: -1.#IND00, -1.#IND00 avg, 0.001000 rate, 3.154000 seconds, 64 images", "-nan"),
])
def test_msvc_printf_spellings_of_nan_and_inf_are_read_as_values(line, value):
    (s,) = _nan_summaries([line])
    assert s.endswith(f"= {value})"), s


def test_msvc_spellings_outside_a_loss_stay_quiet():
    # darknet's Region line: a yolo layer without objects in the batch prints its IOU as 0/0 (healthy)
    lines = ["Region Avg IOU: -1.#IND00, Class: -1.#IND00, Obj: -1.#IND00, No Obj: 0.000000, Avg Recall: 0.000000,"
             "  count: 0",
             " 1021: 2.123400, 2.500000 avg, 0.001000 rate, 3.154000 seconds, 64 images"]
    assert _kinds(_final(lines)) == []


# -- TRL's PPO keys: a loss named by a path (trl/experimental/ppo/ppo_trainer.py:898-899) ---------------

def test_trl_ppo_slash_named_losses_read_nan():
    """Built from trl's source wording (`metrics["loss/policy_avg"]`, `metrics["loss/value_avg"]`; older
    PPOTrainer `ppo/loss/total`): no training-split paste of a NaN one was found this round."""
    rec = ("{'eps': 1, 'objective/kl': nan, 'objective/entropy': nan, 'policy/approxkl_avg': nan, "
           "'loss/policy_avg': nan, 'loss/value_avg': nan, 'lr': 7.8e-06, 'episode': 240, 'epoch': 0.27}")
    (s,) = _nan_summaries([rec])
    assert "loss/policy_avg = nan" in s, s
    assert _nan_summaries(["ppo/loss/total: nan"]) == ["loss is NaN/Inf (ppo/loss/total = nan)"]


def test_trl_ppo_finite_record_and_scaler_path_keys_stay_quiet():
    rec = ("{'eps': 1, 'objective/kl': 10.94, 'loss/policy_avg': -0.0051, 'loss/value_avg': 0.171, "
           "'val/num_eos_tokens': 0, 'lr': 7.7e-06}")
    assert _kinds(_final([rec, "loss/scale: inf", "loss/count: nan"])) == []


# -- a loss named, then when, then its value (keras-io guides/writing_a_training_loop_from_scratch.py) ---

def test_keras_custom_loop_loss_at_step_reads_nan():
    lines = ["Start of epoch 0",
             "Training loss (for one batch) at step 0: 2.3120",
             "Seen so far: 64 samples",
             "Training loss (for one batch) at step 200: nan",
             "Seen so far: 12864 samples"]
    (s,) = _nan_summaries(lines)
    assert "Training loss = nan" in s, s
    assert _nan_summaries(["Loss at step 100: nan"]) and _nan_summaries(["loss after epoch 3: inf"])


def test_finite_or_best_loss_at_step_stays_quiet():
    lines = ["Training loss (for 1 batch) at step 200: 0.4123",
             "best loss at epoch 3: inf",
             "Saving model with lowest loss at step 100: inf"]
    assert _kinds(_final(lines)) == []


# -- pasted: NaN in a PPO agent's training line, then the NaN probabilities it samples from ---------------

def test_coach_surrogate_loss_nan_then_numpy_choice_refuses_nan_probabilities():
    """IntelLabs/coach#418 (training split): `Surrogate loss: nan KL divergence: nan` then
    `ValueError: probabilities contain NaN` -- both a NaN and the crash it caused."""
    lines = (Path(__file__).parent / "corpus" / "pasted" / "logs" / "intellabs_coach-418.log").read_text().splitlines()
    assert sorted(set(_kinds(_final(lines)))) == ["crash", "nan"]


def test_numpy_invalid_value_warnings_alone_are_healthy():
    """int-brain-lab/iblrig#152 (training split): numpy's `RuntimeWarning: invalid value encountered in
    true_divide` / `Mean of empty slice.` at a session's start -- a warning, no failed run."""
    lines = (Path(__file__).parent / "corpus" / "pasted" / "logs" / "int-brain-lab_iblrig-152.log").read_text()
    assert _kinds(_final(lines.splitlines())) == []
