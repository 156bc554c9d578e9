"""Progress lines of the world's trainers, as users posted them (tests/data/progress_lines/
index.json: each line verbatim with its source owner/repo#N): the parser takes from each the
figures a reader takes, and no other (issue 26.1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from controller.follow.logparse import LineParser

INDEX = Path(__file__).parent / "data" / "progress_lines" / "index.json"
ENTRIES = json.loads(INDEX.read_text(encoding="utf-8"))["lines"]
CHECKED = ("step", "loss", "tok_per_s", "step_time_s", "samples_per_s", "lr")


def test_the_corpus_is_real_and_wide():
    assert len(ENTRIES) >= 50
    assert len({e["source"] for e in ENTRIES}) >= 40          # formats from many trainers, not one repeated
    assert all("/" in e["source"] and "#" in e["source"] for e in ENTRIES)
    assert sum(e["expect"] is not None for e in ENTRIES) >= 40


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{i}-{e['source']}" for i, e in enumerate(ENTRIES)])
def test_each_line_gives_what_a_reader_takes(entry):
    sample = LineParser().parse(entry["line"]).progress
    expect = entry["expect"]
    if expect is None:
        assert sample is None, sample
        return
    assert sample is not None
    want = dict(expect)
    if "it_per_s" in want:
        want["step_time_s"] = 1.0 / want.pop("it_per_s")
    if want.get("step") == "counted":
        del want["step"]
    for key in CHECKED:
        got = getattr(sample, key)
        if key not in want:
            if key != "step":
                assert got is None, f"{key}={got} read, but the line does not say it"
            continue
        if want[key] == "nan":
            assert got is not None and math.isnan(got), key
        else:
            assert got == pytest.approx(want[key], rel=1e-9), key
