"""A training loop logging to wandb in offline mode (corpus generator program).

Usage: python wandb_run.py MODE (run with WANDB_MODE=offline and WANDB_DIR set by the
caller). MODE: healthy, nan (loss turns NaN; wandb's closing summary prints it),
crash (an exception while the run is live).
"""

from __future__ import annotations

import math
import sys

import wandb


def main() -> None:
    mode = sys.argv[1]
    run = wandb.init(project="corpus", mode="offline", config={"lr": 1e-3, "nan_check": True})
    loss = 2.0
    for step in range(1, 31):
        loss = loss * 0.95
        if mode == "nan" and step >= 20:
            loss = math.nan
        run.log({"loss": loss, "tok_per_s": 10000.0 + step}, step=step)
        if step % 5 == 0:
            print(f"step={step} loss={loss:.4f} tok_per_s={10000 + step}", flush=True)
        if mode == "crash" and step == 17:
            raise ConnectionError("dataset server closed the stream at shard 17")
    run.finish()


if __name__ == "__main__":
    main()
