"""Which process a GPU compute app is, as seen from where a run lives: the one rule of GPU
attribution, used by the watch (which GPUs a run uses) and by the scan (which GPUs each found
process holds), so the two never disagree about the same nvidia-smi row.

nvidia-smi runs on the node and reports node pids; a container's process has another pid
inside its own pid namespace, the last of the NSpid list the probe reads from the node's
/proc/<pid>/status (FIELD-NOTES). A host-side view (vmid None) names processes by node pid.
"""
from __future__ import annotations


def pid_seen_from(app_pid: int, app_vmid: int | None, nspids: list[int] | None, vmid: int | None) -> int | None:
    """The GPU app's pid as seen from container `vmid` (None: the node itself), or None when
    the app lives in another container and so cannot be any process seen from there."""
    if vmid is None:
        return app_pid
    if app_vmid != vmid:
        return None
    return int(nspids[-1]) if nspids else app_pid
