"""One run, one tok/s figure: the watch's closing line, check-log and compare-runs print the
same warm-window median (before: the closing line took every sample, warm-up included), and
each says which window it used."""

from __future__ import annotations

import json

from controller.cli.watch_cmds import closing_lines
from controller.importers import load_path, samples_from_table
from controller.records import ProcessState, RunState
from controller.throughput import fmt_tok_per_s
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
    from controller.logparse import LineParser

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

    from controller.dashboard import render

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
