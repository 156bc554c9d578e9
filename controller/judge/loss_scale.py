"""The loss-scale trajectory: fp16 overflow judged by where the scale goes, not by one line.

Every fp16 loss scaler announces a skipped step in its own words -- DeepSpeed
`[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to
32768` (deepspeed/runtime/fp16/loss_scaler.py), apex `Gradient overflow.  Skipping step,
loss scaler 0 reducing loss scale to 32768.0` (apex/amp/scaler.py), fairseq `overflow
detected, setting loss scale to: 64.0` (fairseq/optim/dynamic_loss_scaler.py), DeepSpeed's
FP16 optimizers `Grad overflow on iteration N` -- and training scripts print the scale
itself (`loss_scale=16384`, `loss scale: 1.0 |`, `loss scale 65536 -> 32768`).

Overflow is normal while a scaler searches for its level: DeepSpeed starts at 2**32 and
halves a dozen times in its first steps, torch's GradScaler skips a step or two. What is
not normal is a scale that keeps falling until it reaches its floor: the gradients
overflow every step, the weights no longer move (the loss is exploding or is already
NaN). So: a collapse is the scale falling to MIN_HEALTHY_SCALE or below after having been
above it, or a scaler saying it is at its minimum (a rule in rules.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MIN_HEALTHY_SCALE = 1.0
"""A scale at or below 1 no longer scales anything up: fp16 gradients overflow even
unscaled. DeepSpeed's and fairseq's default floors are 1 and 1e-4."""
BELOW_ONE_SKIPS = 8
"""Skipped steps in a row at a scale of 1 or less: overflowing even unscaled, step after
step, is the cascade whatever the excerpt shows above it (a paste that begins at 0.25 and
halves on). A few in a row and then updates again is fairseq still searching (it trains on
at 0.004): eight in a row is 2**-8 below where it started, with no update between."""
SKIP_ROW_GAP_LINES = 2
"""Skip lines at most this far apart are in a row (a rank's copy or a warning between them)."""
FLOOR_SCALE = 1e-4
"""A scale at or below this is past every scaler's floor (fairseq's min_loss_scale 1e-4):
collapsed even when the excerpt shown never held a healthy scale (a paste of the tail of a
cascade: `reducing loss scale to 6.4e-204`)."""

_SKIP = re.compile(r"OVERFLOW! Rank \d+ Skipping step|Gradient overflow\.\s+Skipping step|overflow detected, "
                   r"setting loss scale|Grad overflow on iteration|Overflow detected\. Skipping step"
                   r"|found inf/nan grads|skipped the step|loss scale overflow! Skipping step"
                   r"|Found inf or nan, current scale is|Found NaN, decreased lg_loss_scale to", re.I)
_SCALE_NUMBER = r"(?P<v>\d*\.?\d+(?:[eE][-+]?\d+)?)"
"""A scale as printed: `32768.0`, `0.0001220703125`, `1.4582244039112795e-303` -- never the
sentence's own full stop after it (`reducing loss scale to 256.0.` -- MathLee/LASNet#3)."""
_NEW_SCALE = re.compile(
    r"(?:reducing (?:loss scale )?to|setting loss scale to:?|loss[ _]scale\s*[:=]?\s*[\d.eE+-]+\s*(?:->|→))"
    r"\s*" + _SCALE_NUMBER, re.I)
_ATTEMPTED = re.compile(r"Attempted loss scale:\s*" + _SCALE_NUMBER)
_PADDLE_DECREASE = re.compile(r"current scale is:\s*(?P<cur>\d*\.?\d+(?:[eE][-+]?\d+)?),\s*decrease to:\s*[\d.eE+-]+\*"
                              r"(?P<ratio>\d*\.?\d+(?:[eE][-+]?\d+)?)")
"""Paddle's GradScaler prints the new scale as a product: `Found inf or nan, current scale is: 1024.0,
decrease to: 1024.0*0.5` (PaddlePaddle/Paddle python/paddle/amp/grad_scaler.py AmpScaler._update, `print('Found
inf or nan, current scale is: {}, decrease to: {}*{}'.format(float(self._scale), float(self._scale),
float(self._decr_ratio)))`, once per decr_every_n_nan_or_inf overflowing steps); the new scale is cur * ratio.
Pasted PaddlePaddle/PaddleClas#2457: 3.05e-05 halving to 5.96e-08 line after line, the loss still printed."""
_LG_SCALE = re.compile(r"(?:decreased lg_loss_scale to|\blg_loss_scale\s*[|:=])\s*(?P<lg>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
"""OpenAI's diffusion trainers keep the scale's base-2 logarithm: `Found NaN, decreased lg_loss_scale to
{self.lg_loss_scale}` on each overflowing step (openai/improved-diffusion improved_diffusion/train_util.py
optimize_fp16, initial 20.0; openai/guided-diffusion guided_diffusion/fp16_util.py MixedPrecisionTrainer.optimize),
and their logger's table prints its mean, `| lg_loss_scale | 19.5 |`. The scale is 2 ** lg: a logarithm at or
below 0 is a scale of 1 or less (pasted tomeramit/SegDiff#20: `| lg_loss_scale | -0.821 |`)."""
MAX_LG_SCALE = 1000.0
"""A base-2 logarithm beyond this is no loss scale (2 ** 1000 overflows a float)."""
INITIAL_LG_SCALE = 20.0
"""Where those trainers start (`INITIAL_LOG_LOSS_SCALE = 20.0`, improved_diffusion/train_util.py and its copies):
a logarithm read at or below 0 has fallen from there, whatever the excerpt shows above it."""
_APEX_SKIP = re.compile(r"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to", re.I)
APEX_INITIAL_SCALE = 2.0 ** 16
"""Where apex's dynamic scaler starts, whatever the excerpt shows above its first skip: amp's LossScaler
sets `self._loss_scale = min(max_loss_scale, init_scale)` with `init_scale=2.**16` (NVIDIA/apex
apex/amp/scaler.py:38-47 at e13873de, the last commit before amp was removed; amp.initialize passes only
min_loss_scale and max_loss_scale, default 2.**24 -- apex/amp/_initialize.py:231-233), halves on each
overflow (update_scale, scaler.py:204-207) and doubles after 2000 clean steps; handle.py:138-140 prints
`Gradient overflow.  Skipping step, loss scaler {loss_id} reducing loss scale to {scale}`. So that line
with a scale of 1 or less has fallen from 65536 -- sixteen halvings more than the doublings -- as the
lg_loss_scale trainers' logarithm falls from 20 (pasted whai362/PVT#94: one such line, `reducing loss
scale to 0.03125`)."""
_SCALE_VALUE = re.compile(r"\bloss[ _]scal(?:e|er)['\"]?\s*[:=]?\s*['\"]?(?P<v>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\b",
                          re.I)


def unit_scale(line: str) -> bool:
    """The line prints a loss scale of 1 or less beside its other values (`loss scale: 1.0 |`).

    Megatron's record prints `loss scale: {:.1f}` every iteration (megatron/training/training.py
    training_log); without a grad scaler -- bf16, the only precision Megatron allows one to be
    missing for ("None grad scaler is only supported for bf16", megatron/core/optimizer/optimizer.py
    MixedPrecisionOptimizer.__init__) -- get_loss_scale() returns its constant `_scale_one` (1.0), and
    prepare_grads() checks for inf/nan only `if self.grad_scaler:`. So at a scale of 1 nothing skips
    a step whose gradients overflowed: a NaN gradient norm printed there was clipped and applied
    (an fp16 scaler shown at 1.0 is at its floor: as bad). A printed integer 0 is DeepSpeed's config
    for "dynamic", not a reading."""
    m = _SCALE_VALUE.search(line)
    if m is None:
        return False
    v = m.group("v")
    return float(v) <= MIN_HEALTHY_SCALE and (float(v) > 0 or "." in v)


def _new_scale(line: str) -> float | None:
    """The scale a skip line says it moves to, in any scaler's wording, or None."""
    pm = _PADDLE_DECREASE.search(line)
    if pm is not None:
        return float(pm.group("cur")) * float(pm.group("ratio"))
    lm = _LG_SCALE.search(line)
    if lm is not None and abs(float(lm.group("lg"))) <= MAX_LG_SCALE:
        return 2.0 ** float(lm.group("lg"))
    m = _NEW_SCALE.search(line)
    return float(m.group("v")) if m is not None else None


@dataclass
class LossScaleTrajectory:
    """Accumulates scale readings in line order (bounded: a few numbers, not the lines)."""

    skips: int = 0
    skips_below_one: int = 0   # skipped steps in a row whose new scale is at or below MIN_HEALTHY_SCALE
    last_skip_line: int | None = None
    highest: float | None = None
    last: float | None = None
    first_skip_line: int | None = None
    collapse_line: int | None = None
    evidence: list[str] = field(default_factory=list)
    reported: bool = False

    def feed(self, line: str, low: str, line_no: int) -> None:
        if "scal" not in low and "overflow" not in low and "skipped" not in low:
            return
        if _SKIP.search(line):
            self.skips += 1
            prev_skip, self.last_skip_line = self.last_skip_line, line_no
            if self.first_skip_line is None:
                self.first_skip_line = line_no
                self.evidence.append(line)
            value = _new_scale(line)
            if value is not None and "lg_loss_scale" in line:
                self.highest = max(self.highest or 0.0, 2.0 ** INITIAL_LG_SCALE)
            elif value is not None and _APEX_SKIP.search(line):
                self.highest = max(self.highest or 0.0, APEX_INITIAL_SCALE)
            if value is not None:
                a = _ATTEMPTED.search(line)
                if value <= MIN_HEALTHY_SCALE:
                    # in a row: skipped steps with training progress between them are a low
                    # scale that still trains (fairseq goes on at 0.0039), not a cascade
                    near = prev_skip is not None and line_no - prev_skip <= SKIP_ROW_GAP_LINES
                    self.skips_below_one = self.skips_below_one + 1 if near or not self.skips_below_one else 1
                    if a is not None and float(a.group("v")) <= value:
                        self.skips_below_one = BELOW_ONE_SKIPS  # "reducing" to what it already was: its floor
                self._reading(value, line, line_no)
            return
        lm = _LG_SCALE.search(line) if "lg_loss_scale" in line else None
        if lm is not None and abs(float(lm.group("lg"))) <= MAX_LG_SCALE:
            self.highest = max(self.highest or 0.0, 2.0 ** INITIAL_LG_SCALE)
            self._reading(2.0 ** float(lm.group("lg")), line, line_no, printed=True)
            return
        m = _SCALE_VALUE.search(line)
        if m:
            # a printed scale of 0.000 (fairseq's epoch summary) is below its floor; an integer 0
            # is DeepSpeed's config for "dynamic", not a reading of the scale
            self._reading(float(m.group("v")), line, line_no, printed="." in m.group("v"))

    def _reading(self, value: float, line: str, line_no: int, printed: bool = False) -> None:
        if value != value:  # NaN scale: not a reading
            return
        self.highest = value if self.highest is None else max(self.highest, value)
        self.last = value
        if self.collapse_line is None and ((value <= MIN_HEALTHY_SCALE and self.highest > MIN_HEALTHY_SCALE)
                                           or (value <= FLOOR_SCALE and (self.skips >= 2 or printed))
                                           or self.skips_below_one >= BELOW_ONE_SKIPS):
            self.collapse_line = line_no
            self.evidence.append(line)

    @property
    def collapsed(self) -> bool:
        return self.collapse_line is not None
