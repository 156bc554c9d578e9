"""The watch's two couplings to the Parquet history: GPU rows every tick, and a restarted
watch taking its runs' progress back (so charts and regression windows survive a restart)."""

from __future__ import annotations

from controller.cli.watch_cmds import _HistoryHook
from controller.records import GpuSample, ProgressSample, RunState, TickObservation
from controller.store.history import append_progress, read_gpus
from controller.store.runstore import RunRecord, RunStore
from controller.watch import TickReport, Watch


def _record(run_id: str, tmp_path) -> RunRecord:
    return RunRecord(run_id=run_id, name=run_id, target_kind="local", target="local",
                     workdir=str(tmp_path), run_dir=str(tmp_path / run_id),
                     log_path=str(tmp_path / run_id / "train.log"), started_s=1.0,
                     playbook={"target": {"kind": "local"}})


def test_restarted_watch_takes_progress_back_from_the_history(tmp_path):
    store = RunStore(tmp_path / "reg.sqlite")
    rec = _record("seeded", tmp_path)
    store.add_run(rec)
    samples = [ProgressSample(step=s, time_s=100.0 + s, tok_per_s=1000.0 + s, loss=5.0 - s / 100, source="metrics")
               for s in range(10, 310, 10)]
    append_progress("seeded", samples)
    w = Watch(store.runs(), store, gpu=False, persistent=False)
    try:
        _HistoryHook.seed(w, keep=20)
        got = w.states[0].progress
        assert [p.step for p in got] == [s.step for s in samples[-20:]]
        assert got[-1].tok_per_s == samples[-1].tok_per_s and got[-1].source == "metrics"
    finally:
        w.close()


def test_gpu_rows_of_observed_runs_go_to_the_history():
    hook = _HistoryHook()
    seen = RunState(run_id="gpu-run", updated_s=50.0,
                    gpus=[GpuSample(index=0, util_pct=97.0, mem_used_mib=70000.0),
                          GpuSample(index=1, util_pct=None, mem_used_mib=12.0)])
    unseen = RunState(run_id="other", updated_s=10.0, gpus=[GpuSample(index=0, util_pct=1.0)])
    report = TickReport(time_s=50.0, states=[seen, unseen], hosts=[],
                        observations=[TickObservation(run_id="gpu-run", time_s=50.0)])
    hook.record_gpus(report)
    hook.close()
    table = read_gpus("gpu-run").to_pylist()
    assert [(r["index"], r["util_pct"], r["mem_used_mib"]) for r in table] == [(0, 97.0, 70000.0), (1, None, 12.0)]
    assert read_gpus("other").num_rows == 0


def test_a_finished_runs_wandb_state_is_not_left_running():
    """Issue 13.5 / 26.5: a finished run's watch JSON kept `wandb.state: "running"` (the .wandb
    exit record was never read). Once the process is gone, the state is wandb's word for how
    it ended: finished (exit 0), crashed (non-zero), killed (stopped), unknown (an attached
    run: no exit code); an exit record's own word stays."""
    from controller.records import ProcessState, WandbInfo
    from controller.watch.follower import ended_wandb

    for state, code, seen, want in (("finished", 0, "running", "finished"), ("failed", 1, "running", "crashed"),
                                    ("stopped", None, None, "killed"), ("ended", None, "running", "unknown"),
                                    ("failed", 1, "finished", "finished"), ("running", None, "running", "running")):
        st = RunState(run_id="w", state=state, process=ProcessState(state="exited", exit_code=code),
                      wandb=WandbInfo(run_id="abc", mode="offline", state=seen))
        assert ended_wandb(st).state == want, (state, code, seen)


def test_fields_a_later_source_brings_for_a_known_step_reach_the_history_once():
    """metrics.jsonl gave steps 1-3 without a loss; the block-buffered log brings the loss
    later: the stream does not deliver those steps again, but the history gets the fields
    (a partial row per step, folded on read)."""
    from controller.records import ProgressSample, RunState
    from controller.watch.progress import add_progress

    st = RunState(run_id="r", name="r")
    fresh, filled, last = add_progress(st, [ProgressSample(step=s, tok_per_s=10.0, source="metrics")
                                            for s in (1, 2, 3)], 0.0, None)
    assert [s.step for s in fresh] == [1, 2, 3] and not filled and last == 3
    fresh, filled, last = add_progress(st, [ProgressSample(step=s, tok_per_s=99.0, loss=2.5, source="log")
                                            for s in (2, 3)], 1.0, last)
    assert not fresh and last == 3
    assert [(s.step, s.loss, s.tok_per_s) for s in filled] == [(2, 2.5, None), (3, 2.5, None)]
    assert [p.loss for p in st.progress] == [None, 2.5, 2.5] and st.progress[1].tok_per_s == 10.0
    _, filled, _ = add_progress(st, [ProgressSample(step=3, loss=9.0, source="wandb")], 2.0, last)
    assert not filled                                  # nothing new: nothing to write again


WANDB_KILLED = """
    import os, wandb
    run = wandb.init(project="dfctl-test", dir=os.getcwd())
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    print("[progress] step=4 loss=0.2", flush=True)
    os._exit(3)            # gone without run.finish(): the .wandb file has no exit record
"""


def test_every_tick_of_an_ended_run_says_how_its_wandb_run_ended(tmp_path, monkeypatch):
    """Issue 26.5: the ticks of a run whose process had ended still said wandb `running`
    until the watch was done with it (and a `watch --once --json` only ever said that).
    A real wandb offline run whose process dies without run.finish(): every --json tick
    document from the end on says `crashed`."""
    from controller.records import ENDED_STATES, tick_document
    from tests.test_probe import launch_local, wait_for
    from tests.test_watch import record_for

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB__TRANSACTION_LOG_FLUSH_INTERVAL", "1")
    run = launch_local(tmp_path / "r", WANDB_KILLED)
    wait_for(lambda: (run.run_dir / "exit_code").exists(), 120, "the run to end")
    assert (run.run_dir / "exit_code").read_text().strip() == "3"
    assert list(run.run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(record_for(run, "wk"))
    w = Watch(store.runs(), store, gpu=False, persistent=False)
    docs = []
    try:
        while not w.all_done and len(docs) < 20:
            rep = w.tick()
            docs += [tick_document(s, o) for s, o in zip(rep.states, rep.observations)]
    finally:
        w.close()
    ended = [d for d in docs if d["state"] in ENDED_STATES]
    assert ended and ended[0] is docs[0]           # the first tick already sees it ended
    assert [d["wandb"]["state"] for d in ended] == ["crashed"] * len(ended), [d["wandb"] for d in ended]
