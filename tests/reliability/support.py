"""Shared helpers of the reliability suite: a deploy target in the rig's CT 200 with shims
that pause the remote side at a chosen phase, a controller run as a child process (so it
can be SIGKILLed at a phase), and checks that a workdir is consistent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.deploy_support import dfctl  # noqa: F401 - re-exported for the reliability tests

PROJECT = Path(__file__).resolve().parents[2]
CT_PYTHON = str(PROJECT / ".venv" / "bin" / "python")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"



# A controller in a child process; `phase` pauses it (it prints "at <phase>") so the test
# can SIGKILL it exactly there. Remote-side phases pause through shims (see shim_dir).
PHASED_CLI = r'''
import sys, time
import controller.ship.deploy as d
phase = sys.argv[1]
def pause():
    print("at", phase, flush=True)
    time.sleep(600)
if phase == "before-transfer":
    real_probe = d.probe
    def probe(*a, **k):
        r = real_probe(*a, **k)
        pause()
        return r
    d.probe = probe
elif phase == "mid-transfer":
    class Slow(d.ProgressReader):
        calls = 0
        def read(self, size=-1):
            Slow.calls += 1
            if Slow.calls == 3:
                pause()
            return super().read(size)
    d.ProgressReader = Slow
else:
    print("at start", flush=True)
from controller.cli import main
main(sys.argv[2:])
'''

# Shims put first on the CT PATH (target.path) / as target.python: they note that the
# remote side reached their phase (pid files) and wait there a moment, then go on.
SHIM_LN = """#!/bin/sh
echo $$ $PPID > "{dir}/at-switch"
while [ -e "{dir}/hold-switch" ]; do sleep 0.1; done
PATH={path} exec ln "$@"
"""
SHIM_PY = """#!/bin/sh
if [ "$3" = launch ]; then
  echo $$ > "{dir}/at-launch"
  while [ -e "{dir}/hold-launch" ]; do sleep 0.1; done
fi
exec {python} "$@"
"""


def make_shims(host_dir: Path, ct_dir: str) -> None:
    host_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("ln", SHIM_LN), ("slowpy", SHIM_PY)):
        p = host_dir / name
        p.write_text(text.format(dir=ct_dir, path=DEFAULT_PATH, python=CT_PYTHON))
        p.chmod(0o755)


def target_toml(rig, host, workdir: str, *, timeout_s: float = 10, shims: str | None = None,
                vmid: int | None = None, python: str | None = None) -> str:
    lines = ['kind = "pct"', f'host = "{host.name}"', f"vmid = {vmid or host.vmid_running}",
             f'workdir = "{workdir}"', f'python = "{python or (shims + "/slowpy" if shims else CT_PYTHON)}"',
             f'ssh_config = "{rig.ssh_config_path}"', f"connect_timeout_s = {timeout_s}"]
    if shims:
        lines.append(f'path = "{shims}:{DEFAULT_PATH}"')
    return "\n".join(lines) + "\n"


def spawn_phased(phase: str, *cli_args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PHASED_CLI, phase, *cli_args], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(PROJECT), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def release_is_complete(host, vmid: int, workdir: str, release: str) -> bool:
    """`sha256sum -c` of a release's manifest inside the CT."""
    r = host.ct_exec(vmid, ["sh", "-c", f'cd "{workdir}/releases/{release}" && sha256sum -c --quiet .dfctl-sha256sums'])
    return r.returncode == 0


def current_release(host, vmid: int, workdir: str) -> str | None:
    p = host.container_path(vmid, f"{workdir}/current")
    try:
        return os.path.basename(os.readlink(p))
    except OSError:
        return None


def lock_is_free(host, vmid: int, workdir: str) -> bool:
    r = host.ct_exec(vmid, ["sh", "-c", f'exec 9>>"{workdir}/.deploy.lock" && flock -n 9'])
    return r.returncode == 0


def run_dirs(host, vmid: int, workdir: str) -> list[str]:
    p = host.container_path(vmid, f"{workdir}/runs")
    return sorted(os.listdir(p)) if p.is_dir() else []


def registry_rows(capsys) -> list[dict]:
    code, out, err = dfctl(capsys, "runs", "--json")
    assert code == 0, err
    return json.loads(out)


def note(what: str, **figures) -> None:
    """Append a measured figure for RELIABILITY.md (never fails a test)."""
    path = Path(os.environ.get("DFCTL_RELIABILITY_FIGURES", "/tmp/dfctl-reliability-figures.jsonl"))
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps({"what": what, **figures}) + "\n")
    except OSError:
        pass
