"""The Typer application object; command modules attach to it (wiring only)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="dfctl",
    help="Deploy, watch and compare long multi-GPU training runs on Proxmox/LXC hosts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def version() -> None:
    """Print dfctl's version."""
    from controller import __version__

    typer.echo(__version__)
