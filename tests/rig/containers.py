"""Real LXC containers for one fake host (busybox template, own lxcpath per host).

LXC keeps its command sockets in the *abstract* unix namespace, which belongs to a network
namespace: a container started inside host N's namespace can only be reached by lxc-*
tools running there too. So every lxc-start/stop here runs under `nsenter --net`, and
each host has its own lxcpath.

The busybox rootfs is made to look like a Debian CT: host /usr is bind-mounted read-only,
/lib and /lib64 come from the template's own binds, and each busybox applet in /bin and
/sbin that the host also has is replaced by a link to the host's GNU tool (so `tar`,
`mv -T`, `stdbuf`, `setsid`, `sh` (dash) behave as on a real Debian/Ubuntu CT). busybox
stays as /sbin/init. The project checkout and the Python its .venv was built from are
bound read-only at their own paths, so `<project>/.venv/bin/python` runs inside. The
cgroup layout follows Proxmox: `<prefix>/lxc/<vmid>` with processes in `…/ns`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.rig.network import nsenter_argv

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CGROUP_ROOT = Path("/sys/fs/cgroup")

_BASE_CONFIG = "lxc.net.0.type = empty\n"
_INITTAB = "::sysinit:/etc/init.d/rcS\n"
_RCS = "#!/bin/sh\n# dfctl test rig: nothing to start (the template's udhcpc would reconfigure eth0).\n"


def python_prefix() -> Path:
    """The installation the project's .venv python comes from (it must exist in the CT)."""
    return Path(os.path.realpath(sys.base_prefix))


def _lxc(netns: str, tool: str, *args: str, check: bool = True, timeout_s: float = 60
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*nsenter_argv(netns), f"/usr/bin/{tool}", *args],
                          capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} in {netns}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()}")
    return proc


@dataclass
class ContainerSpec:
    vmid: int
    workspace_dir: Path
    hostname: str
    extra_dirs: list[Path] = field(default_factory=list)
    """Empty directories to create in the rootfs (the ssh sessions' HOME, which
    `pct exec --keep-env 1` hands to the CT, exists there too, as /root does on Proxmox)."""


class HostContainers:
    """The LXC containers of one fake host: create, start, stop, locate."""

    def __init__(self, *, netns: str, lxcpath: Path, share_dir: Path, cgroup_prefix: str):
        self.netns = netns
        self.lxcpath = lxcpath
        self.share_dir = share_dir
        self.cgroup_prefix = cgroup_prefix
        self.specs: dict[int, ContainerSpec] = {}

    # ---- creation -------------------------------------------------------------------------
    def create(self, spec: ContainerSpec) -> None:
        self.lxcpath.mkdir(parents=True, exist_ok=True)
        base = self.lxcpath / "base.conf"
        if not base.exists():
            base.write_text(_BASE_CONFIG)
        spec.workspace_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["lxc-create", "-P", str(self.lxcpath), "-n", str(spec.vmid), "-t", "busybox",
             "-f", str(base)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"lxc-create CT {spec.vmid} in {self.lxcpath}: exit "
                               f"{proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
        rootfs = self.rootfs(spec.vmid)
        self._debianise(rootfs)
        for extra in spec.extra_dirs:
            (rootfs / str(extra).lstrip("/")).mkdir(parents=True, exist_ok=True)
        with open(self.lxcpath / str(spec.vmid) / "config", "a") as conf:
            conf.write(self._extra_config(spec))
        self.specs[spec.vmid] = spec

    def _debianise(self, rootfs: Path) -> None:
        (rootfs / "etc/inittab").write_text(_INITTAB)
        (rootfs / "etc/init.d/rcS").write_text(_RCS)
        for sub in ("bin", "sbin"):
            folder = rootfs / sub
            for entry in os.scandir(folder):
                if not entry.is_symlink() or os.readlink(entry.path) != "busybox":
                    continue
                for host_dir in ("/usr/bin", "/usr/sbin"):
                    target = f"{host_dir}/{entry.name}"
                    if os.path.exists(target):
                        os.unlink(entry.path)
                        os.symlink(target, entry.path)
                        break
        nvsmi = rootfs / "bin/nvidia-smi"
        nvsmi.unlink(missing_ok=True)
        nvsmi.symlink_to(self.share_dir / "nvidia-smi")
        (rootfs / "workspace").mkdir(exist_ok=True)

    def _extra_config(self, spec: ContainerSpec) -> str:
        lines = ["", "# dfctl test rig additions",
                 f"lxc.uts.name = {spec.hostname}",
                 "lxc.mount.entry = /usr usr none ro,bind 0 0"]
        prefix = python_prefix()
        if not str(prefix).startswith("/usr/"):
            rel = str(prefix).lstrip("/")
            lines.append(f"lxc.mount.entry = {prefix} {rel} none ro,bind,create=dir 0 0")
        rel_project = str(PROJECT_ROOT).lstrip("/")
        lines.append(f"lxc.mount.entry = {PROJECT_ROOT} {rel_project} none ro,bind,create=dir 0 0")
        venv = PROJECT_ROOT / ".venv"
        if venv.is_symlink():   # a git worktree sharing another checkout's venv: bind that one too
            real_venv = Path(os.path.realpath(venv))
            lines.append(f"lxc.mount.entry = {real_venv} {str(real_venv).lstrip('/')} none ro,bind,create=dir 0 0")
        rel_share = str(self.share_dir).lstrip("/")
        lines.append(f"lxc.mount.entry = {self.share_dir} {rel_share} none ro,bind,create=dir 0 0")
        lines.append(f"lxc.mount.entry = {spec.workspace_dir} workspace none rw,bind,create=dir 0 0")
        lines.append(f"lxc.cgroup.dir.monitor = {self.cgroup_prefix}/lxc.monitor/{spec.vmid}")
        lines.append(f"lxc.cgroup.dir.container = {self.cgroup_prefix}/lxc/{spec.vmid}")
        lines.append("lxc.cgroup.dir.container.inner = ns")
        for path in (prefix, PROJECT_ROOT, self.share_dir, spec.workspace_dir):
            if any(ch.isspace() for ch in str(path)):
                raise RuntimeError(f"LXC mount entries cannot hold a path with spaces: {path}")
        return "\n".join(lines) + "\n"

    def set_workspace(self, vmid: int, workspace_dir: Path) -> None:
        """Point /workspace of a (stopped) CT at another host directory."""
        config = self.lxcpath / str(vmid) / "config"
        lines = [ln for ln in config.read_text().splitlines()
                 if not (ln.startswith("lxc.mount.entry") and " workspace none " in ln)]
        lines.append(f"lxc.mount.entry = {workspace_dir} workspace none rw,bind,create=dir 0 0")
        config.write_text("\n".join(lines) + "\n")
        self.specs[vmid].workspace_dir = workspace_dir

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self, vmid: int, timeout_s: float = 30.0) -> None:
        if self.state(vmid) == "RUNNING":
            return
        _lxc(self.netns, "lxc-start", "-P", str(self.lxcpath), "-n", str(vmid))
        deadline = time.monotonic() + timeout_s
        while self.state(vmid) != "RUNNING":
            if time.monotonic() > deadline:
                raise RuntimeError(f"CT {vmid} in {self.netns} not RUNNING after {timeout_s:.0f} s")
            time.sleep(0.02)

    def stop(self, vmid: int) -> None:
        if self.state(vmid) == "STOPPED":
            return
        _lxc(self.netns, "lxc-stop", "-P", str(self.lxcpath), "-n", str(vmid), "-k")

    def state(self, vmid: int) -> str:
        proc = _lxc(self.netns, "lxc-info", "-P", str(self.lxcpath), "-n", str(vmid), "-s", "-H",
                    check=False)
        return proc.stdout.strip() or "ABSENT"

    def init_pid(self, vmid: int) -> int | None:
        proc = _lxc(self.netns, "lxc-info", "-P", str(self.lxcpath), "-n", str(vmid), "-p", "-H",
                    check=False)
        out = proc.stdout.strip()
        return int(out) if out.isdigit() else None

    def rootfs(self, vmid: int) -> Path:
        return self.lxcpath / str(vmid) / "rootfs"

    def cgroup_dir(self, vmid: int, controller: str = "memory") -> Path:
        """Host path of the CT's cgroup (cgroup v1 here: one hierarchy per controller)."""
        return CGROUP_ROOT / controller / self.cgroup_prefix / "lxc" / str(vmid)

    def stop_all(self) -> None:
        for vmid in list(self.specs):
            try:
                self.stop(vmid)
            except Exception:
                pass
