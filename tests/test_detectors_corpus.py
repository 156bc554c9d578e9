"""Every corpus log is a test case: the expected kinds are found (and the words the label
requires are in a summary), a healthy log yields no failure kind -- for the log as the
framework printed it and for each capture variant (tests/corpus/corpus.py; a pasted log
in the variants that apply to already-captured text). A held-out log's miss (the held-out
scenarios of the generated part, the held-out repositories of the pasted part) is an
expected failure: measured, never tuned on. The stream
path (lines in arbitrary chunks through TextScanner, small batches) finds what one
check-log read of the whole file finds. One scenario is also produced live, here.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from controller.follow.logparse import flush_carry, split_lines
from controller.judge import TextScanner
from tests.corpus.corpus import VARIANTS, entries, judge, scan_bytes, variants_of

ENTRIES = sorted(entries(), key=lambda e: e.name)
ROOT = Path(__file__).resolve().parents[1]


MADE = [e for e in ENTRIES if e.part != "pasted"]
PASTED = [e for e in ENTRIES if e.part == "pasted"]


def _read_pasted() -> dict[str, str]:
    """tests/corpus/pasted_read.txt: the non-held-out pasted logs that were read (name -> SHA-1
    prefix of the bytes read). The collectors keep committing: a log added or changed after the
    last reading is run like any other, but its miss is expected until someone reads it."""
    out = {}
    for line in (ROOT / "tests" / "corpus" / "pasted_read.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, digest = line.split()
            out[name] = digest
    return out


READ = _read_pasted()
PASTED_BY_NAME = {e.name: e for e in PASTED}


def _unread(entry) -> bool:
    import hashlib

    return entry.part == "pasted" and READ.get(entry.name) != hashlib.sha1(entry.path.read_bytes()).hexdigest()[:12]


def test_the_corpus_is_the_size_the_issue_asks_for():
    frameworks = {e.framework for e in MADE}
    healthy = [e for e in MADE if e.healthy]
    assert len(MADE) > 220, len(MADE)  # "well over 200" real logs, before the variants
    assert len(frameworks) >= 10, frameworks
    assert len(healthy) * 3 >= len(MADE)
    assert any(e.heldout for e in MADE) and any(not e.heldout for e in MADE)


def test_pasted_entries_are_well_formed():
    """The pasted part's labels are in the label set and its names are unique across both
    collectors' indexes (its size is a collection target, reported in BENCHMARKS.md); no log
    that was read is a held-out one."""
    from tests.corpus.corpus import LABELLED_KINDS, pasted_heldout

    names = [e.name for e in PASTED]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for e in PASTED:
        if not _unread(e):
            assert set(e.expect) <= set(LABELLED_KINDS), (e.name, e.expect)
        assert e.heldout == pasted_heldout(e.source)
    assert not any(pasted_heldout(PASTED_BY_NAME[n].source) for n in READ if n in PASTED_BY_NAME)  # none held out
    # the rule itself: by repository, case-insensitive, whatever the issue number
    assert pasted_heldout("Owner/Repo#1") == pasted_heldout("owner/repo#99")


CASES = [(e, v) for e in ENTRIES for v in ("orig", *variants_of(e))]


@pytest.mark.parametrize(("entry", "variant"), CASES, ids=[f"{e.name}-{v}" for e, v in CASES])
def test_corpus_log(entry, variant):
    data = entry.path.read_bytes()
    if variant != "orig":
        data = VARIANTS[variant](data.decode("utf-8", "replace")).encode()
    findings = scan_bytes(data)
    v = judge(entry, findings)
    if not entry.heldout and not v.ok and _unread(entry):
        # committed after the last reading: a test once read (tests/corpus/pasted_read.txt)
        pytest.xfail(f"pasted log not yet read: missing {v.missing}, false alarm {v.false_alarm}")
    if entry.heldout and not v.ok:
        # The held-out part is measured, never tuned on (tests/corpus/generate.py; the pasted
        # part by repository): its misses are reported in BENCHMARKS.md, not fixed by looking
        # at them -- the reason names the kinds only, never the log's text.
        pytest.xfail(f"held-out miss: missing {v.missing}, false alarm {v.false_alarm}, "
                     f"must missing {len(v.must_missing)}")
    assert not v.missing, (v, [f.summary for f in findings])
    assert not v.false_alarm, [(f.kind, f.summary, f.evidence[:2]) for f in findings]
    assert not v.must_missing, [f.summary for f in findings]
    for f in findings:
        assert f.line is not None and f.line >= 1 and f.evidence, f


def _stream(data: bytes, seed: int) -> list:
    """Bytes in random chunk sizes, lines fed in random groups, small batches."""
    rng = random.Random(seed)
    sc = TextScanner(now_s=0.0, batch_lines=64, overlap_lines=16)
    carry, i = b"", 0
    while i < len(data):
        n = rng.choice((1, 7, 100, 4096, 65536))
        lines, carry = split_lines(data[i:i + n], carry)
        i += n
        while lines:
            k = rng.randint(1, 40)
            sc.feed(lines[:k])
            lines = lines[k:]
    sc.feed(flush_carry(carry))
    sc.finish()
    return sc.all_findings()


STREAM_CASES = ([e for e in MADE if not e.healthy or "tempting" in e.name][::3]
                + [e for e in PASTED if not e.heldout and not _unread(e)][::3])  # (a held-out log's findings are never printed)


@pytest.mark.parametrize("entry", STREAM_CASES, ids=[e.name for e in STREAM_CASES])
def test_stream_path_finds_what_check_log_finds(entry):
    data = entry.path.read_bytes()
    whole = [(f.kind, f.summary, f.line) for f in scan_bytes(data)]
    assert [(f.kind, f.summary, f.line) for f in _stream(data, seed=len(data))] == whole


def test_crash_names_the_exception_and_launcher_death_names_rank_and_signal():
    by = {e.name: e for e in ENTRIES}
    f = scan_bytes(by["plain-backward-twice"].path.read_bytes())
    assert any(x.summary.startswith("RuntimeError: Trying to backward through the graph a second time")
               for x in f), [x.summary for x in f]
    f = scan_bytes(by["torchrun-segv"].path.read_bytes())
    assert any("local rank 1" in x.summary and "SIGSEGV" in x.summary for x in f), [x.summary for x in f]


def test_argparse_refusal_is_quoted():
    e = next(e for e in ENTRIES if e.name == "plain-argparse")
    (f,) = [x for x in scan_bytes(e.path.read_bytes()) if x.kind == "crash"]
    assert "error: unrecognized arguments: --stepz 300" in f.summary and f.evidence[0].startswith("usage:")


def test_live_bash_segfault_is_read_as_it_happens(tmp_path):
    """One scenario made here and now: a real segfault of a real torch script under bash."""
    prog = ROOT / "tests" / "corpus" / "programs" / "plain.py"
    out = subprocess.run(["bash", "-c", f"{sys.executable} {prog} segv --steps 25; echo exit=$?"],
                         capture_output=True, timeout=240, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    data = out.stdout + out.stderr
    assert b"exit=139" in data
    findings = scan_bytes(data)
    assert [f.kind for f in findings if f.kind == "crash"], data[-2000:]
    assert any("SIGSEGV" in f.summary for f in findings)


def test_every_cited_wording_names_repo_path_line_and_commit():
    """A cited fixture says where its wording is: repository, file, line and the commit read
    (or, where no snapshot could be read, says why there is no line)."""
    import json
    import re

    index = json.loads((ROOT / "tests" / "corpus" / "cited" / "index.json").read_text())
    assert index
    for name, e in index.items():
        cite = e["cite"]
        assert cite["repo"] and cite["path"] and cite["function"], name
        if cite["line"] is None:
            assert len(cite["why_no_line"]) > 20, name
            continue
        assert isinstance(cite["line"], int) and cite["line"] > 0, name
        assert re.fullmatch(r"[0-9a-f]{40}", cite["commit"]), name
    with_lines = [n for n, e in index.items() if e["cite"]["line"] is not None]
    assert len(with_lines) >= len(index) - 1, with_lines
