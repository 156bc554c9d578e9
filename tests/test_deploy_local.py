"""Deploy on the local target: releases, atomic `current`, nothing sent when unchanged,
a SIGKILLed deploy leaves the previous release live, the lock serialises deploys."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys

import pytest

from controller.errors import LockedError
from controller.playbook import load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle, resolve_workdir
from controller.transport.local import LocalTransport
from tests.deploy_support import SLOW_DEPLOY, make_project, ticker_playbook, wait_for


@pytest.fixture
def project(tmp_path):
    root = make_project(tmp_path / "proj", git=True)
    return root, load_playbook(ticker_playbook(root))


def test_deploy_switch_unchanged_and_changed(project):
    root, pb = project
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    assert workdir == str(root / ".dfctl-local")
    first = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert first.switched and first.transferred_bytes > 0 and first.previous is None
    cur = root / ".dfctl-local" / "current"
    assert os.readlink(cur) == f"releases/{first.release_id}"
    assert (cur / "ticker" / "__main__.py").read_bytes() == (root / "ticker" / "__main__.py").read_bytes()

    again = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert again.transferred_bytes == 0 and not again.switched and again.release_id == first.release_id

    (root / "ticker" / "__init__.py").write_text("VERSION = 2\n")
    changed = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert changed.release_id != first.release_id and changed.previous == first.release_id
    assert os.readlink(cur) == f"releases/{changed.release_id}"
    assert (root / ".dfctl-local" / "releases" / first.release_id).is_dir()   # old release kept for running runs
    assert (cur / "ticker" / "__init__.py").read_text() == "VERSION = 2\n"

    # killed after releases/<id> was renamed but before `current` moved: the next deploy
    # only switches, sending nothing
    os.unlink(cur)
    os.symlink(f"releases/{first.release_id}", cur)
    resumed = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert resumed.switched and resumed.transferred_bytes == 0
    assert os.readlink(cur) == f"releases/{changed.release_id}"


def test_sigkill_mid_transfer_keeps_previous_release(project):
    root, pb = project
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    first = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(6 << 20))
    child = subprocess.Popen([sys.executable, "-c", SLOW_DEPLOY, pb.source, str(root)], cwd=os.getcwd(),
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().startswith("progress")
    wait_for(lambda: list((root / ".dfctl-local" / "releases").glob(".tmp-*")), what="temp release dir")
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert os.readlink(root / ".dfctl-local" / "current") == f"releases/{first.release_id}"
    second = deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert second.switched and second.release_id != first.release_id
    assert (root / ".dfctl-local" / "current" / "ticker" / "blob.bin").stat().st_size == 6 << 20
    assert not list((root / ".dfctl-local" / "releases").glob(".tmp-*"))


def test_concurrent_deploy_gets_locked_error(project):
    root, pb = project
    t, workdir = LocalTransport(), resolve_workdir(pb.target, root)
    deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    (root / "ticker" / "__init__.py").write_text("VERSION = 3\n")
    with open(os.path.join(workdir, ".deploy.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        (root / ".dfctl-local" / ".deploy.owner").write_text("dfctl pid 4242 on elsewhere\n")
        with pytest.raises(LockedError, match="pid 4242 on elsewhere"):
            deploy_bundle(t, workdir, build_bundle(root, pb.bundle))
    assert deploy_bundle(t, workdir, build_bundle(root, pb.bundle)).switched
