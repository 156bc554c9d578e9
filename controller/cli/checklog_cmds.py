"""CLI command `dfctl check-log` (placeholder until its issue lands)."""

from controller.cli.app import app  # noqa: F401
