"""Hangs outside torch.distributed (issue 22, helper k12hangx): a watchdog timer's stack dump (CPython's
faulthandler, pytest-timeout), JAX's missed-heartbeat termination and Open MPI losing a node's daemon.
The faulthandler and pytest-timeout texts are real output of those libraries made here
(tests/data/logs/timer_dumps.txt says how); the others are training-split pastes or, where noted, the
cited source's wording. Each shape sits beside healthy text that must stay quiet."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_faulthandler_timer_dump_that_ends_the_text_is_a_hang_not_a_crash():
    """dump_traceback_later(3, exit=True) over a queue.get() that never returns: `Timeout (0:00:03)!`, every
    thread's stack, then _exit(1). The dump's frames are not a traceback cut off (no crash)."""
    found = _final(_log(LOGS / "faulthandler-timeout-hang.log"))
    assert _kinds(found) == ["hang"], [f.summary for f in found]
    (f,) = found
    assert "faulthandler" in f.summary and "0:00:03" in f.summary and f.line == 5


def test_faulthandler_timer_dump_followed_by_more_output_stays_quiet():
    """exit=False: the timer dumps during a slow step and the run goes on to finish -- slow, not stuck."""
    assert _kinds(_final(_log(LOGS / "faulthandler-timeout-slow.log"))) == []
    # pasted vulnerability-lookup/vulnerability-lookup#591: the dump, then `1 passed in 4.00s`
    assert _kinds(_final(_log(PASTED / "vulnerability-lookup_vulnerability-lookup-591.log"))) == []


def test_pytest_faulthandler_timeout_glued_behind_the_progress_text_is_a_hang():
    """pytest's faulthandler_timeout prints `Timeout (0:00:03)!` right after `test_train_step.py `."""
    found = _final(_log(LOGS / "pytest-faulthandler-timeout.log"))
    assert _kinds(found) == ["hang"], [f.summary for f in found]


def test_a_launcher_prefixed_faulthandler_dump_is_a_hang():
    """determined-ai/determined#4245: `... [rank=0] || Timeout (0:00:30)!` then the dump, where the paste ends."""
    found = _final(_log(PASTED / "determined-ai_determined-4245.log"))
    assert _kinds(found) == ["hang"] and "0:00:30" in found[0].summary, [f.summary for f in found]


def test_a_live_read_does_not_call_a_timer_dump_a_hang_yet():
    """The next step may be the line after the dump: only final text is judged."""
    from controller.judge import ScanState, scan_lines

    st = ScanState()
    assert _kinds(scan_lines(_log(LOGS / "faulthandler-timeout-hang.log"), now_s=0.0, state=st)) == []


def test_fatal_signal_dump_stays_a_crash():
    """faulthandler's dump after a fatal signal is the crash `Fatal Python error` says, not a timer's hang."""
    found = _final(["Fatal Python error: Segmentation fault", "",
                    "Current thread 0x00007fb3335f5b80 (most recent call first):",
                    '  File "<string>", line 1 in <module>'])
    assert _kinds(found) == ["crash"], [f.summary for f in found]


def test_pytest_timeout_signal_method_failure_is_a_hang():
    """`E   Failed: Timeout (>3.0s) from pytest-timeout.` (pytest_timeout.py PYTEST_FAILURE_MESSAGE)."""
    found = _final(_log(LOGS / "pytest-timeout-signal.log"))
    assert _kinds(found) == ["hang"] and "3.0 s" in found[0].summary, [f.summary for f in found]
    # the older wording, `Failed: Timeout >300.0s` (pytest-timeout < 2.4's pytest.fail("Timeout >%ss"))
    assert _kinds(_final(["E       Failed: Timeout >300.0s"])) == ["hang"]


def test_pytest_timeout_thread_method_banner_and_stack_is_a_hang_not_a_crash():
    """`+++ Timeout +++`, `~~~ Stack of MainThread (...) ~~~` and its frames, `+++ Timeout +++`, os._exit(1)."""
    found = _final(_log(LOGS / "pytest-timeout-thread.log"))
    assert _kinds(found) == ["hang"], [f.summary for f in found]


def test_pytest_timeout_header_of_a_passing_run_stays_quiet():
    """`timeout: 5.0s` / `timeout method: signal` / `timeout func_only: False` and `2 passed`."""
    assert _kinds(_final(_log(LOGS / "pytest-timeout-healthy.log"))) == []


def test_xla_missed_heartbeats_termination_is_a_hang():
    """Built from the cited source's wording (openxla/xla xla/pjrt/distributed/client.h at 001918b7024c,
    Options::missed_heartbeat_callback): a JAX multi-process run on a pod cannot be made here."""
    found = _final(["F0501 10:00:00.000000  123 client.h:77] Terminating process because the coordinator detected "
                    "missing heartbeats. This most likely indicates that another task died; see the other task logs "
                    "for more details. Status: "])
    assert "hang" in _kinds(found) and any("heartbeats" in f.summary for f in found), [f.summary for f in found]
    found = _final(["Terminating process because of missing heartbeat response from the coordinator. This most "
                    "likely indicates that the coordinator task died; see the coordinator's task logs for more details."])
    assert _kinds(found) == ["hang"] and "coordinator stopped answering" in found[0].summary


def test_heartbeat_settings_stay_quiet():
    healthy = ["I0501 10:00:00.000000 123 distributed.py:90] Connecting to JAX distributed service on 10.0.0.2:8476",
               "jax.distributed.initialize(coordinator_address='10.0.0.2:8476', num_processes=4, process_id=0, "
               "heartbeat_timeout_seconds=100)",
               "step 100 loss 2.3104 heartbeat ok"]
    assert _kinds(_final(healthy)) == []


def test_open_mpi_losing_a_daemon_is_a_crash():
    """garyexplains/examples#13 (`ORTE has lost communication with a remote daemon.`) and
    aws/aws-parallelcluster#301 (`... with its daemon located on node:`): mpirun ends the job."""
    for name in ("garyexplains_examples-13", "aws_aws-parallelcluster-301"):
        found = _final(_log(PASTED / f"{name}.log"))
        assert _kinds(found) == ["crash"] and "ORTE" in found[0].summary, (name, [f.summary for f in found])


def test_mpi_communication_words_stay_quiet():
    healthy = ["[node01:12345] mca_oob_tcp: using interface eth0 for out-of-band communication",
               "Epoch 3: lost 0 packets; communication with the remote daemon is fine",
               "mpirun: all 8 ranks finished; job terminated normally"]
    assert _kinds(_final(healthy)) == []


def test_horovod_stall_inspector_report_is_a_hang():
    """google/automl#563: `[1,0]<stderr>:` mpirun-prefixed stall warning, then `Stalled ranks:` per rank."""
    found = _final(_log(PASTED / "google_automl-563.log"))
    assert _kinds(found) == ["hang"], [f.summary for f in found]


def test_horovod_stall_shutdown_line_alone_is_a_hang():
    """Built from the cited source's wording (horovod/horovod horovod/common/stall_inspector.cc lines 100-104 at
    2626dc87): a run past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; a multi-rank Horovod run cannot be made here."""
    found = _final(['One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.'])
    assert _kinds(found) == ["hang"], [f.summary for f in found]


def test_horovod_stall_settings_warning_stays_quiet():
    """stall_inspector.cc line 37's own settings warning (`..., will not shutdown.`) and a training line."""
    healthy = ["[2021-03-01 12:00:00.123456: W /tmp/pip-req-build-x/horovod/common/stall_inspector.cc:37] "
               "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS is less than HOROVOD_STALL_CHECK_TIME_SECONDS, will not shutdown.",
               "Epoch 1/10",
               "391/391 [==============================] - 41s 105ms/step - loss: 1.4213 - accuracy: 0.4871"]
    assert _kinds(_final(healthy)) == []


def test_lightning_timer_stop_stays_quiet():
    """Lightning-AI/pytorch-lightning#7778: the Timer callback's planned stop (`Signaling Trainer to stop.`)."""
    assert _kinds(_final(_log(PASTED / "lightning-ai_pytorch-lightning-7778.log"))) == []
