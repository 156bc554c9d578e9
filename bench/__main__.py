"""Run every benchmark module in bench/ that defines main(), in name order.

`python -m bench` runs them all; `python -m bench deploy watch` runs only those named.
Each module owns its set-up and writes bench/results/<name>.md; a failing one is reported
and the others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path

# Run only when named: they need another machine or a long time.
NOT_BY_DEFAULT = {
    "trainer": "needs a GPU: run `bash bench/trainer_device.sh` on a GPU machine",
    "load": "takes 10 minutes: `python -m bench load`",
    "follow_vs_tail": "takes ~16 minutes (30 runs of 5 cases): `python -m bench.follow_vs_tail`",
}


def discover() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)])
                  if not m.name.startswith("_") and not m.ispkg)


def run(names: list[str]) -> int:
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        entry = getattr(module, "main", None)
        if not callable(entry):
            continue
        print(f"== bench.{name}", flush=True)
        t0 = time.monotonic()
        try:
            rc = entry()
        except SystemExit as exc:
            rc = exc.code
        except Exception:  # noqa: BLE001 - one broken bench must not hide the others' figures
            traceback.print_exc()
            rc = 1
        print(f"== bench.{name}: {'ok' if not rc else f'FAILED ({rc})'} in {time.monotonic() - t0:.1f} s", flush=True)
        if rc:
            failed.append(name)
    import bench._assemble
    bench._assemble.main()   # BENCHMARKS.md from the results files just written
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    wanted = sys.argv[1:]
    if not wanted:
        wanted = [n for n in discover() if n not in NOT_BY_DEFAULT]
        for name, why in NOT_BY_DEFAULT.items():
            print(f"bench: skipping {name} ({why})", file=sys.stderr)
    unknown = sorted(set(wanted) - set(discover()))
    if unknown:
        print(f"bench: no such benchmark: {', '.join(unknown)} (have: {', '.join(discover())})", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(wanted))
