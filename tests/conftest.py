"""Shared pytest set-up: every test gets its own dfctl data directory (registry, history)."""

import pytest

pytest_plugins = ["tests.rig.fixtures"]


@pytest.fixture(autouse=True)
def _dfctl_home(tmp_path, monkeypatch):
    home = tmp_path / "dfctl-home"
    monkeypatch.setenv("DFCTL_HOME", str(home))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    return home
