"""Where each accelerator/host out-of-memory wording the rules read (rules.py, kind "oom")
is printed: one row per rule, naming the framework source -- repository, file, line and
the commit read -- or, where no source could be read, the reason and where the wording was
seen instead (a pasted log of tests/corpus/pasted/, or the corpus's own runs).

Facts only (which text a library prints); nothing of the sources is copied. The tests
(tests/test_detectors_shapes.py) hold every OOM rule to a row here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    rule: str
    framework: str
    wording: str
    repo: str = ""
    path: str = ""
    line: int | None = None
    commit: str = ""
    note: str = ""


OOM_FAMILY: tuple[Source, ...] = (
    Source("torch-oom", "PyTorch (CUDA, ROCm)", "CUDA out of memory. Tried to allocate ...", "pytorch/pytorch",
           "c10/cuda/CUDACachingAllocator.cpp", 1354, "001074d25084fdb87a799823e395a50f5ec044d3",
           "the OutOfMemoryError message's first literal; a ROCm build hipifies it to 'HIP out of memory' "
           "(tests/corpus/cited/index.json, rocm-hip-oom, names the hipify mapping)"),
    Source("cuda-runtime-oom", "PyTorch < 1.0", "cuda runtime error (2) : out of memory",
           note="source not read: THC's THCudaCheck of torch < 1.0 is gone from the repository; seen in the "
                "generated corpus's wording tests"),
    Source("thc-check-oom", "PyTorch < 0.4 (THC), Lua torch (cutorch)", "THCudaCheck FAIL file=F line=L error=2 : out of memory",
           "torch/cutorch", "lib/THC/THCGeneral.c", 720, "5e9d86cb982a6048d3077aeb0e0cee19847b4c08",
           "__THCudaCheck's fprintf(stderr, \"THCudaCheck FAIL file=%s line=%i error=%i : %s\") with cudaGetErrorString, "
           "before _THError's 'cuda runtime error (%d) : %s' at :723 (cuda-runtime-oom); torch < 0.4 vendored this THC; "
           "a paste may hold only this line (pasted Cadene/vqa.pytorch#47, then a segfault; marvis/pytorch-yolo2#14)"),
    Source("cuda-error-oom", "PyTorch; ggml (llama.cpp, qwen.cpp)", "CUDA error: out of memory / CUDA error 2 at F:L: "
           "out of memory", "ggml-org/ggml", "src/ggml-cuda.cu", 166, "c0e1eb4414d18242daa0641ea8aa29be28f09d00",
           "ggml's CUDA_CHECK: fprintf 'CUDA error %d at %s:%d: %s' with cudaGetErrorString (the ggml commit that "
           "pasted QwenLM/qwen.cpp#55's qwen.cpp pins); torch's form is C10_CUDA_CHECK's (c10/cuda/CUDAException.cpp, "
           "not counted); the string itself is NVIDIA's closed-source runtime's for cudaErrorMemoryAllocation; the driver "
           "API's cuGetErrorString gives the same 'out of memory' for CUDA_ERROR_OUT_OF_MEMORY, printed by torch's "
           "C10_CUDA_DRIVER_CHECK as 'CUDA driver error: out of memory' (pytorch/pytorch c10/cuda/driver_api.h:16 at "
           "0007e752d518810f0f8942a830dbbbfc69f34577, the expandable-segments cuMemCreate path) and by Triton's gpuAssert "
           "as 'Triton Error [CUDA]: out of memory' (triton-lang/triton third_party/nvidia/backend/driver.c:66 at "
           "04e0bbd482a638beb5e7b59ae22f55e606c80cad, counted by hand; loading or launching a compiled kernel); Triton's "
           "'OutOfResources: out of resource: shared memory' is a kernel config too big for the SM, not an OOM, and "
           "stays a crash"),
    Source("glog-cuda-oom", "Caffe (and glog CHECKs of a CUDA call)", "Check failed: error == cudaSuccess (2 vs. 0)  "
           "out of memory", "BVLC/caffe", "include/caffe/util/device_alternate.hpp", 52,
           "9b891540183ddc834a02b2bd81b31afae71b2153",
           "CUDA_CHECK: CHECK_EQ(error, cudaSuccess) << \" \" << cudaGetErrorString(error); glog writes 'Check failed: ' "
           "(google/glog src/glog/logging.h:554 at 53d58e4531c7c90f71ddab503d915e027432447a) and then '*** Check "
           "failure stack trace: ***' (src/logging.cc:1688); 2 is cudaErrorMemoryAllocation"),
    Source("alloc-failed", "cuBLAS / cuDNN / cuFFT (and their hip* names on ROCm)", "CUBLAS_STATUS_ALLOC_FAILED / "
           "cuFFT error: CUFFT_ALLOC_FAILED", "pytorch/pytorch", "aten/src/ATen/native/cuda/CuFFTUtils.h", 27,
           "051e2a50de9cd1384b365db11e4a9f2e825d7066",
           "torch's _cudaGetErrorEnum returns 'CUFFT_ALLOC_FAILED' (cuFFT's enumerator has no STATUS_), which "
           "CUFFT_CHECK raises as 'cuFFT error: ...' (line counted by hand in the code index's 1.9 kB copy); the "
           "cuBLAS/cuDNN/cuSPARSE/cuSOLVER *_STATUS_ALLOC_FAILED names are the libraries' status enums (closed "
           "source), printed by torch's CUDABlas/cuDNN checks; torch's hipify maps them to HIPBLAS_/HIPSPARSE_/"
           "HIPSOLVER_/HIPFFT_ names on ROCm (torch/utils/hipify/cuda_to_hip_mappings.py, not re-read this round)"),
    Source("mxnet-storage-oom", "MXNet", "Memory allocation failed out of memory", "apache/mxnet",
           "src/storage/pooled_storage_manager.h", 212, "b84609d3fc73d20929c114eab95faaa56e6c5ede",
           "the pooled storage manager's LOG(FATAL) << \"Memory allocation failed \" << err; MXNet's CUDA_CALL "
           "(src/common/cuda/utils.h:110, same commit: CHECK(e == cudaSuccess || e == cudaErrorCudartUnloading) << "
           "\"CUDA: \" << cudaGetErrorString(e)) and 1.x's gpu_device_storage.h:65 LOG(FATAL) << \"CUDA: \" (at "
           "7b24137ed45df605defa4ce72ec91554f6e445f0) print dmlc's wording, which cuda-check-oom reads"),
    Source("mxnet-cpu-oom", "MXNet", "Failed to allocate CPU Memory", "apache/mxnet", "src/storage/cpu_device_storage.h", 65,
           "b84609d3fc73d20929c114eab95faaa56e6c5ede", "LOG(FATAL) when the aligned host allocation returns null"),
    Source("xgboost-device-oom", "XGBoost (CUDA)", "Memory allocation error on worker R: ...", "dmlc/xgboost",
           "src/common/device_vector.cu", 22, "379b29f0836b9dbc313b993d8e5743bd452d4117",
           "dh::detail::ThrowOOMError: the message, then '- Free memory: ' and '- Requested memory: ' lines, raised "
           "through LOG(FATAL) as an XGBoostError"),
    Source("lightgbm-cuda-oom", "LightGBM (CUDA)", "[LightGBM] [Fatal] [CUDA] out of memory FILE LINE", "microsoft/LightGBM",
           "include/LightGBM/cuda/cuda_utils.hu", 35, "bae0b7ba953341a32b2a9c5c5c437a1b976f576f",
           "gpuAssert (CUDASUCCESS_OR_FATAL): Log::Fatal(\"[CUDA] %s %s %d\", cudaGetErrorString(code), file, line); "
           "Log::Fatal writes '[LightGBM] [Fatal] ' first (include/LightGBM/utils/log.h:132)"),
    Source("catboost-gpu-oom", "CatBoost (GPU)", "Error: Out of memory. Requested N MB; Free M MB (NCudaLib::TOutOfMemoryError)",
           "catboost/catboost", "catboost/cuda/cuda_lib/memory_pool/stack_like_memory_pool.h", None,
           "0d257b83a62a5578aebd6cc447cfdd33c0621e87",
           "TStackLikeMemoryPool::Create: ythrow TOutOfMemoryError() << \"Error: Out of memory. Requested \" ... \" MB; "
           "Free \" ... \" MB\"; TryDefragment's \"Error: We don't have enough memory for defragmentation\" (same file; "
           "line not counted: the index's text was read from an offset); the pastes name it at :294, :303 and :305 across "
           "versions, older ones without ' MB' (pasted catboost/catboost#302, #405, #2750)"),
    Source("alloc-failed", "cuBLAS / cuDNN", "CUBLAS_STATUS_ALLOC_FAILED", note="the libraries' status enum names "
           "(closed source), printed by torch's CUDABlas checks; generated corpus wording tests"),
    Source("nccl-oom", "NCCL", "Cuda failure 'out of memory'", "NVIDIA/nccl", "src/include/checks.h", 18,
           "5067397c2676d5aed50042fc39e5c8ee96eb0027",
           "CUDACHECK: WARN(\"Cuda failure '%s'\", cudaGetErrorString(err)) (also at :28 and :40)"),
    Source("tf-launch-oom", "TensorFlow (GPU kernels)", "Non-OK-status: GpuLaunchKernel (...) status: Internal: out of memory",
           note="TF_CHECK_OK's fatal message on a GPU kernel launch (tensorflow/core/util/gpu_kernel_helper.h, not re-read "
                "with a commit this round); the wording is taken from the pasted kubeflow/trainer#1158"),
    Source("xla-oom", "XLA (JAX, TF, torch-xla)", "RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
           note="tests/corpus/cited/index.json (xla-resource-exhausted) cites it: "
                "xla/stream_executor/integrations/tf_allocator_adapter.cc:96 with its commit"),
    Source("other-accel-oom", "PyTorch MPS / XPU / NPU", "MPS backend out of memory (MPS allocated: ...",
           "pytorch/pytorch", "aten/src/ATen/mps/MPSAllocator.mm", None, "57ba412974d87ca62f0c7010e5953581587c40c6",
           "MPSHeapAllocatorImpl::malloc's TORCH_CHECK; line not counted (the code index serves the file in pages); "
           "Cambricon's MLU build prints 'MLU out of memory. Tried to allocate ...' from its caching allocator's "
           "TORCH_CHECK_WITH(OutOfMemoryError, ...) (Cambricon/torch_mlu torch_mlu/csrc/framework/core/"
           "caching_allocator.cpp at cb657a20764689645a12973aea12d77cac304393, '(MLU N; ... total capacity' in older and "
           "'MLU N has a total capacity of' in newer versions; line not counted)"),
    Source("ur-oom", "Intel GPUs: PyTorch XPU / IPEX over oneAPI Unified Runtime",
           "Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) / 38 (UR_RESULT_ERROR_OUT_OF_HOST_MEMORY)",
           "oneapi-src/unified-runtime", "include/ur_api.h", None, "aa04ce16b3a06e0f11ff2602d7c5f46c1a3fbd6f",
           "the ur_result_t enumerators ('Insufficient device memory to satisfy call' = 39, host = 38); line not "
           "counted (the code index serves the 650 kB header in pages); SYCL's exception and torch-xpu print the name "
           "(pasted open-edge-platform/geti_v2#1075); UR_RESULT_ERROR_DEVICE_LOST (20) is not read as an OOM; the rule "
           "also reads Level Zero's ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY / _DEVICE_MEMORY (0x70000002/3: "
           "oneapi-src/level-zero include/ze_api.h at c1872469737f807abc0ab8c4b35a263a568a6504, line not counted) and "
           "oneAPI's older SYCL Plugin Interface text 'Native API failed. Native API returns: -6 "
           "(PI_ERROR_OUT_OF_HOST_MEMORY)' (intel/llvm sycl/include/sycl/detail/common.hpp at "
           "002d53d0cee27a638d5da15f838714ca0d58857d: __SYCL_PI_ERROR_REPORT + codeToString, 'N (NAME)'), and "
           "PI_ERROR_MEM_OBJECT_ALLOCATION_FAILURE / OpenCL's CL_MEM_OBJECT_ALLOCATION_FAILURE (-4); "
           "PI_ERROR_OUT_OF_RESOURCES (-5), to which the UR adapter maps device OOM too, is not read: it names any resource"),
    Source("paddle-oom", "PaddlePaddle", "Out of memory error on GPU %d. Cannot allocate %s memory on GPU %d",
           "PaddlePaddle/Paddle", "paddle/fluid/memory/allocation/cuda_allocator.cc", 79,
           "8b4344e84ea0ad2b1ac0d3fbfd281a03558c821f",
           "CUDAAllocator::AllocateImpl: PADDLE_THROW_BAD_ALLOC(platform::errors::ResourceExhausted(...)) at line 78, "
           "the message's first literal at 79 -- why the summary says ResourceExhaustedError; the pasted logs print "
           "the same file at :86 / :95 (other versions)"),
    Source("paddle-enforce-oom", "PaddlePaddle (Fluid, 2018)", "enforce allocating <= available failed, N > M",
           note="Fluid's paddle/fluid/platform/gpu_info.cc of 2018 (which the pasted logs name at :89 and :119): "
                "GpuMaxChunkSize's PADDLE_ENFORCE_LE(allocating, available, \"Insufficient GPU memory to allocation.\"), "
                "read in the code index's copies (round 12, k13oomsrc), which name no repository commit: line not "
                "counted; the old enforce prints 'enforce allocating <= available failed, N > M', later formats only "
                "the message; seen in pasted paddlepaddle/Paddle#8992, #9230, #12749"),
    Source("tf-oom", "TensorFlow", "OOM when allocating tensor with shape[...] and type ... by allocator ...",
           "tensorflow/tensorflow", "tensorflow/core/framework/op_kernel.cc", 780,
           "c8e5f66965714c8eb3211ae8099c467872b5901a",
           "OpKernelContext::allocate_tensor's errors::ResourceExhausted('OOM when allocating tensor with shape', "
           "..., ' by allocator ', ...): the line counted over the two pages the code index serves, its character "
           "offset 29832 as recorded before; OpKernelConstruction's 'OOM when allocating temporary tensor' is "
           "earlier in the file"),
    Source("tf-eigen-oom", "TensorFlow 1.x", "EigenAllocator for GPU ran out of memory when allocating",
           note="source not read (tensorflow/core/common_runtime/gpu/gpu_device.cc of TF 1.x, which the pasted log "
                "names at :103); seen in pasted CharlesShang/FastMaskRCNN#129"),
    Source("tf-resource-exhausted", "TensorFlow / torch-xla (older Status text)", "Resource exhausted: ...",
           note="the human name of the ResourceExhausted code in TF's older Status::ToString; source not read; seen "
                "in pasted pytorch/xla#2569"),
    Source("resource-exhausted-error", "TensorFlow / Paddle", "ResourceExhaustedError: ... OOM / memory",
           note="the Python exception class of both stacks (tensorflow/python/framework/errors_impl.py; Paddle's "
                "enforce); source not read; seen in pasted logs of both"),
    Source("cupy-oom", "CuPy (Chainer, cuML, ...)", "Out of memory allocating 25,600,000 bytes (allocated so far: ...) / "
           "out of memory to allocate N bytes (total M bytes)", "cupy/cupy", "cupy/cuda/memory.pyx", 70,
           "6b6d9563c4f7410cd1866a11b2f71a60dd45a68c",
           "OutOfMemoryError.__init__'s message (and :75 with a pool limit); before CuPy v7 it read 'out of memory to "
           "allocate %d bytes (total %d bytes)' (memory.pyx:38 at b4fba476420f2d961157e9853f3da2a01776ef94); Chainer's "
           "trainer prints it as 'Exception in main training loop: ...' (pasted cupy/cupy#2537, chainer/chainer#5621)"),
    Source("mindspore-oom", "MindSpore", "Malloc for kernel output failed, Memory isn't enough, node:...",
           note="MS_LOG(EXCEPTION) in MindSpore's runtime (the graph scheduler's kernel launch: 'Malloc for kernel "
                "input/output failed, Memory isn't enough, node:'), found by the code index in several versions but "
                "without a repository path, and the repository (563 MB) is over the fetch limit: line not counted; "
                "seen in pasted mindspore-lab/mindone#465 and mindspore-ai/mindspore#172 ('Out of memory. Memory "
                "malloc failed.')"),
    Source("mlx-metal-oom", "MLX (Apple silicon)", "[metal::malloc] Attempting to allocate N bytes which is greater than "
           "the maximum allowed buffer size of M bytes.", "ml-explore/mlx", "mlx/backend/metal/allocator.cpp", 116,
           "846d176227a0ac13d2667e58d2bb68b322109ab0",
           "MetalAllocator::malloc's message for a buffer past the device's maxBufferLength (pasted "
           "trevin-creator/autoresearch-mlx#2); its 'Resource limit (N) exceeded' at :143 is a handle count, not "
           "memory, and is not read as an OOM"),
    Source("metal-cmdbuf-oom", "Apple Metal (MLX, ggml/llama.cpp/ollama)", "[METAL] Command buffer execution failed: "
           "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", "ml-explore/mlx",
           "mlx/backend/metal/device.cpp", 540, "846d176227a0ac13d2667e58d2bb68b322109ab0",
           "MLX formats the command buffer's error localizedDescription (Metal's own text, closed source: "
           "MTLCommandBufferErrorOutOfMemory is 8); ggml logs the same description; older macOS: 'Insufficient Memory "
           "(IOAF code 8)' (pasted instructlab/instructlab#380, ollama/ollama#6257, safx/waifu2x-metal#3)"),
    Source("cuda-call-oom", "CNTK; ONNX Runtime (CUDA provider)", "CUDA failure 2: out of memory ; GPU=0 ; hostname=H ; "
           "expr=cudaMalloc(...)", "microsoft/onnxruntime", "onnxruntime/core/providers/cuda/cuda_call.cc", None,
           "58f385d703702233527a4f499be32908cd773425",
           "CudaCall's snprintf '%s failure %d: %s ; GPU=%d ; hostname=%s ; expr=%s; %s' (line not counted); ONNX "
           "Runtime kept CNTK's CudaCall (microsoft/CNTK Source/Math/GPUMatrix.h, RuntimeError with the same text "
           "without the last '; %s', read in the code index); 2 is cudaErrorMemoryAllocation (pasted "
           "microsoft/CNTK#1591, #2607, #480, #3536)"),
    Source("mindspore-pool-oom", "MindSpore (Ascend/GPU memory pool)", "TotalUsedMemStatistics : N plus alloc size : N is "
           "more than total mem size : N.",
           note="MS_LOG(ERROR) in DynamicMemPoolBestFit::AddMemBlockAndMemBufByEagerFree "
                "(mindspore/ccsrc/backend/common/mem_reuse/mem_dynamic_allocator.cc:392 as the pasted mindspore-lab/mindone#820 "
                "prints it), read in the code index without a repository path; the repository is over the fetch limit"),
    Source("mlx-malloc-oom", "MLX (Apple silicon, CUDA)", "[malloc_or_wait] Unable to allocate 9663676416 bytes. / [malloc] "
           "Unable to allocate N bytes.", "ml-explore/mlx", "mlx/allocator.cpp", 59, "1177d283954facd3d1c40ff1ea59929549045c12",
           "malloc_or_wait's std::runtime_error when no buffer comes even after waiting for frees (the parent of "
           "7b7e2352, 'fix malloc or wait deadlock'); since 6245824d the backends' malloc throws '[malloc] Unable to "
           "allocate' (mlx/backend/metal/allocator.cpp:156 and mlx/backend/cuda/allocator.cpp:213 at "
           "846d176227a0ac13d2667e58d2bb68b322109ab0; the CUDA pool's '[malloc_async]' before); uncaught it ends the "
           "process in libc++abi's 'terminating due to uncaught exception' (pasted ml-explore/mlx#63)"),
    Source("jittor-oom", "Jittor", "GPU memory is overflow, please reduce your batch_size or data size!",
           "Jittor/jittor", "python/jittor/src/mem/mem_info.cc", 273, "06f5d3d271555682c95aa3505518f47eeab2bd9c",
           "the memory check's fatal log, 'GPU' or 'CPU' before 'memory is overflow' (pasted Jittor/jittor#396)"),
    Source("tpu-hbm-oom", "XLA:TPU (JAX, torch-xla)", "Ran out of memory in memory space hbm",
           note="printed by the closed-source XLA:TPU compiler: no public source to cite; seen in pasted JAX logs"),
    Source("hip-error-oom", "ROCm HIP", "hipErrorOutOfMemory", "ROCm/HIP", "include/hip/hip_runtime_api.h", 291,
           "c5e11fcac8249ce4f7e70157588ff9661a870b59",
           "the hipError_t enumerator (hipErrorOutOfMemory = 2), printed by torch's HIP build and hipGetErrorName"),
    Source("ort-bfc-oom", "onnxruntime (CUDA / CPU / ROCm execution providers)", "Failed to allocate memory for requested "
           "buffer of size N / Available memory of N is smaller than requested bytes of M / BFC Arena ran out of memory "
           "trying to allocate N", "microsoft/onnxruntime", "onnxruntime/core/framework/bfc_arena.cc", None,
           "009aae13a310efcf231562e8458a83ed7ff55c01",
           "BFCArena::Extend's ORT_MAKE_STATUS when the device allocator returns nothing even after backing off to 90 % "
           "steps ('Failed to allocate memory ...'), or when the request exceeds the arena's memory_limit_ "
           "(gpu_mem_limit: 'Available memory of ...'); AllocateRawInternal logs 'BFC Arena ran out of memory trying "
           "to allocate' when dump_log_on_failure, then ORT_THROWs the status, which the session reports as "
           "'Non-zero status code returned while running <Op> node ... Status Message: ...bfc_arena.cc:N ...'; "
           "line not counted (the code index serves the file in pages); no 'out of memory' in it, so "
           "cuda-driver-oom's trigger words never saw it (pasted DayBreak-u/chineseocr_lite#355, "
           "hacksider/Deep-Live-Cam#547, rakhmanov/immich-in-lxc#23)"),
    Source("cuda-driver-oom", "CUDA driver (TF, JAX, CuPy)", "CUDA_ERROR_OUT_OF_MEMORY",
           note="the CUresult enumerator's name (cuda.h, NVIDIA, closed source); seen in pasted TF logs; the rule "
                "also reads a CUDA allocation call named with 'out of memory' after it (cudaMalloc, cudaHostAlloc, "
                "cuMemAlloc, hipMalloc: MXNet's pooled storage, MindSpore's pinned arena, pasted "
                "mindspore-ai/mindspore#172); MXNet's is GPUPooledStorageManager::Alloc's LOG(FATAL) << \"cudaMalloc failed: \" "
                "(and \"cudaMalloc retry failed: \" after releasing its pool) << cudaGetErrorString (apache/mxnet "
                "src/storage/pooled_storage_manager.h, the 1.x version the code index serves by content: line not "
                "counted; at 4ed3f3b158abb301514e856f1235be1bfe662269 the file had only 'Memory allocation failed.'; "
                "pasted msracver/Flow-Guided-Feature-Aggregation#16)"),
    Source("tf-device-alloc-failed", "TensorFlow (CUDA, ROCm stream executors)",
           "failed to allocate 7.35G (7889485824 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY / hipError_t(1002)",
           note="source not read (tensorflow/stream_executor/{cuda,rocm}/*_driver.cc, which the pasted logs name); "
                "seen in pasted ROCm/tensorflow-upstream#82"),
    Source("tf-bfc-oom", "TensorFlow", "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.19GiB",
           "tensorflow/tensorflow", "tensorflow/core/common_runtime/bfc_allocator.cc", 275,
           "dc0b924e80edbe869c2173fd383982bb80ecc90d",
           "AllocateRawInternal's LOG(WARNING) 'Allocator (' << Name() << ') ran out of memory trying to allocate ... "
           "Current allocation summary follows.' (the line count checked against the code index's character offset "
           "of that message, 9572); the no-retry variant at :220 adds 'The caller indicates that this is not a "
           "failure' and is left quiet"),
    Source("tf-bfc-oom-old", "TensorFlow 0.x/1.0", "Ran out of memory trying to allocate 144.00MiB.  See logs for memory "
           "state.",
           note="source not read for those releases (the pasted log names tensorflow/core/common_runtime/"
                "bfc_allocator.cc:275, the occupancy bar at :274 before it); later releases print the "
                "'Allocator (GPU_0_bfc) ran out of memory' wording of tf-bfc-oom instead; seen in pasted "
                "aymericdamien/TensorFlow-Examples#38"),
    Source("tf-bfc-dump", "TensorFlow (BFC allocator)", "bfc_allocator.cc:N] Chunk at 0x... of size N / InUse at ... of "
           "size N next M / Bin (256): Total Chunks: ... / Sum Total of in-use chunks: ... / the occupancy bar "
           "(100 of '*', 'x', '_')", "tensorflow/tensorflow", "tensorflow/core/common_runtime/bfc_allocator.cc", 279,
           "dc0b924e80edbe869c2173fd383982bb80ecc90d",
           "AllocateRawInternal, after an allocation no chunk or region extension could serve: when "
           "dump_log_on_failure it logs the ran-out-of-memory warning (:275), DumpMemoryLog (:278: the Bin, "
           "'Chunk/Free at ... of size' and 'Sum Total of in-use chunks' lines) and LOG(WARNING) << "
           "RenderOccupancy() (:279); RenderOccupancy is otherwise only logged at VLOG(4) with an 'A: '/'F: ' "
           "prefix. Newer releases name in-use chunks 'InUse at ... next N' (pasted faustomorales/keras-ocr#195, "
           "tensorflow/models#9809)"),
    Source("tf-dst-uninit", "TensorFlow (GPU copies)", "InternalError: Dst tensor is not initialized.", "tensorflow/tensorflow",
           "tensorflow/core/common_runtime/gpu/gpu_util.cc", 96, "c8aa04ec02170ad637aa77a768d86b15b4808bc5",
           "PrepareCopy: errors::Internal when the destination tensor has bytes but no buffer -- its GPU "
           "allocation failed and the copy (CPU->GPU, GPU->GPU) is refused; line counted by hand from the code "
           "index's copy; pasted aymericdamien/TensorFlow-Examples#38 prints it under the BFC allocator's "
           "ran-out-of-memory report"),
    Source("tf-oom-hint", "TensorFlow (and torch-xla's XRT client)", "Hint: If you want to see a list of allocated tensors "
           "when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
           note="source not read: TensorFlow's runtime appends it to a RESOURCE_EXHAUSTED status's message (the "
                "executor's, when no allocation report was asked for); seen in pasted pytorch/xla#1965, where "
                "torch-xla's xla_util.cc logs it after an XLA compilation's HBM allocation report"),
    Source("hpu-workspace-oom", "Habana Gaudi (SynapseAI PyTorch bridge)", "RuntimeError: FATAL ERROR :: "
           "MODULE:SYNHELPER workspace Allocation of size ::14493510400 failed!",
           note="printed by Habana's closed-source PyTorch bridge (habana_frameworks): no public source to cite; "
                "seen in pasted HabanaAI/Model-References#10 (loss.backward on a DL1 Gaudi; the maintainers' first "
                "advice is a smaller batch); the bridge's device-memory pool says 'FATAL ERROR :: MODULE:PT_DEVMEM "
                "Allocation failed for size::939524096 (896)MB', which huggingface/accelerate's should_reduce_batch_size "
                "lists as the HPU's OOM (src/accelerate/utils/memory.py:112 at 16cb6eb80dd9aa8b4df1a63ef57863e455d53b83) "
                "and HabanaAI/vllm-fork's calibration README gives as the error of a model that does not fit the cards"),
    Source("enomem", "Linux (errno 12)", "[Errno 12] Cannot allocate memory",
           note="strerror(ENOMEM) as Python's OSError and torch's alloc_cpu print it; seen in pasted logs; torch's "
                "MapAllocator (shared-memory tensors of DataLoader workers) prints it as 'unable to mmap N bytes from "
                "file <F>: Cannot allocate memory (12)' (pytorch/pytorch aten/src/ATen/MapAllocator.cpp, TORCH_CHECK(false, "
                "'unable to mmap ', size_, ' bytes from file <', filename_, '>: ', str_error(errno), ' (', errno, ')'), "
                "read in the code index at 9de0cafe3cc2d2d70d2c8f24e3af1b5546408eac; line not counted)"),
    Source("numpy-oom", "NumPy", "Unable to allocate %s for an array with shape", "numpy/numpy",
           "numpy/_core/_exceptions.py", 161, "1f90bbb55e65e7de68921bc3f1a2d94492fdf689",
           "_ArrayMemoryError.__str__ (numpy/core/_exceptions.py before NumPy 2)"),
    Source("bad-alloc", "C++ runtime", "terminate called after throwing an instance of 'std::bad_alloc'",
           note="libstdc++'s verbose terminate handler and the standard exception's name; caught by a binding it is "
                "re-raised with what() = 'std::bad_alloc': pybind11 maps it to MemoryError, torch's C++ wrappers to "
                "RuntimeError ('RuntimeError: std::bad_alloc', read by its 'error: std::bad_alloc' trigger)"),
    Source("v8-heap-oom", "Node.js (V8)", "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
           note="real output of Node v20.20.2 here (tests/data/logs/crashlang_node_heap_oom.log, made by "
                "tests/data/logs/programs/crashlang/heap_oom.js under --max-old-space-size=32); older V8 says "
                "'Ineffective mark-compacts near heap limit' or 'CALL_AND_RETRY_LAST' before the same words; "
                "node/V8 source not read this round"),
    Source("slurm-oom", "Slurm", "Detected N oom_kill event(s) in StepId=... (older: oom-kill)", "SchedMD/slurm",
           "src/plugins/task/cgroup/task_cgroup_memory.c", 291, "284c3b95f08a2dc2478499837b03355e1b9c5c75",
           "the cgroup task plugin's error(\"Detected %\"PRIu64\" oom_kill event%s in %ps. Some of the step tasks have "
           "been OOM Killed.\"); older releases wrote oom-kill, which the rule also reads"),
    Source("tensorrt-oom", "TensorRT", "Error Code 1: Cuda Runtime (out of memory) / Cuda Error in allocate: 2 (out "
           "of memory) / Error Code 2: OutOfMemory (Requested size was N bytes.)",
           note="printed by TensorRT's closed-source builder and runtime (defaultAllocator.cpp, safeRuntime.cpp, "
                "virtualMemoryBuffer.cpp, which the logs name): no public source to cite; seen in pasted "
                "NVIDIA/TensorRT#4258 and #2198, linghu8812/tensorrt_inference#117 and #155 (TensorRT 7 to 10)"),
    Source("ggml-buffer-oom", "ggml (llama.cpp, ollama, whisper.cpp)", "failed to allocate CUDA0 buffer of size N / "
           "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size N", "ggml-org/ggml",
           "src/ggml-alloc.c", 1133, "d99724f2b141fed9e1a9f402213506c081433465",
           "alloc_tensor_range's GGML_LOG_ERROR('%s: failed to allocate %s buffer of size %zu') (the same in "
           "ggml_gallocr_reserve_n at :940); the CPU backend's at src/ggml-backend.cpp:2381 (pasted ollama/ollama#12634, "
           "ikawrakow/ik_llama.cpp#749); a `... model buffer size = N MiB` report and a failed mlock are not read"),
    Source("ggml-unable-buffer", "llama.cpp (ollama, llama-cpp-python)", "llama_model_load: error loading model: unable to "
           "allocate CUDA0 buffer / CUDA_Host buffer / backend buffer", "ggml-org/llama.cpp", "src/llama-model.cpp", None,
           "a5410f046c01d01330c8a42f13b64a211fedf2c3",
           "load_tensors: throw std::runtime_error(format(\"unable to allocate %s buffer\", ggml_backend_buft_name(buft))) "
           "when the weights' backend buffer cannot be made; line not counted (the code index serves the file in "
           "pages); older releases said 'unable to allocate backend buffer'; ollama wraps it as 'llama runner process "
           "has terminated: error loading model: ...' (pasted continuedev/continue#11223, ollama/ollama#8597)"),
    Source("ollama-sysmem", "ollama", "model requires more system memory (164.8 GiB) than is available (13.4 GiB)",
           "ollama/ollama", "llm/server.go", None, "5dbb81b72c4b61b737e4970db711f7718e4efcc6",
           "NewLlamaServer's fmt.Errorf('model requires more system memory (%s) than is available (%s)') when the "
           "part of the model kept on the CPU exceeds free RAM plus swap; line not counted (the code index serves "
           "the file in pages); clients print it as the 500 error's text (pasted ollama/ollama#10920, "
           "continuedev/continue#12795, yuntianhe2014/Easy-RAG#9)"),
    Source("directml-oom", "PyTorch-DirectML (AMD/Intel GPUs on Windows)", "Could not allocate tensor with N bytes. There "
           "is not enough GPU video memory available!",
           note="torch-directml's allocator (closed source; microsoft/DirectML holds no source of it): no public source "
                "to cite; seen in pasted kijai/ComfyUI-HunyuanVideoWrapper#211"),
    Source("slurm-mem-limit", "Slurm (jobacct_gather polling)", "Job N exceeded memory limit (USED > LIMIT), being "
           "killed", "SchedMD/slurm", "src/interfaces/jobacct_gather.c", 889, "284c3b95f08a2dc2478499837b03355e1b9c5c75",
           "jobacct_gather_handle_mem_limit's error('%ps exceeded memory limit (...), being killed') before "
           "_acct_kill_step, and the same with 'virtual memory' after it (older releases: "
           "src/common/slurm_jobacct_gather.c); its 'Exceeded step memory limit at some point.' alone is a warning of "
           "a step that may have finished (pasted chaos/slurm#54) and is not read"),
    Source("win-paging-file", "Windows (Python's OSError)", "[WinError 1455] The paging file is too small for this "
           "operation to complete",
           note="the system message of Win32 error 1455, ERROR_COMMITMENT_LIMIT (closed source), as Python's OSError "
                "prints it when loading torch's CUDA DLLs in each DataLoader worker fails; seen in pasted "
                "ultralytics/yolov5#11418, cszn/KAIR#127, WongKinYiu/yolov7#1036); the same text ends an ImportError "
                "when the DLL is imported rather than loaded ('DLL load failed while importing _C: The paging file is "
                "too small for this operation to complete.')"),
    Source("ray-oom", "Ray", "Task was killed due to the node running low on memory", "ray-project/ray",
           "python/ray/exceptions.py", note="OutOfMemoryError (the memory monitor's kill); line not counted"),
    Source("ray-memory-monitor-kill", "Ray", "4 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
           "crashed due to other reasons at node", "ray-project/ray", "src/ray/raylet/node_manager.cc",
           note="the raylet's periodic kill summary sent to the driver (node_manager.cc:3040-3277 across releases, as "
                "the pastes' prefixes show; doc/source/ray-core/scheduling/ray-oom-prevention.rst); line not counted; "
                "pasted flwrlabs/flower#2157, WM-PO/WMPO#3"),
    Source("k8s-evicted-memory", "Kubernetes", "The node was low on resource: memory. Container egg was using 5053216Ki, "
           "which exceeds its request of 0.", "kubernetes/kubernetes", "pkg/kubelet/eviction",
           note="the kubelet eviction manager's Evicted event and pod status message; its source was not read (wording "
                "as pasted in FederatedAI/KubeFATE#64 and kubernetes/kubernetes#112927); line not counted"),
    Source("ray-oom-advice", "Ray", "Refer to the documentation on how to address the out of memory issue: "
           "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html.", "ray-project/ray",
           "src/ray/raylet/node_manager.cc",
           note="the advice ending both the OutOfMemoryError text and the raylet summary; line not counted; pasted "
                "OpenRLHF/OpenRLHF#911 (only the kill message's tail survived the job CLI's truncation)"),
    Source("vllm-kv-too-small", "vLLM", "The model's max seq len (29000) is larger than the maximum number of tokens that "
           "can be stored in KV cache (23648).", "AmberLJC/vllm-0.6.1", "vllm/worker/worker.py", 503,
           "3cc5c8458bd2a2744b8392ab6aa311c645105655",
           "raise_if_cache_size_invalid's second ValueError (the first, :498, is vllm-kv-oom's 'No available memory for "
           "the cache blocks'): the blocks the profiled free memory allows hold fewer tokens than one max_model_len "
           "sequence (a snapshot of vllm-project/vllm v0.6.1, as tests/corpus/cited/index.json's vllm-kv-cache cites; "
           "pasted vllm-project/vllm#10517, QwenLM/Qwen3#295, basalam/product-catalog-generator#10)"),
    Source("vllm-kv-too-small-v1", "vLLM V1 engine", "To serve at least one request with the models's max seq len "
           "(32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.50 GiB).",
           "vllm-project/vllm", "vllm/v1/core/kv_cache_utils.py", None, "001cabc1be16a59a70d720ed61a13b678c060a18",
           "check_enough_kv_cache_memory (later _check_enough_kv_cache_memory)'s ValueError after its 'No available "
           "memory for the cache blocks' one; read by rule vllm-kv-too-small; line not counted (the code index serves "
           "the 66 kB file in pages; the pastes' frames name it at :699 to :778 across releases); early V1 releases "
           "wrote 'GB KV cache is' + 'needed, which is larger than the available KV Cache memory' (no space, capital C); "
           "pasted vllm-project/vllm#34076, SergiioB/intel-arc-pro-b70-inference-cookbook#4"),
    Source("vllm-kv-oom", "vLLM", "No available memory for the cache blocks", note="tests/corpus/cited/index.json "
           "(vllm-kv-cache) cites it: vllm/worker/worker.py:498 with its commit"),
    Source("sglang-kv-oom", "sglang", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. / "
           "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
           "sgl-project/sglang", "python/sglang/srt/model_executor/model_runner.py", None,
           "01cc04e2b5b01ce379698a3fee1bd17706e1d0ec",
           "init_memory_pool's RuntimeError when the profiled max_total_num_tokens is <= 0 (the weights leave the "
           "--mem-fraction-static budget no room for KV cache); later releases raise it from "
           "model_runner_kv_cache_mixin.py / pool_configurator.py MemoryPoolConfig.__post_init__ and, newest, the "
           "'Loaded weights leave no GPU memory for the KV cache' ValueError with the minimum viable fraction; line not "
           "counted (the code index serves the file by content); pasted sgl-project/sglang#4330 quotes it"),
    Source("batch-size-zero", "Hugging Face accelerate (Trainer auto_find_batch_size)", "RuntimeError: No executable batch "
           "size found, reached zero.", "huggingface/accelerate", "src/accelerate/utils/memory.py", 178,
           "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83",
           "find_executable_batch_size's decorator raises it when batch_size reaches 0; it halves the batch only when "
           "should_reduce_batch_size (:100) matches the error: ' out of memory.' (CUDA, HIP, XPU), "
           "'DefaultCPUAllocator: can't allocate memory', the HPU's PT_DEVMEM allocation failure -- and cuDNN's "
           "CUDNN_STATUS_NOT_SUPPORTED, which the code itself calls a SNAFU"),
    Source("cpu-alloc", "PyTorch (host)", "DefaultCPUAllocator: can't allocate memory", "pytorch/pytorch",
           "c10/core/impl/alloc_cpu.cpp", 85, "0803da8282cbd1bfea99f8bdd19f1dcf49a7ca0f",
           "alloc_cpu's CAFFE_ENFORCE after posix_memalign (Linux); the Android/Windows branches' 'not enough "
           "memory: you tried to allocate' are at :67 and :78"),
    Source("th-buy-ram", "Lua torch7; PyTorch < 1.5 (aten/src/TH)", "$ Torch: not enough memory: you tried to allocate NGB. "
           "Buy new RAM!", "torch/torch7", "lib/TH/THGeneral.c", 270, "814ea4afd6beb110705d2456de03876841fcf1fd",
           "THAlloc's THError when malloc fails (and THRealloc's 'you tried to reallocate' at :298); PyTorch carried the "
           "same TH code until 1.5 ('at ..\\aten\\src\\TH\\THGeneral.cpp:201', pasted CETC-TFAI/MaCA#20); the GB figure is "
           "size/2^30 rounded down, so '0GB' is a request below 1 GiB"),
    Source("tf-pinned-host-oom", "TensorFlow (GPU builds)", "could not allocate pinned host memory of size: N",
           "tensorflow/tensorflow", "tensorflow/core/common_runtime/gpu/gpu_host_allocator.h", 44,
           "ac960b0c6063fd1b847948ed0d0b1aa411cfe8ee",
           "GpuHostAllocator::Alloc's LOG(WARNING) when the stream executor's HostMemoryAllocate (page-locked host "
           "memory for DMA) returns null; older releases print it from gpu/pool_allocator.h:195 and later ones from "
           "device/device_host_allocator.h (pasted rishizek/tensorflow-deeplab-v3-plus#8, talmolab/sleap#2001)"),
    Source("container-oomkilled", "Kubernetes / containerd / Docker", "Reason:  OOMKilled (kubectl describe), reason: OOMKilled "
           "(pod yaml), \"OOMKilled\": true (docker inspect)", "containerd/containerd", "pkg/cri/server/helpers.go", 64,
           "4970bd6ea83ec6bb2746d65ba4f6d3cde2182eb9",
           "oomExitReason = \"OOMKilled\", the CRI plugin's exit reason for a container whose process the kernel's OOM "
           "killer ended (line counted by hand from the code index's copy), which kubectl describe prints as 'Reason:' "
           "of the container's state; docker inspect's State.OOMKilled is moby's flag for the same (pasted "
           "kubernetes/kubernetes#131530; 'Reason: Completed' of kubernetes/website#8210 stays quiet)"),
    Source("dataloader-killed", "PyTorch DataLoader", "DataLoader worker (pid N) is killed by signal: Killed",
           "pytorch/pytorch", "torch/csrc/DataLoader.cpp", 157, "03d4ef67a3b6390069b2c3cc55db0ae575aedbaa",
           "THPModule_errorIfAnyWorkerFails: 'DataLoader worker (pid ' ... ') is killed by signal: ' << strsignal "
           "(SIGKILL's is 'Killed'); torch/utils/data/_utils/signal_handling.py arms it"),
    Source("bare-killed", "bash", "Killed", note="bash's strsignal(SIGKILL) job report; generated corpus runs"),
    Source("colab-ram", "Google Colab", "Your session crashed after using all available RAM",
           note="source not read: Colab's front-end dialog (closed source); seen quoted in pasted PV-Lab/FTCP#8"),
    Source("zh-bare-killed", "bash under a zh_CN locale", "已杀死", "bminor/glibc", "po/zh_CN.po", None,
           "019d850902a34eb68cd83e3edd8bb19f4aafb58c",
           "glibc's Chinese translation of strsignal(SIGKILL)'s 'Killed' (msgid for sysdeps/generic/siglist.h:36, "
           "msgstr '已杀死'; the .po's own line not counted -- the code index serves it in pages), which bash prints "
           "for a child killed by SIGKILL; seen in pasted danijar/dreamerv3#203"),
    Source("elastic-sigkill", "torch.distributed.elastic", "Signal 9 (SIGKILL) received by PID N",
           "pytorch/pytorch", "torch/distributed/elastic/multiprocessing/api.py", note="generated corpus runs"),
    Source("exitcode-9", "torchrun", "exitcode  : -9", "pytorch/pytorch",
           "torch/distributed/elastic/multiprocessing/errors/__init__.py", note="ChildFailedError's report; "
           "generated corpus runs"),
    Source("dmesg-oom", "Linux kernel", "Out of memory: Kill(ed) process N (comm)", "torvalds/linux", "mm/oom_kill.c",
           842, "c797bc88f77b51c4ba0b5d782b8284c7ed0233bc",
           "oom_kill_process's pr_err('%s: Kill process %d (%s) score %u or sacrifice child') with message 'Out of "
           "memory'; the victim line pr_err('Killed process %d (%s) total-vm:...') at :898 (this 4.x version; "
           "5.x+ print 'Out of memory: Killed process' in __oom_kill_process)"),
    Source("oom-kill", "Linux kernel", "oom-kill:constraint=...,task=...,pid=...", "torvalds/linux", "mm/oom_kill.c",
           note="dump_oom_summary (kernel 5.0+); the version the code index serves (c797bc8, 4.x) predates it and "
                "the repository is over the fetch limit: line not counted; seen in pasted dmesg excerpts"),
    Source("oom-invoked", "Linux kernel", "X invoked oom-killer:", "torvalds/linux", "mm/oom_kill.c", 409,
           "c797bc88f77b51c4ba0b5d782b8284c7ed0233bc",
           "dump_header's pr_warn('%s invoked oom-killer: gfp_mask=%#x(%pGg), nodemask=')"),
    Source("srun-oom", "Slurm (srun)", "srun: error: NODE: task N: Out Of Memory", "SchedMD/slurm", "src/srun/launch.c",
           377, "284c3b95f08a2dc2478499837b03355e1b9c5c75",
           "error(\"%s: %s %s: Out Of Memory\", hosts, task_str, tasks) when the task's status is SIG_OOM, in place of "
           "'Exited with exit code'; pasted open-mmlab/mmpretrain#473, snakemake/snakemake-executor-plugin-slurm#371"),
    Source("pbs-job-killed", "PBS / Torque (pbs_mom)", "=>> PBS: job killed: mem 2097152kb exceeded limit 1048576kb",
           "adaptivecomputing/torque", "src/resmom/mom_main.c", 5845, "34ff845417cc0348dfe0a61a491e5e0f4adf6ef4",
           "sprintf(kill_msg, \"=>> PBS: job killed: %s\\n\", log_buffer) with the limit message of "
           "src/resmom/linux/mom_mach.c:2635 ('vmem %llu exceeded limit %lu') or mom_main.c:3864 ('%s job total %lu %s "
           "exceeded limit %lu %s'); openpbs/openpbs src/resmom/mom_main.c:8831 and :5972/:5987 at cd7ab5ed the same; "
           "walltime/cput kills are read as a stopped run (host_kills.pbs_job_killed)"),
    Source("lsf-term", "IBM Spectrum LSF", "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.",
           note="LSF is closed source: its documented termination reasons (lsf_admin/termination_reasons_lsf.html, "
                "TERM_MEMLIMIT 'Job killed after reaching LSF memory usage limit') and job reports pasted in "
                "wheaton5/souporcell#20, BEFH/snakemake-executor-plugin-lsf#4; other TERM_ reasons are a stopped run"),
    Source("systemd-oom-kill", "systemd / systemd-oomd", "UNIT: A process of this unit has been killed by the OOM killer. "
           "| Failed with result 'oom-kill'. | Killed /CGROUP due to memory pressure for ...", "systemd/systemd",
           "src/oom/oomd-manager.c",
           note="systemd-oomd's log_notice('Killed %s due to memory pressure for %s being %lu.%02lu%% > ...') seen "
                "through the code index (path and line not counted: the repository is over the fetch limit); the "
                "unit lines are src/core/unit.c's and the service result string's, not re-read -- wording as journal "
                "lines quoted in public repositories show it"),
    Source("oom-reaper", "Linux kernel", "oom_reaper: reaped process N (comm), now anon-rss:0kB, ...", "0day-ci/linux",
           "mm/oom_kill.c", note="oom_reap_task_mm's pr_info at 00703194cb73bc45de67101d9ff57ccc8f77cd7d (a mirror of "
           "mainline; line not counted -- the code index serves the file in pages); it reaps only OOM-killer victims"),
    Source("k8s-oomkilled-status", "Kubernetes (kubectl get pods)", "NAME  0/1  OOMKilled  4 (57s ago)  2m40s",
           note="kubectl's STATUS column shows a container's terminated reason -- the runtime's OOMKilled "
                "(container-oomkilled's row); kubectl's printer not re-read; pasted open-edge-platform/geti_v2#146, "
                "hmcts/cnp-flux-config#28772"),
    # -- round 12 (k13oomsrc): wordings read in their sources
    Source("npu-acl-oom", "Ascend NPU (torch_npu over CANN)", "NPU function error: ..., error code is 207018 / [Error]: The "
           "memory on the device is exhausted. / EL0004: ... Failed to allocate memory.", "Ascend/pytorch",
           "torch_npu/csrc/core/npu/NPUErrorCodes.h", 387, "9e73e708ab9350d203475609f36f8a43f6a0c2ab",
           "the ACL error table's text for 207018 (ACL_ERROR_RT_MEMORY_ALLOCATION's device-memory code), which "
           "NPU_CHECK_ERROR (torch_npu/csrc/core/npu/NPUException.h:185-198) appends after ', error code is N'; isCannOOM "
           "(NPUException.cpp:426-436) turns a message holding CANN's 'EL0004' or 'Failed to allocate' into "
           "OutOfMemoryError; the caching allocator's own 'NPU out of memory. Tried to allocate' (NPUCachingAllocator.cpp:1377, "
           "'(NPU N; ... total capacity; ... already allocated; ... current active; ... free; ...') is other-accel-oom's"),
    Source("vulkan-oom", "Vulkan (ggml/llama.cpp, ncnn, ...)", "ggml_vulkan: Device memory allocation of size N failed. / "
           "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", "ggml-org/ggml",
           "src/ggml-vulkan/ggml-vulkan.cpp", 3608, "d99724f2b141fed9e1a9f402213506c081433465",
           "ggml_vk_create_buffer_device's catch of vk::SystemError prints the size line, then 'ggml_vulkan: ' << e.what() "
           "(:3609), Vulkan-Hpp's '<call>: ErrorOutOfDeviceMemory' (vk::to_string of VK_ERROR_OUT_OF_DEVICE_MEMORY, whose "
           "exception class is vk::OutOfDeviceMemoryError; Vulkan-Hpp's header not read here, the names are the "
           "registry's); ErrorOutOfHostMemory is the host-memory twin"),
    Source("cuda-check-oom", "CTranslate2 (faster-whisper, WhisperX); DGL / MXNet mshadow / TVM (dmlc CUDA_CALL)",
           "RuntimeError: CUDA failed with error out of memory / Check failed: e == cudaSuccess || e == "
           "cudaErrorCudartUnloading: CUDA: out of memory", "OpenNMT/CTranslate2", "src/cuda/utils.h", 72,
           "0d8bcd362ac75ef860ef161d6f0efad0ae439ff0",
           "CTranslate2's CUDA_CHECK: THROW_RUNTIME_ERROR(\"CUDA failed with error \" + cudaGetErrorString(code)); dmlc's "
           "CUDA_CALL, CHECK(e == cudaSuccess || e == cudaErrorCudartUnloading) << \"CUDA: \" << cudaGetErrorString(e), "
           "is at dmlc/dgl src/runtime/cuda/cuda_common.h:94 @ 3d16000b4170fa741ed9e9667f22ba84d3493026"),
    Source("opencv-oom", "OpenCV", "cv2.error: OpenCV(4.x) .../alloc.cpp:73: error: (-4:Insufficient memory) Failed to "
           "allocate N bytes in function 'OutOfMemoryError'", "opencv/opencv", "modules/core/src/alloc.cpp", None,
           "127d6649a1c83397bf42799ac807af41aa507b30",
           "OutOfMemoryError(size): CV_Error_(CV_StsNoMem, (\"Failed to allocate %lu bytes\", ...)) when fastMalloc's "
           "malloc returns null (this old version's line not counted; the code index served it); StsNoMem is -4, whose "
           "description cv::Exception prints as '(-4:Insufficient memory)'"),
    Source("rust-alloc-failed", "Rust std (tokenizers, safetensors, polars, ... extensions)", "memory allocation of N "
           "bytes failed", "rust-lang/rust", "library/std/src/alloc.rs", None, "00e208e3dc795f5301a41b99a26981383dc66e79",
           "default_alloc_error_hook prints 'memory allocation of {} bytes failed' and rust_oom then calls "
           "process::abort (so the shell prints 'Aborted (core dumped)' after it); line not counted (the code index "
           "serves the file in pages)"),
    Source("py-fatal-memoryerror", "CPython", "Fatal Python error: _PyErr_NormalizeException: Cannot recover from "
           "MemoryErrors while normalizing exceptions.",
           note="Python/errors.c _PyErr_NormalizeException's Py_FatalError when a MemoryError recurs past "
                "Py_NORMALIZE_RECURSION_LIMIT while an exception is normalised (read in the code index's copy, which "
                "names no commit; CPython's test_exceptions asserts the 'Fatal Python error: "
                "_PyErr_NormalizeException: ' prefix of 3.9+)"),
    Source("loky-sigkill", "joblib / loky", "TerminatedWorkerError: A worker process managed by the executor was "
           "unexpectedly terminated. ... The exit codes of the workers are {SIGKILL(-9)}", "joblib/loky",
           "loky/process_executor.py", 721, "b153e01c653de3f1d2f8abb602036d5acbff2565",
           "the executor-management thread's TerminatedWorkerError names each dead worker's exit code, formatted "
           "'{NAME(code)}' by _format_exitcodes (loky/backend/utils.py:157); SIGKILL(-9) is the kernel OOM killer's "
           "signal, and the message itself names 'an excessive memory usage' as a cause; a SIGSEGV(-11) stays a crash"),
    Source("dask-memory-budget", "dask.distributed (nanny)", "Worker tcp://... (pid=N) exceeded 95% memory budget. "
           "Restarting...", "dask/distributed", "distributed/worker_memory.py", 412,
           "40fcd99a8cd41c39071a16a546e93a9298f1b64d",
           "NannyMemoryManager.memory_monitor: past memory_terminate_fraction (distributed.worker.memory.terminate, "
           "default 0.95) of the memory limit it logs this warning and kills the worker process; the worker's own "
           "'Unmanaged memory use is high' / pausing warnings are not read"),

)
