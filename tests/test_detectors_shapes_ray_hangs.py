"""Hang shapes of Ray and of the inference stacks on Ray (issue 22, index-k): each test names
the shape, reads a short text from a training-split pasted log, asserts the kind and the
summary's words, and asserts that a healthy counter-example stays quiet."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).parent / "corpus" / "pasted" / "logs"


# real-stanford/scalingup#6 (a markdown quote of the autoscaler's line)
INFEASIBLE = ["> (autoscaler +32s) Error: No available node types can fulfill resource request {'CPU': 1.0, "
              "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue."]


def test_ray_autoscaler_infeasible_request_is_a_hang_naming_the_request():
    (f,) = [f for f in _final(INFEASIBLE) if f.kind == "hang"]
    assert "no node type can ever fulfil {'CPU': 1.0, 'GPU': 1.0}" in f.summary, f.summary
    assert _kinds(_final(INFEASIBLE)) == ["hang"]


def test_ray_pending_trials_and_v2_queued_requests_are_not_the_infeasible_hang():
    """A Tune experiment placing its trials in turn (ray-project/ray#4467), and autoscaler v2's
    plural wording, which also lists requests that wait for a busy node's resources."""
    healthy = (LOGS / "ray-project_ray-4467.log").read_text().splitlines()
    assert _kinds(_final(healthy)) == []
    v2 = ["(autoscaler +1m5s) No available node types can fulfill resource requests {'CPU': 1.0, 'GPU': 1.0}*3. "
          "Add suitable node types to this cluster to resolve this issue."]
    assert _kinds(_final(v2)) == []


# ray-project/ray#59249 (vLLM's EngineCore on a Ray compiled graph)
CHANNEL = [
    '(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] File "python/ray/includes/common.pxi", line 123, '
    'in ray._raylet.check_status',
    "(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ray.exceptions.RayChannelTimeoutError: System error: "
    "Timed out waiting for object available to read. ObjectID: 007e768e7da845eb498bddc26311bb55310405340100000002e1f505",
]


def test_ray_compiled_graph_channel_timeout_is_a_hang_beside_its_crash():
    found = _final(CHANNEL)
    assert _kinds(found) == ["crash", "hang"]
    (h,) = [f for f in found if f.kind == "hang"]
    assert "RayChannelTimeoutError" in h.summary and "never produced its output" in h.summary, h.summary


def test_a_configured_compiled_graph_timeout_is_not_a_hang():
    """vLLM logs the timeout it set (vllm-project/vllm#19703's first line); a healthy engine
    that says so, then serves, is quiet."""
    healthy = ["INFO 06-12 10:46:22 [ray_distributed_executor.py:579] RAY_CGRAPH_get_timeout is set to 300",
               "INFO 06-12 10:46:40 [loggers.py:116] Engine 000: Avg prompt throughput: 12.1 tokens/s, Avg generation "
               "throughput: 35.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%"]
    assert _kinds(_final(healthy)) == []


# yahoo/TensorFlowOnSpark#422: a non-chief TF1 worker polling SessionManager.wait_for_session every 30 s
_NOT_READY = ("I0807 {t} 140518901212992 session_manager.py:436] Waiting for model to be ready.  "
              "Ready_for_local_init_op:  Variables not initialized: hid_w, hid_b, sm_w, sm_b, global_step, "
              "hid_w/Adagrad, hid_b/Adagrad, sm_w/Adagrad, sm_b/Adagrad, ready: None")


def test_tf_worker_polling_for_the_chiefs_variables_for_minutes_is_a_hang():
    lines = (LOGS / "yahoo_tensorflowonspark-422.log").read_text().splitlines()
    (f,) = [f for f in _final(lines) if f.kind == "hang"]
    assert "waited 120 s for the chief to initialise" in f.summary, f.summary


def test_tf_worker_that_waits_one_poll_then_trains_is_healthy():
    """A worker that starts before the chief waits a poll or two, then trains; the same report
    printed twice without a clock (absl's INFO:tensorflow: copy) is not counted as more waiting."""
    healthy = [_NOT_READY.format(t="10:08:47.435833"), _NOT_READY.format(t="10:09:17.488526")]
    healthy += ["INFO:tensorflow:Waiting for model to be ready.  Ready_for_local_init_op:  None, ready: Variables "
                "not initialized: hid_w"] * 6
    healthy += (LOGS / "tensorflow_models-2980.log").read_text().splitlines()
    assert _kinds(_final(healthy)) == []


def test_torch_xla_mesh_client_giving_up_on_its_master_is_a_hang_and_the_crash_it_raises():
    """pytorch/xla#2651: XLA_CHECK(WaitForConnected(...)) failed, then `Failed to connect to client
    mesh master: ADDR` -- one hang (both lines say the same wait ran out) beside the crash."""
    found = _final((LOGS / "pytorch_xla-2651.log").read_text().splitlines())
    assert _kinds(found) == ["crash", "hang"]
    (h,) = [f for f in found if f.kind == "hang"]
    assert "mesh master" in h.summary and "XRT_MESH_CONNECT_WAIT" in h.summary, h.summary
    cut = _final((LOGS / "pytorch_xla-2604.log").read_text().splitlines())
    assert _kinds(cut) == ["crash", "hang"]


def test_torch_xla_waiting_for_its_mesh_master_at_start_up_then_training_is_healthy():
    healthy = ["2020-05-28 11:50:27.058553: I    7449 tensorflow/compiler/xla/xla_client/mesh_service.cc:208] Waiting "
               "to connect to client mesh master (300 seconds) 10.164.15.199:8477"]
    healthy += (LOGS / "pytorch_xla-6053.log").read_text().splitlines()
    assert _kinds(_final(healthy)) == []


def test_gdb_py_bt_parked_in_a_collective_is_a_hang_not_a_cut_off_traceback():
    """deepspeedai/DeepSpeed#1969: gdb's `py-bt` (most recent call FIRST) of a live rank whose
    innermost frame is torch.distributed's all_reduce. It is a debugger's stack dump, not an
    exception being raised: no crash, whatever its last frame."""
    found = _final((LOGS / "deepspeedai_deepspeed-1969.log").read_text().splitlines())
    assert _kinds(found) == ["hang"]
    (h,) = found
    assert "gdb's py-bt" in h.summary and "all_reduce (distributed_c10d.py:1209)" in h.summary, h.summary


def test_a_raised_traceback_through_all_reduce_and_a_py_bt_elsewhere_are_not_that_hang():
    raised = ["Traceback (most recent call last):",
              '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage2.py", line 1326, in '
              'allreduce_bucket',
              "    dist.all_reduce(tensor_to_allreduce, group=self.dp_process_group)",
              '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 1209, in '
              'all_reduce',
              "    work = group.allreduce([tensor], opts)",
              "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error"]
    assert "hang" not in _kinds(_final(raised))
    elsewhere = ["(gdb) py-bt", "Traceback (most recent call first):",
                 '  File "/opt/conda/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1133, in '
                 '_try_get_data',
                 '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 1209, '
                 'in all_reduce']
    assert _kinds(_final(elsewhere)) == []


# ROCm/xla#968 (an H100 run of the same HLO hangs)
XLA_STUCK = ["rendezvous.cc:116] This thread has been waiting for `Acquire clique: devices=4:[1,2,3,5]; "
             "local_participants=4 ...` for 10 seconds and may be stuck. Expected 4 threads to join the rendezvous, "
             "but not all of them arrived on time."]


def test_xla_rendezvous_may_be_stuck_with_no_unstuck_where_final_text_ends_is_a_hang():
    (f,) = [f for f in _final(XLA_STUCK) if f.kind == "hang"]
    assert "XLA collective stuck" in f.summary and "Acquire clique" in f.summary, f.summary
    old = (LOGS / "pytorch_xla-3898.log").read_text().splitlines()  # collective_ops_utils.h's 5000ms wording
    assert _kinds(_final(old)) == ["hang"]


def test_xla_rendezvous_warning_followed_by_unstuck_and_a_live_read_are_not_a_hang():
    """XLA's own false-positive notice (rendezvous.cc: `Thread is unstuck! Warning above was a
    false-positive. Perhaps the timeout is too short.`) ends the wait; a live read (scan_lines
    alone) never judges the warning -- the notice may be the next line."""
    from controller.judge import ScanState, scan_lines
    healthy = XLA_STUCK + ["rendezvous.cc:128] Thread is unstuck! Warning above was a false-positive. Perhaps the "
                           "timeout is too short."]
    healthy += (LOGS / "pytorch_xla-6053.log").read_text().splitlines()
    assert _kinds(_final(healthy)) == []
    assert _kinds(scan_lines(XLA_STUCK, now_s=0.0, state=ScanState())) == []


def test_xla_termination_timeout_is_a_hang_at_once():
    line = ("F0213 13:11:17.931882   59040 rendezvous.cc:140] Termination timeout for `rendezvous of collective-permute; "
            "run_id=15; op id:1` of 40 seconds exceeded. Exiting to ensure a consistent program state. Expected 8 "
            "threads to join the rendezvous, but not all of them arrived on time.")
    from controller.judge import ScanState, scan_lines
    (f,) = [f for f in scan_lines([line], now_s=0.0, state=ScanState()) if f.kind == "hang"]
    assert "termination timeout (40 s)" in f.summary, f.summary


def test_a_timeout_raised_inside_a_torch_distributed_collective_is_a_hang_beside_the_crash():
    """dmlc/dgl#3629: `dist.all_reduce` -> distributed_c10d.py all_reduce -> `RuntimeError: Socket
    Timeout` (no NCCL/gloo word in the message for a rule to read)."""
    found = _final((LOGS / "dmlc_dgl-3629.log").read_text().splitlines())
    assert _kinds(found) == ["crash", "hang"]
    (h,) = [f for f in found if f.kind == "hang"]
    assert "all_reduce (distributed_c10d.py:1285)" in h.summary and "Socket Timeout" in h.summary, h.summary


def test_a_timeout_elsewhere_or_another_error_in_a_collective_is_only_a_crash():
    hub = ["Traceback (most recent call last):",
           '  File "/opt/conda/lib/python3.8/site-packages/huggingface_hub/file_download.py", line 1261, in hf_hub_download',
           "    r = _request_wrapper(",
           "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. "
           "(read timeout=10)"]
    assert _kinds(_final(hub)) == ["crash"]
    nccl = ["Traceback (most recent call last):",
            '  File "train_dist.py", line 171, in pad_data',
            "    dist.all_reduce(num_nodes, dist.ReduceOp.MAX)",
            '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 1285, in '
            'all_reduce',
            "    work = default_pg.allreduce([tensor], opts)",
            "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, invalid usage"]
    assert _kinds(_final(nccl)) == ["crash"]


_VLLM = ("INFO 02-06 {t} metrics.py:467] Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} tokens/s, "
         "Running: {r} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.")


def test_vllm_stats_with_requests_running_and_no_tokens_for_minutes_is_a_hang():
    """vllm-project/vllm#12795: 0.0/0.0 tokens/s with 1 running request every 31 s, 00:40:43-00:43:18."""
    (f,) = [f for f in _final((LOGS / "vllm-project_vllm-12795.log").read_text().splitlines()) if f.kind == "hang"]
    assert "stopped generating: 155 s" in f.summary, f.summary


def test_vllm_zero_reports_between_working_ones_or_while_idle_are_healthy():
    """A 0.0 report then tokens (vllm-project/vllm#2595's first records, here one a line), pauses
    between working reports, and an idle server (Running: 0) stay quiet."""
    paused = [_VLLM.format(t="00:40:43", p="0.0", g="0.0", r=1), _VLLM.format(t="00:41:43", p="0.0", g="77.3", r=1),
              _VLLM.format(t="00:42:43", p="0.0", g="0.0", r=1), _VLLM.format(t="00:43:43", p="0.0", g="76.8", r=1),
              _VLLM.format(t="00:44:43", p="0.0", g="0.0", r=1)]
    assert _kinds(_final(paused)) == []
    idle = [_VLLM.format(t=f"00:{m:02d}:00", p="0.0", g="0.0", r=0) for m in range(10, 30)]
    assert _kinds(_final(idle)) == []
    assert _kinds(_final((LOGS / "vllm-project_vllm-2595.log").read_text().splitlines())) == []


_PG = ("(EngineCore pid=84) INFO 06-07 18:{m} [ray_utils.py:464] Waiting for creating a placement group of specs for "
       "{s} seconds. specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` and `ray list nodes` to see if you have "
       "enough resources.")


def test_vllm_still_waiting_for_its_placement_group_at_150_s_is_a_hang():
    """gpustack/gpustack#5509 (150 s); vLLM's own give-up, `Cannot provide a placement group ... within 1800 seconds`."""
    (f,) = [f for f in _final((LOGS / "gpustack_gpustack-5509.log").read_text().splitlines()) if f.kind == "hang"]
    assert "placement group: still waiting after 150 s" in f.summary, f.summary
    given_up = ["ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0}, {'GPU': 1.0}] "
                "within 1800 seconds. See `ray status` to make sure the cluster has enough resources."]
    assert "hang" in _kinds(_final(given_up))


def test_vllm_placement_group_waits_of_the_first_intervals_then_serving_are_healthy():
    healthy = [_PG.format(m="13:55", s=10), _PG.format(m="14:15", s=30)]
    healthy += (LOGS / "vllm-project_vllm-30599.log").read_text().splitlines()
    assert _kinds(_final(healthy)) == []


def test_nemo_rl_asking_for_more_gpus_than_the_cluster_has_is_a_hang_and_fewer_is_not():
    (f,) = [f for f in _final((LOGS / "nvidia-nemo_rl-271.log").read_text().splitlines()) if f.kind == "hang"]
    assert "16 GPUs in a cluster of 8" in f.summary, f.summary
    fits = ["Not enough GPUs available. Requested 8 GPUs, but only 8 are available in the cluster.",
            "Retrying placement group creation... 1/6. Next retry in 1 seconds."]
    assert _kinds(_final(fits)) == []
