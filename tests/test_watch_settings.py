"""One owner per setting (WatchSettings) and one spelling of the cursor (RunCursor)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from controller.playbook import TargetConfig, WatchConfig
from controller.probe import RunProbeRequest
from controller.records import RunCursor
from controller.store.runstore import RunRecord, RunStore
from controller.watch import Watch, WatchSettings, resolve_settings


def _record(run_id: str, interval_s: float) -> RunRecord:
    return RunRecord(run_id=run_id, name=run_id, target_kind="local", target="local", run_dir=f"/nonexistent/{run_id}",
                     log_path=f"/nonexistent/{run_id}/train.log", started_s=time.time(),
                     playbook={"target": asdict(TargetConfig()), "watch": asdict(WatchConfig(interval_s=interval_s))})


def test_the_interval_flag_changes_every_use_of_the_interval(tmp_path):
    """`dfctl watch --interval 0.5` over a playbook saying 10 s: the tick wait, the agent's
    GPU sampling period and the back-off all follow 0.5 s (they kept 10 s before)."""
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(_record("a", 10.0))
    w = Watch(store.runs(), store, gpu=False, interval_s=0.5)
    try:
        assert w.settings.interval_s == 0.5
        assert w.tick_wait_s == 2.0                       # max(2, 2 x interval), not 20
        (poller,) = w.pollers.values()
        doc = poller.agent_request(poller.request([], {}, apps_due=False))
        assert doc["gpu_every_s"] == 0.5 and doc["idle_exit_s"] == 30.0
        assert w.settings.backoff_s(1) == 0.5 and w.settings.backoff_s(3) == 2.0
    finally:
        w.close()
    w = Watch(store.runs(), store, gpu=False)             # no flag: the playbook's interval
    try:
        assert w.settings.interval_s == 10.0 and w.tick_wait_s == 20.0
        assert w.settings.backoff_s(1) == 10.0 and w.settings.agent_idle_exit_s == 100.0
    finally:
        w.close()


def test_settings_resolve_the_shortest_playbook_interval_and_keep_explicit_values():
    cfgs = [WatchConfig(interval_s=5.0), WatchConfig(interval_s=3.0)]
    s = resolve_settings(cfgs)
    assert (s.interval_s, s.tick_wait_s, s.gpu_every_s) == (3.0, 6.0, 3.0)
    s = resolve_settings(cfgs, interval_s=1.0, tick_wait_s=7.0, gpu=False)
    assert (s.interval_s, s.tick_wait_s, s.gpu) == (1.0, 7.0, False)
    assert WatchSettings().interval_s == 2.0


cursors = st.builds(
    RunCursor,
    log_inode=st.none() | st.integers(min_value=1, max_value=2**63 - 1),
    log_offset=st.integers(min_value=0, max_value=2**62), log_line_no=st.integers(min_value=0, max_value=2**40),
    log_fingerprint=st.none() | st.from_regex(r"\A[0-9]{1,3}:[0-9a-f]{40}\Z"),
    log_head=st.none() | st.from_regex(r"\A[0-9]{1,3}:[0-9a-f]{40}\Z"),
    metrics_offset=st.integers(min_value=0, max_value=2**62), wandb_offset=st.integers(min_value=0, max_value=2**62),
    progress_step=st.none() | st.integers(min_value=0, max_value=2**40))


@given(cursors)
def test_the_cursor_round_trips_registry_request_and_json(cur):
    """registry -> request -> the JSON the probe gets -> back: one form, nothing changed."""
    assert RunCursor.from_json(json.loads(json.dumps(cur.to_json()))) == cur
    req = RunProbeRequest(run_id="r", log_path="/x", cursor=cur).to_json()
    assert RunCursor.from_json(json.loads(json.dumps(req))["cursor"]) == cur


def test_the_registry_keeps_the_cursor_whole_and_reads_older_registries(tmp_path):
    store = RunStore(tmp_path / "reg.sqlite")
    cur = RunCursor(log_inode=7, log_offset=100, log_line_no=3, log_fingerprint="100:" + "a" * 40,
                    log_head="64:" + "b" * 40, metrics_offset=5, wandb_offset=9, progress_step=12)
    store.set_cursor("r", cur)
    assert RunStore(tmp_path / "reg.sqlite").get_cursor("r") == cur
    assert store.get_cursor("unknown") == RunCursor()
    # a registry from before the fingerprints: columns added, old rows read with None
    import sqlite3
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)
    db.execute("CREATE TABLE cursors (run_id TEXT PRIMARY KEY, log_inode INTEGER, log_offset INTEGER, "
               "log_line_no INTEGER, metrics_offset INTEGER, wandb_offset INTEGER, updated_s REAL)")
    db.execute("INSERT INTO cursors VALUES ('r', 7, 100, 3, 5, 9, 0)")
    db.commit()
    db.close()
    assert RunStore(old).get_cursor("r") == RunCursor(log_inode=7, log_offset=100, log_line_no=3,
                                                     metrics_offset=5, wandb_offset=9)


# -- the follower's end-of-run and recovery rules -------------------------------------------

def test_an_unterminated_last_line_is_scanned_when_the_run_ends(tmp_path):
    """An OOM message written without newline just before the process died."""
    from tests.test_probe import launch_local
    from tests.test_watch import record_for

    store = RunStore(tmp_path / "reg.sqlite")
    run = launch_local(tmp_path / "r", """
        import sys
        print("[progress] step=1 loss=2.5", flush=True)
        sys.stdout.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        sys.stdout.flush()
        sys.exit(1)
    """)
    try:
        store.add_run(record_for(run, "r"))
        w = Watch(store.runs(), store, gpu=False, persistent=False)
        delivered: list[str] = []
        try:
            end = time.monotonic() + 60
            while not w.all_done and time.monotonic() < end:
                rep = w.tick()
                delivered.extend(line for o in rep.observations for line in o.new_lines)
                time.sleep(0.2)
            assert w.all_done
        finally:
            w.close()
        assert any(f.kind == "oom" for f in w.states[0].findings), w.states[0].findings
        assert delivered.count("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") == 1
    finally:
        run.stop()


def test_unreachable_findings_leave_the_runs_list_when_the_host_answers_again(tmp_path):
    from controller.probe.readings import HostReading, RunReading
    from controller.records import HostSample

    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(_record("a", 1.0))
    w = Watch(store.runs(), store, gpu=False)
    try:
        (r,) = w.runs
        for since in (1000.0, 2000.0, 3000.0):              # three outages
            r.host_down("h", None, "no route to host", since, since + 1)
        assert [f.kind for f in r.state.findings].count("unreachable") == 3
        reading = HostReading(host=HostSample(host="local"), runs={"a": RunReading(run_id="a")})
        r.apply(reading, 4000.0)
        assert not [f for f in r.state.findings if f.kind == "unreachable"]
        assert [f.kind for f in store.findings("a")].count("unreachable") == 3   # the registry keeps the history
    finally:
        w.close()


def test_a_restarted_watch_delivers_no_step_again_from_the_wandb_file(tmp_path):
    """metrics.jsonl is read to its end before the lagging .wandb file; the watch is
    restarted; the .wandb file's steps, all known already, must not come a second time
    (README: the --json stream has each item once)."""
    from collections import Counter

    from tests.test_wandb_offline import start_writer

    run_dir = tmp_path / "run"
    w = start_writer(run_dir, "finished", 120, 0.0)
    _, err = w.communicate(timeout=240)
    assert w.returncode == 0, err.decode()[-2000:]
    (run_dir / "metrics.jsonl").write_text("".join('{"step": %d, "loss": 1.5}\n' % i for i in range(120)))
    (run_dir / "train.log").write_text("")
    rec = RunRecord(run_id="m", name="m", target_kind="local", target="local", run_dir=str(run_dir),
                    log_path=str(run_dir / "train.log"), started_s=time.time(),
                    playbook={"target": asdict(TargetConfig()), "watch": asdict(WatchConfig(interval_s=0.5))})
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(rec)
    delivered: Counter[int] = Counter()
    metrics_size = (run_dir / "metrics.jsonl").stat().st_size
    first = Watch(store.runs(), store, gpu=False, persistent=False, read_cap_bytes=1024)
    try:
        for _ in range(40):
            for o in first.tick().observations:
                delivered.update(p.step for p in o.progress)
            if first.runs[0].metrics_offset == metrics_size:
                break
        assert first.runs[0].metrics_offset == metrics_size
        (wandb_file,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
        assert first.runs[0].wandb_offset < wandb_file.stat().st_size      # the .wandb file lags
    finally:
        first.close()
    second = Watch(store.runs(), store, gpu=False, persistent=False, read_cap_bytes=1 << 20)
    try:
        for _ in range(5):
            for o in second.tick().observations:
                delivered.update(p.step for p in o.progress)
        assert second.runs[0].wandb_offset > 0 and second.runs[0].state.wandb.run_id
    finally:
        second.close()
    assert sorted(delivered) == list(range(120)) and max(delivered.values()) == 1, \
        [s for s, n in delivered.items() if n > 1][:10]
