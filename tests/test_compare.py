"""compare-runs and import on runs made by the real trainer (tiny CPU config) and the real
wandb library's offline files; the wandb API path against the local stand-in server.

Two trainer runs are made once per module (in parallel) and shared: A logs every 2 steps,
B every 3 with another token budget (so a config key differs). The user's README case is
built from them: train_eager_restored (A), train_eager_dynamiccopy (B) and
train_eager_unpadded, a run directory whose log is A's real start-up followed by the torch
CUDA OOM traceback (no GPU here to raise it for real; wording from FIELD-NOTES), exit 1.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller import compare
from controller.adopt.importers import load_path, samples_from_table
from controller.judge.throughput_window import throughput_summary
from controller.playbook import WatchConfig
from controller.store import history
from controller.store.runstore import RunRecord, RunStore

ROOT = Path(__file__).resolve().parents[1]
DFCTL = [sys.executable, "-m", "controller"]
OOM_TAIL = [
    "Traceback (most recent call last):",
    '  File "/workspace/dflash/train.py", line 812, in <module>',
    "    main()",
    '  File "/workspace/dflash/train.py", line 431, in _copy_to_gpu',
    "    buf = torch.empty(shape, dtype=src.dtype, device=dev)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 5 has a total capacity of "
    "139.81 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has 138.59 GiB memory in "
    "use. Of the allocated memory 131.02 GiB is allocated by PyTorch, and 6.27 GiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
]


def _env(**extra):
    env = dict(os.environ)
    env.pop("WANDB_API_KEY", None)
    env.update({"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
                "PYTHONUNBUFFERED": "1", **extra})
    return env


STEPS = 18
"""Steps of each shared trainer run: B (a record every 3 steps) keeps 3 samples past the
default warm-up of 3 (a verdict needs 3, stats.MIN_VERDICT_SAMPLES); A evaluates 3 times."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real trainer runs in launch.py's layout (train.log, exit_code, metrics, wandb)."""
    base = tmp_path_factory.mktemp("trainer-runs")
    specs = {"A": ["--steps", str(STEPS), "--log-every", "2", "--eval-fraction", "0.2", "--eval-every", "6"],
             "B": ["--steps", str(STEPS), "--log-every", "3", "--token-budget", "768"]}
    procs = {}
    for i, (name, extra) in enumerate(specs.items()):
        run_dir = base / name
        run_dir.mkdir()
        log = open(run_dir / "train.log", "wb")
        cmd = [sys.executable, "-u", "-m", "trainer", "--config", "tiny", "--data", str(base / f"data{name}"),
               "--synthetic-samples", "600", "--run-dir", str(run_dir), "--seed", str(i), *extra]
        procs[name] = (subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=_env()), log, run_dir)
    out = {}
    for name, (proc, log, run_dir) in procs.items():
        code = proc.wait(timeout=300)
        log.close()
        assert code == 0, (run_dir / "train.log").read_text()[-3000:]
        (run_dir / "exit_code").write_text(f"{code}\n")
        out[name] = run_dir
    # The OOM-ended run: A's real start-up lines, then the OOM traceback; exit 1 (measured: a
    # CUDA OOM exits 1, not 137). Its wandb dir is A's, cut off before the first step.
    oom_dir = base / "train_eager_unpadded"
    oom_dir.mkdir()
    start_up = []
    for line in (out["A"] / "train.log").read_text().splitlines():
        if line.startswith("[milestone] first_step"):
            break
        start_up.append(line)
    (oom_dir / "train.log").write_text("\n".join(start_up + OOM_TAIL) + "\n")
    (oom_dir / "exit_code").write_text("1\n")
    out["OOM"] = oom_dir
    return out


def _cli(*args, env=None, timeout=180):
    """`dfctl ARGS` in a subprocess when `env` is given, else in-process (faster: no
    interpreter start-up), through the same main() that maps errors to exit codes."""
    if env is not None:
        return subprocess.run([*DFCTL, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    import contextlib

    from controller.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


# -- on real trainer runs -------------------------------------------------------------

def test_json_figures_match_the_metrics_and_the_detectors_window(runs):
    res = _cli("compare-runs", str(runs["A"]), str(runs["B"]), "--json", "--warmup-s", "0", "--warmup-steps", "2")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    a, b = doc["runs"]
    assert a["is_baseline"] and a["verdict"] == "baseline"
    assert a["end_state"] == b["end_state"] == "finished"
    # The same window and quantiles as the detectors' throughput_summary on the same samples.
    for row, run_dir in ((a, runs["A"]), (b, runs["B"])):
        ref = throughput_summary(samples_from_table(load_path(str(run_dir / "metrics.jsonl")).progress),
                                 WatchConfig(warmup_s=0, warmup_steps=2))
        assert row["tok_per_s"]["median"] == pytest.approx(ref["tok_per_s"]["median"])
        assert row["tok_per_s"]["p10"] == pytest.approx(ref["tok_per_s"]["p10"])
        assert row["tok_per_s"]["p90"] == pytest.approx(ref["tok_per_s"]["p90"])
        assert row["window"]["first_step"] == ref["window"]["first_step"]
        assert row["peak_mem_gib"] == pytest.approx(max(m["mem_peak_gib"] for m in _metrics(run_dir)))
        assert row["time_to_first_step_s"] is not None and row["time_to_first_step_s"] >= 0
    # Only differing config keys, noise keys (paths) left out.
    assert "args.log_every" in doc["config_keys"] and "args.token_budget" in doc["config_keys"]
    assert not any(k.endswith("run_dir") or k.endswith(".data") for k in doc["config_keys"])
    assert b["config_diff"]["args.log_every"] == 3 and a["config_diff"]["args.log_every"] == 2
    # Aligned steps lie in both runs' range; at a step both logged, the values are the logged ones.
    steps = doc["aligned_steps"]
    assert steps and all(3 <= s <= STEPS for s in steps)
    logged_a = {m["step"]: m["loss"] for m in _metrics(runs["A"])}
    logged_b = {m["step"]: m["loss"] for m in _metrics(runs["B"])}
    for s in steps:
        if s in logged_a:
            assert a["loss_at"][str(s)] == pytest.approx(logged_a[s])
        if s in logged_b:
            assert b["loss_at"][str(s)] == pytest.approx(logged_b[s])
    assert b["verdict"].startswith(("faster by", "slower by", "within noise"))
    assert b["ci95_pct"][0] <= b["delta_pct"] <= b["ci95_pct"][1]


def test_accept_len_and_held_out_eval_reach_compare_runs(runs, tmp_path):
    """The trainer's accept_len and eval_* keys (README) are parsed from metrics.jsonl and its
    progress line, kept in the history, and shown per run as the last known value."""
    rows_a = _metrics(runs["A"])
    evals = [m for m in rows_a if "eval_loss" in m]
    assert evals and all("accept_len" in m for m in rows_a)
    for source in ("metrics.jsonl", "train.log"):
        res = _cli("compare-runs", str(runs["A"] / source), str(runs["B"] / source), "--json")
        assert res.returncode == 0, res.stderr
        a, b = json.loads(res.stdout)["runs"]
        assert a["last"]["accept_len"] == pytest.approx(rows_a[-1]["accept_len"], rel=1e-3)
        if source == "metrics.jsonl":    # the held-out eval lives in metrics.jsonl
            assert a["last"]["eval_loss"] == pytest.approx(evals[-1]["eval_loss"])
            assert a["last"]["eval_accept_len"] == pytest.approx(evals[-1]["eval_accept_len"])
            # the decode-measured figure (trainer.eval_decode) travels the same way
            assert a["last"]["eval_accept_len_decode"] == pytest.approx(evals[-1]["eval_accept_len_decode"])
        assert b["last"]["eval_loss"] is None           # B ran without --eval-fraction
    table = _cli("compare-runs", str(runs["A"]), str(runs["B"]))
    assert "eval loss (last)" in table.stdout and "accept_len (last)" in table.stdout, table.stdout
    assert "eval accept_len decoded (last)" in table.stdout, table.stdout
    # through the registry's history too (an import writes it)
    assert _cli("import", str(runs["A"]), "--name", "evalrun", "--json").returncode == 0
    res = _cli("compare-runs", "evalrun", str(runs["B"]), "--json")
    assert json.loads(res.stdout)["runs"][0]["last"]["eval_loss"] == pytest.approx(evals[-1]["eval_loss"])


def test_offline_wandb_dir_log_file_and_run_dir_agree(runs):
    wandb_dir = next((runs["A"] / "wandb").glob("offline-run-*"))
    res = _cli("compare-runs", str(runs["A"]), str(wandb_dir), str(runs["A"] / "train.log"), "--csv",
               "--warmup-s", "0", "--warmup-steps", "1", "--baseline", str(wandb_dir))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["is_baseline"] for r in rows] == ["False", "True", "False"]      # --baseline RUN, order kept
    assert rows[0]["label"] == "A" and rows[2]["label"] == "A #2"             # same name, kept apart
    assert [r["kind"] for r in rows] == ["run-dir", "wandb-offline", "log"]
    medians = [float(r["tok_per_s_median"]) for r in rows]
    # metrics.jsonl, wandb history and the log's progress lines carry the same numbers
    # (the log prints tok/s rounded to 0.1).
    assert medians[1] == pytest.approx(medians[0], rel=1e-9)
    assert medians[2] == pytest.approx(medians[0], abs=0.1)
    assert all(r["end_state"] == "finished" for r in rows)
    assert rows[1]["label"] == wandb_dir.name.rsplit("-", 1)[-1]   # the wandb run id
    for r in (rows[0], rows[2]):
        assert r["verdict"].startswith("within noise"), r["verdict"]   # same run: not a difference


def test_plot_png_has_the_expected_size(runs, tmp_path):
    png = tmp_path / "cmp.png"
    res = _cli("compare-runs", str(runs["A"]), str(runs["B"]), str(runs["OOM"]), "--baseline-tok-s", "21500",
               "--plot", str(png))
    assert res.returncode == 0, res.stderr
    from PIL import Image

    with Image.open(png) as img:
        assert img.format == "PNG" and img.size == compare.PLOT_SIZE_PX
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50    # lines were drawn, not an empty canvas


def test_readme_case_imported_runs_by_name(runs, tmp_path):
    """The README example: three runs by name, one OOM-ended, against the 21.5K reference."""
    for name, key in (("train_eager_restored", "A"), ("train_eager_unpadded", "OOM"), ("train_eager_dynamiccopy", "B")):
        res = _cli("import", str(runs[key]), "--name", name, "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["name"] == name and doc["run_id"].startswith(name)
    store = RunStore()
    rec = store.get_run("train_eager_unpadded")
    assert rec.target_kind == "import" and rec.state == "failed" and rec.exit_code == 1
    assert any(f.kind == "oom" for f in store.findings(rec.run_id))
    restored = store.get_run("train_eager_restored")
    assert history.read_progress(restored.run_id).num_rows == len(_metrics(runs["A"]))
    assert history.read_wandb(restored.run_id).num_rows > 0
    store.close()

    names = ["train_eager_restored", "train_eager_unpadded", "train_eager_dynamiccopy"]
    md = _cli("compare-runs", *names, "--baseline-tok-s", "21500", "--markdown", "--warmup-s", "0")
    assert md.returncode == 0, md.stderr
    table = _cli("compare-runs", *names, "--baseline-tok-s", "21500", "--warmup-s", "0",
                 env=_env(COLUMNS="110"))
    assert table.returncode == 0, table.stderr
    lines = md.stdout.splitlines()
    assert lines[0] == "baseline: 21.5K tok/s (given)"
    assert lines[2] == "| | " + " | ".join(names) + " |"
    state = next(line for line in lines if line.startswith("| end state |"))
    cells = [c.strip() for c in state.strip("|").split("|")][1:]
    assert cells[0] == "finished" and cells[2] == "finished"
    assert cells[1].startswith("OOM (CUDA OOM") and "4.50 GiB" in cells[1]
    verdicts = next(line for line in lines if line.startswith("| vs baseline |"))
    assert "no throughput (OOM)" in verdicts
    assert "config args.token_budget" in md.stdout and "config args.log_every" in md.stdout
    # the CPU trainer's mem_peak_gib is ru_maxrss: never labelled GPU memory
    assert "peak GPU mem" not in md.stdout
    mem = next(line for line in lines if line.startswith("| peak mem (trainer: Σ its GPUs or CPU RSS) |"))
    assert [c.strip() for c in mem.strip("|").split("|")][1].endswith(" GiB CPU RSS")
    doc = json.loads(_cli("compare-runs", *names, "--json").stdout)
    assert doc["runs"][0]["peak_mem_measures"] == "cpu_peak_rss" and doc["runs"][0]["gpu_device_peak_mem_gib"] is None
    out = os.environ.get("DFCTL_WRITE_EXAMPLE")
    if out:  # refresh the README example: DFCTL_WRITE_EXAMPLE=path pytest -k readme_case
        imports = "".join(f"$ dfctl import runs/{n}/ --name {n}\n" for n in names)
        text = (imports + "$ dfctl compare-runs " + " ".join(names) + " --baseline-tok-s 21500 --warmup-s 0\n"
                + table.stdout + "\n$ dfctl compare-runs " + " ".join(names)
                + " --baseline-tok-s 21500 --warmup-s 0 --markdown\n" + md.stdout)
        Path(out).write_text("\n".join(line.rstrip() for line in text.splitlines()) + "\n")


# -- alignment, end states, registry runs (hand-made files, fast) ---------------------

def _write_metrics(path: Path, steps, tok=1000.0, t0=1_700_000_000.0, step_time=1.0, noise=0.01, seed=0):
    import numpy as np

    jitter = np.random.default_rng(seed).normal(0.0, noise, size=len(steps))
    with path.open("w") as fh:
        for i, s in enumerate(steps):
            fh.write(json.dumps({"step": s, "time_s": t0 + i * step_time, "loss": 5.0 - s / 1000,
                                 "tau": 1.0 + s / 1000, "tok_per_s": tok * (1 + float(jitter[i])),
                                 "step_time_s": step_time}) + "\n")


def test_alignment_with_different_log_intervals_and_start_steps(tmp_path):
    _write_metrics(tmp_path / "every10.jsonl", range(10, 1001, 10))
    _write_metrics(tmp_path / "resumed25.jsonl", range(525, 1501, 25))       # resumed at step 500
    cmp = compare.compare([load_path(str(tmp_path / "every10.jsonl")), load_path(str(tmp_path / "resumed25.jsonl"))],
                          warmup_s=0, warmup_steps=0)
    assert cmp.aligned_steps and all(525 <= s <= 1000 and s % 25 == 0 for s in cmp.aligned_steps)
    for r in cmp.runs:
        for s in cmp.aligned_steps:
            assert r.loss_at[s] == pytest.approx(5.0 - s / 1000)   # linear in step: exact
            assert r.tau_at[s] == pytest.approx(1.0 + s / 1000)
    # Runs that never overlap: the union's steps, each run n/a outside its own range.
    _write_metrics(tmp_path / "late.jsonl", range(2000, 2101, 10))
    cmp = compare.compare([load_path(str(tmp_path / "every10.jsonl")), load_path(str(tmp_path / "late.jsonl"))],
                          warmup_s=0, warmup_steps=0)
    assert any(cmp.runs[0].loss_at[s] is None for s in cmp.aligned_steps)
    assert any(cmp.runs[1].loss_at[s] is not None for s in cmp.aligned_steps)


def test_verdict_follows_the_spread(tmp_path):
    # 5% jitter: a 0.3% difference is noise, a 10% one is not.
    _write_metrics(tmp_path / "base.jsonl", range(1, 201), tok=1000.0, noise=0.05, seed=1)
    _write_metrics(tmp_path / "same.jsonl", range(1, 201), tok=1003.0, noise=0.05, seed=2)
    _write_metrics(tmp_path / "slow.jsonl", range(1, 201), tok=900.0, noise=0.05, seed=3)
    cmp = compare.compare([load_path(str(tmp_path / f"{n}.jsonl")) for n in ("base", "same", "slow")],
                          warmup_s=0, warmup_steps=0)
    base, same, slow = cmp.runs
    assert same.verdict.startswith("within noise")
    assert slow.verdict == f"slower by {-slow.delta_pct:.1f}%" and slow.delta_pct == pytest.approx(-10.0, abs=2.0)
    lo, hi = same.ci_pct
    assert lo < 0 < hi and hi - lo < 6                                   # an interval from the spread
    # Against a fixed number there is no baseline spread, only the run's own.
    cmp = compare.compare([load_path(str(tmp_path / "slow.jsonl"))], baseline_tok_per_s=1000.0,
                          warmup_s=0, warmup_steps=0)
    assert cmp.runs[0].verdict.startswith("slower by") and cmp.runs[0].ci_pct[1] < 0


def test_oom_log_file_gets_the_oom_end_state(runs, tmp_path):
    log = tmp_path / "unpadded.log"
    shutil.copy(runs["OOM"] / "train.log", log)
    loaded = load_path(str(log))
    assert loaded.end_state == "oom" and "4.50 GiB" in loaded.end_detail
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "train.log").write_text("[progress] step=2 loss=3.0 tok_per_s=100\n")
    (killed / "exit_code").write_text("137\n")
    assert load_path(str(killed)).end_state == "killed"
    running = tmp_path / "running"
    running.mkdir()
    (running / "train.log").write_text("[progress] step=2 loss=3.0 tok_per_s=100\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (running / "pid").write_text(f"{sleeper.pid}\n")
        assert load_path(str(running)).end_state == "running"        # launch.py's pid file, alive
    finally:
        sleeper.kill()
        sleeper.wait()
    assert load_path(str(running)).end_state == "unknown"            # gone without an exit code
    live = tmp_path / "live.log"
    live.write_text("[progress] step=2 loss=3.0 tok_per_s=100\nTraceback (most recent call last):\n"
                    '  File "x.py", line 1, in <module>\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp\n')
    assert load_path(str(live)).end_state == "crash"


def test_registry_run_from_watch_history_uses_playbook_args():
    store = RunStore()
    for name, args in (("r1", ["--token-budget", "49152", "--compile-drafter"]), ("r2", ["--token-budget", "32768"])):
        store.add_run(RunRecord(run_id=f"{name}-20261129T000000Z", name=name, target_kind="local", target="local",
                                playbook={"run": {"args": args}}, state="finished", exit_code=0, started_s=100.0))
        from controller.records import ProgressSample
        history.append_progress(f"{name}-20261129T000000Z", [
            ProgressSample(step=s, time_s=100.0 + 10 + s, tok_per_s=1000.0 + s, loss=3.0, source="log")
            for s in range(1, 21)])
    loaded = [compare.resolve(n, store) for n in ("r1", "r2")]
    cmp = compare.compare(loaded, warmup_s=0, warmup_steps=0)
    assert cmp.config_keys == ["args.compile_drafter", "args.token_budget"]
    assert cmp.runs[0].time_to_first_step_s == pytest.approx(11.0)
    assert cmp.runs[1].end_state == "finished"
    store.close()


def test_registry_runs_are_judged_with_their_own_playbook_warmup_unless_the_caller_says():
    """The watch judged a run by its playbook's watch.warmup_s / warmup_steps: compare-runs
    takes the same window (a run without them gets the defaults); --warmup-s/--warmup-steps
    override every run."""
    from controller.records import ProgressSample

    store = RunStore()
    for name, watch in (("own", {"warmup_s": 0.0, "warmup_steps": 10}), ("plain", None)):
        pb = {"run": {"args": []}, **({"watch": watch} if watch else {})}
        rid = f"{name}-20261201T000000Z"
        store.add_run(RunRecord(run_id=rid, name=name, target_kind="local", target="local", playbook=pb,
                                state="finished", exit_code=0, started_s=100.0))
        history.append_progress(rid, [ProgressSample(step=s, time_s=100.0 + s, tok_per_s=1000.0 + s, loss=3.0,
                                                     source="log") for s in range(1, 101)])
    cmp = compare.compare([compare.resolve(n, store) for n in ("own", "plain")])
    own, plain = cmp.runs
    assert (own.warmup_s, own.warmup_steps, own.window.first_step) == (0.0, 10, 12)     # 1 + 10 samples skipped
    assert (plain.warmup_s, plain.warmup_steps) == (compare.DEFAULT_WARMUP_S, compare.DEFAULT_WARMUP_STEPS)
    assert plain.window.first_step == 61                                                 # the first 60 s skipped
    assert own.tok_per_s["median"] == pytest.approx(1000.0 + (12 + 100) / 2)
    assert cmp.warmup_s is None and "own 11 samples/0 s" in compare.warmup_caption(cmp)
    doc = compare.to_jsonable(cmp)
    assert doc["warmup"] == {"seconds": None, "samples": None}
    assert doc["runs"][0]["warmup"] == {"seconds": 0.0, "samples": 10}
    # the caller's values apply to every run
    cmp = compare.compare([compare.resolve(n, store) for n in ("own", "plain")], warmup_s=0, warmup_steps=0)
    assert [r.window.first_step for r in cmp.runs] == [2, 2] and (cmp.warmup_s, cmp.warmup_steps) == (0, 0)
    assert compare.warmup_caption(cmp).startswith("warm window: skips the first 1 samples and the first 0 s")
    store.close()


# -- bad inputs -------------------------------------------------------------------------

def test_bad_inputs_exit_2_with_a_clear_message(tmp_path, runs):
    res = _cli("compare-runs", "no_such_run")
    assert res.returncode == 2 and "no_such_run" in res.stderr and "registry" in res.stderr
    bad = tmp_path / "run-broken.wandb"
    bad.write_bytes(b"not a wandb file at all" * 10)
    res = _cli("compare-runs", str(bad))
    assert res.returncode == 2 and str(bad) in res.stderr
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    res = _cli("compare-runs", str(empty))
    assert res.returncode == 2 and "not a run directory" in res.stderr
    res = _cli("compare-runs", str(runs["A"]), "--json", "--csv")
    assert res.returncode == 2 and "one of" in res.stderr
    res = _cli("compare-runs", str(runs["A"]), "--plot", str(tmp_path / "missing" / "x.png"))
    assert res.returncode == 2 and "does not exist" in res.stderr
    res = _cli("import", str(tmp_path / "nothing-here.log"))
    assert res.returncode == 2 and "nothing-here.log" in res.stderr


def test_wandb_paths_through_the_api_standin(monkeypatch):
    """The real wandb client against the local STAND-IN server (tests/wandb_standin/): in
    this process as tests/test_watch.py's online run (a child's start-up with wandb's import
    is ~2 s a call), but the wrong key in a child whose every byte of stderr (wandb-core's
    included) is searched for the keys."""
    from tests.wandb_standin.server import StandinWandbServer

    key = "0123456789abcdef0123456789abcdef01234567"
    with StandinWandbServer(key) as srv, monkeypatch.context() as m:
        m.setenv("WANDB_BASE_URL", srv.url)
        m.setenv("WANDB_API_KEY", key)
        m.delenv("WANDB_MODE", raising=False)
        ok = _cli("compare-runs", "ops/dfctl-test/done02", "ops/dfctl-test/live01", "--json", "--warmup-s", "0")
        assert ok.returncode == 0, ok.stderr
        doc = json.loads(ok.stdout)
        assert [r["kind"] for r in doc["runs"]] == ["wandb-api", "wandb-api"]
        assert doc["runs"][0]["tok_per_s"]["median"] is not None
        assert doc["runs"][1]["end_state"] == "running"
        imported = _cli("import", "ops/dfctl-test/done02", "--name", "from_api", "--json")
        assert imported.returncode == 0, imported.stderr
        assert json.loads(imported.stdout)["kind"] == "wandb-api" and json.loads(imported.stdout)["samples"] > 0
        missing = _cli("compare-runs", "ops/dfctl-test/nosuchrun")
        assert missing.returncode == 2 and "nosuchrun" in missing.stderr
        env = _env(WANDB_BASE_URL=srv.url, WANDB_API_KEY="f" * 40)
        env.pop("WANDB_MODE")
        wrong_key = _cli("compare-runs", "ops/dfctl-test/done02", env=env)
        assert wrong_key.returncode in (2, 3) and "done02" in wrong_key.stderr
        assert key not in wrong_key.stderr and "f" * 40 not in wrong_key.stderr
    # An unreachable server (exit 3) is tested in tests/test_wandb_api.py: its bounded
    # retries cost ~14 s, too much to repeat here. The imported run compares by name offline.
    by_name = _cli("compare-runs", "from_api", "--json", "--warmup-s", "0")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["runs"][0]["kind"] == "registry"


def test_registry_run_with_local_dir_and_watch_history(runs):
    """A deployed local run that `dfctl watch` recorded: numbers from the history, the end
    state and config from its run directory (exit_code file, wandb config)."""
    store = RunStore()
    rid = "watched-20261129T000000Z"
    store.add_run(RunRecord(run_id=rid, name="watched", target_kind="local", target="local", run_dir=str(runs["B"]),
                            log_path=str(runs["B"] / "train.log"), state="running", started_s=None,
                            playbook={"run": {"args": ["--log-every", "3"]}}))
    watched = samples_from_table(load_path(str(runs["B"] / "metrics.jsonl")).progress)[:3]   # watched in part
    history.append_progress(rid, watched)
    loaded = compare.resolve("watched", store)
    store.close()
    assert loaded.kind == "registry" and loaded.progress.num_rows == len(_metrics(runs["B"]))  # the fuller source
    assert loaded.end_state == "finished"                       # exit_code 0, though the registry says running
    assert loaded.config["args.token_budget"] == 768 and loaded.config["args.log_every"] == 3


def test_many_runs_render_one_row_per_run(tmp_path):
    from rich.cells import cell_len
    from rich.console import Console

    paths = []
    for i in range(6):
        paths.append(tmp_path / f"sweep{i}.jsonl")
        _write_metrics(paths[-1], range(1, 101), tok=1000.0 * (1 - 0.05 * i), noise=0.02, seed=i)
    cmp = compare.compare([load_path(str(p)) for p in paths], warmup_s=0, warmup_steps=0)
    assert not compare.columns_fit(cmp, 100) and compare.columns_fit(cmp, 200)
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(compare.render_table_by_run(cmp, 100))
    lines = buf.getvalue().splitlines()
    assert all(cell_len(line) <= 100 for line in lines)
    assert "left out for width" in buf.getvalue()                # and says so
    rows = [line for line in lines if line.startswith("│ sweep")]
    assert [r.split("│")[1].strip().split()[0] for r in rows] == [f"sweep{i}" for i in range(6)]
    assert "slower by" in rows[-1] and "20.7K" not in rows[-1]


def test_plot_format_follows_the_extension_or_is_refused(runs, tmp_path):
    """`--plot x.svg` wrote a PNG; now the extension names the format, an unknown one is
    refused (exit 2, one line naming it) before any run is read."""
    svg, pdf = tmp_path / "cmp.svg", tmp_path / "cmp.pdf"
    for path in (svg, pdf):
        res = _cli("compare-runs", str(runs["A"]), str(runs["B"]), "--baseline-tok-s", "21500", "--plot", str(path))
        assert res.returncode == 0, res.stderr
    assert svg.read_bytes().lstrip().startswith(b"<?xml") and b"<svg" in svg.read_bytes()[:2000]
    assert pdf.read_bytes().startswith(b"%PDF-")
    text = svg.read_text()
    assert "τ (accepted length per block)" in text and "warm-up left out" in text
    for ext in ("docx", ""):
        bad = tmp_path / (f"cmp.{ext}" if ext else "cmp")
        res = _cli("compare-runs", "no_such_run", "--plot", str(bad))
        assert res.returncode == 2 and not bad.exists()
        assert res.stderr.splitlines()[0].startswith(f"dfctl: error: --plot {bad}: ") and "svg" in res.stderr


def test_plot_shares_one_x_axis_shades_warmup_and_titles_the_verdicts(runs):
    from controller.compare.plot import build_figure

    cmp = compare.compare([load_path(str(runs["A"])), load_path(str(runs["B"]))], warmup_s=0, warmup_steps=2)
    for x_axis in ("time", "step"):
        fig = build_figure(cmp, x_axis)
        axes = fig.axes
        assert [a.get_title() for a in axes] == ["throughput (shaded: warm-up left out)", "loss",
                                                 "τ (accepted length per block)"]
        assert len({a.get_xlim() for a in axes}) == 1 and len({a.get_xlabel() for a in axes}) == 1
        assert all(a.patches for a in axes)                        # the warm-up span of each run
        assert len(axes[2].lines) == 2                             # τ of both runs
        b = cmp.runs[1]
        assert f"{b.label}: {b.verdict}" in fig._suptitle.get_text() and "95% CI" in fig._suptitle.get_text()
        if x_axis == "step":
            assert axes[0].get_xlabel() == "step"
            span = axes[0].patches[0]
            assert span.get_x() + span.get_width() == cmp.runs[0].window.first_step


def test_aligned_steps_skips_a_series_that_is_not_there():
    # RunSummary's loss/tau series may be None ("not kept"); aligned_steps unpacked each one
    # before asking, so any run without one of them raised TypeError (found by mypy).
    import numpy as np

    from controller.compare.stats import RunSummary, Window, aligned_steps

    def summary(label, loss):
        return RunSummary(label=label, source="", kind="metrics", end_state="finished", end_detail="",
                          exit_code=0, window=Window(None, None, 0, 0, False), tok_per_s={}, step_time_s=None,
                          samples_per_s=None, time_to_first_step_s=None, peak_mem_gib=None, loss_series=loss,
                          log_interval=10)

    steps = np.arange(10, 210, 10)
    with_loss = summary("a", (steps, np.ones(steps.size)))
    picks = aligned_steps([with_loss, summary("b", None)], points=4)
    assert picks == [50, 100, 150, 200]
