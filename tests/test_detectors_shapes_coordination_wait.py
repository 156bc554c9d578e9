"""The XLA/TSL coordination service's connect wait (issue 22, round twelve, the lead): TensorFlow's
MultiWorkerMirroredStrategy and jax.distributed report `Waiting for P/N tasks to connect.` once per task
that registers, never while the wait lasts, so only a text that ends in that report with P > 0 says the
cluster never formed. Real output of tests/data/logs/programs/tf_multiworker.py (TensorFlow 2.21.0 on CPU,
two workers on loopback; the straggler log's worker 1 was never started and worker 0 was ended by
`timeout -s KILL 45` while it waited; paths replaced by /src and /venv)."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def test_a_text_that_ends_waiting_for_a_straggler_is_a_start_up_hang():
    lines = _log("tf_multiworker_straggler.log")
    found = _final(lines)
    assert _kinds(found) == ["hang"], [f.summary for f in found]
    (f,) = found
    assert "1 of 2 tasks" in f.summary
    assert "Waiting for 1/2 tasks to connect." in lines[f.line - 1]


def test_the_same_report_followed_by_the_last_task_connecting_and_training_stays_quiet():
    lines = _log("tf_multiworker_healthy.log")
    assert any("Waiting for 1/2 tasks to connect." in ln for ln in lines)  # the same report, mid-start-up
    assert _kinds(_final(lines)) == []
    # cut right after the last task registered (`Waiting for 0/2`): formed, nothing pending
    cut = next(i for i, ln in enumerate(lines) if "Waiting for 0/2" in ln)
    assert _kinds(_final(lines[:cut + 1])) == []


def test_a_live_read_does_not_judge_the_wait_and_more_output_after_it_ends_it():
    from controller.judge.stream import TextScanner

    lines = _log("tf_multiworker_straggler.log")
    live = TextScanner(now_s=0.0)
    live.feed(lines)
    assert _kinds(live.all_findings()) == []  # not finished: the straggler may still come
    assert _kinds(_final(lines + ["step 0 loss 4.0000"])) == []
