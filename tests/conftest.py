"""Shared pytest set-up: every test gets its own dfctl data directory (registry, history).

Under pytest-xdist (scripts/test.sh: `-n 2 --dist loadfile`) each worker is a session: its
own tmp_path tree (so its own DFCTL_HOME per test), its own rig (tests/rig/README.md), and
each test module runs whole on one worker, in order, so a module's fixtures are built once.
Not `--dist loadgroup`: with pytest 9 its xdist_group marks are ignored (xdist 3.8 renames
`item._nodeid`, which pytest 9's `Node.nodeid` no longer reads; every test ran on its own)."""

import os

import pytest
from hypothesis import settings

# Property tests: `ci` (the default, used by make test and .ci/run) draws the same examples
# on every machine and run, so CI never turns red on the day's random draw; `dev`
# (HYPOTHESIS_PROFILE=dev) draws at random to explore. A failing example `dev` finds
# becomes a committed regression test (an @example or a plain test), not a flaky CI.
# No deadline in either: an example's time is the machine's load (a 0.9 ms example took 469 ms
# under two xdist workers and five other processes on 2 cores), and speed is the benchmarks'
# business, not a test's (hypothesis' default 200 ms deadline failed a NaN-norm property that way).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Triton reads TRITON_INTERPRET once, when it is first imported -- by torch's inductor in
# whatever test of this worker compiles first -- so tests/trainer/test_loss_kernel.py could
# not set it for itself under the full suite. Without a GPU, Triton runs only in its
# interpreter: set for the whole session here (a GPU machine keeps the compiled kernels).
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest_plugins = ["tests.rig.fixtures"]


@pytest.fixture(autouse=True)
def _dfctl_home(tmp_path, monkeypatch):
    home = tmp_path / "dfctl-home"
    monkeypatch.setenv("DFCTL_HOME", str(home))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    return home


@pytest.fixture(autouse=True)
def _no_process_left_behind(tmp_path):
    """A test that fails midway can leave what it launched running (a trainer, a ticker, a
    watcher): after each test, end every process whose command line or working directory
    lies in the test's tmp_path, so one failure does not load the machine for the rest of
    the run. Rig processes live under the rig's own session directory and are untouched."""
    yield
    import signal

    import psutil

    root = str(tmp_path)
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if proc.pid == me or proc.info["cmdline"] is None:
                continue
            if root in " ".join(proc.info["cmdline"]) or (proc.info["cwd"] or "").startswith(root):
                os.kill(proc.pid, signal.SIGKILL)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
