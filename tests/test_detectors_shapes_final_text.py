"""Shapes read on final text only (issue 22, helper k12miss): a store-based barrier that the
text ends inside, and a result record whose every value is NaN. Each with a healthy
counter-example and a live read that must stay quiet."""

from __future__ import annotations

from pathlib import Path

from controller.judge import ScanState, scan_lines
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


_WAIT = ("INFO:root:Waiting in store based barrier to initialize process group for rank: {r}, key: "
         "store_based_barrier_key:1 (world_size=8, worker_count={n}, timeout=0:30:00)")


def test_final_text_ending_inside_the_store_based_barrier_is_a_hang():
    """Lightning-AI/pytorch-lightning#4420 (training split): 8 reports (rank 0 twice: 20 s), 7 of 8 ranks, and
    no completion where the text ends."""
    lines = _read("lightning-ai_pytorch-lightning-4420.log")
    (f,) = [f for f in _final(lines) if f.kind == "hang"]
    assert "store-based barrier" in f.summary and "7 of 8 ranks" in f.summary, f.summary
    assert _kinds(scan_lines(lines, now_s=0.0, state=ScanState())) == []  # a live read: the rank may still come


def test_a_store_based_barrier_that_completes_or_is_followed_by_progress_is_healthy():
    """torch/distributed/distributed_c10d.py _store_based_barrier: once every rank joined it logs
    `Rank R: Completed store-based barrier for key:K with W nodes.` (wording from the source)."""
    waits = [_WAIT.format(r=r, n=7) for r in (0, 6, 2)]
    done = "INFO:torch.distributed.distributed_c10d:Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes."
    assert _kinds(_final(waits + [done])) == []
    assert _kinds(_final(waits + ["Epoch 0:   3%|▎         | 10/300 [00:04<02:10, loss=2.31]"])) == []
    assert _kinds(_final(waits + [_WAIT.format(r=0, n=8)])) == []  # the count reached world_size
    assert _kinds(_final([_WAIT.format(r=r, n=7) for r in range(8)])) == []  # one report per rank: 10 s late


def test_a_final_result_line_whose_every_value_is_nan_is_nan():
    """mattnedrich/GradientDescentExample#2 (training split): `After 10000 iterations b = nan, m = nan, error = nan`."""
    (f,) = [f for f in _final(_read("mattnedrich_gradientdescentexample-2.log")) if f.kind == "nan"]
    assert "final result is NaN" in f.summary and "error = nan" in f.summary, f.summary


def test_a_record_all_nan_after_finite_ones_to_the_end_is_nan():
    """akanazawa/fpo#4 (training split): Reward finite at step 0, all NaN from step 6 to the end."""
    lines = _read("akanazawa_fpo-4.log")
    (f,) = [f for f in _final(lines) if f.kind == "nan"]
    assert "Reward:" in f.summary and "after finite ones" in f.summary, f.summary
    assert _kinds(scan_lines(lines, now_s=0.0, state=ScanState())) == []  # live: the next eval may be finite


def test_nan_records_that_come_first_or_recover_or_are_not_final_are_healthy():
    """An evaluation before any episode finished prints NaN statistics, then finite ones."""
    nan_ = "  Reward: mean=nan, min=nan, max=nan, std=nan"
    fin = "  Reward: mean=3.06, min=1.92, max=10.06, std=1.38"
    assert _kinds(_final(["Eval metrics at step 0:", nan_, "Eval metrics at step 6:", fin])) == []
    assert _kinds(_final(["Eval metrics at step 0:", fin, "Eval metrics at step 6:", nan_, "Eval metrics at step 9:",
                          fin])) == []
    assert _kinds(_final([nan_, "Eval metrics at step 6:", "  Steps:  mean=0.0, min=0.0, max=0.0"])) == []
    assert _kinds(_final(["After 10000 iterations b = 0.0890, m = 1.4777, error = 112.6148"])) == []
    assert _kinds(_final(["b = nan, m = 2.0, error = 3.5"])) == []  # not every value NaN


_RAY_WARN = ("(autoscaler +2m17s) Warning: The following resource request cannot be scheduled right now: "
             "{'CPU': 1.0, 'GPU': 1.0}. This is likely due to all cluster resources being claimed by actors. "
             "Consider creating fewer actors or adding more nodes to this Ray cluster.")


def test_a_ray_unschedulable_warning_as_the_last_word_of_final_text_is_a_hang():
    """ray-project/llm-applications#58 (training split): the autoscaler's warning ends the text
    (ray python/ray/autoscaler/_private/autoscaler.py _report_pending_infeasible)."""
    lines = _read("ray-project_llm-applications-58.log")
    (f,) = [f for f in _final(lines) if f.kind == "hang"]
    assert "cannot be scheduled" in f.summary, f.summary
    assert _kinds(scan_lines(lines, now_s=0.0, state=ScanState())) == []  # live: the resources may free


def test_a_ray_unschedulable_warning_followed_by_progress_is_healthy():
    """The wait ended: the actor got its GPU and the run went on (wording from the source)."""
    assert _kinds(_final([_RAY_WARN, "(TrainTrainable pid=4711) Epoch 1/10 loss=0.6931"])) == []
    older = ("2019-10-25 14:06:08,888\tWARNING worker.py:1382 -- The actor or task with ID 7d58f415c89effffffff01000000 "
             "is pending and cannot currently be scheduled. It requires {CPU: 1.000000} for execution")
    assert _kinds(_final([older, "== Status ==", "Number of trials: 1 (1 RUNNING)"])) == []
    assert _kinds(_final([older])) == ["hang"]
