"""ticks_every / Watch.ticks: the watch owns its clock. A fake clock and a recorded wait
stand in for time (no sleeping); a threading.Event is the stop."""

import threading

from controller.watch.tick import ticks_every


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        self.now += timeout_s
        return False


def test_on_schedule_no_drift():
    clock = FakeClock()
    starts = []
    for n in ticks_every(2.0, clock=clock, wait=clock.wait):
        starts.append(clock.now)
        clock.now += 0.3            # the work takes 0.3 s: the wait is what is left of the slot
        if n == 4:
            break
    assert starts == [100.0, 102.0, 104.0, 106.0, 108.0]
    assert [round(w, 9) for w in clock.waits] == [1.7, 1.7, 1.7, 1.7]


def test_slow_tick_not_followed_by_full_wait():
    clock = FakeClock()
    starts = []
    for n in ticks_every(2.0, clock=clock, wait=clock.wait):
        starts.append(clock.now)
        clock.now += 5.0 if n == 0 else 0.5    # the first tick overruns its slot
        if n == 2:
            break
    assert starts == [100.0, 105.0, 107.0]     # next at once, then re-anchored (no catch-up burst)
    assert [round(w, 9) for w in clock.waits] == [0.0, 1.5]


def test_stop_event_ends_at_once():
    stop = threading.Event()
    seen = []
    for n in ticks_every(3600.0, wait=stop.wait):
        seen.append(n)
        stop.set()                  # an hour's interval, yet the loop ends now
    assert seen == [0]


def test_plain_loop_paced_by_watch_ticks(monkeypatch):
    from controller.cli import watch_cmds

    calls = []

    class W:
        errors: list[str] = []
        all_done = False

        def ticks(self):
            yield from range(3)

        def tick(self):
            calls.append("tick")
            from controller.watch.tick import TickReport
            return TickReport(time_s=0.0, states=[], hosts=[])

        def exit_code(self):
            return 0

    monkeypatch.setattr(watch_cmds.time, "sleep", lambda s: (_ for _ in ()).throw(AssertionError("slept")))
    assert watch_cmds._plain_loop(W(), 2.0, json_out=True) == 0
    assert calls == ["tick"] * 3


def test_runs_live_paced_by_ticks_every(monkeypatch, tmp_path):
    from controller.cli import runs_live
    from controller.watch import tick

    monkeypatch.setenv("DFCTL_HOME", str(tmp_path))
    drawn = []
    monkeypatch.setattr(tick, "ticks_every", lambda interval_s: iter(range(4)))
    monkeypatch.setattr(runs_live, "render", lambda rows, now, width: drawn.append(rows) or "")
    monkeypatch.setattr(runs_live.time, "sleep", lambda s: (_ for _ in ()).throw(AssertionError("slept")))
    assert runs_live.live_table(1.0) == 0
    assert len(drawn) == 4


def test_a_wait_woken_early_starts_the_next_tick_at_once_and_the_schedule_from_there():
    clock = FakeClock()
    starts = []

    def wait(timeout_s: float) -> bool:
        clock.waits.append(timeout_s)
        clock.now += 0.25 if len(clock.waits) == 1 else timeout_s    # the first wait: woken at 0.25 s
        return False

    for n in ticks_every(2.0, clock=clock, wait=wait):
        starts.append(clock.now)
        if n == 2:
            break
    assert starts == [100.0, 100.25, 102.25]                 # at once, then a full interval on
    assert clock.waits == [2.0, 2.0]


def _no_sleep(monkeypatch, module) -> None:
    monkeypatch.setattr(module.time, "sleep", lambda s: (_ for _ in ()).throw(AssertionError("slept")))


def test_deploy_follow_paced_by_watch_ticks(monkeypatch):
    from controller.cli import deploy_follow
    from controller.records import RunState
    from controller.store.runstore import RunRecord
    from controller.watch.tick import TickReport

    class W:
        all_done = False
        ticked = 0

        def ticks(self):
            yield from range(10)

        def tick(self):
            self.ticked += 1
            self.all_done = self.ticked == 3
            st = RunState(run_id="r", state="finished" if self.all_done else "running")
            return TickReport(time_s=0.0, states=[st], hosts=[])

    _no_sleep(monkeypatch, deploy_follow)
    w = W()
    rec = RunRecord(run_id="r", name="r", target_kind="local", target="local")
    assert deploy_follow._follow(w, rec, "first_step", 0.5, True, None, 0.0, set()) == 0
    assert w.ticked == 3                                     # ended by the run, each tick from ticks()


def test_logs_follow_paced_by_the_watch_clock(monkeypatch, tmp_path):
    """`dfctl logs -f` polls once per tick of ticks_every (and reads on at once while one
    read is not the whole file); it never sleeps itself."""
    import io

    from controller.store.runstore import RunRecord
    from controller.watch import logstream

    log = tmp_path / "train.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(10000)))   # ~22 reads of 4 KiB
    paces: list[float] = []

    def ticks(interval_s, wait=None):
        paces.append(interval_s)
        yield from range(5)

    monkeypatch.setattr(logstream, "ticks_every", ticks)
    monkeypatch.setattr(logstream, "READ_CAP_BYTES", 4096)   # several reads' worth, read at once
    rec = RunRecord(run_id="l", name="l", target_kind="local", target="local", run_dir=str(tmp_path),
                    log_path=str(log), started_s=0.0, playbook={"target": {"kind": "local"}})
    stream = logstream.LogStream(rec, poll_s=0.3)
    out = io.BytesIO()
    try:
        with monkeypatch.context() as m:
            _no_sleep(m, logstream)
            stream.follow(out, lambda e: None)               # no process: ends after 2 quiet ticks
    finally:
        stream.close()
    assert paces == [0.3] and out.getvalue() == log.read_bytes()


def test_live_screen_reads_keys_until_the_tick_is_due_and_caps_redraws():
    from controller.cli.live_screen import LiveScreen

    clock = FakeClock()
    keys = iter(["j", "j", "j", None, "k", None, "q"])
    drawn: list[tuple[float, int]] = []

    def wait_key(timeout_s: float):
        clock.now += min(timeout_s, 0.0625)                   # a key every 62.5 ms while held
        return next(keys)

    screen = LiveScreen(lambda sel: drawn.append((clock.now, sel)), 3, wait_key, 4.0, clock=clock)
    screen.changed()                                          # the tick's draw
    assert screen.wait(0.25) is False                         # keys until the slot is over
    assert screen.selected == 0                               # j j j: wrapped around 3 runs
    assert drawn == [(100.0, 0), (100.25, 0)]                 # one redraw for three keys, a frame later
    assert screen.wait(10.0) is True and screen.quit          # k, then q: stop at once
    assert screen.selected == 2 and clock.now == 100.4375


def test_the_live_dashboard_is_paced_by_watch_ticks(monkeypatch):
    from controller.cli import live_screen, watch_cmds

    waits = []

    class W:
        errors: list[str] = []
        states: list = []
        job_states: list = []
        runs = [object()]
        all_done = False
        ticked = 0

        def ticks(self, wait=None):
            waits.append(wait)
            for n in range(3):
                yield n

        def tick(self):
            self.ticked += 1

        def exit_code(self):
            return 0

    drawn = []
    monkeypatch.setattr(live_screen.LiveScreen, "draw", lambda self: drawn.append(self.selected))
    _no_sleep(monkeypatch, watch_cmds)
    w = W()
    assert watch_cmds._live_loop(w, 2.0) == 0
    assert w.ticked == 3 and len(waits) == 1 and waits[0].__name__ == "wait" and drawn
