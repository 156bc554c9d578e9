"""Detectors: observations -> findings. Pure functions, no I/O, no clock of their own.

Two families:

- `scan_lines` reads log text. Each rule is written from real wordings (torch's CUDA
  caching allocator, ProcessGroupNCCL's watchdog, torchrun's ChildFailedError block,
  the kernel's OOM killer, DeepSpeed/apex loss scalers, dynamo's recompile warnings;
  tests/test_detectors_text.py cites where each came from). Healthy text must stay
  quiet, so every rule anchors on a phrase a failing program prints, never on words
  such as "memory", "error" or "nan" alone.
- `evaluate` reads the accumulated RunState (the watch loop fills it each tick): a stale
  (block-buffered) log, a hang, a throughput regression, idle GPUs, start-up stalls, and
  how the process ended (exit 137 + the cgroup's oom_kill counter).

Every finding carries the evidence behind it (clean lines or numbers, bounded) and the
next step to take. Summaries of lasting conditions avoid ever-changing numbers where they
can (the registry de-duplicates on kind + summary); the changing numbers go in evidence.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from controller.logparse import LineParser
from controller.records import Finding, ProgressSample, RunState
from controller.throughput import (
    by_step,
    finite,
    fmt_tok_per_s,
    median,
    throughput_summary,
    warm_samples,
)

__all__ = [
    "scan_lines", "evaluate", "throughput_summary", "verdict_exit_code",
    "detect_regression", "IDLE_UTIL_PCT",
]

EVIDENCE_LINE_CHARS = 600
EVIDENCE_LINES = 10
MATCH_CHARS = 8192
MAX_FINDINGS_PER_SCAN = 100
IDLE_UTIL_PCT = 5.0
"""A GPU at or below this utilization.gpu is idle (nvidia-smi samples 1/6 s - 1 s)."""
REGRESSION_WINDOW_SAMPLES = 5
OVERFLOW_CASCADE_LINES = 10
HANDLED_LOOKAHEAD_LINES = 5
PROGRESS_LOOKAHEAD_LINES = 60

FAILURE_KINDS = ("oom", "crash", "hang", "nan")


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= EVIDENCE_LINE_CHARS else line[:EVIDENCE_LINE_CHARS] + " …"


def _gib(value: str, unit: str) -> float:
    v = float(value)
    unit = unit.lower()
    if unit.startswith("m"):
        return v / 1024.0
    if unit.startswith("k"):
        return v / (1024.0 * 1024.0)
    if unit.startswith("t"):
        return v * 1024.0
    if unit.startswith("b"):  # bytes
        return v / (1024.0 ** 3)
    return v


def _fmt_gib(v: float) -> str:
    return f"{v:.2f} GiB" if v < 100 else f"{v:.1f} GiB"


# ---------------------------------------------------------------------------------------
# Hints (the next step to take)
# ---------------------------------------------------------------------------------------

HINT_CUDA_OOM = ("lower the batch/token budget or sequence length, enable activation checkpointing, "
                 "or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if much memory is "
                 "reserved but unallocated; after a dynamo recompile limit, flex_attention runs "
                 "eager and materializes the full score matrix")
HINT_HOST_OOM = ("host/container RAM ran out: check the container's memory limit (pct config "
                 "<vmid> memory) and dmesg, lower DataLoader num_workers / prefetch, avoid "
                 "copying the dataset per worker")
HINT_NCCL_TIMEOUT = ("a rank stopped joining collectives (dead/slow rank, deadlock, or uneven "
                     "work per rank): find the first rank that failed; NCCL_DEBUG=INFO and "
                     "TORCH_NCCL_TRACE_BUFFER_SIZE help; py-spy dump --pid on each rank")
HINT_CRASH = "read the exception and the last frame; fix, then relaunch (dfctl deploy)"
HINT_CUDA_FATAL = ("a CUDA kernel fault poisons the context: rerun with CUDA_LAUNCH_BLOCKING=1 "
                   "to find the kernel; check dmesg for Xid errors")
HINT_NAN = ("lower the learning rate or raise warm-up, check grad clipping and the data "
            "for empty/garbage batches; resume from the last good checkpoint")
HINT_RECOMPILE = ("shapes change per batch: compile with dynamic=True, pad to a few fixed "
                  "shapes (buckets), or raise torch._dynamo.config.recompile_limit; "
                  "TORCH_LOGS=recompiles shows why")
HINT_FLEX = ("wrap flex_attention in torch.compile (and keep it compiled: a recompile limit "
             "hit sends it back to eager); the eager path OOMs at long context")
HINT_STALE = "stdout is probably block-buffered: relaunch with PYTHONUNBUFFERED=1 (dfctl deploy does this)"


# ---------------------------------------------------------------------------------------
# Text rules
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Hit:
    kind: str
    severity: str
    summary: str
    hint: str
    secondary: bool = False  # only reported when nothing primary explains the failure


_UNIT = r"(B|bytes|KiB|MiB|GiB|TiB)"
_NUM = r"(\d+(?:\.\d+)?)"

_OOM_TORCH_NEW = re.compile(
    r"(?:CUDA|HIP) out of memory\. Tried to allocate " + _NUM + r" " + _UNIT + r"\. GPU (\d+) has a total "
    r"capac(?:i)?ty of " + _NUM + r" " + _UNIT + r" of which " + _NUM + r" " + _UNIT + r" is free")
_OOM_TORCH_OLD = re.compile(
    r"(?:CUDA|HIP) out of memory\. Tried to allocate " + _NUM + r" " + _UNIT + r" \(GPU (\d+); " + _NUM + r" "
    + _UNIT + r" total capacity; .*?" + _NUM + r" " + _UNIT + r" free")
_OOM_ANY_TORCH = re.compile(r"(?:CUDA|HIP) out of memory|OutOfMemoryError")
_OOM_GPU_INDEX = re.compile(r"\bGPU (\d+)\b")
_OOM_CUDA_RUNTIME = re.compile(r"cuda runtime error \(2\) : out of memory", re.I)
_OOM_CUDA_ERROR = re.compile(r"CUDA error: out of memory")
_OOM_ALLOC_FAILED = re.compile(r"\b(CUBLAS|CUDNN|CUSOLVER|CUSPARSE|CUFFT)_STATUS_ALLOC_FAILED\b")
_OOM_NCCL = re.compile(r"Cuda failure (?:\d+ )?'out of memory'")
_OOM_OTHER = re.compile(r"MPS backend out of memory|RESOURCE_EXHAUSTED: Out of memory|XPU out of memory")

_HOST_DATALOADER = re.compile(r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) is killed by signal: Killed")
_HOST_BARE_KILLED = re.compile(r"^\s*Killed\s*$")
_HOST_SHELL_KILLED = re.compile(r"line \d+:\s+(\d+) Killed\s+(.*)$")
_HOST_EXIT9 = re.compile(r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID (\d+)")
# DeepSpeed's launcher and accelerate's: the same SIGKILL seen from the parent.
_HOST_LAUNCHER9 = re.compile(r"exits with return code = -9\b|died with <Signals\.SIGKILL: 9>")
_HOST_DMESG = re.compile(r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (\d+) \(([^)]*)\)")
_HOST_DMESG_OLD = re.compile(r"^(?:\[\s*[\d.]+\]\s*)?Killed process (\d+) \(([^)]*)\)")
_HOST_OOMKILL = re.compile(r"oom-kill:.*?\btask=([^,\s]+),pid=(\d+)")
_HOST_INVOKED = re.compile(r"^.*?(\S+) invoked oom-killer:")

_HANG_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+).*?"
    r"Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds")
_HANG_STUCK = re.compile(r"watchdog got stuck for (\d+) seconds")
_HANG_HEARTBEAT = re.compile(r"Heartbeat monitor timed out")
_HANG_RDZV = re.compile(r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined")
_HANG_RDZV_ERR = re.compile(r"RendezvousTimeoutError")
_HANG_SOME_NCCL = re.compile(r"Some NCCL operations have failed or timed out")

_CRASH_SEGV = re.compile(r"Segmentation fault|received (?:signal )?SIGSEGV|SIGSEGV received|Signal 11 \(SIGSEGV\)"
                         r"|caught SIGSEGV|exitcode\s*:\s*-11\b")
_CRASH_FATAL_PY = re.compile(r"Fatal Python error: (\w[^:]*)")
_CRASH_ILLEGAL = re.compile(r"an illegal memory access was encountered|illegal memory access")
_CRASH_ASSERT = re.compile(r"device-side assert triggered")
_CRASH_CUDA_ERR = re.compile(r"CUDA error: ([^\n.]{3,80}?)(?:\s*$|\.|\n| \(|CUDA kernel)")
_CRASH_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")
_CRASH_BUS = re.compile(r"fallen off the bus|uncorrectable ECC error")
_CRASH_NCCL = re.compile(
    r"\b(ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|"
    r"ncclRemoteError)\b|NCCL error in: [^,]*, ([a-z][a-z ]+?)(?:,| \(|$)|NCCL Error \d+: ([a-z][a-z ]+)")
_CRASH_COMM_ABORTED = re.compile(r"NCCL communicator was aborted")
_CRASH_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_CRASH_CHILD_FAILED = re.compile(r"ChildFailedError")
_CRASH_CORE = re.compile(r"\b(Aborted|Bus error|Illegal instruction|Floating point exception) \(core dumped\)")
_CRASH_DL_EXIT = re.compile(r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) (?:exited unexpectedly|is killed by signal: (Bus error|Segmentation fault|Aborted))")
_CRASH_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)")

_NAN_MIN_SCALE = re.compile(r"Minimum loss scale reached|Current loss scale already at minimum")
_NAN_ANOMALY = re.compile(r"Function '(\w+)' returned nan values in its (\d+)\w* output")
_NAN_TEXT = re.compile(
    r"\b(?:nan|inf) loss\b|\bloss\s*(?:is|became|=|:)\s*['\"]?(?:nan|inf)\b|non-finite loss|loss is not finite"
    r"|\bloss returned in `training_step` is (?:nan|inf)", re.I)
_NAN_MEGATRON = re.compile(r"number of nan iterations:\s*([1-9]\d*)")
_OVERFLOW = re.compile(
    r"Gradient overflow\.\s+Skipping step|OVERFLOW! Rank \d+ Skipping step|Overflow detected\. Skipping step"
    r"|overflow detected, setting loss scale|Grad overflow on iteration", re.I)
_OVERFLOW_SCALE = re.compile(r"(?:reducing (?:loss scale )?to|setting loss scale to:?)\s*([\d.eE+-]+)")

_RECOMPILE_LIMIT = re.compile(
    r"hit config\.((?:accumulated_)?(?:recompile_limit|cache_size_limit)) \((\d+)\)"
    r"|hit recompilation cache limit \((\d+)\) for function '(\w+)'")
_RECOMPILE_FUNC = re.compile(r"function: '([^']+)' \(([^)]+)\)")
_RECOMPILING = re.compile(r"Recompiling function (\S+) in (\S+)")
_FLEX_EAGER = re.compile(r"flex_attention called without torch\.compile|materializes the full scores? matrix")

_HANDLED = re.compile(
    r"\b(?:retry(?:ing)?|will retry|retried|re-?trying|attempt(?:ing)? to recover|recover(?:ed|ing)|"
    r"continuing|skipping (?:this )?(?:batch|sample|step|example)|ignor(?:ed|ing) (?:this|the) (?:error|exception)|"
    r"falling back)\b", re.I)

# Fast pre-filter: a line whose lower-case text contains none of these words cannot match
# any rule (plain substring tests run at C speed; one big alternation regex did not).
_TRIGGER_WORDS = (
    "out of memory", "outofmemory", "alloc_failed", "resource_exhausted", "killed", "kill process",
    "oom", "exitcode", "sigkill", "watchdog", "timed out", "heartbeat", "rendezvous", "nccl", "segmentation",
    "sigsegv", "fatal", "illegal", "assert", "cuda error", "xid", "bus", "ecc error", "terminate called",
    "childfailed", "core dumped", "dataloader", "return code = -9", "nan", "finite", "overflow", "loss scale", "recompil",
    "hit config", "flex_attention", "scores matrix", "score matrix",
)


_INF_WORD = re.compile(r"\binf\b")  # "inf" alone would let every INFO line through


def _triggered(low: str) -> bool:
    return any(w in low for w in _TRIGGER_WORDS) or ("inf" in low and _INF_WORD.search(low) is not None)


def _summary_cuda_oom(line: str) -> str:
    m = _OOM_TORCH_NEW.search(line)
    if m:
        tried = _gib(m.group(1), m.group(2))
        gpu = m.group(3)
        total = _gib(m.group(4), m.group(5))
        free = _gib(m.group(6), m.group(7))
        return f"CUDA OOM on GPU {gpu}: tried to allocate {_fmt_gib(tried)}, {_fmt_gib(free)} free of {_fmt_gib(total)}"
    m = _OOM_TORCH_OLD.search(line)
    if m:
        tried = _gib(m.group(1), m.group(2))
        gpu = m.group(3)
        total = _gib(m.group(4), m.group(5))
        free = _gib(m.group(6), m.group(7))
        return f"CUDA OOM on GPU {gpu}: tried to allocate {_fmt_gib(tried)}, {_fmt_gib(free)} free of {_fmt_gib(total)}"
    g = _OOM_GPU_INDEX.search(line)
    return f"CUDA OOM on GPU {g.group(1)}" if g else "CUDA OOM"


def _classify(line: str) -> _Hit | None:
    """The one rule a line triggers (first match wins; OOM before generic CUDA errors)."""
    # -- GPU memory ---------------------------------------------------------------------
    if _OOM_ANY_TORCH.search(line) and "out of memory" in line:
        return _Hit("oom", "critical", _summary_cuda_oom(line), HINT_CUDA_OOM)
    if _OOM_CUDA_RUNTIME.search(line):
        return _Hit("oom", "critical", "CUDA OOM (cuda runtime error (2): out of memory)", HINT_CUDA_OOM)
    if _OOM_CUDA_ERROR.search(line):
        g = _OOM_GPU_INDEX.search(line)
        where = f" on GPU {g.group(1)}" if g else ""
        return _Hit("oom", "critical", f"CUDA OOM{where} (CUDA error: out of memory)", HINT_CUDA_OOM)
    m = _OOM_ALLOC_FAILED.search(line)
    if m:
        return _Hit("oom", "critical", f"CUDA OOM: {m.group(1).lower()} could not allocate its workspace "
                    f"({m.group(0)})", HINT_CUDA_OOM)
    if _OOM_NCCL.search(line):
        return _Hit("oom", "critical", "CUDA OOM inside NCCL (Cuda failure 'out of memory')",
                    HINT_CUDA_OOM + "; NCCL needs free GPU memory for its buffers (NCCL_BUFFSIZE)")
    if _OOM_OTHER.search(line):
        return _Hit("oom", "critical", "accelerator out of memory", HINT_CUDA_OOM)
    # -- host memory ----------------------------------------------------------------------
    m = _HOST_DATALOADER.search(line)
    if m:
        return _Hit("oom", "critical", f"DataLoader worker (pid {m.group(1).strip()}) killed by SIGKILL: host OOM likely",
                    HINT_HOST_OOM)
    if _HOST_BARE_KILLED.match(line):
        return _Hit("oom", "critical", "process killed by SIGKILL (shell printed 'Killed'): host OOM likely",
                    HINT_HOST_OOM)
    m = _HOST_SHELL_KILLED.search(line)
    if m:
        return _Hit("oom", "critical", f"process {m.group(1)} killed by SIGKILL (shell printed 'Killed'): host OOM likely",
                    HINT_HOST_OOM)
    if _HOST_EXIT9.search(line):
        return _Hit("oom", "critical", "a worker was killed by SIGKILL (torchrun exitcode -9): host OOM likely",
                    HINT_HOST_OOM)
    if _HOST_LAUNCHER9.search(line):
        return _Hit("oom", "critical", "a worker was killed by SIGKILL (launcher saw -9): host OOM likely",
                    HINT_HOST_OOM)
    m = _HOST_DMESG.search(line) or _HOST_DMESG_OLD.search(line)
    if m:
        return _Hit("oom", "critical", f"kernel OOM killer killed pid {m.group(1)} ({m.group(2)})", HINT_HOST_OOM)
    m = _HOST_OOMKILL.search(line)
    if m:
        return _Hit("oom", "critical", f"kernel OOM killer killed pid {m.group(2)} ({m.group(1)})", HINT_HOST_OOM)
    m = _HOST_INVOKED.search(line)
    if m:
        return _Hit("oom", "critical", "kernel OOM killer invoked", HINT_HOST_OOM, secondary=True)
    # -- hangs ----------------------------------------------------------------------------
    m = _HANG_WATCHDOG.search(line)
    if m:
        seq, op, timeout_ms, ran_ms = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        return _Hit("hang", "critical",
                    f"NCCL collective timed out: {op} (SeqNum {seq}) ran {ran_ms / 1000:.0f} s, "
                    f"timeout {timeout_ms / 1000:.0f} s", HINT_NCCL_TIMEOUT)
    m = _HANG_STUCK.search(line)
    if m:
        return _Hit("hang", "critical", f"NCCL watchdog stuck for {m.group(1)} s (a NCCL/CUDA call hangs)",
                    HINT_NCCL_TIMEOUT + "; another thread may hold the GIL inside a CUDA call")
    m = _HANG_RDZV.search(line)
    if m:
        return _Hit("hang", "critical", f"rendezvous timed out after {m.group(1)} s: {m.group(2)}/{m.group(3)} "
                    "clients joined", "a rank never started: check every node's launcher log, MASTER_ADDR/PORT "
                    "and firewalls")
    if _HANG_RDZV_ERR.search(line):
        return _Hit("hang", "critical", "rendezvous timed out (RendezvousTimeoutError)",
                    "a rank never started: check every node's launcher log and MASTER_ADDR/PORT")
    if _HANG_HEARTBEAT.search(line):
        return _Hit("hang", "critical", "NCCL heartbeat monitor timed out", HINT_NCCL_TIMEOUT, secondary=True)
    if _HANG_SOME_NCCL.search(line):
        return _Hit("hang", "critical", "NCCL operations failed or timed out", HINT_NCCL_TIMEOUT, secondary=True)
    # -- NaN / overflow (before generic crash: these also end in exceptions) -------------
    if _NAN_MIN_SCALE.search(line):
        return _Hit("nan", "critical", "loss scale hit its minimum: gradients overflow every step (loss exploding)",
                    HINT_NAN)
    m = _NAN_ANOMALY.search(line)
    if m:
        return _Hit("nan", "critical", f"NaN in backward: {m.group(1)} returned NaN (anomaly mode)", HINT_NAN)
    m = _NAN_MEGATRON.search(line)
    if m:
        return _Hit("nan", "warning", "the trainer counted NaN iterations", HINT_NAN)
    if _NAN_TEXT.search(line):
        return _Hit("nan", "critical", "loss is NaN/Inf", HINT_NAN)
    # -- fatal errors ---------------------------------------------------------------------
    m = _CRASH_DL_EXIT.search(line)
    if m:
        why = m.group(2)
        hint = HINT_CRASH
        if why == "Bus error":
            hint = "DataLoader workers share tensors through /dev/shm: it is too small (raise the container's shm)"
        return _Hit("crash", "critical",
                    f"DataLoader worker (pid {m.group(1).strip()}) " + (f"died: {why}" if why else "exited unexpectedly"),
                    hint)
    if _CRASH_ILLEGAL.search(line):
        return _Hit("crash", "critical", "CUDA illegal memory access", HINT_CUDA_FATAL)
    if _CRASH_ASSERT.search(line):
        return _Hit("crash", "critical", "CUDA device-side assert triggered",
                    "an index out of range on the GPU (labels >= vocab, bad gather): rerun with "
                    "CUDA_LAUNCH_BLOCKING=1 to find it")
    m = _CRASH_XID.search(line)
    if m:
        return _Hit("crash", "critical", f"GPU Xid {m.group(2)} ({m.group(1)})",
                    "a GPU/driver fault: check nvidia-smi -q and dmesg; the GPU may need a reset")
    if _CRASH_BUS.search(line):
        return _Hit("crash", "critical", "GPU hardware fault (fallen off the bus / ECC)",
                    "the GPU needs attention: nvidia-smi -q, dmesg, drain the node")
    m = _CRASH_NCCL.search(line)
    if m:
        what = (m.group(1) or m.group(2) or m.group(3) or "").strip()
        return _Hit("crash", "critical", f"NCCL error: {what}",
                    "rerun with NCCL_DEBUG=INFO; check that every rank is alive and the interconnect "
                    "(NCCL_SOCKET_IFNAME, IB) is reachable")
    if _CRASH_COMM_ABORTED.search(line):
        return _Hit("crash", "critical", "NCCL communicator was aborted", HINT_NCCL_TIMEOUT, secondary=True)
    m = _CRASH_CUDA_ERR.search(line)
    if m:
        return _Hit("crash", "critical", f"CUDA error: {m.group(1).strip()}", HINT_CUDA_FATAL)
    m = _CRASH_FATAL_PY.search(line)
    if m:
        return _Hit("crash", "critical", f"Fatal Python error: {m.group(1).strip()}",
                    "a C extension crashed the interpreter: the lines after it show each thread's stack")
    if _CRASH_SEGV.search(line):
        return _Hit("crash", "critical", "segmentation fault", "a C/CUDA extension crashed: run under "
                    "python -X faulthandler (or gdb) to get the stack")
    m = _CRASH_CORE.search(line)
    if m:
        return _Hit("crash", "critical", f"process died: {m.group(1)} (core dumped)", HINT_CRASH)
    m = _CRASH_TERMINATE.search(line)
    if m:
        return _Hit("crash", "critical", f"C++ exception terminated the process: {m.group(1)}", HINT_CRASH,
                    secondary=True)
    if _CRASH_CHILD_FAILED.search(line):
        return _Hit("crash", "critical", "torchrun: a worker failed (ChildFailedError)",
                    "the first failing rank's own error is above the ChildFailedError block", secondary=True)
    # -- compile --------------------------------------------------------------------------
    m = _RECOMPILE_LIMIT.search(line)
    if m:
        limit_name = m.group(1) or "cache_size_limit"
        limit = m.group(2) or m.group(3)
        func = f" for '{m.group(4)}'" if m.group(4) else ""
        return _Hit("recompile", "warning", f"torch.compile hit {limit_name} ({limit}){func}: that code now runs eager",
                    HINT_RECOMPILE)
    if _FLEX_EAGER.search(line):
        return _Hit("recompile", "warning", "flex_attention runs unfused (eager): it materializes the full score matrix",
                    HINT_FLEX)
    m = _RECOMPILING.search(line)
    if m:
        return _Hit("recompile", "info", f"dynamo recompiled {m.group(1)} ({os.path.basename(m.group(2))})",
                    HINT_RECOMPILE)
    return None


# ---------------------------------------------------------------------------------------
# Tracebacks
# ---------------------------------------------------------------------------------------

# Prefixes launchers put before every line: torchrun `[rank0]:` / `[default0]:`, mpirun
# `[1,0]<stderr>:`, ray `(pid=123)` / `(name pid=123)`, srun --label `0: `.
_PREFIX = re.compile(r"^(\[(?:rank|default)?\d+\]:\s?|\[\d+,\d+\]<std(?:out|err)>:\s?|\((?:[\w.-]+ )?pid=\d+\)\s|\d{1,4}: )")
_TB_START = "Traceback (most recent call last):"
_TB_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_TB_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+), in (\S+)')
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_THREAD_EXC = re.compile(r"^Exception in thread (.+?):?$")


def _split_prefix(line: str) -> tuple[str, str]:
    m = _PREFIX.match(line)
    if not m:
        return "", line
    return m.group(1).strip(), line[m.end():]


@dataclass
class _Traceback:
    start: int                  # index into the scanned lines
    frames: list[int]           # indexes of `File "..."` lines
    thread: str | None = None
    ignored: bool = False       # "Exception ignored in: ..." (Python printed and moved on)


# ---------------------------------------------------------------------------------------
# scan_lines
# ---------------------------------------------------------------------------------------

def _now(now_s: float | None) -> float:
    return time.time() if now_s is None else now_s


def scan_lines(lines: Sequence[str], first_line_no: int = 1, now_s: float | None = None,
               run_id: str | None = None, *, context_before: Sequence[str] = (),
               context_after: Sequence[str] = ()) -> list[Finding]:
    """Findings in `lines` (clean text, as split_lines returns; lines[0] is line
    `first_line_no` of the log).

    `context_before`: lines just before `lines` (e.g. the end of the previous tick's
    batch) used only to complete a traceback that started there; `context_after`: lines
    that follow (held back for the next batch) used only to see whether an error was
    handled. No finding is reported for a context line. A traceback whose exception line
    is followed, within a few lines, by a retry/recovery message or by more training
    progress (same launcher prefix) was handled and is not reported. One finding per
    (kind, summary); evidence is bounded.
    """
    ctx = list(context_before)
    all_lines = ctx + list(lines) + list(context_after)
    base = len(ctx)
    end = base + len(lines)  # all_lines[base:end] are the lines we report on
    line_no0 = first_line_no - base  # line number of all_lines[0]
    t = _now(now_s)

    found: dict[tuple[str, str], Finding] = {}
    secondary: list[Finding] = []
    hit_at: dict[int, tuple[str, str]] = {}  # index -> finding key (to attach traceback evidence)
    rule_at: set[int] = set()                # indexes of lines a line rule classified
    overflow_idx: list[int] = []
    overflow_scale: float | None = None
    parser = LineParser()

    def add(f: Finding, idx: int, is_secondary: bool = False) -> None:
        if is_secondary:
            secondary.append(f)
            return
        if f.key not in found and len(found) < MAX_FINDINGS_PER_SCAN:
            found[f.key] = f
        hit_at[idx] = f.key

    def make(hit: _Hit, idx: int, evidence: list[str]) -> Finding:
        return Finding(kind=hit.kind, severity=hit.severity, summary=hit.summary,  # type: ignore[arg-type]
                       evidence=tuple(_clip(e) for e in evidence[:EVIDENCE_LINES]), hint=hit.hint,
                       first_seen_s=t, line=line_no0 + idx, run_id=run_id)

    def handled_after(idx: int, progress_key: str | None = None) -> bool:
        """A retry/recovery message soon after; or (with progress_key) training progress
        resumed on the same launcher prefix -- another rank's progress proves nothing."""
        end_h = min(len(all_lines), idx + 1 + HANDLED_LOOKAHEAD_LINES)
        for j in range(idx + 1, end_h):
            if _TB_START in all_lines[j]:
                break  # the next traceback's own fate is its own
            if _HANDLED.search(all_lines[j][:MATCH_CHARS]):
                return True
        if progress_key is None:
            return False
        end_p = min(len(all_lines), idx + 1 + PROGRESS_LOOKAHEAD_LINES)
        probe = LineParser()
        for j in range(idx + 1, end_p):
            text = all_lines[j]
            low = text.lower()
            if ("step" in low or "%|" in text or "iter" in low) and _split_prefix(text)[0] == progress_key \
                    and probe.parse(text).progress:
                return True
        return False

    # -- line rules -----------------------------------------------------------------------
    for idx in range(base, end):
        line = all_lines[idx]
        if len(line) > MATCH_CHARS:
            line = line[:MATCH_CHARS]  # every wording we match sits at the start; bounds regex time
        low = line.lower()
        if not _triggered(low):
            continue
        if _OVERFLOW.search(line):
            overflow_idx.append(idx)
            sm = _OVERFLOW_SCALE.search(line)
            if sm:
                try:
                    overflow_scale = float(sm.group(1).rstrip("."))
                except ValueError:
                    pass
            continue
        hit = _classify(line)
        if hit is None:
            # NaN loss in a progress line (any format the parser knows).
            if "nan" in low or _INF_WORD.search(low):
                p = parser.parse(line).progress
                if p is not None and p.loss is not None and not math.isfinite(p.loss):
                    add(make(_Hit("nan", "critical", "loss is NaN/Inf", HINT_NAN), idx,
                             [line]), idx)
            continue
        evidence = [line]
        if hit.kind == "recompile" and "hit config" in line:
            # dynamo prints the function and the last guard failure on the next lines.
            for j in range(idx + 1, min(len(all_lines), idx + 4)):
                fm = _RECOMPILE_FUNC.search(all_lines[j])
                if fm:
                    hit = _Hit(hit.kind, hit.severity,
                               f"{hit.summary.split(':')[0]} for '{fm.group(1)}' ({os.path.basename(fm.group(2))}): "
                               "that code now runs eager", hit.hint)
                if "function:" in all_lines[j] or "last reason" in all_lines[j]:
                    evidence.append(all_lines[j])
        if hit.kind == "crash" and "ChildFailedError" in line:
            # torchrun's block: rank / exitcode / traceback lines follow.
            for j in range(idx + 1, min(len(all_lines), idx + 20)):
                text = all_lines[j]
                if re.search(r"^\s*(rank|exitcode|traceback|host|error_file)\s*:", text):
                    evidence.append(text)
                    em = _CRASH_EXITCODE.search(text)
                    if em and em.group(1) not in ("-9",):
                        code = int(em.group(1))
                        hit = _Hit(hit.kind, hit.severity,
                                   f"torchrun: a worker failed (exitcode {code}{_signal_suffix(-code) if code < 0 else ''})",
                                   hit.hint, secondary=True)
        if hit.kind == "oom" and hit.severity == "critical" and "Killed" not in line and handled_after(idx):
            hit = _Hit("oom", "warning", hit.summary + " (recovered: the trainer skipped or retried)",
                       "the trainer caught it; if it repeats, lower the batch/token budget")
        rule_at.add(idx)
        add(make(hit, idx, evidence), idx, hit.secondary)

    # -- tracebacks (per launcher prefix, so interleaved ranks do not mix) ---------------
    open_tb: dict[str, _Traceback] = {}
    pending_thread: dict[str, str] = {}
    pending_ignored: dict[str, bool] = {}
    for idx in range(end):
        line = all_lines[idx]
        if "Traceback" not in line and not open_tb and "Exception" not in line:
            continue
        key, body = _split_prefix(line)
        tm = _THREAD_EXC.match(body)
        if tm:
            pending_thread[key] = tm.group(1)
            continue
        if body.startswith("Exception ignored in"):
            pending_ignored[key] = True
            continue
        if body.strip() == _TB_START or body.endswith(_TB_START):
            prev = open_tb.get(key)
            open_tb[key] = _Traceback(start=prev.start if prev and prev.frames == [] else idx, frames=[],
                                      thread=pending_thread.pop(key, None) or (prev.thread if prev else None),
                                      ignored=pending_ignored.pop(key, False))
            continue
        tb = open_tb.get(key)
        if tb is None:
            continue
        if _TB_FRAME.match(body):
            tb.frames.append(idx)
            continue
        if not body.strip() or body.startswith((" ", "\t")) or body.lstrip().startswith(("^", "~", "|", "+")):
            continue  # code lines, carets, blank lines, exception-group art
        if body.startswith(_TB_CHAIN):
            continue
        em = _EXC_LINE.match(body.strip())
        del open_tb[key]
        if not em or idx < base:
            continue
        # Chained? The final exception of a chain is the one that matters: if another
        # traceback follows right away for this prefix, let that one report.
        nxt = _next_body(all_lines, idx, key)
        if nxt is not None and nxt.startswith(_TB_CHAIN):
            continue
        if tb.ignored:
            continue
        if idx in rule_at:
            # The exception line itself is an OOM/hang/... line: give that finding the frame.
            fkey = hit_at.get(idx)
            f = found.get(fkey) if fkey else None
            if f is not None and len(f.evidence) == 1:
                found[fkey] = _with_evidence(f, _tb_evidence(all_lines, tb, idx))
            continue
        exc_name = em.group(1)
        msg = (em.group(2) or "").strip()
        if handled_after(idx, None if tb.thread else key):
            continue
        loc = ""
        if tb.frames:
            fm = _TB_FRAME.match(_split_prefix(all_lines[tb.frames[-1]])[1])
            if fm:
                loc = f" at {os.path.basename(fm.group(1))}:{fm.group(2)} in {fm.group(3)}"
        short = exc_name.rsplit(".", 1)[-1]
        text = f"{short}: {msg}" if msg else short
        if len(text) > 160:
            text = text[:157] + "..."
        if short in ("KeyboardInterrupt",):
            hit = _Hit("crash", "warning", f"stopped by KeyboardInterrupt{loc}", "someone pressed Ctrl-C or sent SIGINT")
        elif tb.thread:
            hit = _Hit("crash", "warning", f"thread {tb.thread} died: {text}{loc}",
                       "the process lives on without that thread: throughput or a queue may stall; " + HINT_CRASH)
        else:
            hit = _Hit("crash", "critical", f"{text}{loc}", HINT_CRASH)
        add(make(hit, idx, _tb_evidence(all_lines, tb, idx)), idx)

    # -- gradient-overflow cascades ------------------------------------------------------
    if len(overflow_idx) >= OVERFLOW_CASCADE_LINES:
        collapsed = overflow_scale is not None and overflow_scale <= 1.0
        scale = f", loss scale down to {overflow_scale:g}" if overflow_scale is not None else ""
        first = overflow_idx[0]
        hit = _Hit("nan", "critical" if collapsed else "warning",
                   "gradient overflow cascade: steps skipped" + (" until the loss scale collapsed" if collapsed else ""),
                   HINT_NAN + "; with fp16 prefer bf16")
        ev = [all_lines[first], f"… {len(overflow_idx)} overflow/skipped-step lines{scale}", all_lines[overflow_idx[-1]]]
        add(make(hit, first, ev), first)

    # -- secondary findings only when nothing primary explains the failure ---------------
    if not any(f.kind in ("oom", "crash", "hang") and f.severity == "critical" for f in found.values()):
        for f in secondary:
            if f.key not in found:
                found[f.key] = f

    return sorted(found.values(), key=lambda f: (f.line or 0))


def _signal_suffix(signum: int) -> str:
    import signal as _signal
    try:
        return f", {_signal.Signals(signum).name}"
    except (ValueError, AttributeError):
        return ""


def _next_body(all_lines: Sequence[str], idx: int, key: str) -> str | None:
    """The next non-blank line of the same launcher prefix after idx (within 3 lines)."""
    for j in range(idx + 1, min(len(all_lines), idx + 4)):
        k, body = _split_prefix(all_lines[j])
        if k != key or not body.strip():
            continue
        return body
    return None


def _tb_evidence(all_lines: Sequence[str], tb: _Traceback, exc_idx: int) -> list[str]:
    ev = [all_lines[tb.start]]
    if tb.frames:
        last = tb.frames[-1]
        if len(tb.frames) > 1:
            ev.append(f"  … {len(tb.frames) - 1} more frame(s)")
        ev.append(all_lines[last])
        if last + 1 < exc_idx and not _TB_FRAME.match(all_lines[last + 1]):
            ev.append(all_lines[last + 1])
    ev.append(all_lines[exc_idx])
    return ev


def _with_evidence(f: Finding, evidence: list[str]) -> Finding:
    from dataclasses import replace
    return replace(f, evidence=tuple(_clip(e) for e in evidence[:EVIDENCE_LINES]))


# ---------------------------------------------------------------------------------------
# State detectors
# ---------------------------------------------------------------------------------------

def _utc(ts: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ts))


def _gpu_utils(state: RunState) -> list[tuple[int, float]]:
    return [(g.index, g.util_pct) for g in state.gpus if g.util_pct is not None]


def _sustained_idle(state: RunState, cfg, now_s: float) -> tuple[list[int], list[int]] | None:
    """(idle, busy) GPU indices where idle means no busy sample for cfg.gpu_idle_s; None
    while the run has not been watched that long. A state without busy-time history (built
    by hand, or by an older watcher) falls back to the instantaneous reading."""
    utils = _gpu_utils(state)
    if not utils:
        return None
    if state.gpus_seen_since_s is None:
        return ([i for i, u in utils if u <= IDLE_UTIL_PCT], [i for i, u in utils if u > IDLE_UTIL_PCT])
    window = getattr(cfg, "gpu_idle_s", 60.0)
    if now_s - state.gpus_seen_since_s < window:
        return None
    idle = [i for i, _ in utils
            if now_s - state.gpu_busy_seen_s.get(i, state.gpus_seen_since_s) >= window]
    return idle, [i for i, _ in utils if i not in idle]


def _alive(state: RunState) -> bool:
    return state.process.state == "running"


def _last_growth(state: RunState) -> float | None:
    if state.last_log_growth_s is not None:
        return state.last_log_growth_s
    return state.started_s


def _median_interval_s(samples: Sequence[ProgressSample]) -> float | None:
    times = [s.time_s for s in samples if s.time_s is not None]
    diffs = [b - a for a, b in zip(times, times[1:]) if b > a]
    return median(diffs)


def _stale_log(state: RunState, cfg, now_s: float) -> Finding | None:
    if not _alive(state):
        return None
    since = _last_growth(state)
    if since is None or now_s - since <= cfg.stale_log_s:
        return None
    advancing = [s for s in state.progress if s.source != "log" and s.time_s is not None and s.time_s > since]
    utils = _gpu_utils(state)
    busy = [(i, u) for i, u in utils if u > IDLE_UTIL_PCT]
    if not advancing and not busy:
        return None
    evidence = [f"log {state.log.path or ''} has not grown for {now_s - since:.0f} s "
                f"(threshold {cfg.stale_log_s:.0f} s, size {state.log.size_bytes} bytes)"]
    if advancing:
        last = max(advancing, key=lambda s: s.step)
        why = f"metrics advance (step {last.step} from {last.source})"
        evidence.append(f"{len(advancing)} progress sample(s) from {last.source} since, last step {last.step}"
                        + (f" at {fmt_tok_per_s(last.tok_per_s)} tok/s" if finite(last.tok_per_s) else ""))
    else:
        why = "GPUs are busy"
    if busy:
        evidence.append("GPU util: " + ", ".join(f"{i}: {u:.0f}%" for i, u in busy))
    hint = HINT_STALE
    if not advancing:
        hint += "; if metrics do not advance either, GPUs may be spinning in a stuck NCCL collective"
    return Finding(kind="stale_log", severity="warning",
                   summary=f"log silent since {_utc(since)} while {why.split(' (')[0]}",
                   evidence=tuple(evidence), hint=hint, first_seen_s=now_s, run_id=state.run_id)


def _hang(state: RunState, cfg, now_s: float) -> Finding | None:
    if not _alive(state) or not state.progress:
        return None
    marks = [x for x in (state.last_log_growth_s, state.last_progress_s) if x is not None]
    if not marks:
        return None
    quiet_since = max(marks)
    samples = by_step(state.progress)
    interval = _median_interval_s(samples)
    threshold = max(cfg.hang_min_s, cfg.hang_factor * interval) if interval else cfg.hang_min_s
    quiet = now_s - quiet_since
    if quiet <= threshold:
        return None
    utils = _gpu_utils(state)
    if utils:
        if any(u > IDLE_UTIL_PCT for _, u in utils):
            return None
        idle_note = "GPUs idle (" + ", ".join(f"{i}: {u:.0f}%" for i, u in utils) + ")"
    else:
        cpu = state.process.cpu_pct
        if cpu is None or cpu > IDLE_UTIL_PCT:
            return None
        idle_note = f"no GPUs seen; process CPU {cpu:.0f}%"
    last = samples[-1]
    evidence = (
        f"no new log bytes or progress for {quiet:.0f} s (threshold {threshold:.0f} s = max(hang_min_s, "
        f"{cfg.hang_factor:g} x median interval {interval:.1f} s))" if interval else
        f"no new log bytes or progress for {quiet:.0f} s (threshold hang_min_s {threshold:.0f} s)",
        idle_note,
    ) + tuple(_clip(x) for x in state.log_tail[-3:])
    pid = state.process.pid
    return Finding(kind="hang", severity="critical",
                   summary=f"no progress since step {last.step} ({_utc(quiet_since)}) and the GPUs sit idle",
                   evidence=evidence,
                   hint=f"py-spy dump --pid {pid or '<pid>'} shows where it waits (data loader, a lock, a "
                        "collective); kill it and resume from the last checkpoint",
                   first_seen_s=now_s, run_id=state.run_id)


def detect_regression(progress: Sequence[ProgressSample], cfg, baseline_tok_per_s: float | None,
                      now_s: float | None = None, run_id: str | None = None) -> Finding | None:
    """Rolling median tok/s over the last `regression_windows` windows (each
    REGRESSION_WINDOW_SAMPLES samples, fewer when the warm history is short), every one
    below the baseline by more than `regression_threshold_pct` -> a regression. Never
    during warm-up (warm_samples)."""
    if not baseline_tok_per_s or baseline_tok_per_s <= 0:
        return None
    samples = [s for s in warm_samples(by_step(progress), cfg.warmup_s, cfg.warmup_steps)
               if finite(s.tok_per_s)]
    n_windows = max(1, int(cfg.regression_windows))
    if len(samples) < n_windows:
        return None
    size = REGRESSION_WINDOW_SAMPLES if len(samples) >= REGRESSION_WINDOW_SAMPLES * n_windows \
        else len(samples) // n_windows
    judged = samples[-size * n_windows:]
    windows = [judged[i * size:(i + 1) * size] for i in range(n_windows)]
    limit = baseline_tok_per_s * (1.0 - cfg.regression_threshold_pct / 100.0)
    medians = [median(s.tok_per_s for s in w) for w in windows]  # type: ignore[misc]
    if any(m is None or m >= limit for m in medians):
        return None
    overall = median(s.tok_per_s for s in judged)  # type: ignore[misc]
    deficit = (1.0 - overall / baseline_tok_per_s) * 100.0
    # the summary's figure is the recent windows' median, not the warm window's (which
    # check-log, the closing line and compare-runs print): say so, with its steps
    evidence = [f"{fmt_tok_per_s(overall)} tok/s = median of the last {n_windows} windows, "
                f"steps {judged[0].step}-{judged[-1].step}"]
    evidence += [f"window steps {w[0].step}-{w[-1].step}: median {fmt_tok_per_s(m)} tok/s"
                 for w, m in zip(windows, medians)]
    evidence.append(f"baseline {fmt_tok_per_s(baseline_tok_per_s)} tok/s, threshold "
                    f"{cfg.regression_threshold_pct:g}% (below {fmt_tok_per_s(limit)} tok/s)")
    hint = "compare with the baseline run (dfctl compare-runs) and its config/code diff"
    waits = [s.data_wait_s for s in judged if finite(s.data_wait_s)]
    steps = [s.step_time_s for s in judged if finite(s.step_time_s)]
    if waits and steps and median(steps):
        share = (median(waits) or 0.0) / median(steps)  # type: ignore[operator]
        evidence.append(f"data wait {share * 100:.0f}% of step time")
        if share > 0.2:
            hint = "input-bound: the data/hidden-state supply is starving the trainer (data_wait_s); " + hint
    return Finding(kind="regression", severity="warning",
                   summary=f"{fmt_tok_per_s(overall)} tok/s, {deficit:.0f}% below the "
                           f"{fmt_tok_per_s(baseline_tok_per_s)} baseline",
                   evidence=tuple(evidence), hint=hint, first_seen_s=now_s, run_id=run_id)


def _gpu_idle(state: RunState, cfg, now_s: float) -> Finding | None:
    if not _alive(state):
        return None
    if not state.progress and "first_step" not in state.milestones:
        return None  # still starting up: loading weights leaves GPUs idle
    utils = _gpu_utils(state)
    split = _sustained_idle(state, cfg, now_s)
    if split is None:
        return None
    idle, busy = split
    expected = cfg.gpus_expected
    ev = ("GPU util: " + ", ".join(f"{i}: {u:.0f}%" for i, u in utils),)
    hint = ("an idle GPU is a stalled stage: a dead worker thread, a starved queue, or a rank "
            "waiting in a collective; compare with the log tail and py-spy dump")
    if not busy:
        return Finding(kind="gpu_idle", severity="warning",
                       summary=f"all {len(utils)} GPUs idle while the process lives",
                       evidence=ev, hint=hint, first_seen_s=now_s, run_id=state.run_id)
    if expected is not None and len(busy) < expected:
        if len(utils) < expected:
            summary = f"{len(utils)} GPUs visible, {expected} expected; idle: {', '.join(map(str, idle)) or 'none'}"
        else:
            summary = f"{expected - len(busy)} of {expected} expected GPUs idle (GPU {', '.join(map(str, idle))})"
        return Finding(kind="gpu_idle", severity="warning", summary=summary, evidence=ev, hint=hint,
                       first_seen_s=now_s, run_id=state.run_id)
    if expected is None and idle:
        return Finding(kind="gpu_idle", severity="warning",
                       summary=f"GPU {', '.join(map(str, idle))} idle while {len(busy)} other(s) work",
                       evidence=ev, hint=hint, first_seen_s=now_s, run_id=state.run_id)
    return None


def _startup_stall(state: RunState, cfg, now_s: float) -> list[Finding]:
    if state.started_s is None or state.progress or not _alive(state):
        return []
    out = []
    elapsed = now_s - state.started_s
    seen = sorted(state.milestones.items(), key=lambda kv: kv[1])
    last_seen = (f"last milestone: {seen[-1][0]} at +{seen[-1][1] - state.started_s:.0f} s"
                 if seen else "no milestone seen yet")
    for name, deadline in sorted(cfg.startup_deadlines_s.items(), key=lambda kv: kv[1]):
        if name in state.milestones or elapsed <= deadline:
            continue
        out.append(Finding(
            kind="startup_stall", severity="warning",
            summary=f"{name} not reached {deadline:.0f} s after launch",
            evidence=(f"{elapsed:.0f} s since launch; {last_seen}",) + tuple(_clip(x) for x in state.log_tail[-3:]),
            hint=("look at the log tail and py-spy dump --pid: slow weight loading, a dataset "
                  "scan, a compile, or a wait on another rank"),
            first_seen_s=now_s, run_id=state.run_id))
    return out


def _process_end(state: RunState, cfg, now_s: float) -> Finding | None:
    ps = state.process
    if ps.state not in ("exited", "zombie"):
        return None
    if ps.stopped_by:
        return None   # an operator stopped it (dfctl stop / deploy --replace): its end is no crash
    code = ps.exit_code
    tail = tuple(_clip(x) for x in state.log_tail[-EVIDENCE_LINES:])
    text_kinds = {f.kind for f in state.findings if f.kind in FAILURE_KINDS}
    if code is None and not ps.exit_code_known:
        return None   # an attached run: no wrapper of ours records a code (controller.attached judges its end)
    if code is None:
        if ps.state != "exited":
            return None  # a zombie whose wrapper has not written the exit code yet
        return Finding(kind="crash", severity="critical", summary="process vanished: no exit code recorded",
                       evidence=(f"pid {ps.pid} is gone and the wrapper wrote no exit_code file",) + tail,
                       hint="the wrapper died with it (kill -9 of the process group, container restart, "
                            "host reboot?): check dmesg, pct status and the host's uptime",
                       first_seen_s=now_s, run_id=state.run_id)
    if code == 0:
        return None
    if code in (137, -9):
        after = state.host_sample.oom_kill_count if state.host_sample else None
        before = state.oom_kill_at_launch
        if after is not None and before is not None and after > before:
            return Finding(kind="oom", severity="critical",
                           summary=f"killed by the kernel OOM killer (exit 137; oom_kill {before} -> {after})",
                           evidence=(f"container cgroup oom_kill counter went from {before} at launch to {after}",) + tail,
                           hint=HINT_HOST_OOM, first_seen_s=now_s, run_id=state.run_id)
        if "oom" in text_kinds:
            return None
        counter = ("oom_kill counter unchanged" if after is not None and before is not None
                   else "oom_kill counter unknown")
        return Finding(kind="oom", severity="critical", summary="killed by SIGKILL (exit 137), OOM likely",
                       evidence=(f"exit code 137 = 128 + SIGKILL; {counter} ({before} -> {after})",) + tail,
                       hint=HINT_HOST_OOM + "; or someone ran kill -9", first_seen_s=now_s, run_id=state.run_id)
    if text_kinds:
        return None
    signum = code - 128 if code > 128 else (-code if code < 0 else 0)
    sig = _signal_suffix(signum)[2:] if signum else ""
    if sig in ("SIGTERM", "SIGINT", "SIGHUP"):
        return Finding(kind="crash", severity="warning", summary=f"stopped by {sig} (exit {code})",
                       evidence=tail, hint="someone or something stopped it (dfctl stop, a scheduler, a closed "
                                           "terminal without setsid)", first_seen_s=now_s, run_id=state.run_id)
    return Finding(kind="crash", severity="critical",
                   summary=f"process exited with code {code}" + (f" ({sig})" if sig else ""),
                   evidence=tail, hint="no error text was recognised: read the log tail; " + HINT_CRASH,
                   first_seen_s=now_s, run_id=state.run_id)


def _nan_from_metrics(state: RunState, now_s: float) -> Finding | None:
    """A NaN/Inf loss in the latest progress (metrics.jsonl, wandb, or a log line read
    through a custom progress_pattern that the text rules do not know)."""
    for s in reversed(state.progress[-20:]):
        if s.loss is not None and not math.isfinite(s.loss):
            return Finding(kind="nan", severity="critical", summary="loss is NaN/Inf",
                           evidence=(f"step {s.step} loss={s.loss} (from {s.source})",), hint=HINT_NAN,
                           first_seen_s=now_s, run_id=state.run_id)
    return None


def evaluate(state: RunState, cfg, now_s: float) -> list[Finding]:
    """State detectors over one run's accumulated state (see module doc); cfg is the
    run's WatchConfig. Returns only state-derived findings; text findings come from
    scan_lines and are expected in state.findings (used to avoid double reports)."""
    out: list[Finding] = []
    regression = detect_regression(state.progress, cfg,
                                   state.baseline_tok_per_s if state.baseline_tok_per_s else cfg.baseline_tok_per_s,
                                   now_s, state.run_id)
    for f in (
        _stale_log(state, cfg, now_s),
        _hang(state, cfg, now_s),
        _same_episode(regression, state.findings),
        _gpu_idle(state, cfg, now_s),
        _process_end(state, cfg, now_s),
        _nan_from_metrics(state, now_s),
    ):
        if f is not None:
            out.append(f)
    out.extend(_startup_stall(state, cfg, now_s))
    return out


_DEFICIT = re.compile(r"(\d+)% below")
REGRESSION_RESUMMARY_PCT = 5.0
"""A regression whose deficit moved less than this keeps the summary it was first reported
with, so the registry (which de-duplicates on kind + summary) does not record a new
finding every tick as the rolling median jitters; the evidence carries the live numbers."""


def _same_episode(f: Finding | None, known: Sequence[Finding]) -> Finding | None:
    if f is None:
        return None
    prev = next((k for k in reversed(known) if k.kind == f.kind), None)
    if prev is None:
        return f
    a, b = _DEFICIT.search(prev.summary), _DEFICIT.search(f.summary)
    if a and b and abs(int(a.group(1)) - int(b.group(1))) <= REGRESSION_RESUMMARY_PCT:
        return replace(f, summary=prev.summary)
    return f


def verdict_exit_code(findings: Sequence[Finding]) -> int:
    """DESIGN.md exit codes: 4 when any critical finding (OOM, crash, hang, NaN) is
    present, else 5 when a throughput regression is, else 0 (warnings and info alone
    leave a run healthy)."""
    if any(f.severity == "critical" and f.kind != "regression" for f in findings):
        return 4
    if any(f.kind == "regression" for f in findings):
        return 5
    return 0


# ---------------------------------------------------------------------------------------
# Streaming text scan (post-mortem over a whole file, or a live follower)
# ---------------------------------------------------------------------------------------

class TextScanner:
    """Feed clean lines in order; collects findings (de-duplicated by key), progress
    samples, milestones and the wandb run -- in bounded memory.

    Lines are scanned in batches with `overlap_lines` of context on both sides, so a
    traceback cut by a batch edge is still read whole and an error followed by a retry
    in the next batch is still seen as handled (the last `overlap_lines` wait for the
    next feed or `finish`). Only the last `max_progress` samples are kept (warm-up is then
    long past; `progress_truncated` says so).
    """

    def __init__(self, progress_pattern: str | None = None, run_id: str | None = None,
                 now_s: float | None = None, batch_lines: int = 8192, overlap_lines: int = 512,
                 max_progress: int = 50_000, batch_chars: int = 8 << 20, overlap_chars: int = 1 << 20):
        from collections import deque

        self.parser = LineParser(progress_pattern)
        self.run_id = run_id
        self.now_s = now_s
        self.batch_lines = batch_lines
        self.overlap_lines = overlap_lines
        # Lines may be up to logparse.LINE_CAP_BYTES long (a 100 MB line arrives as 64 KiB
        # pieces): batches and overlaps are bounded in characters too, not only in lines.
        self.batch_chars = batch_chars
        self.overlap_chars = overlap_chars
        self._pending_chars = 0
        self.progress: deque[ProgressSample] = deque(maxlen=max_progress)
        self.progress_truncated = False
        self.milestones: dict[str, int] = {}
        self.wandb = None
        self.lines_seen = 0
        self.findings: dict[tuple[str, str], Finding] = {}
        self._pending: list[str] = []
        self._pending_first = 1
        self._context: list[str] = []

    def feed(self, lines: Sequence[str]) -> list[Finding]:
        from controller.logparse import merge_wandb

        for line in lines:
            parsed = self.parser.parse(line)
            if parsed.progress is not None:
                if len(self.progress) == self.progress.maxlen:
                    self.progress_truncated = True
                self.progress.append(parsed.progress)
            elif parsed.milestone is not None:
                self.milestones.setdefault(parsed.milestone[0], self.lines_seen + 1)
            elif parsed.wandb is not None:
                self.wandb = merge_wandb(self.wandb, parsed.wandb)
            self.lines_seen += 1
        self._pending.extend(lines)
        self._pending_chars += sum(len(line) for line in lines)
        new: list[Finding] = []
        while (len(self._pending) >= self.batch_lines + self.overlap_lines
               or self._pending_chars >= self.batch_chars):
            cut = len(self._pending) - self._tail_count(self._pending, len(self._pending))
            if cut <= 0:
                break
            new.extend(self._scan(self._pending[:cut], self._pending[cut:]))
            self._pending_first += cut
            self._context = self._pending[cut - self._tail_count(self._pending, cut):cut]
            self._pending = self._pending[cut:]
            self._pending_chars = sum(len(line) for line in self._pending)
        return new

    def _tail_count(self, lines: Sequence[str], end: int) -> int:
        """How many lines before `end` make the overlap: at most overlap_lines and
        overlap_chars (at least one line, so a batch always moves on)."""
        n, total = 0, 0
        while n < min(end, self.overlap_lines):
            total += len(lines[end - 1 - n])
            if n and total > self.overlap_chars:
                break
            n += 1
        return n

    def finish(self) -> list[Finding]:
        new = self._scan(self._pending, [])
        self._pending_first += len(self._pending)
        self._context = self._pending[len(self._pending) - self._tail_count(self._pending, len(self._pending)):]
        self._pending = []
        self._pending_chars = 0
        return new

    def _scan(self, lines: Sequence[str], after: Sequence[str]) -> list[Finding]:
        new = []
        for f in scan_lines(lines, self._pending_first, self.now_s, self.run_id,
                            context_before=self._context, context_after=after):
            if f.key not in self.findings:
                self.findings[f.key] = f
                new.append(f)
        return new

    def all_findings(self) -> list[Finding]:
        return sorted(self.findings.values(), key=lambda f: (f.line or 0))
