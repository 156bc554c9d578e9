"""State detectors (evaluate) on hand-built RunStates, as the watch loop would fill them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from controller.judge import detect_regression, evaluate, throughput_summary, verdict_exit_code
from controller.playbook import WatchConfig
from controller.records import (
    Finding,
    GpuSample,
    HostSample,
    LogStatus,
    ProcessState,
    ProgressSample,
    RunState,
)

T0 = 1_764_400_000.0
CFG = WatchConfig()  # stale_log_s 120, hang_factor 10, hang_min_s 300, warmup 60 s / 3 steps, 15% x 3 windows


def state(**kw) -> RunState:
    base = dict(run_id="r1", started_s=T0, process=ProcessState(state="running", pid=4242, cpu_pct=50.0),
                log=LogStatus(path="/ws/runs/r1/train.log", size_bytes=4096))
    base.update(kw)
    return RunState(**base)


def gpus(*utils: float) -> list[GpuSample]:
    return [GpuSample(index=i, util_pct=u) for i, u in enumerate(utils)]


def samples(n: int, tok: float | list[float], t_start: float = T0 + 100, dt: float = 10.0, step0: int = 10,
            source: str = "metrics", **extra) -> list[ProgressSample]:
    toks = tok if isinstance(tok, list) else [tok] * n
    return [ProgressSample(step=step0 + 10 * i, time_s=t_start + dt * i, tok_per_s=toks[i], source=source, **extra)
            for i in range(n)]


def kinds(findings) -> list[str]:
    return sorted(f.kind for f in findings)


def by_kind(findings, kind) -> Finding:
    (f,) = [f for f in findings if f.kind == kind]
    return f


# ---------------------------------------------------------------------------------------
# stale_log
# ---------------------------------------------------------------------------------------

def test_stale_log_while_metrics_advance():
    # the seeds' case: log stuck after start-up lines, metrics.jsonl/wandb keep moving
    growth = T0 + 60
    s = state(last_log_growth_s=growth, progress=samples(30, 21500.0, t_start=growth + 30), gpus=gpus(97, 98))
    now = growth + 400
    f = by_kind(evaluate(s, CFG, now), "stale_log")
    assert f.severity == "warning"
    assert "PYTHONUNBUFFERED=1" in f.hint and "block-buffered" in f.hint
    assert "metrics advance" in f.summary
    assert any("400 s" in e for e in f.evidence)
    # the same condition a tick later is the same finding (stable key)
    assert by_kind(evaluate(s, CFG, now + 10), "stale_log").key == f.key


def test_no_stale_log_when_the_log_grows():
    s = state(last_log_growth_s=T0 + 395, progress=samples(30, 21500.0, source="log"), gpus=gpus(97, 98))
    assert "stale_log" not in kinds(evaluate(s, CFG, T0 + 400))


def test_stale_log_from_busy_gpus_mentions_a_possible_nccl_spin():
    s = state(last_log_growth_s=T0 + 10, gpus=gpus(100, 100))
    f = by_kind(evaluate(s, CFG, T0 + 300), "stale_log")
    assert "GPUs are busy" in f.summary and "NCCL" in f.hint


@pytest.mark.parametrize("why", ["idle_no_metrics", "exited", "log_samples_only", "under_threshold"])
def test_no_stale_log(why):
    s = state(last_log_growth_s=T0 + 10, gpus=gpus(0, 0))
    now = T0 + 300
    if why == "exited":
        s = state(last_log_growth_s=T0 + 10, gpus=gpus(99), process=ProcessState(state="exited", exit_code=0))
    elif why == "log_samples_only":
        s.progress = samples(5, 21500.0, t_start=T0 + 200, source="log")
    elif why == "under_threshold":
        s = state(last_log_growth_s=T0 + 10, gpus=gpus(99))
        now = T0 + 100
    assert "stale_log" not in kinds(evaluate(s, CFG, now))


# ---------------------------------------------------------------------------------------
# hang
# ---------------------------------------------------------------------------------------

def test_hang_needs_idle_gpus_and_k_times_the_step_interval():
    prog = samples(10, 21500.0, t_start=T0 + 100, dt=60.0)  # one sample a minute
    last = prog[-1].time_s
    s = state(progress=prog, last_progress_s=last, last_log_growth_s=last, gpus=gpus(0, 1, 0))
    # 10 x 60 s = 600 s beats hang_min_s 300: at 400 s quiet it is not a hang yet
    assert "hang" not in kinds(evaluate(s, CFG, last + 400))
    f = by_kind(evaluate(s, CFG, last + 700), "hang")
    assert f.severity == "critical" and f"step {prog[-1].step}" in f.summary
    assert "600 s" in f.evidence[0] and "py-spy dump --pid 4242" in f.hint
    # busy GPUs: not a hang (whatever else it is)
    s.gpus = gpus(0, 95, 0)
    assert "hang" not in kinds(evaluate(s, CFG, last + 700))


def test_hang_uses_hang_min_s_for_fast_steps():
    prog = samples(10, 21500.0, dt=1.0)
    last = prog[-1].time_s
    s = state(progress=prog, last_progress_s=last, last_log_growth_s=last, gpus=gpus(0))
    assert "hang" not in kinds(evaluate(s, CFG, last + 250))
    assert "hang" in kinds(evaluate(s, CFG, last + 350))


def test_hang_without_gpus_uses_process_cpu():
    prog = samples(5, 100.0, dt=1.0)
    last = prog[-1].time_s
    idle = state(progress=prog, last_progress_s=last, process=ProcessState(state="running", pid=7, cpu_pct=0.3))
    busy = state(progress=prog, last_progress_s=last, process=ProcessState(state="running", pid=7, cpu_pct=99.0))
    assert "hang" in kinds(evaluate(idle, CFG, last + 400))
    assert "hang" not in kinds(evaluate(busy, CFG, last + 400))


# ---------------------------------------------------------------------------------------
# regression
# ---------------------------------------------------------------------------------------

def test_regression_with_the_right_deficit():
    cfg = dataclasses.replace(CFG, baseline_tok_per_s=21500.0)
    s = state(progress=samples(4, 5000.0) + samples(20, 12400.0, t_start=T0 + 140, step0=50))
    f = by_kind(evaluate(s, cfg, T0 + 400), "regression")
    assert f.summary == "12.4K tok/s, 42% below the 21.5K baseline"
    assert f.severity == "warning" and len([e for e in f.evidence if e.startswith("window")]) == 3
    assert verdict_exit_code([f]) == 5


def test_no_regression_during_warmup():
    cfg = dataclasses.replace(CFG, baseline_tok_per_s=21500.0)
    # slow first samples (compile, allocator growth) and then at speed
    warm_then_fast = samples(4, [3000.0, 6000.0, 9000.0, 15000.0]) + samples(20, 21400.0, t_start=T0 + 140, step0=50)
    assert "regression" not in kinds(evaluate(state(progress=warm_then_fast), cfg, T0 + 400))
    # only warm-up so far (within warmup_s of the first step): no verdict at all, however slow
    only_warmup = samples(12, 4000.0, dt=5.0)
    assert "regression" not in kinds(evaluate(state(progress=only_warmup), cfg, T0 + 160))
    assert detect_regression(only_warmup, cfg, 21500.0) is None


def test_regression_keeps_its_summary_while_the_deficit_holds():
    """The registry de-duplicates on kind + summary: a jittering median must not make a
    new finding every tick, but a much worse deficit must."""
    cfg = dataclasses.replace(CFG, baseline_tok_per_s=21500.0)
    s = state(progress=samples(4, 5000.0) + samples(20, 12400.0, t_start=T0 + 140, step0=50))
    s.findings = [Finding(kind="regression", severity="warning", summary="12.6K tok/s, 41% below the 21.5K baseline")]
    f = by_kind(evaluate(s, cfg, T0 + 400), "regression")
    assert f.summary == "12.6K tok/s, 41% below the 21.5K baseline"
    assert any("12.4K" in e for e in f.evidence)  # the live numbers
    s.findings = [Finding(kind="regression", severity="warning", summary="18.1K tok/s, 16% below the 21.5K baseline")]
    assert by_kind(evaluate(s, cfg, T0 + 400), "regression").summary == "12.4K tok/s, 42% below the 21.5K baseline"


def test_regression_needs_every_window_below():
    cfg = dataclasses.replace(CFG, baseline_tok_per_s=21500.0)
    prog = samples(4, 5000.0) + samples(10, 12400.0, t_start=T0 + 140, step0=50) \
        + samples(5, 21000.0, t_start=T0 + 240, step0=150)
    assert "regression" not in kinds(evaluate(state(progress=prog), cfg, T0 + 400))


def test_regression_baseline_from_state_and_none_without_one():
    prog = samples(4, 5000.0) + samples(20, 12400.0, t_start=T0 + 140, step0=50)
    assert "regression" not in kinds(evaluate(state(progress=prog), CFG, T0 + 400))
    f = by_kind(evaluate(state(progress=prog, baseline_tok_per_s=16500.0), CFG, T0 + 400), "regression")
    assert f.summary == "12.4K tok/s, 25% below the 16.5K baseline"
    # 12.7% below 14.2K is inside the 15% threshold
    assert "regression" not in kinds(evaluate(state(progress=prog, baseline_tok_per_s=14200.0), CFG, T0 + 400))


def test_regression_hints_at_input_bound_runs():
    cfg = dataclasses.replace(CFG, baseline_tok_per_s=21500.0)
    prog = samples(24, 12400.0, dt=10.0, data_wait_s=0.4, step_time_s=0.8)
    prog = [dataclasses.replace(p, time_s=T0 + 100 + 10 * i) for i, p in enumerate(prog)]
    f = detect_regression(prog, cfg, 21500.0)
    assert f is not None and f.hint.startswith("input-bound") and any("50% of step time" in e for e in f.evidence)


def test_throughput_summary_warm_window_stats():
    prog = samples(4, 1000.0) + samples(20, [20000.0 + 100 * i for i in range(20)], t_start=T0 + 200, step0=50)
    prog += [prog[-1]]  # duplicate step from another source is counted once
    t = throughput_summary(prog, CFG, baseline_tok_per_s=21500.0)
    assert t["warm"] and t["samples_used"] == 20 and t["samples_total"] == 24
    assert t["tok_per_s"]["median"] == pytest.approx(20950.0)
    assert t["tok_per_s"]["p10"] == pytest.approx(20190.0) and t["tok_per_s"]["p90"] == pytest.approx(21710.0)
    assert t["window"]["first_step"] == 50 and t["deficit_pct"] == pytest.approx((1 - 20950 / 21500) * 100)
    short = throughput_summary(samples(2, 9000.0), CFG)
    assert short["warm"] is False and short["samples_used"] == 2 and short["deficit_pct"] is None


# ---------------------------------------------------------------------------------------
# gpu_idle, startup_stall
# ---------------------------------------------------------------------------------------

def test_some_expected_gpus_idle():
    cfg = dataclasses.replace(CFG, gpus_expected=8)
    s = state(progress=samples(3, 1.0), gpus=gpus(99, 98, 97, 99, 96, 0, 0, 2))
    f = by_kind(evaluate(s, cfg, T0 + 200), "gpu_idle")
    assert f.summary == "3 of 8 expected GPUs idle (GPU 5, 6, 7)"
    s.gpus = gpus(99, 98, 97, 99, 96, 91, 90, 92)
    assert "gpu_idle" not in kinds(evaluate(s, cfg, T0 + 200))


def test_all_gpus_idle_only_after_startup():
    s = state(gpus=gpus(0, 0, 0))
    assert "gpu_idle" not in kinds(evaluate(s, CFG, T0 + 100))  # loading weights
    s.milestones["first_step"] = T0 + 50
    assert by_kind(evaluate(s, CFG, T0 + 100), "gpu_idle").summary == "all 3 GPUs idle while the process lives"


def test_partial_idle_without_an_expected_count():
    s = state(progress=samples(3, 1.0), gpus=gpus(99, 0))
    assert by_kind(evaluate(s, CFG, T0 + 200), "gpu_idle").summary == "GPU 1 idle while 1 other(s) work"


def test_startup_stall_by_deadline():
    s = state(log_tail=["Loading 5 target models...", "  Target 0 on cuda:0..."])
    assert "startup_stall" not in kinds(evaluate(s, CFG, T0 + 500))
    f = by_kind(evaluate(s, CFG, T0 + 700), "startup_stall")
    assert f.summary == "dataset_loaded not reached 600 s after launch" and "Target 0" in f.evidence[-1]
    s.milestones["dataset_loaded"] = T0 + 95
    stalls = [f for f in evaluate(s, CFG, T0 + 1900) if f.kind == "startup_stall"]
    assert [f.summary for f in stalls] == ["first_step not reached 1800 s after launch"]
    assert "dataset_loaded at +95 s" in stalls[0].evidence[0]
    s.progress = samples(1, 100.0)
    assert "startup_stall" not in kinds(evaluate(s, CFG, T0 + 1900))


# ---------------------------------------------------------------------------------------
# how the process ended
# ---------------------------------------------------------------------------------------

def ended(code, *, oom_at_launch=None, oom_now=None, findings=(), st="exited") -> RunState:
    return state(process=ProcessState(state=st, pid=4242, exit_code=code), oom_kill_at_launch=oom_at_launch,
                 host_sample=HostSample(host="pve1", oom_kill_count=oom_now), findings=list(findings),
                 log_tail=["Step 400: 12400 tok/s"])


def test_exit_137_with_oom_kill_counter_up_is_certain():
    f = by_kind(evaluate(ended(137, oom_at_launch=0, oom_now=1), CFG, T0 + 500), "oom")
    assert f.summary == "killed by the kernel OOM killer (exit 137; oom_kill 0 -> 1)" and f.severity == "critical"


@pytest.mark.parametrize("before,after", [(2, 2), (None, None), (0, None)])
def test_exit_137_without_counter_is_likely(before, after):
    f = by_kind(evaluate(ended(137, oom_at_launch=before, oom_now=after), CFG, T0 + 500), "oom")
    assert f.summary == "killed by SIGKILL (exit 137), OOM likely"


def test_other_exit_codes():
    assert by_kind(evaluate(ended(1), CFG, T0), "crash").summary == "process exited with code 1"
    assert by_kind(evaluate(ended(139), CFG, T0), "crash").summary == "process exited with code 139 (SIGSEGV)"
    term = by_kind(evaluate(ended(143), CFG, T0), "crash")
    assert term.severity == "warning" and "SIGTERM" in term.summary
    assert evaluate(ended(0), CFG, T0) == []
    text = Finding(kind="oom", severity="critical", summary="CUDA OOM on GPU 5")
    assert [f for f in evaluate(ended(1, findings=[text]), CFG, T0) if f.kind in ("crash", "oom")] == []


def test_process_vanished_without_exit_code():
    f = by_kind(evaluate(ended(None), CFG, T0), "crash")
    assert f.summary == "process vanished: no exit code recorded"
    # a zombie leader without a code is as dead: the agent reads exit_code after the process
    # tree, so the wrapper's last write was done (kill -9 of the whole group, pid 1 slow to reap)
    z = by_kind(evaluate(ended(None, st="zombie"), CFG, T0), "crash")
    assert z.summary == "process vanished: no exit code recorded" and z.severity == "critical"


def test_nan_loss_from_metrics():
    prog = samples(3, 21000.0) + [ProgressSample(step=99, time_s=T0 + 200, loss=math.nan, source="metrics")]
    assert "nan" in kinds(evaluate(state(progress=prog, gpus=gpus(99)), CFG, T0 + 210))


def test_bursty_gpus_are_not_idle_until_idle_for_the_window():
    """utilization.gpu is one sample's share: a healthy 1 target + 1 drafter pipeline on 2x H200
    read 0% on one GPU in single samples (bench/gpu_watch_check.sh). Only a GPU with no busy
    sample for gpu_idle_s counts as idle."""
    cfg = dataclasses.replace(CFG, gpus_expected=2, gpu_idle_s=30.0)
    s = state(progress=samples(3, 1.0), gpus=gpus(0, 100))
    s.gpus_seen_since_s = T0 + 100
    s.gpu_busy_seen_s = {0: T0 + 150, 1: T0 + 160}
    assert "gpu_idle" not in kinds(evaluate(s, cfg, T0 + 160))   # 0% now, busy 10 s ago
    assert "gpu_idle" not in kinds(evaluate(s, cfg, T0 + 179))   # 29 s without a busy sample
    f = by_kind(evaluate(s, cfg, T0 + 181), "gpu_idle")          # 31 s: idle for the window
    assert f.summary == "1 of 2 expected GPUs idle (GPU 0)"


def test_gpu_idle_waits_for_a_full_window_of_readings():
    cfg = dataclasses.replace(CFG, gpu_idle_s=30.0)
    s = state(progress=samples(3, 1.0), gpus=gpus(0, 0))
    s.gpus_seen_since_s = T0 + 100                               # first GPU reading
    assert "gpu_idle" not in kinds(evaluate(s, cfg, T0 + 120))
    assert by_kind(evaluate(s, cfg, T0 + 131), "gpu_idle").summary == "all 2 GPUs idle while the process lives"


# ---------------------------------------------------------------------------------------
# issue 12.6/12.7: GPUs that cannot be read; issue 13.3: an exit quotes the log's cause
# ---------------------------------------------------------------------------------------

def test_one_unreadable_utilization_is_not_an_idle_or_missing_gpu():
    cfg = dataclasses.replace(CFG, gpus_expected=8)
    g = gpus(99, 98, 97, 99, 96, 91, 90, 92)
    g[3] = GpuSample(index=3, util_pct=None)  # "[N/A]" this tick
    s = state(progress=samples(3, 1.0), gpus=g)
    assert "gpu_idle" not in kinds(evaluate(s, cfg, T0 + 200))
    # and when one GPU really is idle, the count of visible GPUs stays right
    g[5] = GpuSample(index=5, util_pct=0.0)
    f = by_kind(evaluate(s, cfg, T0 + 200), "gpu_idle")
    assert "visible" not in f.summary and "GPU 5" in f.summary
    assert any("unreadable on GPU 3" in e for e in f.evidence)


DRIVER_GONE = ("nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.")


def test_nvidia_smi_failing_is_a_warning_naming_host_and_text():
    s = state(host="pve1", progress=samples(3, 1.0), gpus_seen_since_s=T0,
              host_sample=HostSample(host="pve1", gpu_error=DRIVER_GONE))
    f = by_kind(evaluate(s, CFG, T0 + 200), "gpu_unreadable")
    assert f.severity == "warning" and f.summary.startswith("pve1: GPUs unreadable: nvidia-smi exit 9: NVIDIA-SMI has")
    # the same text on a later tick is the same finding (registry de-duplicates on kind+summary)
    assert by_kind(evaluate(s, CFG, T0 + 260), "gpu_unreadable").summary == f.summary


def test_no_gpu_finding_for_a_cpu_run():
    s = state(progress=samples(3, 1.0), host_sample=HostSample(host="box", gpu_error="nvidia-smi not found on the host"))
    assert "gpu_unreadable" not in kinds(evaluate(s, CFG, T0 + 200))


def test_a_process_exit_quotes_the_logs_error_line():
    s = state(process=ProcessState(state="exited", pid=4242, exit_code=2),
              log_tail=["loading config", "usage: python -m trainer [-h] [--steps STEPS]",
                        "python -m trainer: error: unrecognized arguments: --stepz 300"])
    f = by_kind(evaluate(s, CFG, T0 + 50), "crash")
    assert f.summary == ("process exited with code 2: python -m trainer: error: unrecognized arguments: "
                         "--stepz 300")
    assert f.evidence[-1].endswith("--stepz 300")
