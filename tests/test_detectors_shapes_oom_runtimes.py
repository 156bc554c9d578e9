"""OOM wordings the readers missed (issue 22, the OOM label; helper k12oom): onnxruntime's BFC
arena, vLLM V1's KV-cache check, sglang's memory pool, accelerate's batch-size finder giving up,
Habana's PT_DEVMEM pool, Cambricon's MLU allocator, MLX's malloc, and two host-memory wordings
the trigger words did not reach (std::bad_alloc re-raised by a binding, the paging file in an
ImportError). Each shape beside a healthy text that must stay quiet; oom_family.py cites where
each wording is printed."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final


def _oom(findings):
    return [f for f in findings if f.kind == "oom"]


def test_onnxruntime_bfc_arena_failing_to_allocate_is_an_oom():
    """The arena's status names no 'out of memory' (pasted DayBreak-u/chineseocr_lite#355,
    hacksider/Deep-Live-Cam#547); its INFO lines while extending stay quiet (pasted
    triton-inference-server/server#3776, microsoft/onnxruntime-genai#974)."""
    line = ("2021-07-08 01:27:55.7944269 [E:onnxruntime:, sequential_executor.cc:339 onnxruntime::SequentialExecutor"
            "::Execute] Non-zero status code returned while running Conv node. Name:'347_nchwc' Status Message: "
            "D:\\a\\_work\\1\\s\\onnxruntime\\core\\framework\\bfc_arena.cc:330 onnxruntime::BFCArena::"
            "AllocateRawInternal Failed to allocate memory for requested buffer of size 285081600")
    (f,) = _final([line])
    assert f.kind == "oom" and "onnxruntime" in f.summary and "271.9 MiB" in f.summary
    # the arena's own limit (gpu_mem_limit): bfc_arena.cc Extend's first status
    limit = ("onnxruntime::WaitNotificationFn) Available memory of 0 is smaller than requested bytes of 175657216")
    (g,) = _oom(_final([limit]))
    assert "memory limit" in g.summary
    healthy = [
        "2022-01-07 07:17:51.913839024 [I:onnxruntime:log, bfc_arena.cc:306 AllocateRawInternal] Extending BFCArena "
        "for Cuda. bin_num:9 (requested) num_bytes: 160000 (actual) rounded_bytes:160000",
        "2022-01-07 07:17:51.914845468 [I:onnxruntime:log, bfc_arena.cc:186 Extend] Extended allocation by 1048576 bytes.",
        "2022-01-07 07:17:51.914859897 [I:onnxruntime:log, bfc_arena.cc:192 Extend] Allocated memory at 0x7fa4c6800000 "
        "to 0x7fa4c6900000",
        "2024-10-13 13:05:56.3023229 [I:onnxruntime:Default, bfc_arena.cc:281 onnxruntime::BFCArena::Reserve] Reserving "
        "memory in BFCArena for Cpu size: 18874462",
    ]
    assert _kinds(_final(healthy)) == []


def test_vllm_v1_kv_cache_larger_than_available_is_an_oom():
    """vLLM V1's check_enough_kv_cache_memory (vllm/v1/core/kv_cache_utils.py); the line as
    pasted in vllm-project/vllm#34076 (the excerpt ends after the available memory). Its
    startup report of the KV cache it did fit stays quiet (pasted vllm-project/vllm#28228)."""
    line = ("(EngineCore_DP0 pid=1094) ValueError: To serve at least one request with the models's max seq len "
            "(262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache memory (3.18 GiB).")
    (f,) = _oom(_final([line]))
    assert "KV cache" in f.summary and "262144" in f.summary and "3.18 GiB is available" in f.summary
    # early V1 (vllm 0.7): 'GB KV cache is' + 'needed' glued, 'KV Cache' capitalised (the source's f-strings)
    early = ("ValueError: To serve at least one request with the models's max seq len (32768), (2.0 GB KV cache "
             "isneeded, which is larger than the available KV Cache memory (0.78 GB). Try increasing "
             "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    assert _kinds(_final([early])) == ["oom"]
    healthy = [
        "(Worker_TP0 pid=26347) INFO 11-06 10:51:48 [gpu_worker.py:349] Available KV cache memory: 2.30 GiB",
        "(EngineCore_DP0 pid=26283) WARNING 11-06 10:51:48 [kv_cache_utils.py:979] Add 1 padding layers, may waste at "
        "most 5.00% KV cache memory",
        "(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens",
        "(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1234] Maximum concurrency for 120,000 "
        "tokens per request: 2.48x",
    ]
    assert _kinds(_final(healthy)) == []


def test_sglang_memory_pool_with_no_room_for_kv_cache_is_an_oom():
    """sglang's init_memory_pool / MemoryPoolConfig (line as quoted in pasted sgl-project/sglang#4330)
    and the newer ValueError (wording from sglang's model_runner source, oom_family.py); the pool's
    own size report stays quiet (pasted vllm-project/vllm#21348, sgl-project/sglang#7691)."""
    (f,) = _oom(_final(["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]))
    assert "sglang" in f.summary and "mem-fraction-static" in f.summary
    newer = ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88. "
             "Raise --mem-fraction-static above 0.912 (minimum viable = 1 - available/pre = 0.9113).")
    assert _kinds(_final([newer])) == ["oom"]
    healthy = ["KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
               "[2025-07-02 07:41:58 DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
               "avail mem=21.73 GB, mem usage=166.59 GB.",
               "python3 -m sglang.launch_server --model /path/to/Qwen3-235B-A22B-FP8 --tp 4 --mem-fraction-static 0.93"]
    assert _kinds(_final(healthy)) == []


def test_accelerate_batch_size_finder_reaching_zero_is_an_oom():
    """find_executable_batch_size halves the batch on each OOM and raises this at 0
    (huggingface/accelerate src/accelerate/utils/memory.py:178; test line from that source).
    Its halving message and the flag's name alone are not a failure."""
    (f,) = _oom(_final(["RuntimeError: No executable batch size found, reached zero."]))
    assert "batch" in f.summary and "0" in f.summary
    healthy = ["Decreasing batch size to: 64", "  auto_find_batch_size: true",
               "trainer.train(auto_find_batch_size=True)"]
    assert _kinds(_final(healthy)) == []


def test_habana_pt_devmem_allocation_failure_is_an_oom():
    """The Gaudi bridge's device-memory pool (closed source; accelerate's should_reduce_batch_size
    names it the HPU OOM, memory.py:112; the test line is the one HabanaAI/vllm-fork's README
    quotes). The workspace form of the same family keeps its reading."""
    (f,) = _oom(_final(["RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for "
                        "size::939524096 (896)MB"]))
    assert "Gaudi" in f.summary and "PT_DEVMEM" in f.summary and "0.88 GiB" in f.summary
    (g,) = _oom(_final(["RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493510400 "
                        "failed!"]))
    assert "13.50 GiB" in g.summary
    assert _kinds(_final(["export PT_HPU_LAZY_MODE=1 PT_HPU_MAX_COMPOUND_OP_SIZE=1",
                          "hpu:0 memory allocated 12.3 GB"])) == []


def test_cambricon_mlu_out_of_memory_is_an_oom():
    """torch_mlu's caching allocator TORCH_CHECK_WITH(OutOfMemoryError, ...) (Cambricon/torch_mlu
    torch_mlu/csrc/framework/core/caching_allocator.cpp; test line from its older wording)."""
    line = ("RuntimeError: MLU out of memory. Tried to allocate 1.00 GiB (MLU 0; 15.74 GiB total capacity; "
            "14.00 GiB already allocated; 20.00 MiB free; 14.50 GiB reserved in total by PyTorch)")
    assert _kinds(_final([line])) == ["oom"]
    assert _kinds(_final(["torch.mlu.max_memory_allocated() = 14.1 GiB", "MLU 0 memory usage: 14.0 / 15.7 GiB"])) == []


def test_mlx_malloc_unable_to_allocate_is_an_oom():
    """MLX's malloc_or_wait (mlx/allocator.cpp:59 before 7b7e2352) and '[malloc]' after it
    (pasted ml-explore/mlx#63: a 9 GiB request on an 8 GB Mac, then zsh's abort). Its Metal
    resource-count limit is not memory and stays quiet."""
    text = ["8 GB", "9 GB",
            "libc++abi: terminating due to uncaught exception of type std::runtime_error: [malloc_or_wait] Unable to "
            "allocate 9663676416 bytes.",
            "zsh: abort      /opt/homebrew/bin/python3.10"]
    found = _final(text)
    assert _kinds(found) == ["crash", "oom"]
    assert "MLX" in _oom(found)[0].summary and "9.00 GiB" in _oom(found)[0].summary
    assert _kinds(_final(["RuntimeError: [malloc] Unable to allocate 48736917632 bytes."])) == ["oom"]
    assert "oom" not in _kinds(_final(["RuntimeError: [metal::malloc] Resource limit (499000) exceeded."]))


def test_std_bad_alloc_reraised_by_a_binding_is_a_host_oom():
    """pybind11 maps std::bad_alloc to MemoryError and torch's wrappers to RuntimeError, each
    with what() = 'std::bad_alloc' (test lines from those bindings' wording, oom_family.py).
    TensorFlow's 'exceeds 10% of system memory' warning stays quiet (pasted KevinDuarte/VideoCapsuleNet#10)."""
    for line in ("RuntimeError: std::bad_alloc", "MemoryError: std::bad_alloc"):
        (f,) = _oom(_final([line]))
        assert "bad_alloc" in f.summary, line
    assert _kinds(_final(["W tensorflow/core/framework/allocator.cc:107] Allocation of 1194393600 exceeds 10% of "
                          "system memory."])) == []


def test_the_paging_file_in_an_importerror_is_a_host_oom():
    """Windows' ERROR_COMMITMENT_LIMIT text when torch's DLLs are imported rather than loaded
    (the 'DLL load failed' form quoted in pasted daigo0927/pwcnet#4 and Spandan-Madan/Pytorch_fine_tuning_Tutorial#10)."""
    line = "ImportError: DLL load failed while importing _C: The paging file is too small for this operation to complete."
    (f,) = _oom(_final([line]))
    assert "paging file" in f.summary
    assert _kinds(_final(["Virtual memory: paging file size for all drives is system managed (40 GB)"])) == []


def test_the_driver_api_out_of_memory_of_torch_and_triton_is_an_oom_and_its_look_alikes_are_crashes():
    """cuGetErrorString's 'out of memory' behind torch's C10_CUDA_DRIVER_CHECK (c10/cuda/driver_api.h:16)
    and Triton's gpuAssert (third_party/nvidia/backend/driver.c:66); test lines from those sources.
    Triton's shared-memory OutOfResources and an illegal memory access are crashes, not OOMs."""
    for line in ("RuntimeError: CUDA driver error: out of memory", "RuntimeError: Triton Error [CUDA]: out of memory"):
        (f,) = _oom(_final([line]))
        assert f.summary.startswith("CUDA OOM"), line
    for line in ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: "
                 "65536. Reducing block sizes or `num_stages` may help.",
                 "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered"):
        assert _kinds(_final([line])) == ["crash"], line


def test_the_new_pastes_read_as_labelled():
    """The pasted logs of index-z: the ORT ones are OOMs (two with the ASGI/tornado traceback cut
    off after), the vLLM/mlc startup reports are healthy."""
    from pathlib import Path

    logs = Path(__file__).resolve().parent / "corpus" / "pasted" / "logs"
    read = {n: _kinds(_final((logs / f"{n}.log").read_text(encoding="utf-8").splitlines()))
            for n in ("hacksider_deep-live-cam-547", "daybreak-u_chineseocr_lite-355", "vllm-project_vllm-28228",
                      "aivrar_vllm-windows-build-4", "mlc-ai_mlc-llm-2026")}
    assert read == {"hacksider_deep-live-cam-547": ["oom"], "daybreak-u_chineseocr_lite-355": ["crash", "oom"],
                    "vllm-project_vllm-28228": [], "aivrar_vllm-windows-build-4": [], "mlc-ai_mlc-llm-2026": []}
