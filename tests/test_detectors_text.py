"""Text detectors (scan_lines, TextScanner) over real-world log wordings.

Each wording cites where it was seen (a public issue thread, a library's source, or
FIELD-NOTES). Numbers in them are kept as printed; only hostnames/paths are shortened.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.judge import EVIDENCE_LINE_CHARS, TextScanner, scan_lines, verdict_exit_code
from controller.records import Finding

DATA = Path(__file__).parent / "data" / "logs"

OOM_NEW = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB. GPU 5 has a total capacity of "
           "139.81 GiB of which 318.00 MiB is free. Including non-PyTorch memory, this process has 139.49 GiB memory "
           "in use. Of the allocated memory 131.20 GiB is allocated by PyTorch, and 6.12 GiB is reserved by PyTorch "
           "but unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
           "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


ENDED = "(the exception ended the program)"


def one(lines: list[str] | str) -> Finding:
    """The one finding of a wording; an exception whose message is a NaN or hang wording
    is that finding and, beside it, the crash the exception was (scan.py `_ended`)."""
    if isinstance(lines, str):
        lines = [lines]
    found = scan_lines(lines, now_s=100.0)
    if len(found) == 2 and any(f.kind == "crash" and f.summary.endswith(ENDED) for f in found):
        (crash,) = [f for f in found if f.summary.endswith(ENDED)]
        assert crash.summary.split(":")[0] in lines[-1]
        found = [f for f in found if f is not crash]
        assert found[0].kind in ("nan", "hang"), found
    assert len(found) == 1, [f.summary for f in found]
    return found[0]


# (text, kind, severity, summary must contain)
POSITIVE = [
    # --- CUDA OOM -------------------------------------------------------------------------
    # torch >= 2.4 wording (FIELD-NOTES; pytorch/pytorch#16417 comment 2024-03)
    (OOM_NEW, "oom", "critical", "CUDA OOM on GPU 5: tried to allocate 2.10 GiB, 0.31 GiB free of 139.8 GiB"),
    # torch 2.1 typo "capacty" (wxian3/NeuroLens#2)
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 55.57 GiB. GPU 0 has a total capacty of "
     "12.00 GiB of which 9.02 GiB is free. Of the allocated memory 984.52 MiB is allocated by PyTorch",
     "oom", "critical", "GPU 0: tried to allocate 55.57 GiB, 9.02 GiB free of 12.00 GiB"),
    # "0 bytes is free" (carolchenyx/MGFN.#35)
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of "
     "6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch",
     "oom", "critical", "1.70 GiB, 0.00 GiB free of 6.00 GiB"),
    # legacy RuntimeError (pytorch/pytorch#16417)
    ("RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
     "already allocated; 9.28 GiB free; 4.68 MiB cached)", "oom", "critical", "GPU 0: tried to allocate 0.01 GiB, 9.28 GiB free of 10.92 GiB"),
    # torchrun rank prefix in front (torch >= 2.3 prints [rankN]: before every line)
    ("[rank3]: " + OOM_NEW, "oom", "critical", "CUDA OOM on GPU 5"),
    ("RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
     "oom", "critical", "cuda runtime error (2)"),
    ("RuntimeError: CUDA error: out of memory", "oom", "critical", "CUDA error: out of memory"),
    # cuBLAS handle creation with no memory left (QwenLM/Qwen3#873)
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
     "oom", "critical", "CUBLAS_STATUS_ALLOC_FAILED"),
    # NCCL's own allocations (NVIDIA/nccl#1235, NVIDIA/TensorRT-LLM#1670)
    ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
     "oom", "critical", "inside NCCL"),
    ("VM-0-16-ubuntu:392:494 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'", "oom", "critical", "NCCL"),
    # --- host OOM -------------------------------------------------------------------------
    # pytorch/pytorch#8976
    ("RuntimeError: DataLoader worker (pid 1817) is killed by signal: Killed. ", "oom", "critical",
     "DataLoader worker (pid 1817) killed by SIGKILL: host OOM likely"),
    # the shell's report of a SIGKILLed child (equinor/ert#7797; bash job status)
    ("Killed", "oom", "critical", "shell printed 'Killed'"),
    ("/root/run.sh: line 3: 123456 Killed                  python train.py --config x", "oom", "critical",
     "process 123456 (python train.py --config x) killed by SIGKILL"),
    # torchrun (hpcaitech/ColossalAI#3514, lzhxmu/CPPO#6)
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of "
     "binary: /data/envs/bin/python", "oom", "critical", "torchrun: local rank 3 (pid 812917) died: SIGKILL"),
    ("  exitcode  : -9 (pid: 14750)", "oom", "critical", "killed by SIGKILL (exitcode -9)"),
    ("  traceback : Signal 9 (SIGKILL) received by PID 14750", "oom", "critical", "SIGKILL"),
    # DeepSpeed launcher (deepspeed/launcher/launch.py sigkill_handler) and accelerate launch
    ("[2024-01-01 10:00:00,000] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
     "'--local_rank=3'] exits with return code = -9", "oom", "critical",
     "local rank 3 exited with return code = -9: SIGKILL"),
    ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died with <Signals.SIGKILL: 9>.",
     "oom", "critical", "died with SIGKILL"),
    # dmesg (equinor/ert#7797, 0jc1/py-autovod#7, openbmc/openbmc#1887 older kernels)
    ("2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, "
     "anon-rss:60356340kB, file-rss:0kB", "oom", "critical", "kernel OOM killer killed pid 1440763 (perl)"),
    ("[Sun Mar 30 08:24:00 2025] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
     "global_oom,task_memcg=/init.scope,task=python,pid=7899,uid=0", "oom", "critical", "killed pid 7899 (python)"),
    ("Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1054044kB, anon-rss:832856kB",
     "oom", "critical", "pid 4242 (python3)"),
    ("[86120.080672] Out of memory: Kill process 6155 (python) score 895 or sacrifice child", "oom", "critical",
     "pid 6155 (python)"),
    ("[ 4018.450000] Killed process 935 (python) total-vm:113656kB, anon-rss:102104kB, file-rss:0kB", "oom",
     "critical", "killed pid 935 (python)"),
    # --- hangs ----------------------------------------------------------------------------
    # NVIDIA/Megatron-LM#1207 (torch >= 2.2 format with NumelIn/NumelOut)
    ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
     "milliseconds before timing out.", "hang", "critical", "ALLREDUCE (SeqNum 5) ran 600 s, timeout 600 s"),
    # older format (OFA-Sys/OFA#271)
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
     "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.", "hang", "critical",
     "ran 1802 s, timeout 1800 s"),
    # inside the C++ terminate message (sgl-project/sglang#1693)
    ("  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
     "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.", "hang", "critical", "_ALLGATHER_BASE"),
    # heartbeat monitor (hiyouga/LlamaFactory#8549)
    ("[rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
     "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
     "collectives.", "hang", "critical", "NCCL watchdog stuck for 480 s"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "hang", "critical", "1/2 clients joined"),
    # --- crashes --------------------------------------------------------------------------
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "crash", "critical", "illegal memory access"),
    ("RuntimeError: CUDA error: device-side assert triggered", "crash", "critical", "device-side assert"),
    ("RuntimeError: CUDA error: unspecified launch failure", "crash", "critical", "CUDA error: unspecified launch failure"),
    ("Segmentation fault (core dumped)", "crash", "critical", "segmentation fault"),
    ("Fatal Python error: Aborted", "crash", "critical", "Fatal Python error: Aborted"),
    ("Aborted (core dumped)", "crash", "critical", "Aborted (core dumped)"),
    # facebookresearch/metaseq#90, pytorch DistBackendError, NVIDIA/nccl#1283
    ("  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled cuda error, NCCL version 21.0.3",
     "crash", "critical", "NCCL error: unhandled cuda error"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3", "crash", "critical",
     "NCCL error: unhandled system error"),
    ("RuntimeError: NCCL Error 1: unhandled cuda error", "crash", "critical", "NCCL error: unhandled cuda error"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "crash", "critical", "GPU Xid 79"),
    # MhLiao/DB#94 (segfault variant) and the /dev/shm bus error
    ("RuntimeError: DataLoader worker (pid 25902) is killed by signal: Bus error.", "crash", "critical",
     "died: Bus error"),
    ("RuntimeError: DataLoader worker (pid(s) 1234, 1235) exited unexpectedly", "crash", "critical",
     "exited unexpectedly"),
    # --- NaN / overflow -------------------------------------------------------------------
    # ymcui/Chinese-LLaMA-Alpaca#534 (DeepSpeed), fairseq's FloatingPointError
    ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     "nan", "critical", "loss scale hit its minimum"),
    ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
     "learning rate, using gradient clipping or increasing the batch size.", "nan", "critical", "minimum"),
    ("RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.", "nan", "critical",
     "LogSoftmaxBackward0"),
    ("[progress] step=140 loss=nan acc=0.1 tau=1.0 tok_per_s=21000 samples_per_s=12.3", "nan", "critical", "NaN/Inf"),
    ("step 120 | loss nan | 21.5K tok/s", "nan", "critical", "NaN/Inf"),
    ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.5}", "nan", "critical", "NaN/Inf"),
    # torchvision reference scripts
    ("Loss is nan, stopping training", "nan", "critical", "NaN/Inf"),
    (" iteration     4000/  500000 | lm loss: 3.2E+00 | number of skipped iterations:   0 | number of nan iterations:   3 |",
     "nan", "warning", "NaN iterations"),
    # --- compile --------------------------------------------------------------------------
    # torch 2.6+ (microsoft/dion#23; torch/_dynamo/convert_frame.py)
    (["W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] torch._dynamo hit config.recompile_limit (8)",
      "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8]    function: 'dion2_post_orthogonalize' "
      "(/usr/local/lib/python3.12/dist-packages/dion/dion2.py:621)",
      "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8]    last reason: 2/7: tensor 'X[0]' size "
      "mismatch at index 1. expected 640, actual 8."],
     "recompile", "warning", "recompile_limit (8) for 'dion2_post_orthogonalize' (dion2.py:621)"),
    ("W0601 torch/_dynamo/convert_frame.py:762] [0/8] torch._dynamo hit config.cache_size_limit (8)",
     "recompile", "warning", "cache_size_limit (8)"),
    # pytorch/torchdynamo#330
    ("WARNING:torchdynamo.convert_frame:torchdynamo hit recompilation cache limit (64) for function 'forward' "
     "(/home/x/model.py:381), due to the following guard failures: [['len(alignments) == 0']]",
     "recompile", "warning", "(64) for 'forward'"),
    ("V0930 08:14:56 torch/_dynamo/guards.py:3506] [0/1] [__recompiles] Recompiling function forward in "
     "/workspace/model.py:123", "recompile", "info", "recompiled forward (model.py:123)"),
    # torch/nn/attention/flex_attention.py
    ("/usr/lib/python3.11/site-packages/torch/nn/attention/flex_attention.py:1512: UserWarning: flex_attention called "
     "without torch.compile() - this will use an unfused implementation that materializes the full scores matrix "
     "instead of generating a fused kernel.", "recompile", "warning", "materializes the full score matrix"),
]


@pytest.mark.parametrize("text,kind,severity,summary", POSITIVE,
                         ids=[(t if isinstance(t, str) else t[0])[:48] for t, *_ in POSITIVE])
def test_failure_wordings(text, kind, severity, summary):
    f = one(text)
    assert (f.kind, f.severity) == (kind, severity)
    assert summary in f.summary
    assert f.line == 1 and f.first_seen_s == 100.0 and f.hint
    assert all("\x1b" not in e for e in f.evidence)


HEALTHY = [
    "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856",
    "eval error_rate=0.0213 (no errors)",
    "memory: reserved 23.4 GiB, max_memory_allocated 25.1 GiB",
    " iteration  100/ 500000 | lm loss: 7.1E+00 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "OOM-safe batch size: 64 (probed)",
    "dataloader: killed 0 workers, restarted 0",
    "NCCL watchdog timeout set to 600000 ms (TORCH_NCCL_ASYNC_ERROR_HANDLING=1)",
    "ng30903:3063025:3066048 [0] NCCL INFO Channel 00 : 0[1020] -> 2[1040] via SHM/direct/direct",
    "NCCL version 2.21.5+cuda12.4",
    "Setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid out-of-memory fragmentation",
    "batch-size finder: torch.OutOfMemoryError is caught and the batch halved",
    "ran out of memory at batch 64, retrying with batch size 32",
    "skip_nan_inf: true; nan_count=0 inf_count=0",
    "loss: 2.3000 (finite)",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "faulthandler: installed handlers for SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL",
    "Aborted 0 requests; exitcode: 0",
    "Traceback printing: enabled",
    "wandb: 🚀 View run at https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w",
    "Dumping profiler traces at step 200",
    "[milestone] first_step",
    "Recompile count: 0; graph breaks: 0",
    "W1129 torch/_dynamo/variables/tensor.py: Graph break from `Tensor.item()`",
    "checkpoint saved; killed stale lock file",
    "    Killed processes: none",
]


@pytest.mark.parametrize("line", HEALTHY, ids=[h[:40] for h in HEALTHY])
def test_healthy_text_is_quiet(line):
    assert scan_lines([line]) == []


def test_healthy_fixture_is_quiet():
    lines = (DATA / "healthy_bundled_trainer.log").read_text().splitlines()
    assert scan_lines(lines) == []


# ---------------------------------------------------------------------------------------
# Tracebacks
# ---------------------------------------------------------------------------------------

TB = ["Traceback (most recent call last):",
      '  File "/workspace/train.py", line 902, in <module>',
      "    main()",
      '  File "/workspace/train.py", line 870, in main',
      "    batch = next(it)",
      "            ^^^^^^^^",
      "KeyError: 'input_ids'"]


def test_traceback_reports_the_exception_and_last_frame():
    f = one(["Step 10: 12000 tok/s"] + TB)
    assert f.kind == "crash" and f.severity == "critical"
    assert f.summary == "KeyError: 'input_ids' at train.py:870 in main (`next(it)`)"  # the caret-marked expression
    assert f.line == 8
    assert f.evidence[0] == TB[0] and f.evidence[-1] == "KeyError: 'input_ids'"


@pytest.mark.parametrize("after", [
    ["upload failed, retrying in 10 s (attempt 2/5)"],
    ["WARNING: attempting to recover from the error"],
    ["", "[progress] step=310 loss=2.1 tok_per_s=21400 samples_per_s=12"],
])
def test_handled_traceback_is_quiet(after):
    assert scan_lines(TB + after) == []


def test_handled_seen_through_context_after():
    assert [f.kind for f in scan_lines(TB)] == ["crash"]
    assert scan_lines(TB, context_after=["will retry in 5 s"]) == []
    assert scan_lines(TB, context_after=["Step 11: 12000 tok/s"]) == []


def test_another_ranks_progress_does_not_excuse_a_crash():
    lines = [f"[rank1]: {x}" for x in TB] + ["[rank0]: [progress] step=310 loss=2.1 tok_per_s=21400"]
    f = one(lines)
    assert f.kind == "crash" and "KeyError" in f.summary


def test_exception_ignored_in_del_is_quiet():
    # Python's own "Exception ignored in" report (e.g. DataLoader iterator __del__ at exit)
    lines = ["Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b1c>",
             "Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
             "    self._shutdown_workers()",
             "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_workers_status'"]
    assert scan_lines(lines) == []


def test_chained_exceptions_report_the_last():
    lines = TB[:-1] + ["ValueError: first", "", "During handling of the above exception, another exception occurred:",
                       "", TB[0], '  File "/workspace/train.py", line 880, in main', "    raise", "RuntimeError: final"]
    f = one(lines)
    assert f.summary.startswith("RuntimeError: final")


def test_thread_death_is_a_warning():
    lines = ["Exception in thread Thread-7 (drafter_loop):"] + TB
    f = one(lines)
    assert f.severity == "warning" and f.summary.startswith("thread Thread-7 (drafter_loop) died: KeyError")


def test_keyboard_interrupt_is_a_warning():
    f = one(TB[:-1] + ["KeyboardInterrupt"])
    assert f.severity == "warning" and "KeyboardInterrupt" in f.summary


def test_interleaved_ranks_keep_their_own_tracebacks():
    a = [f"[rank0]: {x}" for x in TB]
    b = [f"[rank1]: {x}" for x in TB[:-1] + ["ValueError: shape mismatch"]]
    lines = [x for pair in zip(a, b) for x in pair]
    summaries = sorted(f.summary.split(" at ")[0] for f in scan_lines(lines))
    assert summaries == ["KeyError: 'input_ids'", "ValueError: shape mismatch"]


def test_oom_traceback_is_one_oom_finding_with_the_frame():
    f = one(TB[:-1] + [OOM_NEW])
    assert f.kind == "oom"
    assert any("line 870, in main" in e for e in f.evidence)


def test_recovered_cuda_oom_is_a_warning():
    # fairseq's trainer catches OOM and skips the batch
    lines = ["| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 1.20 GiB (GPU 0; "
             "15.78 GiB total capacity; 13.10 GiB already allocated; 1.00 GiB free; 13.90 GiB reserved in total by PyTorch);",
             "| WARNING: attempting to recover from OOM in forward/backward pass"]
    f = one(lines)
    assert f.kind == "oom" and f.severity == "warning" and "recovered" in f.summary


def test_context_before_completes_a_traceback_without_reporting_context():
    found = scan_lines(TB[-1:], first_line_no=50, context_before=TB[:-1])
    assert [(f.kind, f.line) for f in found] == [("crash", 50)]
    assert scan_lines(["Step 1: 1 tok/s"], first_line_no=50, context_before=TB) == []


def test_child_failed_after_an_oom_adds_nothing():
    block = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "============================================================", "train.py FAILED",
             "  rank      : 5 (local_rank: 5)", "  exitcode  : 1 (pid: 3309)", "  error_file: <N/A>"]
    assert [f.kind for f in scan_lines([OOM_NEW] + block)] == ["oom"]
    f = one(block)  # alone, the launcher's block is the only clue
    assert f.kind == "crash" and "exitcode 1" in f.summary


def test_torchrun_nccl_fixture_reports_the_timeout_once():
    lines = (DATA / "torchrun_nccl_timeout.log").read_text().splitlines()
    found = scan_lines(lines)
    assert [(f.kind, f.summary) for f in found if f.kind == "hang"] == [
        ("hang", "NCCL collective timed out: ALLREDUCE (SeqNum 1580) ran 600 s, timeout 600 s")]
    # the watchdog then aborts the rank: the launcher's report of that names rank and signal
    assert [f.summary for f in found if f.kind != "hang"] == [
        "torchrun: local rank 0 (pid 80746) died: SIGABRT (aborted), exitcode -6"]


# ---------------------------------------------------------------------------------------
# Cascades, bounds, streaming
# ---------------------------------------------------------------------------------------

def test_overflow_cascade_until_scale_collapses():
    # apex (whai362/PVT#94, NVIDIA/apex#318): the scale halves every step
    lines = [f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {2.0 ** (4 - i)}" for i in range(12)]
    f = one(lines)
    assert f.kind == "nan" and f.severity == "critical" and "collapsed" in f.summary
    assert "12 skipped-step" in f.evidence[1] and "0.0078125" in f.evidence[1]


def test_loss_scale_search_from_2_32_is_healthy():
    # DeepSpeed ZeRO (zai-org/CogVideo#233): its start-up search halves from 2**32 a dozen
    # times; the scale stays far above 1, so it is the normal search, not a collapse
    lines = [f"[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
             f"Skipping step. Attempted loss scale: {2 ** (32 - i)}, reducing to {2 ** (31 - i)}" for i in range(11)]
    assert scan_lines(lines) == []


def test_many_ranks_same_oom_is_one_finding_and_evidence_is_bounded():
    huge = OOM_NEW + " x" * 50_000
    found = scan_lines([f"[rank{r}]: {huge}" for r in range(8)])
    assert len(found) == 1
    assert all(len(e) <= EVIDENCE_LINE_CHARS + 2 for e in found[0].evidence)


def test_scanner_batches_find_what_one_scan_finds():
    lines = (DATA / "seed_dflash_oom.log").read_text().splitlines()
    lines = lines + (DATA / "torchrun_nccl_timeout.log").read_text().splitlines()
    whole = {(f.kind, f.summary, f.line) for f in scan_lines(lines)}
    sc = TextScanner(batch_lines=7, overlap_lines=30)
    for i in range(0, len(lines), 5):
        sc.feed(lines[i:i + 5])
    sc.finish()
    assert {(f.kind, f.summary, f.line) for f in sc.all_findings()} == whole
    assert {k for k, _, _ in whole} >= {"oom", "crash", "hang", "recompile"}
    assert sc.wandb.run_id == "khjugi7w" and len(sc.progress) == 40 + 5


def test_verdict_exit_codes():
    crit = Finding(kind="oom", severity="critical", summary="x")
    warn = Finding(kind="recompile", severity="warning", summary="y")
    reg = Finding(kind="regression", severity="warning", summary="z")
    assert verdict_exit_code([]) == 0
    assert verdict_exit_code([warn]) == 0
    assert verdict_exit_code([warn, reg]) == 5
    assert verdict_exit_code([reg, crit]) == 4
