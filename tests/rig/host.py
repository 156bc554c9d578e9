"""One fake Proxmox host: a network namespace, a real sshd, real LXC CTs, pct/nvidia-smi stand-ins.

Layout of a host's directory (all on the host filesystem, so tests can look inside):

    <dir>/bin/            first on PATH of ssh sessions: pct, nvidia-smi, lxc-* (with -P)
    <dir>/share/          nvidia-smi stand-in + gpus.json; bound read-only into every CT
    <dir>/home/           HOME of ssh sessions (empty: no pyenv-running ~/.bashrc)
    <dir>/pve/nodes/<node>/lxc/<vmid>.conf   what `pct config` reads
    <dir>/lxc/<vmid>/     LXC container (config, rootfs)
    <dir>/workspace-<vmid>/   bound at /workspace inside that CT
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tests.rig.containers import ContainerSpec, HostContainers
from tests.rig.gpus import FakeGpu, default_gpus, write_scenario
from tests.rig.network import FABRIC_PREFIX, VethLink, create_uts_namespace, nsenter_argv, run_ip
from tests.rig.sshd import SshServer, generate_key, sshd_config_text

if TYPE_CHECKING:
    from tests.rig.rig import Rig

STANDINS = Path(__file__).resolve().parent / "standins"
LXC_TOOLS = ("lxc-info", "lxc-attach", "lxc-ls", "lxc-start", "lxc-stop")
NVIDIA_SMI_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                     "driver. Make sure that the latest NVIDIA driver is installed and running.\n\n")


def standin_python() -> str:
    """Interpreter for the stand-ins: the host's /usr/bin/python3 (also visible in CTs)."""
    if os.access("/usr/bin/python3", os.X_OK):
        return "/usr/bin/python3"
    return os.path.realpath(sys.executable)


def install_script(source: Path, dest: Path) -> None:
    lines = source.read_text().splitlines(keepends=True)
    lines[0] = f"#!{standin_python()} -IS\n"
    dest.write_text("".join(lines))
    dest.chmod(0o755)


@dataclass
class SmallWorkspace:
    """A CT whose /workspace is a tmpfs of `size_kib` (for "disk full" tests)."""

    vmid: int
    host_dir: Path
    size_kib: int


class FakeHost:
    """A fake Proxmox node reachable at `address` (root, port 22) from the root namespace."""

    port = 22
    user = "root"
    vmid_running = 200
    vmid_stopped = 201
    vmid_small = 202

    def __init__(self, rig: "Rig", index: int, slot: int):
        self.rig = rig
        self.index = index
        self.slot = slot
        self.name = f"rig-host{index}"
        """ssh_config alias (`Host rig-hostN`), also the Proxmox node name."""
        self.node = self.name
        self.netns = f"dfctl-rig{rig.tag}h{index}"
        self.link = VethLink(netns=self.netns, host_dev=f"drg{rig.tag}h{index}", slot=slot)
        self.address = self.link.ns_address
        self.dir = rig.dir / self.name
        self.bin_dir = self.dir / "bin"
        self.share_dir = self.dir / "share"
        self.home_dir = self.dir / "home"
        self.pve_dir = self.dir / "pve"
        self.lxcpath = self.dir / "lxc"
        self.workspace_dir = self.dir / f"workspace-{self.vmid_running}"
        self.scenario_path = self.share_dir / "gpus.json"
        self.host_key_path = self.dir / "ssh_host_ed25519_key"
        self._original_key = self.dir / "ssh_host_ed25519_key.orig"
        self.backend = ""
        self.containers: HostContainers
        self.use_backend(rig.backend if rig.backend != "auto" else "lxc")
        self.uts_path = self.dir / "uts"
        """Persistent UTS namespace: `hostname` on this host (ssh, host_exec) prints the node name."""
        self.sshd = SshServer(netns=self.netns, address=self.address, uts=self.uts_path,
                              config_path=self.dir / "sshd_config", log_path=self.dir / "sshd.log")
        self.host_public_key = ""
        self.original_public_key = ""
        self._small: SmallWorkspace | None = None
        self._mounts: list[Path] = []

    def __repr__(self) -> str:
        return f"FakeHost({self.name} at {self.address}, netns {self.netns})"

    # ---- set-up -----------------------------------------------------------------------
    def use_backend(self, backend: str) -> None:
        """"lxc" (real LXC) or "chroot" (the unshare/chroot fallback); before setup()."""
        kwargs = dict(netns=self.netns, lxcpath=self.lxcpath, share_dir=self.share_dir,
                      cgroup_prefix=f"dfctl-rig{self.rig.tag}h{self.index}")
        if backend == "chroot":
            from tests.rig.chroot_containers import ChrootContainers
            self.containers = ChrootContainers(pct_path=self.bin_dir / "pct", **kwargs)
        elif backend == "lxc":
            self.containers = HostContainers(**kwargs)
        else:
            raise ValueError(f"unknown container backend {backend!r} (lxc or chroot)")
        self.backend = backend

    @property
    def path_env(self) -> str:
        return f"{self.bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"

    def setup(self) -> None:
        for d in (self.bin_dir, self.share_dir, self.home_dir, self.lxcpath, self.workspace_dir,
                  self.pve_dir / "nodes" / self.node / "lxc"):
            d.mkdir(parents=True, exist_ok=True)
        self.link.create()
        create_uts_namespace(self.uts_path, self.node)
        self.host_public_key = generate_key(self.host_key_path, f"root@{self.name}")
        self.original_public_key = self.host_public_key
        shutil.copy2(self.host_key_path, self._original_key)
        shutil.copy2(self.host_key_path.with_suffix(".pub"), self._original_key.with_suffix(".orig.pub"))
        self._install_tools()
        write_scenario(self.scenario_path, default_gpus())
        self.sshd.config_path.write_text(sshd_config_text(
            address=self.address, host_key=self.host_key_path,
            authorized_keys=self.rig.authorized_keys_path, home=self.home_dir, path_env=self.path_env))
        self.sshd.start()
        for vmid in (self.vmid_running, self.vmid_stopped):
            self._create_ct(vmid, self.dir / f"workspace-{vmid}")
        self.containers.start(self.vmid_running)

    def _install_tools(self) -> None:
        install_script(STANDINS / "pct.py", self.bin_dir / "pct")
        install_script(STANDINS / "nvidia_smi.py", self.share_dir / "nvidia-smi")
        (self.bin_dir / "nvidia-smi").symlink_to(self.share_dir / "nvidia-smi")
        if self.backend == "lxc":
            for tool in LXC_TOOLS:
                wrapper = self.bin_dir / tool
                wrapper.write_text(f"#!/bin/sh\n# dfctl test rig: this fake host's LXC lives in its own "
                                   f"lxcpath\nexec /usr/bin/{tool} -P {self.lxcpath} \"$@\"\n")
                wrapper.chmod(0o755)
        else:
            from tests.rig.chroot_containers import LXC_INFO_SCRIPT
            (self.bin_dir / "lxc-info").write_text(LXC_INFO_SCRIPT.replace("@LXCPATH@", str(self.lxcpath)))
            (self.bin_dir / "lxc-info").chmod(0o755)
        (self.dir / "rig-host.json").write_text(json.dumps(
            {"node": self.node, "lxcpath": str(self.lxcpath), "pve_dir": str(self.pve_dir),
             "backend": self.backend}) + "\n")

    def _create_ct(self, vmid: int, workspace: Path) -> None:
        self.containers.create(ContainerSpec(vmid=vmid, workspace_dir=workspace, hostname=f"ct{vmid}",
                                             extra_dirs=[self.home_dir]))
        self._write_pve_conf(vmid, workspace)

    def _write_pve_conf(self, vmid: int, workspace: Path) -> None:
        conf = self.pve_dir / "nodes" / self.node / "lxc" / f"{vmid}.conf"
        conf.write_text("\n".join([
            "arch: amd64",
            "cores: 8",
            f"hostname: ct{vmid}",
            "memory: 65536",
            f"mp0: {workspace},mp=/workspace",
            f"net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:{self.slot:02X}:{vmid // 256:02X}:{vmid % 256:02X},"
            "ip=dhcp,type=veth",
            "ostype: debian",
            f"rootfs: local-lvm:vm-{vmid}-disk-0,size=200G",
            "swap: 0",
            "",
        ]))

    # ---- client side ------------------------------------------------------------------
    def ssh_argv(self, *cmd: str) -> list[str]:
        """OpenSSH client argv for this host through the rig's ssh_config (the seeds' way).

        Like ssh itself, the words of `cmd` are joined with spaces and parsed again by the
        remote login shell: pass one `shlex.join(argv)` string to get argv there byte-exact.
        """
        return ["ssh", "-F", str(self.rig.ssh_config_path), self.name, "--", *cmd]

    def known_hosts_line(self, public_key: str | None = None) -> str:
        key = public_key or self.host_public_key
        return f"{self.address} {' '.join(key.split()[:2])}"

    # ---- host side --------------------------------------------------------------------
    def host_exec(self, argv: Sequence[str], *, input: bytes | str | None = None,
                  timeout_s: float = 60, text: bool = True, check: bool = False
                  ) -> subprocess.CompletedProcess:
        """Run argv on this fake host (its namespace, its PATH and HOME), not through ssh."""
        env = {"PATH": self.path_env, "HOME": str(self.home_dir), "LANG": "C.UTF-8"}
        if isinstance(input, str) and not text:
            input = input.encode()
        return subprocess.run([*nsenter_argv(self.netns, self.uts_path), *argv], input=input, capture_output=True,
                              text=text, env=env, timeout=timeout_s, check=check)

    def ct_exec(self, vmid: int, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        """`pct exec <vmid> -- argv` on this host (no ssh)."""
        return self.host_exec(["pct", "exec", str(vmid), "--", *argv], **kwargs)

    # ---- containers -------------------------------------------------------------------
    def start_container(self, vmid: int) -> None:
        self.containers.start(vmid)

    def stop_container(self, vmid: int) -> None:
        self.containers.stop(vmid)

    def restart_container(self, vmid: int) -> None:
        """Stop and start a CT: every process in it (runs launched by earlier tests) is gone."""
        self.containers.stop(vmid)
        self.containers.start(vmid)

    def clear_workspace(self, vmid: int | None = None) -> None:
        """Empty the host directory behind /workspace of CT `vmid` (default: CT 200)."""
        folder = self.containers.specs[vmid or self.vmid_running].workspace_dir
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def container_state(self, vmid: int) -> str:
        """"RUNNING", "STOPPED" or "ABSENT" (lxc-info -s)."""
        return self.containers.state(vmid)

    def container_init_pid(self, vmid: int) -> int | None:
        """Host pid of the CT's init (what `lxc-info -n <vmid> -p -H` prints on the host)."""
        return self.containers.init_pid(vmid)

    def container_path(self, vmid: int, path: str) -> Path:
        """Host path of `path` inside CT `vmid`, for asserting on files the controller made."""
        if not path.startswith("/"):
            raise ValueError(f"container path must be absolute, got {path!r}")
        workspace = self.containers.specs[vmid].workspace_dir
        if path == "/workspace" or path.startswith("/workspace/"):
            return workspace / path[len("/workspace"):].lstrip("/")
        pid = self.containers.init_pid(vmid)
        if pid is not None:
            return Path(f"/proc/{pid}/root") / path.lstrip("/")
        return self.containers.rootfs(vmid) / path.lstrip("/")

    def container_host_pids(self, vmid: int) -> list[int]:
        """Host pids of every process in the CT (from its cgroup), e.g. to put one into a
        GPU scenario as a compute app: nvidia-smi reports host pids, also inside CTs."""
        pids: set[int] = set()
        top = self.ct_cgroup_dir(vmid, "memory")
        for procs in top.rglob("cgroup.procs") if top.is_dir() else []:
            pids.update(int(tok) for tok in procs.read_text().split())
        return sorted(pids)

    def ct_cgroup_dir(self, vmid: int, controller: str = "memory") -> Path:
        """Host cgroup directory of the CT (cgroup v1: `memory.oom_control` lives here)."""
        return self.containers.cgroup_dir(vmid, controller)

    def set_memory_limit(self, vmid: int, limit_mib: int) -> None:
        """Cap a running CT's memory (cgroup v1), e.g. to provoke a real OOM kill."""
        cg = self.ct_cgroup_dir(vmid, "memory")
        (cg / "memory.limit_in_bytes").write_text(str(limit_mib * 1024 * 1024))

    def make_small_workspace(self, size_kib: int) -> SmallWorkspace:
        """(Re)start CT 202 with /workspace on a fresh tmpfs of `size_kib` ("disk full")."""
        vmid = self.vmid_small
        host_dir = self.dir / f"small-workspace-{vmid}"
        if self._small is None:
            host_dir.mkdir(exist_ok=True)
            self._create_ct(vmid, host_dir)
        else:
            self.containers.stop(vmid)
            self._unmount(host_dir)
        self.rig.note_mount(host_dir)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs",
                        str(host_dir)], check=True, capture_output=True)
        self._mounts.append(host_dir)
        self.containers.start(vmid)
        self._small = SmallWorkspace(vmid=vmid, host_dir=host_dir, size_kib=size_kib)
        return self._small

    def add_container(self, vmid: int, extra_config: str = "") -> Path:
        """Create (once) and start another CT like CT 200 (its own /workspace dir, returned),
        with `extra_config` appended to its LXC config (e.g. `lxc.cap.drop = sys_ptrace`)."""
        workspace = self.dir / f"workspace-{vmid}"
        if vmid not in self.containers.specs:
            workspace.mkdir(exist_ok=True)
            self._create_ct(vmid, workspace)
            if extra_config:
                with open(self.lxcpath / str(vmid) / "config", "a") as conf:
                    conf.write(extra_config.rstrip("\n") + "\n")
        self.containers.start(vmid)
        return workspace

    def fabric_address(self, vmid: int) -> str:
        """The address a fabric CT of this host gets: 10.200.254.<10 x host index + vmid % 10>
        (host 1's CT 210 is .10, host 2's .20: for hosts 1-9 they sort in host order as strings
        too, and torchrun's c10d rendezvous numbers the nodes in that order)."""
        return f"{FABRIC_PREFIX}.{10 * self.index + vmid % 10}"

    def add_fabric_container(self, vmid: int = 210) -> str:
        """Create (once) and start CT `vmid` like CT 200, plus an eth0 on this host's vmbr0
        wired to the rig's fabric, so CTs of different hosts reach each other (only opt-in
        CTs: every other CT keeps loopback only). Returns its fabric address (no default
        route: nothing but the fabric is reachable from it)."""
        if self.backend != "lxc":
            raise RuntimeError(f"{self.name}: fabric CTs need the lxc backend (have {self.backend})")
        address = self.fabric_address(vmid)
        self.rig.join_fabric(self)
        # No lxc.net.0.link: LXC checks a bridge through /sys/class/net, and the host namespace
        # is entered with nsenter --net only (network.py), so that sysfs is the root one's. The
        # veth's host end gets a fixed name instead and is put on vmbr0 here, after the start.
        pair = f"veth{vmid}"
        self.add_container(vmid, extra_config="\n".join([
            "lxc.net.0.type = veth", f"lxc.net.0.veth.pair = {pair}", "lxc.net.0.name = eth0",
            "lxc.net.0.flags = up", f"lxc.net.0.ipv4.address = {address}/24"]))
        run_ip("-n", self.netns, "link", "set", pair, "master", "vmbr0")
        run_ip("-n", self.netns, "link", "set", pair, "up")
        return address

    def _unmount(self, path: Path) -> None:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
        if path in self._mounts:
            self._mounts.remove(path)

    # ---- GPUs -------------------------------------------------------------------------
    def set_gpus(self, gpus: list[FakeGpu]) -> None:
        """What nvidia-smi reports on this host and in its CTs from now on."""
        write_scenario(self.scenario_path, gpus)

    def set_nvidia_smi_failure(self, stdout: str = NVIDIA_SMI_FAILED, exit_code: int = 9) -> None:
        """Every nvidia-smi call prints `stdout` and exits `exit_code` (default: driver gone)."""
        write_scenario(self.scenario_path, [], failure={"stdout": stdout, "exit_code": exit_code})

    def set_nvidia_smi_raw(self, stdout: str, exit_code: int = 0) -> None:
        """Every query prints exactly `stdout` (garbage, truncated rows…)."""
        write_scenario(self.scenario_path, default_gpus(), raw={"stdout": stdout, "exit_code": exit_code})

    def reset_gpus(self) -> None:
        write_scenario(self.scenario_path, default_gpus())

    # ---- faults -----------------------------------------------------------------------
    def hide_tool(self, name: str) -> None:
        """Take `pct`, `nvidia-smi`, `lxc-info`… off this host's PATH (reset() brings it back)."""
        tool = self.bin_dir / name
        if not tool.exists() and not tool.is_symlink():
            raise FileNotFoundError(f"{self.name}: no tool {name!r} in {self.bin_dir}")
        tool.rename(self.bin_dir / f".hidden-{name}")

    def _restore_tools(self) -> None:
        for hidden in self.bin_dir.glob(".hidden-*"):
            hidden.rename(self.bin_dir / hidden.name[len(".hidden-"):])

    def link_down(self) -> None:
        """Black-hole the host's link: new connects and open sessions time out."""
        self.link.down()

    def link_up(self) -> None:
        self.link.up()

    def stop_sshd(self, *, drop_sessions: bool = True) -> None:
        """Kill sshd; by default its open sessions too (connects then get *refused*)."""
        self.sshd.stop(drop_sessions=drop_sessions)

    def start_sshd(self) -> None:
        if self.sshd.pid is None:
            self.sshd.start()

    def restart_sshd(self, *, drop_sessions: bool = True) -> None:
        self.sshd.stop(drop_sessions=drop_sessions)
        self.sshd.start()

    def sigstop_sshd(self) -> None:
        """Freeze the listener: TCP connects still complete, but no banner ever comes."""
        self.sshd.signal_listener(signal.SIGSTOP)

    def sigcont_sshd(self) -> None:
        self.sshd.signal_listener(signal.SIGCONT)

    def rekey(self) -> str:
        """Give sshd a new host key (restart, sessions kept); return the new public key line.

        The rig's known_hosts keeps the old key, so clients now see a *changed* key.
        """
        self.host_public_key = generate_key(self.host_key_path, f"root@{self.name}")
        self.restart_sshd(drop_sessions=False)
        return self.host_public_key

    def restore_host_key(self) -> None:
        if self.host_key_path.read_bytes() == self._original_key.read_bytes():
            return
        shutil.copy2(self._original_key, self.host_key_path)
        shutil.copy2(self._original_key.with_suffix(".orig.pub"), self.host_key_path.with_suffix(".pub"))
        self.host_public_key = self.host_key_path.with_suffix(".pub").read_text().strip()
        self.restart_sshd(drop_sessions=False)

    def reset(self) -> None:
        """Back to the healthy start state (link up, sshd answering with the original key,
        CT 200 running, CT 201 stopped, default GPUs). Cheap when nothing changed."""
        if not self.link.is_up():
            self.link.up()
        if self.sshd.pid is not None:
            os.kill(self.sshd.pid, signal.SIGCONT)
        self.restore_host_key()
        self._restore_tools()
        if self.sshd.pid is None:
            self.sshd.start()
        self.containers.start(self.vmid_running)
        self.containers.stop(self.vmid_stopped)
        self.reset_gpus()

    # ---- teardown ---------------------------------------------------------------------
    def teardown(self) -> None:
        errors = []
        for step in (self.containers.stop_all, lambda: self.sshd.stop(drop_sessions=True),
                     self._kill_namespace_processes, self.link.destroy, self._unmount_all):
            try:
                step()
            except Exception as exc:  # keep tearing down; report at the end
                errors.append(f"{self.name}: {exc}")
        if errors:
            raise RuntimeError("; ".join(errors))

    def _kill_namespace_processes(self) -> None:
        from tests.rig.network import netns_pids
        for pid in netns_pids(self.netns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _unmount_all(self) -> None:
        for path in list(self._mounts):
            self._unmount(path)

    def wait_for(self, predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: {what} not reached after {timeout_s:.0f} s")
            time.sleep(0.02)
