"""One run, one tok/s figure: the watch's closing line, check-log and compare-runs print the
same warm-window median (before: the closing line took every sample, warm-up included), and
each says which window it used."""

from __future__ import annotations

import json

from controller.adopt.importers import load_path, samples_from_table
from controller.cli.watch_cmds import closing_lines
from controller.judge.throughput_window import fmt_tok_per_s
from controller.records import ProcessState, RunState
from tests.test_compare import _cli


def _log(path):
    lines = ["[milestone] first_step"]
    for step in range(10, 130, 10):   # four slow warm-up samples, then a rising plateau
        tok = 3000.0 if step <= 40 else 6000.0 + 250.0 * (step - 50) / 10
        lines.append(f"[progress] step={step} loss={5 - step / 200:.4f} tok_per_s={tok:.1f} step_time_s=0.8")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_closing_line_check_log_and_compare_runs_print_one_median(tmp_path):
    log = _log(tmp_path / "run.log")
    checked = json.loads(_cli("check-log", str(log), "--baseline-tok-s", "21500", "--json").stdout)["throughput"]
    compared = json.loads(_cli("compare-runs", str(log), "--json").stdout)["runs"][0]
    progress = samples_from_table(load_path(str(log)).progress)
    closing = closing_lines([RunState(run_id="r", state="finished", progress=progress,
                                      process=ProcessState(state="exited", exit_code=0))])[0]
    median = checked["tok_per_s"]["median"]
    assert compared["tok_per_s"]["median"] == median
    assert (checked["window"]["first_step"], checked["window"]["last_step"]) == (50, 120)
    assert (compared["window"]["first_step"], compared["window"]["last_step"]) == (50, 120)
    assert f"median {fmt_tok_per_s(median)} tok/s (warm window steps 50-120)" in closing
    all_samples = sorted(p.tok_per_s for p in progress)
    assert fmt_tok_per_s(all_samples[len(all_samples) // 2]) != fmt_tok_per_s(median)   # the old, warm-up-dragged figure
    human = _cli("check-log", str(log)).stdout
    assert f"median {fmt_tok_per_s(median)} tok/s" in human and "warm window steps 50-120" in human


def test_regression_finding_names_the_windows_its_figure_is_from(tmp_path):
    log = _log(tmp_path / "run.log")
    doc = json.loads(_cli("check-log", str(log), "--baseline-tok-s", "21500", "--json").stdout)
    f = next(f for f in doc["findings"] if f["kind"] == "regression")
    assert f["evidence"][0].startswith(f["summary"].split(",")[0] + " = median of the last 3 windows, steps ")


def _as_watched(log):
    """The run as `dfctl watch` holds it: each progress line parsed by the watch's parser and
    stamped with the tick that read it (the follower sets time_s = now for a log line), one
    line every 10 s -- so the first minute of lines shares the watch's clock, not the trainer's."""
    from controller.follow.logparse import LineParser

    parser, progress = LineParser(), []
    t0 = 1_795_000_000.0
    for line in log.read_text().splitlines():
        sample = parser.parse(line).progress
        if sample is not None:
            sample.time_s = t0 + 10.0 * len(progress)
            progress.append(sample)
    return RunState(run_id="r", name="r", state="finished", progress=progress, started_s=t0,
                    baseline_tok_per_s=21500.0, process=ProcessState(state="exited", exit_code=0))


def _figure(text, after="median "):
    import re

    m = re.search(re.escape(after) + r"([\d.]+[KM]?)\b", text)
    assert m, (after, text)
    return m.group(1)


def test_dashboard_closing_line_check_log_and_compare_runs_print_one_string(tmp_path):
    """Issue 26.3: one run showed `median 6.2K` in the dashboard and `5.1K` in its closing
    line. The four places a user reads the run's median, rendered from one run, print one
    string: the dashboard (a rolling median of 20 samples before), the watch's closing line
    (a warm window timed by when the watch read each line before), check-log and compare-runs."""
    import io

    from rich.console import Console

    from controller.view.dashboard import render

    log = _log(tmp_path / "run.log")
    st = _as_watched(log)
    buf = io.StringIO()
    Console(file=buf, width=120, height=40, color_system=None, force_terminal=False).print(
        render([st], 0, now_s=st.started_s + 200))
    dashboard = _figure(buf.getvalue())
    closing = _figure(closing_lines([st])[0])
    checked = _figure(_cli("check-log", str(log)).stdout)
    table = _cli("compare-runs", str(log), "--markdown").stdout
    compared = _figure(next(line for line in table.splitlines() if line.startswith("| tok/s median")),
                       "tok/s median | ")
    assert dashboard == closing == checked == compared, (dashboard, closing, checked, compared)
    doc = json.loads(_cli("check-log", str(log), "--json").stdout)["throughput"]
    assert checked == fmt_tok_per_s(doc["tok_per_s"]["median"])
    assert "warm window steps 50-120" in closing_lines([st])[0]


def test_a_watched_runs_default_warm_up_is_the_watch_configs():
    from controller.playbook import WatchConfig

    st, cfg = RunState(run_id="r"), WatchConfig()
    assert (st.warmup_s, st.warmup_steps) == (cfg.warmup_s, cfg.warmup_steps)


LONG_RUN_STEPS = 5000


def _long_log(path, steps=LONG_RUN_STEPS):
    """A run longer than the watch's 2,000-sample history whose throughput rises all along
    (4.0K tok/s early, 9.0K late): the median of its last 2,000 samples (8.0K) is not the
    whole run's (6.5K)."""
    lines = ["[milestone] first_step"]
    for step in range(1, steps + 1):
        lines.append(f"[progress] step={step} loss={5 - step / 2000:.4f} tok_per_s={4000.0 + step:.1f} step_time_s=0.8")
    path.write_text("\n".join(lines) + "\n")
    return path


def _followed(log):
    """The run as `dfctl watch` holds it after following the whole log: its lines parsed by
    the watch's parser, stamped with the tick that read them (10 lines a 1 s tick) and
    merged by add_progress -- the bounded history the follower keeps."""
    from controller.follow.logparse import LineParser
    from controller.watch.progress import add_progress

    parser = LineParser()
    t0 = 1_795_000_000.0
    st = RunState(run_id="r", name="r", state="finished", started_s=t0, baseline_tok_per_s=21500.0,
                  process=ProcessState(state="exited", exit_code=0))
    batch, last, tick = [], None, 0
    for line in log.read_text().splitlines():
        sample = parser.parse(line).progress
        if sample is not None:
            sample.time_s = t0 + tick
            batch.append(sample)
        if len(batch) == 10:
            _, _, last = add_progress(st, batch, t0 + tick, last)
            batch, tick = [], tick + 1
    add_progress(st, batch, t0 + tick, last)
    return st


def _four_figures(log, st):
    """The median as the dashboard, the closing line, check-log and compare-runs print it."""
    import io

    from rich.console import Console

    from controller.view.dashboard import render

    buf = io.StringIO()
    Console(file=buf, width=120, height=40, color_system=None, force_terminal=False).print(
        render([st], 0, now_s=(st.started_s or 0) + 1000))
    table = _cli("compare-runs", str(log), "--markdown").stdout
    return (_figure(buf.getvalue()), _figure(closing_lines([st])[0]), _figure(_cli("check-log", str(log)).stdout),
            _figure(next(line for line in table.splitlines() if line.startswith("| tok/s median")), "tok/s median | "))


def test_a_run_longer_than_the_watchs_history_prints_one_median_everywhere(tmp_path):
    """Issue 26.3, long runs: the watch keeps 2,000 samples as objects, and its dashboard and
    closing line took the median of those while check-log and compare-runs read the whole
    log (8.0K against 6.5K for this run). The samples that leave the history keep their
    figures (RunState.older_throughput), so all four print the whole run's figure."""
    from controller.watch.progress import PROGRESS_HISTORY_LEN

    log = _long_log(tmp_path / "run.log")
    st = _followed(log)
    assert len(st.progress) == PROGRESS_HISTORY_LEN and len(st.older_throughput) == LONG_RUN_STEPS - PROGRESS_HISTORY_LEN
    figures = _four_figures(log, st)
    whole = json.loads(_cli("check-log", str(log), "--json").stdout)["throughput"]
    assert whole["window"]["first_step"] == 5 and whole["samples_used"] == LONG_RUN_STEPS - 4
    assert figures == (fmt_tok_per_s(whole["tok_per_s"]["median"]),) * 4 == ("6.5K",) * 4, figures
    recent = sorted(p.tok_per_s for p in st.progress)
    assert fmt_tok_per_s(recent[len(recent) // 2]) == "8.0K"    # the figure of the last 2,000 alone
    assert f"median 6.5K tok/s (warm window steps 5-{LONG_RUN_STEPS})" in closing_lines([st])[0]
    assert st.older_throughput.nbytes() <= 49 * len(st.older_throughput)   # the bound throughput_columns states


def test_check_log_of_a_log_longer_than_its_sample_deque_takes_the_whole_logs_median(tmp_path):
    """check-log keeps the last 50,000 samples as objects and took the median of those,
    with no warm-up (a 60,000-step log then differed from compare-runs'); a scanner with a
    deque of 1,000 reads this log as one of 50,000 would, and gives check_log_file's figures."""
    from controller.cli.checklog_cmds import _feed, _report, check_log_file
    from controller.judge import TextScanner
    from controller.playbook import WatchConfig

    log = _long_log(tmp_path / "run.log")
    scanner = TextScanner(max_progress=1000)
    with open(log, "rb") as fh:
        _feed(scanner, fh, str(log))
    assert scanner.progress_truncated and len(scanner.older_throughput) == LONG_RUN_STEPS - 1000
    short = _report(scanner, str(log), WatchConfig(), None)["throughput"]
    whole = check_log_file(log)["throughput"]
    assert short == whole
    assert whole["window"]["first_step"] == 5 and fmt_tok_per_s(whole["tok_per_s"]["median"]) == "6.5K"


def test_a_restarted_watch_of_a_long_run_prints_the_historys_median(tmp_path):
    """A restarted watch takes back the last 2,000 samples as objects and every older row's
    figures from the history: its closing line prints what compare-runs reads from the
    same history."""
    from controller.cli.watch_cmds import PROGRESS_SEED_LEN, _HistoryHook
    from controller.records import ProgressSample
    from controller.store.history import append_progress
    from controller.store.runstore import RunRecord, RunStore
    from controller.watch import Watch

    store = RunStore()
    store.add_run(RunRecord(run_id="long", name="long", target_kind="local", target="local",
                            workdir=str(tmp_path), run_dir=str(tmp_path / "long"),
                            log_path=str(tmp_path / "long" / "train.log"), started_s=1.0,
                            playbook={"target": {"kind": "local"}}))
    samples = [ProgressSample(step=s, time_s=100.0 + s, tok_per_s=4000.0 + s, step_time_s=0.8, source="metrics")
               for s in range(1, LONG_RUN_STEPS + 1)]
    append_progress("long", samples)
    w = Watch(store.runs(), store, gpu=False, persistent=False)
    try:
        _HistoryHook.seed(w, keep=PROGRESS_SEED_LEN)
        st = w.states[0]
        assert len(st.progress) == PROGRESS_SEED_LEN and len(st.older_throughput) == LONG_RUN_STEPS - PROGRESS_SEED_LEN
        closing = closing_lines([st])[0]
    finally:
        w.close()
    compared = json.loads(_cli("compare-runs", "long", "--json").stdout)["runs"][0]
    window = compared["window"]
    assert f"median {fmt_tok_per_s(compared['tok_per_s']['median'])} tok/s " \
           f"(warm window steps {window['first_step']}-{window['last_step']})" in closing, (closing, compared)
    assert window["first_step"] == 61 and window["last_step"] == LONG_RUN_STEPS   # 60 s of warm-up on the trainer's clock


def _fold(batches):
    """The whole run as the history's reader folds it, written independently of the watch:
    one sample per step, each field its first known value (None and NaN are unknown), the
    source of the step's first sample; batches arrive in order, each sorted by step."""
    import dataclasses
    import math

    merged: dict = {}
    for batch in batches:
        for s in sorted(batch, key=lambda x: x.step):
            if s.step not in merged:
                merged[s.step] = dataclasses.replace(s)
                continue
            for f in dataclasses.fields(s):
                old = getattr(merged[s.step], f.name)
                if old is None or (isinstance(old, float) and not math.isfinite(old)):
                    setattr(merged[s.step], f.name, getattr(s, f.name))
    return list(merged.values())


def _sample_strategy():
    from hypothesis import strategies as st

    from controller.records import ProgressSample

    figure = st.one_of(st.none(), st.sampled_from([float("nan"), 0.0, -5.0]),
                       st.floats(min_value=1.0, max_value=1e5, allow_nan=False))
    return st.builds(ProgressSample, step=st.integers(0, 40),
                     time_s=st.one_of(st.none(), st.floats(min_value=0.0, max_value=300.0, allow_nan=False)),
                     tok_per_s=figure, step_time_s=figure, samples_per_s=st.one_of(st.none(), figure),
                     data_wait_s=st.one_of(st.none(), figure), source=st.sampled_from(["log", "metrics", "wandb"]))


def test_a_bounded_history_and_its_older_columns_sum_up_to_the_whole_run():
    """Whatever order and mix of sources the samples come in (late steps, one step from
    three sources, unknown figures), the watch's history of a few objects plus
    older_throughput gives throughput_summary's whole-run result exactly; so does
    check-log's scanner deque plus its older columns, by check-log's own rule (the first
    sample of a step wins)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import controller.watch.progress as progress_mod
    from controller.judge import TextScanner
    from controller.judge.throughput_window import throughput_summary

    cfg = RunState(run_id="cfg", warmup_s=30.0, warmup_steps=2)

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.lists(_sample_strategy(), max_size=8), max_size=12), st.integers(1, 6))
    def check(batches, keep):
        saved = progress_mod.PROGRESS_HISTORY_LEN
        progress_mod.PROGRESS_HISTORY_LEN = keep
        try:
            import copy

            run = RunState(run_id="r")
            last = None
            for batch in copy.deepcopy(batches):
                _, _, last = progress_mod.add_progress(run, batch, 0.0, last)
        finally:
            progress_mod.PROGRESS_HISTORY_LEN = saved
        assert len(run.progress) <= keep
        assert throughput_summary(run.progress, cfg, older=run.older_throughput) == \
            throughput_summary(_fold(batches), cfg)
        scanner = TextScanner(max_progress=keep)
        flat = [s for batch in copy.deepcopy(batches) for s in batch]
        for s in flat:   # what TextScanner.feed does with each parsed sample
            if len(scanner.progress) == scanner.progress.maxlen:
                scanner.older_throughput.add(scanner.progress[0])
            scanner.progress.append(s)
        assert throughput_summary(list(scanner.progress), cfg, older=scanner.older_throughput) == \
            throughput_summary(flat, cfg)

    check()


def test_columns_added_a_batch_at_a_time_are_the_columns_added_one_by_one():
    """TextScanner.feed hands the samples that leave its deque over once per feed
    (ThroughputColumns.add_many, whose rising-steps case appends whole columns): the rows,
    figures, NaNs and version are what `add` per sample gives, in any order of steps."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from controller.throughput_columns import ThroughputColumns

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.lists(_sample_strategy(), max_size=10), max_size=8), st.booleans())
    def check(batches, rising):
        if rising:   # the common case: each batch's steps past the last one's
            step = 0
            for batch in batches:
                for s in sorted(batch, key=lambda x: x.step):
                    step += 1 + s.step
                    s.step = step
                batch.sort(key=lambda x: x.step)
        one, many = ThroughputColumns(), ThroughputColumns()
        kept_one = [sum(one.add(s) for s in batch) for batch in batches]
        kept_many = [many.add_many(batch) for batch in batches]
        assert kept_many == kept_one and many.version == one.version
        a, b = one.arrays(), many.arrays()
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
        assert [c is None for c in many.figures.values()] == [c is None for c in one.figures.values()]

    check()


def test_a_known_step_after_a_late_older_one_fills_it_and_is_not_held_twice():
    """Found by the property above: step 1, then step 0 coming late, then step 1 again
    from another source with samples/s. add_progress compared with the last sample held
    (step 0) only, took step 1 for new and held it twice; the whole run's summary then
    read the first copy, without samples/s."""
    from controller.judge.throughput_window import throughput_summary
    from controller.records import ProgressSample
    from controller.watch.progress import add_progress

    run = RunState(run_id="r")
    _, _, last = add_progress(run, [ProgressSample(step=1), ProgressSample(step=1)], 0.0, None)
    fresh, filled, _ = add_progress(run, [ProgressSample(step=0), ProgressSample(step=1, samples_per_s=1.0)], 0.0, last)
    assert [p.step for p in run.progress] == [1, 0] and [p.step for p in fresh] == [0]
    assert run.progress[0].samples_per_s == 1.0 and [(p.step, p.samples_per_s) for p in filled] == [(1, 1.0)]
    assert throughput_summary(run.progress, None, older=run.older_throughput)["samples_per_s"] == 1.0
