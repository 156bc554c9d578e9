#!/usr/bin/env bash
# One device call for bench/trainer.py: every measurement in one go, each phase under its own
# hard timeout inside --budget-s (bench/trainer.py), results appended to
# $OUT/trainer-bench.jsonl as they land (a call cut short keeps what it measured), plus raw
# nvidia-smi captures (idle and under load) for the controller's parser tests. The split
# phases use SPLIT_TARGET_DEVICES / SPLIT_DRAFTER_DEVICES (default 0 / 1; e.g. 0 / 1,2 on a
# machine of 3+ GPUs, to balance the stages). Writes into
# $OUT: bench.log, trainer-bench.jsonl, trainer-bench.json, logs.tar, smi.tar.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/smi /tmp/b
Q=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks_event_reasons.active
cap() {  # cap NAME ARGS...: stdout, stderr and exit code of one nvidia-smi call
  local name=$1; shift
  timeout 20 nvidia-smi "$@" >/tmp/smi/$name.out 2>/tmp/smi/$name.err; echo $? >/tmp/smi/$name.rc
}
cap idle-query-gpu-noheader-nounits --query-gpu=$Q --format=csv,noheader,nounits
cap idle-query-gpu-csv --query-gpu=$Q --format=csv
cap list-gpus -L
cap unknown-field --query-gpu=index,not_a_field --format=csv,noheader,nounits
cap idle-compute-apps --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
cap plain
cap topo topo -m
python3 -c "import torch, sys; print(sys.version, torch.__version__, torch.cuda.device_count())"
( sleep ${BUSY_AT_S:-200}
  cap busy-query-gpu-noheader-nounits --query-gpu=$Q --format=csv,noheader,nounits
  cap busy-query-gpu-csv --query-gpu=$Q --format=csv
  cap busy-compute-apps --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
  cap busy-compute-apps-header --query-compute-apps=pid,gpu_uuid,used_memory --format=csv ) &
timeout -k 5 ${BENCH_TIMEOUT_S:-500} python3 bench/trainer.py --out /tmp/b --budget-s ${BENCH_BUDGET_S:-480} \
  --jsonl "$OUT/trainer-bench.jsonl" "$@" 2>&1 | tee "$OUT/bench.log"
cp /tmp/b/trainer-bench.json "$OUT/" 2>/dev/null
wait
tar -C /tmp/b -cf "$OUT/logs.tar" --exclude='data-*' --exclude='checkpoints' --exclude='trace-*.json.gz' .
tar -C /tmp -cf "$OUT/smi.tar" smi
