"""NaN shapes from index-m (helper k9nan, issue 22): each with a short text from a
training-split pasted log, and beside it the healthy text that must stay quiet."""

from __future__ import annotations

from controller.judge import ScanState, scan_lines
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# NVIDIA-NeMo/Megatron-Bridge#5306 (a record the user wrapped by hand): one NaN norm at loss scale 1.0
MEGATRON_BF16_NAN_NORM = ["iteration 5/50 | elapsed time per iteration: 21392.5 ms |",
                          "learning rate: 1.350000E-04 | global batch size: 4096 |",
                          "loss scale: 1.0 | grad norm: nan |",
                          "number of skipped iterations: 0 | number of nan iterations: 0"]
# NVIDIA-NeMo/Megatron-Bridge#4024: the same record shape, bf16, finite norms
MEGATRON_BF16_HEALTHY = [
    "[2026-05-28 22:26:20] iteration       29/    6069 | consumed samples:        14848 | elapsed time per iteration "
    "(ms): 26813.0 | learning rate: 5.800000E-05 | global batch size:   512 | lm loss: 8.716962E-01 | "
    "seq_load_balancing_loss: 1.253194E+00 | mtp_1 loss: 1.115410E+00 | mtp_2 loss: 1.180141E+00 | loss scale: 1.0 | "
    "grad norm: 0.852 | number of skipped iterations:   0 | number of nan iterations:   0 |"]
# microsoft/Swin-Transformer#47: apex's dynamic scaler skipped a step; the norm's running average reads nan
DYNAMIC_SCALER_SKIP = [
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 131072.0",
    "[2021-04-25 05:35:19 swin_base_patch4_window7_224](main_prune.py 310): INFO Train: [0/300][4050/5004]   "
    "eta 0:17:06 "
    "lr 0.000500 time 1.1737 (1.0765)    loss 3.2572 (3.3279)    grad_norm 1.0323 (nan)  mem 4814MB"]


def test_a_nan_gradient_norm_at_a_fixed_loss_scale_of_one_is_nan_at_once():
    """bf16 Megatron has no grad scaler: get_loss_scale() is 1.0 and nothing skips the step, so
    one NaN norm is NaN gradients applied -- not the fp16 search that needs 3 (or 20) in a row."""
    (f,) = [f for f in _final(MEGATRON_BF16_NAN_NORM) if f.kind == "nan"]
    assert "loss scale of 1.0" in f.summary and "grad norm = nan" in f.summary, f.summary
    assert f.line == 3
    # a live read may say so already: the record is complete, nothing after it can undo the step
    assert _kinds(scan_lines(MEGATRON_BF16_NAN_NORM, now_s=0.0, state=ScanState())) == ["nan"]


def test_a_fixed_loss_scale_with_finite_norms_and_a_dynamic_scalers_skip_stay_quiet():
    assert _kinds(_final(MEGATRON_BF16_HEALTHY)) == []
    assert _kinds(_final(DYNAMIC_SCALER_SKIP)) == []
    # a NaN norm at a scale the dynamic scaler is still searching from is one skipped step, not a finding
    fp16 = [MEGATRON_BF16_NAN_NORM[0], MEGATRON_BF16_NAN_NORM[1], "loss scale: 65536.0 | grad norm: nan |",
            MEGATRON_BF16_NAN_NORM[3], "iteration 6/50 | loss scale: 32768.0 | grad norm: 1.204 |"]
    assert _kinds(_final(fp16)) == []


# MathLee/LASNet#3: apex's message, with the user's full stop after the scale
APEX_SKIPS_FULL_STOP = ["Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 1024.0",
                        "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 512.0",
                        "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 256.0."]


def test_a_loss_scale_followed_by_a_full_stop_is_read_not_raised_on():
    """`256.0.` once made float() raise inside the loss-scale reader: check-log died on the log."""
    assert _kinds(_final(APEX_SKIPS_FULL_STOP)) == []  # three skips early on: the scaler's search
    cascade = [f"Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to {2.0 ** -k}."
               for k in range(10)]
    assert _kinds(_final(APEX_SKIPS_FULL_STOP + cascade)) == ["nan"]


# torchmd/torchmd-net#231: a pandas Series of metrics.csv's time column, its last cell empty
PANDAS_SERIES = ["0      4.779309", "1      6.532793", "2      8.925880", "8     21.361235", "9     23.063034",
                 "10          NaN", "Name: time, dtype: float64"]
# prajdabre/yanmtt#7: a script's own `step loss` print turning nan
STEP_VALUE_NAN = ["76950 2.596339", "76960 2.735384", "76970 2.6265104", "76980 nan", "76990 nan", "Saving the model"]


def test_a_pandas_series_missing_value_is_not_a_step_whose_loss_went_nan():
    assert _kinds(_final(PANDAS_SERIES)) == []
    (f,) = [f for f in _final(STEP_VALUE_NAN) if f.kind == "nan"]
    assert "step/value series" in f.summary and "76980: nan" in f.summary, f.summary


# hiyouga/LlamaFactory#2078: a DPO record whose loss prints 0.0 while the policy's log-probs are NaN
DPO_NAN = ["{'loss': 0.0, 'learning_rate': 9.999695160809598e-06, 'rewards/chosen': nan, 'rewards/rejected': nan, "
           "'rewards/accuracies': 0.0, 'rewards/margins': nan, 'logps/rejected': nan, 'logps/chosen': nan, "
           "'logits/rejected': nan, 'logits/chosen': nan, 'epoch': 0.0}"]
# huggingface/trl#1236: a healthy DPO record, loss 0.0 too, finite log-probs
DPO_HEALTHY = ["{'loss': 0.0, 'learning_rate': 6.019108280254777e-05, 'rewards/chosen': 3.876391649246216, 'rew"
               "ards/rejected': -11.440515518188477, 'rewards/accuracies': 1.0, 'rewards/margins': 15.316907882"
               "69043, 'logps/rejected': -783.4051513671875, 'logps/chosen': -781.236083984375, 'logits/rejecte"
               "d': -1.8889861106872559, 'logits/chosen': -2.099642038345337, 'epoch': 0.46}"]


def test_a_preference_trainers_nan_log_probs_are_nan_whatever_its_loss_prints():
    (f,) = [f for f in _final(DPO_NAN) if f.kind == "nan"]
    assert f.summary.startswith("the policy's outputs are NaN/Inf (logps/rejected = nan)"), f.summary
    assert _kinds(_final(DPO_HEALTHY)) == []


# QwenAudio/SenseVoice#264 (FunASR, ESPnet's trainer wording): the records print no norm, the warning does
SKIP_WARNING = "[2025-10-29 23:59:01,773][root][WARNING] - The grad norm is nan. Skipping updating the model."
FUNASR_RECORD = ("[2025-10-29 23:59:01,779][root][INFO] - train, rank: 0, epoch: 0/100, data_slice: 0/1, "
                 "step_in_slice: 3/44, step_in_epoch: 3, total step: 3, (loss_avg_rank: 24.221), "
                 "(loss_avg_slice: 27.633), (ppl_avg_slice: 1.002e+12), (acc_avg_slice: 0.000), (lr: 3.000e-07)")
SKIP_WARNING_2 = "[2025-10-29 23:59:03,465][root][WARNING] - The grad norm is nan. Skipping updating the model."


def test_espnets_skipped_update_warning_is_a_nan_norm_record_judged_in_a_row():
    (f,) = [f for f in _final([SKIP_WARNING, FUNASR_RECORD, SKIP_WARNING_2]) if f.kind == "nan"]
    assert "gradient norm is NaN/Inf in the last 2 records" in f.summary, f.summary
    # one skip and the run goes on: an AMP scaler's skipped step, not a finding
    assert _kinds(_final([SKIP_WARNING, FUNASR_RECORD])) == []
