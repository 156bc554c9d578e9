"""The Typer application object; command modules attach to it (wiring only)."""

from __future__ import annotations

from typing import Optional

import typer

app = typer.Typer(
    name="dfctl",
    help="Deploy, watch and compare long multi-GPU training runs on Proxmox/LXC hosts.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,   # plain Click help: greppable, the metavars as written (conventions.py)
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from controller import __version__

        typer.echo(f"dfctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_print_version, is_eager=True,
                                           help="Print dfctl's version and exit."),
) -> None:
    """Deploy, watch and compare long multi-GPU training runs on Proxmox/LXC hosts."""


@app.command()
def version() -> None:
    """Print dfctl's version."""
    from controller import __version__

    typer.echo(__version__)
