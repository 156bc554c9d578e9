"""Shapes of serving stacks' logs (issue 22, helper k12misc): vLLM's pre-bracket logger prefix
(`ERROR 06-13 02:36:52 async_llm_engine.py:52] `), a markdown-quoted list of log lines
(`> - `), and vLLM's `Engine iteration timed out` (a stalled engine step). Each with a healthy
counter-example that must stay quiet; texts from training-split pastes (tests/corpus/pasted/index-zd.json)."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import summaries_by_kind as _by_kind

LOGS = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _log(name: str) -> list[str]:
    return (LOGS / f"{name}.log").read_text(encoding="utf-8").splitlines()


def test_vllm_old_logger_prefix_is_peeled_so_a_cut_traceback_is_a_crash():
    """vllm/logger.py (00656a8e) `_FORMAT = "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"`;
    pasted vllm-project/vllm#5443 without its first line (the traceback alone)."""
    found = _by_kind(_log("vllm-project_vllm-5443")[1:])
    assert list(found) == ["crash"], found
    assert "traceback cut off" in found["crash"][0]


def test_vllm_iteration_timeout_is_a_hang_beside_the_engine_death():
    found = _by_kind(_log("vllm-project_vllm-5443"))
    assert sorted(found) == ["crash", "hang"], found
    assert "engine iteration timed out" in found["hang"][0]


def test_markdown_quoted_list_of_log_lines_is_read():
    """pasted vllm-project/vllm#5060: `> - <ISO time> ERROR <vLLM prefix>  File ...` frames, cut."""
    found = _by_kind(_log("vllm-project_vllm-5060"))
    assert list(found) == ["crash"], found


def test_vllm_metrics_lines_full_of_cache_and_pending_words_stay_quiet():
    """pasted vllm-project/vllm#6737 (KV cache 99.7-100 %, 768 pending) and #6689 (idle server)."""
    assert _by_kind(_log("vllm-project_vllm-6737")) == {}
    assert _by_kind(_log("vllm-project_vllm-6689")) == {}


def test_vllm_timeout_setting_and_a_request_timeout_stay_quiet():
    healthy = ["INFO 06-13 02:36:00 api_server.py:10] VLLM_ENGINE_ITERATION_TIMEOUT_S=60",
               "> - not a traceback, only a quoted list item"]
    assert _by_kind(healthy) == {}


def test_paddle_1x_cpp_call_stacks_cut_before_its_message_is_a_crash():
    """Paddle 1.x enforce.h GetTraceBackString's `C++ Call Stacks (More useful to developers):` block;
    pasted PaddlePaddle/PaddleDetection#1198 (PaddleDetection's `[YYYY/MM/DD hh:mm:ss]` stamps, one space
    after each frame number), cut in its frames."""
    found = _by_kind(_log("paddlepaddle_paddledetection-1198"))
    assert list(found) == ["crash"], found
    assert "traceback cut off" in found["crash"][0]


def test_numbered_cpp_names_without_the_call_stacks_header_stay_quiet():
    healthy = [ln.replace("C++ Call Stacks (More useful to developers):", "Registered kernels:")
               for ln in _log("paddlepaddle_paddledetection-1198")]
    assert _by_kind(healthy) == {}
