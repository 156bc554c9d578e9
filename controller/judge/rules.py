"""The text rules: one table of (wording -> kind, severity, summary, hint), walked in order.

Each wording is one a failing program prints (torch's caching allocator, ProcessGroupNCCL's
watchdog, the kernel's OOM killer, the shell's report of a child killed by a signal,
launchers' reports of a dead rank, loss scalers...), written from the library's source
or from logs made by running it (tests/corpus/). Healthy text must stay quiet, so every
rule anchors on a phrase only a failure prints, never on "memory", "error" or "nan"
alone. The first rule that matches a line wins (OOM before the generic CUDA error).

A rule marked `secondary` is reported only when nothing primary explains the failure (a
launcher's generic "a child failed" when the child's own error is in the log). A rule
marked `recoverable` is downgraded when a retry/recovery message follows (an OOM the
trainer caught and skipped).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from controller.judge import hints as H
from controller.judge import host_kills
from controller.judge.evidence import signal_suffix
from controller.judge.exit_codes import SIGNAL_BY_WORD, death_by_code, death_by_signal
from controller.judge.nccl_backtrace import TOP as NCCL_THREAD_TOP
from controller.judge.nccl_backtrace import summary as nccl_thread_summary

Summary = Callable[[re.Match, str], "tuple[str, str, str, str] | str | None"]


@dataclass(frozen=True)
class TextRule:
    name: str
    pattern: re.Pattern
    kind: str
    severity: str
    summary: str | Summary        # a format string over the match's named groups, or a function
    hint: str
    triggers: tuple[str, ...]     # lower-case words of which the line must hold one (fast pre-filter)
    secondary: bool = False
    recoverable: bool = False


@dataclass(frozen=True)
class Hit:
    kind: str
    severity: str
    summary: str
    hint: str
    secondary: bool = False
    rule: str = ""


_UNIT = r"(B|bytes|KiB|MiB|GiB|TiB)"
_NUM = r"(\d+(?:\.\d+)?)"


def _bytes(n: str) -> str:
    """A byte count as a person reads it (ONNX Runtime's arena prints plain byte counts)."""
    b = int(n)
    return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"


def _gib(value: str, unit: str) -> float:
    v = float(value)
    u = unit.lower()
    if u.startswith("m"):
        return v / 1024.0
    if u.startswith("k"):
        return v / (1024.0 * 1024.0)
    if u.startswith("t"):
        return v * 1024.0
    if u.startswith("b"):
        return v / (1024.0 ** 3)
    return v


def _fmt_gib(v: float) -> str:
    return f"{v:.2f} GiB" if v < 100 else f"{v:.1f} GiB"


_OOM_NEW = re.compile(
    r"(CUDA|HIP) out of memory\. Tried to allocate " + _NUM + " " + _UNIT + r"\. GPU (\d+) has a total "
    r"capaci?ty of " + _NUM + " " + _UNIT + " of which " + _NUM + " " + _UNIT + " is free")
_OOM_OLD = re.compile(
    r"(CUDA|HIP) out of memory\. Tried to allocate " + _NUM + " " + _UNIT + r" \(GPU (\d+); " + _NUM + " "
    + _UNIT + r" total capacity; .*?" + _NUM + " " + _UNIT + " free")
_GPU_INDEX = re.compile(r"\bGPU (\d+)\b")


_OOM_EXCEPTION = re.compile(r"\b((?:torch\.)?(?:cuda\.)?OutOfMemoryError):")


def _torch_oom(m: re.Match, line: str) -> str:
    exc = _OOM_EXCEPTION.search(line)
    named = f" ({exc.group(1)})" if exc else ""  # the exception, as the user will search for it
    for rx in (_OOM_NEW, _OOM_OLD):
        d = rx.search(line)
        if d:
            acc, tried, gpu = d.group(1), _gib(d.group(2), d.group(3)), d.group(4)
            total, free = _gib(d.group(5), d.group(6)), _gib(d.group(7), d.group(8))
            return (f"{acc} OOM on GPU {gpu}: tried to allocate {_fmt_gib(tried)}, {_fmt_gib(free)} free of "
                    f"{_fmt_gib(total)}{named}")
    g = _GPU_INDEX.search(line)
    acc = "HIP" if "HIP out of memory" in line else "CUDA"
    return (f"{acc} OOM on GPU {g.group(1)}" if g else f"{acc} OOM") + named


def _cuda_error_oom(m: re.Match, line: str) -> str:
    g = _GPU_INDEX.search(line)
    return f"CUDA OOM{' on GPU ' + g.group(1) if g else ''} ({m.group(0)})"


_ALLOC_CALL = re.compile(r"\b(cudaMalloc|cudaHostAlloc|cuMemAlloc|hipMalloc)\w*")


def _cuda_alloc_oom(m: re.Match, line: str) -> str:
    """Name what failed: the driver's CUresult, or the allocation call a framework's pool
    reports (MXNet's `cudaMalloc retry failed: out of memory`), as the user will search it."""
    if "CUDA_ERROR_OUT_OF_MEMORY" in m.group(0):
        return "CUDA OOM (the driver's CUDA_ERROR_OUT_OF_MEMORY)"
    call = _ALLOC_CALL.search(m.group(0))
    return f"CUDA OOM ({call.group(1)} failed: out of memory)" if call else "CUDA OOM (an allocation failed: out of memory)"


def _shell_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """bash: `script.sh: line 3: 4242 Segmentation fault      (core dumped) python train.py`."""
    d = death_by_signal(SIGNAL_BY_WORD[m.group("what").lower()])
    cmd = (m.group("cmd") or "").strip()
    pid = m.group("pid")
    who = f"process {pid}" + (f" ({cmd[:80]})" if cmd else "")
    return d.kind, d.severity, f"{who} killed by {d.what} (the shell printed '{m.group('what')}')", d.hint


def _zsh_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """zsh: `zsh: segmentation fault  python x.py`, a job's `[1]    5606 killed     python x.py`."""
    word = {"abort": "aborted", "illegal hardware instruction": "illegal instruction"}.get(m.group("what"), m.group("what"))
    d = death_by_signal(SIGNAL_BY_WORD[word])
    who = f"process {m.group('pid')}" if m.group("pid") else "process"
    return (d.kind, d.severity, f"{who} ({m.group('cmd').strip()[:80]}) killed by {d.what} (zsh printed "
            f"'{m.group('what')}')", d.hint)


def _bare_shell_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    d = death_by_signal(SIGNAL_BY_WORD[m.group("what").lower()])
    core = " (core dumped)" if m.group("core") else ""
    return d.kind, d.severity, f"process killed by {d.what} (the shell printed '{m.group('what')}{core}')", d.hint


def _torchrun_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    code = int(m.group("code"))
    d = death_by_code(code)
    return (d.kind, d.severity,
            f"torchrun: local rank {m.group('rank')} (pid {m.group('pid')}) died: {d.what}, exitcode {code}",
            H.HINT_LAUNCHER + "; " + d.hint)


def _elastic_report_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """A row of torchelastic's failure report: `exitcode  : -6 (pid: 69811)` (ChildFailedError's
    _FAILURE_FORMAT_TEMPLATE, torch/distributed/elastic/multiprocessing/errors/__init__.py:183-189
    in torch 2.13.0, which also appends ` (SIGABRT)`) or, for a worker that left no error file,
    its `traceback : Signal 6 (SIGABRT) received by PID 69811` (ProcessFailure.__post_init__,
    :140-144). Both rows say the same death, so both give child-failed's own summary."""
    code = -int(m.group("n")) if m.group("n") else int(m.group("code"))
    d = death_by_code(code)
    return ("oom" if d.signum == 9 else "crash", "critical",
            f"torchrun: a worker failed (exitcode {code}{signal_suffix(-code)})", H.HINT_LAUNCHER + "; " + d.hint)


def _subprocess_status(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """CalledProcessError's message. Python 3.6+ words a signal death `died with <Signals.SIGKILL:
    9>` (subprocess-signal); Python 2 and 3.5 printed every code as `returned non-zero exit status
    %d` (Lib/subprocess.py CalledProcessError.__str__), a signal as a negative one (pasted
    MarvinTeichmann/MultiNet#61: `... exit status -11`)."""
    code = int(m.group("code"))
    if code >= 0:
        return "crash", "critical", f"launched command returned non-zero exit status {code}", H.HINT_LAUNCHER
    d = death_by_code(code)
    return d.kind, d.severity, f"launched command died: {d.what} (exit status {code})", H.HINT_LAUNCHER + "; " + d.hint


_LOCAL_RANK = re.compile(r"--local_rank=(\d+)")


def _deepspeed_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    code = int(m.group("code"))
    d = death_by_code(code)
    r = _LOCAL_RANK.search(line)
    who = f"local rank {r.group(1)}" if r else "a rank"
    return (d.kind, d.severity, f"deepspeed launcher: {who} exited with return code = {code}: {d.what}",
            H.HINT_LAUNCHER + "; " + d.hint)


def _subprocess_signal(m: re.Match, line: str) -> tuple[str, str, str, str]:
    d = death_by_signal(int(m.group("num")))
    return d.kind, d.severity, f"launched command died with {m.group('sig')}: {d.what}", H.HINT_LAUNCHER + "; " + d.hint


def _mp_spawn_signal(m: re.Match, line: str) -> tuple[str, str, str, str]:
    import signal as _s
    try:
        d = death_by_signal(int(getattr(_s, m.group("sig"))))
    except (AttributeError, TypeError):
        d = death_by_code(1)
    return d.kind, d.severity, f"process {m.group('proc')} terminated with signal {m.group('sig')}: {d.what}", d.hint


def _mpirun_signal(m: re.Match, line: str) -> tuple[str, str, str, str]:
    d = death_by_signal(int(m.group("num")))
    return (d.kind, d.severity, f"mpirun: rank {m.group('rank')} (pid {m.group('pid')}) exited on signal "
            f"{m.group('num')} ({m.group('name')}): {d.what}", H.HINT_LAUNCHER + "; " + d.hint)


_NTSTATUS = {
    0xC0000005: "access violation", 0xC0000409: "stack buffer overrun / fail-fast", 0xC00000FD: "stack overflow",
    0xC000001D: "illegal instruction", 0xC0000374: "heap corruption", 0xC0000094: "integer divide by zero",
    0xC000013A: "Ctrl-C", 0xC0000135: "a DLL was not found", 0xC0000139: "a DLL entry point was not found",
}
"""Windows NTSTATUS codes a native crash exits with (winnt.h / ntstatus.h: STATUS_ACCESS_VIOLATION,
STATUS_STACK_BUFFER_OVERRUN, ...); consoles print them signed (-1073741819) or not (3221225477)."""


def _ide_exit(m: re.Match) -> str:
    raw = m.group("code") or m.group("code2")
    code = int(raw) & 0xFFFFFFFF
    what = _NTSTATUS.get(code)
    where = "the IDE's report" if m.group("code") else "VS Code's Code Runner"
    if what is None:
        return f"the process exited with code {raw} ({where})"
    return f"the process exited with code {raw} (0x{code:08X}, Windows: {what}; {where})"


def _recompile_limit(m: re.Match, line: str) -> str:
    name = m.group("limit") or "cache_size_limit"
    n = m.group("n") or m.group("n2")
    func = f" for '{m.group('func')}'" if m.group("func") else ""
    return f"torch.compile hit {name} ({n}){func}: that code now runs eager"


def _tf_status_error(m: re.Match, line: str) -> str | None:
    """TensorFlow's error status raised in Python (tensorflow/python/framework/errors_impl.py: one OpError
    subclass per error code, `UnknownError`, `InternalError`, ...): `tensorflow.python.framework.errors_impl.
    UnknownError: <message>` as the exception line, TF1's `UnknownError (see above for traceback): <message>`,
    or a session's aggregate `UnknownError: 2 root error(s) found.` (the roots follow as `  (0) Unknown: ...`).
    A bare `XError: ...` without one of those TensorFlow marks is left to the traceback reader."""
    msg = m.group("msg").strip()
    if not (m.group("impl") or m.group("see") or "root error(s) found" in msg):
        return None
    return f"TensorFlow {m.group('name')}Error: {msg[:150]}"


def _recompiling(m: re.Match, line: str) -> str:
    return f"dynamo recompiled {m.group(1)} ({os.path.basename(m.group(2))})"


def _nccl(m: re.Match, line: str) -> str:
    what = (m.group(1) or m.group(2) or m.group(3) or "").strip()
    return f"NCCL error: {what}"


def _tune_infeasible(m: re.Match, line: str) -> str | None:
    """Ray Tune's insufficient-resources message (python/ray/tune/execution/insufficient_resources_manager.py,
    trial_executor.py in Ray 1.x): a trial that asks for more CPUs or GPUs than the whole cluster
    has can never be placed -- every trial stays PENDING. Asking for what is there, only
    claimed by other trials, is a wait and not read here."""
    need_cpu, need_gpu, has_cpu, has_gpu = (float(m.group(k)) for k in ("cpu", "gpu", "hcpu", "hgpu"))
    if need_cpu <= has_cpu and need_gpu <= has_gpu:
        return None
    return (f"no trial can start: each asks for {m.group('cpu')} CPU and {m.group('gpu')} GPU, the cluster has "
            f"{m.group('hcpu')} CPU and {m.group('hgpu')} GPU (Ray Tune; unless nodes are being added)")


K8S_UNSCHEDULABLE_S = 15 * 60.0
"""A pod the scheduler has failed to place for this long is a job that will not start: a
cluster autoscaler adds a node in minutes (the thread NVIDIA/k8s-device-plugin#119 quotes a
first minute of refusals, `(x2 over 40s)`); the stuck ones in the pasted logs were refused
for hours (x351 over 23h, 1086 times in 5h)."""
_K8S_AGE = re.compile(r"(\d+)([ydhms])")
_K8S_UNIT_S = {"y": 365 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def _k8s_age_s(age: str) -> float | None:
    """kubectl's HumanDuration (`6m7s`, `23h`, `2d3h`) in seconds; None if it is none."""
    parts = _K8S_AGE.findall(age)
    if not parts or "".join(n + u for n, u in parts) != age:
        return None
    return sum(int(n) * _K8S_UNIT_S[u] for n, u in parts)


def _tf_allocator_oom(m: re.Match, line: str) -> str:
    """Which memory ran out, by the allocator TensorFlow names: `GPU_0_bfc` (a device), `gpu_host_bfc` /
    `cuda_host_bfc` (pinned host memory for copies), `cpu` / `mklcpu` (host RAM: a CPU-only TensorFlow 2.21.0 asked for a
    10 TB tensor names `mklcpu`, tests/test_detectors_shapes_coordination_wait.py)."""
    alloc = m.group("alloc")
    low = alloc.lower()
    where = "pinned host memory" if "host" in low else "host memory" if "cpu" in low else "GPU memory"
    return f"TensorFlow out of {where} (allocator {alloc} could not allocate {m.group('size')})"


def _k8s_unschedulable(m: re.Match, line: str) -> str | None:
    """kubectl describe's event list (kubernetes/kubectl pkg/describe/describe.go:4173-4184 at
    dee3483: `Type Reason Age From Message`, an aggregated event's Age `<last> (x<count> over
    <first>)`; kubectl of 2017 printed `FirstSeen LastSeen Count From ...` columns instead):
    the scheduler's FailedScheduling repeated since long ago is a pod -- a training job --
    that never starts. Refused for minutes only, it may still be placed (a node being added)."""
    span = _k8s_age_s(m.group("span") or m.group("first") or "")
    n = int(m.group("n") or m.group("n2") or 0)
    if span is None or span < K8S_UNSCHEDULABLE_S or n < 2:
        return None
    why = (m.group("msg") or m.group("msg2") or "").strip()
    return (f"the job's pod was never scheduled: FailedScheduling {n} times over "
            f"{m.group('span') or m.group('first')} ({why[:160]})")


def _k8s_pending_pod(m: re.Match, line: str) -> str | None:
    """kubectl get pods' row (NAME READY STATUS RESTARTS AGE, then -o wide's IP NODE ...): a pod whose
    STATUS is still `Pending` -- not yet scheduled, or its containers not yet created -- long after it
    was made is a training job that does not start (pasted open-edge-platform/geti_v2#532: `0/3 Pending
    0 16h`, `Node: <none>`). Pending for seconds or minutes is a pod being placed."""
    age = _k8s_age_s(m.group("age"))
    if age is None or age < K8S_UNSCHEDULABLE_S:
        return None
    return f"a Kubernetes pod is still Pending after {m.group('age')} (never scheduled or started: the job does not run)"


def _rx(p: str, flags: int = 0) -> re.Pattern:
    return re.compile(p, flags)


R = TextRule
_INTEL_GPU_APIS = {"UR_RESULT_ERROR": "Unified Runtime", "ZE_RESULT_ERROR": "Level Zero", "PI_ERROR": "SYCL PI",
                   "CL": "OpenCL"}
"""The API layer an Intel GPU out-of-memory code's prefix names (rule ur-oom)."""
OOM, CRASH, HANG, NAN, RECOMPILE = "oom", "crash", "hang", "nan", "recompile"
VLLM_PG_HANG_S = 150
"""vLLM still waiting for its placement group at its fourth report (10, 30, 70, 150 s): not coming."""
CRIT, WARN, INFO = "critical", "warning", "info"

RULES: tuple[TextRule, ...] = (
    # -- accelerator memory ---------------------------------------------------------------
    R("torch-oom", _rx(r"(?:CUDA|HIP) out of memory|OutOfMemoryError: (?!.*\bCPU\b).*out of memory"), OOM, CRIT,
      _torch_oom, H.HINT_CUDA_OOM, ("out of memory",), recoverable=True),
    R("cuda-runtime-oom", _rx(r"cuda runtime error \(2\) : out of memory", re.I), OOM, CRIT,
      "CUDA OOM (cuda runtime error (2): out of memory)", H.HINT_CUDA_OOM, ("out of memory",), recoverable=True),
    # torch < 0.4's THC (and Lua torch's cutorch): __THCudaCheck prints this line to stderr, then raises
    # 'cuda runtime error (2) : out of memory'; a paste may hold only this line (oom_family.py cites it)
    R("thc-check-oom", _rx(r"\berror=2 : out of memory"), OOM, CRIT,
      "CUDA OOM (THCudaCheck FAIL ... error=2: out of memory)", H.HINT_CUDA_OOM, ("out of memory",), recoverable=True),
    # (also the driver-API checks that print cuGetErrorString: torch's C10_CUDA_DRIVER_CHECK 'CUDA driver error: out of
    # memory' and Triton's gpuAssert 'Triton Error [CUDA]: out of memory'; oom_family.py cites both)
    R("cuda-error-oom", _rx(r"CUDA (?:driver )?[Ee]rror(?: \d+ at \S+?:\d+)?: ?out of memory|cudaErrorMemoryAllocation"
                            r"|Triton Error \[CUDA\]: out of memory"), OOM, CRIT, _cuda_error_oom,
      H.HINT_CUDA_OOM, ("out of memory", "cudaerrormemoryallocation"), recoverable=True),
    # cuFFT's enumerator has no STATUS_ (CUFFT_ALLOC_FAILED, printed by torch's CUFFT_CHECK as 'cuFFT error: ...');
    # a ROCm build of torch hipifies the cuBLAS/cuSPARSE/cuSOLVER/cuFFT names to hip* (oom_family.py cites both)
    R("alloc-failed", _rx(r"\b(?P<lib>CUBLAS|CUDNN|CUSOLVER|CUSPARSE|CUFFT|HIPBLAS|HIPSPARSE|HIPSOLVER|HIPFFT)_(?:STATUS_)?"
                          r"ALLOC_FAILED\b"), OOM, CRIT,
      lambda m, line: (f"{'ROCm' if m.group('lib').startswith('HIP') else 'CUDA'} OOM: {m.group('lib')} could not "
                       f"allocate its workspace ({m.group(0)})"), H.HINT_CUDA_OOM,
      ("alloc_failed",)),
    # TensorFlow's GPU kernel launch check (TF_CHECK_OK on GpuLaunchKernel, core/util/gpu_kernel_helper.h),
    # pasted alone as a one-line excerpt (kubeflow/trainer#1158): `Non-OK-status: GpuLaunchKernel (...) status:
    # Internal: out of memory`
    R("tf-launch-oom", _rx(r"Non-OK-status: \w+ ?\(.{0,400}?\) status: (?:Internal|INTERNAL|Resource exhausted|RESOURCE_EXHAUSTED):"
                           r" out of memory"), OOM, CRIT,
      "CUDA OOM: a TensorFlow GPU kernel launch failed (Non-OK-status ... out of memory)", H.HINT_CUDA_OOM, ("out of memory",)),
    R("nccl-oom", _rx(r"Cuda failure (?:\d+ )?'out of memory'"), OOM, CRIT,
      "CUDA OOM inside NCCL (Cuda failure 'out of memory')",
      H.HINT_CUDA_OOM + "; NCCL needs free GPU memory for its buffers (NCCL_BUFFSIZE)", ("out of memory",)),
    R("glog-cuda-oom", _rx(r"== cudaSuccess \(2 vs\. 0\)"), OOM, CRIT,
      "CUDA OOM (a CUDA_CHECK failed: cudaSuccess (2 vs. 0), out of memory)", H.HINT_CUDA_OOM, ("out of memory",)),
    R("xla-oom", _rx(r"RESOURCE_EXHAUSTED:.{0,80}?(?:[Oo]ut of memory|memory|[Aa]llocat)"), OOM, CRIT,
      "accelerator out of memory (XLA RESOURCE_EXHAUSTED)", H.HINT_ACCEL_OOM, ("resource_exhausted",)),
    R("other-accel-oom", _rx(r"MPS backend out of memory|XPU out of memory|NPU out of memory|MLU out of memory"), OOM, CRIT,
      "accelerator out of memory", H.HINT_ACCEL_OOM, ("out of memory",)),
    # Intel GPUs (torch XPU / IPEX over oneAPI's Unified Runtime): the ur_result_t names of 38 and 39
    # (and the layers around it: Level Zero's ZE_RESULT_ERROR_OUT_OF_*_MEMORY, and the SYCL Plugin Interface's
    # 'Native API returns: -6 (PI_ERROR_OUT_OF_HOST_MEMORY)' / '-4 (PI_ERROR_MEM_OBJECT_ALLOCATION_FAILURE)' of
    # oneAPI before UR; PI_ERROR_OUT_OF_RESOURCES, which UR's device OOM also maps to, is not read: it names any
    # resource; oom_family.py cites them)
    R("ur-oom", _rx(r"(?P<api>UR_RESULT_ERROR|ZE_RESULT_ERROR|PI_ERROR)_OUT_OF_(?P<where>DEVICE|HOST)_MEMORY"
                    r"|(?P<api2>PI_ERROR|CL)_MEM_OBJECT_ALLOCATION_FAILURE"), OOM, CRIT,
      lambda m, line: (f"{'host memory' if m.group('where') == 'HOST' else 'Intel GPU (XPU) device memory'} ran out "
                       f"({_INTEL_GPU_APIS[m.group('api') or m.group('api2')]} {m.group(0)})"), H.HINT_ACCEL_OOM,
      ("out_of_device_memory", "out_of_host_memory", "mem_object_allocation_failure")),
    # -- round 12 (k13oomsrc): allocation failures of other stacks, each wording read in its source (oom_family.py)
    # torch_npu's NPU_CHECK_ERROR: '... NPU function error: ..., error code is 207018' with the table's text for
    # 207018 'The memory on the device is exhausted.', and CANN's own 'EL0004: ... Failed to allocate memory.'
    # (torch_npu's isCannOOM reads EL0004 as an OOM); its caching allocator's 'NPU out of memory' is other-accel-oom
    R("npu-acl-oom", _rx(r"error code is 207018\b|The memory on the device is exhausted|\bEL0004: .{0,120}?Failed to "
                         r"allocate"), OOM, CRIT,
      "Ascend NPU out of device memory (CANN: error 207018 / EL0004, the memory on the device is exhausted)",
      H.HINT_ACCEL_OOM, ("error code is 207018", "memory on the device is exhausted", "failed to allocate")),
    # Vulkan (ggml/llama.cpp, ncnn, ...): ggml-vulkan's catch prints 'ggml_vulkan: Device memory allocation of size N
    # failed.' and then the vk::SystemError's what(), Vulkan-Hpp's 'vk::Device::allocateMemory: ErrorOutOfDeviceMemory'
    # (its exception class vk::OutOfDeviceMemoryError; the C name VK_ERROR_OUT_OF_DEVICE_MEMORY)
    R("vulkan-oom", _rx(r"Device memory allocation of size (?P<n>\d+) failed|\bErrorOutOf(?P<w>Device|Host)Memory\b"
                        r"|\bOutOf(?P<w2>Device|Host)MemoryError\b|\bVK_ERROR_OUT_OF_(?P<w3>DEVICE|HOST)_MEMORY\b"), OOM, CRIT,
      lambda m, line: ("host memory ran out (Vulkan: out of host memory)"
                       if "host" in (m.group("w") or m.group("w2") or m.group("w3") or "").lower() else
                       "GPU out of memory (Vulkan: " + (f"a device allocation of {int(m.group('n')) / 2**20:.0f} MiB failed"
                                                        if m.group("n") else "out of device memory") + ")"),
      H.HINT_ACCEL_OOM + "; llama.cpp/ollama: fewer GPU layers (-ngl), a smaller context (-c) or a smaller quantization",
      ("memory allocation of size", "outofdevicememory", "outofhostmemory", "out_of_device_memory", "out_of_host_memory")),
    # a CUDA check macro that prints cudaGetErrorString after its own prefix: CTranslate2's CUDA_CHECK ('CUDA failed
    # with error out of memory', faster-whisper/WhisperX) and dmlc's CUDA_CALL ('Check failed: ... CUDA: out of
    # memory': DGL, MXNet's mshadow, TVM)
    R("cuda-check-oom", _rx(r"CUDA failed with error out of memory|\bCUDA: out of memory"), OOM, CRIT,
      lambda m, line: ("CUDA OOM (CTranslate2's CUDA check: CUDA failed with error out of memory)"
                       if m.group(0).startswith("CUDA failed") else
                       "CUDA OOM (dmlc's CUDA_CALL check -- MXNet, DGL, TVM: CUDA: out of memory)"),
      H.HINT_CUDA_OOM, ("out of memory",)),
    # OpenCV's OutOfMemoryError (modules/core/src/alloc.cpp): CV_Error_(StsNoMem, 'Failed to allocate N bytes'),
    # printed by cv::Exception as '(-4:Insufficient memory) Failed to allocate N bytes in function ...'; OpenCV 3 wrote
    # '(-4) Failed to allocate N bytes' and cv::error's 'OpenCV Error: Insufficient memory (Failed to allocate N bytes)'
    # (pasted opencv/opencv#8349, jetsonhacks/buildOpenCVTX2#26)
    R("opencv-oom", _rx(r"\(-4(?::Insufficient memory)?\) Failed to allocate (?P<n>\d+) bytes"
                        r"|Insufficient memory \(Failed to allocate (?P<n2>\d+) bytes\)"), OOM, CRIT,
      lambda m, line: (f"host RAM ran out (OpenCV could not allocate "
                       f"{int(m.group('n') or m.group('n2')) / 2**20:.0f} MiB)"), H.HINT_HOST_OOM,
      ("failed to allocate",)),
    # Rust's default alloc error hook (library/std/src/alloc.rs): 'memory allocation of N bytes failed', then abort --
    # the host-side OOM of a Rust extension (tokenizers, safetensors, polars, ...), before 'Aborted (core dumped)'
    R("rust-alloc-failed", _rx(r"(?:^|[\s:>])memory allocation of (?P<n>\d+) bytes failed\s*$"), OOM, CRIT,
      lambda m, line: f"host RAM ran out (a Rust allocation of {int(m.group('n')) / 2**30:.2f} GiB failed, then abort)",
      H.HINT_HOST_OOM, ("memory allocation of",)),
    # CPython's _PyErr_NormalizeException when a MemoryError recurs while it normalises one (Python/errors.c)
    R("py-fatal-memoryerror", _rx(r"Cannot recover from MemoryErrors while normalizing exceptions"), OOM, CRIT,
      "host RAM ran out (Fatal Python error: cannot recover from MemoryErrors)", H.HINT_HOST_OOM,
      ("memoryerrors",)),
    # joblib/loky's TerminatedWorkerError names the dead workers' exit codes: SIGKILL(-9) is the OOM killer's signal
    # (loky/process_executor.py, loky/backend/utils.py _format_exitcodes)
    R("loky-sigkill", _rx(r"The exit codes of the workers are \{[^}]*\bSIGKILL\(-9\)"), OOM, CRIT,
      "a joblib/loky worker was killed by SIGKILL (exit code -9): host OOM likely", H.HINT_HOST_OOM,
      ("exit codes of the workers",)),
    # dask.distributed's nanny restarts a worker past its memory_terminate_fraction (distributed/worker_memory.py;
    # older releases: 'Worker exceeded 95% memory budget. Restarting' in nanny.py)
    R("dask-memory-budget", _rx(r"exceeded (?P<pct>\d+)% memory budget\. Restarting"), OOM, CRIT,
      "dask's nanny killed a worker: it exceeded {pct}% of its memory limit (host OOM)", H.HINT_HOST_OOM,
      ("memory budget",)),
    # -- the OOM family of other stacks (OOM_FAMILY below cites where each wording is printed)
    R("paddle-oom", _rx(r"Out of memory error on (?P<dev>GPU|XPU|NPU|MLU|CUSTOM_DEVICE|\w+) (?P<n>\d+)\."
                        r"(?: Cannot allocate (?P<size>[\d.]+ ?[KMGT]?i?B))?"), OOM, CRIT,
      lambda m, line: (f"Paddle ResourceExhaustedError: out of memory on {m.group('dev')} {m.group('n')}"
                       + (f" (cannot allocate {m.group('size')})" if m.group("size") else "")),
      H.HINT_ACCEL_OOM, ("out of memory",)),
    R("tf-oom", _rx(r"OOM when allocating tensor (?:with|of) shape ?\[?(?P<shape>[^\]]{0,60})\]?"), OOM, CRIT,
      lambda m, line: ("TensorFlow ResourceExhaustedError: OOM when allocating tensor"
                       + (f" of shape [{m.group('shape').strip()}]" if m.group("shape").strip() else "")),
      H.HINT_ACCEL_OOM, ("oom when",)),
    # (the same PADDLE_ENFORCE_LE's own message, 'Insufficient GPU memory to allocation.', which later enforce
    # formats print without the numbers; oom_family.py cites it)
    R("paddle-enforce-oom", _rx(r"enforce allocating <= available failed, (?P<want>\d+) > (?P<have>\d+)"
                                r"|Insufficient GPU memory to allocation\b"), OOM, CRIT,
      lambda m, line: ((f"Paddle out of GPU memory (EnforceNotMet: allocating {int(m.group('want')) / 2**30:.2f} GiB > "
                        f"{int(m.group('have')) / 2**30:.2f} GiB available)") if m.group("want") else
                       "Paddle out of GPU memory (EnforceNotMet: Insufficient GPU memory to allocation)"), H.HINT_ACCEL_OOM,
      ("enforce allocating", "insufficient gpu memory")),
    R("tf-eigen-oom", _rx(r"EigenAllocator for GPU ran out of memory"), OOM, CRIT,
      "TensorFlow out of GPU memory (EigenAllocator ran out of memory: fatal)", H.HINT_ACCEL_OOM,
      ("ran out of memory",)),
    # onnxruntime's BFC arena (onnxruntime/core/framework/bfc_arena.cc BFCArena::Extend; oom_family.py cites it):
    # the device allocation failed, or the arena's own memory limit (gpu_mem_limit) was reached -- the
    # status text names no 'out of memory' (pasted DayBreak-u/chineseocr_lite#355, hacksider/Deep-Live-Cam#547)
    R("ort-bfc-oom", _rx(r"Failed to allocate memory for requested buffer of size (?P<n>\d+)"
                         r"|Available memory of (?P<have>\d+) is smaller than requested bytes of (?P<n2>\d+)"
                         r"|BFC Arena ran out of memory trying to allocate (?P<n3>\d+)"), OOM, CRIT,
      lambda m, line: ("onnxruntime out of memory (its BFC arena could not allocate "
                       f"{int(m.group('n') or m.group('n2') or m.group('n3')) / 2**20:.1f} MiB"
                       + (": the arena's memory limit was reached)" if m.group("n2") else ")")),
      H.HINT_ACCEL_OOM + "; onnxruntime: a smaller input/batch, or the execution provider's gpu_mem_limit / "
      "arena_extend_strategy", ("failed to allocate memory", "available memory of", "ran out of memory")),
    R("cuda-driver-oom", _rx(r"CUDA_ERROR_OUT_OF_MEMORY|(?:cudaMalloc|cudaHostAlloc|cuMemAlloc|hipMalloc)\S{0,40}.{0,40}?(?:returned )?out "
                             r"of memory|BFCArena.{0,80}?Failed to allocate memory"), OOM, CRIT,
      _cuda_alloc_oom, H.HINT_CUDA_OOM, ("out_of_memory", "out of memory")),
    # MXNet's storage (oom_family.py cites each): CUDA_CALL's CHECK `<< "CUDA: " << cudaGetErrorString(e)`, the
    # pooled manager's `Memory allocation failed <cudaGetErrorString>` (2.x) and the CPU storage's own words
    # (the CUDA_CALL wording is cuda-check-oom's: dmlc's macro, shared by DGL and TVM)
    R("mxnet-storage-oom", _rx(r"Memory allocation failed (?:out of memory|cudaErrorMemoryAllocation)"),
      OOM, CRIT, "CUDA OOM (MXNet's storage could not allocate: out of memory)", H.HINT_CUDA_OOM, ("out of memory",
                                                                                                   "cudaerrormemoryallocation")),
    R("mxnet-cpu-oom", _rx(r"Failed to allocate CPU Memory"), OOM, CRIT,
      "host RAM allocation failed (MXNet's CPU storage: Failed to allocate CPU Memory)", H.HINT_HOST_OOM,
      ("failed to allocate cpu memory",)),
    # XGBoost's device allocator (dh::detail::ThrowOOMError): `Memory allocation error on worker R: <what>`, then the
    # free and requested memory; <what> may be its caching allocator's name, not 'out of memory'
    R("xgboost-device-oom", _rx(r"Memory allocation error on worker (?P<rank>\d+):"), OOM, CRIT,
      "CUDA OOM (XGBoost's device allocation failed on worker {rank})", H.HINT_CUDA_OOM, ("memory allocation error",)),
    # LightGBM's CUDA build: CUDASUCCESS_OR_FATAL's Log::Fatal("[CUDA] %s %s %d", cudaGetErrorString(code), file, line)
    R("lightgbm-cuda-oom", _rx(r"\[CUDA\] out of memory\b"), OOM, CRIT,
      "CUDA OOM (LightGBM's CUDA call failed: out of memory)", H.HINT_CUDA_OOM, ("out of memory",)),
    # CatBoost's GPU memory pool (TStackLikeMemoryPool::Create, oom_family.py cites it): `Error: Out of memory. Requested
    # N MB; Free M MB` thrown as NCudaLib::TOutOfMemoryError, which an uncaught-exception report names as its type
    R("catboost-gpu-oom", _rx(r"Error: Out of memory\. Requested (?P<want>[\d.]+)(?: MB)?; Free (?P<have>[\d.]+)"
                              r"|NCudaLib::TOutOfMemoryError|We don't have enough memory for defragmentation"), OOM, CRIT,
      lambda m, line: ("CUDA OOM (CatBoost's GPU memory pool" + (f": requested {m.group('want')} MB, {m.group('have')} MB free)"
                                                                if m.group("want") else ")")),
      H.HINT_CUDA_OOM + "; CatBoost: a smaller depth / border_count / max_ctr_complexity, or gpu_ram_part",
      ("out of memory", "outofmemoryerror", "enough memory")),
    R("tf-device-alloc-failed", _rx(r"failed to allocate (?P<size>[\d.]+\s?[KMGT]i?B?) \(\d+ bytes\) from device"), OOM, CRIT,
      "TensorFlow could not allocate {size} on the device (CUDA/ROCm out of memory)", H.HINT_ACCEL_OOM,
      ("from device",)),
    R("tf-bfc-oom", _rx(r"Allocator \((?P<alloc>\w+)\) ran out of memory trying to allocate (?P<size>[\d.]+ ?\w+)"
                        r"(?!.*caller indicates that this is not a failure)"), OOM, CRIT,
      _tf_allocator_oom, H.HINT_ACCEL_OOM, ("ran out of memory",)),
    R("tf-bfc-oom-old", _rx(r"\bRan out of memory trying to allocate (?P<size>[\d.]+ ?\w+?)\.?\s+See logs for memory state"),
      OOM, CRIT, "TensorFlow out of GPU memory (the BFC allocator could not allocate {size})", H.HINT_ACCEL_OOM,
      ("ran out of memory",)),
    R("tf-bfc-dump", _rx(r"bfc_allocator\.cc:\d+\] (?:(?:InUse|Chunk|Free) +at [0-9a-fA-Fx]+ of size \d+"
                         r"|Bin \(\d+\): \s*Total Chunks: |Sum Total of in-use chunks: |[*x_]{50,}\s*$)"), OOM, CRIT,
      "TensorFlow out of GPU memory (its BFC allocator dumped its memory map, which it prints when an allocation fails)",
      H.HINT_ACCEL_OOM, ("bfc_allocator",)),
    R("tf-dst-uninit", _rx(r"Dst tensor is not initialized"), OOM, CRIT,
      "TensorFlow out of GPU memory (InternalError 'Dst tensor is not initialized': the buffer a tensor was to be "
      "copied into on the GPU was never allocated)", H.HINT_ACCEL_OOM, ("dst tensor",)),
    R("tf-oom-hint", _rx(r"Hint: If you want to see a list of allocated tensors when OOM happens"), OOM, CRIT,
      "TensorFlow ResourceExhaustedError: out of memory (its OOM hint, report_tensor_allocations_upon_oom, follows "
      "the error)", H.HINT_ACCEL_OOM, ("when oom happens",)),
    # (and the bridge's device-memory pool: `FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096
    # (896)MB`, which huggingface/accelerate's should_reduce_batch_size counts as the HPU's OOM, oom_family.py)
    R("hpu-workspace-oom", _rx(r"FATAL ERROR :: MODULE:(?P<mod>\w+) (?P<what>[\w ]*?)Allocation (?:of size ::(?P<n>\d+) failed"
                               r"|failed for size::?(?P<n2>\d+))"),
      OOM, CRIT, lambda m, line: (f"Gaudi (HPU) out of device memory ({m.group('mod')}: a {m.group('what').strip() or 'device'}"
                                  f" allocation of {int(m.group('n') or m.group('n2')) / 2**30:.2f} GiB failed)"), H.HINT_ACCEL_OOM,
      ("allocation of size", "allocation failed for size")),
    # (and torch's MapAllocator, shared-memory tensors of DataLoader workers: 'unable to mmap N bytes from file <F>:
    # Cannot allocate memory (12)', aten/src/ATen/MapAllocator.cpp; oom_family.py cites it)
    R("enomem", _rx(r"\[Errno 12\] Cannot allocate memory|Error code 12 \(Cannot allocate memory\)"
                    r"|unable to mmap \d+ bytes from file <[^>]*>: Cannot allocate memory \(12\)"
                    # GMP's default allocator, memory.c __gmp_default_allocate: fprintf (stderr, "GNU MP: Cannot
                    # allocate memory (size=%lu)\n", ...); abort ();  and perror()'s / Go's "<what>: " + strerror
                    # (ENOMEM) closing a line (glibc "Cannot allocate memory", Go syscall "cannot allocate memory");
                    # one word before the colon, and not a warning (llama.cpp's mlock warning goes on)
                    r"|GNU MP: Cannot allocate memory \(size=\d+\)|^(?!.*[Ww]arning).*(?:^|\s)[\w./-]+: [Cc]annot allocate memory\s*$"
                    # the kernel's warn_alloc() (linux mm/page_alloc.c "%s: page allocation failure: order:%u", and
                    # mm/vmalloc.c "vmalloc: allocation failure: %lu bytes") in a pasted dmesg
                    r"|: page allocation failure: order:\d+|vmalloc: allocation failure: \d+ bytes"), OOM, CRIT,
      "host RAM ran out (ENOMEM: Cannot allocate memory)", H.HINT_HOST_OOM,
      ("cannot allocate memory", "allocation failure")),
    R("numpy-oom", _rx(r"Unable to allocate (?P<size>[\d.]+ [KMGTP]i?B) for an array"), OOM, CRIT,
      "host RAM ran out (numpy: unable to allocate {size})", H.HINT_HOST_OOM, ("unable to allocate",)),
    R("bad-alloc", _rx(r"instance of 'std::bad_alloc'|\bstd::bad_alloc\b"), OOM, CRIT,
      "host RAM allocation failed (C++ std::bad_alloc)", H.HINT_HOST_OOM, ("terminate called", "error: std::bad_alloc")),
    # V8's heap limit in Node (tfjs-node, a JS data pipeline): `FATAL ERROR: Reached heap limit Allocation failed -
    # JavaScript heap out of memory` (older V8: `Ineffective mark-compacts near heap limit ...`, `CALL_AND_RETRY_LAST
    # ...`), after `<--- Last few GCs --->`; then the process aborts (real output of Node v20.20.2 here:
    # tests/data/logs/crashlang_node_heap_oom.log, made by tests/data/logs/programs/crashlang/heap_oom.js)
    R("v8-heap-oom", _rx(r"Allocation failed - JavaScript heap out of memory"), OOM, CRIT,
      "host memory ran out for the JavaScript heap (V8 reached its heap limit; --max-old-space-size sets it)",
      H.HINT_HOST_OOM, ("memory",)),
    R("slurm-oom", _rx(r"Detected (?P<n>\d+) oom[-_]kill events?"), OOM, CRIT,
      "Slurm: the job's memory cgroup OOM-killed a process ({n} oom-kill event(s))", H.HINT_HOST_OOM,
      ("oom-kill", "oom_kill")),
    R("tensorrt-oom", _rx(r"Error Code 1: Cuda Runtime \(out of memory\)|Cuda Error in \w+: 2 \(out of memory\)"
                          r"|Error Code 2: OutOfMemory \(Requested size was (?P<n>\d+) bytes"), OOM, CRIT,
      "TensorRT ran out of GPU memory (its CUDA allocation failed: out of memory)",
      H.HINT_ACCEL_OOM + "; TensorRT: a smaller workspace (memory pool) limit or max batch/shape profile",
      ("cuda runtime (out of memory)", "(out of memory)", "error code 2: outofmemory")),
    R("ggml-buffer-oom", _rx(r"failed to allocate (?P<dev>[\w.-]+) buffer of size (?P<n>\d+)"
                             r"|(?P<cpu>cpu)_buffer_type_alloc_buffer: failed to allocate buffer of size (?P<n2>\d+)"), OOM, CRIT,
      lambda m, line: (f"{'host RAM' if (m.group('cpu') or (m.group('dev') or '').upper().startswith('CPU')) else 'accelerator memory'}"
                       f" ran out (ggml could not allocate a {m.group('dev') or 'CPU'} buffer of "
                       f"{int(m.group('n') or m.group('n2')) / 2**30:.2f} GiB)"),
      H.HINT_ACCEL_OOM + "; llama.cpp/ollama: fewer GPU layers (-ngl), a smaller context (-c) or a smaller quantization",
      ("to allocate",)),
    # llama.cpp's model loader (llama-model.cpp load_tensors): a backend buffer for the weights could not be made;
    # its 'cudaMalloc failed' line is often not in the paste (an ollama/continue error wraps only this one)
    R("ggml-unable-buffer", _rx(r"unable to allocate (?P<buf>[\w.-]+) buffer\b"), OOM, CRIT,
      lambda m, line: (f"{'host RAM' if m.group('buf').upper().startswith(('CPU', 'CUDA_HOST')) else 'accelerator memory'}"
                       f" ran out (llama.cpp could not allocate its {m.group('buf')} buffer for the model)"),
      H.HINT_ACCEL_OOM + "; llama.cpp/ollama: fewer GPU layers (-ngl), a smaller context (-c) or a smaller quantization",
      ("to allocate",)),
    # ollama's scheduler refuses a model whose CPU share does not fit the host's free RAM + swap (llm/server.go)
    R("ollama-sysmem", _rx(r"model requires more system memory \((?P<need>[\d.]+ ?[KMGT]?i?B)\) than is available "
                           r"\((?P<have>[\d.]+ ?[KMGT]?i?B)\)"), OOM, CRIT,
      "host RAM too small for the model (ollama: it needs {need}, {have} is available)", H.HINT_HOST_OOM,
      ("more system memory",)),
    R("directml-oom", _rx(r"Could not allocate tensor with (?P<n>\d+) bytes\. There is not enough GPU video memory available"),
      OOM, CRIT, lambda m, line: f"GPU out of memory (DirectML: a tensor of {int(m.group('n')) / 2**20:.0f} MiB could not be "
                                 "allocated)", H.HINT_ACCEL_OOM, ("video memory",)),
    R("slurm-mem-limit", _rx(r"(?:Job|Step) (?P<id>[\d.]+(?:\.\w+)?) exceeded (?P<v>virtual )?memory limit \((?P<used>\d+) > "
                             r"(?P<limit>\d+)\), being killed"), OOM, CRIT,
      "Slurm killed job {id}: it exceeded its {v}memory limit ({used} > {limit})", H.HINT_HOST_OOM,
      ("exceeded memory limit", "exceeded virtual memory limit")),
    R("win-paging-file", _rx(r"\[WinError 1455\]|The paging file is too small for this operation to complete"), OOM, CRIT,
      "host memory ran out (Windows WinError 1455: the paging file is too small -- the commit limit was reached)",
      H.HINT_HOST_OOM + "; on Windows each DataLoader worker loads torch's CUDA DLLs again: fewer workers, or a "
      "larger, system-managed page file", ("winerror 1455", "error: the paging file", "paging file is too small")),
    R("cupy-oom", _rx(r"[Oo]ut of memory (?:to allocate \d+ bytes \(total \d+ bytes\)"
                      r"|allocating [\d,]+ bytes(?: \(allocated so far: [\d,]+ bytes)?)"), OOM, CRIT,
      "CUDA OOM (CuPy OutOfMemoryError: out of memory allocating on the GPU)", H.HINT_CUDA_OOM, ("out of memory",)),
    R("mindspore-oom", _rx(r"Malloc for kernel (?:input|output|workspace) failed, Memory isn't enough"
                           r"|[Mm]emory isn't enough and alloc failed|Out of memory\. Memory malloc failed"), OOM, CRIT,
      "MindSpore out of device memory (Memory isn't enough / memory malloc failed)", H.HINT_ACCEL_OOM,
      ("memory isn't enough", "memory malloc failed")),
    R("mlx-metal-oom", _rx(r"\[metal::malloc\] Attempting to allocate (?P<n>\d+) bytes which is greater than the "
                           r"maximum allowed buffer size"), OOM, CRIT,
      lambda m, line: f"Apple GPU out of memory (MLX: one buffer of {int(m.group('n')) / 2**30:.1f} GiB exceeds Metal's "
                      "limit)", H.HINT_ACCEL_OOM, ("attempting to allocate",)),
    # Metal's command-buffer error MTLCommandBufferErrorOutOfMemory (code 8), as MLX throws it
    # (ml-explore/mlx mlx/backend/metal/device.cpp:540 at 846d176227a0ac13d2667e58d2bb68b322109ab0:
    # "[METAL] Command buffer execution failed: {}." with the error's localizedDescription) and ggml's Metal
    # backend logs it ("error: Insufficient Memory (...)"); older macOS words it "(IOAF code 8)"
    # (pasted instructlab/instructlab#380, ollama/ollama#6257, safx/waifu2x-metal#3)
    R("metal-cmdbuf-oom", _rx(r"Insufficient Memory \((?:[0-9a-fA-F]{1,8}:kIOGPUCommandBufferCallbackErrorOutOfMemory"
                              r"|IOAF code 8)\)"), OOM, CRIT,
      "Apple GPU out of memory (Metal command buffer failed: Insufficient Memory)", H.HINT_ACCEL_OOM,
      ("insufficient memory",)),
    # CNTK's CudaCall (microsoft/CNTK Source/Math/GPUMatrix.h, CudaCall: RuntimeError("%s failure %d: %s ; GPU=%d ;
    # hostname=%s ; expr=%s", libName, retCode, CudaErrString(retCode), ...), read in the code index, line not
    # counted), which ONNX Runtime kept (microsoft/onnxruntime onnxruntime/core/providers/cuda/cuda_call.cc at
    # 58f385d703702233527a4f499be32908cd773425, "... ; expr=%s; %s"); error 2 is cudaErrorMemoryAllocation
    # (pasted microsoft/CNTK#1591, #2607, #480, #3536)
    R("cuda-call-oom", _rx(r"\bCUDA failure 2: out of memory ; GPU=(?P<gpu>-?\d+) ;"), OOM, CRIT,
      "CUDA OOM on GPU {gpu} (CUDA failure 2: out of memory, CNTK / ONNX Runtime CudaCall)", H.HINT_ACCEL_OOM,
      ("out of memory ; gpu=",)),
    # MindSpore's dynamic memory pool refuses a block past the device's size
    # (mindspore/ccsrc/backend/common/mem_reuse/mem_dynamic_allocator.cc:392, the path and line the pasted
    # mindspore-lab/mindone#820 prints; DynamicMemPoolBestFit::AddMemBlockAndMemBufByEagerFree's MS_LOG(ERROR)
    # "TotalUsedMemStatistics : N [plus TotalUsedByEventMemStatistics : N and] plus alloc size : N is more than
    # total mem size : N.", read in the code index -- the repository is over the fetch limit)
    R("mindspore-pool-oom", _rx(r"plus alloc size : (?P<n>\d+) is more than total mem size : (?P<t>\d+)"), OOM, CRIT,
      lambda m, line: f"MindSpore out of device memory (a {int(m.group('n')) / 2**30:.1f} GiB request is past the "
                      f"pool's {int(m.group('t')) / 2**30:.1f} GiB)", H.HINT_ACCEL_OOM, ("total mem size",)),
    # MLX's allocator when the device (Metal: unified memory; CUDA) gives no buffer: '[malloc_or_wait] Unable to
    # allocate N bytes.' until 2025 (mlx/allocator.cpp), then '[malloc]' / '[malloc_async]' (oom_family.py cites them)
    R("mlx-malloc-oom", _rx(r"\[(?:malloc_or_wait|malloc|malloc_async)\] Unable to allocate (?P<n>\d+) bytes"), OOM, CRIT,
      lambda m, line: f"MLX out of memory (its allocator could not allocate {int(m.group('n')) / 2**30:.2f} GiB)",
      H.HINT_ACCEL_OOM, ("unable to allocate",)),
    R("jittor-oom", _rx(r"(?P<dev>GPU|CPU) ?memory is overflow, please reduce your batch_size"), OOM, CRIT,
      "{dev} out of memory (Jittor: memory is overflow)", H.HINT_ACCEL_OOM, ("memory is overflow",)),
    R("tpu-hbm-oom", _rx(r"Ran out of memory in memory space (?P<space>hbm|vmem)", re.I),
      OOM, CRIT, "TPU out of memory (XLA: ran out of HBM)", H.HINT_ACCEL_OOM, ("memory space",)),
    R("hip-error-oom", _rx(r"hipErrorOutOfMemory|HIP error: out of memory"), OOM, CRIT,
      "ROCm/HIP out of memory (hipErrorOutOfMemory)", H.HINT_CUDA_OOM, ("hiperroroutofmemory", "out of memory")),
    R("resource-exhausted-error", _rx(r"ResourceExhaustedError\b.{0,200}?(?:\bOOM\b|[Oo]ut of memory|memory)"), OOM,
      CRIT, "ResourceExhaustedError: out of memory", H.HINT_ACCEL_OOM, ("resourceexhausted",)),
    R("tf-resource-exhausted", _rx(r"Resource exhausted: .{0,120}?(?:[Aa]llocat|\bOOM\b|[Oo]ut of memory|\bmemory\b)"),
      OOM, CRIT, "accelerator out of memory (Resource exhausted: an allocation failed)", H.HINT_ACCEL_OOM,
      ("resource exhausted",)),
    R("ray-oom", _rx(r"(?:ray\.exceptions\.)?OutOfMemoryError: Task was killed due to the node running low on memory"),
      OOM, CRIT, "Ray killed a task: the node ran low on host memory (ray OutOfMemoryError)", H.HINT_HOST_OOM,
      ("low on memory",)),
    # Ray's memory monitor kill summary (ray-project/ray src/ray/raylet/node_manager.cc, printed to the driver as
    # `(raylet) ... node_manager.cc:NNNN: N Workers (tasks / actors) killed due to memory pressure (OOM), ...`
    # every RAY_event_stats_print_interval_ms; doc/source/ray-core/scheduling/ray-oom-prevention.rst): the
    # driver sees only this summary when the killed task was retried or its error went elsewhere (pasted
    # flwrlabs/flower#2157, WM-PO/WMPO#3). A count of 0 is not a kill.
    R("ray-memory-monitor-kill", _rx(r"(?P<n>[1-9]\d*) Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"),
      OOM, CRIT, "Ray's memory monitor killed {n} worker(s): the node ran low on host memory (raylet OOM summary)",
      H.HINT_HOST_OOM, ("memory pressure",)),
    # the advice Ray appends to every memory-monitor kill (the OutOfMemoryError text and the raylet summary,
    # src/ray/raylet/node_manager.cc): a paste that kept only the tail of the kill message (its Top-10 memory
    # users table, then this line) still shows the kill (pasted OpenRLHF/OpenRLHF#911)
    R("ray-oom-advice", _rx(r"Refer to the documentation on how to address the out of memory issue: https://docs\.ray\.io"),
      OOM, CRIT, "Ray's memory monitor killed a worker: the node ran low on host memory (Ray's OOM advice)",
      H.HINT_HOST_OOM, ("out of memory issue",)),
    # Kubernetes' kubelet evicting a pod under node memory pressure (its Evicted event / pod status message
    # `The node was low on resource: memory. Container <c> was using <n>Ki, which exceeds its request of <r>.`, and
    # `The node had condition: [MemoryPressure].` for a pod rejected after; wording as pasted in
    # FederatedAI/KubeFATE#64 -- the kubelet eviction manager's source was not read): the pod was killed for host memory
    R("k8s-evicted-memory", _rx(r"The node was low on resource: memory\b|The node had condition: \[MemoryPressure\]"),
      OOM, CRIT, "Kubernetes evicted the pod: the node was low on memory (kubelet eviction)", H.HINT_HOST_OOM
      + "; set the pod's memory request to what it uses so it is not first to be evicted", ("low on resource: memory",
                                                                                                "memorypressure")),
    R("vllm-kv-too-small", _rx(r"max seq len \((?P<need>\d+)\)(?: is larger than the maximum number of tokens that can be "
                               r"stored in KV cache(?: \((?P<have>\d+)\))?|, \((?P<need_gb>[\d.]+) Gi?B KV cache is ?"
                               r"needed, which is larger than the available KV [Cc]ache memory(?: \((?P<avail_gb>[\d.]+) Gi?B\))?)"),
      OOM, CRIT,
      lambda m, line: ("not enough GPU memory for vLLM's KV cache: one sequence of max_model_len "
                       f"{m.group('need')} tokens does not fit"
                       + (f" (the memory left after the weights holds {m.group('have')} tokens)" if m.group("have") else "")
                       + (f" (it needs {m.group('need_gb')} GiB of KV cache"
                          + (f", {m.group('avail_gb')} GiB is available)" if m.group("avail_gb") else ")")
                          if m.group("need_gb") else "")),
      H.HINT_ACCEL_OOM + "; vLLM: raise gpu_memory_utilization or lower max_model_len", ("kv cache",)),
    R("vllm-kv-oom", _rx(r"No available memory for the cache blocks|CUDA out of memory occurred when warming up"
                         r"|Insufficient memory for (?:the )?KV cache|not enough KV cache space"), OOM, CRIT,
      "inference engine out of GPU memory (KV cache / warm-up)", H.HINT_ACCEL_OOM,
      ("cache blocks", "warming up", "kv cache")),
    # sglang's memory pool: after the weights load, the --mem-fraction-static budget leaves no room for any KV
    # token (python/sglang/srt/model_executor/model_runner.py init_memory_pool, later pool_configurator.py
    # MemoryPoolConfig; newer releases: 'Loaded weights leave no GPU memory for the KV cache under
    # --mem-fraction-static=F'; oom_family.py cites them)
    R("sglang-kv-oom", _rx(r"Not enough memory\. Please try to increase --mem-fraction-static"
                           r"|Loaded weights leave no GPU memory for the KV cache"), OOM, CRIT,
      "not enough GPU memory for sglang's KV cache pool after the weights loaded (--mem-fraction-static)",
      H.HINT_ACCEL_OOM + "; sglang: raise --mem-fraction-static (the share for weights + KV cache), or use more "
      "GPUs (--tp) or a smaller model", ("not enough memory", "no gpu memory for the kv cache")),
    # huggingface/accelerate's find_executable_batch_size (src/accelerate/utils/memory.py, also under the
    # Trainer's auto_find_batch_size): it halves the batch on each out-of-memory error and gives up at zero
    R("batch-size-zero", _rx(r"No executable batch size found, reached zero"), OOM, CRIT,
      "out of memory at every batch size: accelerate's find_executable_batch_size halved the batch down to 0 "
      "(every try raised an out-of-memory error)", H.HINT_ACCEL_OOM, ("no executable batch size",)),
    # -- host memory ----------------------------------------------------------------------
    R("cpu-alloc", _rx(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
                       r"(?:: you tried to allocate (?P<bytes>\d+) bytes)?"), OOM, CRIT,
      lambda m, line: ("host RAM allocation failed (DefaultCPUAllocator" +
                       (f": {int(m.group('bytes')) / 2**30:.1f} GiB requested)" if m.group("bytes") else ")")),
      H.HINT_HOST_OOM, ("defaultcpuallocator",)),
    # TH's THAlloc/THRealloc (Lua torch7, and torch < 1.5's aten/src/TH): a host malloc failed
    R("th-buy-ram", _rx(r"\$ Torch: not enough memory: you tried to (?P<re>re)?allocate (?P<gb>\d+)GB"), OOM, CRIT,
      lambda m, line: (f"host RAM allocation failed (TH: not enough memory, you tried to {m.group('re') or ''}allocate "
                       f"{m.group('gb')}GB)"), H.HINT_HOST_OOM,
      ("not enough memory",)),
    # TensorFlow's pinned (page-locked) host allocator for GPU copies: cudaHostAlloc/cuMemHostAlloc failed
    R("tf-pinned-host-oom", _rx(r"could not allocate pinned host memory of size: (?P<n>\d+)"), OOM, CRIT,
      lambda m, line: ("host memory ran out (TensorFlow could not allocate "
                       + (f"{int(m.group('n')) / 2**20:.1f} MiB" if int(m.group('n')) >= 2**20 else f"{m.group('n')} bytes")
                       + " of pinned host memory for GPU copies)"),
      H.HINT_HOST_OOM, ("pinned host memory",)),
    # a container's end as the runtime recorded it: kubectl describe's 'Reason:  OOMKilled', a pod's yaml/json
    # 'reason: OOMKilled', docker inspect's '"OOMKilled": true' (oom_family.py cites the runtimes)
    R("container-oomkilled", _rx(r"\b[Rr]eason\"?:\s*\"?OOMKilled\b|\"OOMKilled\":\s*true\b"), OOM, CRIT,
      "the container was OOM-killed (its runtime's reason: OOMKilled -- it went past its memory limit)",
      H.HINT_HOST_OOM + "; in a container: raise the pod's/container's memory limit", ("oomkilled",)),
    R("dataloader-killed", _rx(r"DataLoader worker \(pid(?:\(s\))? (?P<pid>[\d, ]+)\) is killed by signal: Killed"),
      OOM, CRIT, "DataLoader worker (pid {pid}) killed by SIGKILL: host OOM likely", H.HINT_HOST_OOM, ("killed",)),
    # (macOS's bash prints the signal's number after it: `Killed: 9`)
    R("bare-killed", _rx(r"^\s*[`*_]{0,3}Killed(?:: 9)?[`*_.]{0,3}\s*$"), OOM, CRIT,
      "process killed by SIGKILL (shell printed 'Killed'): host OOM likely", H.HINT_HOST_OOM, ("killed",)),
    R("zh-bare-killed", _rx(r"^\s*[`*_]{0,3}已杀死[`*_.]{0,3}\s*$"), OOM, CRIT,
      "process killed by SIGKILL (the shell printed '已杀死', 'Killed' in a Chinese locale): host OOM likely",
      H.HINT_HOST_OOM, ("已杀死",)),
    # (bash under a zh_CN locale: `train_lenet.sh: 行 3: 25020 已放弃 (核心已转储) ./build/tools/caffe train`,
    # pasted rbgirshick/py-faster-rcnn#830; the words are glibc's translations, exit_codes.SIGNAL_BY_WORD)
    R("shell-death", _rx(r"(?:line|行) \d+:\s+(?P<pid>\d+) (?P<what>Segmentation fault|Aborted|Abort trap|Bus error|Illegal instruction"
                         r"|Floating point exception|Killed|Terminated|Hangup|段错误|已中止|已放弃|总线错误|非法指令|浮点异常)(?::\s*\d+)?(?:\s+[(（](?:core dumped|核心已转储)[)）])?\s*(?P<cmd>.*)$"),
      CRASH, CRIT, _shell_death, H.HINT_CRASH, ("segmentation", "aborted", "abort trap", "bus error", "illegal", "floating",
                                                  "killed", "terminated", "hangup", "段错误", "已中止", "已放弃", "总线错误",
                                                  "非法指令", "浮点异常")),
    R("torchrun-death", _rx(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)"),
      CRASH, CRIT, _torchrun_death, H.HINT_LAUNCHER, ("exitcode",)),
    R("elastic-sigkill", _rx(r"Signal 9 \(SIGKILL\) received by PID (\d+)"), OOM, CRIT,
      "a worker was killed by SIGKILL: host OOM likely", H.HINT_HOST_OOM, ("sigkill",)),
    R("exitcode-9", _rx(r"exitcode\s*:\s*-9\b"), OOM, CRIT,
      "a worker was killed by SIGKILL (exitcode -9): host OOM likely", H.HINT_HOST_OOM, ("exitcode",)),
    R("deepspeed-death", _rx(r"exits with return code = (?P<code>-?\d+)"), CRASH, CRIT, _deepspeed_death,
      H.HINT_LAUNCHER, ("return code",)),
    R("subprocess-signal", _rx(r"died with <Signals\.(?P<sig>SIG\w+): (?P<num>\d+)>"), CRASH, CRIT,
      _subprocess_signal, H.HINT_LAUNCHER, ("died with",)),
    R("mp-spawn-signal", _rx(r"process (?P<proc>\d+) terminated with signal (?P<sig>SIG\w+)"), CRASH, CRIT,
      _mp_spawn_signal, H.HINT_LAUNCHER, ("terminated with signal",)),
    R("mpirun-signal", _rx(r"process rank (?P<rank>\d+) with PID (?P<pid>\S+) on node \S+ exited on signal "
                           r"(?P<num>\d+) \((?P<name>[^)]+)\)"), CRASH, CRIT, _mpirun_signal, H.HINT_LAUNCHER,
      ("exited on signal",)),
    R("dmesg-oom", _rx(r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)"
                       r"|^(?:\[\s*[\d.]+\]\s*)?Killed process (?P<pid2>\d+) \((?P<comm2>[^)]*)\)"), OOM, CRIT,
      lambda m, line: f"kernel OOM killer killed pid {m.group('pid') or m.group('pid2')} "
                      f"({m.group('comm') or m.group('comm2')})", H.HINT_HOST_OOM, ("kill process", "killed process")),
    R("oom-kill", _rx(r"oom-kill:.*?\btask=(?P<task>[^,\s]+),pid=(?P<pid>\d+)"), OOM, CRIT,
      "kernel OOM killer killed pid {pid} ({task})", H.HINT_HOST_OOM, ("oom-kill",)),
    R("oom-invoked", _rx(r"^.*?(\S+) invoked oom-killer:"), OOM, CRIT, "kernel OOM killer invoked", H.HINT_HOST_OOM,
      ("oom-killer",), secondary=True),
    # -- hangs ----------------------------------------------------------------------------
    R("nccl-watchdog", _rx(r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
                           r"OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<tmo>\d+)\) ran for (?P<ran>\d+) milliseconds"),
      HANG, CRIT, lambda m, line: f"NCCL collective timed out: {m.group('op')} (SeqNum {m.group('seq')}) ran "
                                  f"{int(m.group('ran')) / 1000:.0f} s, timeout {int(m.group('tmo')) / 1000:.0f} s",
      H.HINT_NCCL_TIMEOUT, ("watchdog",)),
    # -- a hang's end: the watchdog ending the process (kind crash: the process is gone) ---
    R("nccl-takedown", _rx(r"we are taking the entire process down"), CRASH, CRIT,
      "NCCL watchdog took the process down (abort: SIGABRT)",
      "the watchdog ended the run after a failed or timed-out collective (TORCH_NCCL_ASYNC_ERROR_HANDLING); "
      "find why that collective never completed: " + H.HINT_NCCL_TIMEOUT, ("process down",)),
    R("nccl-watchdog-words", _rx(r"Watchdog caught(?: col|$)|collective operation timeout"
                                 r"|\d+ milliseconds before timing out"), HANG, CRIT,
      "NCCL collective timed out (the watchdog's timeout)", H.HINT_NCCL_TIMEOUT,
      ("watchdog", "operation timeout", "before timing out")),
    # sglang's scheduler watchdog (python/sglang/srt/managers/scheduler.py watchdog_thread): a batch is running
    # and the forward count has not moved for watchdog_timeout s -- it logs this, then SIGQUITs the launcher,
    # whose handler kills the whole process tree (entrypoints/engine.py; pasted sgl-project/sglang#3752)
    R("sglang-watchdog", _rx(r"Watchdog timeout \(self\.watchdog_timeout=(?P<s>\d+(?:\.\d+)?)\)"), HANG, CRIT,
      "sglang's scheduler made no progress for {s} s: a forward batch never finished (its watchdog then ends the "
      "server)", H.HINT_NCCL_TIMEOUT + "; sglang: --watchdog-timeout, and the py-spy dump it prints of the schedulers",
      ("watchdog timeout",)),
    # TensorFlow's collective ops with a timeout (CollectiveOptions timeout_seconds / tf.distribute's
    # CommunicationOptions.timeout_seconds): the executor's own timer fails a collective that did not finish --
    # tensorflow/tensorflow tensorflow/core/common_runtime/base_collective_executor.cc at c117e91a, ExecuteAsync
    # `Status(error::DEADLINE_EXCEEDED, "Collective has timed out during execution.")` and CompleteParamsAsync `...
    # "Collective has timed out waiting for other workers."` (raised in Python as DeadlineExceededError, often behind
    # StartAbort's `Collective ops is aborted by: `): a worker never joined the collective
    R("tf-collective-timeout", _rx(r"Collective has timed out (?P<what>during execution|waiting for other workers)"),
      HANG, CRIT,
      lambda m, line: ("a TensorFlow collective timed out " + m.group("what") +
                       " (its timeout_seconds ran out: a worker never joined)"),
      H.HINT_NCCL_TIMEOUT + "; TensorFlow: every worker's log (the first that failed or stalled), and "
      "CommunicationOptions(timeout_seconds=...)", ("timed out",)),
    R("barrier-timeout", _rx(r"Timed out initializing process group in store based barrier|[Bb]arrier timed out"
                             r"|DEADLINE_EXCEEDED|[Ww]atchdog timeout \("), HANG, CRIT,
      "a collective/barrier timed out (a rank never arrived)", H.HINT_NCCL_TIMEOUT,
      ("timed out", "deadline_exceeded", "timeout")),
    # pytest-timeout (pytest-dev/pytest-timeout pytest_timeout.py at 16edd491cb2d): a test that ran past --timeout
    # is ended by its timer -- the signal method fails it with PYTEST_FAILURE_MESSAGE `Timeout (>%ss) from
    # pytest-timeout.` (line 24; `Timeout >%ss` before 2.4), the thread method prints `+++ Timeout +++` banners
    # (terminal.sep("+", title="Timeout"), lines 514/528) around every thread's stack and os._exit(1)s: the test
    # hung (real logs tests/data/logs/pytest-timeout-signal.log, pytest-timeout-thread.log)
    R("pytest-timeout", _rx(r"\+\+\+\+\+ Timeout \+\+\+\+\+|Failed: Timeout \(?>(?P<s>\d+(?:\.\d+)?)s\b"), HANG, CRIT,
      lambda m, line: ("pytest-timeout ended a test that ran past its timeout" +
                       (f" ({m.group('s')} s)" if m.group("s") else "") + ": the test hung (its stack dump shows where)"),
      "read the dumped stack of the test's thread (MainThread): the innermost frame is the call that never "
      "returned (a collective, a queue get, a lock, a socket)", ("timeout",)),
    # Ray's release-test harness ends a step that ran past its `timeout` (ray-project/ray release/e2e.py at 00732fe,
    # _check_stop: `Process timed out in the prepare command stage.` / `while running a command.` / `while syncing
    # files.` / `while starting a session.`; its successor ray_release's command runners: `Cluster command timed out
    # after 3600 seconds.`, `Command timed out after N seconds.` -- pasted ray-project/ray#19227, #19226, #27867):
    # the step was still running when its time ran out, so it was stuck or far slower than its budget
    R("ray-release-timeout", _rx(r"\bProcess timed out (?P<what>in the prepare command stage|while running a command"
                                 r"|while syncing files|while starting a session)\b|\b(?:Cluster )?[Cc]ommand timed out "
                                 r"after (?P<s>\d+(?:\.\d+)?) seconds\b"), HANG, CRIT,
      lambda m, line: ("the test harness's timeout ended the step "
                       + (f"({m.group('what')})" if m.group("what") else f"after {float(m.group('s')):.0f} s")
                       + ": it was still running, stuck or far slower than its budget"),
      "compare the step's last output with its timeout: a step that stopped printing long before is stuck (waiting for "
      "nodes, a task that cannot be scheduled); one still progressing needs a larger timeout", ("timed out",)),
    # XLA's distributed runtime client (openxla/xla xla/pjrt/distributed/client.h at 001918b7024c, Options::
    # missed_heartbeat_callback, LOG(QFATAL)): `Terminating process because the coordinator detected missing
    # heartbeats. This most likely indicates that another task died ...` (a peer stopped heartbeating) or
    # `... because of missing heartbeat response from the coordinator` (the coordinator task stopped): JAX's
    # other tasks went silent and this one is ended for it
    R("xla-missed-heartbeats", _rx(r"Terminating process because (?:the (?P<who>coordinator) detected missing heartbeats"
                                   r"|of missing heartbeat response from the coordinator)"), HANG, CRIT,
      lambda m, line: ("JAX's distributed runtime ended this process: " +
                       ("the coordinator saw another task stop sending heartbeats" if m.group("who") else
                        "the coordinator stopped answering its heartbeats") + " (that task hung or died)"),
      "the other tasks' own logs say why they stopped (an earlier error, an OOM kill, a preemption, a long stall); "
      "jax.distributed.initialize(heartbeat_timeout_seconds=...) for slow hosts", ("heartbeat",)),
    # Open MPI's launcher losing a node's daemon (ORTE in Open MPI <= 4, PRTE in 5): `ORTE has lost communication
    # with a remote daemon.` / `... with its daemon located on node:` then `We cannot recover from this failure,
    # and therefore will terminate the job.` (pasted garyexplains/examples#13, aws/aws-parallelcluster#301): a
    # node or its network went away and mpirun ends every rank
    R("mpi-daemon-lost", _rx(r"(?P<who>ORTE|PRTE) has lost communication with (?:a remote daemon|its daemon)"),
      CRASH, CRIT, "mpirun lost a node's daemon ({who} has lost communication with it) and terminates the job",
      "that node died, rebooted or lost its network (check its health and the interface mpirun uses: "
      "--mca oob_tcp_if_include / btl_tcp_if_include)", ("lost communication",)),
    # (Horovod's stall inspector, horovod/horovod at 2626dc87: horovod/common/stall_inspector.cc lines 70-104 -- the
    # warning, then per rank `N: [tensor, ...]`, `N!` for a rank past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS and `One or
    # more rank (marked by "!") is stalled for longer than N seconds. Will shutdown.`: that line alone is the report)
    R("stalled-ranks", _rx(r"are waiting for remainder of ranks for more than \d+ seconds|failed to pass monitoredBarrier"
                           r"|is stalled for longer than \d+ seconds\. Will shutdown"
                           r"|\bGetTimeoutError\b|RPC call to \w+ timed out"
                           r"|The client socket has failed to connect to .{0,160}?(?:timed out|errno: 110)"), HANG, CRIT,
      "the ranks stopped making progress (a stall/timeout report)", H.HINT_NCCL_TIMEOUT,
      ("waiting for remainder", "gettimeouterror", "timed out", "monitoredbarrier", "will shutdown")),
    R("nccl-debug-dump", _rx(r"ProcessGroupNCCL preparing to dump debug info"), HANG, CRIT,
      "NCCL's watchdog detected a timeout or stall (it is dumping its debug info)", H.HINT_NCCL_TIMEOUT,
      ("dump debug info",), secondary=True),
    # the heartbeat monitor's report (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    # getNCCLWatchdogTimeoutErrorMsg, called from heartbeatMonitor with "this local rank" when this rank's
    # watchdog saw the timeout, or " rank N" when another rank flagged it in the TCPStore): printed
    # alone, without this rank's own `Watchdog caught ...` line, on every rank that only got the signal
    # (pasted lsdefine/simple_GRPO#46, meta-pytorch/torchtune#2651 hard-wrapped after "this local")
    R("nccl-dump-signal", _rx(r"Received a dump signal due to a collective timeout from\s*(?:rank\s+(?P<rank>-?\d+)"
                              r"|(?P<local>this local))?"), HANG, CRIT,
      lambda m, line: ("a NCCL collective timed out (" + (f"rank {m.group('rank')}'s" if m.group("rank") else
                                                          "this rank's" if m.group("local") else "a") +
                       " watchdog saw it and signalled every rank to dump: a rank never joined the collective)"),
      H.HINT_NCCL_TIMEOUT, ("collective timeout",)),
    # TORCH_NCCL_BLOCKING_WAIT=1: the waiting thread itself gives up on the work and logs
    # `[Rank N] Work WorkNCCL(SeqNum=.., OpType=.., ...) timed out in blocking wait (TORCH_NCCL_BLOCKING_WAIT=1).`
    # (ProcessGroupNCCL.cpp WorkNCCL::synchronizeInternal, `LOG(ERROR) << exceptionMsg`) before it raises
    R("nccl-blocking-wait", _rx(r"(?:OpType=(?P<op>\w+).{0,300}?)?timed out in blocking wait"), HANG, CRIT,
      lambda m, line: ("NCCL collective timed out in blocking wait" +
                       (f": {m.group('op')}" if m.group("op") else "") + " (TORCH_NCCL_BLOCKING_WAIT)"),
      H.HINT_NCCL_TIMEOUT, ("timed out in",)),
    R("barrier-overfull", _rx(r"Waiting in store based barrier to initialize process group .*?world_size=(?P<world>\d+), "
                              r"worker_count=(?P<workers>\d+)"), HANG, CRIT,
      lambda m, line: (f"the store-based barrier can never complete: {m.group('workers')} workers joined a world of "
                       f"{m.group('world')} (two jobs share MASTER_PORT, or the world size is wrong)"
                       if int(m.group("workers")) > int(m.group("world")) else None),
      "a second job or a wrong --nproc_per_node/--nnodes joined this rendezvous: give each job its own MASTER_PORT",
      ("barrier",)),
    R("tune-infeasible", _rx(r"You asked for (?P<cpu>[\d.]+) cpu and (?P<gpu>[\d.]+) gpu per trial, but the cluster only has "
                             r"(?P<hcpu>[\d.]+) cpu and (?P<hgpu>[\d.]+) gpu"), HANG, CRIT, _tune_infeasible,
      "lower resources_per_trial / num_workers to what the cluster has (`ray status`), or add nodes that have it",
      ("cluster only has",)),
    R("k8s-unschedulable", _rx(r"\bWarning\s+FailedScheduling\s+\S+\s+\(x(?P<n>\d+) over (?P<span>\w+)\)\s+\S+\s+(?P<msg>\S.*)$"
                               r"|^\s*(?P<first>\w+)\s+\w+\s+(?P<n2>\d+)\s+\S+\s+(?:\S+\s+)?Warning\s+FailedScheduling\s+"
                               r"(?P<msg2>\S.*)$"), HANG, CRIT, _k8s_unschedulable,
      "the cluster cannot place the pod: free or add what it requests (GPUs, CPU, memory) or lower the request; "
      "`kubectl describe node` shows what is allocatable", ("failedscheduling",)),
    R("k8s-pending-pod", _rx(r"\b0/\d+ +Pending +\d+ +(?P<age>\w+)(?:\s|$)"), HANG, CRIT, _k8s_pending_pod,
      "kubectl describe pod <pod>: its Events say why it is not placed (FailedScheduling: what it requests that no "
      "node has) or not started", ("pending",)),
    R("stopped-output", _rx(r"\bno (?:further |more )?output for \d+\+? ?(?:s|sec|seconds|min|mins|minutes|h|hours)\b", re.I),
      HANG, CRIT, "the output stopped (the log says so)", H.HINT_NCCL_TIMEOUT, ("output for",)),
    R("xla-device-exception", _rx(r"Exception in device=(?P<dev>[A-Z]+:\d+)"), CRASH, CRIT,
      "torch_xla: an exception in device {dev}", H.HINT_CRASH, ("exception in device",)),
    R("nccl-work-timeout", _rx(r"Timeout at NCCL work: (?P<seq>\d+)"), HANG, CRIT,
      "NCCL collective timed out (Timeout at NCCL work {seq})", H.HINT_NCCL_TIMEOUT, ("timeout",)),
    R("nccl-watchdog-died", _rx(r"Process group watchdog thread terminated with exception|Exception raised from "
                                r"(?:ncclCommWatchdog|checkTimeout|watchdogHandler)\b"), CRASH, CRIT,
      "NCCL watchdog thread died with an exception: the process is taken down (abort)",
      "the watchdog ended the run after a failed or timed-out collective: " + H.HINT_NCCL_TIMEOUT, ("watchdog",
                                                                                                   "checktimeout")),
    # the stack of the watchdog's timeout error without its message: torch/csrc/distributed/c10d/
    # ProcessGroupNCCL.cpp WorkNCCL::checkTimeout builds the DistBackendError ('Watchdog caught collective
    # operation timeout') only when the work timed out, so a frame naming checkTimeout is that timeout's stack
    # (pasted OpenRLHF/OpenRLHF#427, where the message line is cut off and only frames #1-#6 remain)
    R("nccl-checktimeout-frame", _rx(r"frame #\d+: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\("), HANG, CRIT,
      "NCCL collective timed out (a frame of the watchdog's checkTimeout: the stack of its timeout error)",
      H.HINT_NCCL_TIMEOUT, ("checktimeout",)),
    R("store-timeout", _rx(r"DistStoreError\b.{0,300}?(?:[Tt]imeout|timed out)|got error: Socket Timeout"
                           r"|(?:TCPStore|c10d store|rendezvous)\b.{0,200}?[Ss]ocket [Tt]imeout"
                           r"|\b[Ww]ait timeout after \d+ ?ms|(?:RuntimeError|DistStoreError): Wait timeout\b"
                           r"|[Tt]he (?:client|server) socket has timed out after \d+"), HANG, CRIT,
      "the c10d store timed out (a rank never reached it)",
      "a rank never joined the store: check every node's launcher log and MASTER_ADDR/PORT", ("timeout", "timed out")),
    R("nccl-stuck", _rx(r"watchdog got stuck for (?P<s>\d+) seconds"), HANG, CRIT,
      "NCCL watchdog stuck for {s} s (a NCCL/CUDA call hangs)",
      H.HINT_NCCL_TIMEOUT + "; another thread may hold the GIL inside a CUDA call", ("watchdog",)),
    # ProcessGroupNCCL's heartbeat monitor when the watchdog thread itself stopped beating
    # (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp at 0007e752d518810f0f8942a830dbbbfc69f34577:
    # dump_debugging_info `No PGNCCL's watchdog heartbeat detected, so we are dumping debug info.`, heartbeatMonitor's
    # `[Rank N] monitoring thread detects no heartbeat and will finally kill the process!` and its LOG(FATAL) exit
    # message `[Rank N] NCCL monitor thread timeout. Basically, this could be due to CUDA or NCCL calls being
    # unexpectedly blocking ...`): the torch 2.2 wordings of what later became `watchdog got stuck for N seconds`
    R("nccl-monitor-no-heartbeat", _rx(r"NCCL monitor thread timeout\b|monitoring thread detects no heartbeat"
                                       r"|No PGNCCL's watchdog heartbeat detected"), HANG, CRIT,
      "NCCL's heartbeat monitor saw the watchdog make no progress (a NCCL/CUDA call hangs): it dumps debug info "
      "and kills the process",
      H.HINT_NCCL_TIMEOUT + "; another thread may hold the GIL inside a CUDA call", ("heartbeat", "monitor thread timeout")),
    # the watchdog's report of the work it found failed, printed before its timeout or error text on some ranks and
    # alone on others (ProcessGroupNCCL.cpp, torch 2.3/2.4 watchdogHandler `Exception (either an error or timeout)
    # detected by watchdog at work: N, last enqueued NCCL work: ..`, torch 2.5+ `<prefix>  failure detected by
    # watchdog at work sequence id: N PG status: ...`), and the flight-recorder dump signal it then sends
    # (broadcastDumpSignal `First PG on this rank to signal dumping.`; a rank that only got the signal:
    # `Observed flight recorder dump signal from another rank via TCPStore.`). Either an error or a timeout:
    # secondary, so a NCCL error's own line names the failure when it is there; alone, the collective never
    # completed on this rank (most often a timeout), read as a hang
    R("nccl-watchdog-failure", _rx(r"\(either an error or timeout\) detected by watchdog at work: (?P<seq>\d+)"
                                   r"|failure detected by watchdog at work sequence id: (?P<seq2>\d+)"
                                   r"|First PG on this rank to signal dumping|Observed flight recorder dump signal"),
      HANG, CRIT,
      lambda m, line: ("a NCCL collective failed or timed out: the watchdog flagged work "
                       f"{m.group('seq') or m.group('seq2')}" if m.group("seq") or m.group("seq2") else
                       "a NCCL collective failed or timed out (the watchdog signalled a flight-recorder dump)"),
      H.HINT_NCCL_TIMEOUT, ("watchdog", "signal"), secondary=True),
    # torch/utils/data/dataloader.py _MultiProcessingDataLoaderIter._get_data (torch 2.13.0, line 1450; 1.x the same
    # words): `raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")` -- the main process
    # waited `timeout` s for a batch no worker produced (a worker stuck in I/O or a deadlock); real output:
    # tests/data/logs/dataloader_timeout.log
    # MXNet gluon's and GluonTS's multi-worker loaders word the same wait `Worker timed out after {} seconds. This
    # might be caused by` (their iterators' `except multiprocessing.context.TimeoutError:` message, read in the code
    # index; pasted awslabs/gluonts#689)
    R("dataloader-timeout", _rx(r"DataLoader timed out after (?P<s>\d+(?:\.\d+)?) seconds"
                                r"|\bWorker timed out after (?P<s2>\d+) seconds\. This might be caused by"), HANG, CRIT,
      lambda m, line: f"the DataLoader waited {m.group('s') or m.group('s2')} s for a batch no worker produced "
                      "(DataLoader timeout)",
      "a worker is stuck (I/O, a lock, a remote read): py-spy dump the worker processes; num_workers=0 shows the "
      "stuck __getitem__ in the main process", ("timed out",)),
    # gloo's TCP pair names the peer it gave up on: `Read timeout <peer>` / `Write timeout <peer>`
    # (pytorch/gloo gloo/transport/tcp/pair.cc Pair::read and Pair::write at 5b46c34,
    # `GLOO_ERROR_MSG("Read timeout ", peerDescription())`), `Connect timeout [addr]:port` in the 2017
    # pair.cc that pasted facebookarchive/caffe2#360 names (pair.cc:611): that peer stopped answering
    R("gloo-pair-timeout", _rx(r"gloo/transport/tcp/pair\.cc:\d+\]\s*(?P<op>Read|Write|Connect) timeout\b"
                               r"(?:\s+(?P<peer>\S+))?"), HANG, CRIT,
      lambda m, line: (f"gloo: a {m.group('op').lower()} to peer {(m.group('peer') or '?').rstrip('.,;')} timed out "
                       "(that rank stopped answering or never connected)"),
      H.HINT_NCCL_TIMEOUT, ("timeout",)),
    R("gloo-timeout", _rx(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>recv|send) operation"
                          r"|\[gloo\].{0,80}?[Tt]imed out|gloo.{0,200}?Timed out after \d+"), HANG, CRIT,
      lambda m, line: ("gloo collective timed out" +
                       (f": {m.group('op')} waited {int(m.group('ms')) / 1000:.0f} s" if m.group("ms") else "")),
      H.HINT_NCCL_TIMEOUT, ("timed out",)),
    R("rdzv-timeout", _rx(r"Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<a>\d+)/(?P<b>\d+) clients "
                          r"joined"), HANG, CRIT, "rendezvous timed out after {s} s: {a}/{b} clients joined",
      "a rank never started: check every node's launcher log, MASTER_ADDR/PORT and firewalls", ("timed out",)),
    R("rdzv-error", _rx(r"RendezvousTimeoutError"), HANG, CRIT, "rendezvous timed out (RendezvousTimeoutError)",
      "a rank never started: check every node's launcher log and MASTER_ADDR/PORT", ("rendezvous",)),
    R("dist-exception-timeout", _rx(r"^(?:[\w.]+\.)?(?:(?:RuntimeError|TimeoutError)\b:.{0,300}?(?:NCCL|[Gg]loo|store"
                                    r"|[Rr]endezvous|barrier|collective|process group|c10d|ALLREDUCE|BROADCAST|ALLGATHER)"
                                    r"|(?:DistBackendError|DistError|DistStoreError|DistNetworkError)\b:)"
                                    r".{0,300}?(?:[Tt]imed? ?out|[Tt]imeout)"),
      HANG, CRIT, "a distributed operation timed out (its exception says so)", H.HINT_NCCL_TIMEOUT,
      ("timeout", "timed out")),
    # the coordination service of XLA's distributed runtime (JAX, TF, torch-xla on GPU/TPU pods): a task
    # that stopped heartbeating is set to ERROR (tsl/distributed_runtime/coordination/coordination_service.cc,
    # the file the pasted EleutherAI/architecture-objective#26 names); the task hung, died or was preempted
    R("coordination-heartbeat", _rx(r"Task (?P<task>/job:[\w/:.-]+) heartbeat timeout\b"), HANG, CRIT,
      "the coordination service lost task {task}: it missed its heartbeats (the task hung, died or was preempted)",
      "the named task's own log says why it stopped (an earlier error, an OOM kill, a preemption); a long compile or "
      "a stalled host can also miss heartbeats (jax.distributed.initialize(heartbeat_timeout_seconds=...))",
      ("heartbeat timeout",)),
    # Ray's autoscaler (v1 monitor; its test python/ray/tests/test_autoscaler_e2e.py-era output `(autoscaler +32s)
    # Error: No available node types can fulfill resource request {...}. Add suitable node types to this cluster
    # to resolve this issue.`): no node type of the cluster can ever hold that request, so the task/actor is
    # infeasible and pends forever (Ray neither fails nor times it out; pasted real-stanford/scalingup#6, a GPU
    # requested on a cluster without one). v2's plural "...resource requests {...}*N" also names queued
    # requests that wait their turn, so only v1's singular `Error:` wording is read.
    R("ray-infeasible", _rx(r"Error: No available node types can fulfill resource request (?P<req>\{[^{}]{0,300}\})"),
      HANG, CRIT, "Ray cannot place a task/actor: no node type can ever fulfil {req} (it stays pending forever)",
      "ask for what the cluster has (`ray status` lists its resources; ray.init(num_gpus=...) when GPUs are not "
      "detected), or add a node type that has it", ("fulfill resource",)),
    # Ray compiled graphs (python/ray/exceptions.py `class RayChannelTimeoutError(RayChannelError, TimeoutError)`,
    # raised when a channel read/write outlasts RAY_CGRAPH_get_timeout): the driver waited for a worker's output
    # that never came -- vLLM's Ray executor step (pasted ray-project/ray#53845, ray-project/ray#59249)
    R("ray-channel-timeout", _rx(r"\bRayChannelTimeoutError\b"), HANG, CRIT,
      "a Ray compiled-graph channel timed out (RayChannelTimeoutError): a worker never produced its output",
      H.HINT_NCCL_TIMEOUT + "; Ray compiled graphs: RAY_CGRAPH_get_timeout, and py-spy dump of the workers",
      ("raychanneltimeouterror",)),
    # torch_xla's XRT mesh client (third_party/xla_client/mesh_service.cc MeshClient::MeshClient): it logs
    # `Waiting to connect to client mesh master (300 seconds) ADDR` (a normal start-up line), then
    # XLA_CHECK(channel->WaitForConnected(now + XRT_MESH_CONNECT_WAIT s)) << "Failed to connect to client mesh
    # master: " << ADDR -- the check failing is that wait running out: the master process never answered
    # (pasted pytorch/xla#1586, #2604, #2651)
    R("xla-mesh-connect", _rx(r"Failed to connect to client mesh master: (?P<addr>\S+)"
                              r"|Check failed: impl_->channel->WaitForConnected\("), HANG, CRIT,
      "torch_xla: the mesh client waited for the mesh master and gave up (XRT_MESH_CONNECT_WAIT ran out: the "
      "master process never answered)",
      "the master (ordinal 0) process must be alive and reachable: an xm.rendezvous outside the spawned processes, "
      "a master that already exited, or a wrong XRT_TPU_CONFIG / mesh address all leave the clients waiting",
      ("mesh master", "check failed")),
    # XLA's rendezvous gave up (xla/service/rendezvous.cc AwaitAndLogIfStuck, LOG(FATAL) after the warning that
    # xla_rendezvous.py reads): the participants never all arrived within the termination timeout
    R("xla-termination", _rx(r"Termination timeout (?:for `(?P<name>[^`]{1,200})` )?of (?P<s>\d+) seconds exceeded\. "
                             r"Exiting to ensure a consistent program state"), HANG, CRIT,
      "XLA collective stuck: the rendezvous waited its termination timeout ({s} s) for participants that never "
      "arrived, and XLA exits", H.HINT_NCCL_TIMEOUT, ("termination timeout",)),
    # vLLM on Ray waiting for its placement group (vLLM's ray_utils.py _wait_until_pg_ready: it logs the
    # seconds waited at 10, 30, 70, 150, 310 ... s, then raises `Cannot provide a placement group of ... within
    # PG_WAIT_TIMEOUT (1800) seconds`): a group whose GPUs exist is placed within the first interval; still
    # waiting at 150 s (the fourth report) is a request the cluster cannot hold -- a GPU missing or a node IP
    # that never matches (pasted gpustack/gpustack#5509)
    R("vllm-pg-wait", _rx(r"Waiting for creating a placement group of specs for (?P<s>\d+) seconds"
                          r"|Cannot provide a placement group of .{0,600}?within (?P<t>\d+) seconds"), HANG, CRIT,
      lambda m, line: (f"vLLM cannot get its Ray placement group: still waiting after {m.group('s') or m.group('t')} s "
                       "(the GPUs it asks for are not in the cluster, or the node IP never matches)"
                       if int(m.group("s") or m.group("t")) >= VLLM_PG_HANG_S else None),
      "compare the specs with `ray status` (GPUs per node) and make VLLM_HOST_IP match the IP each Ray node "
      "registered under; lower tensor/pipeline parallel to what the nodes hold", ("placement group",)),
    # NeMo RL's cluster setup (its wording as pasted in NVIDIA-NeMo/RL#271, the PR that added it): it retries
    # placement-group creation while fewer GPUs exist than requested -- more than the cluster has never fits
    R("not-enough-gpus", _rx(r"Not enough GPUs available\. Requested (?P<req>\d+) GPUs, but only (?P<have>\d+) are "
                             r"available in the cluster"), HANG, CRIT,
      lambda m, line: (f"the job waits for {m.group('req')} GPUs in a cluster of {m.group('have')}: its placement "
                       "group can never be created" if int(m.group("req")) > int(m.group("have")) else None),
      "request what the cluster has (cluster.gpus_per_node x num_nodes), or add nodes", ("not enough gpus",)),
    R("heartbeat", _rx(r"Heartbeat monitor timed out"), HANG, CRIT, "NCCL heartbeat monitor timed out",
      H.HINT_NCCL_TIMEOUT, ("heartbeat",), secondary=True),
    R("some-nccl", _rx(r"Some NCCL operations have failed or timed out"), HANG, CRIT,
      "NCCL operations failed or timed out", H.HINT_NCCL_TIMEOUT, ("nccl",), secondary=True),
    # -- Ascend HCCL (torch_npu, MindSpore, vLLM-Ascend, lmdeploy on NPUs): the CANN error-code table's own wordings,
    # printed on screen as `EIxxxx: [PID: N] <time> <ErrMessage>` then its Possible Cause / Solution lines
    # (the HCCL error table hicann/hcomm registers, `hcomm_g_msg` / REG_FORMAT_ERROR_MSG, read in the code index:
    # `"ErrCode": "EI0002"`, ErrMessage `The wait execution of the Notify register times out. Reason: The Notify
    # register has not received the Notify record from remote rank: [%s]. ...`, and `EI0006` `Getting socket times
    # out. Reason: %s`, its Solution naming HCCL_CONNECT_TIMEOUT; hicann/hccl 09300b70 docs/zh/user_guide/
    # fault_diagnosis/debug_thinking.md:222,226 and task_exec_stage.md:134 name EI0002 a collective's execution
    # timeout, EI0006 a link-setup timeout).
    # EI0002: a collective's notify wait ran past HCCL_EXEC_TIMEOUT (default 1800 s) because a peer never posted its
    # part -- the NPU form of NCCL's watchdog timeout (pasted InternLM/lmdeploy#3354, hiyouga/LlamaFactory#975).
    # EI0006: building a link or waiting for a peer's data ran past HCCL_CONNECT_TIMEOUT: that rank never came.
    R("hccl-notify-timeout", _rx(r"The wait execution of the Notify register times out\.?(?: Reason: The Notify "
                                 r"register has not received the Notify record from remote rank:? ?\[(?P<peer>[^\]]{0,40})\])?"),
      HANG, CRIT,
      lambda m, line: ("HCCL collective timed out (EI0002): the notify wait ran past HCCL_EXEC_TIMEOUT"
                       + (f", remote rank {m.group('peer')} never posted its part"
                          if (m.group("peer") or "").isdigit() and m.group("peer") != "4294967295" else "")
                       + " (a rank never joined the collective)"),
      H.HINT_NCCL_TIMEOUT + "; Ascend: the first rank that failed or stalled (its own log/plog), HCCL_EXEC_TIMEOUT",
      ("notify register times out",)),
    R("hccl-socket-timeout", _rx(r"Getting socket times out\. Reason: (?P<why>[^.\n]{1,160})"), HANG, CRIT,
      "HCCL: getting a socket to a peer timed out (EI0006: {why}): that rank never connected or stopped sending",
      H.HINT_NCCL_TIMEOUT + "; Ascend: check the peer rank's log, HCCL_CONNECT_TIMEOUT and the NPU links "
      "(hccn_tool -i N -tls -g)", ("socket times out",)),
    # HCCL's own log lines of the same two timeouts, as they reach the screen with ASCEND_SLOG_PRINT_TO_STDOUT=1 or in
    # a pasted plog (hicann/hccl docs/zh/user_guide/fault_diagnosis/param_link_stage.md:127,
    # hccl_socket_manager.cc `[Wait][LinkEstablish]wait socket establish timeout, role[1] rank[1] timeout[120 s]`;
    # task_exec_stage.md:154, task_exception_handler.cc `[TaskExecStage][Timeout][Host]Task run failed, ...`, and
    # transport_manager.cc `[CreateLink][InitChannelStage][Timeout]`): a stage tag [Timeout] is a wait that ran out
    R("hccl-stage-timeout", _rx(r"wait socket establish timeout(?:, role\[\d+\] rank\[(?P<rank>\d+)\] timeout\[(?P<s>\d+) s\])?"
                                r"|\[(?P<stage>TaskExecStage|InitChannelStage)\]\[Timeout\]"), HANG, CRIT,
      lambda m, line: ("HCCL: " + ("a collective's task timed out waiting for its peers ([TaskExecStage][Timeout])"
                                   if m.group("stage") == "TaskExecStage" else
                                   "setting up a link to a peer timed out" +
                                   (f" after {m.group('s')} s" if m.group("s") else "") + " (the peer never connected)")),
      H.HINT_NCCL_TIMEOUT + "; Ascend: HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT, and the peer rank's plog",
      ("establish timeout", "stage][timeout]")),
    # torch_npu's ProcessGroupHCCL, the WorkHCCL handleException twin of NCCL's line (Ascend/pytorch
    # torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:991 at 9e73e708; its watchdog's `Watchdog caught collective
    # operation timeout: WorkHCCL(...) ran for N milliseconds before timing out.` at :907 is read by nccl-watchdog-words)
    R("some-hccl", _rx(r"Some HCCL operations have failed or timed out"), HANG, CRIT,
      "HCCL operations failed or timed out", H.HINT_NCCL_TIMEOUT, ("failed or timed out",), secondary=True),
    # torch.distributed.rpc: a call whose reply did not come within its rpc_timeout is failed by the agent with
    # kRpcTimeoutErrorStr (pytorch/pytorch torch/csrc/distributed/rpc/rpc_agent.h:25-26 at 623b9c56, `RPC ran for more
    # than set timeout ({} ms) and will now be marked with an error`; TensorPipe's agent raises it as
    # `RuntimeError: RPCErr:1:RPC ran for ...`): the callee never answered -- real output
    # tests/data/logs/gloo_rpc_timeout.log (torch 2.13.0+cpu, rpc_sync to a worker busy for 8 s, rpc_timeout=3)
    R("rpc-timeout", _rx(r"RPC ran for more than set timeout(?: \((?P<ms>\d+) ms\))?"), HANG, CRIT,
      lambda m, line: ("a torch.distributed.rpc call timed out" +
                       (f" after {int(m.group('ms')) / 1000:g} s" if m.group("ms") else "") +
                       ": the remote worker never answered (it is stuck, busy or gone)"),
      "py-spy dump the callee worker: what it runs instead of answering; rpc_timeout in "
      "TensorPipeRpcBackendOptions or the call's timeout= for calls that are slow on purpose", ("set timeout",)),
    # Ray's collective library (python/ray/util/collective/collective_group/nccl_collective_group.py
    # Rendezvous.meet / get_nccl_id at ray-project/ray 2135df0b): a non-zero rank polls for rank 0's NCCLUniqueID
    # store actor for timeout_s (180 s) and then raises `Unable to meet other processes at the rendezvous store.`, or
    # `Unable to get the NCCLUniqueID from the store.` when the actor is there but rank 0 never put the id: rank 0
    # never reached the group's first collective
    R("ray-collective-rendezvous", _rx(r"Unable to meet other processes at the rendezvous store"
                                       r"|Unable to get the NCCLUniqueID from the store"), HANG, CRIT,
      "Ray collective: this rank waited its rendezvous timeout (180 s) for rank 0's NCCL id store and gave up "
      "(rank 0 never reached the group's first collective)",
      "all ranks must call create_collective_group / init_collective_group with the same group name and world "
      "size, and rank 0 must reach the first collective (its log says where it stopped)",
      ("at the rendezvous store", "ncclunique")),
    # -- NaN (before generic crash: these also end in exceptions) -------------------------
    R("min-loss-scale", _rx(r"Minimum loss scale reached|Current loss scale already at minimum"), NAN, CRIT,
      "loss scale hit its minimum: gradients overflow every step (loss exploding)", H.HINT_NAN, ("loss scale",)),
    R("anomaly", _rx(r"Function '(?P<fn>\w+)' returned nan values in its (?P<n>\d+)\w* output"), NAN, CRIT,
      "NaN in backward: {fn} returned NaN (anomaly mode)", H.HINT_NAN, ("nan",)),
    # Keras' ModelCheckpoint(save_best_only=True) starts from best = inf (mode min) or -inf (mode max) and prints
    # `'\nEpoch %05d: %s did not improve from %0.5f' % (epoch + 1, self.monitor, self.best)` (keras-team/tf-keras
    # tf_keras/callbacks.py ModelCheckpoint._save_model, at 8ec67edd16c6a195566b3f0c17a577afeb889ebc; Keras 3
    # `{self.best:.5f}`): any finite value compares better than +-inf, so a best still at inf means every monitored
    # value so far was NaN or Inf (pasted yu4u/age-gender-estimation#97's title, 'Epoch 00001: val_loss did not
    # improve from inf', the loss NaN; a finite best -- 'did not improve from 0.20000' -- or 'improved from inf to
    # 2.07957' stays quiet)
    R("keras-best-never-finite", _rx(r"(?P<mon>\w+) did not improve from (?P<best>-?inf)\b"), NAN, CRIT,
      "Keras ModelCheckpoint: {mon} did not improve from {best} -- no value of {mon} so far was finite (NaN/Inf)",
      H.HINT_NAN, ("improve from inf", "improve from -inf")),
    R("megatron-nan", _rx(r"number of nan iterations:\s*(?P<n>[1-9]\d*)"), NAN, WARN,
      "the trainer counted NaN iterations", H.HINT_NAN, ("nan",)),
    R("nan-words", _rx(r"\b(?:nan|inf) loss (?:detected|encountered|at)\b|non-finite loss|loss is not finite"
                       r"|\bloss (?:is|became) (?:nan|inf)\b|loss returned in `training_step` is (?:nan|inf)"
                       r"|detected (?:a )?(?:nan|inf) (?:in|loss)|(?:Error|Exception):.{0,40}\b(?:nan|inf) loss\b"
                       r"|Moving average ignored a value of (?:nan|inf)|\bloss became infinite\b"
                       r"|Tensor had (?:NaN|Inf) values|NaN or Inf found in input tensor|found NaN in local grad norm"
                       r"|contain Inf/NaN\. Training has diverged|\bfound (?:NaN|Inf) in local\b"
                       # a sentence whose subject is the loss or the gradients and whose verb says NaN/Inf
                       r"|\b(?:nan|inf)s? (?:values? )?(?:detected|found|encountered|appeared|occurred) in (?:the )?"
                       r"(?:loss|grad\w*|outputs?|logits|weights|parameters)\b"
                       r"|\b(?:nan|inf) in (?:the )?(?:loss|grad\w*) (?:detected|found|encountered)\b"
                       r"|\b(?:got|found|encountered|seeing|saw) (?:a |an )?(?:nan|inf) (?:loss|grad\w*)\b"
                       r"|\bfound (?:nan|inf) in (?:the )?(?:loss|grad\w*)\b"
                       r"|\b(?:loss|gradients?|grads) (?:has|have|had|contains?|contained|went to|goes to|became|becomes"
                       r"|diverged to|turned|turned to|exploded to|was|were|are) (?:a |an )?(?:nan|inf)\b", re.I), NAN, CRIT,
      "loss is NaN/Inf", H.HINT_NAN,
      ("nan", "inf loss", "is inf", "became inf", "finite", "inf in", "value of inf", "had inf")),
    # the frameworks' own NaN checks, raised as exceptions: TensorFlow's HistogramSummaryOp (tensorflow/core/kernels/
    # summary_op.cc, `errors::InvalidArgument("Nan in summary histogram for: ", name())`, and "Infinity in ..."),
    # JAX's jax_debug_nans (jax/interpreters/xla.py check_nans, `FloatingPointError(f"invalid value (nan)
    # encountered in {name}")`), torch's clip_grad_norm_(error_if_nonfinite=True) (torch/nn/utils/clip_grad.py,
    # "The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be clipped")
    R("framework-nan-check", _rx(r"\b(?P<what>Nan|Infinity) in summary histogram for: (?P<tag>\S+)"
                                 r"|invalid value \((?P<jax>nan|inf)\) encountered in (?P<fn>\S+)"
                                 r"|for gradients from `parameters` is non-finite, so it cannot be clipped"),
      NAN, CRIT, lambda m, line: (
          f"a weight or activation is {'NaN' if m.group('what') == 'Nan' else 'Inf'} (TensorFlow's summary "
          f"histogram {m.group('tag')})" if m.group("what") else
          f"JAX's NaN check: invalid value ({m.group('jax')}) in {m.group('fn')}" if m.group("jax") else
          "the gradient norm is NaN/Inf (clip_grad_norm_ refused to clip it)"),
      H.HINT_NAN, ("nan in summary", "infinity in summary", "(nan) encountered", "(inf) encountered",
                   "non-finite, so")),
    # the frameworks' per-op / per-tensor NaN checks, which name the op or tensor that went non-finite:
    # - TensorFlow's tf.debugging.enable_check_numerics() callback: `!!! Detected Infinity or NaN in output %d of
    #   %s op "%s" (# of outputs: %d) !!!` (%s: "graph" / "eagerly-executing"; tensorflow/tensorflow
    #   tensorflow/python/debug/lib/check_numerics_callback.py get_check_numerics_error_message @0304934138cb)
    # - Paddle's FLAGS_check_nan_inf: `There are NAN or INF (num_nan=%lld, num_inf=%lld, num_zero=%lld) in %s.`
    #   (thrown at level 0) and `[PRECISION] [ERROR] in %s, numel=%lld, num_nan=%lld, num_inf=%lld, ...` (printed
    #   only when num_nan > 0 or num_inf > 0; a clean tensor at level 3 prints `[PRECISION] in %s, numel=...`
    #   without [ERROR] and no counts) -- PaddlePaddle/Paddle paddle/fluid/framework/details/nan_inf_utils_detail.h
    #   PrintForDifferentLevel @a883f87f; the older `Operator %s output Tensor %s contains Inf.` / `... contains
    #   NAN.` (paddle/fluid/framework/operator.cc CheckTensorNANOrInf, platform::errors::Fatal; PaddlePaddle/Paddle's
    #   stored operator.cc is @0d67fd21)
    # - MMDetection's CheckInvalidLossHook: `runner.logger.info('loss become infinite or NaN!')` as the message of
    #   a failed `assert torch.isfinite(outputs['loss'])` (open-mmlab/mmdetection mmdet/engine/hooks/
    #   checkloss_hook.py @19bceba5; the logger's INFO line is all that names it: the AssertionError is bare)
    # - PyTorch Lightning's detect_nan_parameters (Trainer(terminate_on_nan=True), 1.x): `Detected nan and/or inf
    #   values in `{name}`.` (Lightning-AI/pytorch-lightning src/lightning/pytorch/utilities/finite_checks.py:42
    #   @8386c704, removed in 457cd76d)
    # - Stable-Baselines3's VecCheckNan on the actions the policy chose: `found nan in actions.\r\nOriginated from
    #   the RL model` (DLR-RM/stable-baselines3 stable_baselines3/common/vec_env/vec_check_nan.py:89 @e05d2dbe);
    #   NaN in the environment's observations is the environment's data and is not read here
    # - detectron2's Boxes.clip: `assert torch.isfinite(self.tensor).all(), "Box tensor contains infinite or NaN!"`
    #   (facebookresearch/detectron2 detectron2/structures/boxes.py Boxes.clip): the boxes a head predicted are
    #   Inf/NaN -- the model's output diverged (pasted xingyizhou/CenterNet2#65, after 3700 iterations of finite loss)
    R("op-output-nonfinite", _rx(r"Detected Infinity or NaN in output (?P<slot>\d+) of (?:graph|eagerly-executing) op "
                                 r"\"(?P<tfop>[^\"]+)\""
                                 r"|There are NAN or INF \(num_nan=(?P<pn>\d+), num_inf=(?P<pi>\d+)"
                                 r"|\[PRECISION\] \[ERROR\] in (?P<pwhere>.{1,200}?), numel=\d+, num_nan=(?P<qn>\d+), "
                                 r"num_inf=(?P<qi>\d+)"
                                 r"|Operator `?(?P<pop>[\w.]+)`? output Tensor `?(?P<pt>[\w.@]+)`? contains (?P<pwhat>Inf|NAN)\b"
                                 r"|\bloss become infinite or NaN\b"
                                 r"|Detected nan and/or inf values in `(?P<lparam>[^`]{1,200})`"
                                 r"|\bfound (?P<sbwhat>nan|inf) in actions\b"
                                 r"|\bBox tensor contains infinite or NaN\b"), NAN, CRIT,
      lambda m, line: (
          f"TensorFlow's check_numerics: op {m.group('tfop')} output {m.group('slot')} is Inf/NaN" if m.group("tfop") else
          f"Paddle's NaN/Inf check: {m.group('pn')} NaN and {m.group('pi')} Inf values in an op's output"
          if m.group("pn") is not None else
          (f"Paddle's NaN/Inf check: {m.group('qn')} NaN and {m.group('qi')} Inf values in {m.group('pwhere')[:80]}"
           if int(m.group("qn")) + int(m.group("qi")) else None) if m.group("qn") is not None else
          f"Paddle's NaN/Inf check: operator {m.group('pop')}'s output {m.group('pt')} contains {m.group('pwhat')}"
          if m.group("pop") else
          f"the parameter {m.group('lparam')[:80]} is NaN/Inf (Lightning's detect_nan_parameters)" if m.group("lparam") else
          f"the policy's actions are {m.group('sbwhat')} (Stable-Baselines3 VecCheckNan)" if m.group("sbwhat") else
          "the predicted boxes are Inf/NaN (detectron2's Boxes.clip check)" if "Box tensor" in m.group(0) else
          "loss is NaN/Inf (MMDetection's CheckInvalidLossHook: loss become infinite or NaN)"),
      H.HINT_NAN, ("detected infinity or nan", "there are nan or inf", "[precision] [error]", "contains inf",
                   "contains nan", "become infinite or nan", "nan and/or inf", "nan in actions", "inf in actions")),
    R("grad-scale-small", _rx(r"grad_scale is too small|Grad scale is small|Invalid loss, terminating training"), NAN, CRIT,
      "loss is NaN/Inf (the trainer stopped on it: grad scale collapsed / invalid loss)", H.HINT_NAN,
      ("grad_scale is too small", "grad scale is small", "terminating training")),
    # -- fatal errors ---------------------------------------------------------------------
    R("dataloader-death", _rx(r"DataLoader worker \(pid(?:\(s\))? (?P<pid>[\d, ]+)\) (?:exited unexpectedly|is killed "
                              r"by signal: (?P<why>Bus error|Segmentation fault|Aborted))"), CRASH, CRIT,
      lambda m, line: f"DataLoader worker (pid {m.group('pid').strip()}) " +
                      (f"died: {m.group('why')}" if m.group("why") else "exited unexpectedly"),
      H.HINT_CRASH, ("dataloader",)),
    R("dataloader-segv", _rx(r"Unexpected (?P<what>segmentation fault|bus error|floating-point exception) "
                             r"encountered in worker"), CRASH, CRIT,
      "DataLoader worker died: {what}", H.HINT_SEGV, ("encountered in worker",)),
    R("illegal-access", _rx(r"an illegal memory access was encountered|illegal memory access"), CRASH, CRIT,
      "CUDA illegal memory access", H.HINT_CUDA_FATAL, ("illegal",)),
    R("device-assert", _rx(r"device-side assert triggered"), CRASH, CRIT, "CUDA device-side assert triggered",
      "an index out of range on the GPU (labels >= vocab, bad gather): rerun with CUDA_LAUNCH_BLOCKING=1 to find it",
      ("assert",)),
    R("xid", _rx(r"NVRM: Xid \((?P<where>[^)]*)\): (?P<n>\d+)"), CRASH, CRIT, "GPU Xid {n} ({where})",
      "a GPU/driver fault: check nvidia-smi -q and dmesg; the GPU may need a reset", ("xid",)),
    R("gpu-bus", _rx(r"fallen off the bus|uncorrectable ECC error"), CRASH, CRIT,
      "GPU hardware fault (fallen off the bus / ECC)", "the GPU needs attention: nvidia-smi -q, dmesg, drain the node",
      ("off the bus", "ecc error")),
    R("nccl-error", _rx(r"\b(ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument|"
                        r"ncclInvalidUsage|ncclRemoteError)\b|NCCL error in: [^,]*, ([a-z][a-z ]+?)(?:,| \(|$)"
                        r"|NCCL Error \d+: ([a-z][a-z ]+)"), CRASH, CRIT, _nccl,
      "rerun with NCCL_DEBUG=INFO; check that every rank is alive and the interconnect (NCCL_SOCKET_IFNAME, IB) "
      "is reachable", ("nccl",)),
    # NCCL's back trace reaching a thread's top (controller/judge/nccl_backtrace.py: NVIDIA/nccl
    # src/include/checks.h NCCLCHECKTHREAD, src/proxy.cc's progress loop and proxy service).
    R("nccl-thread-error", _rx(NCCL_THREAD_TOP), CRASH, CRIT, nccl_thread_summary,
      "NCCL's own error (the WARN above, same host:pid:tid) ended the communicator: a peer that died or a "
      "network fault (rerun with NCCL_DEBUG=INFO on every rank; check the NIC/IB link and NCCL_SOCKET_IFNAME)",
      ("nccl",)),
    R("nccl-aborted", _rx(r"NCCL communicator was aborted"), CRASH, CRIT, "NCCL communicator was aborted",
      H.HINT_NCCL_TIMEOUT, ("nccl",), secondary=True),
    R("cuda-error", _rx(r"CUDA error: (?P<what>[^\n.]{3,80}?)(?:\s*$|\.|\n| \(|CUDA kernel)"), CRASH, CRIT,
      lambda m, line: f"CUDA error: {m.group('what').strip()}", H.HINT_CUDA_FATAL, ("cuda error",)),
    # torch appends this sentence to every CUDA error it raises; a paste that kept it but not the
    # `CUDA error: ...` line above it (pytest's `E   ` lines cut by the excerpt: pytorch/helion#665) still
    # shows a CUDA error was raised. Secondary: the error's own line, when present, names it.
    R("cuda-async-note", _rx(r"CUDA kernel errors might be asynchronously reported at some other API call"), CRASH, CRIT,
      "a CUDA error was raised (only torch's 'CUDA kernel errors might be asynchronously reported' note is in the "
      "log, not the error line)", H.HINT_CUDA_FATAL, ("errors might be asynchronously",), secondary=True),
    # THC's (torch < 0.4, Lua torch's cutorch) __THCudaCheck: `THCudaCheck FAIL file=F line=N error=E : <msg>` and
    # the error it raises, `cuda runtime error (E) : <msg> at F:N` (torch/cutorch#781: error 7, too many resources
    # requested for launch); error 2 (out of memory) is read by the OOM rules above, and `driver shutting down`
    # (CUDA torn down at interpreter exit, after the work) is left alone
    R("thc-cuda-error", _rx(r"(?:THCudaCheck FAIL file=\S+ line=\d+ error=(?P<n>\d+)|cuda runtime error \((?P<n2>\d+)\)) : "
                            r"(?!driver shutting down)(?P<msg>[a-z][^\n]{2,100}?)(?: at \S+:\d+)?\s*$"), CRASH, CRIT,
      lambda m, line: f"CUDA runtime error {m.group('n') or m.group('n2')}: {m.group('msg').strip()} (THC)",
      H.HINT_CUDA_FATAL, ("thcudacheck fail", "cuda runtime error")),
    # compute-sanitizer's (and CUDA-MEMCHECK's) memcheck report of a bad access by a kernel:
    # `========= Invalid __global__ read of size 16 bytes` (sgl-project/sglang#2599, zama-ai/concrete-core#332;
    # NVIDIA Compute Sanitizer user guide, "Understanding Memcheck Errors"); a clean run prints only its banner
    # and `ERROR SUMMARY: 0 errors`.
    R("sanitizer-invalid-access", _rx(r"={5,} +Invalid __(?P<space>global|shared|local)__ (?P<op>read|write) of size "
                                      r"(?P<n>\d+)"), CRASH, CRIT,
      "compute-sanitizer: invalid __{space}__ {op} of size {n} (a kernel accessed memory out of bounds)",
      H.HINT_CUDA_FATAL, ("invalid __",)),
    R("fatal-python", _rx(r"Fatal Python error: (?P<what>\w[^:]*)"), CRASH, CRIT,
      lambda m, line: f"Fatal Python error: {m.group('what').strip()}",
      "a C extension crashed the interpreter: the lines after it show each thread's stack", ("fatal",)),
    # (abseil's failure signal handler -- installed by Ray's core worker, TensorFlow, JAX -- writes
    # `*** SIGABRT received at time=1734086759 on cpu 63 ***` before its `PC: @` frames and re-raises the signal:
    # abseil/abseil-cpp absl/debugging/failure_signal_handler.cc:267 WriteSignalMessage at 926f1d05a4f8; pasted
    # ray-project/ray#49252. SIGTERM, which it also catches, is a stop, not a crash, and is not read here.)
    R("signal-handler", _rx(r"\*\*\* (?P<sig>SIG(?:SEGV|ABRT|BUS|ILL|FPE|TERM|KILL)) \(@0x[0-9a-fA-F]+\) received by PID"
                            r"|terminated by signal (?P<sig2>SIG(?:SEGV|ABRT|BUS|ILL|FPE|TRAP))\b"
                            r"|^\*\*\* (?P<sig3>SIG(?:SEGV|ABRT|BUS|ILL|FPE|TRAP)) received at time=\d+(?: on cpu \d+)? \*\*\*"
                            r"|Windows fatal exception: (?P<win>access violation|stack overflow|in page error|illegal instruction"
                            r"|float divide by zero|float overflow|int divide by zero|code 0x[0-9a-fA-F]{8})"), CRASH, CRIT,
      lambda m, line: (f"process killed by {m.group('sig') or m.group('sig2') or m.group('sig3')} (its signal handler's report)"
                       if m.group("sig") or m.group("sig2") or m.group("sig3") else f"Windows fatal exception: {m.group('win')}"),
      H.HINT_SEGV, ("received by pid", "terminated by signal", "windows fatal exception", "received at time")),
    R("segv-words", _rx(r"received (?:signal )?SIGSEGV|SIGSEGV received|Signal 11 \(SIGSEGV\)|caught SIGSEGV"
                        r"|exitcode\s*:\s*-11\b"), CRASH, CRIT, "segmentation fault (SIGSEGV)", H.HINT_SEGV,
      ("sigsegv", "exitcode")),
    R("bare-shell-death", _rx(r"^\s*(?P<what>Segmentation fault|Aborted|Abort trap|Bus error|Illegal instruction"
                              r"|Floating point exception|Terminated|Hangup|Trace/BPT trap|Trace/breakpoint trap)"
                              r"(?::\s*\d+)?(?P<core>\s*\(core dumped\))?\s*$"),
      CRASH, CRIT, _bare_shell_death, H.HINT_CRASH, ("segmentation", "aborted", "abort trap", "bus error", "illegal", "floating",
                                                     "terminated", "hangup", "trap")),
    R("glued-shell-death", _rx(r"(?:[\]|%)}>.,;:!?0-9]\s?|\s{2})[`*_]{0,3}(?P<what>Segmentation fault|Aborted|Abort trap|Bus error"
                               r"|Illegal instruction|Floating point exception|Killed)"
                               r"(?::\s*\d+)?(?P<core>\s*\(core dumped\))?"
                               r"[`*_.]{0,3}\s*$"),
      CRASH, CRIT, _bare_shell_death, H.HINT_CRASH, ("segmentation", "aborted", "abort trap", "bus error", "illegal", "floating",
                                                     "killed")),
    R("zh-shell-death", _rx(r"(?:^|\s|[\]|%)}>.,;:!?0-9])(?P<what>段错误|已中止|已放弃|总线错误|非法指令|浮点异常|浮点数例外)\s*"
                            r"(?P<core>[(（]核心已转储[)）])\s*$"),
      CRASH, CRIT, _bare_shell_death, H.HINT_CRASH, ("核心已转储",)),
    R("glibc-assert", _rx(r"^(?P<prog>[^\s:]+): (?P<file>[^\s:]+):(?P<line>\d+): (?P<fn>[^`]+?): Assertion `(?P<expr>.+)' "
                          r"failed\.\s*$"), CRASH, CRIT,
      "a C/C++ assert failed in {prog} at {file}:{line}: `{expr}` (glibc aborts the process)", H.HINT_ABORT,
      ("assertion `",)),
    # elastic's agent names the signal (`Received Signals.SIGTERM death signal`) or, in older torch, prints its
    # number (`Received 15 death signal, shutting down workers`: determined-ai/determined#8915, JingyunLiang/VRT#47)
    R("launcher-sigterm", _rx(r"Received (?:Signals\.)?(?:(?P<sig>SIG(?:TERM|INT|HUP))|(?P<num0>15|2|1)) death signal, shutting down"
                              r"|got signal: (?P<num>15|2|1)\b"), CRASH, WARN,
      lambda m, line: f"the launcher was stopped by {m.group('sig') or {'15': 'SIGTERM', '2': 'SIGINT', '1': 'SIGHUP'}[m.group('num0') or m.group('num')]} (death signal): its workers were shut down",
      "someone or something stopped the launcher (a scheduler's time limit or preemption, Ctrl-C, dfctl stop)",
      ("death signal", "got signal")),
    # `ray job submit`'s final status (python/ray/dashboard/modules/job/job_supervisor.py: `message = f"Job
    # entrypoint command failed with exit code {return_code}. ..."`, printed by cli.py as `Status message: ...`):
    # the driver -- the training entrypoint -- exited non-zero (pasted OpenRLHF/OpenRLHF#911)
    R("ray-job-failed", _rx(r"Job entrypoint command failed with exit code (?P<code>-?[1-9]\d*)"), CRASH, CRIT,
      "the Ray job's entrypoint (the training driver) exited with code {code}", H.HINT_LAUNCHER,
      ("entrypoint command failed with exit",)),
    # Kubernetes' kubelet backs off restarting a container that keeps exiting: its BackOff event `Back-off
    # restarting failed container <name> in pod <pod>` (older kubelets name no container), relayed by the training
    # operator as `back-off 40s restarting failed container=<name>` (wording as pasted in kubeflow/trainer#2008,
    # kubeflow/trainer#2034; the kubelet source was not read): the training container crashed and crash-loops
    R("k8s-backoff-restart", _rx(r"[Bb]ack-off (?:\d+[smh]\d*[sm]? )?restarting failed container(?:[= ](?P<c>[\w.-]+))?"
                                 r"(?: pod=(?P<pod>[\w.-]{1,200}?)_)?"),
      CRASH, CRIT,
      lambda m, line: ("Kubernetes keeps restarting the failed container" + (f" {m.group('c')}" if m.group("c") else "")
                       + (f" of pod {m.group('pod')}" if m.group("pod") else "")
                       + " (CrashLoopBackOff: it crashed and is restarted with a back-off)"),
      "the crashed run's own output: kubectl logs --previous <pod> -c <container>; kubectl describe pod <pod> "
      "for its exit code (137 with OOMKilled is the memory limit)", ("restarting failed container",)),
    # the same state in kubectl's pod table (STATUS column, then RESTARTS) or describe's `Reason:` line
    # (pasted kubeflow/katib#1112); a Running pod with restarts is not this
    R("k8s-crashloop-status", _rx(r"\b\d+/\d+ +(?:Init:)?CrashLoopBackOff +(?P<n>\d+)\b|Reason: +CrashLoopBackOff\b"),
      CRASH, CRIT, "a Kubernetes pod is in CrashLoopBackOff (its container keeps crashing and being restarted)",
      "the crashed run's own output: kubectl logs --previous <pod>; kubectl describe pod <pod> for its exit code",
      ("crashloopbackoff",)),
    # kubectl get pods' row whose STATUS is OOMKilled (NAME READY STATUS RESTARTS AGE: kubectl shows a
    # container's terminated reason in STATUS, here the runtime's OOMKilled that container-oomkilled cites;
    # pasted open-edge-platform/geti_v2#146 `2/3  OOMKilled  16 (5m13s ago)  57m`, hmcts/cnp-flux-config#28772)
    R("k8s-oomkilled-status", _rx(r"\b\d+/\d+ +OOMKilled +\d+\b"), OOM, CRIT,
      "a Kubernetes pod's container was OOM-killed (kubectl's STATUS: OOMKilled -- it went past its memory limit)",
      H.HINT_HOST_OOM + "; in a container: raise the pod's/container's memory limit", ("oomkilled",)),
    R("ray-died", _rx(r"\b(?P<what>ActorDiedError|RayTaskError|RayActorError|WorkerCrashedError|ActorUnavailableError)\b"
                      r"|The actor died unexpectedly before finishing this task|because the actor is already dead"
                      r"|A worker died or was killed while executing"),
      CRASH, CRIT,
      lambda m, line: f"Ray: {m.group('what') or 'ActorDiedError'} (a task or actor died)",
      "the Ray task's or actor's own error (above, or in its worker log) says why it died",
      ("actordied", "raytaskerror", "rayactorerror", "workercrashederror", "actorunavailableerror", "actor died",
       "actor is already dead", "died or was killed")),
    # Ray's GCS names a dead actor's cause on one line (ray: src/ray/gcs/gcs_server/gcs_actor_manager.cc,
    # death cause WORKER_DIED "The actor is dead because its worker process has died."; python/ray/tests/
    # test_failure_2.py os.kill(pid, 9) then pytest.raises(RayActorError, match=that sentence)) followed by
    # `Worker exit type: <WorkerExitType>`: SYSTEM_ERROR / UNEXPECTED_SYSTEM_EXIT / USER_ERROR is a death
    # (pasted OpenRLHF/OpenRLHF#187, where it is the whole paste); INTENDED_USER_EXIT (exit_actor()) and
    # INTENDED_SYSTEM_EXIT are a clean end and stay silent
    R("ray-worker-died", _rx(r"The actor is dead because its worker process has died\.\s*Worker exit type: "
                             r"(?P<type>SYSTEM_ERROR|UNEXPECTED_SYSTEM_EXIT|USER_ERROR)\b"),
      CRASH, CRIT,
      "Ray: an actor's worker process died ({type}): SIGKILL (OOM killer?), ray stop --force, or a native crash",
      "the Ray task's or actor's own error (above, or in its worker log) says why it died; dmesg for the OOM killer",
      ("worker process has died",)),
    R("glog-check-trace", _rx(r"Check failure stack trace: \*\*\*"), CRASH, CRIT,
      "a C++ CHECK failed (glog printed its check failure stack trace): the process aborts", H.HINT_ABORT,
      ("check failure stack",), secondary=True),
    # pytorch/xla's XLA_CHECK (third_party/xla_client/debug_macros.h:9, `TF_CHECK(c) << "\n" <<
    # tensorflow::CurrentStackTrace()`) streams 'Check failed: ...' and the native stack into an ErrorGenerator
    # that throws it as std::runtime_error (tf_logging.h:36-52, tf_logging.cc:8-15); CurrentStackTrace opens with
    # this line. Secondary: the Python-side RuntimeError or the abort that follows names the death better
    R("native-stack-trace", _rx(r"^\s*\*\*\* Begin stack trace \*\*\*\s*$"), CRASH, CRIT,
      "a C++ check failed (its native stack trace is printed): the client raised it as an exception",
      H.HINT_ABORT, ("begin stack trace",), secondary=True),
    R("c10-error-frames", _rx(r"^frame #0: c10::Error::Error\("), CRASH, CRIT,
      "a C++ exception (c10::Error) was raised: its frames are printed, its message is above them", H.HINT_CRASH,
      ("c10::error",), secondary=True),
    R("elastic-error-file", _rx(r"\"py_callstack\": \"Traceback \(most recent call last\)"), CRASH, CRIT,
      "a worker raised: its traceback is in torchelastic's error file (the JSON's py_callstack)", H.HINT_LAUNCHER,
      ("py_callstack",)),
    # vLLM's async engine gives one engine step ENGINE_ITERATION_TIMEOUT_S (VLLM_ENGINE_ITERATION_TIMEOUT_S, 60 s)
    # and on asyncio's TimeoutError logs this and marks the engine errored (vllm-project/vllm
    # vllm/engine/async_llm_engine.py run_engine_loop: `logger.error("Engine iteration timed out. This should never
    # happen!")`): a model step across the workers stopped returning -- a stall, then the engine's death (pasted
    # vllm-project/vllm#5443).
    R("vllm-iteration-timeout", _rx(r"Engine iteration timed out\. This should never happen"), HANG, CRIT,
      "vLLM engine iteration timed out: a model step did not return within the engine's iteration timeout "
      "(a stalled worker or collective)", H.HINT_NCCL_TIMEOUT, ("timed out",)),
    R("paddle-fatal", _rx(r"FatalError: `(?P<what>[^`]+)` is detected by the operating system"), CRASH, CRIT,
      lambda m, line: (f"Paddle FatalError: {m.group('what')} (the OS signal killed the process)"
                       + (" SIGSEGV" if "egmentation" in m.group("what") else "")), H.HINT_SEGV,
      ("fatalerror",)),
    # Paddle's enforce error as Python prints it, bare: `<Exc>: (<ErrorType>) message` then its
    # `  [Hint: ...] (at /paddle/...:N)` line (pasted PaddlePaddle/PaddleDetection#5879: `SystemError: (Fatal)
    # Blocking queue is killed because the data reader raises an exception.`, from
    # paddle/fluid/operators/reader/blocking_queue.h:166 as the paste's hint says). Secondary: a traceback's own
    # finding, when the paste holds one, names the same exception with its frames. ResourceExhausted (OOM) and
    # External (CUDA errors) are the OOM and CUDA rules' own.
    R("paddle-enforce-error", _rx(r"^\s*(?P<exc>[A-Z]\w{0,30}Error): \((?P<type>Fatal|PreconditionNotMet|InvalidArgument|"
                                  r"NotFound|OutOfRange|Unimplemented|Unavailable|AlreadyExists|PermissionDenied)\) "
                                  r"(?P<msg>\S.{0,140})"), CRASH, CRIT,
      lambda m, line: f"Paddle {m.group('exc')}: ({m.group('type')}) {m.group('msg').strip()}", H.HINT_CRASH,
      ("error",), secondary=True),
    R("zsh-death", _rx(r"(?:^|(?<=[\]|%}]))(?:zsh: |\[\d+\]\s+(?:[+-]\s+)?(?P<pid>\d+) )(?P<what>segmentation fault|killed|abort|bus error"
                       r"|illegal hardware instruction|floating point exception|trace trap)(?: \(core dumped\))?\s+(?P<cmd>\S.*)$"),
      CRASH, CRIT, _zsh_death, H.HINT_CRASH, ("segmentation", "killed", "abort", "bus error", "illegal", "floating",
                                               "trace trap")),
    # glog's CHECK macros write 'Check failed: ' as a FATAL message (google/glog src/glog/logging.h:554 at
    # 53d58e4531c7c90f71ddab503d915e027432447a, the row oom_family.py's glog-cuda-oom cites) and abort; the repaired line has lost the `F1126 12:19:18.211333 23387 file.cu:28] ` prefix
    # (pasted rbgirshick/py-faster-rcnn#830: `Check failed: status == CUDNN_STATUS_SUCCESS (3 vs. 0)`)
    R("glog-check-failed", _rx(r"^Check failed: (?P<what>\S.{0,200})"), CRASH, CRIT,
      "a C++ CHECK failed (glog aborts the process): {what}", H.HINT_ABORT, ("check failed",)),
    # LightGBM's Log::Fatal writes `[LightGBM] [Fatal] <message>` to stderr, then throws (include/LightGBM/utils/log.h:
    # 132 @bae0b7ba953341a32b2a9c5c5c437a1b976f576f): the CLI prints `Met Exceptions:` and exits (src/main.cpp:27),
    # Python raises LightGBMError, R stops (tests/data/logs/gbdt_lgb_badparam.log, produced here)
    R("lightgbm-fatal", _rx(r"\[LightGBM\] \[Fatal\] (?P<what>\S.{0,200})"), CRASH, CRIT,
      "LightGBM fatal error: {what}", H.HINT_CRASH, ("[fatal]",)),
    R("glog-fatal", _rx(r"^F(?:\d{4} [\d:.]+ +\d+)? ?[\w/.-]+\.(?:cc|cpp|cu|cuh|hpp|h):\d+\] (?P<what>\S.{0,200})"), CRASH, CRIT,
      "fatal (a C++ check failed, glog F): {what}", H.HINT_ABORT, ("check fail",)),
    R("tf-op-error", _rx(r"Graph execution error:"), CRASH, CRIT,
      "TensorFlow/JAX raised an error in a compiled function (its node and call stack are printed)", H.HINT_CRASH,
      ("graph execution error",)),
    # TensorFlow's Python-side error status (tensorflow/python/framework/errors_impl.py; the cuDNN one is
    # tensorflow/core/kernels/conv_ops.cc LaunchConv2DOp: `errors::Unknown("Failed to get convolution algorithm.
    # This is probably because cuDNN failed to initialize, ...")`): pasted tensorflow/models#7088, mozilla/DeepSpeech#2211,
    # irdanish11/AnomalyEventDetection#1. OutOfRange (the end of a tf.data input) and Cancelled (the queues closed
    # at the end of training) are the normal ends of a run and are not read; ResourceExhausted is the OOM rules'
    R("tf-status-error", _rx(r"(?:(?P<impl>\berrors_impl\.)|^\s*)(?P<name>Unknown|Internal|InvalidArgument|FailedPrecondition"
                             r"|Aborted|DataLoss|Unavailable|DeadlineExceeded)Error(?P<see> \(see above for traceback\))?: "
                             r"(?P<msg>\S.{0,200})"), CRASH, CRIT, _tf_status_error, H.HINT_CRASH,
      ("errors_impl.", "root error", "error (see above for traceback)")),
    # TensorFlow's own LOG(FATAL) (tensorflow/core/platform/default/logging.cc, LogMessage::GenerateLogMessage:
    # `%s.%06d: %c %s:%d] %s`, severity letter F, then abort()), any message, not only a CHECK's; the repaired
    # line has lost the timestamp (pasted pythonlessons/TensorFlow-2.x-YOLOv3#105 `2020-12-01 15:51:57.871503:
    # F tensorflow/compiler/tf2tensorrt/stub/nvinfer_stub.cc:49] getInferLibVersion symbol not found.`)
    # The same LogMessage format lives on in TSL/XLA (jaxlib's `F external/xla/xla/service/...cc:1099]
    # Non-OK-status: ...`, pasted google-deepmind/mujoco_playground#113) and a Windows build's __FILE__ keeps the
    # MSVC `.\\` prefix (`F .\\tensorflow/core/util/gpu_launch_config.h:129] Check failed: ...`, pasted
    # deryckt/TIRE#1): the shape is the severity letter F and a tensorflow/xla/tsl source path with its line.
    R("tf-log-fatal", _rx(r"^F (?P<file>(?:\.\\|external/(?:org_)?)?(?:tensorflow|xla|tsl|local_tsl)/[\w/.-]+\.(?:cc|cpp|cu|h))"
                          r":\d+\] (?P<what>\S.{0,200})"),
      CRASH, CRIT, "fatal (TensorFlow/XLA LOG(FATAL) in {file}, the process aborts): {what}", H.HINT_ABORT,
      ("f tensorflow/", "f external/org_tensorflow/", "f .\\tensorflow/", "f external/xla/", "f external/tsl/",
       "f external/local_tsl/", "f xla/", "f tsl/")),
    R("launcher-killing", _rx(r"Killing subprocess (?P<pid>\d+)"), CRASH, CRIT,
      "the launcher killed its other workers (subprocess {pid}): a worker had failed", H.HINT_LAUNCHER,
      ("killing subprocess",), secondary=True),
    R("loguru-caught", _rx(r"An error has been caught in function '(?P<fn>[^']+)'"), CRASH, CRIT,
      "loguru caught an error in function '{fn}' (its traceback follows)", H.HINT_CRASH, ("error has been caught",)),
    # glibc's malloc checks (malloc/malloc.c malloc_printerr, which then aborts): glibc < 2.26 printed
    # `*** Error in `<prog>': <what>: 0x<ptr> ***` and `======= Backtrace: =========` with the frames
    # (pasted facebookresearch/Detectron#380), later releases print the check's message alone
    R("glibc-abort", _rx(r"double free or corruption|free\(\): invalid (?:pointer|size|next size)"
                         r"|munmap_chunk\(\): invalid pointer|malloc\(\): (?:memory corruption|corrupted top size)"
                         r"|corrupted size vs\. prev_size|corrupted double-linked list|malloc_consolidate\(\): invalid chunk size"
                         r"|^\*\*\* Error in `[^`']{1,200}': (?P<what>[^:*]{3,80}?)(?:: 0x[0-9a-fA-F]+)? \*\*\*"),
      CRASH, CRIT, lambda m, line: f"glibc aborted the process (heap corruption: {m.group('what') or m.group(0)})",
      H.HINT_ABORT, ("double free", "free():", "munmap_chunk", "malloc", "corrupted", "*** error in")),
    R("glibc-backtrace", _rx(r"^======= Backtrace: =========\s*$"), CRASH, CRIT,
      "glibc aborted the process (its backtrace is printed: a malloc check or a fortify check failed)", H.HINT_ABORT,
      ("backtrace:",), secondary=True),
    # the Lua interpreter's report of an uncaught error (Lua torch, luajit): `<progname>: <chunk>:<line>: <message>`
    # and then its `stack traceback:` (lua.c's message handler; pasted art-programmer/FloorplanTransformation#40:
    # `/root/torch/install/bin/luajit: .../threads.lua:183: [thread 1 callback] ...`); the interpreter exits 1
    R("lua-uncaught", _rx(r"^(?:\S*/)?(?:luajit|lua(?:5\.\d)?): (?P<where>[^\s:]+\.lua:\d+): (?P<what>\S.{0,200})"),
      CRASH, CRIT, lambda m, line: f"Lua error at {m.group('where').rsplit('/', 1)[-1]}: {m.group('what')[:160]} (the "
                                   "interpreter exited on it)", H.HINT_CRASH, ("luajit: ", "lua: ", "lua5")),
    # a native crash handler's report on Windows: `Exception Code: 0xC0000005` and then its `#0 0x...` frames
    # (pasted Comfy-Org/comfy-kitchen#32, a ROCm torch); only NTSTATUS error codes (0xC.......) are crashes
    R("win-exception-code", _rx(r"^Exception [Cc]ode: 0x(?P<code>[Cc][0-9A-Fa-f]{7})\s*$"), CRASH, CRIT,
      lambda m, line: ("the process crashed (Windows exception 0x" + m.group("code").upper()
                       + (f": {_NTSTATUS[int(m.group('code'), 16)]}" if int(m.group("code"), 16) in _NTSTATUS else "")
                       + "; a native crash handler's report)"), H.HINT_SEGV, ("exception code: 0x",)),
    # torch's own std::terminate handler (c10/util/AbortHandler.h terminate_handler, on by default on Windows:
    # prints this line and the native backtrace, then std::abort(); pasted p0p4k/vits2_pytorch#103)
    R("c10-terminate", _rx(r"Unhandled exception caught in c10/util/AbortHandler\.h"), CRASH, CRIT,
      "an unhandled C++ exception aborted the process (torch's terminate handler, c10/util/AbortHandler.h: its "
      "native stack follows)", H.HINT_ABORT, ("unhandled exception caught",)),
    # RETURNN's sys.excepthook (rwth-i6/returnn returnn/util/debug.py:166-168 at b46ff5f: `Unhandled exception %s
    # in thread %s, proc %i.` with the exception's class, the thread's repr and the pid; for the main thread it
    # first sets sys.exited -- "we are going to quit now" -- and a KeyboardInterrupt returns right after the line,
    # a stop, not a failure; pasted rwth-i6/returnn#1484, #1454). Its traceback (better_exchook's, `line:` and
    # `locals:` under each frame) often comes later or interleaved with the other ranks' lines.
    R("returnn-unhandled", _rx(r"Unhandled exception <class '(?P<exc>(?!KeyboardInterrupt')[\w.]{1,200})'> in thread "
                               r"<_MainThread\(MainThread, .{0,200}?\)>, proc (?P<pid>\d+)\."), CRASH, CRIT,
      "{exc} unhandled in the main thread of proc {pid} (RETURNN's excepthook: the process quits)", H.HINT_CRASH,
      ("unhandled exception <class",)),
    # Jupyter's notebook when its kernel process dies: the page's dialog (notebook's JS, on the
    # 'status_autorestarting.Kernel' event: "The kernel appears to have died. It will restart automatically.";
    # JupyterLab's "The kernel for <nb> appears to have died"), the server's log (notebook's zmqhandlers.py
    # on_kernel_died / on_kernel_restarted: "kernel %s died, noticed by auto restarter", "kernel %s restarted",
    # pasted googlecolab/colabtools#513; jupyter_client's restarter.py "KernelRestarter: restarting kernel")
    R("kernel-died", _rx(r"[Tt]he kernel (?:for \S.{0,200}?)?appears to have died\. It will restart automatically"
                         r"|\bkernel [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} (?:restarted\b|died, noticed by auto)"
                         r"|\bKernelRestarter: restarting kernel\b"), CRASH, CRIT,
      "the Jupyter kernel died and is being restarted: the training in it is gone",
      "a kernel dies without a Python error when native code crashes or host RAM runs out (dmesg shows the OOM "
      "killer): run the notebook's code as a script to see how it ends", ("appears to have died", "restart")),
    # Colab's dialog (pasted PV-Lab/FTCP#8)
    R("colab-ram", _rx(r"Your session crashed after using all available RAM"), OOM, CRIT,
      "host RAM ran out (Colab: the session crashed after using all available RAM)", H.HINT_HOST_OOM,
      ("session crashed",)),
    R("colab-crash", _rx(r"Your session crashed for an unknown reason"), CRASH, CRIT,
      "the Colab session crashed (its runtime died)", H.HINT_CRASH, ("session crashed",)),
    # Hydra's tail of a job that raised: JobReturn.return_value writes "Error executing job with overrides: [...]"
    # before re-raising, and run_and_report "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack
    # trace." after the shortened traceback, then sys.exit(1) (pasted apple/ml-inrflow#1); the exception itself,
    # above, says more (secondary)
    R("hydra-job-error", _rx(r"Error executing job with overrides: \[|Set the environment variable HYDRA_FULL_ERROR=1 for a "
                             r"complete stack trace"), CRASH, CRIT,
      "Hydra: the job raised an exception and exited (its error is printed above)", H.HINT_CRASH,
      ("overrides", "hydra_full_error"), secondary=True),
    # Open MPI's mpirun when a rank exits non-zero (pasted Kay1794/Aware-of-the-history#2) and horovodrun's
    # RuntimeError of the same (pasted determined-ai/determined#3275): a launcher's "a child failed"
    R("mpirun-nonzero", _rx(r"Primary job\s+terminated normally, but (?P<n>\d+) process(?:es)? returned"
                            r"|(?P<who>mpirun|Horovod) detected that one or more processes exited with non-zero status"),
      CRASH, CRIT, lambda m, line: f"{m.group('who') or 'mpirun'}: a rank exited with a non-zero code (the job was aborted)",
      H.HINT_LAUNCHER, ("primary job", "processes exited"), secondary=True),
    # Kaldi's error envelope (kaldi-asr/kaldi src/base/kaldi-error.cc MessageLogger::LogMessage at f400766:
    # `ERROR (` / `ASSERTION_FAILED (` + program[version]:func():file:line + ") " + message, then "[ Stack-Trace: ]"):
    # KALDI_ERR throws and the program's main() returns -1 (pasted kaldi-asr/kaldi#4357). `LOG (` and
    # `WARNING (` share the envelope and stay quiet; nnet2's ReorthogonalizeXt1 throws "Cholesky out of expected
    # range" inside its own try and carries on with Gram-Schmidt (src/nnet2/nnet-precondition-online.cc:221), so
    # that one is not a death
    R("kaldi-error", _rx(r"(?P<sev>ERROR|ASSERTION_FAILED) \((?P<prog>[\w.+-]{1,80})\[[^\]\s]{1,40}\]:(?P<func>[\w:~<>]{1,120})"
                         r"\(\):(?P<file>[\w.+-]{1,80}):\d{1,6}\) (?!Cholesky out of expected range)(?P<msg>.{0,120})"),
      CRASH, CRIT, lambda m, line: (f"Kaldi {m.group('prog')} {'assertion failed' if m.group('sev') == 'ASSERTION_FAILED' else 'error'}"
                                    f" in {m.group('func')}() ({m.group('file')}): {m.group('msg').strip()}"),
      H.HINT_CRASH, ("error (", "assertion_failed (")),
    # Kaldi's job runners when a job exits non-zero (egs/wsj/s5/utils/parallel/run.pl:344/351 and queue.pl:614/621
    # at f400766: "run.pl: job failed, log is in $logfile", "queue.pl: job failed with status $status, log is in
    # $logfile", "<n> / <N> failed, log is in ..."; pasted kaldi-asr/kaldi#4718): the job's own ERROR is in that
    # log file, so this is a launcher's "a child failed" (secondary)
    R("kaldi-job-failed", _rx(r"(?P<who>run|queue|slurm|ssh)\.pl: (?:job (?:writing to \S+ )?failed(?: with status (?P<st>\d+))?"
                              r"|(?P<n>\d+) / (?P<of>\d+) failed), log is in (?P<log>\S+)"),
      CRASH, CRIT, lambda m, line: (f"Kaldi {m.group('who')}.pl: "
                                    + (f"{m.group('n')} of {m.group('of')} jobs failed" if m.group("n") else "a job failed")
                                    + (f" with status {m.group('st')}" if m.group("st") else "")
                                    + f" (its log: {m.group('log')})"),
      H.HINT_LAUNCHER, ("log is in",), secondary=True),
    # Paddle's collective launcher when a trainer exits non-zero (python/paddle/distributed/fleet/launch_utils.py
    # watch_local_trainers: logger.error("ABORT!!! Out of all {} trainers, the trainer process with rank={} was
    # aborted. Please check its log."), quoted in PaddlePaddle/Paddle#44583; pasted PaddlePaddle/Paddle#33074):
    # the trainer's own error is in its workerlog (secondary)
    R("paddle-launch-abort", _rx(r"ABORT!!! Out of all (?P<n>\d+) trainers, the trainer process with rank=(?P<ranks>\[[\d, ]{0,200}\])"
                                 r" was aborted"),
      CRASH, CRIT, lambda m, line: (f"Paddle launch: trainer rank {m.group('ranks')} of {m.group('n')} was aborted "
                                    "(its workerlog holds the error)"),
      H.HINT_LAUNCHER, ("abort!!!",), secondary=True),
    # PyCharm's run console (`Process finished with exit code -1073741819 (0xC0000005)`, pasted
    # milesial/Pytorch-UNet#205) and VS Code's Code Runner (`[Done] exited with code=3221225477 in 4.2 seconds`):
    # a Windows NTSTATUS, signed or not, names the native crash
    R("ide-exit", _rx(r"Process finished with exit code (?P<code>-?[1-9]\d*)|\[Done\] exited with code=(?P<code2>-?[1-9]\d*)"),
      CRASH, CRIT, lambda m, line: _ide_exit(m), H.HINT_CRASH, ("exit code", "exited with code")),
    # the Kubeflow training operator's own log (kubeflow/trainer#2008): `Pod: <ns>.<pod> exited with code 1`,
    # (the kubelet's back-off it relays is k8s-backoff-restart's, above)
    R("k8s-pod-exit", _rx(r"Pod: (?P<pod>[\w.-]{1,200}) exited with code (?P<code>[1-9]\d{0,3})\b"), CRASH, CRIT,
      "training pod {pod} exited with code {code} (the Kubernetes training operator's report)", H.HINT_CRASH,
      ("exited with code",)),
    # slurmstepd's kill report (SchedMD/slurm src/slurmd/slurmstepd/req.c:1122-1149 at 284c3b9: time limit,
    # preemption, node failure, requeue, a signal, a task failure); WARN like a launcher's death signal
    R("slurm-cancelled", _rx(r"\*\*\* (?P<what>JOB|STEP) (?P<id>[\w.+-]+) (?:ON (?P<node>\S+) )?CANCELLED AT \S+"
                             r"(?: DUE [Tt][Oo] (?P<why>TIME LIMIT|PREEMPTION|NODE FAILURE|JOB REQUEUE|TASK FAILURE|SIGNAL \w+))?"),
      CRASH, WARN, lambda m, line: (f"Slurm cancelled {m.group('what').lower()} {m.group('id')}"
                                    + (f" (due to {m.group('why').lower()})" if m.group("why") else "")
                                    + ": the run was stopped"),
      "the scheduler ended the run: a time limit wants a checkpoint/resume or a longer --time; preemption a "
      "requeue; otherwise scancel or an earlier failure (above) -- its own error, if any, is the cause",
      ("cancelled at",)),
    R("slurm-exit", _rx(r"srun: error: \S+: tasks? [\d,-]+: (?P<what>Exited with exit code [1-9]\d*|Segmentation fault"
                        r"|Killed|Aborted|Bus error|Terminated)"), CRASH, CRIT, "srun: a task ended: {what}",
      H.HINT_LAUNCHER, ("srun: error",)),
    # srun's report of a task the step's memory cgroup OOM-killed (SchedMD/slurm src/srun/launch.c:377 at
    # 284c3b95f08a2dc2478499837b03355e1b9c5c75: error("%s: %s %s: Out Of Memory", hosts, task_str, tasks) when
    # the task's status is SIG_OOM); printed instead of slurm-exit's "Exited with exit code"
    R("srun-oom", _rx(r"srun: error: \S+: tasks? [\d,-]+: Out Of Memory\b"), OOM, CRIT,
      "Slurm: a task was OOM-killed (srun: task ...: Out Of Memory -- the step's memory cgroup limit)",
      H.HINT_HOST_OOM + "; ask Slurm for more (--mem / --mem-per-cpu / --mem-per-gpu) or use less", ("srun: error",)),
    # pbs_mom's kill notice in the job's stderr (host_kills.pbs_job_killed cites Torque and OpenPBS): memory
    # limits are an OOM, walltime/cput a stopped run
    R("pbs-job-killed", _rx(r"PBS: job killed: (?P<res>p?v?mem|walltime|p?cput|ncpus)\b(?: job total)? [^\n]{0,80}?"
                            r"exceeded limit [^\n]{0,40}"), OOM, CRIT, host_kills.pbs_job_killed, H.HINT_HOST_OOM,
      ("job killed",)),
    # LSF's job report (host_kills.lsf_term cites its documented termination reasons)
    R("lsf-term", _rx(r"\bTERM_(?P<why>[A-Z_]{3,20}): job killed\b[^\n]{0,100}"), OOM, CRIT, host_kills.lsf_term,
      H.HINT_HOST_OOM, ("job killed",)),
    # systemd's record of a unit whose process the kernel OOM-killed (systemd/systemd src/core/unit.c
    # unit_check_oom's "A process of this unit has been killed by the OOM killer." and the service's result
    # string "oom-kill" in "Failed with result 'oom-kill'." -- not re-read: the repository is too big to fetch
    # here; wording as journal lines quoted in public repositories show it) and systemd-oomd's own kill
    # (src/oom/oomd-manager.c log_notice("Killed %s due to memory pressure for %s being %lu.%02lu%% > ...")
    # and "Killed %s due to swap used (...)", seen through the code index)
    R("systemd-oom-kill", _rx(r"(?P<unit>[\w@.:-]{1,200}): A process of this unit has been killed by the OOM killer"
                              r"|(?P<unit2>[\w@.:-]{1,200}): Failed with result 'oom-kill'"
                              r"|Killed (?P<cg>/\S{1,300}) due to (?:memory pressure for|swap used)"), OOM, CRIT,
      lambda m, line: (f"systemd-oomd killed {m.group('cg')} (memory pressure / swap use)" if m.group("cg") else
                       f"systemd: unit {m.group('unit') or m.group('unit2')} was OOM-killed (the kernel's OOM killer)"),
      H.HINT_HOST_OOM, ("oom killer", "oom-kill", "killed /")),
    # the kernel's OOM reaper freeing a victim's memory (0day-ci/linux mm/oom_kill.c oom_reap_task_mm at
    # 00703194cb73bc45de67101d9ff57ccc8f77cd7d: pr_info("oom_reaper: reaped process %d (%s), now anon-rss:...");
    # it reaps only OOM-killer victims, so a paste holding only this dmesg line still shows the kill
    R("oom-reaper", _rx(r"oom_reaper: reaped process (?P<pid>\d+) \((?P<comm>[^)]*)\)"), OOM, CRIT,
      "kernel OOM killer killed pid {pid} ({comm}) (the OOM reaper freed its memory)", H.HINT_HOST_OOM,
      ("oom_reaper",)),
    # bash's job-control notice of a background job's end (host_kills.JOB_REPORT_WORDS; real output
    # tests/data/logs/bash_job_reports.log): `[1]+  Killed   cmd`, `[1]+  Exit 3   cmd`; `Done` is a clean end
    R("job-report-death", _rx(r"^\s*\[(?P<job>\d{1,3})\][+-]?\s+(?:(?P<what>" + "|".join(host_kills.JOB_REPORT_WORDS)
                              + r")(?::\s*\d+)?|Exit (?P<code>[1-9]\d{0,2}))\s{2,}(?P<core>\(core dumped\) )?(?P<cmd>\S.*)$"),
      CRASH, CRIT, host_kills.job_report_death, H.HINT_CRASH,
      ("killed", "segmentation", "aborted", "bus error", "illegal", "floating", "terminated", "hangup", "exit")),
    # GNU time's status line (host_kills.gnu_time_status; real output tests/data/logs/gnu_time_reports.log)
    R("gnu-time-status", _rx(r"^\s*Command (?:terminated by signal (?P<sig>\d{1,2})|exited with non-zero status (?P<code>\d{1,3}))\s*$"),
      CRASH, CRIT, host_kills.gnu_time_status, H.HINT_CRASH, ("command terminated by signal", "command exited with")),
    # the VS Code Jupyter extension's cell error when the kernel process died (microsoft/vscode-jupyter
    # src/platform/common/utils/localize.ts kernelCrashedDueToCodeInCurrentOrPreviousCell at
    # e9b0ac66c779f1deea05b362bc5133c5ea58d63f: "The Kernel crashed while executing code in the the current cell
    # or a previous cell. ..." -- the doubled "the" is theirs; other releases print one)
    R("vscode-kernel-crashed", _rx(r"The Kernel crashed while executing code in (?:the )?(?:the )?current cell or a previous cell"),
      CRASH, CRIT, "the Jupyter kernel died while running a cell (VS Code: the kernel crashed): the training in it is gone",
      "a kernel dies without a Python error when native code crashes or host RAM runs out (dmesg shows the OOM "
      "killer; VS Code's Jupyter output log shows the kernel's last lines): run the code as a script to see how it ends",
      ("kernel crashed",)),
    R("fatal-line", _rx(r"^(?:fatal|FATAL|Fatal error|FATAL ERROR)\s*:\s*(?P<what>\S.{2,200})"), CRASH, CRIT,
      "fatal: {what}", H.HINT_CRASH, ("fatal",)),
    # the type's name ends at its closing quote -- or where another thread's log line was written into it
    # (`'std::runtime_error2020-11-22 07:04:51.678732: E ...`, the quote on the next line): C++ type names
    # hold no spaces and no glued date
    R("terminate-called", _rx(r"terminate called after throwing an instance of '(?P<what>[A-Za-z_][\w:<>,]*?)"
                              r"(?='|\d{4}-\d\d-\d\d|\s|$)"), CRASH, CRIT,
      "C++ exception terminated the process: {what}", H.HINT_ABORT, ("terminate called",), secondary=True),
    # ggml's assertion (ggml-org/ggml include/ggml.h:288 at d99724f2b141fed9e1a9f402213506c081433465: GGML_ASSERT(x)
    # -> GGML_ABORT("GGML_ASSERT(%s) failed"), src/ggml.c:252 ggml_abort prefixes "file:line: " then abort(); older
    # include/ggml/ggml.h:248 at c57aa8e905b9aa46769c2c9ad6a4050b362947f7: "GGML_ASSERT: %s:%d: %s") (pasted
    # ggml-org/llama.cpp#3606). The newer form's path starts where a word does (after a blank, `]` or `|`, or at
    # the line's start): tried from every character, the lazy path made each start scan up to 300 characters.
    R("ggml-assert", _rx(r"GGML_ASSERT: (?P<file>\S{1,300}?):(?P<line>\d+): (?P<what>\S.{0,200})"
                         r"|(?<![^\s\]|])(?P<file2>\S{1,300}?):(?P<line2>\d+): GGML_ASSERT\((?P<what2>.{1,200})\) failed"), CRASH, CRIT,
      lambda m, line: f"ggml assertion failed at {m.group('file') or m.group('file2')}:{m.group('line') or m.group('line2')}: "
                      f"{(m.group('what') or m.group('what2')).rstrip()}", H.HINT_ABORT, ("ggml_assert",)),
    # LLVM libc++abi's default terminate handler (macOS, clang builds): abort_message "libc++abi: " (older Apple:
    # "libc++abi.dylib: ") + "terminating due to %s exception of type %s: %s" (older "terminating with ...")
    # (llvm/llvm-project libcxxabi/src/cxa_default_handlers.cpp demangling_terminate_handler at
    # 3001dafde5689f204f55b9b7588aedd6e972a83a; pasted instructlab/instructlab#380, Mcourtyard/m-courtyard#8)
    R("libcxxabi-terminate", _rx(r"libc\+\+abi(?:\.dylib)?: terminating(?: (?:due to|with) (?:uncaught|unexpected) "
                                 r"(?:foreign )?exception(?: of type (?P<what>[A-Za-z_][\w<>,]*(?:::[\w<>,]+)*)(?:: (?P<msg>\S.{0,160}))?)?)?"),
      CRASH, CRIT,
      lambda m, line: ("std::terminate ended the process (libc++abi)" if not m.group("what") else
                       f"C++ exception terminated the process (libc++abi): {m.group('what')}"
                       + (f": {m.group('msg').rstrip()}" if m.group("msg") else "")),
      H.HINT_ABORT, ("libc++abi: terminat", "libc++abi.dylib: terminat"), secondary=True),
    R("terminate-other", _rx(r"terminate called (?:without an active exception|recursively)"), CRASH, CRIT,
      "std::terminate ended the process (a C++ thread or exception misuse)", H.HINT_ABORT, ("terminate called",),
      secondary=True),
    R("cuda-lib-error", _rx(r"\b(?P<lib>CUBLAS|CUDNN|CUSOLVER|CUSPARSE|CUFFT)_STATUS_(?P<st>(?!SUCCESS\b|ALLOC_FAILED\b)"
                            r"[A-Z_]+)\b"), CRASH, CRIT, "CUDA library error: {lib}_STATUS_{st}", H.HINT_CUDA_FATAL,
      ("error",), secondary=True),
    # after the signal rules (a -9/-11 row or `Signal 9 (SIGKILL)` is theirs, primary); secondary: the report
    # restates a death whose cause is above it
    R("elastic-report-death", _rx(r"exitcode\s*:\s*(?P<code>-\d+) \(pid: \d+\)|Signal (?P<n>\d+) \(\w+\) received by PID \d+"),
      CRASH, CRIT, _elastic_report_death, H.HINT_LAUNCHER, ("exitcode", "received by pid"), secondary=True),
    R("child-failed", _rx(r"ChildFailedError"), CRASH, CRIT, "torchrun: a worker failed (ChildFailedError)",
      "the first failing rank's own error is above the ChildFailedError block", ("childfailed",), secondary=True),
    R("subprocess-status", _rx(r"returned non-zero exit status (?P<code>-?\d+)"), CRASH, CRIT,
      _subprocess_status, H.HINT_LAUNCHER, ("exit status",), secondary=True),
    R("mp-spawn-code", _rx(r"process (?P<proc>\d+) terminated with exit code (?P<code>\d+)"), CRASH, CRIT,
      "process {proc} terminated with exit code {code}", H.HINT_LAUNCHER, ("terminated with exit code",),
      secondary=True),
    # -- compile --------------------------------------------------------------------------
    R("recompile-limit", _rx(r"hit config\.(?P<limit>(?:accumulated_)?(?:recompile_limit|cache_size_limit)) \((?P<n>\d+)\)"
                             r"|hit recompilation cache limit \((?P<n2>\d+)\) for function '(?P<func>\w+)'"),
      RECOMPILE, WARN, _recompile_limit, H.HINT_RECOMPILE, ("hit config", "recompil")),
    R("flex-eager", _rx(r"flex_attention called without torch\.compile|materializes the full scores? matrix"),
      RECOMPILE, WARN, "flex_attention runs unfused (eager): it materializes the full score matrix", H.HINT_FLEX,
      ("flex_attention", "score matrix", "scores matrix")),
    # Deeplearning4j's ScoreIterationListener.iterationDone: log.info("Score at iteration {} is {}", iteration, score),
    # the score being the network's loss, printed by Java's Double.toString (`NaN`, `Infinity`); pasted
    # deeplearning4j/deeplearning4j#1411, #4441 (finite scores, then NaN)
    R("dl4j-score-nan", _rx(r"Score at iteration (?P<it>\d+) is (?P<v>NaN|-?Infinity)\b"), NAN, CRIT,
      "loss is NaN/Inf (DL4J: the iteration score is {v})", H.HINT_NAN, ("is nan", "is infinity", "is -infinity")),
    R("dynamo-cache-limited", _rx(r"Set torch\._dynamo\.config\.cache_size_limit to (?P<n>\d+) to avoid being cache limited"),
      RECOMPILE, WARN, "torch.compile recompiled a function up to its cache size limit ({n}): that code may run eager",
      H.HINT_RECOMPILE, ("cache limited",)),
    R("recompiling", _rx(r"Recompiling function (\S+) in (\S+)"), RECOMPILE, INFO, _recompiling, H.HINT_RECOMPILE,
      ("recompil",)),
)

TRIGGER_WORDS: tuple[str, ...] = tuple(sorted({w for r in RULES for w in r.triggers}))


def triggered(low: str) -> bool:
    """Could any rule match this (lower-cased) line? Plain substring tests run at C speed."""
    for w in TRIGGER_WORDS:
        if w in low:
            return True
    return False


def classify(line: str, low: str | None = None) -> Hit | None:
    """The first rule this line matches, as a Hit; None when none does."""
    low = line.lower() if low is None else low
    for rule in RULES:
        if not any(w in low for w in rule.triggers):
            continue
        m = rule.pattern.search(line)
        if not m:
            continue
        kind, severity, hint = rule.kind, rule.severity, rule.hint
        if callable(rule.summary):
            out = rule.summary(m, line)
            if out is None:
                continue  # the wording matched, its numbers say no failure
            if isinstance(out, tuple):
                kind, severity, summary, hint = out
            else:
                summary = out
        else:
            summary = rule.summary.format(**{k: (v or "").strip() for k, v in m.groupdict().items()})
        return Hit(kind, severity, summary, hint, rule.secondary, rule.name)
    return None


def recoverable(hit: Hit) -> bool:
    return any(r.name == hit.rule and r.recoverable for r in RULES)
