"""Capture shapes (issue 22, helper k11capture): the text reaches dfctl through a capture that puts
something on or around every line -- a `YYYY/MM/DD` timestamp (PaddleOCR, Go's log), GitHub Actions'
`##[error]`, hydra's `[time][logger][LEVEL] - `, `[file.py:88]`, Docker's json-file log lines
(`{"log":"...\\n","stream":"stderr"}`, what `kubectl logs` reads on a node) and a notebook's saved output
(`"text": ["...\\n", ...]`). The traceback is the training-split paste qq456cvb/Point-Transformers#7's,
each capture beside healthy text of the same capture that must stay quiet."""

from __future__ import annotations

import json

from controller.judge.repair import json_text, peel
from tests.judge_support import FAILURE_KINDS, failure_kinds
from tests.judge_support import final_read as _final

TB = ["Traceback (most recent call last):",
      '  File "train.py", line 44, in <module>',
      "    @hydra.main(config_path='config', config_name='config')",
      "AttributeError: module 'hydra' has no attribute 'main'"]

PADDLE_OK = ["[2024/11/05 03:45:00] ppocr INFO: epoch: [1/5], global_step: 30, lr: 0.000500, loss: 1.251230, "
             "loss_cbn: 0.000000, avg_reader_cost: 0.00059 s, eta: 0:02:00, max_mem_reserved: 12221 MB, max_mem_allocated: 10611 MB",
             "[2024/06/22 06:28:25] ppocr INFO: epoch: [4/500], global_step: 172, lr: 0.000100, loss: 1.000000, "
             "loss_shrink_maps: 0.000000, max_mem_reserved: 6177 MB, max_mem_allocated: 5281 MB",
             "[2024/06/22 06:28:26] ppocr INFO: save model in ./output/det_ppocr_v3_Train_v2/latest"]

MMCV_OK = ["2021-08-17 17:00:17,073 - mmcls - INFO - Epoch [1][100/5005]    lr: 1.000e-01, eta: 37 days, 5:46:17, "
           "time: 6.430, data_time: 5.762, memory: 3086, loss: 6.8864",
           "2021-08-17 17:00:36,627 - mmcls - INFO - Epoch [1][200/5005]    lr: 1.000e-01, eta: 19 days, 4:23:45, "
           "time: 0.196, data_time: 0.008, memory: 3086, loss: 6.5649"]


def _kinds(findings) -> list[str]:
    return failure_kinds(findings, FAILURE_KINDS + ("recompile",))


def _crash_named(lines: list[str]) -> None:
    found = _final(lines)
    assert any(f.kind == "crash" and "AttributeError" in f.summary for f in found), [f.summary for f in found]


def test_slash_dated_lines_are_peeled_and_their_traceback_read():
    """`2023/05/01 12:00:00 ` (logging's datefmt `%Y/%m/%d %H:%M:%S`, Go's log) and PaddleOCR's
    `[2024/11/05 03:45:00] ` (PaddlePaddle/PaddleOCR#13937) before every line."""
    _crash_named([f"2023/05/01 12:00:00 {t}" for t in TB])
    _crash_named([f"[2023/05/01 12:00:00] {t}" for t in TB])
    assert peel("[2024/11/05 03:45:00] ppocr INFO: epoch: [1/5]")[1] == "ppocr INFO: epoch: [1/5]"


def test_slash_dated_healthy_paddle_lines_stay_quiet():
    assert _kinds(_final(PADDLE_OK)) == []


def test_github_actions_error_command_is_peeled():
    """GitHub Actions' workflow command `##[error]` that a CI log shows before each line of stderr."""
    _crash_named([f"##[error]{t}" for t in TB])
    assert _kinds(_final([f"##[group]{t}" if i == 0 else t for i, t in enumerate(MMCV_OK)])) == []


def test_hydra_logger_and_file_line_brackets_are_peeled():
    """hydra's job logging `[time][logger][LEVEL] - message` and `[time][file.py:88][ERROR] `."""
    _crash_named([f"[2023-05-01 12:00:00,123][__main__][ERROR] - {t}" for t in TB])
    _crash_named([f"[2023-05-01 12:00:00,123][train.py:88][ERROR] {t}" for t in TB])
    ok = ["[2023-05-01 12:00:00,123][__main__][INFO] - " + MMCV_OK[0].split(" - INFO - ", 1)[1],
          "[2023-05-01 12:00:01,123][train.py:88][WARNING] timeout for the dataloader raised to 600 s"]
    assert _kinds(_final(ok)) == []


def test_docker_json_file_log_lines_are_read_as_their_text():
    """Docker's json-file log driver (moby daemon/logger/jsonfilelog): one JSON record a line."""
    rec = [json.dumps({"log": t + "\n", "stream": "stderr", "time": "2023-05-01T12:00:00.1Z"}, separators=(",", ":")) for t in TB]
    _crash_named(rec)
    assert json_text(rec[1]) == TB[1]
    ok = [json.dumps({"log": t + "\n", "stream": "stdout", "time": "2023-05-01T12:00:00.1Z"}) for t in MMCV_OK + PADDLE_OK]
    assert _kinds(_final(ok)) == []


def test_notebook_saved_output_strings_are_read_as_their_text():
    """nbformat v4: a stream output's `"text": [...]`, one `"...\\n",` string a line."""
    lines = ['      "text": ['] + [f"       {json.dumps(t + chr(10))}," for t in TB[:-1]] + [f"       {json.dumps(TB[-1] + chr(10))}", "      ]"]
    _crash_named(lines)
    ok = ['      "text": ['] + [f"       {json.dumps(t + chr(10))}," for t in MMCV_OK] + ["      ]"]
    assert _kinds(_final(ok)) == []


def test_a_quoted_line_that_is_no_json_string_is_left_as_it_came():
    assert json_text('print("loss is nan\\n",') is None
    assert json_text('{"log": broken') is None
    assert peel('  "not \\q json\\n",')[1] == '  "not \\q json\\n",'


def test_tensorflow_kernel_launch_oom_one_line_excerpt():
    """kubeflow/trainer#1158: a TFJob worker's one line, TF_CHECK_OK on GpuLaunchKernel."""
    line = ("Non-OK-status: GpuLaunchKernel (FillPhiloxRandomKernelLaunch <Distribution>, num_blocks, block_size, 0, "
            "d.stream (), gen, data, size, dist) status: Internal: out of memory")
    (f,) = [f for f in _final([line]) if f.kind == "oom"]
    assert "TensorFlow GPU kernel launch" in f.summary
    assert _kinds(_final(["2020-05-04 10:00:00.1: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1304] Created TensorFlow "
                          "device (/job:worker/replica:0/task:1/device:GPU:0 with 1478 MB memory) -> physical GPU"])) == []


KF_OPERATOR = ['time="2024-02-21T09:31:59Z" level=info msg="PyTorchJob=pytorch-simple, ReplicaType=Worker expected=1, running=1, '
               'succeeded=0, failed=0, Replicas=1"',
               '1.708507919323319e+09\tDEBUG\tevents\tError pod pytorch-simple-worker-0 container pytorch waiting message: back-off 40s '
               'restarting failed container=pytorch pod=pytorch-simple-worker-0_kubeflow(2e06a4e3-bceb-42b4-b0fd-a32cb53d0d00)      '
               '{"type": "Warning", "reason": "CrashLoopBackOff"}',
               'time="2024-02-21T09:32:29Z" level=info msg="Pod: kubeflow.pytorch-simple-worker-0 exited with code 1" '
               'job=kubeflow.pytorch-simple replica-type=worker']


def test_kubeflow_operator_pod_exit_and_crashloop_are_crashes():
    """kubeflow/trainer#2008: the operator's `Pod: <ns>.<pod> exited with code 1` and the kubelet's back-off it relays."""
    sums = [f.summary for f in _final(KF_OPERATOR) if f.kind == "crash"]
    assert any("pytorch-simple-worker-0 exited with code 1" in s for s in sums), sums
    assert any("CrashLoopBackOff" in s and "container pytorch" in s for s in sums), sums


def test_kubeflow_operator_healthy_lines_and_a_pod_exiting_zero_stay_quiet():
    ok = [KF_OPERATOR[0], 'time="2024-02-21T09:40:00Z" level=info msg="Pod: kubeflow.pytorch-simple-worker-0 exited with code 0" '
          'job=kubeflow.pytorch-simple replica-type=worker',
          'time="2024-02-21T09:40:01Z" level=info msg="PyTorchJob pytorch-simple is successfully completed."']
    assert _kinds(_final(ok)) == []


TS = "2020-02-26 02:46:38,735 [INFO ] W-9001-fairseq_model_1.0-stdout org.pytorch.serve.wlm.WorkerLifeCycle - "


def test_torchserve_wrapped_worker_traceback_is_read_under_its_log4j_prefix():
    """pytorch/serve#71: TorchServe's log4j `%d [%-5p] %t %c - ` before each line the worker printed."""
    lines = [TS + '  File "/home/ubuntu/anaconda3/lib/python3.6/site-packages/torch/serialization.py", line 702, in _legacy_load',
             TS + "    result = unpickler.load()",
             TS + '  File "/home/ubuntu/anaconda3/lib/python3.6/site-packages/torch/serialization.py", line 665, in persistent_load',
             TS + "    deserialized_objects[root_key] = restore_location(obj, location)"]
    assert "crash" in _kinds(_final(lines))
    assert peel(lines[1])[1] == "    result = unpickler.load()"


def test_torchserve_healthy_worker_lines_stay_quiet():
    ok = [TS + "Listening on port: /tmp/.ts.sock.9001",
          TS + "[PID]3400",
          TS + "Torch worker started.",
          "2020-02-26 02:46:39,100 [INFO ] W-9001-fairseq_model_1.0 org.pytorch.serve.wlm.WorkerThread - Backend response time: 2300",
          "2020-02-26 02:46:39,101 [DEBUG] W-9001-fairseq_model_1.0 org.pytorch.serve.wlm.WorkerThread - W-9001-fairseq_model_1.0 "
          "State change WORKER_STARTED -> WORKER_MODEL_LOADED"]
    assert _kinds(_final(ok)) == []
