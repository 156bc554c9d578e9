"""Printed tensors and arrays whose every value is NaN (controller/judge/tensor_dumps.py; helper
k15nan, issue 22): real torch output made here on CPU (tests/data/logs/programs/nan_output_tensor_k15.py)
and a training-split paste, each beside the healthy text that must stay quiet -- NaN beside finite
values (padding, an attribution), a single bare NaN, a dump with one finite value."""

from __future__ import annotations

from pathlib import Path

from controller.judge import ScanState, scan_lines
from controller.judge.tensor_dumps import MIN_VALUES, all_nan_dump
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


# usef-kh/fer#4: the user's own check, then the model's output tensor, cut by the paste after 24 rows
FER_DUMP = ["your data contains Nan", "tensor([[nan, nan, nan, nan, nan, nan, nan],"] + \
    ["        [nan, nan, nan, nan, nan, nan, nan],"] * 23
# inseq-team/inseq#268: an attention attribution (inference) with NaN for some tokens, finite for others
INSEQ_MIXED = ["> tensor([[9.5070e-01],", ">         [2.8751e-03],", ">         [7.9385e-04],",
               ">         [       nan],", ">         [       nan],", ">         [       nan],",
               ">         [       nan],", ">         [1.0483e-03],", ">         [       nan],"]


def test_a_real_all_nan_output_dump_is_nan_and_the_masked_one_is_not():
    (f,) = [f for f in _final(_read("nan_output_tensor_k15.log")) if f.kind == "nan"]
    assert "nothing but NaN" in f.summary and "168 values over 24 row" in f.summary, f.summary
    assert f.line == 6  # the dump's opening line, under `outputs contain NaN`
    assert _kinds(_final(_read("nan_output_tensor_ok_k15.log"))) == []


def test_a_pasted_dump_cut_in_its_rows_counts_and_a_mixed_one_stays_quiet():
    (f,) = [f for f in _final(FER_DUMP) if f.kind == "nan"]
    assert "168 values over 24 row" in f.summary, f.summary
    # a live read sees it too: a print is one write
    assert _kinds(scan_lines(FER_DUMP, now_s=0.0, state=ScanState())) == ["nan"]
    assert _kinds(_final(INSEQ_MIXED)) == []


def test_one_finite_value_or_too_few_values_keep_a_dump_quiet():
    rows = ["tensor([[nan, nan, nan, nan],", "        [nan, nan, nan, nan],", "        [nan, nan, nan, 0.5000]])"]
    assert all_nan_dump(rows[0], rows[1:]) is None
    assert all_nan_dump(rows[0], rows[1:2] + ["        [nan, nan, nan, nan]])"]) is not None
    small = ["tensor([[nan, nan],", "        [nan, nan]])"]
    assert 4 < MIN_VALUES and all_nan_dump(small[0], small[1:]) is None
    for bare in ("array([ nan], dtype=float32)", "tensor(nan, grad_fn=<AddBackward0>)", "tensor([nan, nan, nan])"):
        assert all_nan_dump(bare, []) is None, bare
    # the dump ends where its rows end: a finite tensor printed below is not read into it
    assert all_nan_dump(rows[0], ["        [nan, nan, nan, nan]])", "tensor([[0.1, 0.2, 0.3, 0.4]])"]) is not None


def test_numpy_and_summarised_dumps_and_suffixes():
    np_rows = ["array([[nan, nan, nan],", "       [nan, nan, nan],", "       [nan, nan, nan]], dtype=float32)"]
    said = all_nan_dump(np_rows[0], np_rows[1:])
    assert said is not None and said.startswith("a printed array") and "9 values" in said
    summarised = ["tensor([[nan, nan, nan,  ..., nan, nan, nan],", "        [nan, nan, nan,  ..., nan, nan, nan],",
                  "        ...,", "        [nan, nan, nan,  ..., nan, nan, nan]], device='cuda:0')"]
    # `...` holds no value; the row of `...` alone is not a row and ends the read
    assert all_nan_dump(summarised[0], summarised[1:]) is not None
    negative = ["tensor([[-inf, -inf, -inf, -inf],", "        [-inf, -inf, -inf, -inf]])"]  # an attention mask
    assert all_nan_dump(negative[0], negative[1:]) is None
