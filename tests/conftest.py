"""Shared pytest set-up: every test gets its own dfctl data directory (registry, history),
and under pytest-xdist (scripts/test.sh runs `-n 2 --dist loadgroup`) the tests that share
something expensive or stateful run on one worker (pytest_collection_modifyitems below)."""

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

RIG_FIXTURE = "rig"
"""Every test that uses the rig, directly or through a fixture built on it (rig_host,
fabric_hosts, a module's own), needs it: tests/rig/fixtures.py."""
SHARED_SCOPES = ("package", "module", "class")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The pytest-xdist group an item must run in, or None when it can run on any worker.

    - a test of the rig: its module's group "rig:<module>". A worker is a pytest session with
      its own rig (set up at its first rig test; names carry the worker's pid, slots and
      clean-up go by flocks: tests/rig/README.md), so rig modules run side by side on
      different rigs while the tests of one module keep their order on one rig, as serially.
    - a test using a module's (or class's) fixture, or a session fixture defined in a test
      module: the module's group "module:<module>", so the fixture is built once, not once
      per worker.

    Derived from each item's fixture closure, so a new test needs no marker.
    """
    module = item.nodeid.split("::", 1)[0]
    if RIG_FIXTURE in item.fixturenames:
        return "rig:" + module
    # _fixtureinfo is pytest's record of the item's fixture closure (stable since pytest 3);
    # no public API names the scope of the fixtures an item uses.
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in item.fixturenames:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            shared = fixturedef.scope in SHARED_SCOPES or (
                fixturedef.scope == "session" and fixturedef.baseid.endswith(".py"))
            if shared:
                return "module:" + module
    return None


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


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
