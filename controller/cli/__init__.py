"""dfctl's command line: wiring only. Errors map to exit codes here and nowhere else.

Exit codes (README): 0 ok/healthy, 1 unexpected error, 2 bad input or usage,
3 cannot reach host/container, 4 a failure found (OOM, crash, hang),
5 throughput regression against the baseline.
"""

from __future__ import annotations

import sys

# Command modules register themselves on `app` when imported (one module per area); the
# import order is the order of `dfctl --help`.
# isort: off
from controller.cli import deploy_cmds as _deploy_cmds  # noqa: F401
from controller.cli import watch_cmds as _watch_cmds  # noqa: F401
from controller.cli import attach_cmds as _attach_cmds  # noqa: F401
from controller.cli import compare_cmds as _compare_cmds  # noqa: F401
from controller.cli import checklog_cmds as _checklog_cmds  # noqa: F401
# isort: on
from controller.cli.app import app
from controller.errors import DfctlError, one_line


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turn our errors into messages + exit codes."""
    try:
        app(args=argv, prog_name="dfctl")
    except DfctlError as exc:
        print(f"dfctl: error: {one_line(exc.message)}", file=sys.stderr)
        if exc.hint:
            print(f"dfctl: hint: {one_line(exc.hint)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("dfctl: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
