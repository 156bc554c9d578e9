"""Native fatal lines that slipped a natural sample of crash threads (issue 22, helper k15crash,
index-zu): abseil's failure signal handler's `*** SIGABRT received at time=... ***` (Ray's core worker,
TensorFlow, JAX install it; abseil-cpp absl/debugging/failure_signal_handler.cc:267 @926f1d05a4f8), and
TensorFlow's LOG(FATAL) line as TSL/XLA (jaxlib's `F external/xla/...`) and a Windows build (`F .\\tensorflow/...`)
print it. The crash lines are the pasted training-split logs' own; each healthy counter-example is the
same paste's lines before its fatal line (real output) or the stop signal the handler also reports."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import summaries_by_kind as _by_kind

PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _pasted(name: str) -> list[str]:
    return (PASTED / f"{name}.log").read_text(encoding="utf-8").splitlines()


# --- abseil's failure signal handler ------------------------------------------------------------------

def test_absl_sigabrt_report_of_a_ray_train_worker_is_a_crash():
    found = _by_kind(_pasted("ray-project_ray-49252"))
    assert list(found) == ["crash"], found
    assert any("SIGABRT" in s for s in found["crash"]), found


def test_absl_report_with_and_without_cpu_and_under_a_prefix():
    for line in ("*** SIGSEGV received at time=1741149596 on cpu 63 ***",
                 "(RayTrainWorker pid=7315) *** SIGBUS received at time=1734086759 ***"):
        found = _by_kind(["step 10 loss 2.31", line])
        assert list(found) == ["crash"], (line, found)


def test_absl_sigterm_report_and_the_lines_before_the_abort_are_quiet():
    # SIGTERM is a stop (a scheduler, ray stop), not a native crash; the worker's gloo line alone is no crash
    assert _by_kind(["step 10 loss 2.31", "*** SIGTERM received at time=1734086759 on cpu 3 ***"]) == {}
    assert "crash" not in _by_kind(["step 10 loss 2.31", "the handler printed: SIGABRT received at time of shutdown"])


# --- TSL/XLA and Windows TensorFlow LOG(FATAL) -----------------------------------------------------------

def test_xla_log_fatal_under_jaxlib_is_a_crash():
    found = _by_kind(_pasted("google-deepmind_mujoco_playground-113"))
    assert list(found) == ["crash"], found
    assert any("gemm_fusion_autotuner.cc" in s for s in found["crash"]), found


def test_windows_tensorflow_check_failed_is_a_crash():
    found = _by_kind(_pasted("deryckt_TIRE-1"))
    assert list(found) == ["crash"], found
    assert any("work_element_count" in s for s in found["crash"]), found


def test_the_same_pastes_before_their_fatal_line_are_healthy():
    tire = _pasted("deryckt_TIRE-1")
    mujoco = _pasted("google-deepmind_mujoco_playground-113")
    assert _by_kind(tire[:-1]) == {}, tire[:-1]
    assert _by_kind(mujoco[:-1]) == {}
    # a W/I line of XLA with the same path shape is not fatal
    assert _by_kind(["2025-04-23 20:35:34.618070: W external/xla/xla/service/gpu/autotuning/"
                     "gemm_fusion_autotuner.cc:1099] Slow autotuning, 12 s", "0: reward=317.351"]) == {}
