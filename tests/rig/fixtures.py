"""Pytest fixtures of the SSH + LXC test rig (loaded by tests/conftest.py via pytest_plugins).

    rig        session-scoped Rig: .hosts (≥ 2 FakeHost), .ssh_config_path,
               .known_hosts_path, .identity_file, .add_host(), .ensure_hosts(n)
    rig_host   rig.hosts[0], reset to its healthy state (link up, sshd with its original
               key, CT 200 running, CT 201 stopped, default GPUs) before each test
    fabric_hosts  rig.hosts[:2], each reset with a fabric CT 210 (FAB_VMID) started: CTs
               that reach each other at host.fabric_address(210) (multi-node jobs)

Set up lazily: only a test that asks for one of these fixtures pays for the rig, once per
session, and everything is torn down at session end. Mark such tests `@pytest.mark.rig`.
"""

from __future__ import annotations

import pytest

from tests.rig.gpus import FakeComputeApp, FakeGpu, busy_gpu  # noqa: F401  (re-exported)
from tests.rig.host import FakeHost, SmallWorkspace  # noqa: F401
from tests.rig.rig import Rig


@pytest.fixture(scope="session")
def rig():
    """The fake Proxmox hosts of this test session (two to start with)."""
    the_rig = Rig.create(hosts=2)
    try:
        yield the_rig
    finally:
        the_rig.close()


@pytest.fixture
def rig_host(rig) -> FakeHost:
    """rig.hosts[0] in its healthy start state."""
    host = rig.hosts[0]
    host.reset()
    return host


FAB_VMID = 210
"""The fabric CT of fabric_hosts (CT 200 keeps loopback only)."""


def on_fabric(rig: Rig) -> list[FakeHost]:
    """rig.hosts[0] and [1], healthy, each with CT 210 on the fabric (created once)."""
    hosts = rig.ensure_hosts(2)[:2]
    for host in hosts:
        host.reset()
        host.add_fabric_container(FAB_VMID)
    return hosts


@pytest.fixture
def fabric_hosts(rig) -> list[FakeHost]:
    """on_fabric(rig) before each test (a module-scoped fixture can call on_fabric itself)."""
    return on_fabric(rig)
