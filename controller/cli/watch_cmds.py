"""CLI commands of the watch area (placeholder until its issue lands)."""

from controller.cli.app import app  # noqa: F401
