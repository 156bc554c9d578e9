"""dfctl's bundled DFlash drafter trainer. Imports nothing from controller/.

Modules: config (presets), synth (synthetic Arrow data), data (memory-mapped dataset, buckets,
host batches), dflash_mask, model (target + drafter), loss, pipeline (threads and queues),
replicas (in-sync drafter replicas), metrics (progress lines, metrics.jsonl, wandb),
checkpoint, train (CLI). Run it with `python -u -m trainer --help`.
"""
