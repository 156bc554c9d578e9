"""What a run uses of its host, tick by tick: CPU (the process tree's ticks between two
readings), memory (its cgroup: the container's, or the run's own on a plain host) and the
GPUs that are its own.

GPU attribution: the GPUs whose compute apps are the run's processes (a container's pids
mapped through NSpid: probe/gpu_owners.pid_seen_from, shared with the scan), else the GPUs
its container uses, else every GPU seen (nothing better is known).
"""

from __future__ import annotations

from dataclasses import replace

from controller import judge
from controller.probe.gpu_owners import pid_seen_from
from controller.probe.procfs import cpu_pct
from controller.probe.readings import HostReading, RunReading
from controller.records import GpuSample, HostSample, ProcessState, RunState


class RunResources:
    """One run's share of its host: what it carries between ticks (the last CPU reading,
    the memory cgroup it was seen in) and the readings it turns into the run's state."""

    def __init__(self, run_id: str, vmid: int | None):
        self.run_id, self.vmid = run_id, vmid
        self.prev_cpu: tuple[int, float] | None = None
        self.cgroup_seen: dict | None = None     # {"version", "path"} of the run's memory cgroup (non-CT)

    def process(self, rd: RunReading, reading: HostReading) -> ProcessState:
        proc = rd.process
        if rd.tree_cpu_ticks is not None and reading.uptime_s is not None:
            prev_ticks, prev_uptime_s = self.prev_cpu or (None, None)
            proc.cpu_pct = cpu_pct(prev_ticks, prev_uptime_s, rd.tree_cpu_ticks, reading.uptime_s, reading.clk_tck)
            self.prev_cpu = (rd.tree_cpu_ticks, reading.uptime_s)
        return proc

    def host_sample(self, reading: HostReading, rd: RunReading) -> HostSample:
        """The host's sample with this run's memory cgroup figures."""
        hs = replace(reading.host)
        if self.vmid is not None:
            ct = reading.containers.get(self.vmid)
            cg = ct.cgroup if ct else None
        else:
            cg = rd.cgroup
            if cg is not None and cg.path and cg.version:
                self.cgroup_seen = {"version": cg.version, "path": cg.path}
        if cg is not None:
            hs.oom_kill_count, hs.mem_peak_bytes, hs.mem_limit_bytes = cg.oom_kill_count, cg.peak_bytes, cg.limit_bytes
        return hs

    def gpus(self, reading: HostReading, rd: RunReading) -> list[GpuSample]:
        """The GPUs this run uses, each labelled with who else uses it."""
        gpus = [replace(g, users=[]) for g in reading.host.gpus]
        if not gpus:
            return []
        by_uuid = {g.uuid: g for g in gpus}
        tree = set(rd.tree_pids)
        vmid = self.vmid
        mine, ct = set(), set()
        for p in reading.host.gpu_processes:
            g = by_uuid.get(p.gpu_uuid)
            if g is None:
                continue
            in_ct = vmid is not None and p.vmid == vmid
            if pid_seen_from(p.pid, p.vmid, reading.gpu_pid_nspids.get(p.pid), vmid) in tree:
                mine.add(p.gpu_uuid)
                continue                      # labelled by the run id below
            g.users.append(f"ct {p.vmid}" if p.vmid is not None else f"pid {p.pid}")
            if in_ct:
                ct.add(p.gpu_uuid)
        chosen = mine or ct
        for g in gpus:
            if g.uuid in mine:
                g.users = [self.run_id] + [u for u in g.users if not u.startswith("ct ")]
        return [g for g in gpus if g.uuid in chosen] if chosen else gpus


def note_gpu_use(st: RunState, now: float) -> None:
    """When the run's GPUs were first seen, and when each was last busy (gpu_idle's facts)."""
    if not st.gpus:
        return
    if st.gpus_seen_since_s is None:
        st.gpus_seen_since_s = now
    for g in st.gpus:
        if g.util_pct is not None and g.util_pct > judge.IDLE_UTIL_PCT:
            st.gpu_busy_seen_s[g.index] = now
