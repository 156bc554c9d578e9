"""Where dfctl gets a wandb run's numbers: the offline `.wandb` file or the wandb API.

Two ideas, two modules (this one only gathers their public names for callers):
- controller.wandb_io.offline_reader: incremental reader of the `.wandb` transaction log.
- controller.wandb_io.api_poller: poller of an online run through `wandb.Api()`, bounded retries,
  never blocking the watch tick.
Both return the shapes of controller.wandb_io.batch (WandbBatch, WandbRunData).
"""

from controller.wandb_io.api_poller import ApiPoller, fetch_run, parse_run_path
from controller.wandb_io.batch import WandbBatch, WandbRunData, progress_from_row
from controller.wandb_io.offline_reader import (
    OfflineRunReader,
    decode_frames,
    find_offline_runs,
    read_offline_run,
    resolve_wandb_file,
)

__all__ = [
    "WandbBatch", "WandbRunData", "progress_from_row",
    "OfflineRunReader", "decode_frames", "find_offline_runs", "read_offline_run",
    "resolve_wandb_file",
    "ApiPoller", "fetch_run", "parse_run_path",
]
