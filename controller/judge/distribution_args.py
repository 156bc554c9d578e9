"""torch.distributions' argument check, read for a NaN network output.

A distribution built with validate_args (torch's default since 1.8) checks each parameter
against its constraint and raises, with the offending tensor printed on the lines below:

    ValueError: Expected parameter loc (Tensor of shape (4, 2)) of distribution Normal(loc: ...,
    scale: ...) to satisfy the constraint Real(), but found invalid values:
    tensor([[nan, nan],
            [nan, nan]], grad_fn=<AddmmBackward0>)

(pytorch/pytorch torch/distributions/distribution.py Distribution.__init__ @dc764497, `f"to satisfy
the constraint {repr(constraint)}, " f"but found invalid values:\\n{value}"`; log_prob's sample check
`Expected value argument (...) to be within the support (...) of the distribution ..., but found
invalid values:`; the same text made here, tests/data/logs/torch_nan_distribution.log.) The
parameters are a policy's, a VAE encoder's or a mixture head's outputs, so the check failing on NaN
is the network gone NaN -- often the first a run prints of its divergence: the loss itself was
never logged as NaN.

What proves NaN: torch's `Real()` constraint checks `value == value` ("False for NANs",
torch/distributions/constraints.py _Real.check), so a failed `Real()` (or `IndependentConstraint(
Real(), 1)`, a vector's) means a NaN is in the tensor even when its printed summary elides it with
`...`. Any other constraint fails for other values too (a negative scale for GreaterThan, a
probability vector not summing to one for Simplex -- which prints the normalised logits, +-inf):
there only a `nan` among the printed values counts. A sample that fails the support check is the
caller's value, often data: it counts only when it is a learnt `Parameter`. When a parameter's repr
holds a tensor, the message spans lines (`Normal(loc: Parameter containing:` / `tensor([nan], ...)`
/ `... but found invalid values:`): the head is looked for a few lines above.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEAD = re.compile(r"Expected (?:parameter (?P<param>\w+) \((?P<ptype>\w+) of shape|value argument \((?P<vtype>\w+) of shape)")
_DIST = re.compile(r"of (?:the )?distribution (?P<dist>\w+)\(")
_CONSTRAINT = re.compile(r"(?:to satisfy the constraint (?P<c>.{1,120}?)|to be within the support \((?P<s>.{1,120}?)\) of the "
                         r"distribution .{0,600}?), but found invalid values:")
_NAN_VALUE = re.compile(r"(?<![\w.])[-+]?nan(?![\w.])")
VALUES_LOOKAHEAD_LINES = 4
"""Lines below the message to look for the tensor's values: its first printed row is the next
line (`Parameter containing:` or a blank line between at most)."""
HEAD_LOOKBACK_LINES = 4
"""Lines above the `found invalid values:` line that may hold the message's head (a parameter's
multi-line repr between)."""


def nan_argument(line: str, before: Sequence[str], following: Sequence[str]) -> str | None:
    """The summary when `line` ends the argument check's message (its head in `line` or in the
    lines `before` it, nearest last) and the check proves NaN; None otherwise."""
    cm = _CONSTRAINT.search(line)
    if cm is None:
        return None
    text = line
    head = _HEAD.search(text)
    for prev in reversed(before[-HEAD_LOOKBACK_LINES:]):
        if head is not None:
            break
        text = prev + " " + text
        head = _HEAD.search(text)
    if head is None:
        return None
    constraint = cm.group("c") or cm.group("s")
    proven = constraint.startswith(("Real()", "IndependentConstraint(Real()"))
    if head.group("vtype") is not None and head.group("vtype") != "Parameter":
        return None
    if not proven and not any(_NAN_VALUE.search(t) for t in following[:VALUES_LOOKAHEAD_LINES]):
        return None
    dm = _DIST.search(text)
    dist = dm.group("dist") if dm else "a"
    what = f"parameter {head.group('param')}" if head.group("param") else "learnt value"
    return (f"the {dist} distribution's {what} is NaN (torch.distributions' check of {constraint[:40]} failed): "
            "the network or parameter that produced it went NaN")
