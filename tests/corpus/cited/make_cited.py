"""Fixtures for wordings only hardware or services we lack can print (ROCm, XLA/TPU,
vLLM on a GPU, fairseq/Megatron at scale). Each is a real healthy preamble from the
corpus (logs/plain-healthy-kv.log, made here) followed by the wording as the project's
source prints it; index.json says where each wording is in that source. Run:
`.venv/bin/python tests/corpus/cited/make_cited.py` (writes *.log and index.json)."""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRE = (HERE.parent / "logs" / "plain-healthy-kv.log").read_text().splitlines()[:12]

CITED = {
    "rocm-hip-oom": dict(cite=dict(repo="pytorch/pytorch", path="c10/cuda/CUDACachingAllocator.cpp", function="DeviceCachingAllocator::malloc (the OutOfMemoryError message)", line=1354, commit="001074d25084fdb87a799823e395a50f5ec044d3", note="code index copy (134,496 chars, read in 16,000-char pages, newlines counted): malloc begins at line 1198, TORCH_CHECK_WITH(OutOfMemoryError, ...) at 1351, the message's first literal ('CUDA out of memory. Tried to allocate ') at 1354; no USE_ROCM branch touches the message: a ROCm build hipifies c10/cuda, and the caffe2 mapping turns the word CUDA into HIP (hip_rewrite)", hip_rewrite=dict(repo="UofT-EcoSystem/Grape-MICRO56-Artifact (its copy of PyTorch, 2022-09-04; pytorch/pytorch's own snapshot is over the fetch limit)", path="torch/utils/hipify/cuda_to_hip_mappings.py", function="CAFFE2_SPECIFIC_MAPPINGS", line=8161, commit="0e8e9c0738803ad54ecdf35c5ae1bfb81c6d2d26", note="the entry CUDA -> HIP (API_CAFFE2, no word boundary); torch/utils/hipify/hipify_python.py there sends c10/cuda files through the caffe2 mappings (is_caffe2_gpu_file, line 615; the substitution, line 777); pytorch/pytorch's own copy at 006b3e67c188b7b0d27b543e9536076d6b389c85 (code index, 356,856 chars) has the same entry in CAFFE2_SPECIFIC_MAPPINGS, its line not counted")),
        framework="rocm", expect=["oom"], must=["HIP OOM on GPU 0"],
        source="PyTorch c10/cuda/CUDACachingAllocator.cpp OOM message ('out of memory. Tried to allocate ... GPU "
               "{device} has a total capacity of ...'), which hipify turns into 'HIP out of memory' on ROCm builds "
               "(torch/utils/hipify/cuda_to_hip_mappings.py maps CUDA->HIP)",
        lines=["torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
               "191.98 GiB of which 1.12 GiB is free. Of the allocated memory 180.1 GiB is allocated by PyTorch"]),
    "xla-resource-exhausted": dict(cite=dict(repo="zml/xla (a fork of openxla/xla; openxla/xla's own snapshot is over the fetch limit)", path="xla/stream_executor/integrations/tf_allocator_adapter.cc", function="MemoryAllocationError", line=96, commit="1e203b533f9702298d8b17ef1281e880132614bf", note="absl::ResourceExhaustedError at line 96, the words on lines 97-98; the same function is in openxla/xla at 370cfa8d30b2fdf224fabb57fc0263f6f14b07e0 (code index)"),
        framework="xla", expect=["oom"], must=["RESOURCE_EXHAUSTED"],
        source="XLA/TSL: the BFC allocator's status 'Out of memory while trying to allocate N bytes.' returned as "
               "absl::ResourceExhaustedError, printed by jaxlib as 'XlaRuntimeError: RESOURCE_EXHAUSTED: ...'",
        lines=["jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
               "17179869184 bytes."]),
    "vllm-kv-cache": dict(cite=dict(repo="AmberLJC/vllm-0.6.1 (a snapshot of vllm-project/vllm v0.6.1; vllm-project/vllm's own is over the fetch limit)", path="vllm/worker/worker.py", function="raise_if_cache_size_invalid", line=498, commit="3cc5c8458bd2a2744b8392ab6aa311c645105655"),
        framework="vllm", expect=["oom"], must=["KV cache"],
        source="vLLM KV-cache sizing: raise ValueError(\"No available memory for the cache blocks. Try increasing "
               "`gpu_memory_utilization` when initializing the engine.\") (code index id 37028035780, near the end "
               "of the file, char 20471 of 21078)",
        lines=["(VllmWorker rank=0 pid=4242) ValueError: No available memory for the cache blocks. Try increasing "
               "`gpu_memory_utilization` when initializing the engine."]),
    "fairseq-min-scale": dict(cite=dict(repo="facebookresearch/fairseq", path="fairseq/optim/dynamic_loss_scaler.py", function="DynamicLossScaler.check_overflow", line=63, commit="3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99", note="the overflow NOTE line: fairseq/trainer.py:1013 (`NOTE: gradient overflow detected, ignoring gradient, ` + the OverflowError text `setting loss scale to: ` of dynamic_loss_scaler.py:70)"),
        framework="fairseq", expect=["nan"], must=["minimum"],
        source="fairseq fp16 optimizer (fairseq/optim/fp16_optimizer.py, clip_grad_norm): raise FloatingPointError("
               "'Minimum loss scale reached ({}). Your loss is probably exploding. ...') (code index id 43391932638, "
               "char 3899)",
        lines=[f"| WARNING | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale "
               f"to: {2.0 ** (7 - i)}" for i in range(12)] +
              ["FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try "
               "lowering the learning rate, using gradient clipping or increasing the batch size."]),
    "fairseq-scale-search-healthy": dict(cite=dict(repo="facebookresearch/fairseq", path="fairseq/optim/dynamic_loss_scaler.py", function="DynamicLossScaler.update / check_overflow", line=32, commit="3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99", note="the scale grows every scale_window updates (line 32) and halves on overflow (lines 37-38, _decrease_loss_scale); the NOTE line is fairseq/trainer.py:1013"),
        framework="fairseq", expect=[],
        source="fairseq/optim/dynamic_loss_scaler.py: the scale halves on overflow and grows every scale_window "
               "updates; a few halvings at start-up are its normal search",
        lines=[f"| WARNING | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale "
               f"to: {2.0 ** (7 - i)}" for i in range(3)] + [f"epoch 001:  {i * 10} / 500 loss=7.1{i} "
                                                            f"loss_scale=16 wps=41234" for i in range(1, 10)]),
    "megatron-nan-iterations": dict(cite=dict(repo="NVIDIA/Megatron-LM", path="megatron/training/training.py", function="training_log", line=3641, commit="d98e8a64ddf34856e74b24714e3bedb2f5a39553", note="skipped iterations at line 3638, loss scale at 3631"),
        framework="megatron", expect=["nan"], must=["NaN iterations"],
        source="Megatron-LM megatron/training/training.py training_log: ' number of skipped iterations: {:3d} |' "
               "and ' number of nan iterations: {:3d} |'",
        lines=[f" iteration      {i}0/   50000 | consumed samples: {i * 5120} | lm loss: NaN | loss scale: 1.0 | "
               f"number of skipped iterations:   1 | number of nan iterations:   1 |" for i in range(1, 4)]),
    "megatron-healthy": dict(cite=dict(repo="NVIDIA/Megatron-LM", path="megatron/training/training.py", function="training_log", line=3638, commit="d98e8a64ddf34856e74b24714e3bedb2f5a39553", note="loss scale 3631, grad norm 3633, nan iterations 3641"),
        framework="megatron", expect=[],
        source="Megatron-LM megatron/training/training.py training_log (same format, healthy counts)",
        lines=[f" iteration      {i}0/   50000 | consumed samples: {i * 5120} | lm loss: 3.21{i}E+00 | loss scale: "
               f"65536.0 | grad norm: 0.91{i} | number of skipped iterations:   0 | number of nan iterations:   0 |"
               for i in range(1, 9)]),
    "mpirun-signal": dict(cite=dict(repo="open-mpi/ompi", path="orte/tools/orterun/help-orterun.txt", function="[orterun:proc-aborted-signal] help text (v4.1.8)", line=140, commit="ea8f4d03089018f08451f42f2cfa2467570f395e", note="tag v4.1.8; Open MPI 5 moved it to open-mpi/prrte src/mca/schizo/prte/help-prun.txt:537 (7b9619b1d102a515be8c2d1f4825fd7df9a91480)"),
        framework="mpirun", expect=["crash"], must=["rank 1", "signal 11"],
        source="Open MPI orte/mca/errmgr help text help-errmgr-base.txt [normal-termination-but]/[signal]: "
               "'%s noticed that process rank %s with PID %s on node %s exited on signal %d (%s).'",
        lines=["[1,0]<stdout>:step=30 loss=2.13", "----------------------------------------------------------------",
               "mpirun noticed that process rank 1 with PID 0 on node gpu07 exited on signal 11 (Segmentation "
               "fault).", "----------------------------------------------------------------"]),
}


def main() -> None:
    index = {}
    for name, spec in CITED.items():
        (HERE / f"{name}.log").write_text("\n".join(PRE + spec["lines"]) + "\n")
        index[name] = {k: v for k, v in spec.items() if k != "lines"}
        index[name]["heldout"] = False
    (HERE / "index.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
