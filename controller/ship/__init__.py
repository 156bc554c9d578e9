"""Shipping a run: bundle, deploy, launch, stop, replace, prune; a job of several nodes; doctor's checks."""
