"""wandb online against a server that is not there (corpus generator program).

Run with WANDB_BASE_URL pointing at a closed loopback port and a dummy WANDB_API_KEY:
wandb's own error when its server cannot be reached, as a rank-0 that logs to wandb
meets it (loopback only; nothing leaves the machine)."""

import wandb

run = wandb.init(project="corpus", mode="online", settings=wandb.Settings(init_timeout=15))
for step in range(1, 11):
    run.log({"loss": 1.0 / step}, step=step)
run.finish()
