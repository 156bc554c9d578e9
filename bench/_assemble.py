"""Writes BENCHMARKS.md: the targets summary (bench/results/SUMMARY.md) followed by every
bench/results/<area>.md, each as its own section. `python -m bench._assemble`."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["deploy", "watch", "gpu_watch", "detectors", "wandb", "dashboard", "trainer", "load", "rig"]


def main() -> None:
    res = ROOT / "bench" / "results"
    parts = [(res / "SUMMARY.md").read_text().rstrip()]
    names = ORDER + sorted(p.stem for p in res.glob("*.md") if p.stem not in ORDER + ["SUMMARY"])
    for name in names:
        text = (res / f"{name}.md").read_text().rstrip()
        # demote headings one level so each results file is one section here
        text = "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())
        parts.append(f"<!-- from bench/results/{name}.md -->\n{text}")
    (ROOT / "BENCHMARKS.md").write_text("\n\n---\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
