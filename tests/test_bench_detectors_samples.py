"""bench/detectors.py's count of a later held-out sample (issue 22): pasted logs of held-out
repositories drawn after the readers were written carry their index's `sample` date, and the
pasted tables count them apart as well as with the first held-out set. A real index file
and log in a temporary corpus go through the loader; the bench's script is run in a fresh
interpreter as the bench runs it."""

from __future__ import annotations

import json

from bench import detectors
from tests.corpus import corpus


def _held_out_repo() -> str:
    n = 0
    while not corpus.pasted_heldout(f"example/held{n}#1"):
        n += 1
    return f"example/held{n}"


def test_the_loader_keeps_an_entrys_sample_date(tmp_path, monkeypatch):
    repo = _held_out_repo()
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a-1.log").write_text("Epoch 1 loss 0.5\n")
    (tmp_path / "logs" / "b-1.log").write_text("Epoch 1 loss 0.5\n")
    (tmp_path / "index-zz.json").write_text(json.dumps({
        "a-1": {"expect": [], "framework": "pytorch", "source": f"{repo}#1", "sample": "2026-12-04"},
        "b-1": {"expect": [], "framework": "pytorch", "source": f"{repo}#2"}}))
    monkeypatch.setattr(corpus, "PASTED", tmp_path)
    got = {e.name: (e.heldout, e.sample) for e in corpus.pasted_entries()}
    assert got == {"a-1": (True, "2026-12-04"), "b-1": (True, "")}


def test_the_sample_table_counts_only_the_later_sample():
    counts = {"previous": {"rows": {"held-out/printed|label oom": [3, 5], "held-out@2026-12-04/printed|label oom": [1, 2],
                                    "held-out@2026-12-04/printed|family paddle": [1, 2]},
                           "fa": {"held-out@2026-12-04/printed": [0, 4]}},
              "new": {"rows": {"held-out/printed|label oom": [5, 5], "held-out@2026-12-04/printed|label oom": [2, 2]},
                      "fa": {"held-out@2026-12-04/printed": [1, 4]}}}
    lines = detectors.sample_table(counts)
    assert "| 2026-12-04, label oom | 1/2 (50%) | 2/2 (100%) |" in lines
    assert "| 2026-12-04, false alarms on healthy logs | 0/4 (0%) | 1/4 (25%) |" in lines
    assert not any("family" in line for line in lines)  # labels only: a family of a few logs would name them
    assert detectors.sample_table({"new": {"rows": {"held-out/printed|label oom": [5, 5]}, "fa": {}}}) == []


def test_the_bench_script_counts_a_sample_apart():
    """The fresh-interpreter script over this tree: the sample's slice exists exactly where the
    corpus has held-out entries with a sample date."""
    counts = detectors.corpus_counts(detectors.ROOT, ("pasted",))
    dated = [e for e in corpus.pasted_entries() if e.heldout and e.sample]
    slices = {k.split("|", 1)[0] for k in counts["rows"]} | set(counts["fa"])
    assert any(s.startswith("held-out@") for s in slices) == bool(dated)
    assert "held-out/printed" in slices
