"""dfctl's command line: wiring only. Errors map to exit codes here and nowhere else.

Exit codes (README): 0 ok/healthy, 1 unexpected error, 2 bad input or usage,
3 cannot reach host/container, 4 a failure found (OOM, crash, hang),
5 throughput regression against the baseline, 130 interrupted (Ctrl-C, SIGTERM, SIGHUP).

Every failure prints `dfctl: error: …` (and maybe `dfctl: hint: …`) on stderr, one line
each -- Click's own usage errors included, so a script greps one shape; with `--json` on
the line the same failure is also one `{"error": {"code": N, "message": …}}` document on
stdout, so a JSON consumer never has to parse stderr.
"""

from __future__ import annotations

import json
import sys

import typer

# Command modules register themselves on `app` when imported (one module per area); the
# import order is the order of `dfctl --help`.
# isort: off
from controller.cli import deploy_cmds as _deploy_cmds  # noqa: F401
from controller.cli import watch_cmds as _watch_cmds  # noqa: F401
from controller.cli import metrics_cmds as _metrics_cmds  # noqa: F401
from controller.cli import attach_cmds as _attach_cmds  # noqa: F401
from controller.cli import compare_cmds as _compare_cmds  # noqa: F401
from controller.cli import checklog_cmds as _checklog_cmds  # noqa: F401
# isort: on
from controller.cli.app import app
from controller.errors import EXIT_BAD_INPUT, DfctlError, one_line

EXIT_INTERRUPTED = 130


def _wants_json(argv: list[str]) -> bool:
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def fail(code: int, message: str, hint: str | None, *, json_doc: bool) -> None:
    """Report one failure the one way (stderr lines, plus the JSON document) and exit."""
    if json_doc:
        doc = {"error": {"code": code, "message": message, **({"hint": hint} if hint else {})}}
        print(json.dumps(doc, ensure_ascii=False), flush=True)
    print(f"dfctl: error: {one_line(message)}", file=sys.stderr)
    if hint:
        print(f"dfctl: hint: {one_line(hint)}", file=sys.stderr)
    sys.exit(code)


def _usage_hint(exc: typer.TyperException) -> str | None:
    """A usage error (Click's, exit 2) points at the help of the command it came from."""
    ctx = getattr(exc, "ctx", None)
    if getattr(exc, "exit_code", 1) != EXIT_BAD_INPUT:
        return None
    path = ctx.command_path if ctx is not None else "dfctl"
    return f"`{path} --help` shows the usage, examples and exit codes"


def command():
    """The Click command tree of `app`, with the shared conventions applied (conventions.py)."""
    from controller.cli import conventions

    return conventions.apply(typer.main.get_command(app))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turn our errors into messages + exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(args)
    try:
        from controller.userconfig import default_map, load_user_config

        rv = command().main(args=args, prog_name="dfctl", standalone_mode=False,
                            default_map=default_map(load_user_config()))
    except DfctlError as exc:
        fail(exc.exit_code, exc.message, exc.hint, json_doc=as_json)
    except typer.TyperException as exc:   # Click's usage errors (vendored by Typer) and the like
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:   # bare `dfctl`
            print(ctx.get_help())
            sys.exit(EXIT_BAD_INPUT)
        fail(getattr(exc, "exit_code", 1), exc.format_message(), _usage_hint(exc), json_doc=as_json)
    except (typer.Abort, KeyboardInterrupt):
        rv = EXIT_INTERRUPTED
    code = rv if isinstance(rv, int) else 0
    if code == EXIT_INTERRUPTED:   # Typer turns KeyboardInterrupt into Exit(130)
        print("dfctl: interrupted", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
