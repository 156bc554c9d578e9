#!/usr/bin/env bash
# Issue 7 on a lent GPU machine (2x H200 here; 8 GPUs where lent): the trainer deployed with
# `dfctl deploy playbooks/gpu-local.toml` (1 target + 1 drafter), then
#   1. `dfctl watch --once --json` beside a direct `nvidia-smi` read, five times;
#   2. `dfctl watch --json --interval 1` over the healthy run (must find nothing);
#   3. a second run whose drafter GPU is filled by another process first: a real CUDA OOM,
#      timed from the moment the OOM text lands in the log to the finding.
# Everything goes to $OUT; bench/gpu_watch_report.py turns it into BENCHMARKS.md figures.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 WANDB_MODE=disabled DFCTL_HOME=/tmp/dfctl-home NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gw
D="python3 -m controller"
Q=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks_event_reasons.active
say() { echo "[$(date +%s.%N)] $*" | tee -a /tmp/gw/harness.log; }
runlog() { ls -d .dfctl-local/runs/$1-* 2>/dev/null | tail -1; }

say "start $(nvidia-smi -L | wc -l) GPUs; $(python3 -c 'import torch;print(torch.__version__)')"
$D deploy playbooks/gpu-local.toml --name healthy --json > /tmp/gw/deploy-healthy.json 2>>/tmp/gw/harness.log
say "deploy healthy rc=$?"
R=$(runlog healthy)
for i in $(seq 1 300); do grep -q '^\[progress\]' "$R/train.log" 2>/dev/null && break; sleep 1; done
say "healthy first progress after ${i}s"
timeout 90 $D watch healthy --json --interval 1 > /tmp/gw/watch-healthy.jsonl 2>/tmp/gw/watch-healthy.err &
W=$!
sleep 20
for k in 1 2 3 4 5; do
  nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits > /tmp/gw/smi-before-$k.csv; date +%s.%N > /tmp/gw/smi-before-$k.t
  $D watch healthy --once --json > /tmp/gw/once-$k.json 2>>/tmp/gw/harness.log
  echo $? > /tmp/gw/once-$k.rc
  nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits > /tmp/gw/smi-after-$k.csv; date +%s.%N > /tmp/gw/smi-after-$k.t
  sleep 2
done
wait $W; say "healthy watch rc=$?"
$D stop healthy --json > /tmp/gw/stop-healthy.json 2>>/tmp/gw/harness.log; say "stop healthy rc=$?"
cp "$R/train.log" /tmp/gw/healthy-train.log

python3 - <<'PY' &
import time, torch
free, total = torch.cuda.mem_get_info(1)
hog = torch.empty(int(free - 3 * 2**30), dtype=torch.uint8, device="cuda:1")
open("/tmp/gw/hog.ready", "w").write(f"{free} {total}\n")
time.sleep(900)
PY
H=$!
for i in $(seq 1 60); do [ -f /tmp/gw/hog.ready ] && break; sleep 0.5; done
say "hog ready: $(cat /tmp/gw/hog.ready)"
$D deploy playbooks/gpu-local.toml --name oom --json > /tmp/gw/deploy-oom.json 2>>/tmp/gw/harness.log
say "deploy oom rc=$?"
R=$(runlog oom)
( while ! grep -q 'OutOfMemoryError\|out of memory' "$R/train.log" 2>/dev/null; do sleep 0.05; done
  say "OOM text in log" ) &
timeout 300 $D watch oom --json --interval 1 > /tmp/gw/watch-oom.jsonl 2>/tmp/gw/watch-oom.err
say "oom watch rc=$?"
kill $H 2>/dev/null
cp "$R/train.log" /tmp/gw/oom-train.log
tar -C /tmp/gw -czf "$OUT/gw.tgz" .
cp /tmp/gw/harness.log "$OUT/"
