"""Figures for issue 7 from the files bench/gpu_watch_check.sh leaves in $OUT (gw.tgz).

    python -m bench.gpu_watch_report DIR     # DIR = the unpacked gw.tgz

Checks, for each `dfctl watch --once --json` taken between two direct nvidia-smi reads:
identity fields equal, memory.used within the span of the two direct reads (+/- 64 MiB),
utilization within the span (+/- 10 points; it is a sampled share). Then: findings on the
healthy run (want none), and the OOM run's delay from the OOM text to the finding.
Not run by `python -m bench` (no main()): it needs the GPU machine's files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from controller.probe.nvidia_smi import parse_gpu_csv


def _span(a: float | None, b: float | None) -> tuple[float, float] | None:
    vals = [v for v in (a, b) if v is not None]
    return (min(vals), max(vals)) if vals else None


def gpu_agreement(d: Path) -> list[dict]:
    rows = []
    for k in range(1, 100):
        once = d / f"once-{k}.json"
        if not once.exists():
            break
        doc = json.loads(once.read_text())
        watched = {g["index"]: g for g in doc["runs"][0]["gpus"]}
        before = {g.index: g for g in parse_gpu_csv((d / f"smi-before-{k}.csv").read_text())}
        after = {g.index: g for g in parse_gpu_csv((d / f"smi-after-{k}.csv").read_text())}
        for idx, w in sorted(watched.items()):
            b, a = before[idx], after[idx]
            mem = _span(b.mem_used_mib, a.mem_used_mib)
            util = _span(b.util_pct, a.util_pct)
            rows.append({
                "sample": k, "gpu": idx,
                "identity_equal": (w["uuid"], w["name"], w["mem_total_mib"]) == (b.uuid, b.name, b.mem_total_mib),
                "mem_watch_mib": w["mem_used_mib"], "mem_direct_mib": mem,
                "mem_ok": mem is not None and mem[0] - 64 <= w["mem_used_mib"] <= mem[1] + 64,
                "util_watch": w["util_pct"], "util_direct": util,
                "util_ok": util is not None and util[0] - 10 <= w["util_pct"] <= util[1] + 10,
                "users": w.get("users"),
            })
    return rows


def findings_of(jsonl: Path) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for line in jsonl.read_text().splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        for f in doc.get("findings", []):
            seen.setdefault((f["kind"], f["summary"]), f)
    return list(seen.values())


def report(argv: list[str]) -> int:
    d = Path(argv[0])
    rows = gpu_agreement(d)
    ok = all(r["identity_equal"] and r["mem_ok"] and r["util_ok"] for r in rows)
    for r in rows:
        print(json.dumps(r))
    print(f"GPU table agreement: {sum(r['mem_ok'] and r['util_ok'] and r['identity_equal'] for r in rows)}/{len(rows)} rows -> {'OK' if ok else 'MISMATCH'}")
    healthy = findings_of(d / "watch-healthy.jsonl")
    print(f"healthy run findings: {len(healthy)} {[(f['kind'], f['severity'], f['summary']) for f in healthy]}")
    oom = findings_of(d / "watch-oom.jsonl")
    t_text = None
    for line in (d / "harness.log").read_text().splitlines():
        if line.endswith("OOM text in log"):
            t_text = float(line[1:line.index("]")])
    for f in oom:
        delay = (f["first_seen_s"] - t_text) if (t_text and f.get("first_seen_s")) else None
        print(f"oom run finding: {f['kind']} {f['severity']} {f['summary']!r} delay_s={delay if delay is None else round(delay, 3)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(report(sys.argv[1:]))
