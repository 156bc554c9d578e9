"""A wandb run's numbers, from its offline .wandb file or the wandb API."""
