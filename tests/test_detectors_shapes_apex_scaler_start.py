"""apex's dynamic loss scaler read from where it starts (controller/judge/loss_scale.py
APEX_INITIAL_SCALE; helper k15nan, issue 22): amp's LossScaler begins at 2**16 (NVIDIA/apex
apex/amp/scaler.py:38-47 at e13873de), so its skip line with a scale of 1 or less has fallen from
there even when the paste shows only that line. Beside it, the healthy skips that must stay quiet."""

from __future__ import annotations

from controller.judge.loss_scale import APEX_INITIAL_SCALE, LossScaleTrajectory
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# whai362/PVT#94: the one line the user pasted (the scaler's double space, a trailing comma and blank)
PVT_BELOW_ONE = ["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.03125, "]
# microsoft/Swin-Transformer#47 and MathLee/LASNet#3: apex searching high, healthy
APEX_SEARCHING = ["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 131072.0",
                  "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 1024.0",
                  "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 256.0."]


def _trajectory(lines: list[str]) -> LossScaleTrajectory:
    t = LossScaleTrajectory()
    for n, line in enumerate(lines, 1):
        t.feed(line, line.lower(), n)
    return t


def test_one_apex_skip_below_a_scale_of_one_is_a_collapse_from_its_start():
    (f,) = [f for f in _final(PVT_BELOW_ONE) if f.kind == "nan"]
    assert "loss scale collapsed" in f.summary, f.summary
    t = _trajectory(PVT_BELOW_ONE)
    assert t.collapsed and t.highest == APEX_INITIAL_SCALE == 65536.0 and t.last == 0.03125
    assert any("from 65536 down to 0.03125" in e for e in f.evidence), f.evidence


def test_apex_skips_at_searching_scales_and_other_scalers_low_lines_stay_quiet():
    assert _kinds(_final(APEX_SEARCHING)) == []
    assert not _trajectory(APEX_SEARCHING).collapsed
    # exactly 1.0 is the floor the collapse rule names (MIN_HEALTHY_SCALE): a scale still above it is not
    assert _kinds(_final(["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 2.0"])) == []
    # fairseq starts where its config says (and trains on at low scales): its lone line implies no start
    assert _kinds(_final(["| WARNING | fairseq.trainer | overflow detected, setting loss scale to: 0.5"])) == []
    # apex's fp16_utils optimizer (a different wording) is not read as amp's scaler either
    assert not _trajectory(["OVERFLOW within closure! Skipping step, reducing loss scale to 0.5"]).collapsed
