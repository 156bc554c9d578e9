"""Issue 27 item 3: a finding lives as long as its cause. Per kind of CLEARED_BY, the
detector's own finding on a state where the cause holds is not cleared, and the state
where it went away clears it; a failure kind never clears; the registry keeps a cleared
finding marked with when, and makes it live again (and news) when it holds again."""

from __future__ import annotations

import sqlite3

import pytest

from controller.judge.state import CLEARED_BY, cleared, evaluate, unreadable_file
from controller.playbook import WatchConfig
from controller.records import Finding, GpuSample, HostSample, ProcessState, ProgressSample, RunState
from controller.store.runstore import RunStore

T0 = 1_800_000_000.0


def running_state(**kw) -> RunState:
    st = RunState(run_id="r1", started_s=T0, state="running", process=ProcessState(state="running", pid=42),
                  host_sample=HostSample(host="pve1"))
    for k, v in kw.items():
        setattr(st, k, v)
    return st


def found(kind: str, st: RunState, cfg: WatchConfig, now: float) -> Finding:
    (f,) = [f for f in evaluate(st, cfg, now) if f.kind == kind]
    return f


def test_every_kind_that_clears_is_tested_here():
    assert set(CLEARED_BY) == {"log_unreadable", "unreachable", "gpu_unreadable", "stale_log", "hang",
                               "gpu_idle", "startup_stall"}


def test_log_unreadable_clears_when_that_file_reads_as_a_regular_file():
    st, cfg = running_state(), WatchConfig()
    f = unreadable_file("metrics.jsonl", "/w/r/metrics.jsonl is a FIFO, not a regular file: not read", T0, "r1")
    assert not cleared(f, st, cfg, T0, files_read=set())
    assert not cleared(f, st, cfg, T0, files_read={"log"})          # another file read is not this one
    assert cleared(f, st, cfg, T0, files_read={"log", "metrics.jsonl"})


def test_unreachable_clears_when_the_host_answers():
    cfg = WatchConfig()
    f = Finding(kind="unreachable", severity="warning", summary="host pve1 unreachable since 01:00:00",
                first_seen_s=T0, run_id="r1")
    assert not cleared(f, running_state(state="unreachable"), cfg, T0 + 5, files_read={"log"})
    assert cleared(f, running_state(), cfg, T0 + 5, files_read={"log"})


def test_gpu_unreadable_clears_when_a_tick_reads_the_gpus_again():
    cfg = WatchConfig(gpus_expected=2)
    st = running_state(host_sample=HostSample(host="pve1", gpu_error="nvidia-smi exit 9: couldn't communicate"))
    f = found("gpu_unreadable", st, cfg, T0 + 10)
    assert not cleared(f, st, cfg, T0 + 10, files_read=())
    st.host_sample = HostSample(host="pve1", gpus=[GpuSample(index=0, util_pct=90.0)])
    assert cleared(f, st, cfg, T0 + 20, files_read=())


def test_gpu_unreadable_stays_when_the_process_ends_with_the_gpus_still_lost():
    cfg = WatchConfig(gpus_expected=2)
    st = running_state(host_sample=HostSample(host="pve1", gpu_error="nvidia-smi exit 9"))
    f = found("gpu_unreadable", st, cfg, T0 + 10)
    st.state, st.process = "stopped", ProcessState(state="exited", exit_code=143, stopped_by="dfctl stop")
    assert not cleared(f, st, cfg, T0 + 20, files_read=())


def test_stale_log_clears_when_the_log_grows_again():
    cfg = WatchConfig(stale_log_s=60)
    st = running_state(last_log_growth_s=T0, progress=[ProgressSample(step=5, time_s=T0 + 100, source="metrics")])
    f = found("stale_log", st, cfg, T0 + 120)
    assert not cleared(f, st, cfg, T0 + 130, files_read={"log"})   # read, but not grown
    st.last_log_growth_s = T0 + 140
    assert cleared(f, st, cfg, T0 + 140, files_read={"log"})


def test_hang_clears_when_progress_comes_again():
    cfg = WatchConfig(hang_min_s=60, hang_factor=3)
    st = running_state(progress=[ProgressSample(step=i, time_s=T0 + i) for i in range(5)],
                       last_log_growth_s=T0 + 4, last_progress_s=T0 + 4,
                       gpus=[GpuSample(index=0, util_pct=0.0)])
    f = found("hang", st, cfg, T0 + 100)
    assert f.severity == "critical"
    assert not cleared(f, st, cfg, T0 + 110, files_read={"log"})
    st.last_progress_s = T0 + 120
    assert cleared(f, st, cfg, T0 + 120, files_read={"log"})


def test_gpu_idle_clears_when_every_gpu_reads_busy_again():
    cfg = WatchConfig(gpu_idle_s=30)
    st = running_state(progress=[ProgressSample(step=1, time_s=T0)], gpus_seen_since_s=T0,
                       gpus=[GpuSample(index=0, util_pct=0.0), GpuSample(index=1, util_pct=0.0)],
                       gpu_busy_seen_s={})
    f = found("gpu_idle", st, cfg, T0 + 40)
    st.gpus, st.gpu_busy_seen_s = [GpuSample(index=0, util_pct=95.0), GpuSample(index=1, util_pct=0.0)], {0: T0 + 50}
    assert not cleared(f, st, cfg, T0 + 50, files_read=())        # GPU 1 still idle
    st.gpus = [GpuSample(index=0, util_pct=95.0), GpuSample(index=1, util_pct=90.0)]
    st.gpu_busy_seen_s = {0: T0 + 60, 1: T0 + 60}
    assert cleared(f, st, cfg, T0 + 60, files_read=())


def test_startup_stall_clears_when_its_milestone_is_reached():
    cfg = WatchConfig(startup_deadlines_s={"dataset_loaded": 10.0, "first_step": 20.0})
    st = running_state()
    stalls = {f.summary.split(" ")[0]: f for f in evaluate(st, cfg, T0 + 30) if f.kind == "startup_stall"}
    assert set(stalls) == {"dataset_loaded", "first_step"}
    st.milestones["dataset_loaded"] = T0 + 35
    assert cleared(stalls["dataset_loaded"], st, cfg, T0 + 35, files_read=())
    assert not cleared(stalls["first_step"], st, cfg, T0 + 35, files_read=())
    st.progress = [ProgressSample(step=1, time_s=T0 + 40)]
    assert cleared(stalls["first_step"], st, cfg, T0 + 40, files_read=())


@pytest.mark.parametrize("kind", ["crash", "oom", "nan", "regression", "nccl_timeout"])
def test_a_failure_that_happened_never_clears(kind):
    f = Finding(kind=kind, severity="critical", summary="x", first_seen_s=T0, run_id="r1")
    st = running_state(last_log_growth_s=T0 + 99, last_progress_s=T0 + 99, progress=[ProgressSample(step=9)])
    assert not cleared(f, st, WatchConfig(), T0 + 100, files_read={"log", "metrics.jsonl", ".wandb file"})


def test_the_registry_keeps_a_cleared_finding_and_revives_it_when_it_holds_again(tmp_path):
    store = RunStore(tmp_path / "reg.sqlite")
    f = unreadable_file("log", "/w/train.log is a FIFO, not a regular file: not read", T0, "r1")
    assert store.add_findings("r1", [f]) == [f]
    assert store.add_findings("r1", [f]) == []                     # still live: no news
    store.clear_finding("r1", f, T0 + 7)
    (kept,) = store.findings("r1")
    assert kept.cleared_s == T0 + 7 and kept.first_seen_s == T0
    assert store.add_findings("r1", [f]) == [f]                    # back: live again, news again
    (again,) = store.findings("r1")
    assert again.cleared_s is None


def test_a_registry_written_before_cleared_s_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE findings (run_id TEXT, kind TEXT, summary TEXT, severity TEXT, first_seen_s REAL, "
               "evidence TEXT, hint TEXT, line INTEGER, PRIMARY KEY (run_id, kind, summary))")
    db.execute("INSERT INTO findings VALUES ('r1', 'crash', 'boom', 'critical', 1.0, '[]', '', NULL)")
    db.commit()
    db.close()
    store = RunStore(path)
    (old,) = store.findings("r1")
    assert old.kind == "crash" and old.cleared_s is None
    store.clear_finding("r1", old, 2.0)
    assert store.findings("r1")[0].cleared_s == 2.0
