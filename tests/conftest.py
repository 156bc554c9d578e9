"""Shared pytest set-up: every test gets its own dfctl data directory (registry, history)."""

import os

import pytest
from hypothesis import settings

# Property tests: `ci` (the default, used by make test and .ci/run) draws the same examples
# on every machine and run, so CI never turns red on the day's random draw; `dev`
# (HYPOTHESIS_PROFILE=dev) draws at random to explore. A failing example `dev` finds
# becomes a committed regression test (an @example or a plain test), not a flaky CI.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

pytest_plugins = ["tests.rig.fixtures"]


@pytest.fixture(autouse=True)
def _dfctl_home(tmp_path, monkeypatch):
    home = tmp_path / "dfctl-home"
    monkeypatch.setenv("DFCTL_HOME", str(home))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    return home
