"""Writes BENCHMARKS.md: each bench/results/<area>.md between its own two markers, and every
other line of the file as it stands. `python -m bench._assemble`.

Why two markers: BENCHMARKS.md also holds sections written by hand (device runs, the test
budget, before/after rounds written by whoever measured them). The assembler used to write
the whole file from the results files, and `python -m bench` then dropped every one of those
sections (seen 2026-12-02, restored from git). Now only the text between
`<!-- from bench/results/NAME.md -->` and `<!-- end of bench/results/NAME.md -->` is replaced;
a results file with no block yet is appended as a new section at the end; a block whose
results file is gone keeps its text.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["SUMMARY", "deploy", "watch", "gpu_watch", "detectors", "wandb", "dashboard", "trainer", "load", "rig"]
QUOTED_BY_HAND = {"detectors-pasted", "detectors-pasted-round3", "detectors-pasted-round4", "detectors-pasted-round7",
                  "detectors-pasted-round9", "detectors-pasted-round12", "follow_vs_tail"}
"""Results files that a hand-written section of BENCHMARKS.md presents (their tables, with the
round's reading around them): not appended again as blocks of their own."""
SEPARATOR = "\n\n---\n\n"
BLOCK = re.compile(r"<!-- from bench/results/(?P<name>[\w.-]+)\.md -->\n(?P<body>.*?)\n<!-- end of bench/results/(?P=name)\.md -->",
                   re.S)


def begin_marker(name: str) -> str:
    return f"<!-- from bench/results/{name}.md -->"


def end_marker(name: str) -> str:
    return f"<!-- end of bench/results/{name}.md -->"


def block_text(results_dir: Path, name: str) -> str:
    """A results file as BENCHMARKS.md shows it: headings one level down (it is one section
    there), except the summary's, which heads the document."""
    text = (results_dir / f"{name}.md").read_text().rstrip()
    if name != "SUMMARY":
        text = "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())
    return f"{begin_marker(name)}\n{text}\n{end_marker(name)}"


def assemble(document: str, results_dir: Path) -> str:
    """`document` with every results block brought up to date and the missing ones appended."""
    names = ORDER + sorted(p.stem for p in results_dir.glob("*.md") if p.stem not in ORDER)
    present = [n for n in names if (results_dir / f"{n}.md").exists() and n not in QUOTED_BY_HAND]
    seen: set[str] = set()

    def fresh(m: re.Match) -> str:
        name = m.group("name")
        seen.add(name)
        return block_text(results_dir, name) if name in present else m.group(0)

    text = BLOCK.sub(fresh, document)
    new = [block_text(results_dir, n) for n in present if n not in seen]
    parts = [p for p in [text.rstrip()] + new if p]
    return SEPARATOR.join(parts) + "\n"


def main() -> None:
    path = ROOT / "BENCHMARKS.md"
    document = path.read_text() if path.exists() else ""
    path.write_text(assemble(document, ROOT / "bench" / "results"))


if __name__ == "__main__":
    main()
