"""Healthy shapes full of tempting words (issue 22's 0 false alarms): each test names a shape
a healthy run prints that a reader once flagged, with the text of a training-split pasted
log, and beside it the failing shape the reader must still find."""

from __future__ import annotations

import pytest

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# ultralytics/yolov5#8406: printed "at the end of training"
IGNORED_AT_EXIT = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f4972feac10>",
    "Traceback (most recent call last):",
    '  File "/home/wonchul/anaconda3/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1328, in __del__',
    '  File "/home/wonchul/anaconda3/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1262, in '
    "_shutdown_workers",
    "AttributeError: 'NoneType' object has no attribute 'python_exit_status'",
]


def test_an_exception_python_ignored_is_no_crash_even_as_the_last_line_of_the_log():
    """CPython's unraisable hook (`Exception ignored in: ...`, a __del__ at interpreter exit)
    prints a traceback and goes on: its exception line ending the log is not the program
    dying on it."""
    assert _kinds(_final(IGNORED_AT_EXIT)) == []
    assert _kinds(_final(["Epoch 4: 100%|██████████| 100/100 [00:10<00:00, loss=0.11]", *IGNORED_AT_EXIT])) == []


def test_the_same_exception_raised_is_still_a_crash_as_the_last_line():
    """Without the `Exception ignored in` line the traceback was raised: a crash, and the bare
    exception line ending a paste stays one too."""
    raised = IGNORED_AT_EXIT[1:]
    (f,) = [f for f in _final(raised) if f.kind == "crash"]
    assert f.summary.startswith("AttributeError: 'NoneType' object has no attribute 'python_exit_status'"), f.summary
    (g,) = [f for f in _final([raised[-1]]) if f.kind == "crash"]
    assert g.summary.endswith("(the last line of the log)"), g.summary


def test_an_ignored_exception_before_a_raised_one_does_not_hide_the_crash():
    raised = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    main()",
              "RuntimeError: CUDA error: an illegal memory access was encountered"]
    found = _final([*IGNORED_AT_EXIT, *raised])
    assert any(f.kind == "crash" and "illegal memory access" in f.summary
               for f in found), [f.summary for f in found]


# facebookresearch/fairseq#103 (torch < 1.0): THC's own check line, glued to fairseq's bar
THC_OOM = [
    "| epoch 001:   0%|▏          | 315/72115 [01:24<5:21:16,  3.72it/s, loss=11.45 (12.65), oom=0]THCudaCheck FAIL "
    "file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
    "| WARNING: ran out of memory on GPU #2, skipping batch",
    "| epoch 001:   0%|▏          | 318/72115 [01:25<5:21:15,  3.72it/s, loss=12.26 (12.65), oom=0.00943396]",
]


def test_thcudacheck_error_2_is_an_oom_and_a_skipped_batch_marks_it_recovered():
    (f,) = [f for f in _final(THC_OOM) if f.kind == "oom"]
    assert "out of memory" in f.summary and "recovered" in f.summary, f.summary
    assert f.severity == "warning"
    (g,) = [f for f in _final(THC_OOM[:1]) if f.kind == "oom"]  # not followed by a recovery: critical
    assert g.severity == "critical", g


def test_thcudacheck_of_another_error_is_not_an_oom():
    other = ["THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=59 : "
             "device-side assert triggered", "step 12 loss 0.53"]
    assert not [f for f in _final(other) if f.kind == "oom"]


# Healthy excerpts full of tempting words, each from a training-split pasted log of index-o
# (name in the comment): every reader must stay quiet on them, alone and as the last lines
# of a log (check-log's path, where a text's last line is judged too).
TEMPTING_HEALTHY = {
    "vllm cudagraph OOM advice (vllm-project_vllm-14447)": [
        "(VllmWorkerProcess pid=507) INFO 04-12 08:22:02 [model_runner.py:1456] Capturing cudagraphs for decoding. "
        "This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set "
        "'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph "
        "capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the "
        "`max_num_seqs` as needed to decrease memory usage."],
    "a wrapper's ERROR on an INFO line (modelscope_easydistill-4)": [
        "2025-11-12 20:41:49,503 - ERROR - Detected error in output: INFO 11-12 20:41:49 [model_runner.py:1450] "
        "Capturing cudagraphs for decoding. If out-of-memory error occurs during cudagraph capture, consider "
        "decreasing `gpu_memory_utilization` or switching to eager mode."],
    "TF BFC 'not a failure' (kbardool_keras-frcnn-36)": [
        "2019-08-18 03:55:10.593121: W tensorflow/core/common_runtime/bfc_allocator.cc:237] Allocator (GPU_0_bfc) ran "
        "out of memory trying to allocate 2.14GiB with freed_by_count=0. The caller indicates that this is not a "
        "failure, but may mean that there could be performance gains if more memory were available."],
    "val_loss improved from inf (foamliu_facenet-3)": [
        "Epoch 00001: val_loss improved from inf to 0.20000, saving model to models/model.01-0.2000.hdf5"],
    "per-category AP nan for absent classes (roytseng-tw_detectron.pytorch-210)": [
        "INFO json_dataset_evaluator.py: 223: 12.0",
        "/usr/local/onnx/numpy/core/fromnumeric.py:2957: RuntimeWarning: Mean of empty slice.",
        "  out=out, **kwargs)", "INFO json_dataset_evaluator.py: 231: nan", "INFO json_dataset_evaluator.py: 231: 64.1",
        "INFO json_dataset_evaluator.py: 231: nan"],
    "loss null at the last record (hiyouga_llamafactory-774)": [
        '{"current_steps": 3235, "total_steps": 3235, "loss": null, "eval_loss": null, "predict_loss": null, '
        '"reward": null, "learning_rate": null, "epoch": 1.0, "percentage": 100.0, "elapsed_time": "5:16:48", '
        '"remaining_time": "0:00:00"}'],
    "'killed here, healthy' (marin-community_marin-7344)": [
        "21:04:19  step 1.71k   1.3 s/it   loss 2.63   elapsed 55:46   (killed here, healthy)"],
    "data loader's '[Tensor contains nans.] - 167' (broadinstitute_ml4h-64)": [
        "2019-10-16 15:16:26,801 - tensor_generators:129 - INFO - In epoch 1 the following errors occurred:",
        "    [Tensor contains nans.] - 167",
        "2019-10-16 15:16:26,803 - tensor_generators:131 - INFO - True epoch number:1 in which 5084 tensors were "
        "presented."],
    "two overflow skips of a working scaler (carperai_trlx-342)": [
        "[2023-02-28 20:08:24,113] [INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 128.0, reducing to 64.0",
        "[2023-02-28 20:08:24,338] [INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 64.0, reducing to 32.0"],
    "XLA compilations expected at start (facebookresearch_fairseq-2338)": [
        "2020-07-17 06:57:45 | INFO | root | NOTE: XLA compilation detected; too many of these can lead to slow "
        "training, but we expect a few in the beginning"] * 3,
    "NCCL Abort COMPLETE at teardown (aws_aws-k8s-tester-454)": [
        "[1,24]<stdout>:bert-mpi-training-worker-3:21:581 [0] NCCL INFO [Service thread] Connection closed by localRank 1",
        "[1,26]<stdout>:bert-mpi-training-worker-3:23:670 [0] NCCL INFO comm 0x55adee232c40 rank 26 nranks 32 cudaDev 2 "
        "busId 190 - Abort COMPLETE"],
    "TF end-of-epoch 'Out of range: End of sequence' (zzh8829_yolov3-tf2-144)": [
        "2020-01-05 18:27:37.863969: W tensorflow/core/common_runtime/base_collective_executor.cc:216] "
        "BaseCollectiveExecutor::StartAbort Out of range: End of sequence", "         [[{{node IteratorGetNext}}]]"],
    "huggingface_hub retries (avarok-cybersecurity_dgx-vllm-16)": [
        "(APIServer pid=1) Retrying in 8s [Retry 4/5].",
        "(APIServer pid=1) [2026-05-21 23:55:54] WARNING _http.py:329: Retrying in 8s [Retry 4/5]."],
}


@pytest.mark.parametrize("name", sorted(TEMPTING_HEALTHY))
def test_tempting_healthy_excerpts_stay_quiet(name):
    lines = TEMPTING_HEALTHY[name]
    assert _kinds(_final(lines)) == [], [(f.kind, f.summary) for f in _final(lines)]
    progress = ["step 10 loss 2.31", "step 20 loss 2.12"]
    assert _kinds(_final([*progress, *lines, "step 30 loss 2.05"])) == []


# torchmd/torchmd-net#231: pandas' print of the `time` column of Lightning's metrics.csv
PANDAS_TIME = ["0      4.779309", "1      6.532793", "2      8.925880", "9     23.063034", "10          NaN",
               "Name: time, dtype: float64"]


def test_a_pandas_series_of_a_non_loss_column_with_a_missing_cell_is_no_nan():
    """pandas prints a missing cell as `NaN` and names the Series below its rows: NaN in the
    `time` column of a metrics.csv is a row that logged no time."""
    assert _kinds(_final(PANDAS_TIME)) == []


def test_a_step_value_series_that_turns_nan_is_still_a_nan_finding():
    """The bare `step value` series (prajdabre/yanmtt#7's `76980 nan`), a pandas Series named for
    a loss, and one whose footer is not in view stay NaN findings."""
    assert _kinds(_final(["76960 2.1834", "76970 2.1807", "76980 nan", "76990 nan"])) == ["nan"]
    assert _kinds(_final([*PANDAS_TIME[:-1], "Name: train_loss, dtype: float64"])) == ["nan"]
    assert _kinds(_final(PANDAS_TIME[:-1])) == ["nan"]
