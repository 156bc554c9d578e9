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
FLOOR_SCALE = 1e-4
"""A scale at or below this is past every scaler's floor (fairseq's min_loss_scale 1e-4):
collapsed even when the excerpt shown never held a healthy scale (a paste of the tail of a
cascade: `reducing loss scale to 6.4e-204`)."""

_SKIP = re.compile(r"OVERFLOW! Rank \d+ Skipping step|Gradient overflow\.\s+Skipping step|overflow detected, "
                   r"setting loss scale|Grad overflow on iteration|Overflow detected\. Skipping step"
                   r"|found inf/nan grads|skipped the step", re.I)
_NEW_SCALE = re.compile(
    r"(?:reducing (?:loss scale )?to|setting loss scale to:?|loss[ _]scale\s*[:=]?\s*[\d.eE+-]+\s*(?:->|→))"
    r"\s*(?P<v>[\d.]+(?:[eE][-+]?\d+)?)", re.I)
_SCALE_VALUE = re.compile(r"\bloss[ _]scal(?:e|er)['\"]?\s*[:=]?\s*['\"]?(?P<v>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\b",
                          re.I)


@dataclass
class LossScaleTrajectory:
    """Accumulates scale readings in line order (bounded: a few numbers, not the lines)."""

    skips: int = 0
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
            if self.first_skip_line is None:
                self.first_skip_line = line_no
                self.evidence.append(line)
            m = _NEW_SCALE.search(line)
            if m:
                self._reading(float(m.group("v")), line, line_no)
            return
        m = _SCALE_VALUE.search(line)
        if m:
            self._reading(float(m.group("v")), line, line_no)

    def _reading(self, value: float, line: str, line_no: int) -> None:
        if value != value:  # NaN scale: not a reading
            return
        self.highest = value if self.highest is None else max(self.highest, value)
        self.last = value
        if self.collapse_line is None and ((value <= MIN_HEALTHY_SCALE and self.highest > MIN_HEALTHY_SCALE)
                                           or (value <= FLOOR_SCALE and self.skips >= 2)):
            self.collapse_line = line_no
            self.evidence.append(line)

    @property
    def collapsed(self) -> bool:
        return self.collapse_line is not None
