"""Readers of structure added for the world's logs (issue 22), as units: each shape with
the wording a real program prints, and beside it a healthy line or log that must stay
quiet. The pasted corpus (tests/corpus/pasted/) measures them on real pastes; these pin
each shape down, including what a live read (the watch) must NOT conclude yet."""

from __future__ import annotations

import pytest

from controller.judge import ScanState, TextScanner, final_findings, scan_lines
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

CUT_TB = ["step=40 loss=2.1032",
          "Traceback (most recent call last):",
          '  File "/work/train.py", line 88, in <module>',
          "    main()",
          '  File "/work/train.py", line 61, in step',
          "    loss = model(batch).loss",
          '  File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, in _wrapped_call_impl',
          "    return self._call_impl(*args, **kwa"]


def test_a_traceback_cut_off_at_the_end_of_final_text_is_a_crash_naming_its_last_frame():
    (f,) = [f for f in _final(CUT_TB) if f.kind == "crash"]
    assert f.summary.startswith("traceback cut off, last frame at module.py:1518 in _wrapped_call_impl"), f.summary
    assert f.line == 2 and f.evidence[0] == CUT_TB[1]


def test_a_live_read_does_not_call_a_traceback_being_written_a_crash():
    """The watch scans each tick's new lines: a traceback whose last line arrived so far is
    still being printed. Only once the process ended (final_findings) is it judged."""
    st = ScanState()
    assert _kinds(scan_lines(CUT_TB, now_s=0.0, state=st)) == []
    more = ["    return forward_call(*args, **kwargs)", "RuntimeError: CUDA error: unspecified launch failure"]
    found = scan_lines(more, first_line_no=len(CUT_TB) + 1, now_s=0.0, state=st, context_before=CUT_TB)
    assert [f.summary.split(" at ")[0] for f in found if f.kind == "crash"] == [
        "RuntimeError: CUDA error: unspecified launch failure"]
    assert final_findings(st, 0.0) == []  # it ended: nothing was cut off
    st2 = ScanState()
    scan_lines(CUT_TB, now_s=0.0, state=st2)
    assert [f.kind for f in final_findings(st2, 0.0)] == ["crash"]
    assert final_findings(st2, 0.0) == []  # once


def test_a_stream_fed_in_pieces_judges_the_cut_off_only_at_finish():
    sc = TextScanner(now_s=0.0, batch_lines=2, overlap_lines=1)
    for line in CUT_TB:
        assert _kinds(sc.feed([line])) == []
    assert _kinds(sc.finish()) == ["crash"]


@pytest.mark.parametrize("tail", [
    ["/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will "
     "create 8 worker processes in total.", "  warnings.warn(_create_warning_msg("],
    CUT_TB[1:-1] + ["RuntimeError: boom (caught, retrying)", "INFO: retrying step 40 (attempt 2/3)",
                    "step=40 loss=2.1032"],
    ["  File name: ckpt/step_40.pt", "saved."],
])
def test_text_that_ends_after_a_warning_or_a_finished_traceback_is_no_cut_off(tail):
    assert not any("cut off" in f.summary for f in _final(["step=1 loss=2.0"] + tail))


def test_an_ipython_header_names_the_exception_of_a_cut_off_traceback():
    lines = ["OutOfMemoryError                          Traceback (most recent call last)",
             "Cell In[7], line 3",
             "      1 model = model.cuda()",
             "----> 3 out = model(x.cuda())",
             "File /opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py:1501, in Module._call_impl(self, *args)",
             "   1499         return forward_call(*args, **kwargs)"]
    (f,) = [f for f in _final(lines) if f.kind in ("oom", "crash")]
    assert f.kind == "oom" and f.summary.startswith("OutOfMemoryError: traceback cut off"), f.summary


def test_old_ipython_frames_and_rich_panels_are_tracebacks_too():
    old = ["/usr/local/lib/python3.7/dist-packages/tensorflow/python/keras/engine/training_v1.py in fit(self, x, y)",
           "    591         shuffle=shuffle,",
           "--> 593         steps_name='steps_per_epoch')",
           "    594 "]
    (f,) = _final(old)
    assert f.kind == "crash" and "training_v1.py in fit" in f.summary, f.summary
    rich = ["╭───────────────────── Traceback (most recent call last) ──────────────────────╮",
            "│ /work/train.py:41 in <module>                                                │",
            "│                                                                              │",
            "│   40 │   trainer = Trainer(devices=2)                                        │",
            "│ ❱ 41 │   trainer.fit(model)                                                  │",
            "│                                                                              │",
            "│ /opt/conda/lib/python3.10/site-packages/lightning/pytorch/trainer/trainer.py │",
            "│ :539 in fit                                                                  │"]
    (f,) = _final(rich)
    assert f.kind == "crash" and "cut off" in f.summary, f.summary
    healthy = ["┏━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━┓",
               "┃   ┃ Name  ┃ Type             ┃ Params ┃",
               "┡━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━┩",
               "│ 0 │ model │ GPT2LMHeadModel  │  124 M │",
               "│ 1 │ loss  │ CrossEntropyLoss │      0 │",
               "└───┴───────┴──────────────────┴────────┘",
               "Epoch 0:  10%|█         | 10/100 [00:02<00:18, 4.9it/s, v_num=0, train_loss=3.21]"]
    assert _kinds(_final(healthy)) == []


@pytest.mark.parametrize(("line", "kind", "words"), [
    ("Epoch 3:  20%|██        | 11/56 [00:02<00:08,  5.02it/s]Segmentation fault (core dumped)", "crash", "SIGSEGV"),
    ("{'loss': 1.0931, 'learning_rate': 4.9e-05, 'epoch': 0.12}Killed", "oom", "SIGKILL"),
    ("100%|██████████| 3/3 [00:01<00:00,  2.10it/s]Aborted (core dumped)", "crash", "SIGABRT"),
    ("step 12 | loss 2.31 | Bus error (core dumped)", "crash", "SIGBUS"),
    ("WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting down "
     "workers", "crash", "SIGTERM"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 4150 got signal: 15", "crash", "SIGTERM"),
    ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.", "crash", "Ray"),
    ("Out of memory error on GPU 0. Cannot allocate 128.000000MB memory on GPU 0, 7.995605GB memory has been "
     "allocated and available memory is only 0.000000B.", "oom", "ResourceExhaustedError"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape"
     "[64,512,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
     "oom", "TensorFlow"),
    ("(1) Resource exhausted: Attempting to allocate 180.59M. That was not possible. There are 142.58M free.; "
     "(0x3x0_HBM1)", "oom", "Resource exhausted"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
     "memory in memory space hbm. Used 17.51G of 15.48G hbm.", "oom", "XLA"),
    ("RuntimeError: HIP error: hipErrorOutOfMemory", "oom", "hipErrorOutOfMemory"),
    ("[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2048, "
     "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 180", "hang", "NCCL collective timed out"),
    ("0457 milliseconds before timing out.", "hang", "NCCL collective timed out"),
    ("Evaluating: 100%|██████████| 50/50 [00:31<00:00]torch.distributed.DistStoreError: Socket Timeout",
     "hang", "store"),
    ("tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:", "crash", "TensorFlow"),
    ("[2026-12-01 10:00:00,123] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 41234", "crash", "launcher"),
    ("Rank 3: found NaN in local grad norm in backward pass before data-parallel communication collective",
     "nan", "NaN"),
    ("OSError: [Errno 12] Cannot allocate memory", "oom", "ENOMEM"),
    ("W tensorflow/core/common_runtime/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory trying to "
     "allocate 2.19GiB (rounded to 2353528832)requested by op Conv2D", "oom", "TensorFlow"),
    ("*** SIGSEGV (@0x0) received by PID 8165 (TID 0x7f508c855700) from PID 0 ***", "crash", "SIGSEGV"),
    ("[rank0]: Ranks 1 failed to pass monitoredBarrier in 1800000 ms", "hang", "ranks"),
])
def test_shapes_of_failure(line, kind, words):
    found = _final(["step=1 loss=2.0", line])
    assert kind in _kinds(found), [(f.kind, f.summary) for f in found]
    assert any(words in f.summary for f in found if f.kind == kind), [f.summary for f in found]


@pytest.mark.parametrize("line", [
    "fix: Segmentation fault when loading a corrupted checkpoint is now a clear error",
    "INFO: Killed 3 stale dataloader workers from the previous run; starting",
    "the job was Aborted by the user last week, resuming from step 400",
    "config: report_tensor_allocations_upon_oom=True, FLAGS_fraction_of_gpu_memory_to_use=0.5",
    "ray.init(ignore_reinit_error=True, num_gpus=8)  # actor pool size 4",
    "NCCL_TIMEOUT=1800 timeout=1800 ddp_timeout=7200 socket_timeout=30",
    "[I ProcessGroupNCCL.cpp:1024] [Rank 0] ProcessGroupNCCL initialized with timeout 1800000 ms",
    "dist init: store timeout 300 s, signal handlers installed (SIGTERM -> checkpoint)",
    "W bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.77GiB with "
    "freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be "
    "performance gains if more memory were available.",
    "INFO: free memory 12.3 GiB, allocated 4.1 GiB, cache 2.0 GiB (no error)",
    "Epoch 3: val_error=0.021, dead_neurons=0, corrupt_samples_skipped=0, deadline=none",
])
def test_tempting_healthy_lines_stay_quiet(line):
    assert _kinds(_final(["step=1 loss=2.0", line, "step=2 loss=1.9"])) == []


YOLO_HEAD = "     Epoch   gpu_mem       box       obj       cls     total    labels  img_size"


def test_a_table_column_reads_nan_under_its_header():
    rows = [YOLO_HEAD,
            "     41/299     65.1G       nan   0.01516         0       nan      1869       320: 100%|████| 729/729"]
    (f,) = [f for f in _final(rows) if f.kind == "nan"]
    assert "box = nan" in f.summary
    nb = ["Step\tTraining Loss\tValidation Loss", "500\t2.310400\t2.198812", "1000\tnan\tnan"]
    (f,) = [f for f in _final(nb) if f.kind == "nan"]
    assert "Training Loss = nan" in f.summary


def test_a_table_with_nan_outside_its_loss_columns_is_healthy():
    rows = [YOLO_HEAD,
            "     1/299     6.1G    0.0732   0.02516   0.01803    0.1164        45       640: 100%|████| 92/92",
            "               Class      Images      Labels           P           R      mAP@.5  mAP@.5:.95",
            "                 all         500           0         nan         nan         nan         nan"]
    assert _kinds(_final(rows)) == []


def test_a_loss_line_that_names_its_parts():
    line = ("2020-02-15 00:00:31,027 [trainer.py:150 - INFO ] Loss(time/mini-batch) - Epoch  1: train = "
            "nan(1581.14s/2500) | dev = nan(152.82s/625)")
    assert _kinds(_final([line])) == ["nan"]
    assert _kinds(_final([line.replace("nan(", "2.31(")])) == []


def test_loss_scale_cascade_seen_only_at_its_tail_reached_the_floor():
    tail = [f"Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to {v:g}"
            for v in (2.55e-203, 1.27e-203, 6.37e-204)]
    assert _kinds(_final(tail)) == ["nan"]
    search = [f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** k}, reducing to "
              f"{2 ** (k - 1)}" for k in range(32, 18, -1)] + [f"step={s} loss=2.{s:02d}" for s in range(1, 30)]
    assert _kinds(_final(search)) == []


def test_nan_norms_beside_a_zero_loss_end_the_start_up_allowance():
    broken = ["{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00012, 'epoch': 0.0}"] * 3
    assert _kinds(_final(broken)) == ["nan"]
    search = ["{'loss': 2.3412, 'grad_norm': nan, 'learning_rate': 0.00012, 'epoch': 0.0}"] * 3
    recovered = search + ["{'loss': 2.3398, 'grad_norm': 4.0228, 'learning_rate': 0.00012, 'epoch': 0.01}"]
    assert _kinds(_final(recovered)) == []  # the fp16 start-up search: finite norms follow
    assert _kinds(_final(search)) == ["nan"]  # ... a paste that ends in NaN norms shows no recovery


def test_nan_norms_the_log_ends_with_are_judged_on_final_text_only():
    lines = [f"Epoch(train) [1][{s}/735]  lr: 1.98e-04  loss: 2.{s:03d}  grad_norm: 2.7647" for s in range(10, 60, 10)]
    lines += ["Epoch(train) [1][240/735]  lr: 1.98e-04  loss: 2.5128  grad_norm: nan",
              "Epoch(train) [1][250/735]  lr: 1.98e-04  loss: 2.4566  grad_norm: nan"]
    st = ScanState()
    assert _kinds(scan_lines(lines, now_s=0.0, state=st)) == []
    assert [f.kind for f in final_findings(st, 0.0)] == ["nan"]
    assert _kinds(_final(lines + ["Epoch(train) [1][260/735]  lr: 1.98e-04  loss: 2.41  grad_norm: 3.1"])) == []


def test_a_bare_sigkill_in_final_text_is_also_the_run_dying():
    found = _final(["step=3 loss=2.1", "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
                    "local_rank: 4 (pid: 899509) of binary: /home/u/env/bin/python"])
    assert _kinds(found) == ["crash", "oom"]
    assert any(f.kind == "crash" and "SIGKILL" in f.summary for f in found)


def test_every_oom_rule_says_where_its_wording_is_printed():
    """The OOM family table (oom_family.py): a row per OOM rule; a row with a line names its
    repository, file and the 40-hex commit read; one without says why in its note."""
    import re

    from controller.judge.oom_family import OOM_FAMILY
    from controller.judge.rules import RULES

    rows = {s.rule: s for s in OOM_FAMILY}
    assert {r.name for r in RULES if r.kind == "oom"} <= set(rows), sorted(
        {r.name for r in RULES if r.kind == "oom"} - set(rows))
    for s in OOM_FAMILY:
        assert s.wording and s.framework, s
        if s.line is not None:
            assert s.repo and s.path and re.fullmatch(r"[0-9a-f]{40}", s.commit), s
        else:
            assert len(s.note) > 20, s


# -- issue 22, third round: shapes read from the training split's new pastes ------------------

CAFFE_HEALTHY = ["I0505 18:10:10.608124 24343 caffe.cpp:239] Starting Optimization",
                 "I0505 18:10:10.608150 24343 solver.cpp:294] Learning Rate Policy: poly",
                 "I1225 18:53:09.767861 16202 net.cpp:299] Memory required for data: 1097870692",
                 "I0505 18:12:41.022315 24343 solver.cpp:218] Iteration 20 (0.13 iter/s, 150.4s/20 iters), loss = 6.91",
                 "I0505 18:12:41.022360 24343 solver.cpp:237]     Train net output #0: loss1/loss1 = 6.93 (* 0.3 = 2.08 loss)"]


def test_a_failed_cuda_check_of_code_2_is_an_oom_and_its_glog_trace_a_crash():
    """Caffe's CUDA_CHECK is glog's CHECK_EQ(error, cudaSuccess) << cudaGetErrorString: code 2
    is the CUDA runtime's out of memory; glog then prints its check failure stack trace
    and aborts (pasted MhLiao/TextBoxes_plusplus#132, HyeonwooNoh/DeconvNet#1)."""
    oom = ["F0903 14:31:26.106397 92421 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory",
           "*** Check failure stack trace: ***"]
    assert _kinds(_final(CAFFE_HEALTHY + oom)) == ["oom"]
    other = ["F0903 14:31:26.106397 92421 math_functions.cu:79] Check failed: error == cudaSuccess (700 vs. 0)  "
             "an illegal memory access was encountered", "*** Check failure stack trace: ***"]
    assert _kinds(_final(CAFFE_HEALTHY + other)) == ["crash"]
    assert _kinds(_final(CAFFE_HEALTHY)) == []


def test_the_cuda_error_wordings_of_ggml_and_mindspore_and_a_pinned_alloc_are_ooms():
    """`CUDA error %d at %s:%d: %s` (ggml's CUDA_CHECK, pasted QwenLM/qwen.cpp#55), MindSpore's
    `Malloc for kernel output failed, Memory isn't enough` (mindspore-lab/mindone#465), a
    `cudaHostAlloc failed ... out of memory` (mindspore-ai/mindspore#172)."""
    for line in ("CUDA error 2 at /home/qwen.cpp/third_party/ggml/src/ggml-cuda.cu:7196: out of memory",
                 '"RuntimeError: CUDA error:out of memory"',  # torch 0.4 as pasted in bluer555/CR-GAN#8
                 "RuntimeError: Malloc for kernel output failed, Memory isn't enough, node:Default/Cast-op446",
                 "[ERROR] MD(14433,7fea2effd700,python):2021-12-12-14:13:43.932.181 [mindspore/ccsrc/minddata/dataset/"
                 "util/arena.cc:250] Init] cudaHostAlloc failed, ret[2], out of memory"):
        assert "oom" in _kinds(_final([line])), line
    other = "CUDA error 700 at /src/ggml-cuda.cu:8455: an illegal memory access was encountered"
    assert _kinds(_final([other])) == ["crash"]
    healthy = ["ggml_init_cublas: found 2 CUDA devices:", "  Device 0: NVIDIA A800 80GB PCIe, compute capability 8.0",
               "epoch: 1 step: 100, loss is 2.3011", "[WARNING] ME(1:1,python):2024 [memory] device memory used 12.1G"]
    assert _kinds(_final(healthy)) == []


RETRY = ["server not ready, wait 3 sec to retry...", "not ready endpoints:['10.0.0.2:6070', '10.0.0.2:6071']"]


def test_a_wait_for_peers_retried_past_half_a_minute_is_a_hang_and_a_short_one_a_start_up():
    """Paddle's launcher retries every 3 s while an endpoint is down: six retries while the
    other node starts is a start-up (pasted PaddlePaddle/PLSC#115), ten and more in a row
    with nothing else happening is a rank that never came (PaddlePaddle/Paddle#29847)."""
    assert _kinds(_final(RETRY * 6)) == []
    (f,) = [f for f in _final(RETRY * 10) if f.kind == "hang"]
    assert "30 s" in f.summary and f.line == 19
    # waits broken up by the run's own work are separate short waits, not one long one
    work = ["W0108 15:53:37.673019 103703 device_context.cc:342] Please NOTE: device: 0, GPU Compute Capability: 7.0"]
    spaced = (RETRY * 5 + work * 5) * 3
    assert _kinds(_final(spaced)) == []


def test_a_store_retrying_to_connect_is_timed_by_the_lines_own_clock():
    """Paddle's TCP store logs each attempt (`Retry to connect to H:P while the server is not
    yet listening.`): minutes between the first and the last is stuck (pasted
    PaddlePaddle/PaddleSeg#2766); a few seconds is the store coming up."""
    def at(hms: str) -> str:
        return f"I1127 {hms}.167176 3907468 tcp_utils.cc:107] Retry to connect to 10.1.1.4:51920 while the server is not yet listening."
    assert _kinds(_final([at("19:18:22"), at("19:18:25"), at("19:18:28")])) == []
    assert _kinds(_final([at("19:18:22"), at("19:20:35")])) == ["hang"]
    assert _kinds(_final([at("23:59:50"), at("00:00:30")])) == ["hang"]  # past midnight
    # read live, the wait is judged as it goes: the same lines in two ticks
    st = ScanState()
    assert _kinds(scan_lines([at("19:18:22")], now_s=0.0, state=st)) == []
    assert _kinds(scan_lines([at("19:20:35")], first_line_no=2, now_s=0.0, state=st)) == ["hang"]


def test_a_wait_reported_at_a_fixed_period_is_timed_by_its_reports_per_thing_waited_for():
    """torch's store-based barrier and TensorFlow's master repeat one line every 10 s while a
    rank or worker is missing (pasted huggingface/accelerate#1401, yahoo/TensorFlowOnSpark#238):
    three reports for the same one, with no clock on the lines, is 30 s of waiting -- stuck;
    eight ranks each reporting once is 10 s, and a barrier every rank has joined is no wait."""
    def barrier(rank: int, joined: int = 1) -> str:
        return (f"INFO:root:Waiting in store based barrier to initialize process group for rank: {rank}, key: "
                f"store_based_barrier_key:1 (world_size=8, worker_count={joined}, timeout=0:30:00)")
    assert _kinds(_final([barrier(r) for r in range(8)])) == []
    (f,) = _final([barrier(0), barrier(1)] * 3)
    assert f.kind == "hang" and "1 of 8 ranks" in f.summary and "30 s" in f.summary
    assert _kinds(_final([barrier(0, joined=8)] * 5)) == []
    ps = "I tensor flow/core/distributed_runtime/master.cc:193] CreateSession still waiting for response from worker: /job:ps/replica:0/task:0"
    assert _kinds(_final([ps] * 2 + ["Start master session 2feaff26548834a9 with config:", "step 0, duration = 0.292"])) == []
    (f,) = _final([ps] * 3)
    assert f.kind == "hang" and "/job:ps/replica:0/task:0" in f.summary


def test_minutes_without_a_shared_memory_broadcast_read_is_a_hang_one_minute_a_slow_load():
    """vLLM says it each 60 s a worker has not read its broadcast: one is a long compile or
    load (pasted gpustack/gpustack#3888), five in a row a hung engine (vllm-project/vllm#51986)."""
    def shm(t: str) -> str:
        return (f"(EngineCore pid=2025) INFO 08-13 11:{t} [shm_broadcast.py:802] No available shared memory broadcast "
                "block found in 60 seconds. This typically happens when some processes are hanging or doing some "
                "time-consuming work (e.g. compilation, weight/kv cache quantization).")
    assert _kinds(_final([shm("27:02"), "INFO:     127.0.0.1:56038 - \"GET /v1/models HTTP/1.1\" 200 OK"])) == []
    assert _kinds(_final([shm("27:02"), shm("28:02")])) == []
    (f,) = _final([shm("27:02"), shm("28:02"), shm("29:02")])
    assert f.kind == "hang" and "180 s" in f.summary
    # engine cores report their own waits at the same minute: the wait is each one's, not their sum
    def core(n: int, t: str) -> str:
        return shm(t).replace("(EngineCore pid=2025)", f"(EngineCore_DP{n} pid={3400 + n})")
    assert _kinds(_final([core(0, "27:02"), core(4, "27:02"), core(0, "28:02"), core(4, "28:02")])) == []
    assert _kinds(_final([core(n, t) for t in ("27:02", "28:02", "29:02") for n in (0, 4)])) == ["hang"]


def test_slurm_killing_a_job_over_its_memory_limit_is_a_host_oom_and_its_warning_alone_is_not():
    """slurmstepd says `Job N exceeded memory limit (USED > LIMIT), being killed` when it kills
    (pasted heronsystems/adeptRL#13); `Exceeded step memory limit at some point.` alone is the
    warning of a step that may have finished (pasted chaos/slurm#54: dd completed)."""
    (f,) = _final(["Epoch 0 | Training | Steps: 93 | Loss: 24.580695",
                   "slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed"])
    assert f.kind == "oom" and "7518" in f.summary and "626359956 > 512000000" in f.summary
    assert _kinds(_final(["52428800 bytes (52 MB) copied, 0.459204 s, 114 MB/s",
                          "slurmstepd: Exceeded step memory limit at some point."])) == []


def test_windows_paging_file_too_small_is_a_host_oom_and_another_dll_load_error_a_crash():
    """WinError 1455 is Windows' commit limit reached (pasted cszn/KAIR#127, WongKinYiu/yolov7#1036):
    memory; WinError 126 loading the same DLL is a missing file, not memory."""
    dll = ' Error loading "D:\\env\\lib\\site-packages\\torch\\lib\\shm.dll" or one of its dependencies.'
    assert _kinds(_final(["OSError: [WinError 1455] The paging file is too small for this operation to complete." + dll])) == ["oom"]
    assert _kinds(_final(["OSError: [WinError 126] The specified module could not be found." + dll])) == ["crash"]


def test_a_tune_trial_asking_for_more_than_the_cluster_has_is_a_hang_and_a_slow_start_is_not():
    """Ray Tune's `You asked for 11.0 cpu and 1.0 gpu per trial, but the cluster only has 8.0 cpu
    and 0 gpu` (pasted ray-project/ray#18718): the numbers say no trial can be placed; asking
    for what the cluster has is no failure, and the time-based `No trial is running ... within
    the last 60.0 seconds` while nodes come up stays quiet (pasted ray-project/ray#31292)."""
    def asked(cpu: str, gpu: str) -> str:
        return (f"(pid=202) 2021-09-17 11:08:06,745\tWARNING trial_executor.py:305 -- Ignore this message if the "
                f"cluster is autoscaling. You asked for {cpu} cpu and {gpu} gpu per trial, but the cluster only has "
                "8.0 cpu and 0 gpu. Stop the tuning job and adjust the resources requested per trial")
    (f,) = _final([asked("11.0", "1.0")])
    assert f.kind == "hang" and "11.0 CPU" in f.summary
    assert _kinds(_final([asked("2.0", "1.0")])) == ["hang"]  # no GPU at all
    assert _kinds(_final([asked("4.0", "0")])) == []
    assert _kinds(_final(["WARNING insufficient_resources_manager.py:133 -- Ignore this message if the cluster is "
                          "autoscaling. No trial is running and no new trial has been started within at least the "
                          "last 60.0 seconds."])) == []


def test_a_loss_by_its_other_names_perplexity_cross_entropy_cost_is_read_as_a_loss():
    """OpenNMT-py's `ppl:   nan; xent:  nan;` (pasted OpenNMT/OpenNMT-py#1072), `PPL nan ;` and
    `Validation perplexity: nan` (harvardnlp/data2text#9), MXNet's `cross-entropy=nan`, Marian's
    `Cost nan`: the loss under another name; finite ones (OpenNMT/OpenNMT-py#709, a ppl of
    42885 is poor, not NaN) and a timing `avg_batch_cost: nan` stay quiet."""
    for line in ["[2018-11-26 15:06:01,481 INFO] Step 5650/50000; acc:   0.19; ppl:   nan; xent:  nan; lr: 0.00070;",
                 "Epoch 10 ; Iter 50/213 ; LR 1.0000 ; Target tokens/s 2135 ; PPL nan ;",
                 "Epoch[0] Batch [100]\tSpeed: 1000.00 samples/sec\tTrain-cross-entropy=nan",
                 "[2017-10-14 02:03:33] Ep. 2 : Up. 116800 : Sen. 6972416 : Cost nan : Time 2.74s : 19413.05 words/s"]:
        assert _kinds(_final([line])) == ["nan"], line
    healthy = ["Epoch  1, 12950/37527; acc:   4.50; ppl: 42885.19; xent:  10.67; 3594 src tok/s;",
               "INFO:root:Epoch[0] Batch [10]\tSpeed: 3.22 samples/sec\tCrossEntropy=4.200497\tSmoothL1=0.816728",
               "epoch: [1/100], global_step: 10, lr: 0.001, loss: 2.1, avg_reader_cost: nan s, avg_batch_cost: nan s",
               "INFO:root:Epoch[1] Time cost=nan"]
    assert _kinds(_final(healthy)) == []


def test_tensorrt_out_of_memory_in_its_three_wordings_and_its_other_runtime_errors_not():
    """TensorRT 7's `Cuda Error in allocate: 2 (out of memory)` (pasted linghu8812/tensorrt_inference#155),
    8-10's `Error Code 1: Cuda Runtime (out of memory)` (NVIDIA/TensorRT#4258) and `Error Code 2:
    OutOfMemory (Requested size was N bytes.)`; its `Cuda Runtime (invalid argument)` and the
    builder's warning that a request could not be allocated are not an OOM by themselves."""
    for line in ["[09/29/2022-16:59:38] [E] [TRT] ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: 2 (out of memory)",
                 "[11/22/2024-13:40:47] [E] Error[1]: [defaultAllocator.cpp::allocate::31] Error Code 1: Cuda Runtime (out of memory)",
                 "[E] [virtualMemoryBuffer.cpp::resizePhysical::154] Error Code 2: OutOfMemory (Requested size was 16581132288 bytes.)"]:
        assert _kinds(_final([line])) == ["oom"], line
    assert _kinds(_final(["[TRT] [E] 1: [defaultAllocator.cpp::deallocate::42] Error Code 1: Cuda Runtime (invalid argument)",
                          "[W] [TRT] Requested amount of GPU memory (15485030400 bytes) could not be allocated. There may "
                          "not be enough free memory for allocation to succeed.", "[I] Engine built in 41.2 sec."])) == []


def test_glibc_assert_and_a_zh_cn_shell_death_notice_are_crashes():
    """glibc's `prog: file:line: func: Assertion `expr' failed.` (assert/assert.c:37) aborts; a
    zh_CN shell reports the abort as `已放弃 (核心已转储)` (pasted linghu8812/tensorrt_inference#117) or,
    in newer glibc, `已中止`, a segfault as `段错误 (核心已转储)`. A CUDA kernel's assertion keeps its own
    reader; the words in prose, without the core-dump mark or the assert format, stay quiet."""
    (f,) = [f for f in _final(["build engine done", "mmpose_trt: /src/model.cpp:46: void Model::OnnxToTRTModel(): "
                                                   "Assertion `engine' failed."]) if f.kind == "crash"]
    assert "`engine`" in f.summary and "model.cpp:46" in f.summary
    assert _kinds(_final(["epoch 3 loss 0.21", "段错误 (核心已转储)"])) == ["crash"]
    assert _kinds(_final(["./train.sh: 第 3 行： 已中止 (核心已转储)"])) == ["crash"]
    assert _kinds(_final(["训练已中止，请检查数据 (见上文)", "assert engine is not None, 'build failed'"])) == []


def test_ggml_and_directml_allocation_failures_are_ooms_and_buffer_reports_are_not():
    """ggml's `failed to allocate CPU buffer of size N` (host) and `... CUDA0 buffer ...` (device)
    (pasted ollama/ollama#12634, ikawrakow/ik_llama.cpp#749), DirectML's `Could not allocate tensor
    with N bytes. There is not enough GPU video memory available!` (kijai/ComfyUI-HunyuanVideoWrapper#211);
    a loader's buffer-size report and a failed mlock (RLIMIT_MEMLOCK) are no OOM (xorbitsai/inference#3345)."""
    (f,) = _final(["ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 437944320"])
    assert f.kind == "oom" and "host RAM" in f.summary
    (f,) = _final(["ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 292926534144"])
    assert f.kind == "oom" and "CUDA0" in f.summary and "host" not in f.summary
    assert _kinds(_final(["RuntimeError: Could not allocate tensor with 530841600 bytes. There is not enough GPU video "
                          "memory available!"])) == ["oom"]
    assert _kinds(_final(["warning: failed to mlock 827228160-byte buffer (after previously locking 0 bytes): Cannot "
                          "allocate memory", "Try increasing RLIMIT_MEMLOCK ('ulimit -l' as root).",
                          "load_tensors:        CUDA0 model buffer size = 16306.25 MiB"])) == []


def test_slurm_cancelling_a_job_stops_the_run_and_an_accounting_state_line_does_not():
    """slurmstepd's `*** JOB N ON node CANCELLED AT T DUE TO TIME LIMIT ***` (src/slurmd/slurmstepd/
    req.c:1122; pasted ZettaAI/zetta_utils#671), older releases without `ON node`: the scheduler
    ended the run; sacct's `CANCELLED` state and scancel's own error are no such report."""
    (f,) = _final(["slurmstepd: error: *** JOB 494583 ON gpu01 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***"])
    assert f.kind == "crash" and "time limit" in f.summary
    assert _kinds(_final(["slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***"])) == ["crash"]
    assert _kinds(_final(["       JobID    JobName      State ExitCode", "      494583      train  CANCELLED      0:0",
                          "scancel: error: Kill job error on job id 123: Job/step already completing or completed"])) == []


def test_an_assertion_that_a_value_is_finite_failing_is_a_nan():
    """`assert math.isfinite(loss_value)` failing (pasted facebookresearch/ConvNeXt#131: a bare
    AssertionError) says the loss was NaN/Inf; any other assertion is only a crash."""
    def tb(stmt: str) -> list[str]:
        return ["Traceback (most recent call last):", '  File "main.py", line 409, in main',
                "    train_stats = train_one_epoch(", '  File "ConvNeXt/engine.py", line 63, in train_one_epoch',
                f"    {stmt}", "AssertionError"]
    assert _kinds(_final(tb("assert math.isfinite(loss_value)"))) == ["crash", "nan"]
    assert _kinds(_final(tb("assert not torch.isnan(loss).any()"))) == ["crash", "nan"]
    assert _kinds(_final(tb("assert len(batch) == args.batch_size"))) == ["crash"]
    # the same statement printed in a healthy log (a code listing, no traceback) is quiet
    assert _kinds(_final(["    assert math.isfinite(loss_value)", "Epoch: [0]  [ 10/625]  loss: 6.9 (6.9)"])) == []


def _tune_status(running_for: str, trials: str) -> list[str]:
    return ["== Status ==", f"Current time: 2021-12-02 17:21:50 (running for {running_for})",
            "Memory usage on this node: 8.3/125.9 GiB", "Using FIFO scheduling algorithm.",
            "Resources requested: 0/32 CPUs, 0/2 GPUs, 0.0/75.41 GiB heap, 0.0/36.31 GiB objects",
            f"Number of trials: {trials}"]


def test_a_tune_experiment_whose_every_trial_is_pending_for_minutes_is_a_hang():
    """Ray Tune's status block (pasted ray-project/ray#20847: 4/4 PENDING 3 min in): trials
    wait seconds for resources that exist; every trial PENDING past a minute cannot start."""
    (f,) = [f for f in _final(_tune_status("00:03:10.22", "4/4 (4 PENDING)")) if f.kind == "hang"]
    assert "4 trial(s) still PENDING 190 s" in f.summary, f.summary
    assert _kinds(_final(_tune_status("00:00:08.10", "4/4 (4 PENDING)"))) == []      # just started
    assert _kinds(_final(_tune_status("00:03:10.22", "4/4 (2 PENDING, 2 RUNNING)"))) == []  # trials run
    healthy = ["INFO 03-12 02:46:14 metrics.py:349] Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs, "
               "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%"]
    assert _kinds(_final(healthy)) == []


def test_fastai_v1_tables_with_two_word_losses_and_its_bar_comment_read_nan():
    """fastai v1 wrote its results header with single spaces (`epoch train loss valid loss
    ...`) and fastprogress puts the smoothed loss at the end of its bar (pasted
    fastai/fastai#941)."""
    head = "epoch train loss valid loss accuracy_thresh f2_opt"
    assert _kinds(_final([head, "0 nan nan 0.997788 0.000000"])) == ["nan"]
    assert _kinds(_final(["71.39% [6930/9707 3:56:27<1:34:45 nan]"])) == ["nan"]
    healthy = [head, "0 0.412345 0.398765 0.997788 0.812000", "1 0.301234 0.310987 0.998012 0.845000",
               "71.39% [6930/9707 3:56:27<1:34:45 0.3012]", "16.00% [4/25 00:13<01:10]"]
    assert _kinds(_final(healthy)) == []


def test_a_short_paste_cut_at_a_terminal_width_is_joined_back():
    """A terminal copy of a few lines (pasted MhLiao/TextBoxes_plusplus#132 and others, cut at
    80 columns): one line of exactly the width whose text goes on in the next, in a token or
    at one space, is one line -- however short the paste."""
    from controller.judge.repair import repaired, wrap_width

    line = ("F1206 16:55:19.914152  3830 parallel.cpp:85] Check failed: error == cudaSuccess (2 vs. 0)  "
            "out of memory")
    cut = [line[:80], line[80:], "*** Check failure stack trace: ***"]
    assert wrap_width(cut) == 80
    assert [ln.text for ln in repaired(cut)][0].endswith("(2 vs. 0)  out of memory")
    assert _kinds(_final(cut)) == ["oom"]
    # not a cut: a line that happens to be 80 long, then an indented line or a new traceback
    row = "step 100 | loss 2.3412 | lr 1.2e-04 | tok/s 11234 | mem 23.4 GiB | elapsed 0:12 "
    assert len(row) == 80
    assert wrap_width([row, "    at train.py:88", "done"]) is None
    assert wrap_width([row, "Traceback (most recent call last):", '  File "x.py", line 1']) is None
    assert wrap_width(["=" * 80, "epoch 1"]) is None  # a rule drawn to the width
    assert wrap_width([row, row.replace("100", "101"), "step 102 | loss 2.3"]) is None  # lines of one format


KEY_TB = ["step=40 loss=2.1032", "Traceback (most recent call last):", '  File "train.py", line 88, in <module>',
          "    main()", '  File "train.py", line 61, in main', "    labels = batch['labels']", "KeyError: 'labels'"]


@pytest.mark.parametrize("prefix", ["trainer-1  | ", "train_1      | ", "1469.worker.1  | ",
                                    "[pod/train-worker-0/pytorch] ",
                                    "Dec 02 13:00:00 gpu-node-3 python[41234]: ",
                                    "2026-12-02 13:00:00.123 | ERROR    | __main__:main:42 - "])
def test_collectors_prefixes_are_peeled_so_a_traceback_reads_whole(prefix):
    """docker compose (`SERVICE-N  | `; pasted NVIDIA/OpenSeq2Seq#456 is a swarm's), kubectl
    logs --prefix, journald and loguru put their own text before every line: the traceback
    under them is the same traceback (its exception, where it was raised)."""
    (f,) = _final([prefix + line for line in KEY_TB])
    assert (f.kind, f.summary, f.line) == ("crash", "KeyError: 'labels' at train.py:61 in main", 7), f.summary


def test_a_paste_indented_as_a_markdown_code_block_reads_like_the_text():
    (f,) = _final(["    " + line for line in KEY_TB])
    assert (f.kind, f.summary) == ("crash", "KeyError: 'labels' at train.py:61 in main")
    assert f.evidence[0].startswith("    Traceback")  # evidence shows the lines as pasted
    # the indentation a traceback has of its own is not a code block's
    from controller.judge.repair import block_indent
    assert block_indent(KEY_TB[1:]) == "" and block_indent(["    a", "", "      b"]) == "    "
    assert block_indent(["\tTraceback (most recent call last):", "\t  File \"x.py\", line 1"]) == "\t"
    healthy = ["    " + line for line in ("epoch 1 | loss 2.31 | lr 1e-4", "epoch 2 | loss 2.05 | lr 1e-4")]
    assert _kinds(_final(healthy)) == []


def test_a_table_row_is_not_taken_for_a_compose_prefix():
    """fairseq's `| epoch 001 | loss nan |` and a YOLO header keep their first column."""
    assert _kinds(_final(["| epoch 001 | loss nan | nll_loss nan | ppl nan | wps 1000"])) == ["nan"]
    assert _kinds(_final(["epoch | train_loss | val_loss", "1     | nan        | nan"])) == ["nan"]


def test_srun_labels_pdsh_hosts_and_tabs_before_every_line_are_read_through():
    """`srun --label` puts `0: ` before indented lines too; pdsh (DeepSpeed's multi-node
    launcher) `worker-5: ` before every line of that node, two nodes interleaved; a paste
    indented by a tab is a markdown code block."""
    want = ("crash", "KeyError: 'labels' at train.py:61 in main")
    for lines in ([f"0: {line}" for line in KEY_TB], ["\t" + line for line in KEY_TB],
                  [f"worker-{i % 2}: {line}" if i % 2 else f"worker-0: {line}" for i, line in enumerate(KEY_TB)]):
        assert [(f.kind, f.summary) for f in _final(lines)] == [want], lines
    # two nodes, each printing its own lines: the keys keep them apart
    from controller.judge.repair import host_prefixes
    both = [f"worker-{i % 2}: step={i} loss=2.1" for i in range(8)]
    assert host_prefixes(both) == {"worker-0: ", "worker-1: "}
    # an exception's or a level's `Word: ` is no host
    assert host_prefixes(["RuntimeError: x", "RuntimeError: y", "RuntimeError: z"]) == frozenset()
    assert host_prefixes(["INFO: a", "INFO: b", "INFO: c"]) == frozenset()


def test_a_screen_copy_padded_to_its_width_and_cut_at_it_is_joined():
    """tmux/screen copies fill each short line with spaces to the width and cut long ones
    at it: the cut lines (full of text) are joined, the padding dropped."""
    line = "RuntimeError: CUDA error: an illegal memory access was encountered; compile with TORCH_USE_CUDA_DSA"
    screen = [s.ljust(80) for s in ["step=1 loss=2.1", "step=2 loss=2.0", "step=3 loss=1.9", line[:80], line[80:]]]
    (f,) = [f for f in _final(screen) if f.kind == "crash"]
    assert f.summary.startswith("CUDA illegal memory access"), f.summary
    from controller.judge.repair import padded
    assert padded(screen) and not padded(["step=1 loss=2.1", "x" * 80, "y" * 80])


def test_cupys_out_of_memory_in_both_its_wordings_is_an_oom():
    """Chainer's trainer prints the exception's message (`Exception in main training loop:
    ...`) before a traceback a paste often cuts: CuPy's message, old and new, names the OOM
    (pasted motokimura/spacenet_building_detection#3, cupy/cupy#2537)."""
    for line in ("Exception in main training loop: out of memory to allocate 163840000 bytes (total 1673061376 bytes)",
                 "Exception in main training loop: Out of memory allocating 25,600,000 bytes (allocated so far: "
                 "3,635,267,072 bytes)."):
        assert _kinds(_final([line, "Traceback (most recent call last):"])) == ["crash", "oom"], line
    healthy = ["epoch       iteration   main/loss   main/accuracy  elapsed_time",
               "1           600         0.191       0.943          12.3", "pool: allocating 1,024 bytes of pinned memory"]
    assert _kinds(_final(healthy)) == []


def test_mlx_metal_buffer_oom_and_macos_abort_trap():
    """MLX's `[metal::malloc] Attempting to allocate N bytes which is greater than the maximum
    allowed buffer size` (pasted trevin-creator/autoresearch-mlx#2) is an OOM; macOS's bash
    reports a SIGABRT as `Abort trap: 6` (pasted ggml-org/llama.cpp#3644)."""
    oom = ("RuntimeError: [metal::malloc] Attempting to allocate 17179869184 bytes which is greater than the maximum "
           "allowed buffer size of 14302248960 bytes.")
    assert "oom" in _kinds(_final([oom]))
    (f,) = _final(["./train.sh: line 1:  1108 Abort trap: 6           ./finetune --model-base m.gguf"])
    assert f.kind == "crash" and "SIGABRT" in f.summary and "./finetune" in f.summary, f.summary
    assert _kinds(_final(["Abort trap: 6"])) == ["crash"]
    healthy = ["[metal::malloc] cache size 4.2 GB", "peak memory: 10.92 GB", "abort training? [y/N] n"]
    assert _kinds(_final(healthy)) == []


def test_jittors_memory_overflow_is_an_oom_and_its_nan_ratios_are_not_a_nan():
    """Jittor's `GPU memory is overflow, please reduce your batch_size or data size!` (pasted
    Jittor/jittor#396) is an OOM; its memory report's `-nan(ind)%` of an empty pool, printed
    while it falls back to unified memory (Jittor/JittorLLMs#80), is no NaN and no failure."""
    assert _kinds(_final(["Failed reason:[f 0926 09:44:26.560704 04 mem_info.cc:197]", "*******************",
                          "GPU memory is overflow, please reduce your batch_size or data size!",
                          "Total: 23.65GB Used: 47.36GB"])) == ["oom"]
    healthy = ["[w 0429 09:00:15.731000 16 cuda_device_allocator.cc:30] Unable to alloc cuda device memory, use unify "
               "memory instead. This may cause low performance.",
               " name: temp is_device: 0 used:     0 B(-nan(ind)%) unused:     0 B(-nan(ind)%) total:     0 B"]
    assert _kinds(_final(healthy)) == []


def test_a_task_the_coordination_service_lost_to_missed_heartbeats_is_a_hang_and_its_settings_are_not():
    """XLA's coordination service (JAX, TF, torch-xla pods) sets a task that stopped
    heartbeating to ERROR (pasted EleutherAI/architecture-objective#26: the trainer's steps,
    minutes of silence, then task 37's heartbeat timeout); the timeout's settings, a
    connected task are no hang."""
    lost = ["I1115 16:00:39.451247 140641718562816 trainer.py:501] Training: step 198",
            "2022-11-15 16:03:15.140058: E external/org_tensorflow/tensorflow/core/distributed_runtime/coordination/"
            "coordination_service.cc:954] /job:jax_worker/replica:0/task:37 has been set to ERROR in coordination "
            "service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:37 heartbeat timeout. This indicates that the "
            "remote task has failed, got preempted, or crashed unexpectedly."]
    (f,) = [f for f in _final(lost) if f.kind == "hang"]
    assert "/job:jax_worker/replica:0/task:37" in f.summary and "heartbeats" in f.summary, f.summary
    assert f.line == 2
    healthy = ["JAX_COORDINATION_SERVICE_HEARTBEAT_TIMEOUT_SECONDS=1200 JAX_RPC_TIMEOUT_MS=600000",
               "jax.distributed.initialize(coordinator_address='10.0.0.1:1234', heartbeat_timeout_seconds=100)",
               "I1115 16:00:01.000000 1 client.cc:129] Connected to distributed JAX controller",
               "step=1 loss=2.0", "step=2 loss=1.9"]
    assert _kinds(_final(healthy)) == []


def test_a_pooled_allocators_failed_cudamalloc_is_an_oom_that_names_the_call_and_its_settings_are_not():
    """MXNet's pooled storage manager reports a failed cudaMalloc (pasted
    msracver/Flow-Guided-Feature-Aggregation#16): the summary names the call, not the
    driver's CUresult it never printed; its pool settings stay quiet."""
    line = ("[19:45:05] /home/travis/build/dmlc/mxnet-distro/mxnet-build/dmlc-core/include/dmlc/logging.h:308: "
            "[19:45:05] src/storage/./pooled_storage_manager.h:107: cudaMalloc failed: out of memory")
    (f,) = [f for f in _final(["step=1 loss=2.0", line]) if f.kind == "oom"]
    assert "cudaMalloc failed: out of memory" in f.summary, f.summary
    driver = "failed to alloc 8589934592 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
    assert any("CUDA_ERROR_OUT_OF_MEMORY" in f.summary for f in _final([driver]) if f.kind == "oom")
    healthy = ["MXNET_GPU_MEM_POOL_TYPE=Round MXNET_GPU_MEM_POOL_RESERVE=5 (cudaMalloc pooled)",
               "step=1 loss=2.0", "step=2 loss=1.9"]
    assert _kinds(_final(healthy)) == []


def test_a_table_cell_printed_as_a_list_is_one_cell_and_its_nan_a_nan_loss():
    """DeepXDE's table prints each column as a list (`[5.47e+03]`, `[1.2e-01, 3.4e+00]`,
    deepxde/display.py list_to_str; pasted lululxvi/deepxde#491): a list is one cell, so its
    members do not push the later columns out of line, and a NaN member is the column's."""
    head = "Step      Train loss                        Test loss                         Test metric"
    rows = ["0         [5.47e+03, 1.20e-01]              [6.44e+03, 2.00e-01]              [1.00e+00]",
            "1000      [4.10e+02, 9.80e-02]              [5.00e+02, 1.10e-01]              [9.00e-01]"]
    assert _kinds(_final([head] + rows)) == []
    (f,) = _final([head] + rows + ["2000      [nan, 9.10e-02]                   [nan, 1.00e-01]                   [nan]"])
    assert f.kind == "nan" and "Train loss = nan" in f.summary, f.summary
    # a NaN only in a column that is no loss (an undefined metric) is not a NaN loss
    assert _kinds(_final([head] + rows + ["2000      [3.90e+02, 9.00e-02]              [4.80e+02, 1.00e-01]"
                                           "              [nan]"])) == []


def test_a_cpp_exception_name_cut_by_another_threads_log_line_still_ends_the_process():
    """`terminate called after throwing an instance of 'std::runtime_error` with another
    thread's glog line written into it and the closing quote on the next line (pasted
    pytorch/xla#2641): the type's name ends where the glued timestamp starts."""
    lines = ["Exception in device=TPU:5: Aborted: Session f2e012c73a7016d0 is not found.",
             "terminate called after throwing an instance of 'std::runtime_error2020-11-22 07:04:51.678732: E   10362 "
             "tensorflow/compiler/xla/xla_client/xla_util.cc:76]   %constant.21550 = f32[] constant(0)", "'"]
    assert _kinds(_final(lines[1:])) == ["crash"]
    (f,) = [f for f in _final(lines[1:]) if f.kind == "crash"]
    assert f.summary.endswith("std::runtime_error"), f.summary
    healthy = ["callbacks: [TerminateOnNaN, EarlyStopping]", "terminate_on_nan: true",
               "will terminate called workers after the last epoch"]
    assert _kinds(_final(healthy)) == []


def test_torch_xlas_device_exception_needs_no_error_word():
    """`Exception in device=TPU:5: Aborted: ...` is torch_xla's report of a device process's
    exception whatever its status word (pasted pytorch/xla#2641): not only one saying error."""
    assert _kinds(_final(["Exception in device=TPU:1: Cancelled: From /job:tpu_worker/replica:0/task:0:"])) == ["crash"]
    assert _kinds(_final(["no exception in device placement", "device=TPU:1 ready"])) == []


def test_an_xla_check_failure_with_its_native_stack_trace_is_a_crash_unless_something_names_it_better():
    """pytorch/xla's XLA_CHECK streams `Check failed: ...` and tensorflow::CurrentStackTrace
    (`*** Begin stack trace ***`) into an exception it throws (third_party/xla_client/
    debug_macros.h, tf_logging.cc; pasted pytorch/xla#1016, from a releaser thread, no Python
    frame): a crash. A Python traceback that reports the exception names it instead."""
    lines = ["2019-09-08 19:00:58.593154: E tensorflow/compiler/xla/xla_client/tf_logging.cc:11] Check failed: "
             "session->session()->Run( feed_inputs, {}, {cached_node.operations[0]}, &outputs) == ::tensorflow::Status::OK()"
             " (Unavailable: Driver not open. vs. OK)",
             "*** Begin stack trace ***", "        tensorflow::CurrentStackTrace[abi:cxx11]()",
             "        xla::XrtComputationClient::HandleReleaser()", "        clone", "*** End stack trace ***"]
    (f,) = _final(lines)
    assert f.kind == "crash" and "native stack trace" in f.summary, f.summary
    tb = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    xm.mark_step()",
          "RuntimeError: tensorflow/compiler/xla/xla_client/xrt_computation_client.cc:415 : Check failed: ok"]
    crashes = [f.summary for f in _final(lines + tb) if f.kind == "crash"]
    assert len(crashes) == 1 and crashes[0].startswith("RuntimeError"), crashes
    healthy = ["print_stack_trace_on_error: false", "faulthandler: will dump a stack trace on SIGSEGV"]
    assert _kinds(_final(healthy)) == []


def test_darknets_progress_line_names_its_values_after_them_and_a_nan_average_is_a_nan_loss():
    """Darknet prints `<batch>: <loss>, <avg> avg, <rate> rate, ...` (pjreddie/darknet
    examples/detector.c; forks `avg loss ... hours left`): value first, name after. A NaN
    running average is a NaN loss; `Region 16 Avg IOU: nan ... count: 0` (a yolo layer with
    no object in the batch, pasted pjreddie/darknet#1605) is not one."""
    healthy = ["Region 16 Avg IOU: nan, Class: nan, Obj: nan, No Obj: 0.000000, .5R: nan, .75R: nan,  count: 0",
               "Region 23 Avg IOU: 0.639112, Class: 0.744758, Obj: 0.902147, No Obj: 0.001049, .5R: 1.000000,  count: 3",
               "13738: 0.784552, 0.891405 avg, 0.001000 rate, 4.505440 seconds, 13738 images",
               " 181: 590.941345, 834.728516 avg loss, 0.000000 rate, 1.937414 seconds, 11584 images, 17.97 hours left"]
    assert _kinds(_final(healthy)) == []
    for line in (" 182: -nan, -nan avg loss, 0.000000 rate, 2.011170 seconds, 11648 images, 17.923213 hours left",
                 "13739: nan, nan avg, 0.001000 rate, 4.383639 seconds, 13739 images",
                 "1203, 12.031: inf, inf avg, 0.100000 rate, 0.5 seconds, 76992 images"):
        (f,) = _final(healthy + [line])
        assert f.kind == "nan" and "avg loss" in f.summary, (line, f.summary)


def test_torch_xlas_pod_launcher_prefix_is_peeled_so_its_workers_traceback_is_read():
    """torch_xla's xla_dist logs every worker line as `<time> <ip> [<ordinal>] <line>` (its
    `_get_logger` format; pasted huggingface/transformers#7803): a traceback under it, cut
    off in its frames, is a crash, and the worker's ordinal is the line's key."""
    from controller.judge.repair import peel
    assert peel("2020-10-14 14:14:33 10.164.0.60 [2] Traceback (most recent call last):") == (
        "10.164.0.60 [2]", "Traceback (most recent call last):")
    tb = ["2020-10-14 14:14:33 10.164.0.60 [2] Traceback (most recent call last):",
          '2020-10-14 14:14:33 10.164.0.60 [2]   File "/home/dev/train.py", line 111, in <module>',
          "2020-10-14 14:14:33 10.164.0.60 [2]     prediction_loss_only=True,"]
    assert _kinds(_final(tb)) == ["crash"]
    healthy = ["2020-10-14 14:14:30 10.164.0.60 [2] step 100 loss 2.31", "version 10.1.0.2 [3] ready"]
    assert _kinds(_final(healthy)) == []


def test_the_frameworks_own_nan_checks_are_a_nan_and_the_exception_a_crash():
    """TensorFlow's histogram summary (`Nan in summary histogram for: conv2/activations`),
    JAX's jax_debug_nans (`FloatingPointError: invalid value (nan) encountered in jit(...)`)
    and torch's clip_grad_norm_(error_if_nonfinite=True) raise on a NaN: the NaN is the
    finding, and the exception that ended the run a crash."""
    for line in ("InvalidArgumentError (see above for traceback): Nan in summary histogram for: conv2/activations",
                 "FloatingPointError: invalid value (nan) encountered in jit(train_step)",
                 "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it "
                 "cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, "
                 "set `error_if_nonfinite=False`"):
        assert _kinds(_final([line])) == ["crash", "nan"], line
    healthy = ["RuntimeWarning: invalid value encountered in divide", "tf.summary.histogram('weights', w)",
               "clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)",
               "WARNING: the gradients of 3 parameters are non-finite, so they were zeroed"]
    assert _kinds(_final(healthy)) == []


# -- issue 22, sixth round (OOM, NaN): shapes read from index-h's training-split pastes --------------


def test_a_chinese_locales_killed_line_is_the_shells_report_of_a_sigkill():
    """bash prints strsignal(SIGKILL) for a child the kernel killed; under a zh_CN locale glibc
    translates `Killed` as `已杀死` (po/zh_CN.po; pasted danijar/dreamerv3#203, a replay buffer
    that grew to the host's RAM): host OOM likely, and the run died. A script's own message
    that it killed something is not the shell's report."""
    found = _final(["Writing metrics: /home/u/logdir/dreamer/metrics.jsonl", "已杀死"])
    assert _kinds(found) == ["crash", "oom"]
    assert any(f.kind == "oom" and "SIGKILL" in f.summary and "已杀死" in f.summary for f in found)
    healthy = ["已杀死服务器进程: 4242", "echo 进程已杀死", "step 10 loss 2.31"]
    assert _kinds(_final(healthy)) == []


TF_BFC_HEALTHY = [
    "2021-03-18 20:49:10.101: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1406] Created TensorFlow device "
    "(/job:localhost/replica:0/task:0/device:GPU:0 with 10758 MB memory)",
    "2021-03-18 20:49:11.201: I tensorflow/core/common_runtime/bfc_allocator.cc:1004] total_region_allocated_bytes_: "
    "55115776 memory_limit_: 55115776 available bytes: 0 curr_region_allocation_bytes_: 110231552",
    "2021-03-18 20:49:11.301: I tensorflow/core/common_runtime/bfc_allocator.cc:420] A: ****____________",
    "2021-03-18 20:49:12.347: W tensorflow/core/common_runtime/bfc_allocator.cc:245] Allocator (GPU_0_bfc) ran out "
    "of memory trying to allocate 2.20GiB with freed_by_count=0. The caller indicates that this is not a failure, "
    "but may mean that there could be performance gains if more memory were available."]


def test_tensorflows_bfc_allocator_out_of_memory_report_in_its_older_wording_and_its_memory_dump():
    """The BFC allocator, when no chunk can serve an allocation, logs why, DumpMemoryLog (its
    `Bin (N)`, `Chunk/InUse at ... of size N` lines) and the occupancy bar (bfc_allocator.cc
    AllocateRawInternal; TensorFlow 1.0 worded it `Ran out of memory trying to allocate 144.00MiB.
    See logs for memory state.`, pasted aymericdamien/TensorFlow-Examples#38). A paste that holds
    only the dump or the bar (pasted tensorflow/models#9809, faustomorales/keras-ocr#195) shows the
    same failure. The region's accounting, a VLOG occupancy line and the no-failure retry warning
    do not."""
    assert _kinds(_final(TF_BFC_HEALTHY)) == []
    for line in ("W tensorflow/core/common_runtime/bfc_allocator.cc:275] Ran out of memory trying to allocate "
                 "144.00MiB.  See logs for memory state.",
                 "2021-03-18 20:49:12.347509: W tensorflow/core/common_runtime/bfc_allocator.cc:439] *" + "_" * 99,
                 "2022-02-11 12:56:42.783062: I tensorflow/core/common_runtime/bfc_allocator.cc:1066] InUse at "
                 "703b01400 of size 256 next 159",
                 "I tensorflow/core/common_runtime/bfc_allocator.cc:678] Chunk at 0x880 of size 256",
                 "I tensorflow/core/common_runtime/bfc_allocator.cc:643] Bin (4096): \tTotal Chunks: 0, Chunks in "
                 "use: 0 0B allocated for chunks."):
        found = _final(TF_BFC_HEALTHY + [line])
        assert _kinds(found) == ["oom"], line
        assert any(f.kind == "oom" and f.summary.startswith("TensorFlow out of GPU memory") for f in found), line


def test_tensorflows_dst_tensor_not_initialized_is_a_failed_gpu_allocation():
    """gpu_util.cc PrepareCopy refuses a copy into a destination tensor that has bytes but no
    buffer -- its GPU allocation failed: `InternalError: Dst tensor is not initialized.` is how a
    TensorFlow graph reports running out of GPU memory while placing a constant or an input
    (pasted aymericdamien/TensorFlow-Examples#38, beside the allocator's own report)."""
    for line in ("W tensorflow/core/framework/op_kernel.cc:965] Internal: Dst tensor is not initialized.",
                 "tensorflow.python.framework.errors_impl.InternalError: Dst tensor is not initialized."):
        (f,) = [f for f in _final([line]) if f.kind == "oom"]
        assert "Dst tensor is not initialized" in f.summary, f.summary
    healthy = ["dst tensor shape: [4, 3], src tensor initialized from checkpoint", "copy to GPU:0 done"]
    assert _kinds(_final(healthy)) == []


def test_tensorflows_oom_hint_tells_a_resource_exhausted_error_even_alone():
    """TensorFlow appends `Hint: If you want to see a list of allocated tensors when OOM happens,
    add report_tensor_allocations_upon_oom to RunOptions ...` to a RESOURCE_EXHAUSTED status only;
    torch-xla's XRT client logs it under an XLA compilation's HBM allocation report (pasted
    pytorch/xla#1965) with no other wording of the failure. Setting the option is not a failure."""
    line = ("2020-05-04 09:05:40.721206: E    1578 tensorflow/compiler/xla/xla_client/xla_util.cc:76] Hint: If you want "
            "to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions "
            "for current allocation info.")
    assert _kinds(_final(["Allocation type: HLO temp", line])) == ["oom"]
    healthy = ["run_options = tf.RunOptions(report_tensor_allocations_upon_oom=True)", "Allocation type: HLO temp"]
    assert _kinds(_final(healthy)) == []


def test_a_gaudi_bridges_failed_workspace_allocation_is_a_device_oom():
    """Habana's PyTorch bridge raises `RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace
    Allocation of size ::14493510400 failed!` when the HPU's memory cannot hold a graph's workspace
    (pasted HabanaAI/Model-References#10, in loss.backward()): out of device memory, with its size."""
    found = _final(["    Variable._execution_engine.run_backward(",
                    "RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493510400 failed!"])
    (f,) = [f for f in found if f.kind == "oom"]
    assert "Gaudi" in f.summary and "13.50 GiB" in f.summary and "SYNHELPER" in f.summary, f.summary
    healthy = ["MODULE:SYNHELPER workspace size ::268435456 reserved", "hpu: workspace allocation of size 256MB done"]
    assert _kinds(_final(healthy)) == []


def test_a_step_line_whose_only_value_is_nan_is_a_nan_loss():
    """OpenSplat prints its loss as a step line's only value, `Step 101: 0.1734 (20%)` (`[20%]` in
    later releases, no percentage in early ones; opensplat.cpp): `Step 101: nan (20%)` is a NaN
    loss (pasted WebODM/OpenSplat#198, after Metal command-buffer errors). A step line that goes on
    in words, or a finite value, is not."""
    healthy = ["Step 100: 0.1734 (20%)", "Step 3: nan values in the input are dropped", "Iteration 7: 0.51"]
    assert _kinds(_final(healthy)) == []
    for line in ("Step 101: nan (20%)", "Step 110: -inf [22%]", "Step 10: nan", "iteration 40: inf"):
        (f,) = _final(healthy + [line])
        assert f.kind == "nan" and "only value" in f.summary, (line, f.summary)


YOLO_NUMBERED = ["510       Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
                 " 511      90/300        17G      1.757      1.015       0.96          1        640: 100%|██████████| "
                 "278/278 [02:11<00:00,  2.11it/s]",
                 " 512                    all       3141       1758      0.831      0.773      0.832      0.382",
                 " 513 ",
                 " 514       Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size"]


def test_a_paste_with_its_editors_line_numbers_is_read_without_them():
    """A paste copied with a gutter of line numbers (pasted ultralytics/ultralytics#19357: `516
    91/300  17G  nan  nan ...`; `cat -n` puts a tab after the number): every line starts with a
    number counting up by one, and a blank source line keeps its number alone. The readers see
    the lines without the gutter, so the YOLO row's NaN losses are read; the evidence keeps the
    line as pasted. A script's own `step value` series also counts up, but has no bare-number
    line: its first column stays, and it is read as the series it is."""
    nan_row = (" 515      91/300        17G        nan        nan        nan          2        640: 100%|██████████| "
               "278/278 [02:11<00:00,  2.11it/s]")
    assert _kinds(_final(YOLO_NUMBERED)) == []
    (f,) = _final(YOLO_NUMBERED + [nan_row])
    assert f.kind == "nan" and "box_loss = nan" in f.summary and f.evidence[-1] == nan_row, (f.summary, f.evidence)
    cat_n = [f"{n:6d}\t{text}" for n, text in enumerate(
        ["epoch 1 step 10", "Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
         "RuntimeError: CUDA error: out of memory"], start=1)]
    assert "oom" in _kinds(_final(cat_n))
    series = ["1 0.5213", "2 0.4012", "3 0.3307", "4 nan"]
    (f,) = _final(series)
    assert f.kind == "nan" and "step 4" in f.summary, f.summary
    assert _kinds(_final(series[:3])) == []


def test_vllms_kv_cache_too_small_for_one_sequence_is_an_oom():
    """vLLM sizes its KV cache from the GPU memory left after the weights; when those blocks
    hold fewer tokens than one max_model_len sequence it raises `ValueError: The model's max seq
    len (29000) is larger than the maximum number of tokens that can be stored in KV cache
    (23648)` (worker.py raise_if_cache_size_invalid; pasted vllm-project/vllm#10517, an RL or
    serving start-up alike): the GPU memory is too small for the KV cache. The profiling report of
    a start-up that fits is not a failure."""
    healthy = ["Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
               "kv_cache_size=3.81GiB gpu_memory_utilization=0.90",
               "GPU blocks: 1952, # CPU blocks: 2048", "Maximum concurrency for 20000 tokens per request: 1.56x",
               "INFO kv_cache_utils.py:756] GPU KV cache size: 36,864 tokens", "engine args: max_model_len=29000"]
    assert _kinds(_final(healthy)) == []
    line = ("ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored "
            "in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.")
    (f,) = [f for f in _final(healthy + [line]) if f.kind == "oom"]
    assert "KV cache" in f.summary and "29000" in f.summary and "23648 tokens" in f.summary, f.summary


def test_a_timeout_raised_from_c10d_is_a_hang_whatever_its_wording_and_elsewhere_it_is_not():
    """TCPStore::doWait throws a bare `Socket Timeout` (torch/csrc/distributed/c10d/TCPStore.cpp);
    its origin line below the message names the c10d file (pasted rwth-i6/returnn#1621): the
    store waited for a key no rank set -- a hang, and the exception ended the process. The same
    words raised from other code, or a c10d error that is no timeout, are not a hang."""
    lines = ["ep 1 dev eval, step 99, min_wer 0.083, ce 0.286, fer 0.969, mem_usage:cuda:0 1.6GB",
             "RuntimeError: Socket Timeout",
             "Exception raised from doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:445 (most recent call first):"]
    found = _final(lines)
    assert _kinds(found) == ["crash", "hang"], found
    (h,) = [f for f in found if f.kind == "hang"]
    assert "c10d store" in h.summary and "doWait at TCPStore.cpp:445" in h.summary and "Socket Timeout" in h.summary, h.summary
    assert h.line == 2
    reset = ["RuntimeError: Connection reset by peer",
             "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:670 (most recent call first):"]
    assert "hang" not in _kinds(_final(reset))
    elsewhere = ["RuntimeError: operation timed out while loading the shard",
                 "Exception raised from load at ../caffe2/serialize/inline_container.cc:300 (most recent call first):"]
    assert "hang" not in _kinds(_final(elsewhere))
    healthy = ["init_process_group(backend='gloo', timeout=timedelta(seconds=1800))",
               "Exception raised from nowhere: a line of documentation, not an origin",
               "step=1 loss=2.0"]
    assert _kinds(_final(healthy)) == []


def test_gloos_pair_timeout_names_the_peer_it_gave_up_on():
    """gloo's TCP pair reports `Read timeout <peer>` / `Write timeout <peer>` (gloo/transport/tcp/
    pair.cc) and, in 2017's gloo, `Connect timeout [addr]:port` (pasted facebookarchive/caffe2#360):
    the summary names the peer and what timed out; a reset connection or gloo settings are not it."""
    line = ("RuntimeError: [/nfs/caffe2/third_party/gloo/gloo/transport/tcp/pair.cc:611] Connect timeout "
            "[172.17.27.13]:27023")
    found = _final(["INFO:memonger:Memonger memory optimization took 0.0139 secs", line])
    (h,) = [f for f in found if f.kind == "hang"]
    assert "connect to peer [172.17.27.13]:27023 timed out" in h.summary, h.summary
    assert "crash" in _kinds(found)
    read = "  what():  [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read timeout [10.1.2.3]:41922"
    (h2,) = [f for f in _final([read]) if f.kind == "hang"]
    assert "read to peer [10.1.2.3]:41922" in h2.summary, h2.summary
    healthy = ["GLOO_SOCKET_IFNAME=eth0 pair timeout set to 1800 s (gloo/transport/tcp/pair.cc defaults)",
               "[../third_party/gloo/gloo/transport/tcp/pair.cc:575] Connection reset by peer (retrying)",
               "step=2 loss=1.9"]
    assert _kinds(_final(healthy)) == []


def test_a_pod_the_scheduler_refused_for_hours_is_a_job_that_never_starts_and_for_a_minute_it_is_not():
    """kubectl describe aggregates a repeated event as `<last> (x<count> over <first>)`
    (kubernetes/kubectl pkg/describe/describe.go); kubectl of 2017 printed FirstSeen/LastSeen/
    Count columns. FailedScheduling for hours (pasted open-edge-platform/geti_v2#1876: x351 over
    23h; PaddlePaddle/PaddleCloud#258: 1086 times in 5h) is a training job that never starts.
    The first minute of refusals (a node being added) and a pod that is placed stay quiet."""
    line = ("Warning  FailedScheduling  6m7s (x351 over 23h)  default-scheduler  0/1 nodes are available: 1 "
            "Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for "
            "incoming pod.")
    (f,) = _final([line])
    assert f.kind == "hang" and "351 times over 23h" in f.summary and "Insufficient nvidia.com/gpu" in f.summary, f.summary
    old = ("  5h\t\t27s\t\t1086\tdefault-scheduler\t\t\tWarning\t\tFailedScheduling\tNo nodes are available that match "
           "all of the following predicates:: Insufficient alpha.kubernetes.io/nvidia-gpu (3).")
    (g,) = _final(["Events:", "  FirstSeen\tLastSeen\tCount\tFrom\t\t\tSubObjectPath\tType\t\tReason\t\t\tMessage", old])
    assert g.kind == "hang" and "1086 times over 5h" in g.summary, g.summary
    healthy = ["Events:",
               "  Type     Reason            Age                From               Message",
               "  Warning  FailedScheduling  40s (x2 over 40s)  default-scheduler  0/2 nodes are available: 1 "
               "Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.",
               "  Normal   Scheduled         12s                default-scheduler  Successfully assigned default/train-0 "
               "to gpu-node-3",
               "  Warning  FailedScheduling  2d                 default-scheduler  0/3 nodes are available (a single "
               "event, long ago)",
               "  Normal   Started           9s                 kubelet            Started container trainer"]
    assert _kinds(_final(healthy)) == []


def test_a_py_spy_dump_of_a_thread_parked_in_a_collective_is_a_rank_waiting_for_the_others():
    """py-spy dump prints each thread's header, `Thread <id> (<idle|active>): "<name>"`, then its
    frames innermost first (benfred/py-spy src/dump.rs). A thread whose innermost frame is one of
    torch.distributed's collectives (pasted huggingface/accelerate#3104: all_gather_into_tensor in
    distributed_c10d.py, called from deepspeed/comm) is a rank waiting for the others. A dump
    whose threads only pass through a collective further up, or wait on anything else, is not."""
    dump = ['Thread 42 (idle): "MainThread"',
            "    backward (torch/autograd/__init__.py:266)",
            "    training_loop (src/train.py:410)",
            'Thread 928 (idle): "Thread-1"',
            "    wait (threading.py:324)",
            "    run (tqdm/_monitor.py:60)",
            "Thread 4079 (active)",
            "    all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)",
            "    wrapper (torch/distributed/c10d_logger.py:72)",
            "    all_gather_into_tensor (deepspeed/comm/torch.py:219)"]
    (f,) = _final(dump)
    assert f.kind == "hang" and f.line == 8, f
    assert "thread 4079 (active) inside all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)" in f.summary
    assert "called from all_gather_into_tensor (deepspeed/comm/torch.py:219)" in f.summary, f.summary
    healthy = ['Thread 42 (active): "MainThread"',
               "    forward (src/model.py:88)",
               "    reduce_loss (src/train.py:120)",
               "    all_reduce (torch/distributed/distributed_c10d.py:2050)",
               'Thread 928 (idle): "Thread-1"',
               "    wait (threading.py:324)",
               "Thread 0x7F4AACDE7700 (active)",
               "\t _get_next_task_from_local_scheduler (ray/worker.py:988)",
               "\t main_loop (ray/worker.py:1005)",
               "profile: 41% in all_gather (torch/distributed/distributed_c10d.py:2709)",
               "rank 0: all_gather (torch/distributed/distributed_c10d.py:2709) took 3.1 ms"]
    assert _kinds(_final(healthy)) == []


def test_sglangs_scheduler_watchdog_is_a_hang_and_the_kill_it_leads_to_is_its_teardown_not_an_oom():
    """sglang's scheduler watchdog logs `Watchdog timeout (self.watchdog_timeout=300)` when a
    running batch made no progress for that long, then SIGQUITs the launcher, whose handler logs
    `Received sigquit from a child process` and SIGKILLs the whole process tree (scheduler.py,
    entrypoints/engine.py; pasted sgl-project/sglang#3752): the shell's `Killed` is that teardown,
    not the kernel's OOM killer. A `Killed` with no such notice before it is read as before."""
    lines = ["[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)",
             "[2025-03-09 00:57:16 TP0] Watchdog timeout (self.watchdog_timeout=300)",
             "[2025-03-09 00:57:20] Received sigquit from a child proces. It usually means the child failed.",
             "Killed"]
    found = _final(lines)
    assert _kinds(found) == ["crash", "hang"], found
    (h,) = [f for f in found if f.kind == "hang"]
    assert "no progress for 300 s" in h.summary, h.summary
    (c,) = [f for f in found if f.kind == "crash"]
    assert "its own process tree" in c.summary and "OOM killer" in c.summary, c.summary
    assert _kinds(_final(["step 10 loss 2.1", "Killed"])) == ["crash", "oom"]
    healthy = ["server_args=ServerArgs(watchdog_timeout=300, tp_size=8)",
               "[2025-03-09 00:50:01 TP0] Decode batch. #running-req: 4, #token: 1024, gen throughput (token/s): 88.1"]
    assert _kinds(_final(healthy)) == []


def test_an_exception_line_alone_whose_wording_is_a_hang_is_one_crash_not_two():
    """The last line of a paste is an exception whose message a hang rule reads: the hang,
    and the crash of that exception once -- not again as 'the last line of the log'."""
    for last in ("RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:589] Read timeout "
                 "[10.0.0.2]:4712",
                 "RuntimeError: Timed out after 30 seconds waiting for clients. 1/2 clients joined"):
        found = _final(["step=40 loss=2.1032", last])
        crashes = [f.summary for f in found if f.kind == "crash"]
        assert len(crashes) == 1 and "ended the program" in crashes[0], crashes
        assert [f.kind for f in found if f.kind == "hang"] == ["hang"]
    # an exception line with no rule behind it is still the crash the text ends on
    found = _final(["step=40 loss=2.1032", "RuntimeError: foo bar"])
    assert [f.summary for f in found if f.kind == "crash"] == ["RuntimeError: foo bar (the last line of the log)"]


def _nan_summaries(lines: list[str]) -> list[str]:
    return [f.summary for f in _final(lines) if f.kind == "nan"]


def test_a_delimited_tables_loss_column_reads_nan_in_markdown_box_drawing_and_csv():
    """A table whose cells are delimited -- markdown (a notebook's Trainer table pasted into an
    issue), prettytable's `+---+` frame, rich's box drawing, CSV -- is read like a fixed-width
    one: the header's loss column, the row's cell under it; two columns are enough there."""
    markdown = ["| Step | Training Loss | Validation Loss |", "|------|---------------|-----------------|",
                "| 500  | 2.3100        | 2.2000          |", "| 1000 | nan           | nan             |"]
    assert _nan_summaries(markdown) == ["loss is NaN/Inf (Training Loss = nan, a table's column)"]
    pretty = ["+------+-------+", "| step | loss  |", "+------+-------+", "|   10 | 2.31  |", "|   20 | nan   |"]
    assert _nan_summaries(pretty) == ["loss is NaN/Inf (loss = nan, a table's column)"]
    boxed = ["┏━━━━━━┳━━━━━━━┓", "┃ step ┃ loss  ┃", "┡━━━━━━╇━━━━━━━┩", "│ 10   │ 2.31  │", "│ 20   │ inf   │"]
    assert _nan_summaries(boxed) == ["loss is NaN/Inf (loss = inf, a table's column)"]
    for csv in (["epoch,loss,val_loss", "1,2.31,2.20", "2,nan,nan"], ["epoch, loss, val_loss", "1, 2.31, 2.20", "2, nan, nan"]):
        assert _nan_summaries(csv) == ["loss is NaN/Inf (loss = nan, a table's column)"], csv
    # healthy: NaN in a column that is no loss (an F1 with no positives, a precision), a CSV
    # row that is not its header's shape, two words apart by spaces (prose, not a header)
    assert _final(["| Step | Training Loss | Validation Loss | F1 |", "|---|---|---|---|",
                   "| 500 | 2.3100 | 2.2000 | nan |"]) == []
    assert _final(["epoch,precision,recall,loss", "1,nan,0.0,2.31", "2,0.5,0.4,2.10"]) == []
    assert _final(["epoch,loss,val_loss", "2,nan"]) == []
    assert _final(["training loss", "3 nan"]) == []


def test_a_loss_under_its_chinese_name_or_a_full_width_colon_reads_nan():
    assert _nan_summaries(["2024-01-01 10:00:00 INFO epoch: 1, loss：2.31",
                           "2024-01-01 10:01:00 INFO epoch: 2, loss：nan"]) == ["loss is NaN/Inf (loss = nan)"]
    assert _nan_summaries(["epoch 2 训练损失: nan 准确率: 0.5"]) == ["loss is NaN/Inf (训练损失 = nan)"]
    assert _nan_summaries(["训练 epoch 2, 损失：inf"]) == ["loss is NaN/Inf (损失 = inf)"]
    # healthy: a finite loss beside a NaN accuracy; best_loss starting at inf
    assert _final(["epoch 2 损失: 0.53 准确率: nan"]) == []
    assert _final(["epoch 2 best_loss：inf loss：0.5"]) == []


def test_a_sentence_that_says_the_loss_or_gradients_went_nan_is_a_nan():
    for said in ("NaN detected in loss at step 20", "WARNING: nan values found in gradients", "Loss contains NaN values",
                 "loss has NaN at iteration 300", "NaN in loss detected", "found nan in loss", "Loss went to NaN",
                 "the loss diverged to NaN", "gradients are nan", "Got NaN loss at step 7"):
        assert _kinds(_final(["step 1 loss 2.3", said])) == ["nan"], said
    # healthy: settings and counters that name NaN, a best-so-far value that starts at inf
    for quiet in ("loss_scale: 1.0 skip_nan: True", "nan_check=True, detect_anomaly=False",
                  "val_loss improved from inf to 0.53", "Number of NaN values in loss mask: 0"):
        assert _final(["step 1 loss 2.3", quiet]) == [], quiet
