#!/bin/bash
# Regenerates tests/data/logs/nan_values_*.log (k13nanvalue, 2026-12-03, torch 2.13.0+cpu, numpy 2.4.6,
# pandas 3.1.1, PyYAML 6.0.4): each is nan_value_formats.py's stdout+stderr as produced, from the repository root.
cd "$(dirname "$0")/../../../.."
for f in tensor numpy jsonl yaml frame; do
  PYTHONUNBUFFERED=1 python tests/data/logs/programs/nan_value_formats.py $f > tests/data/logs/nan_values_$f.log 2>&1
  PYTHONUNBUFFERED=1 python tests/data/logs/programs/nan_value_formats.py $f ok > tests/data/logs/nan_values_${f}_ok.log 2>&1
  echo "$f exit $?"
done
