"""Hangs told by the run's own clocks (issue 22, helper k13hangclock): a progress bar that stood at one
count while its elapsed time grew, then a stop; dated log lines that go silent for a long time, then a
scheduler's or harness's stop (controller/judge/progress_stall.py). And the user's note under a paste that
it hangs there, which is not the program's last line (line_scan._HANG_NOTE). The tqdm texts are real
output of tqdm 4.70.1 made here (tests/data/logs/progress_stall_programs.py.txt says how); the others
are training-split pastes or texts built from the cited wordings. Each shape sits beside healthy text
that must stay quiet: long evaluations, slow logging cadences, progress printed in the silence, pastes
that simply end."""

from __future__ import annotations

import random
from pathlib import Path

from controller.judge import TextScanner
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _hangs(lines: list[str]) -> list[str]:
    return [f.summary for f in _final(lines) if f.kind == "hang"]


def _streamed(lines: list[str], seed: int) -> list[tuple[str, str, int | None]]:
    """The same text in random groups of lines through small batches (a live read)."""
    rng = random.Random(seed)
    sc = TextScanner(now_s=0.0, batch_lines=8, overlap_lines=2)
    i = 0
    while i < len(lines):
        k = rng.randint(1, 5)
        sc.feed(lines[i:i + k])
        i += k
    sc.finish()
    return [(f.kind, f.summary, f.line) for f in sc.all_findings()]


# -- a bar frozen before Ctrl-C (real output) ----------------------------------------------------

def test_a_bar_frozen_for_minutes_then_ctrl_c_is_a_hang():
    """tqdm over 400 items of 0.5 s; item 5 never returns; `timeout -s INT 700`: the close redraw shows
    5/400 again with the elapsed time grown by the stall, then the KeyboardInterrupt traceback."""
    lines = _log(LOGS / "tqdm_stall_sigint.log")
    found = _final(lines)
    assert _kinds(found) == ["crash", "hang"], [f.summary for f in found]  # (the Ctrl-C's own warning stays)
    (h,) = [f for f in found if f.kind == "hang"]
    assert "stood at 5/400" in h.summary and "KeyboardInterrupt" in h.summary, h.summary
    assert any("5/400 [00:02<" in e for e in h.evidence), h.evidence
    whole = [(f.kind, f.summary, f.line) for f in found]
    for seed in range(5):  # read live in small batches: the two redraws may sit in an earlier batch
        assert _streamed(lines, seed) == whole


def test_a_bar_redrawn_after_a_long_evaluation_stays_quiet():
    """tqdm.write after an 11-minute evaluation redraws the bar with the same count and the elapsed time
    grown; training goes on and the program ends normally: slow, not stuck."""
    lines = _log(LOGS / "tqdm_long_eval_healthy.log")
    assert _kinds(_final(lines)) == [], [f.summary for f in _final(lines)]


def test_a_ctrl_c_of_a_moving_bar_is_only_a_stop():
    """The same bar, stopped while it moves: the close redraw is 0.5 s after the one before it."""
    lines = ["train:   1%|          | 4/400 [00:02<03:18,  2.00it/s]",
             "train:   1%|          | 5/400 [00:02<03:17,  2.00it/s]",
             "train:   1%|          | 5/400 [00:03<03:17,  2.00it/s]",
             "Traceback (most recent call last):",
             '  File "train.py", line 20, in <module>',
             "    time.sleep(0.5)",
             "KeyboardInterrupt"]
    found = _final(lines)
    assert _kinds(found) == ["crash"] and "stopped by KeyboardInterrupt" in found[0].summary, found


def test_a_bar_at_a_slow_rate_is_judged_by_its_own_time_per_item():
    """Steps of 2 minutes each: 15 minutes on one step is 7.5 steps' time, not twenty -- a slow batch."""
    slow = ["epoch:   1%|          | 3/400 [06:00<13:14:00, 120.00s/it]",
            "epoch:   1%|          | 3/400 [21:00<46:19:00, 420.00s/it]",
            "Traceback (most recent call last):",
            '  File "train.py", line 20, in <module>',
            "KeyboardInterrupt"]
    assert _hangs(slow) == []
    fast = [x.replace("06:00<", "00:06<") for x in slow]  # 2 s an item: 15 minutes is 450 items' time
    assert len(_hangs(fast)) == 1


def test_a_bar_still_at_its_first_item_needs_half_an_hour():
    """No time per item is known at 0 (start-up, a compile, a download): 20 minutes is not read, 45 are."""
    def text(el: str) -> list[str]:
        return ["Epoch 0:   0%|          | 0/1000 [00:00<?, ?it/s]",
                f"Epoch 0:   0%|          | 0/1000 [{el}<?, ?it/s]",
                "Traceback (most recent call last):",
                '  File "train.py", line 88, in <module>',
                "KeyboardInterrupt"]
    assert _hangs(text("20:00")) == []
    (s,) = _hangs(text("45:10"))
    assert "0/1000" in s and "45:10" in s and "first item" in s


def test_another_workers_bar_between_the_two_redraws_is_not_this_bar():
    """Two workers' bars interleave (Ray's `(pid=...)` prefixes): the frozen one is read by its own key,
    a moving one of another worker does not end its stall, and a moving one alone is quiet."""
    frozen = ["(pid=11) shard:  10%|#         | 40/400 [00:20<03:00,  2.00it/s]",
              "(pid=12) shard:  12%|#         | 48/400 [00:24<02:56,  2.00it/s]",
              "(pid=11) shard:  10%|#         | 40/400 [25:20<...,  ...]",
              "Traceback (most recent call last):",
              '  File "run.py", line 7, in <module>',
              "KeyboardInterrupt"]
    assert len(_hangs(frozen)) == 1
    moving = [frozen[0], frozen[1], "(pid=12) shard:  12%|#         | 49/400 [00:25<02:56,  2.00it/s]"] + frozen[3:]
    assert _hangs(moving) == []


# -- dated silence, then a stop ---------------------------------------------------------------------

def test_ray_unschedulable_then_54_minutes_of_nothing_then_the_harness_exit_is_a_hang():
    """ray-project/ray#21097: Ray's `cannot be scheduled right now` at 08:24:41, its detail lines, then the
    release harness's `Exiting with exit code 6` at 09:18:13."""
    lines = _log(PASTED / "ray-project_ray-21097.log")
    (s,) = _hangs(lines)
    assert "53:32" in s and "exit code 6" in s, s
    whole = [(f.kind, f.summary, f.line) for f in _final(lines)]
    for seed in range(5):
        assert _streamed(lines, seed) == whole


def _run(minutes_between: int, lines: int, silence_min: int, last: str = "step {i} loss 2.31") -> list[str]:
    """Dated records every `minutes_between` minutes, then `silence_min` minutes of nothing, then
    slurmstepd's time-limit kill (SchedMD/slurm src/slurmd/slurmstepd/req.c:1122-1149 at 284c3b9)."""
    out, t = [], 8 * 60
    for i in range(lines):
        out.append(f"2024-04-20 {t // 60:02d}:{t % 60:02d}:05,120 INFO " + last.format(i=i))
        t += minutes_between
    t += silence_min - minutes_between
    out.append(f"slurmstepd: error: *** JOB 494583 ON node12 CANCELLED AT 2024-04-20T{t // 60:02d}:{t % 60:02d}:06 "
               "DUE TO TIME LIMIT ***")
    return out


def test_a_time_limit_kill_after_two_silent_hours_is_a_hang():
    lines = _run(1, 30, 120)
    (s,) = _hangs(lines)
    assert "2:00:01" in s and "due to time limit" in s, s
    whole = [(f.kind, f.summary, f.line) for f in _final(lines)]
    assert _streamed(lines, 1) == whole and _streamed(lines, 2) == whole


def test_a_time_limit_kill_at_the_runs_own_cadence_stays_a_stop():
    """A run that logs every 40 minutes, killed 70 minutes after its last record: slow, not stuck
    (pasted NVIDIA/DeepLearningExamples#543 logs every 89 minutes, healthy)."""
    assert _hangs(_run(40, 6, 70)) == []
    assert _hangs(_run(1, 10, 20)) == []  # 20 minutes: under STALL_S


def test_a_silence_after_a_phase_that_takes_long_stays_a_stop():
    """The last line announces an evaluation (or a save): its silence is that phase."""
    lines = _run(1, 10, 120)
    lines[-2] = lines[-2].split(" INFO ")[0] + " INFO Running evaluation on the test split"
    assert _hangs(lines) == []


def test_progress_printed_in_the_silence_is_not_a_silence():
    """ray#21097's text with a bar that moved on printed between the warning and the exit: the bar, not
    the dated lines, shows what the run did."""
    lines = _log(PASTED / "ray-project_ray-21097.log")
    lines.insert(-1, "Map Progress (8 actors 0 pending):  90%|#########| 360/400 [53:10<05:54,  8.86s/it]")
    assert _hangs(lines) == []


def test_a_paste_that_simply_ends_after_a_long_gap_stays_quiet():
    """Gaps of hours between dated lines, and no stop: pasted logs of healthy slow runs."""
    for name in ("nvidia_deeplearningexamples-543", "gentaiscool_end2end-asr-pytorch-39",
                 "rvc-project_retrieval-based-voice-conversion-webui-507"):
        assert _kinds(_final(_log(PASTED / f"{name}.log"))) == [], name
    assert _hangs(_run(1, 10, 120)[:-1]) == []


def test_a_collectors_stamp_beside_the_programs_own_is_not_a_silence():
    """A collector's constant stamp years after the program's (the corpus's `prefixed` variant): the gap is
    two clocks, not one run's silence."""
    lines = ["[2026-12-01 10:00:00,123] [INFO] 2019-02-01 01:28:13,654 - INFO - trainer - Epoch 3 done",
             "[2026-12-01 10:00:00,123] [INFO] slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT "
             "2026-12-01T10:00:00 DUE TO TIME LIMIT ***"]
    assert _hangs(lines) == []


# -- the user's note that it hangs -------------------------------------------------------------------

def test_the_users_note_under_the_last_line_is_not_the_programs_last_line():
    """ray-project/ray#6016: Ray's `is pending and cannot currently be scheduled`, then `... hangs forever`."""
    found = _final(_log(PASTED / "ray-project_ray-6016.log"))
    (h,) = [f for f in found if f.kind == "hang"]
    assert "cannot be scheduled" in h.summary and "... hangs forever" in h.evidence, h.evidence


def test_a_note_that_it_hangs_is_no_hang_by_itself():
    """The note only lets the line above it be the program's last word; that line must say something."""
    assert _kinds(_final(["epoch 3 loss 0.21", "epoch 4 loss 0.20", "", "... hangs forever"])) == []


# -- a test harness's timeout ------------------------------------------------------------------------

def test_ray_release_harness_timeouts_are_hangs():
    """ray-project/ray#19227, #19226 (release/e2e.py's _check_stop wordings) and #27867 (ray_release's
    `Cluster command timed out after 3600 seconds.`)."""
    for name, what in (("ray-project_ray-19227", "in the prepare command stage"),
                       ("ray-project_ray-19226", "while starting a session"),
                       ("ray-project_ray-27867", "after 3600 s")):
        hangs = _hangs(_log(PASTED / f"{name}.log"))
        assert any("harness's timeout" in s and what in s for s in hangs), (name, hangs)


def test_a_harness_timeout_setting_and_a_passing_test_stay_quiet():
    """The harness's own configuration and a step that finished: the words without the event."""
    lines = ["[INFO 2021-10-07 11:02:01,100] e2e.py: 1690  Starting process with timeout 3600 (build timeout 1800)",
             "[INFO 2021-10-07 11:40:12,410] e2e.py: 1761  Final results: {'status': 'finished', 'last_logs': 'ok'}",
             "[INFO 2021-10-07 11:40:12,411] e2e.py: 2131  Exiting with exit code 0"]
    assert _kinds(_final(lines)) == []
