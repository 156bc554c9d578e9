"""`dfctl doctor`: a target's readiness as data -- a list of Checks the CLI only renders.

Each check says what was looked at, whether it passed (True), failed (False) or is worth a
warning (None: works, but something is missing, e.g. no GPU telemetry), and one line of
detail. Checks stop at the first thing that makes the rest meaningless (no host, a
changed host key, no pct, a stopped CT).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from controller.errors import DeployError, DfctlError, HostKeyError, UnreachableError
from controller.playbook import Playbook
from controller.ship.bundle import project_root
from controller.ship.deploy import resolve_workdir
from controller.ship.launch import remote_python
from controller.ship.stacks import py_spy_check
from controller.transport.base import Transport
from controller.transport.factory import open_host_transport, open_transport
from controller.transport.pct import PctTransport

DISK_FREE_SCRIPT = r"""d=$1; while [ ! -d "$d" ]; do d=$(dirname "$d"); done; df -Pk "$d" | tail -n 1"""
"""$1 a path that may not exist yet: `df -Pk` of its nearest existing ancestor."""

PYTHON_PROBE = ("import sys; print('python', sys.version.split()[0])\n"
                "try:\n import torch; print('torch', torch.__version__, torch.cuda.is_available())\n"
                "except Exception as e: print('torch-missing', type(e).__name__)\n"
                "try:\n import importlib.metadata as md; print('wandb', md.version('wandb'))\n"
                "except Exception as e: print('wandb-missing', type(e).__name__)\n")
"""Run by the target's python: one `word value` line each for python, torch, wandb."""

MIN_FREE_GIB = 5.0
REACHABILITY_CHECKS = ("host reachable", "host key", "pct present", "CT running")
"""A failure among these means the target cannot be reached (exit 3), not that it is unfit."""


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    check: str              # what was looked at: "host key", "free disk", ...
    ok: bool | None         # True passed · False failed · None a warning
    detail: str


def _connect(pb: Playbook, host: Transport, checks: list[Check]) -> bool:
    """Host reachable and its key known; False when nothing further can be checked."""
    if pb.target.kind == "local":
        checks.append(Check("host reachable", True, "local (no SSH)"))
        return True
    try:
        host.connect()  # type: ignore[attr-defined]
        checks.append(Check("host reachable", True, host.name))
        checks.append(Check("host key", True, f"known: {host.host_key_fingerprint()}"))  # type: ignore[attr-defined]
        return True
    except HostKeyError as exc:
        checks.append(Check("host reachable", True, host.name))
        checks.append(Check("host key", False, exc.message + (f" ({exc.hint})" if exc.hint else "")))
    except UnreachableError as exc:
        checks.append(Check("host reachable", False, exc.message))
    return False


def _container(pb: Playbook, host: Transport, where: Transport, checks: list[Check]) -> bool:
    """pct present and the CT running; False when the CT cannot be checked further."""
    r = host.run(["sh", "-c", "command -v pct"], timeout_s=30)
    checks.append(Check("pct present", r.ok, r.stdout_text.strip() or "no `pct` on the host (is it a Proxmox VE node?)"))
    if not r.ok:
        return False
    assert isinstance(where, PctTransport)
    try:
        state = where.status()
    except DfctlError as exc:
        checks.append(Check("CT running", False, exc.message))
        return False
    checks.append(Check("CT running", state == "running", f"CT {pb.target.vmid}: {state}"))
    return state == "running"


def _software(pb: Playbook, where: Transport, checks: list[Check]) -> dict[str, str]:
    """python + torch, nvidia-smi; returns the python probe's words (for the wandb check)."""
    py = remote_python(pb.target)
    r = where.run([py, "-c", PYTHON_PROBE], timeout_s=120)
    words = dict((ln.split(" ", 1) + [""])[:2] for ln in r.stdout_text.splitlines() if ln.strip())
    checks.append(Check("python", r.ok and "python" in words, f"{py}: {words.get('python') or r.summary()}"))
    if r.ok:
        checks.append(Check("torch", "torch" in words, words.get("torch") or f"not importable by {py}"))
    nv = where.run(["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"], timeout_s=60)
    if nv.ok:
        gpus = [ln for ln in nv.stdout_text.splitlines() if ln.strip()]
        first = f": {gpus[0].split(',')[1].strip()}" if gpus and "," in gpus[0] else ""
        checks.append(Check("nvidia-smi", True, f"{len(gpus)} GPU(s){first}"))
    else:
        checks.append(Check("nvidia-smi", None, "not available (no GPU telemetry; fine for CPU runs)"
                            if nv.exited == 127 else nv.summary()))
    return words


def _disk_and_wandb(pb: Playbook, where: Transport, words: dict[str, str], checks: list[Check]) -> None:
    workdir = resolve_workdir(pb.target, project_root())
    d = where.run(["sh", "-c", DISK_FREE_SCRIPT, "sh", workdir], timeout_s=60)
    try:
        avail_gib = int(d.stdout_text.split()[3]) / (1 << 20)
        checks.append(Check("free disk", avail_gib >= MIN_FREE_GIB or None, f"{avail_gib:.1f} GiB free at {workdir}"))
    except (IndexError, ValueError):
        checks.append(Check("free disk", None, f"cannot read free space at {workdir}: {d.summary()}"))
    mode = pb.run.env.get("WANDB_MODE", "online")
    if mode == "online" and "WANDB_API_KEY" in pb.run.secret_env and not os.environ.get("WANDB_API_KEY"):
        checks.append(Check("wandb mode", None, "online, but WANDB_API_KEY is not set here (it is sent from your environment)"))
    else:
        wv = words.get("wandb")
        checks.append(Check("wandb mode", True if wv or mode in ("offline", "disabled") else None,
                            f"{mode}" + (f", wandb {wv} on the target" if wv else ", wandb not importable on the target")))


def run_checks(pb: Playbook) -> list[Check]:
    """Every check of the playbook's target, in order: host, key, pct, CT, python+torch,
    nvidia-smi, free disk, wandb mode, py-spy."""
    checks: list[Check] = []
    host = open_host_transport(pb.target)
    if not _connect(pb, host, checks):
        return checks
    where = open_transport(pb.target)
    if pb.target.kind == "pct" and not _container(pb, host, where, checks):
        return checks
    words = _software(pb, where, checks)
    _disk_and_wandb(pb, where, words, checks)
    checks.append(Check(**py_spy_check(where, pb.target)))   # which py-spy `dfctl stacks` uses there
    return checks


def failure(checks: list[Check], playbook_path: str) -> DfctlError | None:
    """The error a report with failed checks ends in: unreachable (3) when the target could
    not be reached, else a deploy error (1); None when nothing failed."""
    failed = [c for c in checks if c.ok is False]
    if not failed:
        return None
    names = ", ".join(c.check for c in failed)
    if any(c.check in REACHABILITY_CHECKS for c in failed):
        return UnreachableError(f"doctor {playbook_path}: failed: {names}")
    return DeployError(f"doctor {playbook_path}: failed: {names}")
