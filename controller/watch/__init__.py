"""The tick: HostPoller (per host) and RunFollower (per run), composed by Watch.

    settings.py   WatchSettings: resolved once from the playbooks and the CLI flags
    poller.py     HostPoller: transport, agent or one-shot probe, back-off, health -> HostReading
    follower.py   RunFollower: cursor -> follow log / metrics / wandb -> attribute GPUs -> judge
    progress.py   progress samples of three sources merged into one history
    tick.py       Watch: the pollers, the followers, the schedule
"""

from controller.store.runstore import target_of as target_config_from  # the old name; runstore.target_of is the one
from controller.watch.follower import LOG_CONTEXT_BYTES, LOG_TAIL_LEN, RunFollower
from controller.watch.poller import HostHealth, HostPoller
from controller.watch.settings import WatchSettings, resolve_settings
from controller.watch.tick import TickReport, Watch

__all__ = ["LOG_CONTEXT_BYTES", "LOG_TAIL_LEN", "HostHealth", "HostPoller", "RunFollower", "TickReport",
           "Watch", "WatchSettings", "resolve_settings", "target_config_from"]
