"""Is a run's pid in a CT still the run's process -- by the NODE's own /proc, not the CT's.

Whatever acts on a pct target's run from inside the CT (`py-spy dump` through `pct exec`,
the stop's signals) reads the CT's /proc to find and check its pid, and root in the CT can
mount a made-up /proc over it. So before acting: the node's /proc must show the pid as a
process of that CT -- with the recorded start time and pid namespace for an attached run
(pid + start time + namespace inode is one process; a pid alone may have been reused) --
and the CT's /proc must be procfs. One check for stacks, the watch's automatic dump and
stop (controller/ship/stacks.py, controller/watch/auto_stacks.py, controller/ship/launch.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.playbook import TargetConfig
from controller.store.runstore import RunRecord


@dataclass(frozen=True)
class NodeVerdict:
    """What the node's /proc says of the run's pid in its CT."""

    present: bool                   # the node shows the pid as a process of the CT (the run's, for an attached run)
    other_process: str | None       # the pid is there but another process holds it now (pid reuse)
    fake_proc: str | None           # the CT's /proc is not procfs: a command inside the CT would be lied to

    @property
    def refused(self) -> str | None:
        """Why nothing may act on the pid from inside the CT; None when it may."""
        return self.fake_proc or self.other_process


def check_on_node(target: TargetConfig, record: RunRecord, want_ns: str | None = None) -> NodeVerdict:
    """The run's pid as the node's own /proc shows it in CT `target.vmid`. `want_ns` is the
    pid namespace attach recorded (`pid:[inode]`); for an attached run the start time and
    that namespace must match. The reasons name the CT or the pid and say why."""
    from controller.probe.scan import scan_target

    report = scan_target(target, (int(target.vmid or 0),), pids=(int(record.pid or 0),), gpu=False)
    bad_proc = [e for e in report.errors if "is not procfs" in e or "cannot be checked to be procfs" in e]
    fake = (f"{bad_proc[0].split(': ', 1)[-1]}; a command inside the CT would read what the container put there"
            if bad_proc else None)
    now = next((p for p in report.processes if p.pid == record.pid and p.vmid == target.vmid), None)
    if now is None:
        return NodeVerdict(present=False, other_process=None, fake_proc=fake)
    if record.origin == "attached" and (
            (record.pid_start_ticks is not None and now.start_ticks != record.pid_start_ticks)
            or (want_ns and now.pid_ns != want_ns)):
        return NodeVerdict(present=False, fake_proc=fake, other_process=(
            f"pid {record.pid} now belongs to another process (started at tick {now.start_ticks}, {now.pid_ns}; "
            f"the run's at tick {record.pid_start_ticks}, {want_ns})"))
    return NodeVerdict(present=True, other_process=None, fake_proc=fake)
