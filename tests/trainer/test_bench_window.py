"""bench/trainer.py's window_flops rebuilds the batches a run trained on in its timed window:
the test holds it to a real run's own token counts, step for step."""

from __future__ import annotations

import json

from bench.trainer import window_flops
from tests.trainer.conftest import run_in_process
from trainer.config import get_preset


def test_window_flops_rebuilds_the_batches_a_run_trained_on(tiny_data, tmp_path):
    result = run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "r"),
                             "--steps", "12", "--log-every", "3", "--device", "cpu", "--sequential"])
    assert result.exit_code == 0
    recs = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    cfg = get_preset("tiny")
    for before, rec in zip(recs, recs[1:]):
        # the record's tokens over its steps: tok/s x the time of those steps
        tokens_run = round(rec["tok_per_s"] * rec["step_time_s"] * (rec["step"] - before["step"]))
        flops, tokens = window_flops(cfg, tiny_data, before["step"], rec["step"])
        assert tokens == tokens_run, (before["step"], rec["step"])
        assert flops > 0
    # a window's FLOPs are the sum of its batches' (the micro phase's functions), so a
    # window of short batches and one of long ones weigh what they did, not tokens x a constant
    f1, t1 = window_flops(cfg, tiny_data, 0, 1)
    f2, t2 = window_flops(cfg, tiny_data, 1, 2)
    f12, t12 = window_flops(cfg, tiny_data, 0, 2)
    assert (f12, t12) == (f1 + f2, t1 + t2)


def test_the_micro_phase_times_the_batches_the_window_counts(tiny_data):
    """micro and window_flops share one construction of the plan and positions
    (bench/trainer.py `_eager_batching`): the micro phase's first batches are the run's
    first batches, token for token."""
    import torch

    from bench.trainer import micro

    cfg = get_preset("tiny")
    out = micro(cfg, tiny_data, torch.device("cpu"), 3, cuda=False, compiled=False)
    assert out["real_tokens"] == window_flops(cfg, tiny_data, 0, 3)[1]
    assert out["real_tokens"] != window_flops(cfg, tiny_data, 1, 4)[1]
