#!/usr/bin/env bash
# One device call for issue 23's fifth round. Everything lands in $OUT.
#  1. (I23_BENCH=1) bench/trainer_device.sh: the eager micro phase (the MFU formula's FLOP
#     per token) and `lk-cdt`: the Triton run beside it with inductor's coordinate-descent
#     tuning, LK_REPEAT times (A B A B);
#  2. (I23_EVAL=1) why the standalone estimate of trainer.eval_decode said 1.000 on the GPU
#     where the run said 4.583: a tiny run on CUDA and a bench-1b eager run, each with a
#     held-out eval, then bench/trainer_eval_probe.py on each one's final checkpoint
#     (I23_TINY=0 I23_PROBE=0: only the bench-1b run, I23_EVAL_STEPS long, and the tool on it);
#  3. I23_PHASES=micro-eager,streams: the e2e runs traced (--profile-steps), and the first
#     one's trace copied back.
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b
test -f bench/trainer_eval_probe.py || { echo "not this branch's tree"; exit 3; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
if [ "${I23_BENCH:-1}" = 1 ]; then
  BENCH_TIMEOUT_S=${I23_BENCH_S:-300} BENCH_BUDGET_S=$(( ${I23_BENCH_S:-300} - 10 )) BUSY_AT_S=120 \
    bash bench/trainer_device.sh --only "${I23_PHASES:-micro-eager,lk-cdt}" --steps ${I23_STEPS:-45}
fi
if [ "${I23_EVAL:-1}" = 1 ]; then
  { [ "${I23_TINY:-1}" = 1 ] && timeout 100 python3 -m trainer --config tiny --device cuda --data /tmp/e/data-tiny --synthetic-samples 400 \
      --run-dir /tmp/e/run-tiny --steps 80 --eval-fraction 0.05 --eval-every 80 --log-every 10 2>&1 | tail -4
    [ "${I23_TINY:-1}" = 1 ] && timeout 60 python3 bench/trainer_eval_probe.py /tmp/e/run-tiny /tmp/e/data-tiny --eval-fraction 0.05 --rows 8
    D=/tmp/b/data-bench-1b; [ -d $D ] || D=/tmp/e/data-bench-1b
    S=${I23_EVAL_STEPS:-40}
    timeout 200 python3 -m trainer --config bench-1b --device cuda --data $D --synthetic-samples 1500 \
      --run-dir /tmp/e/run-1b --steps $S --eval-fraction 0.01 --eval-every $S --log-every $(( S < 10 ? S : 10 )) 2>&1 | tail -4
    [ "${I23_PROBE:-1}" = 1 ] && timeout 150 python3 bench/trainer_eval_probe.py /tmp/e/run-1b $D --eval-fraction 0.01 --rows 4
    # the tool with the run's decode settings, everything else from the checkpoint
    timeout 150 python3 -m trainer.eval_decode /tmp/e/run-1b --prompts $D --json --num-prompts 4 \
      --max-new-tokens 32 --max-prompt-tokens 8160
  } 2>&1 | tee "$OUT/eval-probe.log"
  grep -h eval_accept /tmp/e/run-*/metrics.jsonl > "$OUT/eval-metrics.jsonl" 2>/dev/null
fi
# --only streams: each run's stream summary is in trainer-bench.jsonl; the first run's trace
# comes back whole when it fits (the device tool returns files of up to 16 MiB)
T=$(ls /tmp/b/run-lk-triton-1gpu/profile/trace-*.json.gz 2>/dev/null | head -1)
[ -n "$T" ] && [ "$(stat -c %s "$T")" -lt 16000000 ] && cp "$T" "$OUT/trace-lk-triton-1gpu.json.gz"
rm -f "$OUT/smi.tar"
