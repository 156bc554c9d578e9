"""`dfctl ARGV` run through the CLI's own main() in the test's process, for tests whose point
is what a command does, not the CLI process itself (a child's start-up costs ~1 s of a loaded
2-core machine a call). Tests about the process -- its start-up, its signals, what a secret
leaves in a child's output -- keep a real child."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dfctl_in_process(*argv: str, env: dict[str, str] | None = None,
                     cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`dfctl ARGV` as a child would run it: `env` over this process's environment (restored
    after), `cwd` (the checkout by default) as the working directory, stdout a pipe (no terminal), cached
    connections closed after; its exit code and output as subprocess.run gives them."""
    from controller.cli import main
    from controller.transport.factory import close_all

    env = env or {}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)
    err = io.StringIO()
    code = 0
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        close_all()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out.flush()
    return subprocess.CompletedProcess(["dfctl", *argv], code, out.buffer.getvalue().decode(errors="replace"),
                                       err.getvalue())
