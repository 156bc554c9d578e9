"""Hang shapes of the torch.distributed family (issue 22, index-j): the wordings that
ProcessGroupNCCL prints when a collective timed out but this rank's own `Watchdog caught
...` line is not in the text -- the heartbeat monitor's dump signal, received from the
rank that saw the timeout or raised on this one (ProcessGroupNCCL.cpp
getNCCLWatchdogTimeoutErrorMsg), and TORCH_NCCL_BLOCKING_WAIT's own report
(WorkNCCL::synchronizeInternal). Each text is a training-split paste of index-j, beside a
healthy one of the same family that must stay quiet."""

from __future__ import annotations

import pytest

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# lsdefine/simple_GRPO#46 (rank 5 got rank 2's signal; its own works all completed)
DUMP_FROM_RANK = ["[rank5]:[E723 01:58:45.667329643 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
                  "Received a dump signal due to a collective timeout from  rank 2 and we will try our best to dump the "
                  "debug info. Last enqueued NCCL work: 136, last completed NCCL work: 136.This is most likely caused by "
                  "incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not "
                  "same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be "
                  "caused by GIL deadlock or other reasons such as network errors or bugs in the communications library "
                  "(e.g. NCCL), etc. "]

# meta-pytorch/torchtune#2651: the terminal wrapped the line after "this local "
DUMP_LOCAL_WRAPPED = [
    "[rank7]:[E430 05:09:48.083703086 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received a dump "
    "signal due to a collective timeout from this local ",
    "rank and we will try our best to dump the debug info. Last enqueued NCCL work: 9387, last completed NCCL work: "
    "9386.This is most likely caused by incorrect usages of ",
]

# huggingface/diffusers#12422
BLOCKING_WAIT = ["[rank3]:[E1002 18:16:40.711756918 ProcessGroupNCCL.cpp:756] [Rank 3] Work WorkNCCL(SeqNum=2521, "
                 "OpType=ALLREDUCE, NumelIn=160672064, NumelOut=160672064, Timeout(ms)=600000) timed out in blocking "
                 "wait."]


def test_a_dump_signal_from_another_rank_is_a_collective_timeout_naming_that_rank():
    (f,) = [f for f in _final(DUMP_FROM_RANK) if f.kind == "hang"]
    assert "rank 2's watchdog" in f.summary and "collective timed out" in f.summary, f.summary
    assert f.line == 1


def test_a_dump_signal_raised_on_this_rank_and_hard_wrapped_is_still_read():
    (f,) = [f for f in _final(DUMP_LOCAL_WRAPPED) if f.kind == "hang"]
    assert "this rank's watchdog" in f.summary, f.summary


def test_a_blocking_wait_timeout_is_a_hang_naming_its_collective():
    (f,) = [f for f in _final(BLOCKING_WAIT) if f.kind == "hang"]
    assert "blocking wait" in f.summary and "ALLREDUCE" in f.summary, f.summary


@pytest.mark.parametrize("lines", [
    # huggingface/diffusers#9500: the deprecation names NCCL_BLOCKING_WAIT, nothing timed out
    ["[W925 14:52:57.109944407 Utils.hpp:164] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated; use "
     "TORCH_NCCL_BLOCKING_WAIT instead (function operator())",
     "[W925 14:52:57.109972687 Utils.hpp:135] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
     "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())",
     "09/25/2024 14:52:57 - INFO - __main__ - Distributed environment: MULTI_GPU  Backend: nccl"],
    # hiyouga/LlamaFactory#7127: the Windows address warning of the c10d client socket
    ["[INFO|2025-03-02 19:39:21] llamafactory.cli:157 >> Initializing distributed tasks at: 127.0.0.1:28133",
     "[W socket.cpp:697] [c10d] The client socket has failed to connect to [WIN-57PDHSNQNT2]:28133 (system error: "
     "10049 - 在其上文中，该请求的地址无效。)."],
    # facebookresearch/fairseq#2329: NCCL's own WARN at start-up
    ["| distributed init (rank 1): tcp://master_ip:9000",
     "<2nd node server>:5359:5359 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
     "NCCL version 2.4.8+cuda10.1"],
    # meta-pytorch/torchtune#2885: gloo connected, checkpoint loaded
    ["[Gloo] Rank 3 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3",
     "INFO:torchtune.utils._logging:Instantiating model and loading checkpoint took 410.16 secs"],
])
def test_healthy_distributed_start_ups_stay_quiet(lines):
    assert _kinds(_final(lines)) == []
