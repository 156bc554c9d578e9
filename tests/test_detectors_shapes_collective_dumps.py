"""Hangs in the torch.distributed world told by a stack dump of the waiting rank (issue 22, helper
k14hangtorch): faulthandler's timer dump with a thread parked in a collective, then the process's
exit (controller/judge/stack_dumps.py), and `py-spy dump --native`, whose C/C++ frames stand above the
innermost Python frame (line_scan._pyspy_collective). The dumps are real output made here under
torchrun with gloo on CPU (tests/data/logs/programs/torch_hang_k14.py says how); the others are
training-split pastes (tests/corpus/pasted/index-zn.json) or texts built from the real ones. Each
shape sits beside healthy text that must stay quiet: a dump inside a barrier that then passes and
trains on, a rank dumped while it sleeps, a collective further up a dumped stack."""

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
    """The same text in random groups of lines through small batches (a live read, then finish)."""
    rng = random.Random(seed)
    sc = TextScanner(now_s=0.0, batch_lines=8, overlap_lines=2)
    i = 0
    while i < len(lines):
        k = rng.randint(1, 5)
        sc.feed(lines[i:i + k])
        i += k
    sc.finish()
    return [(f.kind, f.summary, f.line) for f in sc.all_findings()]


# -- faulthandler's timer dump inside a collective, then the exit (real output) --------------------

def test_a_timer_dump_inside_a_barrier_then_exit_1_is_a_hang():
    """dump_traceback_later(6, exit=True); rank 1 sleeps before the barrier: rank 0's dump shows it in
    dist.barrier, faulthandler ends it with _exit(1) and torchrun reports `failed (exitcode: 1)`."""
    lines = _log(LOGS / "faulthandler_barrier_k14.log")
    found = _final(lines)
    assert _kinds(found) == ["crash", "hang"], [f.summary for f in found]
    (h,) = [f for f in found if f.kind == "hang"]
    assert "Timeout (0:00:06)!" in h.summary and "barrier (torch/distributed/distributed_c10d.py:5356)" in h.summary
    assert any("line 5356 in barrier" in e for e in h.evidence), h.evidence
    whole = [(f.kind, f.summary, f.line) for f in found]
    for seed in range(6):  # the header, the thread's frame and the exit report in different batches
        assert _streamed(lines, seed) == whole


def test_a_timer_dump_inside_a_barrier_that_then_passes_stays_quiet():
    """exit=False: rank 0 dumps inside the barrier after 3 s, rank 1 arrives at 6 s, both train and end."""
    lines = _log(LOGS / "faulthandler_barrier_slow_k14.log")
    assert _kinds(_final(lines)) == [], [f.summary for f in _final(lines)]
    for seed in range(3):
        assert [k for k, _, _ in _streamed(lines, seed) if k in ("crash", "hang")] == []


def test_a_timer_dump_outside_any_collective_then_exit_1_is_only_the_death():
    """The same run with only rank 1's dump (a thread in the user's own sleep): no rank waited for the
    others there; the launcher's report of the death stays what it is."""
    lines = _log(LOGS / "faulthandler_barrier_k14.log")
    a = next(i for i, x in enumerate(lines) if "line 5356 in barrier" in x)
    cut = lines[:a - 2] + lines[a + 3:]  # rank 0's `Timeout (...)!`, its thread header and three frames
    assert not any("in barrier" in x for x in cut)
    found = _final(cut)
    assert _kinds(found) == ["crash"], [f.summary for f in found]


def test_a_collective_further_up_the_dumped_stack_is_not_where_it_waits():
    """The innermost frame is the user's data loading; all_reduce is only its caller's caller."""
    lines = ["Timeout (0:10:00)!",
             "Thread 0x00007f257c5d3b80 (most recent call first):",
             '  File "/app/data.py", line 12 in read_shard',
             '  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2050 in all_reduce',
             '  File "/app/train.py", line 40 in <module>',
             "E1204 03:57:51.557000 16333 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
             "local_rank: 0 (pid: 16356) of binary: /usr/bin/python"]
    assert _hangs(lines) == []
    inside = [lines[0], lines[1], lines[3], lines[4], lines[5]]
    (s,) = _hangs(inside)
    assert "all_reduce (torch/distributed/distributed_c10d.py:2050)" in s and "0:10:00" in s, s


# -- py-spy --native (real output) ----------------------------------------------------------------

def test_a_native_pyspy_dump_of_a_rank_in_a_barrier_is_a_hang():
    """py-spy 0.4.3 `dump` and `dump --native` of rank 0 parked in dist.barrier (and of rank 1 asleep),
    pasted under the run's output: the native dump's libc/pybind frames stand above `barrier (...)`."""
    lines = _log(LOGS / "pyspy_native_barrier_k14.log")
    hangs = _hangs(lines)
    assert any("blocked in c10d::Work::wait (native frames)" in s and "inside barrier" in s for s in hangs), hangs
    native_only = lines[:lines.index(next(x for x in lines if x.startswith("Process ")))]
    start = [i for i, x in enumerate(lines) if x.startswith("Process ")]
    native_only += lines[start[1]:start[2]]  # the --native dump of rank 0 alone
    (s,) = _hangs(native_only)
    assert "thread 21140" in s and "c10d::Work::wait" in s, s


def test_a_native_pyspy_dump_of_a_sleeping_rank_stays_quiet():
    assert _kinds(_final(_log(LOGS / "pyspy_native_healthy_k14.log"))) == []


def test_a_native_frame_run_must_reach_the_thread_header():
    """A collective frame under a line that is neither a native frame nor the header (another
    Python frame: the collective is not the innermost) is not read."""
    lines = ['Thread 2834 (active): "MainThread"',
             "    pthread_cond_wait (libc.so.6)",
             "    forward (model.py:88)",
             "    all_reduce (torch/distributed/distributed_c10d.py:2050)",
             "    train (train.py:10)"]
    assert _hangs(lines) == []
    assert len(_hangs([lines[0], lines[1], lines[3], lines[4]])) == 1


# -- torchrun's agent stopped while joining the rendezvous (real output) ----------------------------

def test_a_ctrl_c_of_the_agent_in_the_rendezvous_join_is_a_hang():
    """`torchrun --nnodes 2` started on one node; Ctrl-C after 10 s: the agent's traceback ends in
    dynamic_rendezvous.py next_rendezvous -> the join op's run -> utils.py _delay."""
    lines = _log(LOGS / "torchrun_rdzv_join_ctrl_c_k14.log")
    found = _final(lines)
    assert _kinds(found) == ["crash", "hang"], [f.summary for f in found]
    (s,) = _hangs(lines)
    assert "rendezvous join (next_rendezvous, dynamic_rendezvous.py:1171" in s and "KeyboardInterrupt" in s, s


def test_a_ctrl_c_of_the_agent_in_its_monitor_loop_stays_a_stop():
    """The same agent once its workers run: the Ctrl-C lands in `_invoke_run`'s `time.sleep(monitor_interval)`
    (the frames of tests/data/logs/pyspy_native_barrier_k14.log's SIGTERM): a parent waiting for its children."""
    lines = _log(LOGS / "torchrun_rdzv_join_ctrl_c_k14.log")
    cut = next(i for i, x in enumerate(lines) if "in _invoke_run" in x)
    monitor = ['  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", '
               'line 923, in _invoke_run',
               "    time.sleep(monitor_interval)",
               "KeyboardInterrupt"]
    assert _hangs(lines[:cut] + monitor) == []


def test_a_rendezvous_join_whose_innermost_frame_is_elsewhere_is_not_read():
    """A frame outside torch/distributed/elastic/rendezvous/ inside the join (a user's rendezvous handler
    plugin doing its own work) is not the join's own poll."""
    lines = _log(LOGS / "torchrun_rdzv_join_ctrl_c_k14.log")
    at = next(i for i, x in enumerate(lines) if "in _delay" in x)
    plugin = lines[:at] + ['  File "/opt/site/my_rdzv/plugin.py", line 12, in _delay', "    compute()", "KeyboardInterrupt"]
    assert _hangs(plugin) == []


# -- RETURNN's excepthook line (training-split pastes) ---------------------------------------------

def test_returnns_unhandled_exception_in_the_main_thread_is_a_crash():
    """rwth-i6/returnn#1484: train steps, then `Unhandled exception <class 'RuntimeError'> in thread
    <_MainThread(...)>, proc 2834.` and the start of its thread dump -- the traceback never came."""
    found = _final(_log(PASTED / "rwth-i6_returnn-1484.log"))
    assert _kinds(found) == ["crash"], [f.summary for f in found]
    assert any("RuntimeError unhandled in the main thread of proc 2834" in f.summary for f in found)


def test_returnns_excepthook_line_for_a_ctrl_c_or_a_side_thread_stays_quiet():
    """returnn/util/debug.py returns right after the line for a KeyboardInterrupt (a stop), and a side
    thread's exception has its own wording; neither is this rule's."""
    base = ["ep 3 train, step 17, ce 0.424, fer 0.088, mem_usage:cuda:0 7.3GB"]
    ctrl_c = base + ["Unhandled exception <class 'KeyboardInterrupt'> in thread <_MainThread(MainThread, started "
                     "139628628058112)>, proc 2834."]
    assert _kinds(_final(ctrl_c)) == []
    side = base + ["Unhandled exception <class 'RuntimeError'> in thread <Thread(QueueFeederThread, started daemon "
                   "139622650693184)>, proc 2834."]
    assert _kinds(_final(side)) == []


# -- TCPStore's client retry warning (real output) -------------------------------------------------

def test_tcpstores_retry_warning_with_its_frames_is_neither_a_timeout_nor_a_raise():
    """The client's `... - retrying (try=0, timeout=600000ms, delay=3647ms): Interrupted system call` warning
    carries the socket error's c10::Error frames; `timeout=` is its budget. Followed by training (the real
    steps of the same program once its master came up), the text is healthy; alone, it is a paste that ends."""
    warning = _log(LOGS / "tcpstore_client_retry_interrupted_k14.log")
    assert any("- retrying (try=0, timeout=600000ms" in x for x in warning)
    assert _kinds(_final(warning)) == []
    trained = warning + ["rank 1: initialised", "rank 1: step 1 loss 0.0496", "rank 1: step 2 loss 0.2965",
                         "rank 1: step 3 loss 0.0469", "rank 1: finished"]
    assert _kinds(_final(trained)) == []


def test_a_c10d_timeout_raised_from_the_store_is_still_a_hang_and_its_frames_still_a_raise():
    """The same origin line under a raised `DistStoreError: Socket Timeout` (no warning prefix, no retry)."""
    lines = ["torch.distributed.DistStoreError: Socket Timeout",
             "Exception raised from doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:550 (most recent call first):",
             "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /x/lib/libc10.so)"]
    found = _final(lines)
    assert "hang" in _kinds(found), [f.summary for f in found]
    w = _log(LOGS / "tcpstore_client_retry_interrupted_k14.log")
    at = next(i for i, x in enumerate(w) if x.startswith("Exception raised from"))
    raised = ["RuntimeError: connect failed"] + w[at:]  # the frames under a raised error's message
    assert "crash" in _kinds(_final(raised)), [f.summary for f in _final(raised)]
