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
    config = {"lr": 1e-3, "nan_check": True}
    if mode == "tempting":
        config.update(output_dir="runs/error-analysis-oom", skip_nan=True, on_error="retry", max_restarts=3)
    run = wandb.init(project="corpus", mode="offline", config=config)
    loss = 2.0
    for step in range(1, 31):
        loss = loss * 0.95
        if mode == "nan" and step >= 20:
            loss = math.nan
        row = {"loss": loss, "tok_per_s": 10000.0 + step}
        if mode == "tempting":
            row.update(nan_steps=0, error_rate=0.01, grad_norm=0.0 if step < 3 else 1.5, skipped=2 if step < 3 else 0)
        run.log(row, step=step)
        if mode == "sigkill" and step == 22:
            import os
            import signal
            os.kill(os.getpid(), signal.SIGKILL)
        if step % 5 == 0:
            print(f"step={step} loss={loss:.4f} tok_per_s={10000 + step}", flush=True)
        if mode == "crash" and step == 17:
            raise ConnectionError("dataset server closed the stream at shard 17")
    run.finish()


if __name__ == "__main__":
    main()
