"""Drive a command in a real terminal: a detached tmux session of fixed size.

For tests of full-screen programs (`dfctl watch`, `python -m controller.view.dashboard`): start
the command in a private tmux server (its own socket, no user config, no status bar, so the
pane is exactly width x height), read the screen with `capture-pane`, wait for text with a
deadline (polling, never fixed sleeps), send keys, and read the exit status -- the pane is
kept after the command exits (`remain-on-exit`) so the last screen can still be read.

    with TmuxScreen(["dfctl", "watch", "demo"], width=80, height=24) as term:
        screen = term.wait_for("findings", timeout_s=60)
        term.send_keys("q")
        assert term.wait_exit(timeout_s=20) == 0
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_counter = itertools.count()

# The pane runs this small wrapper, which runs the command and writes its exit status to a
# file: tmux 3.3 sometimes marks a pane dead without recording the status (seen here for
# commands that exit within a second), so the file is the authoritative source. The
# wrapper ignores SIGINT (Ctrl-C reaches the command, which gets the default handler
# back) so it outlives the command and can record how it ended (128+N for signal N).
_WRAPPER = r"""
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
proc = subprocess.Popen(sys.argv[2:], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
code = proc.wait()
code = code if code >= 0 else 128 - code
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(code))
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
sys.exit(code)
"""


class TmuxScreen:
    """One command in one tmux pane of a fixed size, on a private tmux server."""

    def __init__(self, command: list[str] | str, *, width: int = 80, height: int = 24,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None):
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed (scripts/setup.sh installs it)")
        self.argv = ["sh", "-c", "exec " + command] if isinstance(command, str) else list(command)
        self.width, self.height = width, height
        self.env = dict(env or {})
        self.cwd = str(cwd) if cwd else os.getcwd()
        self.socket = f"dfctl-test-{os.getpid()}-{next(_counter)}"
        self.session = "screen"
        self._conf_dir = tempfile.mkdtemp(prefix="tmux-screen-")
        self._status_file = Path(self._conf_dir) / "exit_status"
        self._started = False

    # -- plumbing ---------------------------------------------------------------------
    def _tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=30)

    def start(self) -> "TmuxScreen":
        conf = Path(self._conf_dir) / "tmux.conf"
        # Read before the pane starts: no race with a command that exits at once.
        conf.write_text("set -g remain-on-exit on\nset -g status off\nset -g history-limit 5000\n"
                        f"set -g default-size {self.width}x{self.height}\n")
        env_args: list[str] = []
        for key, value in {"TERM": "xterm-256color", **self.env}.items():
            env_args += ["-e", f"{key}={value}"]
        subprocess.run(["tmux", "-L", self.socket, "-f", str(conf), "new-session", "-d",
                        "-s", self.session, "-x", str(self.width), "-y", str(self.height),
                        "-c", self.cwd, *env_args,
                        shlex.join([sys.executable, "-S", "-c", _WRAPPER, str(self._status_file), *self.argv])],
                       check=True, capture_output=True, text=True, timeout=30)
        self._started = True
        return self

    def close(self) -> None:
        if self._started:
            self._tmux("kill-server", check=False)
            self._started = False
        shutil.rmtree(self._conf_dir, ignore_errors=True)

    def __enter__(self) -> "TmuxScreen":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what tests use ---------------------------------------------------------------
    def capture(self, *, with_escapes: bool = False) -> str:
        """The visible screen as text (lines joined by newlines, trailing blanks kept out)."""
        args = ["capture-pane", "-p", "-t", self.session]
        if with_escapes:
            args.append("-e")
        return self._tmux(*args).stdout

    def lines(self) -> list[str]:
        return self.capture().split("\n")[: self.height]

    def wait_for(self, pattern: str, *, timeout_s: float = 60.0, regex: bool = False,
                 poll_s: float = 0.1) -> str:
        """Poll the screen until `pattern` shows (plain text or a regex); return the screen.

        On timeout, raise AssertionError carrying the last screen, so a failure shows what
        the terminal looked like instead of just "not found".
        """
        deadline = time.monotonic() + timeout_s
        rx = re.compile(pattern) if regex else None
        screen = ""
        while True:
            screen = self.capture()
            if (rx.search(screen) if rx else pattern in screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not on screen after {timeout_s:.0f}s; screen:\n{screen}")
            time.sleep(poll_s)

    def send_keys(self, *keys: str, literal: bool = False) -> None:
        """tmux key names ("q", "C-c", "Up", "Enter") or, with literal=True, plain text."""
        self._tmux("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys)

    def exit_status(self) -> int | None:
        """The command's exit status once it has exited, else None; killed by signal N:
        128 + N (as a shell reports it)."""
        try:
            return int(self._status_file.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def wait_exit(self, *, timeout_s: float = 30.0, poll_s: float = 0.1) -> int:
        """Wait for the command to exit; return its status (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.exit_status()
            if status is not None:
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"command still running after {timeout_s:.0f}s; screen:\n{self.capture()}")
            time.sleep(poll_s)

    def size(self) -> tuple[int, int]:
        """The pane's (width, height) as tmux reports it."""
        w, h = self._tmux("display-message", "-p", "-t", self.session, "#{pane_width} #{pane_height}").stdout.split()
        return int(w), int(h)
