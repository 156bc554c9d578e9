"""Shapes from the LLM fine-tuning / RL-stack pastes of index-t (issue 22, helper k11llm),
each on a short text from a training-split log, each beside a healthy text that must stay
quiet."""

from __future__ import annotations

from tests.judge_support import FAILURE_KINDS, failure_kinds
from tests.judge_support import final_read as _final


def _kinds(findings) -> list[str]:
    return failure_kinds(findings, FAILURE_KINDS + ("recompile",))


# -- Ray GCS's actor death cause on its own line (OpenRLHF/OpenRLHF#187, Unakar/Logic-RL#18) ------------

RAY_DEAD = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
            "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential "
            "root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop "
            "--force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.")


def test_a_ray_actor_whose_worker_process_died_with_a_system_error_is_a_crash():
    (f,) = [f for f in _final([RAY_DEAD]) if f.kind == "crash"]
    assert "worker process died" in f.summary and "SYSTEM_ERROR" in f.summary, f.summary


def test_ray_older_unexpected_system_exit_wording_is_read_too():
    line = RAY_DEAD.replace("SYSTEM_ERROR", "UNEXPECTED_SYSTEM_EXIT")      # ray-project/ray#24468's example
    assert _kinds(_final([line])) == ["crash"]


def test_an_actor_that_exited_by_a_user_request_is_not_a_failure():
    # Ray's docs (doc/source/ray-core/actors/terminating-actors.md, `ray list actors --detail` after
    # exit_actor()), on one line: the intended end of an actor
    line = ("error_message: 'The actor is dead because its worker process has died. Worker exit type: "
            "INTENDED_USER_EXIT Worker exit detail: Worker exits by a user request. exit_actor() is called.'")
    assert _kinds(_final([line])) == []


# -- healthy fine-tunes full of tempting words (lm-sys/FastChat#1289, JIA-Lab-research/LISA#18) -------

def test_fastchat_tokenization_mismatch_warnings_between_finite_losses_are_healthy():
    lines = ["WARNING: tokenization mismatch: 1037 vs. 1055. (ignored)",
             "{'loss': 0.8334, 'learning_rate': 6.976744186046513e-07, 'epoch': 0.0}",
             "WARNING: tokenization mismatch: 1 vs. 32. (ignored)",
             "{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 9.021199819576004e-08, 'epoch': 0.0}",
             "{'loss': 0.7664, 'learning_rate': 9.30232558139535e-07, 'epoch': 0.01}"]
    assert _kinds(_final(lines)) == []


def test_token_indices_longer_than_the_maximum_warning_is_healthy():
    lines = ["Token indices sequence length is longer than the specified maximum sequence length for this model "
             "(564 > 512). Running this sequence through the model will result in indexing errors",
             "Epoch: [0][  1/500]     Time 112.567 (124.016)  Loss 3.0156 (6.4026)    CeLoss 3.0156 (6.4026)"]
    assert _kinds(_final(lines)) == []


# -- the NCCL watchdog's checkTimeout frames without their message line (OpenRLHF/OpenRLHF#427) ---------

CHECKTIMEOUT_FRAMES = [
    "[2024-08-21 03:38:02] frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
    "duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7fb6ab461c62 in /env/lib/python3.12/site-packages/torch/"
    "lib/libtorch_cuda.so)",
    "[2024-08-21 03:38:02] frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x1a0 (0x7fb6ab466a80 in "
    "/env/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so)",
    "[2024-08-21 03:38:02] frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7fb6ab467dcc in "
    "/env/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so)"]


def test_a_checktimeout_frame_of_the_nccl_watchdog_is_a_hang():
    (f,) = [f for f in _final(CHECKTIMEOUT_FRAMES) if f.kind == "hang"]
    assert "checkTimeout" in f.summary and "timed out" in f.summary, f.summary


def test_watchdog_frames_of_a_cuda_error_are_not_read_as_a_timeout():
    # the same watchdog stack when a CUDA error (not a timeout) ended the work: no checkTimeout frame
    lines = [ln.replace("WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >)",
                        "WorkNCCL::finishedGPUExecutionInternal() const") for ln in CHECKTIMEOUT_FRAMES]
    assert "hang" not in _kinds(_final(lines))


def test_processgroupnccl_exit_warning_is_healthy():
    line = ("[rank0]:[W409 11:42:27.776885251 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been "
            "destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call "
            "destroy_process_group to ensure that any pending NCCL operations have finished in this process.")
    assert _kinds(_final([line])) == []
