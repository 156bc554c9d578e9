"""Secrets and permissions, end to end on the rig through the real `dfctl` executable.

A deploy runs with WANDB_API_KEY=<marker 1> in the operator's environment and a playbook
env entry that looks secret (HF_TOKEN=<marker 2>). Then EVERY artefact is searched for both
markers: stdout/stderr of every command (deploy incl. --dry-run and --json, runs, logs,
watch --once --json, doctor, stop), the registry (sqlite + WAL) and history files under
DFCTL_HOME, every file of the workdir in the CT (run dir, train.log, launch.json, metrics,
lock/owner files), and /proc/*/cmdline of every process on the host and in the CT (one pid
table). Remote files: nothing world-writable under the workdir; the env file is 0600.
Host keys (unknown refused, accepted with the flag, changed always refused) are covered
by tests/test_transport_rig.py and tests/test_deploy_rig.py and not repeated here."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from controller.remote import launcher
from tests.deploy_support import all_cmdlines, make_project, ticker_playbook, wait_for
from tests.reliability.support import PROJECT, target_toml

DFCTL = str(PROJECT / ".venv" / "bin" / "dfctl")
MARK1 = "wandbkey-" + os.urandom(8).hex()
MARK2 = "hftoken-" + os.urandom(8).hex()
# issue 12 item 12: a name the old rule missed (MY_AUTH, GH_PAT), a value marked secret by
# naming it in run.secret_env (DB_URL), and a plain value that the registry must hold only
# as a hash (PLAIN)
MARK3 = "myauth-" + os.urandom(8).hex()
MARK4 = "dburl-" + os.urandom(8).hex()
MARK5 = "ghpat-" + os.urandom(8).hex()
PLAIN_VALUE = "visible-" + os.urandom(8).hex()
MARKS = (MARK1, MARK2, MARK3, MARK4, MARK5)


def files_under(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            yield Path(dirpath) / n


def grep_tree(root: Path) -> list[str]:
    hits = []
    for p in files_under(root):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if any(m.encode() in data for m in MARKS):
                hits.append(str(p))
    return hits


@pytest.mark.rig
def test_secrets_in_no_artefact_and_least_permissions(rig, rig_host, tmp_path, _dfctl_home):
    host = rig_host
    root = make_project(tmp_path / "proj", git=True)
    workdir = f"/workspace/sec-{os.getpid()}"
    pb = ticker_playbook(root, kind="pct", extra_target=target_toml(rig, host, workdir).split("\n", 1)[1],
                         env='{ WANDB_MODE = "offline", HF_TOKEN = "' + MARK2 + '", PLAIN = "' + PLAIN_VALUE
                             + '", MY_AUTH = "' + MARK3 + '", DB_URL = "' + MARK4 + '", GH_PAT = "' + MARK5 + '" }',
                         # two runs alive at once, on purpose; DB_URL marked secret by name
                         extra_run='exclusive = false\nsecret_env = ["WANDB_API_KEY", "DB_URL"]')
    env = {**os.environ, "DFCTL_HOME": str(_dfctl_home), "WANDB_API_KEY": MARK1}
    outputs: list[str] = []

    def dfctl(*argv: str, ok=(0,)) -> subprocess.CompletedProcess:
        r = subprocess.run([DFCTL, *argv], cwd=root, env=env, capture_output=True, text=True, timeout=180)
        outputs.append(f"$ dfctl {' '.join(argv)}\n{r.stdout}\n{r.stderr}")
        assert r.returncode in ok, (argv, r.returncode, r.stderr)
        return r

    dfctl("deploy", str(pb), "--dry-run")
    dfctl("deploy", str(pb), "--dry-run", "--json")
    run = json.loads(dfctl("deploy", str(pb), "--json").stdout)["run"]
    human = dfctl("deploy", str(pb), "--name", "second")
    run_dir = host.container_path(host.vmid_running, run["run_dir"])
    log = run_dir / "train.log"
    wait_for(lambda: log.exists() and b"has_key=True" in log.read_bytes(), 60, "the run sees its key")
    try:
        # while both runs live: no argv anywhere holds a secret (host and CT share /proc)
        blobs = all_cmdlines()
        assert not [b for b in blobs if any(m.encode() in b for m in MARKS)]
        # the commands that read while both runs live, each a real `dfctl` process, at once
        # (none waits on another; every one's output is still searched below)
        with ThreadPoolExecutor(4) as pool:
            reads = [pool.submit(dfctl, *argv, **kw) for argv, kw in (
                (("runs",), {}), (("runs", "--json"), {}), (("logs", run["run_id"], "--tail", "5"), {}),
                (("watch", run["run_id"], "--once", "--json"), {"ok": (0, 4, 5)}), (("doctor", str(pb)), {}),
                (("doctor", str(pb), "--json"), {}),
                # a failing command's error message must not carry it either
                (("deploy", str(pb), "--name", "bad name!"), {"ok": (2,)}))]
            done = [f.result() for f in reads]
        rows = json.loads(done[1].stdout)
        assert {r["state"] for r in rows} == {"running"} and len(rows) == 2
        info = json.loads((run_dir / "launch.json").read_text())
        assert "HF_TOKEN" in info["secret_env_names"] and "WANDB_API_KEY" in info["secret_env_names"]
        assert {"MY_AUTH", "DB_URL", "GH_PAT"} <= set(info["secret_env_names"]) and "PLAIN" not in info["secret_env_names"]
        assert "PLAIN" in info["env_names"] and not (run_dir / "env").exists()   # read and deleted
    finally:
        for rid in [run["run_id"], human.stdout.split("launched ")[1].split()[0]]:
            dfctl("stop", rid, "--grace-s", "3", "--json")

    leaked = [o for o in outputs if any(m in o for m in MARKS)]
    assert not leaked, leaked[0][:2000]
    assert len(outputs) >= 12
    assert list(_dfctl_home.rglob("*.parquet")) and list(_dfctl_home.rglob("registry.sqlite*"))
    assert grep_tree(_dfctl_home) == []                                          # registry, history
    host_workdir = host.container_path(host.vmid_running, workdir)
    assert grep_tree(host_workdir) == []
    assert grep_tree(host.dir / "sshd") == [] if (host.dir / "sshd").exists() else True
    # the registry keeps the playbook redacted, the name of the secret but not its value
    reg = (_dfctl_home / "registry.sqlite").read_bytes()
    assert b"HF_TOKEN" in reg and b"<redacted>" in reg
    # and no env value at all: a plain one is a name and a hash
    from controller.playbook import env_value_hash

    assert PLAIN_VALUE.encode() not in reg and env_value_hash("PLAIN", PLAIN_VALUE).encode() in reg

    # least permissions: nothing world-writable under the workdir (symlinks aside)
    bad = [f"{p} {oct(p.lstat().st_mode)}" for p in files_under(host_workdir)
           if not p.is_symlink() and p.lstat().st_mode & stat.S_IWOTH]
    assert bad == []
    assert stat.S_IMODE((host_workdir / "runs").stat().st_mode) & 0o022 == 0


def test_env_file_is_0600_and_holds_what_argv_does_not(tmp_path):
    """The launcher's env file, caught before the wrapper deletes it: the wrapper cannot
    start here (its interpreter path does not exist), so the file stays for inspection."""
    workdir = tmp_path / "wd"
    (workdir / "releases" / "r1").mkdir(parents=True)
    os.symlink("releases/r1", workdir / "current")
    spec = {"workdir": str(workdir), "run_id": "sec-1", "name": "sec", "python": sys.executable, "module": "x",
            "args": ["--flag"], "env": {"PLAIN": "p"}, "secrets": {"WANDB_API_KEY": MARK1}, "path": "/usr/bin:/bin"}
    r = subprocess.run(["bash", "-c", 'exec -a /nonexistent/python "$0" -c "$1" launch', sys.executable,
                        Path(launcher.__file__).read_text()], input=json.dumps(spec), capture_output=True,
                       text=True, timeout=60)
    reply = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" in reply and MARK1 not in r.stdout + r.stderr
    env_file = workdir / "runs" / "sec-1" / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert MARK1 in env_file.read_text()
    assert stat.S_IMODE((workdir / "runs" / "sec-1").stat().st_mode) == 0o755
