#!/bin/bash
# Regenerates the torch-on-CPU NaN logs of tests/data/logs/ (k12nan, 2026-12-03, torch 2.13.0+cpu):
# each is the program's stdout+stderr as produced, run from the repository root.
cd "$(dirname "$0")/../../../.."
for s in anomaly clip scaler scaler_ok; do
  PYTHONUNBUFFERED=1 python tests/data/logs/programs/nan_$s.py > tests/data/logs/torch_nan_$s.log 2>&1
  echo "nan_$s.py exit $?"
done
