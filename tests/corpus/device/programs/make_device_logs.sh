#!/bin/bash
# Make the device corpus (tests/corpus/device/) on one CUDA GPU: every scenario's
# stdout+stderr together, as `cmd >log 2>&1` holds them, into logs/NAME.log; each
# scenario's exit status, seconds and command line into meta.txt; versions and
# nvidia-smi readings beside them. Everything is packed into $OUT/device-logs.tgz after
# each scenario, so what ran comes back even if the call is cut short.
#
#   bash make_device_logs.sh [SECTION...]   (as root on the GPU machine; SECTION is
#       failures, healthy, smi or more; default: all of them. The programs are copied to
#       /src/tests/corpus/device/programs and run from /src, so the logs' paths read as
#       the committed tree's.)
set -u
SECTIONS=${*:-failures healthy smi more}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/devcorpus
SRC=${SRC:-/src}
rm -rf "$W" && mkdir -p "$W/logs" "$W/smi" "$SRC/tests/corpus/device/programs"
cp "$HERE"/*.py "$HERE"/*.sh "$SRC/tests/corpus/device/programs/"
cd "$SRC" || exit 1
# torchrun is the console script beside the python3 that holds torch
PATH=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))'):$PATH
P=tests/corpus/device/programs
ulimit -c 0
export PYTHONUNBUFFERED=1 COLUMNS=120 OMP_NUM_THREADS=1
# NVLink multicast stays off on the lent machines (KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-540}

pack() { tar czf "$OUT/device-logs.tgz" -C "$W" . ; }

left_s() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

# run NAME CAP_S CMD...  -- CMD under `timeout` (SIGTERM, then SIGKILL 5 s on), at most CAP_S and what the budget has left
run() {
    local name=$1 cap=$2; shift 2
    local left; left=$(left_s)
    if (( left < 15 )); then echo "$name|skipped|0|$*" >> "$W/meta.txt"; return; fi
    (( cap > left )) && cap=$left
    local t0; t0=$(date +%s%N)
    timeout -k 5 "$cap" "$@" > "$W/logs/$name.log" 2>&1 < /dev/null
    local rc=$?
    echo "$name|$rc|$(( ($(date +%s%N) - t0) / 1000000 )) ms|$*" >> "$W/meta.txt"
    echo "== $name rc=$rc"
    pack
}

# hang NAME WAIT_S AFTER_S CMD...  -- CMD in the background; once its log holds the
# watchdog's message (or WAIT_S passed), AFTER_S more seconds, then SIGKILL, as an operator
# would end a hung run.
hang() {
    local name=$1 wait_s=$2 after_s=$3; shift 3
    local log=$W/logs/$name.log t0; t0=$(date +%s%N)
    "$@" > "$log" 2>&1 < /dev/null &
    local pid=$! seen=no
    for _ in $(seq 1 "$wait_s"); do
        if grep -q "Watchdog caught collective operation timeout" "$log"; then seen=yes; break; fi
        kill -0 $pid 2>/dev/null || break
        sleep 1
    done
    sleep "$after_s"
    local alive=no; kill -0 $pid 2>/dev/null && alive=yes
    kill -KILL $pid 2>/dev/null; wait $pid; local rc=$?
    echo "$name|$rc (watchdog message seen: $seen; alive when killed: $alive)|$(( ($(date +%s%N) - t0) / 1000000 )) ms|$*" >> "$W/meta.txt"
    echo "== $name rc=$rc seen=$seen alive=$alive"
    pack
}

{
    date -u
    hostname
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))'
    python3 -c 'import cupy; print("cupy", cupy.__version__)'
    python3 --version
    uname -r
} > "$W/versions.txt" 2>&1
pack

if want failures; then
# -- NCCL watchdog timeouts (a world of one; the GPU stuck in one long kernel) -------------
run nccl-watchdog-abort 100 python3 $P/nccl_run.py straggler --timeout-s 10 --busy-s 60
hang nccl-watchdog-hang 60 10 env TORCH_NCCL_ASYNC_ERROR_HANDLING=0 python3 $P/nccl_run.py straggler --timeout-s 10 --busy-s 120
run torchrun-nccl-watchdog 110 torchrun --standalone --nproc-per-node 1 $P/nccl_run.py straggler --timeout-s 10 --busy-s 60
# -- CUDA OOM ------------------------------------------------------------------------------
run gpu-oom 90 python3 $P/gpu_train.py oom
run torchrun-gpu-oom 100 torchrun --standalone --nproc-per-node 1 $P/gpu_train.py oom --record
# -- device-side asserts, an illegal address ------------------------------------------------
run gpu-assert-label 45 python3 $P/gpu_train.py assert-label
run gpu-assert-label-blocking 45 env CUDA_LAUNCH_BLOCKING=1 python3 $P/gpu_train.py assert-label
run gpu-assert-index 45 python3 $P/gpu_train.py assert-index
run gpu-illegal-address 45 python3 $P/gpu_train.py illegal-address
fi
if want healthy; then
# -- healthy, with tempting words -----------------------------------------------------------
run gpu-healthy-memory-summary 60 python3 $P/gpu_train.py healthy
run nccl-healthy-debug 60 env NCCL_DEBUG=INFO TORCH_CPP_LOG_LEVEL=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL python3 $P/nccl_run.py healthy --timeout-s 10
run torchrun-nccl-healthy-debug 60 env NCCL_DEBUG=INFO torchrun --standalone --nproc-per-node 1 $P/nccl_run.py healthy --timeout-s 10
fi
if want failures; then
# -- two ranks on one GPU -------------------------------------------------------------------
run torchrun-nccl-same-gpu 60 torchrun --standalone --nproc-per-node 2 $P/nccl_run.py healthy --same-gpu
fi

# -- nvidia-smi while a process holds memory and keeps the GPU busy --------------------------
Q=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks_event_reasons.active
if want smi && (( $(left_s) > 40 )); then
    nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits > "$W/smi/query-gpu-idle.csv" 2>&1
    python3 $P/gpu_holder.py 100 > "$W/smi/holder.log" 2>&1 &
    HOLDER=$!
    for _ in $(seq 1 30); do grep -q busy "$W/smi/holder.log" && break; sleep 1; done
    sleep 5
    nvidia-smi > "$W/smi/nvidia-smi-busy.txt" 2>&1
    nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits > "$W/smi/query-gpu-busy.csv" 2>&1
    nvidia-smi --query-gpu=$Q --format=csv > "$W/smi/query-gpu-busy-units.csv" 2>&1
    nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits > "$W/smi/query-apps-busy.csv" 2>&1
    echo "holder pid $HOLDER" >> "$W/smi/holder.log"
    kill -KILL $HOLDER; wait $HOLDER 2>/dev/null
    pack
fi
if want more; then
# -- more healthy runs (a second call): the loss-scale search, a slow step within the timeout,
# Lightning on the GPU, inductor's autotuning ----------------------------------------------
run gpu-amp-scale-search-healthy 45 python3 $P/gpu_more.py amp-healthy
run nccl-slow-step-healthy 60 python3 $P/nccl_run.py straggler --timeout-s 30 --busy-s 5
run lightning-gpu-amp-healthy 90 python3 $P/lightning_gpu.py
run gpu-compile-autotune-healthy 150 python3 $P/gpu_more.py compile-healthy
fi
echo "total $(( $(date +%s) - START )) s" >> "$W/meta.txt"
pack
cat "$W/meta.txt"
