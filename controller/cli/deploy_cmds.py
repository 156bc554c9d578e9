"""CLI commands of the deploy area (placeholder until its issue lands)."""

from controller.cli.app import app  # noqa: F401
