"""Hangs of distributed stacks the readers did not know (issue 22, helper k13hangdist): Ascend HCCL's timeouts
(EI0002 notify wait, EI0006 socket, its own [Stage][Timeout] log lines, torch_npu's `Some HCCL operations ...`),
torch.distributed.rpc's call timeout, and gloo shapes not in the last round's logs (a point-to-point recv that
never comes, broadcast_object_list, TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper check). Real logs made here with
torch 2.13.0+cpu, gloo, under torchrun (programs: tests/data/logs/gloo_hang_programs_k13.py.txt); HCCL is
NPU-only, so its lines are the training-split pastes (index-zg) or built from the cited wordings. Each shape has a
healthy counter-example full of the same words."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import summaries_by_kind as _by_kind

LOGS = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def _pasted(name: str) -> list[str]:
    return (PASTED / f"{name}.log").read_text(encoding="utf-8").splitlines()


# --- HCCL EI0002: a collective's notify wait ran past HCCL_EXEC_TIMEOUT (pasted, training split) ---------------

def test_ei0002_notify_wait_timeout_is_a_hang():
    for name in ("InternLM_lmdeploy-3354", "hiyouga_LlamaFactory-975"):
        found = _by_kind(_pasted(name))
        assert list(found) == ["hang"], (name, found)
        assert any("EI0002" in s and "HCCL_EXEC_TIMEOUT" in s for s in found["hang"]), found


def test_ei0002_names_a_real_remote_rank_only():
    line = ("[rank3]: EI0002: [PID: 41] 2025-05-01-10:00:00.000.000 The wait execution of the Notify register times out. "
            "Reason: The Notify register has not received the Notify record from remote rank: [5]. base information: "
            "[streamID:[2], taskID[7], taskType[Notify Wait], tag[AllReduce_x]].")
    (summary,) = _by_kind([line])["hang"]
    assert "remote rank 5 never posted" in summary
    (unknown,) = _by_kind(_pasted("hiyouga_LlamaFactory-975"))["hang"]
    assert "4294967295" not in unknown and "remote rank" not in unknown


def test_hccl_timeout_settings_and_config_warnings_are_quiet():
    """torch_npu's own start-up warnings about the timeouts (Ascend/pytorch torch_npu/csrc/distributed/
    ProcessGroupHCCL.cpp:1156-1165 and :2769-2771 at 9e73e708), HCCL's communicator-init INFO line (hicann/hccl
    docs/zh/user_guide/fault_diagnosis/task_exec_stage.md:151), and pasted launch-script/docs diffs that set them."""
    healthy = [
        "[W compiler_depend.ts:1000] Warning: The value of HCCL_EVENT_TIMEOUT:1800 is less than or equal to the value "
        "of HCCL_EXEC_TIMEOUT:1836. (function operator())",
        "[W compiler_depend.ts:1000] Warning: When creating an HCCL process group using the RANK_TABLE_FILE method, "
        "the connection may time out. It is recommended to set the timeout duration of HCCL_CONNECT_TIMEOUT to 300 "
        "seconds or more. (function operator())",
        "[INFO] HCCL(2111667,all_reduce_test):2025-10-24-11:16:52.724.374 [op_base.cc:1292] [2111667]Entry-"
        "HcclCommInitRootInfoInner:ranks[4], rank[2], rootinfo: host ip[127.10.0.1] port[60000] nicDeploy[1] "
        "identifier[127.10.0.1%enp_60000_0_1761275812718970], deviceLogicId[2]",
        "export HCCL_CONNECT_TIMEOUT=1800 HCCL_EXEC_TIMEOUT=1836  # notify waits time out after 1836 s",
    ]
    assert _by_kind(healthy) == {}
    for name in ("the-seeds_LLaMA-Factory-Doc-27", "mindspore-lab_mindone-270", "InternLM_lmdeploy-3628"):
        assert _by_kind(_pasted(name)) == {}, name


def test_hccp_init_failure_is_a_crash_not_a_hang():
    """EJ0001 (`Failed to initialize the HCCP process ... Maybe the last training process is running`, with `tsd
    client wait response fail`) fails at once: the wait words in it are not a timeout."""
    for name in ("hiyouga_LlamaFactory-3839", "verl-project_verl-332"):
        found = _by_kind(_pasted(name))
        assert "crash" in found and "hang" not in found, (name, found)


# --- HCCL EI0006 and HCCL's own log lines (built from the cited wordings: NPU-only) ----------------------------

def test_ei0006_socket_timeout_is_a_hang():
    """ErrMessage `Getting socket times out. Reason: %s` of the HCCL error table (hicann/hcomm hcomm_g_msg)."""
    line = ("[rank1]: EI0006: [PID: 7] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did "
            "not send the data in time. Please check the reason for the rank being stuck")
    (summary,) = _by_kind([line])["hang"]
    assert "EI0006: Remote Rank did not send the data in time" in summary


def test_hccl_stage_timeout_log_lines_are_a_hang():
    """hicann/hccl docs/zh/user_guide/fault_diagnosis/param_link_stage.md:127,141 and task_exec_stage.md:118."""
    link = ("[ERROR] HCCL(17528,python3):2026-03-18-10:33:52.113.403 [hccl_socket_manager.cc:797] [18744][Wait]"
            "[LinkEstablish]wait socket establish timeout, role[1] rank[1] timeout[120 s]")
    task = ("[ERROR] HCCL(2111667,all_reduce_test):2025-10-24-11:18:29.597.044 [task_exception_handler.cc:908] "
            "[2111667][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21], "
            "tag[AllReduce_127.10.0.1%enp_60000_0_1761275812718970], AlgType(level 0-1-2):[fullmesh-ring-NHR].")
    assert any("after 120 s" in s for s in _by_kind([link])["hang"])
    assert any("TaskExecStage" in s for s in _by_kind([task])["hang"])
    # the stage tags without [Timeout] are HCCL's ordinary progress lines
    quiet = ["[INFO] HCCL(1,p):2025-10-24-11:16:52.000.000 [transport_manager.cc:100] [1][InitChannelStage]"
             "create link ok, timeout[120 s]"]
    assert _by_kind(quiet) == {}


def test_torch_npu_some_hccl_operations_line_is_a_hang():
    """Ascend/pytorch torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:991 at 9e73e708."""
    line = ("[rank0]:[E compiler_depend.ts:1000] [Rank 0] Some HCCL operations have failed or timed out. Due to the "
            "asynchronous nature of ASCEND kernels, subsequent NPU operations might run on corrupted/incomplete data.")
    assert "hang" in _by_kind([line])


# --- torch.distributed.rpc: a call past its rpc_timeout (real) ------------------------------------------------

def test_rpc_timeout_is_a_hang():
    found = _by_kind(_log("gloo_rpc_timeout.log"))
    assert any("rpc call timed out after 3 s" in s for s in found["hang"]), found


def test_healthy_rpc_with_its_timeout_printed_is_quiet():
    assert _by_kind(_log("gloo_healthy_rpc.log")) == {}


# --- gloo shapes (real) ----------------------------------------------------------------------------------------

def test_point_to_point_recv_never_sent_is_a_hang():
    found = _by_kind(_log("gloo_recv_never_sent.log"))
    assert any("recv waited 5 s" in s for s in found["hang"]), found


def test_broadcast_object_list_send_timeout_is_a_hang():
    found = _by_kind(_log("gloo_broadcast_object_send_timeout.log"))
    assert any("send waited 5 s" in s for s in found["hang"]), found


def test_distributed_debug_detail_wrapper_check_is_a_hang():
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: ProcessGroupWrapper checks each collective with a monitored barrier first,
    so a skipped all_reduce surfaces as `Ranks 1 failed to pass monitoredBarrier in 5000 ms`."""
    found = _by_kind(_log("gloo_detail_skipped_allreduce.log"))
    assert "hang" in found, found


def test_a_late_rank_under_detail_store_tracing_is_quiet():
    """rank 1 joins 12 s late; the store's trace lines show every rank waiting on its keys, then the run goes on."""
    lines = _log("gloo_healthy_late_rank_detail.log")
    assert any("wait key_count" in ln for ln in lines)
    assert _by_kind(lines) == {}


# --- TensorFlow collective timeouts and Ray collective's rendezvous (built from the cited source wordings) -----

def test_tf_collective_timeouts_are_a_hang():
    """tensorflow/core/common_runtime/base_collective_executor.cc at c117e91a (ExecuteAsync, CompleteParamsAsync),
    and StartAbort's wrapper `Collective ops is aborted by: ` around the same status."""
    for line in ("tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective has timed out during "
                 "execution.",
                 "E1203 12:00:00.000000 140 base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort "
                 "DEADLINE_EXCEEDED: Collective ops is aborted by: Collective has timed out waiting for other workers."):
        found = _by_kind([line])
        assert any("TensorFlow collective timed out" in s for s in found.get("hang", [])), (line, found)


def test_tf_collective_timeout_options_are_quiet():
    healthy = ["options = tf.distribute.experimental.CommunicationOptions(implementation=NCCL, timeout_seconds=600)",
               "I1203 12:00:00.000000 140 collective_param_resolver_distributed.cc:100] Collective group 1 of size 2 "
               "resolved; collectives time out after 600 s"]
    assert _by_kind(healthy) == {}


def test_ray_collective_rendezvous_timeout_is_a_hang():
    """python/ray/util/collective/collective_group/nccl_collective_group.py Rendezvous.meet at ray-project/ray
    2135df0b; its debug lines while it polls (`Trying to meet at the store`, `Successful rendezvous!`) are quiet."""
    line = ("(Worker pid=41) RuntimeError: Unable to meet other processes at the rendezvous store. If you are using "
            "P2P communication, please check if tensors are put in the correct GPU. ")
    assert any("Ray collective" in s for s in _by_kind([line])["hang"])
    quiet = ["(Worker pid=41) DEBUG nccl_collective_group.py:70 -- Trying to meet at the store 'abc'",
             "(Worker pid=41) DEBUG nccl_collective_group.py:75 -- Failed to meet at the store 'abc'.Trying again...",
             "(Worker pid=41) DEBUG nccl_collective_group.py:82 -- Successful rendezvous!"]
    assert _by_kind(quiet) == {}


def test_a_restart_whose_gloo_connect_is_refused_is_a_crash():
    """torchrun --max-restarts 1: rank 1 exits on purpose, the agent restarts the group and the new rank 0's
    connectFullMesh fails within ~2 s: `Gloo connectFullMesh failed with [.../pair.cc:152] timed out connecting:
    SO_ERROR: Connection refused` after `retryLimit=3` -- a refused connection, not a long wait. The readers also
    read the words "timed out" in it as a hang (dist-exception-timeout); that second reading is left open (a peer
    that never listens also refuses), so only the crash is asserted."""
    found = _by_kind(_log("gloo_restart_connect_refused.log"))
    assert any("connectFullMesh failed" in s for s in found["crash"]), found
