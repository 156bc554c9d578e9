#!/usr/bin/env bash
# All tests. Pytest exit 5 (no tests collected) is a failure here: CI must run tests.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 WANDB_SILENT=true WANDB_DISABLE_GIT=true WANDB_MODE=offline
# Property tests draw the same examples every run (tests/conftest.py); HYPOTHESIS_PROFILE=dev explores.
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
# Lint first: it takes a second and names the file and line (config in pyproject.toml).
.venv/bin/ruff check --quiet controller trainer tests bench || { echo "test.sh: ruff found problems (above)" >&2; exit 1; }
# Types next (config in pyproject.toml [tool.mypy]: controller/, the stdlib remote scripts included).
.venv/bin/mypy || { echo "test.sh: mypy found problems (above)" >&2; exit 1; }
# Bytecode first: the suite starts hundreds of `python -m controller` and agent processes, and
# where PYTHONDONTWRITEBYTECODE is set (as on this kind of machine) each one compiled every
# module again (~60 ms of CPU a start, BENCHMARKS.md "The test command").
.venv/bin/python -m compileall -q -j 2 controller trainer tests bench >/dev/null
# pytest-xdist: the suite mostly waits on processes, sshd and events (a serial run used ~57 %
# of one core), so 2 workers on 2 cores halve it and leave CPU for the tests that time real
# runs (3 workers starve those under load); --dist loadfile runs each module whole on one
# worker (its fixtures once, its rig tests in order: tests/conftest.py). DFCTL_TEST_WORKERS=0 runs
# serially; "$@" comes last, so `scripts/test.sh -n 0 tests/x.py` does too.
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${DFCTL_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
if [ "$rc" = 5 ]; then echo "test.sh: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
