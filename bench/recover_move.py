"""Recovery elsewhere (issue 25, `[recover] targets`): kill -9 on target A -> resumed on B.

Two local targets (A: the playbook's workdir, B: wd-b, the one entry of recover.targets).
The real bundled trainer on CPU as in bench/recover.py, `dfctl watch RUN --recover` as its
own process; the checkout changes after the deploy, so the release is carried from A's
releases/<id> (tar stream) and the newest checkpoint too (cat stream, sha256 verified on B):
  * death -> action: the resume decided (the action row's time: before acting)
  * action -> launch on B: both carries, then the launch exec (the new run's started_s)
  * death -> first step: the resumed run's first metrics.jsonl record on B
Then the carrying alone: a CARRY_MIB file carried A -> B by ship/carry.py (cat into the
push, sha256 checked there), its time and this process's peak RSS before and after (the
stream is 1 MiB chunks: the peak must not grow by the file's size).
Figures: bench/results/recover_move.md, raw: bench/results/recover_move.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.recover import RECOVER, kill_once
from tests.recover_support import INTERVAL_S

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results"
REPEATS = 3
CARRY_MIB = 256


def _change_the_checkout(root: Path) -> None:
    with open(root / "trainer" / "__init__.py", "a") as fh:      # the release must come from A
        fh.write("# changed after the deploy\n")


def once(tmp: Path) -> dict:
    (tmp / "proj").mkdir()
    (tmp / "proj" / "b.toml").write_text('[target]\nkind = "local"\nworkdir = "wd-b"\n')
    k = kill_once(tmp, RECOVER + 'max_attempts = 2\ntargets = ["b.toml"]\n', after_deploy=_change_the_checkout)
    if k.resumed is None or k.first is None or k.started_s is None:
        raise RuntimeError(k.action["reason"])
    return {"death_to_action_s": k.action["time_s"] - k.died_s, "action_to_launch_s": k.started_s - k.action["time_s"],
            "death_to_first_step_s": k.first[1] - k.died_s, "startup_s": k.first[1] - k.started_s,
            "first_step": k.first[0], "checkpoint_step": int(k.checkpoint.name[5:13]),
            "checkpoint_bytes": k.checkpoint.stat().st_size, "on_b": k.resumed.workdir == str(k.root / "wd-b"),
            "release_carried": "carried from" in k.action["reason"]}


def carry_alone(tmp: Path) -> dict:
    sys.path.insert(0, str(PROJECT))
    from controller.ship.carry import carry
    from controller.ship.push import push_argv
    from controller.transport.local import LocalTransport

    src = tmp / "a" / "step-00000001.pt"
    src.parent.mkdir(parents=True)
    h = hashlib.sha256()
    with open(src, "wb") as fh:
        for _ in range(CARRY_MIB):
            block = os.urandom(1 << 20)
            h.update(block)
            fh.write(block)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    n = carry(LocalTransport(), ["cat", str(src)], LocalTransport(),
              push_argv(str(tmp / "b"), "moved-in/x/checkpoints", src.name, "file", sha256=h.hexdigest(), owner="-"),
              expect_bytes=CARRY_MIB << 20)
    took = time.monotonic() - t0
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"bytes": n, "seconds": took, "mib_per_s": n / (1 << 20) / took,
            "peak_rss_before_mib": peak_before / 1024, "peak_rss_after_mib": peak_after / 1024}


def main() -> int:
    rows = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory(prefix="dfctl-bench-move-") as tmp:
            rows.append(once(Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    with tempfile.TemporaryDirectory(prefix="dfctl-bench-carry-") as tmp:
        c = carry_alone(Path(tmp))
        print(json.dumps(c), flush=True)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()})"
    (RESULTS / "recover_move.json").write_text(json.dumps({"measured": stamp, "machine": machine,
                                                           "interval_s": INTERVAL_S, "runs": rows, "carry": c},
                                                          indent=1) + "\n")
    each = lambda key: ", ".join(f"{r[key]:.2f}" for r in rows)          # noqa: E731
    lines = [
        "# Recovery elsewhere: kill -9 on A -> resumed on B (bench/recover_move.py)", "",
        f"{stamp}, {machine}, shared with other jobs while measured. Two local targets (different workdirs); "
        f"the real trainer on CPU (tiny, --checkpoint-every 1), `dfctl watch --recover --interval {INTERVAL_S:g}` "
        f"as its own process, `[recover] targets = [\"b.toml\"]`; the checkout changed after the deploy, so the "
        f"release ({'carried from A every time' if all(r['release_carried'] for r in rows) else 'see the json'}) "
        f"and the checkpoint ({rows[0]['checkpoint_bytes']} bytes) are streamed A -> B; {REPEATS} kills.", "",
        "| | median | each |", "|---|---|---|",
        f"| death -> resume decided | {med('death_to_action_s'):.2f} s | {each('death_to_action_s')} |",
        f"| decided -> launched on B (release + checkpoint carried, launch exec) | {med('action_to_launch_s'):.2f} s | "
        f"{each('action_to_launch_s')} |",
        f"| death -> resumed run's first step on B | {med('death_to_first_step_s'):.2f} s | "
        f"{each('death_to_first_step_s')} |",
        f"| of which the resumed run's start-up | {med('startup_s'):.2f} s | {each('startup_s')} |", "",
        f"First step = checkpoint + 1 every time ({', '.join(str(r['first_step']) for r in rows)} after "
        f"{', '.join(str(r['checkpoint_step']) for r in rows)}); every resumed run on B: "
        f"{all(r['on_b'] for r in rows)}. The start-up is the trainer's own (python, torch, dataset, "
        "checkpoint load), not the move's: it varies with the load of the shared machine (bench/recover.py "
        "measured 5.45 s for a resume on the same target at a quieter moment).", "",
        f"The carrying alone: {CARRY_MIB} MiB A -> B (cat | the push, sha256 checked on B) in {c['seconds']:.2f} s "
        f"({c['mib_per_s']:.0f} MiB/s on one disk; over SSH the link's rate bounds it); this process's peak RSS "
        f"{c['peak_rss_before_mib']:.0f} MiB before, {c['peak_rss_after_mib']:.0f} MiB after (1 MiB chunks: "
        f"nothing of the file's size is held).",
    ]
    (RESULTS / "recover_move.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
