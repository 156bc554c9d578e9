"""A printed tensor or array whose every value is NaN: a computation that produced nothing else.

A user chasing a NaN loss prints the model's output, or its weights, and pastes what came out.
torch prints a tensor as `tensor(` + its rows, each further row on its own line indented to sit
under the first (torch 2.13.0 torch/_tensor_str.py:328, _tensor_str_with_formatter: `tensor_str = (","
+ "\\n" * (dim - 1) + " " * (indent + 1)).join(slices)`); NumPy the same under `array(`
(numpy/_core/arrayprint.py _array_repr_implementation). NaN prints as `nan` in both. Real output (torch 2.13.0+cpu), tests/data/logs/
nan_output_tensor_k15.log (tests/data/logs/programs/nan_output_tensor_k15.py): SGD steps at an
absurd learning rate, then `outputs contain NaN` and `tensor([[nan, nan, nan, nan, nan, nan, nan],`
with 23 more such rows. Pasted usef-kh/fer#4: the same dump after the user's own `your data contains
Nan`.

What tells: ALL of the tensor's printed values are nan, and there are at least MIN_VALUES of them.
NaN beside finite values is the shape of a masked or undefined entry -- padding set to NaN, an
attribution for a token it does not cover (pasted inseq-team/inseq#268), a metric for a class with no
samples -- not a network gone NaN (tests/data/logs/nan_output_tensor_ok_k15.log: per-token scores
with the padding NaN). A single value (`tensor(nan)`, `array([ nan], dtype=float32)`) names nothing:
a loss printed under its name is metric_values.py's; a bare one is left alone. `...` (torch's and
NumPy's summary of a large tensor) holds no value and is skipped.

The dump is read from its opening line down its rows while they continue it (a row line starts with
blanks and `[`, or with the next row's `[`), to its closing bracket or the batch's end (a print is one
write: a live read sees it whole), at most MAX_ROWS lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_OPEN = re.compile(r"(?<![\w.])(?:tensor|array)\((?P<rows>\[+.*)$")
_ROW = re.compile(r"^\s*\[+.*$")
_VALUE = re.compile(r"(?<![\w.#])(?:[-+]?(?:nan|inf)|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|True|False)(?![\w.])")
MIN_VALUES = 8
"""Printed values, all NaN, before the dump counts: a row or two of a small output already holds this
many; fewer could be a tiny scratch tensor's placeholder."""
MAX_ROWS = 400
"""Row lines read below the opening one (a dump longer than this is judged on these)."""


def _values(text: str) -> list[str]:
    """The numbers of a row's text, before any `dtype=` / `device=` / `grad_fn=` suffix."""
    for cut in ("dtype=", "device=", "grad_fn=", "requires_grad="):
        k = text.find(cut)
        if k >= 0:
            text = text[:k]
    return [v.lower().lstrip("+-") for v in _VALUE.findall(text)]


def all_nan_dump(line: str, following: Sequence[str]) -> str | None:
    """The summary when `line` opens a printed tensor/array whose every value, down the rows that
    follow it, is NaN (at least MIN_VALUES of them); None otherwise."""
    m = _OPEN.search(line)
    if m is None:
        return None
    values = _values(m.group("rows"))
    closed = "])" in m.group("rows") or m.group("rows").rstrip().endswith(")")
    rows = 1
    for text in following[:MAX_ROWS]:
        if closed or any(v != "nan" for v in values):
            break
        if not _ROW.match(text):
            break
        values += _values(text)
        rows += 1
        closed = "])" in text
    if len(values) < MIN_VALUES or any(v != "nan" for v in values):
        return None
    what = "array" if m.group(0).startswith("array") else "tensor"
    return (f"a printed {what} holds nothing but NaN ({len(values)} values over {rows} row line(s)): "
            "the output or weights it shows went NaN")
