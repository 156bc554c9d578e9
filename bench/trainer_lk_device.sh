#!/usr/bin/env bash
# One device call for issue 23's last round (the loss's logits pass): the Triton kernel's
# tests on CUDA, the isolated chunk probe, then bench/trainer_device.sh with the eager
# micro phase (the MFU formula's FLOP per token) and today's loss pass beside the Triton one
# end to end (plus any extra phases named in LK_EXTRA, e.g. ",lk-budget"), and the decode-
# measured accept_len of the Triton run's final checkpoint. Everything lands in $OUT.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
test -f trainer/loss_kernel.py || { echo "not this branch's tree"; git log -1 --oneline; exit 3; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/trainer/test_loss_kernel.py 2>&1 | tee "$OUT/pytest.log"
[ "${LK_PROBE:-1}" = 1 ] && timeout 120 python3 bench/trainer_loss_probe.py 2>&1 | tee "$OUT/probe.jsonl"
BENCH_TIMEOUT_S=${LK_BENCH_S:-380} BENCH_BUDGET_S=$(( ${LK_BENCH_S:-380} - 10 )) BUSY_AT_S=150 \
  bash bench/trainer_device.sh --only "micro-eager,loss-kernel${LK_EXTRA:-}" --steps ${LK_STEPS:-45}
timeout 90 python3 -m trainer.eval_decode /tmp/b/run-lk-triton-1gpu --prompts /tmp/b/data-bench-1b \
  --num-prompts 16 --max-new-tokens 64 --json 2>&1 | tee "$OUT/eval_decode.json"
rm -f "$OUT/smi.tar"
