"""compare-runs prints a run's 95% interval as it is: an asymmetric one (-7.2% … +70.7%)
was written `±70.7%`, as if the run could be 70% slower (issue 26.5)."""

from __future__ import annotations

import json

from controller import compare
from controller.adopt.importers import load_path
from tests.test_compare import _cli


def _bimodal_run(path):
    """Half the samples a little below 1000 tok/s, half far above, one at 1000: the median
    sits at the low cluster's edge, so its bootstrap spread is lopsided (little room down,
    a lot up)."""
    lows, highs = [930.0 + i for i in range(12)], [1700.0 + i for i in range(12)]
    values = [v for pair in zip(lows, highs) for v in pair] + [1000.0]
    with path.open("w") as fh:
        for i, tok in enumerate(values, start=1):
            fh.write(json.dumps({"step": i, "time_s": 1_700_000_000.0 + i, "loss": 3.0,
                                 "tok_per_s": tok, "step_time_s": 1.0}) + "\n")
    return path


def test_an_asymmetric_interval_is_printed_with_both_ends(tmp_path):
    run = _bimodal_run(tmp_path / "bimodal.jsonl")
    cmp = compare.compare([load_path(str(run))], baseline_tok_per_s=1000.0, warmup_s=0, warmup_steps=0)
    r = cmp.runs[0]
    lo, hi = r.ci_pct
    assert lo < 0 < hi and hi > 3 * -lo, (lo, hi)            # the case: lopsided, and it includes 0
    assert r.verdict == f"within noise ({lo:+.1f}% … {hi:+.1f}%)"
    assert "±" not in r.verdict
    doc = json.loads(_cli("compare-runs", str(run), "--baseline-tok-s", "1000", "--warmup-s", "0",
                          "--warmup-steps", "0", "--json").stdout)
    printed = doc["runs"][0]
    assert printed["verdict"] == f"within noise ({printed['ci95_pct'][0]:+.1f}% … {printed['ci95_pct'][1]:+.1f}%)"
    table = _cli("compare-runs", str(run), "--baseline-tok-s", "1000", "--warmup-s", "0", "--warmup-steps", "0").stdout
    assert f"{lo:+.1f}%" in table and f"{hi:+.1f}%" in table and "±" not in table
