"""Fallback containers for machines where LXC cannot start one: unshare + chroot.

Same interface as HostContainers and the same rootfs (busybox made Debian-like, the same
read-only binds, /workspace from the host, a Proxmox-like cgroup `<prefix>/lxc/<vmid>/ns`).
The start/stop/exec logic lives in the pct stand-in (backend "chroot"), so `pct start`,
the rig and `pct exec` share one implementation: a CT is `unshare --mount --pid --uts
--ipc --fork` running `chroot <rootfs> /sbin/init` (busybox), its host pid in
`<lxcpath>/<vmid>/init.pid`; exec is `nsenter -t <pid> -m -u -i -p -r -w`. The CT shares
the fake host's network namespace. `lxc-info -n <vmid> -p|-s -H` on the host PATH is a
small script over init.pid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.rig.containers import PROJECT_ROOT, ContainerSpec, HostContainers, python_prefix
from tests.rig.network import nsenter_argv

_DIRS = ("bin", "sbin", "etc/init.d", "dev", "proc", "sys", "tmp", "root", "home", "mnt", "var/log",
         "var/run", "usr", "lib", "lib64", "workspace")

LXC_INFO_SCRIPT = """#!/bin/sh
# dfctl test rig, chroot fallback (no LXC here): lxc-info over the containers' init.pid files
name=; want=
while [ $# -gt 0 ]; do
  case "$1" in -n) name=$2; shift ;; -p) want="$want p" ;; -s) want="$want s" ;; esac
  shift
done
dir=@LXCPATH@/$name
[ -n "$name" ] && [ -d "$dir" ] || { echo "$name doesn't exist" >&2; exit 1; }
pid=$(cat "$dir/init.pid" 2>/dev/null)
if [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$pid/stat"; then
  state=RUNNING
else
  state=STOPPED; pid=
fi
for w in $want; do
  case $w in p) [ -n "$pid" ] && echo "$pid" ;; s) echo "$state" ;; esac
done
exit 0
"""


class ChrootContainers(HostContainers):
    """unshare/chroot containers behind the same pct interface (used only when LXC fails)."""

    backend = "chroot"

    def __init__(self, *, pct_path: Path, **kwargs):
        super().__init__(**kwargs)
        self.pct_path = pct_path

    def create(self, spec: ContainerSpec) -> None:
        ct_dir = self.lxcpath / str(spec.vmid)
        rootfs = ct_dir / "rootfs"
        for d in _DIRS:
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        (rootfs / "tmp").chmod(0o1777)
        busybox = shutil.which("busybox") or "/usr/bin/busybox"
        shutil.copy2(busybox, rootfs / "bin/busybox")
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout
        for name in applets.split():
            if name != "busybox" and not (rootfs / "bin" / name).exists():
                os.symlink("busybox", rootfs / "bin" / name)
        os.link(rootfs / "bin/busybox", rootfs / "sbin/init")
        (rootfs / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (rootfs / "etc/group").write_text("root:x:0:root\n")
        (rootfs / "etc/fstab").touch()
        self._debianise(rootfs)
        (rootfs / "etc/init.d/rcS").chmod(0o744)
        for extra in spec.extra_dirs:
            (rootfs / str(extra).lstrip("/")).mkdir(parents=True, exist_ok=True)
        binds = [["/usr", "usr", True], ["/usr/lib", "lib", True]]
        if os.path.isdir("/lib64"):
            binds.append(["/lib64", "lib64", True])
        prefix = python_prefix()
        if not str(prefix).startswith("/usr/"):
            binds.append([str(prefix), str(prefix).lstrip("/"), True])
        binds.append([str(PROJECT_ROOT), str(PROJECT_ROOT).lstrip("/"), True])
        if (PROJECT_ROOT / ".venv").is_symlink():   # a worktree sharing another checkout's venv
            real_venv = os.path.realpath(PROJECT_ROOT / ".venv")
            binds.append([real_venv, real_venv.lstrip("/"), True])
        binds.append([str(self.share_dir), str(self.share_dir).lstrip("/"), True])
        binds.append([str(spec.workspace_dir), "workspace", False])
        (ct_dir / "chroot.json").write_text(json.dumps({
            "hostname": spec.hostname, "binds": binds,
            "cgroup": f"{self.cgroup_prefix}/lxc/{spec.vmid}"}, indent=1))
        self.specs[spec.vmid] = spec

    def set_workspace(self, vmid: int, workspace_dir: Path) -> None:
        path = self.lxcpath / str(vmid) / "chroot.json"
        cfg = json.loads(path.read_text())
        cfg["binds"] = [b for b in cfg["binds"] if b[1] != "workspace"] + [[str(workspace_dir), "workspace", False]]
        path.write_text(json.dumps(cfg, indent=1))
        self.specs[vmid].workspace_dir = workspace_dir

    def _pct(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*nsenter_argv(self.netns), str(self.pct_path), *args],
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})

    def start(self, vmid: int, timeout_s: float = 30.0) -> None:
        if self.state(vmid) == "RUNNING":
            return
        proc = self._pct("start", str(vmid))
        if proc.returncode != 0:
            raise RuntimeError(f"chroot CT {vmid} in {self.netns}: {proc.stderr.strip()}")
        deadline = time.monotonic() + timeout_s
        while self.state(vmid) != "RUNNING":
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroot CT {vmid} not running after {timeout_s:.0f} s")
            time.sleep(0.02)

    def stop(self, vmid: int) -> None:
        if self.state(vmid) == "RUNNING":
            self._pct("stop", str(vmid))

    def init_pid(self, vmid: int) -> int | None:
        try:
            pid = int((self.lxcpath / str(vmid) / "init.pid").read_text())
        except (OSError, ValueError):
            return None
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        return None if stat.rsplit(")", 1)[1].split()[0] == "Z" else pid

    def state(self, vmid: int) -> str:
        if not (self.lxcpath / str(vmid) / "chroot.json").exists():
            return "ABSENT"
        return "RUNNING" if self.init_pid(vmid) is not None else "STOPPED"
