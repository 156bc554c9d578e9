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
