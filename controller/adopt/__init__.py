"""Runs dfctl did not start: scan a target, attach to a run, import a finished one."""
