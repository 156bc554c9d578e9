"""Benchmark of the log-text path (controller/follow/logparse.py, controller/judge/, check-log).

Side by side in one run:
  1. `split_lines` over a realistic log (progress lines, wandb, tracebacks) and over one
     100 MB line without a newline, fed in 1 MiB reads: MB/s, and the largest carry held;
  2. `dfctl check-log` (a subprocess, the real entry point) on a 10 MB and a 100 MB log:
     wall time, MB/s and peak RSS -- memory must not grow with the file (target ratio ~1);
     beside it `grep -c -E` for the same failure words, the floor any text scan pays;
  3. one watch tick's text work: `scan_lines` + `LineParser` on 1,000 new lines (the
     per-tick cost the watch loop adds per run);
  4. check-log's read loop with the detectors before this rewrite (the controller/ tree at
     BASE_COMMIT), as the previous measurement left them (PREV_COMMIT) and now, over the
     same 100 MB log, each in a fresh interpreter, alternated: MB/s side by side;
  5. recall and false alarms on the corpus (tests/corpus/), per label and per framework,
     on the whole corpus and on its held-out part, for the logs as printed and for their
     capture variants -- for the old detectors and the new.
Figures go to bench/results/detectors.md. Run: `python -m bench detectors` (add
`--corpus-only` to skip the 100 MB part; `--pasted-only` for the pasted part's table;
`--pasted-rounds C1,C2,...,HEAD` for held-out recall of each commit's readers on today's
pasted part; both also count each later held-out sample (index entries' `sample` date) apart; `--loop-only` for the read loop against PREV_COMMIT, `--also C1,C2` to time more commits
in the same alternation).
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.follow.logparse import LineParser, flush_carry, split_lines  # noqa: E402
from controller.judge import scan_lines  # noqa: E402

SEED = ROOT / "tests" / "data" / "logs" / "seed_dflash_oom.log"
BASE_COMMIT = "42fd17d"
"""The last commit with the single-module detectors (before issue 14's rewrite)."""
PREV_COMMIT = "26e80e4"
"""The detectors package before issue 22's readers (cut-off tracebacks, the OOM family,
tables, glued deaths...): the read loop must stay within 1.2x of it. (The measurement
before, against 7b54e64, is in BENCHMARKS.md at 1c9a289.)"""
RESULTS = ROOT / "bench" / "results" / "detectors.md"
LOOP_ROUNDS = 4
"""Alternated rounds of the 100 MB read loop per reader: the machine is shared and its
load moves by the minute (two rounds gave new/previous 0.84 and, the same hour, 1.0 on
a 20 MB log), so best and median of four."""


def make_log(path: Path, size_bytes: int) -> None:
    """Progress lines at ~12K tok/s with the seed log's start-up and OOM end."""
    rng = random.Random(3)
    seed = SEED.read_text().splitlines()
    head, tail = seed[:30], seed[seed.index("Exception in thread Thread-7 (drafter_loop):"):]
    with open(path, "w") as fh:
        fh.write("\n".join(head) + "\n")
        step, written = 0, 0
        block = []
        while written < size_bytes:
            step += 1
            line = (f"[progress] step={step} loss={3.0 + rng.random():.4f} acc=0.41 tau=2.31 "
                    f"tok_per_s={rng.gauss(12400, 300):.1f} samples_per_s=12.30 step_time_s=0.812 "
                    f"data_wait_s=0.004 mem_alloc_gib=23.40 mem_peak_gib=25.10 lr=5.9e-04\n")
            if step % 500 == 0:
                line += "INFO eval error_rate=0.021 max_memory_allocated 74.9 GiB nan iterations: 0\n"
            block.append(line)
            written += len(line)
            if len(block) >= 4096:
                fh.write("".join(block))
                block = []
        fh.write("".join(block))
        fh.write("\n".join(tail) + "\n")


def bench_split(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    carry, n = b"", 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            lines, carry = split_lines(chunk, carry)
            n += len(lines)
    n += len(flush_carry(carry))
    return time.perf_counter() - t0, n


def bench_long_line(total_mib: int = 100) -> tuple[float, int]:
    chunk = b"x" * (1 << 20)
    carry, biggest = b"", 0
    t0 = time.perf_counter()
    for _ in range(total_mib):
        _, carry = split_lines(chunk, carry)
        biggest = max(biggest, len(carry))
    return time.perf_counter() - t0, biggest


def run_check_log(path: Path) -> tuple[float, int, int]:
    """(wall s, peak RSS KiB of the child, exit code)."""
    code = ("import resource, sys; from controller.cli import main\n"
            "try:\n    main(['check-log', sys.argv[1], '--baseline-tok-s', '21500', '--json'])\n"
            "except SystemExit as e:\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(e.code)\n")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = int(proc.stderr.strip().splitlines()[-1])
    return wall, rss, proc.returncode


def run_grep(path: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["grep", "-c", "-E", "out of memory|Watchdog caught|Traceback|Killed|nan", str(path)],
                   capture_output=True)
    return time.perf_counter() - t0


def bench_tick() -> float:
    lines = []
    rng = random.Random(5)
    for step in range(1000):
        lines.append(f"[progress] step={step} loss={rng.random() + 2:.4f} tok_per_s={rng.gauss(21500, 200):.1f} "
                     "samples_per_s=12.3 step_time_s=0.81")
    parser = LineParser()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        for line in lines:
            parser.parse(line)
        scan_lines(lines, first_line_no=1, now_s=0.0)
    return (time.perf_counter() - t0) / reps


def old_detectors():
    """controller/detectors.py as it was at BASE_COMMIT, as a module of its own."""
    import importlib.util

    src = subprocess.run(["git", "show", f"{BASE_COMMIT}:controller/detectors.py"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    tmp = Path(tempfile.mkdtemp()) / "old_detectors.py"
    tmp.write_text(src)
    spec = importlib.util.spec_from_file_location("old_detectors", tmp)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_detectors"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


_LOOP = """
import sys, time
sys.path.insert(0, sys.argv[1])
import os
# the tree as built (wings) or an older commit's flat one -- told by the tree's own files: an
# import that fails over would be answered by the editable install's finder (this checkout's
# wings), not by the older tree
if os.path.isdir(os.path.join(sys.argv[1], "controller", "judge")):
    from controller.judge import TextScanner
    from controller.follow.logparse import flush_carry, split_lines
else:
    from controller.detectors import TextScanner
    from controller.logparse import flush_carry, split_lines
t0, c0 = time.perf_counter(), time.process_time()
sc = TextScanner(now_s=0.0)
carry = b""
with open(sys.argv[2], "rb") as fh:
    while chunk := fh.read(1 << 20):
        lines, carry = split_lines(chunk, carry)
        sc.feed(lines)
sc.feed(flush_carry(carry))
sc.finish()
print(time.perf_counter() - t0, time.process_time() - c0, len(sc.all_findings()))
"""


def tree_at(commit: str, dest: Path) -> Path:
    """The controller/ package as it was at `commit`, extracted under `dest`."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "controller"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def scan_file_at(tree: Path, path: Path) -> tuple[float, float, int]:
    """check-log's read loop (split_lines + TextScanner) with `tree`'s controller, in a fresh
    interpreter (packages of different commits cannot share one process): (wall s, CPU s
    of the loop, findings). The CPU time is the steadier figure on a shared machine."""
    out = subprocess.run([sys.executable, "-c", _LOOP, str(tree), str(path)], capture_output=True, text=True,
                         check=True, cwd=tree)
    wall, cpu, n = out.stdout.split()
    return float(wall), float(cpu), int(n)


_CORPUS = """
import json, sys
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, sys.argv[1])
import os
if os.path.isdir(os.path.join(sys.argv[1], "controller", "judge")):  # (as in _LOOP: the tree's own layout)
    from controller.judge import TextScanner
else:
    from controller.detectors import TextScanner
from tests.corpus.corpus import VARIANTS, entries, judge, scan_bytes, variants_of
rows, fa, misses = {}, {}, {}
parts = sys.argv[3].split(",")
FAMILIES = {
    "hf / accelerate / llm fine-tuning": ("hf-trainer", "accelerate", "trl", "llama-factory", "axolotl", "unsloth",
                                          "sentence-transformers", "peft", "ms-swift", "torchtune", "openrlhf", "verl",
                                          "llama-recipes", "litgpt", "minimind", "nanogpt", "torchtitan", "composer"),
    "deepspeed / megatron / nemo / colossalai / apex": ("deepspeed", "megatron", "nemo", "colossalai", "apex",
                                                         "gpt-neox"),
    "pytorch / torchrun / nccl / libtorch": ("pytorch", "torchrun", "nccl", "libtorch", "rocm", "mps", "horovod",
                                             "torch-xla", "wandb"),
    "lightning": ("lightning",),
    "tensorflow / keras / jax": ("tensorflow", "keras", "jax", "openseq2seq", "mlx"),
    "paddle": ("paddle",),
    "vision (mm*, detectron2, yolo, timm, nnU-Net, ...)": (),
    "speech / translation (fairseq, espnet, icefall, speechbrain, ...)": ("fairseq", "espnet", "icefall", "speechbrain",
                                                                            "funasr", "opennmt", "yanmtt", "flashlight",
                                                                            "pytorch-kaldi", "deepspeech-pytorch",
                                                                            "coqui-tts", "styletts2", "rvc", "ddsp-svc",
                                                                            "allennlp", "bert4torch"),
    "inference / serving / ray (vllm, sglang)": ("vllm", "sglang", "ray", "bigdl"),
    "diffusion (kohya, diffusers, a1111, ldm)": ("kohya", "diffusers", "a1111", "ldm", "diffusion-pipe"),
}
VISION = ("mm", "yolo", "detectron", "detr", "nnunet", "timm", "insightface", "darknet", "monai", "openpcdet", "ultralytics",
          "basicsr", "openocr", "yolact")


def family(fw):
    for name, members in FAMILIES.items():
        if fw in members:
            return name
    if fw.startswith(VISION):
        return "vision (mm*, detectron2, yolo, timm, nnU-Net, ...)"
    return "other (caffe, mxnet, chainer, cntk, dgl, ...)"
for e in entries():
    if e.part not in parts:
        continue
    raw = e.path.read_bytes()
    for vname in ("orig", *variants_of(e)):
        fn = VARIANTS.get(vname)
        data = raw if fn is None else fn(raw.decode("utf-8", "replace")).encode()
        try:
            found = scan_bytes(data, scanner=TextScanner(now_s=0.0))
        except Exception:  # an older tree's readers that raise on a log find nothing in it (no crash of the table);
            if os.path.samefile(sys.argv[1], sys.argv[2]):   # this tree's readers must never raise on a log
                raise
            found = []
        v = judge(e, found)
        fw = ("family " + family(e.framework)) if e.part == "pasted" else ("fw " + e.framework)
        fresh = ("held-out@" + e.sample,) if e.heldout and e.sample else ()  # (a later sample, also counted apart)
        for sl in (("all",) + (("held-out",) if e.heldout else ()) + fresh):
            sv = sl + "/" + ("printed" if vname == "orig" else "variants")
            for k in e.expect:
                for group in ("label " + k, fw):
                    r = rows.setdefault(sv + "|" + group, [0, 0])
                    r[1] += 1
                    r[0] += k not in v.missing
            if e.healthy:
                r = fa.setdefault(sv, [0, 0])
                r[1] += 1
                r[0] += bool(v.false_alarm)
        if not v.ok and not (e.heldout and e.part == "pasted"):
            # (a held-out pasted log's misses are counted, never listed: nobody reads them)
            misses.setdefault(e.name + (" (held out)" if e.heldout else ""), []).append(vname + ": " + str(v))
print(json.dumps({"rows": rows, "fa": fa, "misses": misses}))
"""


MADE_PARTS = ("generated", "cited", "device")


def corpus_counts(tree: Path, parts: tuple[str, ...] = MADE_PARTS) -> dict:
    """Recall and false alarms of `tree`'s detectors on today's corpus, the given parts (a
    fresh interpreter with that tree's controller first on the path; the corpus and its
    judge from ROOT)."""
    import json

    out = subprocess.run([sys.executable, "-c", _CORPUS, str(tree), str(ROOT), ",".join(parts)], capture_output=True,
                         text=True, check=True, cwd=tree)
    return json.loads(out.stdout)


def corpus_table(trees: dict[str, Path], parts: tuple[str, ...] = MADE_PARTS) -> list[str]:
    """Recall per label and per framework, false alarms on healthy logs, per reader and slice."""
    from tests.corpus.corpus import VARIANTS, entries

    counts = {name: corpus_counts(tree, parts) for name, tree in trees.items()}
    ents = [e for e in entries() if e.part in parts]
    slices = ["all/printed", "all/variants", "held-out/printed", "held-out/variants"]
    groups = sorted({k.split("|", 1)[1] for c in counts.values() for k in c["rows"]})
    pasted = parts == ("pasted",)
    out = [f"Corpus, {'the pasted part' if pasted else 'the parts made here (generated, cited, device)'}: "
           f"{len(ents)} logs ({sum(e.heldout for e in ents)} held out, "
           f"{sum(e.healthy for e in ents)} healthy, {len({e.framework for e in ents})} frameworks/launchers), "
           + ("each also quoted and prefixed (the variants that apply to captured text)" if pasted else
              f"each also in {len(VARIANTS)} capture variants ({', '.join(VARIANTS)})") + ". Readers: "
           + ", ".join(f"{n} ({'this tree' if t == ROOT else 'controller/ at ' + t.name})" for n, t in trees.items())
           + ".", "",
           "| recall (found / expected) | " + " | ".join(f"{n} {s}" for n in trees for s in slices) + " |",
           "|---|" + "---|" * (len(trees) * len(slices))]

    def cell(pair):
        hit, tot = pair or (0, 0)
        return f"{hit}/{tot} ({100 * hit / tot:.0f}%)" if tot else "–"
    for g in groups:
        out.append(f"| {g} | " + " | ".join(cell(counts[n]["rows"].get(f"{s}|{g}")) for n in trees for s in slices)
                   + " |")
    out.append("| **false alarms on healthy logs** | "
               + " | ".join(cell(counts[n]["fa"].get(s)) for n in trees for s in slices) + " |")
    out += sample_table(counts)
    for n in list(trees)[1:]:
        out += ["", f"Misses of the {n} detectors (every one, log: variant: verdict):", ""]
        out += [f"- {name}: " + "; ".join(m[:3]) + (f" (+{len(m) - 3} more)" if len(m) > 3 else "")
                for name, m in sorted(counts[n]["misses"].items())] or ["- none"]
    return out


def samples_in(counts: dict[str, dict]) -> list[str]:
    """The later held-out samples (index entries' `sample` dates) that `counts` hold."""
    return sorted({k.split("/", 1)[0].split("@", 1)[1] for c in counts.values() for k in c["rows"]
                   if k.startswith("held-out@")})


def sample_table(counts: dict[str, dict]) -> list[str]:
    """Held-out recall as printed on each later sample alone (pasted logs of held-out
    repositories drawn after the readers were written, by a collector who wrote no rule):
    how the readers do on the world's newest text, apart from the first held-out set."""
    samples = samples_in(counts)
    if not samples:
        return []

    def cell(pair):
        hit, tot = pair or (0, 0)
        return f"{hit}/{tot} ({100 * hit / tot:.0f}%)" if tot else "–"
    out = ["", "Held out, each later sample alone (as printed):", "",
           "| sample | " + " | ".join(f"{n}" for n in counts) + " |", "|---|" + "---:|" * len(counts)]
    for s in samples:
        groups = sorted({k.split("|", 1)[1] for c in counts.values() for k in c["rows"]
                         if k.startswith(f"held-out@{s}/printed|label ")})
        for g in groups:
            out.append(f"| {s}, {g} | " + " | ".join(cell(c["rows"].get(f"held-out@{s}/printed|{g}"))
                                                     for c in counts.values()) + " |")
        out.append(f"| {s}, false alarms on healthy logs | "
                   + " | ".join(cell(c["fa"].get(f"held-out@{s}/printed")) for c in counts.values()) + " |")
    return out


def loop_only(also: list[str]) -> int:
    """The read loop alone, previous (PREV_COMMIT) vs new, alternated in fresh interpreters
    over the 100 MB log: the speed target of issue 22 (within 1.2x by CPU time). `also`:
    more commits run in the same alternation (`--also C1,C2`), so a change's own effect is
    measured side by side with the baseline, not across two runs on a shared machine."""
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.log"
        make_log(big, 100 << 20)
        trees = {"previous": tree_at(PREV_COMMIT, Path(tmp) / "prev")}
        trees.update({c: tree_at(c, Path(tmp) / c) for c in also})
        trees["new"] = ROOT
        runs = [(name, scan_file_at(tree, big)) for _ in range(LOOP_ROUNDS) for name, tree in trees.items()]
    cpu = {k: min(r[1] for name, r in runs if name == k) for k in trees}
    med = {k: statistics.median(r[1] for name, r in runs if name == k) for k in trees}
    print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.node()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"read loop, 100 MB, CPU s best of {LOOP_ROUNDS}: previous ({PREV_COMMIT}) {cpu['previous']:.2f}, new "
          f"{cpu['new']:.2f}: new/previous CPU time {cpu['new'] / cpu['previous']:.3f} (medians "
          f"{med['new'] / med['previous']:.3f}); "
          + "".join(f"new/{c} {cpu['new'] / cpu[c]:.3f} (medians {med['new'] / med[c]:.3f}); " for c in also)
          + "rounds: "
          + ", ".join(f"{name} {r[1]:.2f} s CPU ({r[0]:.2f} s wall, {r[2]} findings)" for name, r in runs))
    return 0


def pasted_rounds(commits: list[str]) -> list[str]:
    """Held-out recall as printed, per label, and false alarms of each commit's controller/ on
    TODAY's pasted part: one table of the rounds, every column over the same held-out logs
    (the split is by repository and later rounds added training-split logs only), so a
    column to the next is what a round's readers changed."""
    labels = ("crash", "hang", "nan", "oom")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {c: (ROOT if c == "HEAD" else tree_at(c, Path(tmp) / c)) for c in commits}
        counts = {c: corpus_counts(t, ("pasted",)) for c, t in trees.items()}

    def cell(pair):
        hit, tot = pair or (0, 0)
        return f"{hit}/{tot} ({100 * hit / tot:.0f}%)" if tot else "–"
    out = ["| held out, as printed | " + " | ".join(("this tree" if c == "HEAD" else c) for c in commits) + " |",
           "|---|" + "---:|" * len(commits)]
    for k in labels:
        out.append(f"| {k} | " + " | ".join(cell(counts[c]["rows"].get(f"held-out/printed|label {k}"))
                                           for c in commits) + " |")
    out.append("| false alarms, held-out healthy | " + " | ".join(cell(counts[c]["fa"].get("held-out/printed"))
                                                              for c in commits) + " |")
    out.append("| false alarms, every healthy log | " + " | ".join(cell(counts[c]["fa"].get("all/printed"))
                                                               for c in commits) + " |")
    return out + sample_table({("this tree" if c == "HEAD" else c): counts[c] for c in commits})


def main() -> int:
    if "--loop-only" in sys.argv:
        also = sys.argv[sys.argv.index("--also") + 1].split(",") if "--also" in sys.argv else []
        return loop_only(also)
    if "--pasted-rounds" in sys.argv:
        print("\n".join(pasted_rounds(sys.argv[sys.argv.index("--pasted-rounds") + 1].split(","))))
        return 0
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": tree_at(BASE_COMMIT, Path(tmp) / BASE_COMMIT),
                 "previous": tree_at(PREV_COMMIT, Path(tmp) / PREV_COMMIT), "new": ROOT}
        if "--pasted-only" in sys.argv:
            print("\n".join(corpus_table({"previous": trees["previous"], "new": ROOT}, ("pasted",))))
            return 0
        corpus = corpus_table(trees)
        if "--corpus-only" in sys.argv:
            print("\n".join(corpus))
            return 0
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "small.log", Path(tmp) / "big.log"
        make_log(small, 10 << 20)
        make_log(big, 100 << 20)
        s_small, s_big = small.stat().st_size, big.stat().st_size
        t_split, n_lines = bench_split(big)
        t_long, biggest = bench_long_line()
        w_small, rss_small, rc_small = run_check_log(small)
        w_big, rss_big, rc_big = run_check_log(big)
        g_big = run_grep(big)
        # alternate and keep each reader's best and median (LOOP_ROUNDS)
        trees = {"old": tree_at(BASE_COMMIT, Path(tmp) / "old"), "previous": tree_at(PREV_COMMIT, Path(tmp) / "prev"),
                 "new": ROOT}
        runs = [(name, scan_file_at(tree, big)) for _ in range(LOOP_ROUNDS) for name, tree in trees.items()]
        t_old, _, n_old = min(r for name, r in runs if name == "old")
        t_prev, _, n_prev = min(r for name, r in runs if name == "previous")
        t_new, _, n_new = min(r for name, r in runs if name == "new")
        med = {k: statistics.median(r[0] for name, r in runs if name == k) for k in trees}
        cpu = {k: min(r[1] for name, r in runs if name == k) for k in trees}
        alternated = ", ".join(f"{name} {r[0]:.1f} s (CPU {r[1]:.1f} s)" for name, r in runs)
    tick = bench_tick()
    mb = 1 << 20
    out.append("# Log-text path: split_lines, detectors, check-log")
    out.append("")
    out.append(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {platform.node()}, "
               f"{os.cpu_count()} cores, Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} "
               "(a shared machine: absolute times are inflated, ratios hold); one run, figures side by side.")
    out.append("")
    out.append("| measurement | figure |")
    out.append("|---|---|")
    out.append(f"| split_lines, realistic log ({s_big / mb:.0f} MB, {n_lines:,} lines, 1 MiB reads) | "
               f"{s_big / mb / t_split:.0f} MB/s |")
    out.append(f"| split_lines, one 100 MB line without newline | {100 / t_long:.0f} MB/s, largest carry "
               f"{biggest / 1024:.0f} KiB |")
    out.append(f"| check-log {s_small / mb:.0f} MB log | {w_small:.2f} s ({s_small / mb / w_small:.1f} MB/s), "
               f"peak RSS {rss_small / 1024:.0f} MiB, exit {rc_small} |")
    out.append(f"| check-log {s_big / mb:.0f} MB log | {w_big:.2f} s ({s_big / mb / w_big:.1f} MB/s), "
               f"peak RSS {rss_big / 1024:.0f} MiB, exit {rc_big} |")
    out.append(f"| peak RSS ratio big / small log | {rss_big / rss_small:.2f} (target ~1: bounded memory) |")
    out.append(f"| `grep -c -E` for failure words, {s_big / mb:.0f} MB | {g_big:.2f} s "
               f"(check-log / grep = {w_big / g_big:.0f}x) |")
    out.append(f"| one tick's text work, 1,000 new progress lines (parse + scan_lines) | {tick * 1000:.1f} ms |")
    out.append(f"| check-log read loop, {s_big / mb:.0f} MB, detectors at {BASE_COMMIT} (old) | {t_old:.1f} s "
               f"({s_big / mb / t_old:.1f} MB/s), {n_old} findings |")
    out.append(f"| same loop, same file, detectors at {PREV_COMMIT} (previous measurement) | {t_prev:.1f} s "
               f"({s_big / mb / t_prev:.1f} MB/s), {n_prev} findings |")
    out.append(f"| same loop, same file, detectors now (new) | {t_new:.1f} s "
               f"({s_big / mb / t_new:.1f} MB/s), {n_new} findings; new/old throughput {t_old / t_new:.2f}, "
               f"new/previous {t_prev / t_new:.2f} (best of {LOOP_ROUNDS}; of the medians: new/old "
               f"{med['old'] / med['new']:.2f}, new/previous {med['previous'] / med['new']:.2f}); "
               f"**by CPU time (best of {LOOP_ROUNDS}): old {cpu['old']:.1f} s, previous {cpu['previous']:.1f} s, "
               f"new {cpu['new']:.1f} s: new/old {cpu['old'] / cpu['new']:.2f}, new/previous "
               f"{cpu['previous'] / cpu['new']:.2f}** (each in a fresh interpreter, alternated: {alternated}) |")
    out.append("")
    out.append("check-log parses every line (progress, milestones, wandb) and runs the detectors; grep only "
               "counts matches, so the ratio is the price of typed results. Memory stays flat because the "
               "file is streamed in 1 MiB reads, lines are capped at 64 KiB and only the last 50,000 progress "
               "samples are kept.")
    out += [""] + corpus
    RESULTS.write_text("\n".join(out) + "\n")
    print("\n".join(out))
    return 0 if rc_small == 4 and rc_big == 4 else 1


if __name__ == "__main__":
    sys.exit(main())
