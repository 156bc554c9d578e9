"""dfctl deploy against the rig (real sshd, real LXC CT, pct stand-in), through the CLI:
the trainer's tiny CPU config launched in CT 200 with its log growing after the launching
exec returned, WANDB_API_KEY in no /proc/*/cmdline and not in the registry, unchanged
redeploy transfers nothing, `dfctl stop` leaves no process, a SIGKILLed deploy leaves the
previous release live, a host with its link down fails within the timeout with exit 3."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.deploy_support import (
    SLOW_DEPLOY,
    all_cmdlines,
    dfctl,
    live_processes_of_run,
    make_project,
    only_error_doc,
    ticker_playbook,
    wait_for,
)
from tests.rig.rig import owned_by_this_session

pytestmark = pytest.mark.rig

PROJECT = Path(__file__).resolve().parents[1]
CT_PYTHON = str(PROJECT / ".venv" / "bin" / "python")   # the checkout is bound read-only into the CT
SECRET = "rig-wandb-key-" + os.urandom(6).hex()



def target_toml(rig, host, workdir: str, timeout_s: float = 10) -> str:
    return f"""kind = "pct"
host = "{host.name}"
vmid = {host.vmid_running}
workdir = "{workdir}"
python = "{CT_PYTHON}"
ssh_config = "{rig.ssh_config_path}"
connect_timeout_s = {timeout_s}
"""


def live_pids_of_run(run_id: str) -> list[int]:
    """Host-side scan (the CT shares the host's pid table): live processes of this run on
    this session's rig (not another xdist worker's run of that id)."""
    return [pid for pid, _ in live_processes_of_run(run_id) if owned_by_this_session(pid)]


def test_trainer_in_ct_deploy_launch_redeploy_stop(rig, rig_host, tmp_path, capsys, monkeypatch):
    workdir = f"/workspace/dfctl-{os.getpid()}"
    pb = tmp_path / "ct200.toml"
    pb.write_text(f"""[target]
{target_toml(rig, rig_host, workdir)}
[bundle]
paths = ["trainer"]
[run]
name = "tiny"
module = "trainer"
args = ["--config", "tiny", "--data", "{{workdir}}/data/synth", "--synthetic-samples", "300",
        "--run-dir", "{{run_dir}}", "--steps", "100000", "--log-every", "1"]
env = {{ WANDB_MODE = "offline", OMP_NUM_THREADS = "1" }}
""")
    monkeypatch.chdir(PROJECT)
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    t0 = time.monotonic()
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    launch_returned_s = time.monotonic() - t0
    assert code == 0, err
    doc = json.loads(out)
    run = doc["run"]
    assert launch_returned_s < 60 and run["run_dir"].startswith(f"{workdir}/runs/tiny-")
    assert SECRET not in out + err
    host_run_dir = rig_host.container_path(rig_host.vmid_running, run["run_dir"])
    log = host_run_dir / "train.log"
    # the launching exec has returned; the log keeps growing on its own
    size0 = wait_for(lambda: log.exists() and log.stat().st_size, timeout_s=120, what="first log bytes")
    wait_for(lambda: log.stat().st_size > size0, timeout_s=120, what="log growth")
    wait_for(lambda: "[milestone] dataset_loaded" in log.read_text(errors="replace"), timeout_s=120,
             what="the trainer's dataset_loaded milestone")
    assert os.readlink(rig_host.container_path(rig_host.vmid_running, f"{workdir}/current")) == \
        f"releases/{doc['release']['release_id']}"
    info = json.loads((host_run_dir / "launch.json").read_text())
    assert info["release_dir"] == f"{workdir}/releases/{doc['release']['release_id']}"
    assert not (host_run_dir / "env").exists()

    # the secret: in no process's cmdline (host and CT share this pid table), not in the registry
    for blob in all_cmdlines():
        assert SECRET.encode() not in blob
    registry = Path(os.environ["DFCTL_HOME"]) / "registry.sqlite"
    for f in registry.parent.iterdir():
        assert SECRET.encode() not in f.read_bytes()
    code, out, _ = dfctl(capsys, "runs", "--json")
    row = json.loads(out)[0]
    assert row["state"] == "running" and row["target"] == f"pct {rig_host.vmid_running} on {rig_host.name}"
    assert live_pids_of_run(run["run_id"])

    # unchanged redeploy: nothing transferred
    code, out, err = dfctl(capsys, "deploy", str(pb), "--no-launch", "--json")
    assert code == 0, err
    again = json.loads(out)["release"]
    assert again["transferred_bytes"] == 0 and again["release_id"] == doc["release"]["release_id"]

    # a second run into the busy CT is refused (pct status read through the CT)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 2 and run["run_id"] in err and "still alive" in err and only_error_doc(out, code), out

    code, out, err = dfctl(capsys, "stop", run["run_id"], "--grace-s", "10", "--json")
    assert code == 0, err
    assert json.loads(out)["left"] == []
    assert live_pids_of_run(run["run_id"]) == []
    # the stop marker is read from the node through /proc/<CT init>/root: stopped, no crash
    code, out, err = dfctl(capsys, "watch", run["run_id"], "--once", "--json")
    w = json.loads(out)["runs"][0]
    assert code == 0 and (w["state"], w["process"]["stopped_by"]) == ("stopped", "dfctl stop"), err
    assert not [f for f in w["findings"] if f["kind"] == "crash"]
    # logs -f reads through the probe run in the CT (pct exec); it returns once the run ended
    code, out, err = dfctl(capsys, "logs", run["run_id"], "-f", "--tail", "1")
    ct_log = rig_host.container_path(rig_host.vmid_running, run["log"]).read_text(errors="replace")
    assert code == 0 and out == ct_log.splitlines(keepends=True)[-1], err


def test_sigkill_mid_transfer_on_rig(rig, rig_host, tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj", git=True)
    workdir = f"/workspace/kill-{os.getpid()}"
    pb = ticker_playbook(root, kind="pct", extra_target=target_toml(rig, rig_host, workdir).split("\n", 1)[1])
    monkeypatch.chdir(root)
    first = subprocess.run([sys.executable, "-c", SLOW_DEPLOY, str(pb), str(root)], cwd=PROJECT,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "finished" in first.stdout, first.stderr
    cur = rig_host.container_path(rig_host.vmid_running, f"{workdir}/current")
    before = os.readlink(cur)
    (root / "ticker" / "blob.bin").write_bytes(os.urandom(6 << 20))
    releases = rig_host.container_path(rig_host.vmid_running, f"{workdir}/releases")
    child = subprocess.Popen([sys.executable, "-c", SLOW_DEPLOY, str(pb), str(root)], cwd=PROJECT,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().startswith("progress")
    wait_for(lambda: list(releases.glob(".tmp-*")), timeout_s=60, what="temp release dir in the CT")
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert os.readlink(cur) == before
    again = subprocess.run([sys.executable, "-c", SLOW_DEPLOY.replace("time.sleep(0.3)", "pass"), str(pb), str(root)],
                           cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert os.readlink(cur) != before
    assert (cur / "ticker" / "blob.bin").stat().st_size == 6 << 20
    assert not list(releases.glob(".tmp-*"))


def test_unreachable_host_exit_3_within_timeout(rig, rig_host, tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, kind="pct", extra_target=target_toml(rig, rig_host, "/workspace/x", 2).split("\n", 1)[1])
    monkeypatch.chdir(root)
    rig_host.link_down()
    t0 = time.monotonic()
    code, _, err = dfctl(capsys, "deploy", str(pb))
    assert code == 3 and time.monotonic() - t0 < 8
    assert rig_host.name in err and "Traceback" not in err


def test_stopped_ct_clear_error(rig, rig_host, tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj", git=False)
    toml = target_toml(rig, rig_host, "/workspace/x").replace(f"vmid = {rig_host.vmid_running}",
                                                             f"vmid = {rig_host.vmid_stopped}")
    pb = ticker_playbook(root, kind="pct", extra_target=toml.split("\n", 1)[1])
    monkeypatch.chdir(root)
    code, _, err = dfctl(capsys, "deploy", str(pb))
    assert code == 3 and f"CT {rig_host.vmid_stopped} is stopped" in err and rig_host.name in err
    code, out, _ = dfctl(capsys, "doctor", str(pb), "--json")
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert code == 3 and checks["host reachable"]["ok"] and checks["CT running"]["ok"] is False


def test_plain_ssh_target_deploy_launch_stop(rig, rig_host, tmp_path, capsys, monkeypatch):
    """kind = "ssh": the same deploy and launch on the node itself (no pct)."""
    root = make_project(tmp_path / "proj", git=True)
    workdir = tmp_path / "remote-workdir"      # the fake host shares this filesystem
    toml = target_toml(rig, rig_host, str(workdir)).replace('kind = "pct"', 'kind = "ssh"')
    pb = ticker_playbook(root, kind="ssh", extra_target=toml.split("\n", 1)[1].replace(
        f"vmid = {rig_host.vmid_running}\n", ""))
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    log = Path(run["log"])
    size0 = wait_for(lambda: log.exists() and log.stat().st_size, what="log bytes")
    wait_for(lambda: log.stat().st_size > size0, what="log growth")
    code, out, _ = dfctl(capsys, "logs", run["run_id"], "--tail", "1")
    assert code == 0 and out.startswith("[progress] step=")
    code, out, err = dfctl(capsys, "stop", run["run_id"], "--json")
    assert code == 0 and json.loads(out)["left"] == [] and live_pids_of_run(run["run_id"]) == []
    code, out, err = dfctl(capsys, "logs", run["run_id"], "-f", "--tail", "1")   # the probe over plain ssh
    assert code == 0 and out.count("\n") >= 1, err


def test_doctor_running_ct(rig, rig_host, tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, kind="pct", extra_target=target_toml(rig, rig_host, "/workspace/doc").split("\n", 1)[1])
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "doctor", str(pb), "--json")
    assert code == 0, err
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert [c for c in checks if checks[c]["ok"] is False] == []
    assert checks["host key"]["detail"].startswith("known: SHA256:")
    assert checks["pct present"]["ok"] and checks["CT running"]["ok"] and checks["torch"]["ok"]
    assert checks["nvidia-smi"]["detail"].startswith("8 GPU(s)")          # the rig's stand-in default
    assert "GiB free at /workspace/doc" in checks["free disk"]["detail"]


def test_cli_unknown_host_key_then_accept_flag(rig, rig_host, tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj", git=False)
    kh = tmp_path / "known_hosts"
    toml = target_toml(rig, rig_host, "/workspace/hk").split("\n", 1)[1] + f'known_hosts = "{kh}"\n'
    pb = ticker_playbook(root, kind="pct", extra_target=toml)
    monkeypatch.chdir(root)
    code, _, err = dfctl(capsys, "deploy", str(pb), "--no-launch")
    assert code == 3 and "unknown host key ssh-ed25519 SHA256:" in err and "--accept-new-host-key" in err
    code, out, err = dfctl(capsys, "deploy", str(pb), "--no-launch", "--accept-new-host-key", "--json")
    assert code == 0, err
    assert json.loads(out)["release"]["switched"] and kh.read_text().startswith(rig_host.address + " ")
