"""bench/_assemble.py: `python -m bench` brings each results block of BENCHMARKS.md up to date
and loses no line written by hand (it used to write the file from the results files alone)."""

from __future__ import annotations

from pathlib import Path

from bench._assemble import assemble, begin_marker, end_marker


def _results(tmp: Path, **files: str) -> Path:
    d = tmp / "results"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / f"{name}.md").write_text(text)
    return d


def test_hand_sections_stay_blocks_are_replaced_and_new_results_appended(tmp_path):
    res = _results(tmp_path, SUMMARY="# Benchmarks\nsummary v2\n", deploy="# Deploy\nnew figures\n",
                   watch="# Watch\nfirst figures\n")
    doc = "\n\n---\n\n".join([
        f"{begin_marker('SUMMARY')}\n# Benchmarks\nsummary v1\n{end_marker('SUMMARY')}",
        f"{begin_marker('deploy')}\n## Deploy\nold figures\n{end_marker('deploy')}\n\n### Deploy, a device run\nby hand",
        "## Test budget\nwritten by hand, 703 s",
        f"{begin_marker('gone')}\n## Gone\nits results file was removed\n{end_marker('gone')}",
    ]) + "\n"
    out = assemble(doc, res)
    assert "summary v2" in out and "summary v1" not in out           # the summary's heading stays a title
    assert "# Benchmarks\nsummary v2" in out
    assert "## Deploy\nnew figures" in out and "old figures" not in out   # demoted one level, replaced
    assert "### Deploy, a device run\nby hand" in out                # hand text beside a block kept
    assert "## Test budget\nwritten by hand, 703 s" in out            # a hand section kept
    assert "its results file was removed" in out                     # no results file: old text kept
    assert out.rstrip().endswith(f"{begin_marker('watch')}\n## Watch\nfirst figures\n{end_marker('watch')}")
    assert assemble(out, res) == out                                 # a second run changes nothing


def test_the_repository_benchmarks_file_is_a_fixed_point():
    """What is committed is what `python -m bench._assemble` would write from the committed
    results (so a bench run changes only the figures it measured)."""
    root = Path(__file__).resolve().parents[1]
    doc = (root / "BENCHMARKS.md").read_text()
    assert assemble(doc, root / "bench" / "results") == doc, (
        "BENCHMARKS.md and bench/results/ disagree: text between a `<!-- from bench/results/X.md -->` "
        "marker and its end marker comes from bench/results/X.md (edit that file, then run "
        "`python -m bench._assemble`); hand-written text goes outside the markers")
