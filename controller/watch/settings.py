"""The watch's settings, resolved once from the playbooks and the CLI flags.

Why one object: `--interval` used to set only the CLI loop's sleep while the watch kept
each playbook's `watch.interval_s` for how long a tick waits for a slow host, how often
the agent samples GPUs and how fast a failed host is retried -- two owners of one
setting. Everything that depends on the interval derives from `interval_s` here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from controller.playbook import WatchConfig
from controller.probe import DEFAULT_READ_CAP_BYTES

BACKOFF_MAX_S = 15.0
AGENT_IDLE_INTERVALS = 10
"""An agent that gets no request for this many intervals (at least AGENT_IDLE_MIN_S) exits."""
AGENT_IDLE_MIN_S = 30.0


@dataclass(frozen=True)
class WatchSettings:
    """How one watch ticks (one value for every run it watches)."""

    interval_s: float = 2.0            # seconds between ticks; the CLI loop's sleep too
    tick_wait_s: float = 4.0           # how long a tick waits for a slow host before moving on
    probe_timeout_s: float = 30.0      # one probe round trip (and a never-reached host's first try)
    read_cap_bytes: int = DEFAULT_READ_CAP_BYTES
    gpu: bool = True                   # read nvidia-smi
    nvidia_smi: str = "nvidia-smi"
    gpu_apps_every_s: float = 10.0     # --query-compute-apps (per-process GPU attribution) this often
    lxcpath: str | None = None         # `lxc-info -P` (test rigs keep one per fake host)
    force_pct: bool = False            # skip the host view of a CT's files (bench: the fallback)
    persistent: bool = True            # a long-lived probe agent per host (else one-shot per tick)
    backoff_max_s: float = BACKOFF_MAX_S
    agent_idle_exit_s: float = AGENT_IDLE_MIN_S
    auto_stacks: bool = True           # a py-spy dump of a run found hung / its log stale (off the tick)
    auto_stacks_deadline_s: float = 60.0

    @property
    def gpu_every_s(self) -> float:
        """The agent's background GPU sampling period: one sample per tick."""
        return self.interval_s

    def backoff_s(self, failures: int) -> float:
        """How long a host that failed `failures` times in a row waits before the next try."""
        return min(self.backoff_max_s, self.interval_s * (2 ** max(0, failures - 1)))


def resolve_settings(configs: Iterable[WatchConfig], *, interval_s: float | None = None,
                     tick_wait_s: float | None = None, agent_idle_exit_s: float | None = None,
                     **fixed) -> WatchSettings:
    """The one WatchSettings: the CLI's `--interval` if given, else the shortest of the
    playbooks' `watch.interval_s`; everything derived from it unless given explicitly."""
    interval = interval_s if interval_s is not None else min((c.interval_s for c in configs), default=2.0)
    return WatchSettings(
        interval_s=interval,
        tick_wait_s=tick_wait_s if tick_wait_s is not None else max(2.0, 2 * interval),
        agent_idle_exit_s=agent_idle_exit_s if agent_idle_exit_s is not None
        else max(AGENT_IDLE_MIN_S, AGENT_IDLE_INTERVALS * interval),
        **fixed)
