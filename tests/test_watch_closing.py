"""The lines `dfctl watch` ends with: how each run ended, its numbers, and what to do next."""

from controller.cli.watch_cmds import closing_lines
from controller.records import Finding, ProcessState, ProgressSample, RunState


def test_finished_run_summary():
    st = RunState(run_id="demo-20261129T000000Z", name="demo", state="finished", started_s=1000.0,
                  process=ProcessState(state="exited", exit_code=0),
                  progress=[ProgressSample(step=10, time_s=1010.0, tok_per_s=4000.0, loss=7.44),
                            ProgressSample(step=300, time_s=1104.0, tok_per_s=5000.0, loss=1.30)])
    lines = closing_lines([st])
    assert lines[0] == ("demo-20261129T000000Z: finished, exit 0; 300 steps in 1m44s; loss 7.44 -> 1.3; "
                        "median 4.5K tok/s (all steps 10-300, short run); no findings")
    assert "dfctl logs demo --tail 50" in lines[1] and "dfctl compare-runs demo" in lines[1]


def test_failed_run_names_the_worst_finding_and_its_hint():
    st = RunState(run_id="r-1", name="r", state="failed", process=ProcessState(state="exited", exit_code=1),
                  findings=[Finding("stale_log", "warning", "log silent"),
                            Finding("oom", "critical", "CUDA OOM on GPU 5", hint="lower --token-budget")])
    lines = closing_lines([st])
    assert lines[0] == "r-1: failed, exit 1; 2 finding(s), worst: oom: CUDA OOM on GPU 5"
    assert lines[1] == "  next: lower --token-budget"


def test_lines_left_after_the_dashboard_quits_fit_the_terminal():
    from controller.cli.watch_cmds import after_quit_lines

    long = Finding("oom", "critical", "CUDA OOM on GPU 5: tried to allocate 4.50 GiB " * 4,
                   hint="lower the batch/token budget or sequence length " * 3)
    st = RunState(run_id="r-20261201T000000Z", name="a-rather-long-run-name", state="failed", findings=[long],
                  process=ProcessState(state="exited", exit_code=1))
    for width in (40, 80, 120):
        lines = after_quit_lines([st], width)
        assert len(lines) == 2 and all(len(line) <= width for line in lines)
        assert lines[1].endswith("…") and lines[1].startswith("[")


def test_status_line_keeps_a_gpu_whose_utilization_cannot_be_read():
    """Issue 12.7: one [N/A] utilization dropped that GPU from the status line (GPU 2's
    figure was then shown in GPU 1's place); it shows as n/a in its own place."""
    from controller.cli.watch_cmds import status_line
    from controller.records import GpuSample

    st = RunState(run_id="r", name="r", state="running",
                  gpus=[GpuSample(index=0, util_pct=97.0), GpuSample(index=1, util_pct=None),
                        GpuSample(index=2, util_pct=40.0)])
    assert "gpu%=97,n/a,40" in status_line(st)
