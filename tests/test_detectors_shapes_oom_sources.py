"""OOM wordings read in the printing library's source (issue 22, round 12, helper k13oomsrc):
torch_npu's ACL error 207018 / CANN's EL0004, Vulkan's ErrorOutOfDeviceMemory, CTranslate2's and
dmlc's CUDA checks, cuFFT's and the hip* ALLOC_FAILED names, OpenCV's OutOfMemoryError, Rust's
alloc error hook, CPython's fatal MemoryError, loky's SIGKILL exit code, dask's nanny and torch's
MapAllocator ENOMEM -- and real output made here (numpy, torch CUDA, CuPy, plain Python on an
H200 machine; tests/data/logs/programs/oom_wordings.py). Each shape beside healthy text full of
memory words that must stay quiet; oom_family.py cites where each wording is printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

LOGS = Path(__file__).resolve().parent / "data" / "logs"


def _oom(lines):
    return [f for f in _final(lines) if f.kind == "oom"]


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


# -- real output (made on the device machine: torch 2.11 + CuPy 14 on one H200; plain Python here) ----------

@pytest.mark.parametrize("name, words", [
    ("oom_real_numpy.log", "unable to allocate 128. TiB"),
    ("oom_real_torch-cuda.log", "tried to allocate 4096.0 GiB"),
    ("oom_real_cupy.log", "CuPy OutOfMemoryError"),
    ("oom_real_pylist.log", "MemoryError at oom_wordings.py:21"),
])
def test_real_out_of_memory_output_is_an_oom(name, words):
    found = _final(_log(name))
    assert _kinds(found) == ["oom"], (name, [f.summary for f in found])
    assert words in [f for f in found if f.kind == "oom"][0].summary


def test_real_memory_report_of_a_healthy_torch_run_stays_quiet():
    """memory_allocated / max_memory_allocated / memory_reserved per step, mem_get_info and the caching
    allocator's memory_summary ('CUDA OOMs: 0', 'cudaMalloc retries: 0', 'Oversize allocations')."""
    lines = _log("oom_real_healthy.log")
    assert any("CUDA OOMs: 0" in ln for ln in lines) and any("max_memory_allocated" in ln for ln in lines)
    assert _kinds(_final(lines)) == []


# -- Ascend NPU (torch_npu NPU_CHECK_ERROR's shape, Ascend/pytorch NPUException.h:185; the table's text for 207018)

def test_npu_acl_207018_and_cann_el0004_are_an_oom():
    text = ["RuntimeError: malloc:torch_npu/csrc/core/npu/NPUCachingAllocator.cpp:1002 NPU function error: "
            "aclrtMallocAlign32(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST), error code is 207018",
            "[Error]: The memory on the device is exhausted. "]
    (f,) = _oom(text)[:1]
    assert f.summary.startswith("Ascend NPU out of device memory"), f.summary
    assert _kinds(_final(["EL0004: [PID: 4242] 2024-05-06-10:11:12.123.456 Failed to allocate memory."])) == ["oom"]
    # another ACL code is not an OOM (507013 is a DMA error), nor a memory report
    assert "oom" not in _kinds(_final(["RuntimeError: npuSynchronizeDevice: NPU function error: "
                                       "AclrtSynchronizeDeviceWithTimeout, error code is 507013"]))
    assert _kinds(_final(["[INFO] npu memory: allocated 12.3 GB, reserved 14.0 GB, max allocated 13.1 GB",
                          "NPU 0 memory usage 55 % -- Failed to allocate nothing, all good"])) == []


# -- Vulkan (ggml-vulkan.cpp:3608 and Vulkan-Hpp's ErrorOutOfDeviceMemory) ----------------------------------

def test_vulkan_out_of_device_memory_is_an_oom_and_device_lost_is_not():
    found = _oom(_log("../../corpus/pasted/logs/ggml-org_llama.cpp-29270.log"))
    assert found and "353 MiB" in found[0].summary, [f.summary for f in found]
    assert _kinds(_final(["terminate called after throwing an instance of 'vk::OutOfDeviceMemoryError'",
                          "  what():  vk::Device::allocateMemory: ErrorOutOfDeviceMemory"])) == ["oom"]
    lost = _final(["terminate called after throwing an instance of 'vk::DeviceLostError'",
                   "  what():  vk::Device::waitForFences: ErrorDeviceLost"])
    assert "oom" not in _kinds(lost) and "crash" in _kinds(lost)
    # healthy: a Vulkan start with its buffers (pasted ggml-org/llama.cpp#14854)
    assert _kinds(_final(["llama_kv_cache_unified:    Vulkan0 KV buffer size =   384.00 MiB",
                          "llama_context:    Vulkan0 compute buffer size =  1251.92 MiB",
                          "ggml_vulkan: 0 = AMD Radeon RX 580 Series (RADV POLARIS10) (radv) | uma: 0 | fp16: 0"])) == []


# -- CUDA check macros: CTranslate2 (src/cuda/utils.h:72) and dmlc CUDA_CALL (DGL cuda_common.h:94) -----------

def test_ctranslate2_and_dmlc_cuda_checks_of_out_of_memory_are_an_oom():
    (f,) = _oom(_log("../../corpus/pasted/logs/systran_faster-whisper-442.log"))[:1]
    assert "CUDA failed with error out of memory" in f.summary
    dgl = ["dgl._ffi.base.DGLError: [10:20:30] /opt/dgl/src/runtime/cuda/cuda_device_api.cc:114: Check failed: "
           "e == cudaSuccess || e == cudaErrorCudartUnloading: CUDA: out of memory"]
    assert _kinds(_final(dgl)) == ["oom"]
    # another cudaGetErrorString after the same prefix is a crash, not an OOM; a version print is nothing
    drv = _final(["RuntimeError: CUDA failed with error CUDA driver version is insufficient for CUDA runtime version"])
    assert _kinds(drv) == ["crash"]
    assert _kinds(_final(["ctranslate2 4.3.1 | CUDA: 12.1 | cuDNN: 8.9 | free memory 10.2 GiB"])) == []


# -- cuFFT's CUFFT_ALLOC_FAILED (torch CuFFTUtils.h:27) and the hipified names ---------------------------------

def test_cufft_and_hipblas_alloc_failed_are_an_oom():
    (f,) = _oom(["RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED"])
    assert f.summary == "CUDA OOM: CUFFT could not allocate its workspace (CUFFT_ALLOC_FAILED)", f.summary
    (g,) = _oom(["RuntimeError: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`"])
    assert g.summary.startswith("ROCm OOM: HIPBLAS"), g.summary
    assert _oom(["RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"])
    assert "oom" not in _kinds(_final(["RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR"]))
    assert _kinds(_final(["torch.backends.cuda.cufft_plan_cache.max_size = 4096 (plans cached, 0 alloc_failed)"])) == []


# -- OpenCV's OutOfMemoryError (modules/core/src/alloc.cpp) --------------------------------------------------

def test_opencv_insufficient_memory_in_both_generations_is_an_oom():
    for name, mib in (("lhoyer_daformer-89.log", "6 MiB"), ("opencv_opencv-8349.log", "183 MiB"),
                      ("jetsonhacks_buildopencvtx2-26.log", "1536 MiB")):
        found = _oom(_log(f"../../corpus/pasted/logs/{name}"))
        assert found and mib in found[0].summary, (name, [f.summary for f in found])
    # an OpenCV assertion is not an OOM (a lone cv2.error line is not read as a crash either: left for a crash reader)
    ass = _final(["cv2.error: OpenCV(4.6.0) /io/opencv/modules/imgproc/src/resize.cpp:4052: error: (-215:Assertion "
                  "failed) !ssize.empty() in function 'resize'"])
    assert "oom" not in _kinds(ass)


# -- Rust (library/std/src/alloc.rs default_alloc_error_hook) and CPython (Python/errors.c) --------------------

def test_rust_alloc_error_hook_and_cpython_fatal_memoryerror_are_an_oom():
    found = _final(["memory allocation of 8589934592 bytes failed", "Aborted (core dumped)"])
    assert "oom" in _kinds(found)
    assert "8.00 GiB" in [f for f in found if f.kind == "oom"][0].summary
    # the words inside a longer message that goes on are not the hook's line
    assert _kinds(_final(["[pinned] memory allocation of 4096 bytes failed, falling back to pageable memory"])) == []
    assert _kinds(_final(["Fatal Python error: _PyErr_NormalizeException: Cannot recover from MemoryErrors while "
                          "normalizing exceptions."])) == ["oom"]


# -- loky's exit codes (loky/process_executor.py:721, backend/utils.py:157) ---------------------------------

def test_loky_sigkill_exit_code_is_an_oom_and_sigsegv_is_not():
    found = _final(_log("../../corpus/pasted/logs/hotpotqa_hotpot-39.log"))
    assert "oom" in _kinds(found)
    seg = _final(["joblib.externals.loky.process_executor.TerminatedWorkerError: A worker process managed by the "
                  "executor was unexpectedly terminated. This could be caused by a segmentation fault while calling "
                  "the function or by an excessive memory usage causing the Operating System to kill the worker.",
                  "", "The exit codes of the workers are {SIGSEGV(-11)}"])
    assert "oom" not in _kinds(seg)  # (nor a crash yet: the exit-codes line ends the paste; left for a crash reader)


# -- dask's nanny (distributed/worker_memory.py:412) ---------------------------------------------------------

def test_dask_nanny_memory_budget_kill_is_an_oom_and_its_warnings_are_not():
    (f,) = _oom(["distributed.nanny.memory - WARNING - Worker tcp://127.0.0.1:34589 (pid=4242) exceeded 95% memory "
                 "budget. Restarting..."])[:1]
    assert "95%" in f.summary
    assert _kinds(_final(_log("../../corpus/pasted/logs/modin-project_modin-1643.log"))) == ["oom"]
    assert _kinds(_final(_log("../../corpus/pasted/logs/pslmodels_og-usa-108.log"))) == []


# -- torch's MapAllocator (aten/src/ATen/MapAllocator.cpp) --------------------------------------------------

def test_torch_mmap_enomem_is_an_oom_and_a_missing_file_is_not():
    (f,) = _oom(["RuntimeError: unable to mmap 1048576 bytes from file </torch_1234_5678_0>: Cannot allocate "
                 "memory (12)"])
    assert f.summary.startswith("host RAM ran out (ENOMEM"), f.summary
    assert "oom" not in _kinds(_final(["RuntimeError: unable to mmap 1048576 bytes from file </torch_1234_5678_0>: "
                                       "No such file or directory (2)"]))


# -- healthy text full of the allocator's words -------------------------------------------------------------

def test_allocator_advice_config_dumps_and_memory_prints_stay_quiet():
    text = ["UserWarning: To reduce fragmentation set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; see the "
            "documentation for Memory Management",
            "allocator config: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512,garbage_collection_threshold:0.8",
            "epoch 3 | loss 0.412 | max_memory_allocated 10.24 GiB | memory_reserved 11.00 GiB",
            "rmm.reinitialize(pool_allocator=True, initial_pool_size=2**30)  # RMM pool of 1 GiB",
            "XLA_PYTHON_CLIENT_MEM_FRACTION=.75 ; preallocating 75% of GPU memory",
            "[TRT] [I] [MemUsageChange] Init CUDA: CPU +2, GPU +0, now: CPU 18, GPU 1234 (MiB)",
            "distributed.worker.memory - WARNING - Worker is at 85% memory usage. Pausing worker.  Process memory: "
            "3.69 GB -- Worker memory limit: 4.29 GB"]
    assert _kinds(_final(text)) == []


# -- Intel GPUs below UR (Level Zero ze_api.h; SYCL PI's 'Native API returns: N (NAME)', intel/llvm common.hpp) --

def test_level_zero_and_sycl_pi_out_of_memory_codes_are_an_oom_and_out_of_resources_is_not():
    (f,) = _oom(["RuntimeError: Native API failed. Native API returns: -6 (PI_ERROR_OUT_OF_HOST_MEMORY) -6 "
                 "(PI_ERROR_OUT_OF_HOST_MEMORY)"])
    assert f.summary.startswith("host memory ran out (SYCL PI"), f.summary
    (g,) = _oom(["level_zero: zeMemAllocDevice returned ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"])
    assert g.summary.startswith("Intel GPU (XPU) device memory ran out (Level Zero"), g.summary
    assert "oom" not in _kinds(_final(["RuntimeError: Native API failed. Native API returns: -5 "
                                       "(PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)"]))
    assert _kinds(_final(["[ze] device 0: Intel(R) Arc(TM) A770, 16 GiB device memory, max_mem_alloc_size 4 GiB"])) == []


# -- cffi's MemoryError is no RAM shortage (python-cffi/cffi src/c/_cffi_backend.c:6394) ---------------------

def test_cffi_write_execute_memoryerror_is_a_crash_not_an_oom():
    msg = ("MemoryError: Cannot allocate write+execute memory for ffi.callback(). You might be running on a system "
           "that prevents this. For more information, see https://cffi.readthedocs.io/en/latest/using.html#callbacks")
    tb = ["Traceback (most recent call last):", '  File "rec.py", line 3, in <module>', "    stream.start()", msg]
    for text in (tb, [msg]):
        assert _kinds(_final(text)) == ["crash"], text
    # a real MemoryError stays an OOM
    assert _kinds(_final(tb[:3] + ["MemoryError"])) == ["oom"]


# -- Paddle Fluid's GpuMaxChunkSize enforce message (paddle/fluid/platform/gpu_info.cc, 2018) ------------------

def test_paddle_insufficient_gpu_memory_to_allocation_is_an_oom():
    (f,) = _oom(["paddle.fluid.core_avx.EnforceNotMet: Insufficient GPU memory to allocation. at "
                 "[/paddle/paddle/fluid/platform/gpu_info.cc:262]"])
    assert "Insufficient GPU memory to allocation" in f.summary
    assert _kinds(_final(["I0612 10:20:30.123 gpu_info.cc:150] GPU memory to use: 10.5 GiB (fraction_of_gpu_memory_to_use "
                          "0.92), insufficient memory warnings: 0"])) == []
