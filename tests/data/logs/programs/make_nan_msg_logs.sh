#!/bin/bash
# Regenerates the torch-on-CPU logs of helper k13nanmsg (2026-12-03, torch 2.13.0+cpu, numpy):
# each is the program's stdout+stderr as produced, run from the repository root.
cd "$(dirname "$0")/../../../.."
PYTHONUNBUFFERED=1 python tests/data/logs/programs/nan_distribution.py > tests/data/logs/torch_nan_distribution.log 2>&1
echo "nan_distribution.py exit $?"
PYTHONUNBUFFERED=1 python tests/data/logs/programs/nan_words_healthy.py > tests/data/logs/torch_nan_words_healthy.log 2>&1
echo "nan_words_healthy.py exit $?"
