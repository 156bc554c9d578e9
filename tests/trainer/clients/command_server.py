"""The one entry point of the clients' scripts (speculators_check.py, dflash_check.py), run
inside the clients' venv: a command from argv (`script.py make-target DIR THETA`, by hand),
or `script.py --serve`: commands read one JSON list a line from stdin, each answered by
one JSON line on the original stdout ({"ok": true} or {"ok": false, "error": traceback}).

Why a server: importing speculators, specforge or dflash with transformers 5 takes several
CPU seconds, and the tests ask for a dozen commands; one process per test session pays that
once (tests/trainer/clients_driver.py). Library output goes to stderr, so it cannot break a
reply line.
"""

import json
import os
import sys
import traceback
from typing import Callable


def main(commands: dict[str, Callable[..., None]]) -> None:
    args = sys.argv[1:]
    if args != ["--serve"]:
        cmd, *rest = args
        if cmd not in commands:
            raise SystemExit(f"unknown command {cmd!r}")
        commands[cmd](*rest)
        return
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                                   # what the libraries print lands on stderr
    sys.stdout = sys.stderr
    for line in sys.stdin:
        cmd, *rest = json.loads(line)
        try:
            if cmd not in commands:
                raise KeyError(f"unknown command {cmd!r}")
            commands[cmd](*rest)
            reply = {"ok": True}
        except Exception:                           # the test reads the traceback: the server goes on
            reply = {"ok": False, "error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
