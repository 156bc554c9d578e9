#!/bin/bash
# Makes the gbdt_*.log files beside this folder (xgboost 3.2.0, lightgbm 4.7.0, catboost 1.2.10, CPU, in a
# scratch venv). The *_oom cases run under `ulimit -v 1500000` (1.5 GB of address space).
cd "$(dirname "$0")/.." || exit 1
PY=${PY:-python}
for c in xgb_nan xgb_inflabel xgb_healthy xgb_badparam lgb_nan lgb_healthy lgb_badparam lgb_checkfail cb_degenerate cb_healthy cb_badparam cb_ramlimit; do
  "$PY" programs/gbdt_logs.py $c > gbdt_$c.log 2>&1
done
for c in xgb_oom lgb_oom cb_oom; do
  (ulimit -v 1500000; "$PY" programs/gbdt_logs.py $c > gbdt_$c.log 2>&1; echo "exit status $?" >> gbdt_$c.log)
done
