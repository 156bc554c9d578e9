"""Shapes of the "other" and tf/keras/jax families outside PyTorch (issue 22, helper k12tfx):
Metal's out-of-memory command-buffer error (MLX, ggml), LLVM libc++abi's terminate line (macOS),
ONNX Runtime's BFCArena allocation failure, MindSpore's memory-pool refusal, CNTK's / ONNX
Runtime's CudaCall 'CUDA failure 2: out of memory ; GPU=N', and ggml's GGML_ASSERT. Each with a
healthy counter-example that must stay quiet; texts from training-split pastes
(tests/corpus/pasted/index-zc.json)."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import summaries_by_kind as _by_kind

_LOGS = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _lines(name: str) -> list[str]:
    return (_LOGS / f"{name}.log").read_text().splitlines()


def test_metal_insufficient_memory_is_oom_not_only_a_terminate():
    """instructlab/instructlab#380: libc++abi terminate around MLX's Metal OOM."""
    found = _by_kind(_lines("instructlab_instructlab-380"))
    assert list(found) == ["oom"], found
    assert "Metal" in found["oom"][0]


def test_libcxxabi_terminate_on_other_metal_error_is_crash():
    """Mcourtyard/m-courtyard#8: the Metal watchdog's 'Impacting Interactivity' is not memory."""
    found = _by_kind(_lines("mcourtyard_m-courtyard-8"))
    assert list(found) == ["crash"], found
    assert "libc++abi" in found["crash"][0] and "std::runtime_error" in found["crash"][0]


def test_jax_cpu_fallback_warning_is_quiet():
    assert _by_kind(_lines("sashakolpakov_dire-jax-14")) == {}
    assert _by_kind(_lines("gladiaio_gladia-927")) == {}


def test_onnxruntime_arena_failure_is_oom():
    """hacksider/Deep-Live-Cam#547 and microsoft/onnxruntime#22702 (read by ort-bfc-oom since round eleven's
    merge: two engineers each wrote a rule for the arena's refusal)."""
    for name in ("hacksider_deep-live-cam-547", "microsoft_onnxruntime-22702"):
        found = _by_kind(_lines(name))
        assert list(found) == ["oom"], (name, found)
        assert "BFC arena" in found["oom"][0]


def test_onnxruntime_arena_growth_and_ortmodule_memory_records_are_quiet():
    assert _by_kind(_lines("microsoft_onnxruntime-14474")) == {}
    assert _by_kind(_lines("microsoft_onnxruntime-19620")) == {}


def test_mindspore_pool_refusal_is_oom():
    """mindspore-lab/mindone#820: its somas WARNINGs before the ERROR stay quiet."""
    lines = _lines("mindspore-lab_mindone-820")
    found = _by_kind(lines)
    assert list(found) == ["oom"], found
    assert "93.6 GiB" in found["oom"][0]
    assert _by_kind(lines[:4]) == {}


def test_cntk_cuda_failure_2_is_oom_even_hard_wrapped():
    """microsoft/CNTK#1591 (wrapped mid-word), #480 ('EXCEPTION occurred: ...')."""
    for name in ("microsoft_cntk-1591", "microsoft_cntk-480"):
        found = _by_kind(_lines(name))
        assert list(found) == ["oom"], (name, found)
        assert "GPU 0" in found["oom"][0]


def test_cntk_training_records_with_error_and_retries_words_are_quiet():
    for name in ("microsoft_cntk-675", "microsoft_cntk-194", "microsoft_cntk-783", "microsoft_cntk-854"):
        assert _by_kind(_lines(name)) == {}, name


def test_ggml_assert_is_crash_and_metal_buffer_warnings_are_quiet():
    """ggml-org/llama.cpp#3606: over-budget Metal buffer warnings, then GGML_ASSERT."""
    lines = _lines("ggml-org_llama.cpp-3606")
    found = _by_kind(lines)
    assert list(found) == ["crash"], found
    assert "llama.cpp:9084" in found["crash"][0]
    assert _by_kind(lines[:-1]) == {}
    newer = ["/src/ggml/src/ggml-cpu/ops.cpp:4512: GGML_ASSERT(ne00 == ne10) failed"]  # include/ggml.h:288 wording
    assert list(_by_kind(newer)) == ["crash"]
