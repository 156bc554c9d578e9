"""The dashboard rendered into in-memory Consoles of fixed sizes; assertions on the text.

The sample state is the user's case (controller/view/demo.py); expected figures are
computed here from that state, not copied from the screen.
"""

from __future__ import annotations

import io
import statistics
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from controller.records import Finding, GpuSample, HostSample, RunState
from controller.view.dashboard import render
from controller.view.demo import sample_states
from controller.view.logtail import collapse_redraws
from controller.view.sparkline import chart

NOW = 1_795_000_000.0
SIZES = [(80, 24), (120, 40), (200, 60)]


def screen(states, selected=0, width=80, height=24) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, height=height, color_system=None, legacy_windows=False,
                      force_terminal=False)
    console.print(render(states, selected, now_s=NOW))
    return buf.getvalue().rstrip("\n").split("\n")


def expected_deficit(state: RunState) -> str:
    """Against the run's warm-window median: the samples after the first and 3 more, the
    first minute of them left out when their clock is the trainer's (issue 26.3)."""
    warm = [p for p in state.progress[4:] if p.source == "log" or p.time_s >= state.progress[0].time_s + 60]
    med = statistics.median(p.tok_per_s for p in warm)
    return f"{-(state.baseline_tok_per_s - med) / state.baseline_tok_per_s * 100:+.1f}%"


@pytest.mark.parametrize("width,height", SIZES)
def test_fits_and_shows_the_selected_run(width, height):
    states = sample_states(NOW)
    lines = screen(states, 2, width, height)
    assert len(lines) <= height
    assert max(cell_len(line) for line in lines) <= width
    text = "\n".join(lines)
    run = states[2]
    assert run.name in text and "running" in text
    assert "tok/s" in text and expected_deficit(run) in text        # deficit against 21.5K
    assert "21.5K" in text
    assert "GPU 6 idle" in text                                       # newest finding's text
    assert "step 3200" in text or "step 3200".replace(" ", "  ") in text
    # Fleet: a row per run, the selected one marked.
    for s in states:
        assert s.name[:20] in text
    marked = [line for line in lines if line.startswith("▶")]
    assert len(marked) == 1 and run.name[:20] in marked[0]


@pytest.mark.parametrize("width,height", SIZES)
def test_unreadable_gpu_field_is_na_for_that_gpu_only(width, height):
    states = sample_states(NOW, n_runs=1)
    run = states[0]
    run.gpus = [GpuSample(index=0, name="H200", util_pct=91.0, mem_used_mib=1000.0, mem_total_mib=2000.0, temp_c=50.0, power_w=300.0),
                GpuSample(index=1, name="H200", util_pct=93.0, mem_used_mib=1000.0, mem_total_mib=2000.0, temp_c=51.0, power_w=None)]
    lines = screen([run], 0, width, height)
    row0 = next(line for line in lines if line.startswith(" 0 "))
    row1 = next(line for line in lines if line.startswith(" 1 "))
    assert "300W" in row0 and "n/a" not in row0
    assert "n/a" in row1 and "51C" in row1 and "93%" in row1


def test_wide_terminal_uses_the_width():
    states = sample_states(NOW)
    narrow = screen(states, 2, 80, 40)
    wide = screen(states, 2, 200, 40)
    assert max(cell_len(x) for x in wide) > 150
    # The wide layout puts training beside the chart, so it needs fewer lines for it.
    assert any("│" in line and "loss" in line for line in wide)
    # ... and pairs GPU rows (8 GPUs in 4 lines), while 80 columns keep one GPU per line.
    assert any(line.startswith(" 0 ") and "│  1 " in line for line in wide)
    assert not any(line.startswith(" 0 ") and "│" in line for line in narrow)
    assert "https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w" in "\n".join(wide)
    assert "khjugi7w" in "\n".join(narrow)


def test_oom_run_shows_evidence_and_next_step():
    states = sample_states(NOW)
    lines = screen(states, 1, 120, 40)
    text = "\n".join(lines)
    oom = states[1].findings[0]
    assert oom.summary in text
    assert "torch.OutOfMemoryError" in text          # evidence line
    assert "gate it behind --compile-drafter" in text  # the hint
    assert "failed (exit 1)" in text


def test_findings_newest_first_and_coloured_by_severity():
    run = RunState(run_id="r1", state="running")
    run.findings = [
        Finding(kind="stale_log", severity="warning", summary="log stale for 300s", first_seen_s=NOW - 300),
        Finding(kind="oom", severity="critical", summary="CUDA OOM on GPU 2", first_seen_s=NOW - 10),
        Finding(kind="recompile", severity="info", summary="3 recompiles", first_seen_s=NOW - 100),
    ]
    text = "\n".join(screen([run], 0, 120, 40))
    assert text.index("CUDA OOM on GPU 2") < text.index("3 recompiles") < text.index("log stale")
    buf = io.StringIO()
    Console(file=buf, width=120, height=40, color_system="truecolor", force_terminal=True).print(render([run], now_s=NOW))
    coloured = buf.getvalue()
    oom_line = next(line for line in coloured.split("\n") if "CUDA OOM" in line)
    assert "\x1b[1;31m" in oom_line or "\x1b[31" in oom_line  # bold red for critical


def test_empty_and_unknown_state_renders_na_not_a_crash():
    assert "no runs" in "\n".join(screen([], 0, 80, 24))
    bare = RunState(run_id="mystery")
    text = "\n".join(screen([bare], 0, 80, 24))
    assert "mystery" in text and "n/a" in text and "no findings" in text
    host = HostSample(host="pve1", gpu_error="nvidia-smi: command not found")
    bare.host_sample = host
    assert "nvidia-smi: command not found" in "\n".join(screen([bare], 0, 120, 30))


def test_log_tail_collapses_redraws_and_strips_control_bytes():
    raw = ["Loading checkpoint shards:  10%|█         | 1/10 [00:01<00:09,  1.0s/it]",
           "Loading checkpoint shards:  50%|█████     | 5/10 [00:05<00:05,  1.0s/it]",
           "Loading checkpoint shards: 100%|██████████| 10/10 [00:10<00:00,  1.0s/it]",
           "[progress] step=20 loss=3.1", "[progress] step=40 loss=3.0",
           "epoch 1\r 20%|██  | 2/10\r 90%|█████████ | 9/10",
           "\x1b[31mred\x1b[0m text\x00 with NUL"]
    out = collapse_redraws(raw)
    assert out == ["Loading checkpoint shards: 100%|██████████| 10/10 [00:10<00:00,  1.0s/it]",
                   "[progress] step=20 loss=3.1", "[progress] step=40 loss=3.0",
                   " 90%|█████████ | 9/10", "red text with NUL"]
    run = RunState(run_id="r", log_tail=raw)
    text = "\n".join(screen([run], 0, 120, 40))
    assert " 50%|" not in text and "100%|" in text and "\x1b" not in text


def test_chart_marks_the_baseline_where_columns_stay_below_it():
    values = [100.0] * 10 + [300.0] * 10
    lines = chart(values, list(range(20)), width=20, rows=3, baseline=250.0)
    assert len(lines) == 3 and all(line.cell_len == 20 for line in lines)
    row_with_line = [line.plain for line in lines if "─" in line.plain]
    assert row_with_line, "the baseline row is drawn"
    # Low columns show the line; high columns pass through it.
    assert row_with_line[0][:10] == "─" * 10 and "─" not in row_with_line[0][10:]


def test_many_runs_keep_the_selected_visible_at_80x24():
    states = sample_states(NOW, n_runs=8)
    lines = screen(states, 7, 80, 24)
    assert len(lines) <= 24
    marked = [line for line in lines if line.startswith("▶")]
    assert marked and "sweep-lr7" in marked[0]
    assert any("more runs" in line for line in lines)


def test_demo_module_renders_sample_state():
    import subprocess
    out = subprocess.run([sys.executable, "-m", "controller.view.dashboard", "--width", "100", "--height", "30"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "train_eager_dynamiccopy" in out.stdout and "findings" in out.stdout


def test_dashboard_in_a_real_terminal_via_tmux():
    from tests.tmux_screen import TmuxScreen

    with TmuxScreen([sys.executable, "-m", "controller.view.dashboard"], width=80, height=24) as term:
        assert term.size() == (80, 24)
        screen_text = term.wait_for("findings", timeout_s=60)
        assert term.wait_exit(timeout_s=60) == 0
        lines = term.lines()
        assert "train_eager_dynamiccopy" in screen_text
        assert all(cell_len(line) <= 80 for line in lines)


def test_tmux_screen_helper_keys_and_exit_codes():
    from tests.tmux_screen import TmuxScreen

    reader = [sys.executable, "-c", "import sys; print('ready', flush=True); line = sys.stdin.readline(); "
              "print('got ' + line.strip(), flush=True); sys.exit(3 if line.strip() == 'q' else 0)"]
    with TmuxScreen(reader, width=40, height=10) as term:
        term.wait_for("ready", timeout_s=60)
        term.send_keys("q", "Enter")
        assert term.wait_exit(timeout_s=60) == 3
        assert "got q" in term.capture()                       # the last screen stays readable
    sleeper = [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(120)"]
    with TmuxScreen(sleeper, width=40, height=10) as term:
        term.wait_for("sleeping", timeout_s=60)
        assert term.exit_status() is None
        term.send_keys("C-c")
        assert term.wait_exit(timeout_s=60) == 130              # SIGINT: 128 + 2


def test_step_over_total_with_an_eta_from_the_recent_pace():
    """`step 220/300 · ETA …` when the run's --steps is known; the ETA is the steps left at
    the pace of the last samples (here 10 steps per 5 s: 80 steps left -> 40 s)."""
    from controller.records import ProgressSample
    from controller.view.training import eta_s, step_text

    prog = [ProgressSample(step=s, time_s=NOW - 110 + s / 2, tok_per_s=20_000.0) for s in range(10, 230, 10)]
    st = RunState(run_id="r", state="running", started_s=NOW - 200, progress=prog, total_steps=300)
    assert eta_s(st) == pytest.approx(40.0)
    assert step_text(st) == "220/300 · ETA 40s"
    assert any("step 220/300 · ETA 40s" in line for line in screen([st], width=80, height=24))
    assert step_text(RunState(run_id="r", progress=prog)) == "220"


def test_chart_has_a_y_axis_with_its_top_zero_and_the_baseline_value():
    values = [10_000.0] * 10 + [30_000.0] * 10
    lines = chart(values, list(range(20)), width=40, rows=4, baseline=21_500.0, axis=True)
    assert all(line.cell_len == 40 for line in lines)
    gutters = [line.plain[:7] for line in lines]
    assert gutters[0].strip().startswith("31.5K")             # the scale's top: max + 5%
    assert gutters[-1].strip() == "0┤"
    base = next(i for i, line in enumerate(lines) if "─" in line.plain)
    assert gutters[base].strip() == "21.5K┤"                   # the baseline's value on its own row
    screen_text = "\n".join(screen(sample_states(NOW), width=80, height=24))
    assert "21.5K┤" in screen_text
