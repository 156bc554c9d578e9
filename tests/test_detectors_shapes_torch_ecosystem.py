"""Shapes from the pytorch / torchrun / nccl / libtorch pastes of index-s (issue 22, helper
k10torch), each on a short text from a training-split log, each beside a healthy text that
must stay quiet."""

from __future__ import annotations

from controller.judge.repair import peel
from tests.judge_support import FAILURE_KINDS, failure_kinds
from tests.judge_support import final_read as _final


def _kinds(findings) -> list[str]:
    return failure_kinds(findings, FAILURE_KINDS + ("recompile",))


# -- compute-sanitizer's memcheck report (sgl-project/sglang#2599, zama-ai/concrete-core#332) --------

SANITIZER = ["========= COMPUTE-SANITIZER",
             "========= Invalid __global__ read of size 16 bytes",
             "=========     at 0xda0 in /opt/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py:175:fused_moe_kernel",
             "=========     by thread (96,0,0) in block (44,0,0)",
             "=========     Address 0x763995f9f000 is out of bounds",
             "=========     Saved host backtrace up to driver entry point at kernel launch time"]


def test_a_compute_sanitizer_invalid_access_is_a_crash_naming_the_space_and_size():
    (f,) = [f for f in _final(SANITIZER) if f.kind == "crash"]
    assert "invalid __global__ read of size 16" in f.summary, f.summary


def test_cuda_memchecks_older_wording_without_bytes_is_read_too():
    lines = ["========= CUDA-MEMCHECK", "========= Invalid __shared__ write of size 8",
             "=========     by thread (9,0,0) in block (0,0,0)"]
    assert "invalid __shared__ write of size 8" in " ".join(f.summary for f in _final(lines))


def test_a_clean_sanitizer_run_is_quiet():
    assert _kinds(_final(["========= COMPUTE-SANITIZER", "step 10 loss 1.92", "step 20 loss 1.71",
                          "========= ERROR SUMMARY: 0 errors"])) == []


# -- torch's CUDA-error note without its error line (pytorch/helion#665) ------------------------------

HELION = ["E               CUDA kernel errors might be asynchronously reported at some other API call, so the "
          "stacktrace below might be incorrect.",
          "E               For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
          "E               Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
          "",
          "helion/autotuner/base_search.py:201: TritonError"]


def test_torchs_asynchronous_report_note_alone_is_a_cuda_crash():
    (f,) = [f for f in _final(HELION) if f.kind == "crash"]
    assert "CUDA error was raised" in f.summary, f.summary


def test_the_note_under_its_error_line_leaves_the_error_line_to_name_it():
    lines = ["RuntimeError: CUDA error: misaligned address", HELION[0].replace("E               ", "")]
    summaries = [f.summary for f in _final(lines) if f.kind == "crash"]
    assert summaries == ["CUDA error: misaligned address"], summaries


def test_advice_to_set_cuda_launch_blocking_in_a_healthy_log_is_quiet():
    assert _kinds(_final(["export CUDA_LAUNCH_BLOCKING=1  # for debugging consider passing it",
                          "epoch 1 loss 0.41"])) == []


# -- elastic's numeric death signal (determined-ai/determined#8915, JingyunLiang/VRT#47) --------------

def test_elastics_numeric_death_signal_names_the_signal():
    lines = ["22-09-01 03:06:01.631 : <epoch:  0, iter:     800, lr:4.000e-04> G_loss: 7.941e-02 ",
             "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
             "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2704351 closing signal SIGHUP"]
    (f,) = [f for f in _final(lines) if f.kind == "crash"]
    assert "SIGHUP (death signal)" in f.summary, f.summary
    lines[1] = lines[1].replace("Received 1 ", "Received 15 ")
    assert any("SIGTERM (death signal)" in f.summary for f in _final(lines))


def test_a_worker_group_signal_count_in_a_healthy_log_is_quiet():
    assert _kinds(_final(["Received 15 samples, shutting down the prefetcher after epoch 3",
                          "epoch 3 loss 0.210"])) == []


# -- Determined's task-log prefix (determined-ai/determined#8915) -------------------------------------

DETERMINED = ["[2024-02-27T21:35:34.295539Z] fa88a9df || Traceback (most recent call last):",
              '[2024-02-27T21:35:34.295662Z] fa88a9df ||   File "/opt/conda/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
              "[2024-02-27T21:35:34.295706Z] fa88a9df ||     return _run_code(code, main_globals, None,",
              '[2024-02-27T21:35:34.295730Z] fa88a9df ||   File "/opt/conda/lib/python3.10/runpy.py", line 86, in _run_code',
              "[2024-02-27T21:35:34.295754Z] fa88a9df ||     exec(code, run_globals)"]


def test_determineds_container_prefix_is_peeled_as_a_key():
    key, body = peel(DETERMINED[0])
    assert key == "fa88a9df ||" and body == "Traceback (most recent call last):", (key, body)
    assert peel("fa88a9df || step 10 loss 1.2") == ("fa88a9df ||", "step 10 loss 1.2")


def test_a_cut_off_traceback_behind_determineds_prefix_is_a_crash():
    assert any(f.summary.startswith("traceback cut off") for f in _final(DETERMINED))


def test_yolact_style_double_bars_are_not_a_prefix_and_stay_quiet():
    line = "[  0]     530 || B: 3.233 | C: 2.508 | M: 4.462 | S: 0.910 | T: 11.113 || ETA: 1 day, 17:55:18 || timer: 1.783"
    assert peel(line)[0] == ""
    assert _kinds(_final([line, "trainable params: 4194304 || all params: 6742609920 || trainable%: 0.0622"])) == []


# -- THC's __THCudaCheck, other than out of memory (torch/cutorch#781) --------------------------------

CUTORCH = ["THCudaCheck FAIL file=/home/user/torch/extra/cutorch/lib/THC/generated/../generic/THCTensorSort.cu line=153 "
           "error=7 : too many resources requested for launch",
           "/home/user/torch/install/bin/luajit: cuda runtime error (7) : too many resources requested for launch at "
           "/home/user/torch/extra/cutorch/lib/THC/generated/../generic/THCTensorSort.cu:153",
           "stack traceback:",
           "        [C]: in function 'sort'"]


def test_thcs_check_failure_is_a_crash_naming_the_error():
    fs = [f for f in _final(CUTORCH) if f.kind == "crash"]
    assert fs and fs[0].summary == "CUDA runtime error 7: too many resources requested for launch (THC)", fs
    assert any("too many resources" in f.summary for f in _final(CUTORCH[1:2]))


def test_thcs_out_of_memory_stays_an_oom():
    assert _kinds(_final(["THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory"])) == ["oom"]


def test_thcs_driver_shutting_down_at_exit_is_quiet():
    assert _kinds(_final(["Epoch 30 done, best acc 0.912", "THCudaCheck FAIL file=/pytorch/aten/src/THC/"
                          "THCCachingHostAllocator.cpp line=265 error=29 : driver shutting down"])) == []
