"""controller/ship/doctor.py: the checks are data; which failures mean unreachable (exit 3)."""

from __future__ import annotations

from controller.errors import DeployError, UnreachableError
from controller.playbook import parse_playbook
from controller.ship.doctor import Check, failure, run_checks


def test_failure_names_failed_checks_and_maps_reachability_to_exit_3():
    ok = [Check("host reachable", True, "x"), Check("nvidia-smi", None, "not available")]
    assert failure(ok, "pb.toml") is None                       # a warning is not a failure
    err = failure(ok + [Check("python", False, "no python3"), Check("torch", False, "missing")], "pb.toml")
    assert isinstance(err, DeployError) and err.exit_code == 1
    assert err.message == "doctor pb.toml: failed: python, torch"
    err = failure([Check("host key", False, "changed")], "pb.toml")
    assert isinstance(err, UnreachableError) and err.exit_code == 3


def test_local_target_checks_are_a_list_of_checks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pb = parse_playbook(f'[target]\nkind = "local"\nworkdir = "{tmp_path}/wd"\n', "pb.toml")
    checks = run_checks(pb)
    names = [c.check for c in checks]
    assert names[:3] == ["host reachable", "python", "torch"] and "free disk" in names
    free = next(c for c in checks if c.check == "free disk")
    assert f"GiB free at {tmp_path}/wd" in free.detail           # the nearest existing ancestor was measured
    assert all(isinstance(c, Check) and c.ok in (True, False, None) for c in checks)
