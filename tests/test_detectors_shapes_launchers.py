"""Shapes from the launcher / NCCL pastes of index-zb (issue 22, helper k12launch), each on
a short text from a training-split log, each beside a healthy text that must stay quiet."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# -- NCCL's back trace reaching a thread's top (controller/judge/nccl_backtrace.py) ---------------------
# NVIDIA/nccl-tests#252: an IB completion error, its `-> 6` chain, the progress thread leaving its loop.
IB_PROGRESS = [
    "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with "
    "error 4, opcode 5327, len 5327, vendor err 81 (Send)",
    "kolyoz2:25146:25854 [0] NCCL INFO transport/net.cc:1137 -> 6",
    "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:698 -> 6",
    "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
    "kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
]

# NVIDIA/nccl-tests#166: a socket the peer closed, init's chain out of the [Async thread], another
# thread's chain interleaved.
SOCKET_INIT = [
    "gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
    "gpu004.ds-a4-r02.abc.com<55693>",
    "gpu004:2200689:2200706 [3] NCCL INFO misc/socket.cc:749 -> 6",
    "",
    "gpu004:2200689:2200706 [3] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f4774cc9620",
    "gpu004:2200689:2200706 [3] NCCL INFO transport/net.cc:288 -> 3",
    "gpu004:2200689:2200704 [1] NCCL INFO bootstrap.cc:546 -> 3",
    "gpu004:2200689:2200706 [3] NCCL INFO init.cc:1358 -> 3",
    "gpu004:2200689:2200706 [3] NCCL INFO group.cc:65 -> 3 [Async thread]",
]

# NVIDIA/nccl-tests#188: the proxy service's own WARN; the cause is the same thread's WARN above it.
PROXY_SERVICE = [
    "user:695832:695921 [1] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
    "192.168.1.10<48899>",
    "user:695832:695921 [1] NCCL INFO misc/socket.cc:749 -> 6",
    "user:695832:695921 [1] NCCL INFO proxy.cc:1377 -> 6",
    "",
    "user:695832:695921 [1] proxy.cc:1519 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from "
    "rank 9, retcode 6",
]


def test_nccl_back_trace_out_of_the_progress_thread_is_a_crash():
    (f,) = [f for f in _final(IB_PROGRESS) if f.kind == "crash"]
    assert "proxy progress thread" in f.summary and "ncclRemoteError" in f.summary, f.summary
    assert "Got completion from peer" in f.summary and f.line == 4


def test_nccl_back_trace_out_of_the_init_thread_names_the_same_threads_last_warn():
    (f,) = [f for f in _final(SOCKET_INIT) if f.kind == "crash"]
    assert "communicator init failed" in f.summary and "ncclInternalError, 3" in f.summary, f.summary
    assert f.summary.endswith("Socket recv failed while polling for opId=0x7f4774cc9620")


def test_a_failed_proxy_service_operation_is_a_crash_caused_by_the_warn_above():
    (f,) = [f for f in _final(PROXY_SERVICE) if f.kind == "crash"]
    assert "proxy service failed to execute Connect" in f.summary, f.summary
    assert "Connection closed by remote peer 192.168.1.10" in f.summary


def test_a_back_trace_that_reaches_no_thread_top_is_not_read():
    """A cleanup path prints `-> N` too (checks.h NCCLCHECKIGNORE); without the thread's top
    nothing says the communicator ended."""
    assert _kinds(_final(IB_PROGRESS[:3])) == []


def test_healthy_nccl_chatter_with_warns_arrows_and_service_thread_closes_is_quiet():
    # microsoft/MeshTransformer#38 (WARN at start-up, socket fallback), autoscriptlabs/nccl-mesh-plugin#56
    # (ring set-up `-> 1[0] [send]`), aws/aws-k8s-tester#454 (teardown's service-thread closes)
    lines = [
        "2020-11-08 20:25:49 [1,0]<stdout>:az-scus-v100-2-worker-mgfopa:994:994 [4] misc/ibvwrap.cc:63 NCCL WARN "
        "Failed to open libibverbs.so[.1]",
        "2020-11-08 20:25:49 [1,0]<stdout>:az-scus-v100-2-worker-mgfopa:994:994 [4] NCCL INFO NET/Socket : Using "
        "[0]ib0:172.16.1.10<0>",
        ":22901:22901 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/4",
        "[1,24]<stdout>:bert-mpi-training-worker-3:21:581 [0] NCCL INFO [Service thread] Connection closed by "
        "localRank 1",
        "[1,26]<stdout>:bert-mpi-training-worker-3:23:670 [0] NCCL INFO comm 0x55adee232c40 rank 26 nranks 32 "
        "cudaDev 2 busId 190 - Abort COMPLETE",
    ]
    assert _kinds(_final(lines)) == []


# -- torchelastic's failure report read row by row (rules.py elastic-report-death) ------------------------
# Topdu/OpenOCR#71: the Root Cause block alone (as pasted without its ChildFailedError header).
SIGBUS_ROOT = [
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-12-31_16:45:52",
    "  host      : server",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -7 (pid: 467397)",
    "  error_file: <N/A>",
    "  traceback : Signal 7 (SIGBUS) received by PID 467397",
]


def test_an_elastic_report_block_without_its_header_names_the_signal_once():
    found = [f for f in _final(SIGBUS_ROOT) if f.kind in ("crash", "oom")]
    assert [f.summary for f in found] == ["torchrun: a worker failed (exitcode -7, SIGBUS)"], found


def test_the_signal_row_alone_reads_the_same_death():
    assert [f.summary for f in _final(SIGBUS_ROOT[-1:]) if f.kind == "crash"] == [
        "torchrun: a worker failed (exitcode -7, SIGBUS)"]


def test_with_the_header_the_report_is_still_one_worker_failure():
    # Topdu/OpenOCR#71's header lines above the same block: child-failed's summary is the same finding
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "======================================================", "tools/train_rec.py FAILED",
             "------------------------------------------------------"] + SIGBUS_ROOT
    assert [f.summary for f in _final(lines) if f.kind == "crash"] == ["torchrun: a worker failed (exitcode -7, SIGBUS)"]


def test_a_python2_calledprocesserror_with_a_negative_status_names_the_signal():
    """Python 2 / 3.5's CalledProcessError.__str__ printed a signal as a negative status
    (MarvinTeichmann/MultiNet#61); 3.6+ says `died with <Signals...>` (subprocess-signal)."""
    (f,) = [f for f in _final(["subprocess.CalledProcessError: Command returned non-zero exit status -11"])
            if f.kind == "crash"]
    assert "SIGSEGV" in f.summary, f.summary


def test_elastic_start_up_and_a_positive_exitcode_row_give_no_signal_death():
    # kubeflow/trainer#1509 (a healthy agent start-up), zai-org/GLM-130B#100 (an exitcode 1 row: no signal)
    healthy = ["INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
               "  restart_count=0",
               "INFO:torch.distributed.elastic.multiprocessing:Setting worker0 reply file to: "
               "/log/none_ghgeo4qi/attempt_0/0/error.json"]
    assert _kinds(_final(healthy)) == []
    rows = ["  exitcode  : 1 (pid: 160924)", "  error_file: <N/A>",
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    assert not [f for f in _final(rows) if "SIG" in f.summary]
