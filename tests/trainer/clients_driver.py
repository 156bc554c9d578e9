"""The test side of tests/trainer/clients/command_server.py: one clients' process per script
and test session (a pytest-xdist worker is a session), started at the first command.

Each command is one JSON line to the server's stdin and one reply line back; a failed
command fails the test with the client's traceback, a dead server with its stderr's tail.
"""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PY = ROOT / ".venv-clients" / "bin" / "python"
COMMAND_TIMEOUT_S = 600


class ClientServer:
    """`script --serve` in the clients' venv, its stderr in `work_dir/<script>.stderr`."""

    def __init__(self, script: Path, work_dir: Path, env: dict[str, str]):
        self.script, self.work_dir, self.env = script, work_dir, env
        self.stderr_path = work_dir / f"{script.stem}.stderr"
        self.proc: subprocess.Popen | None = None

    def _started(self) -> subprocess.Popen:
        if self.proc is None:
            if not CLIENTS_PY.exists():
                pytest.fail(f"{CLIENTS_PY} missing: run scripts/setup.sh (it makes the clients' venv)")
            with open(self.stderr_path, "ab") as err:
                self.proc = subprocess.Popen([str(CLIENTS_PY), str(self.script), "--serve"], cwd=self.work_dir,
                                             env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=err, text=True)
        return self.proc

    def __call__(self, *args: str) -> None:
        proc = self._started()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps([str(a) for a in args]) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if time.monotonic() >= deadline:
                self.close()                     # its late reply must not answer the next command
                pytest.fail(f"{self.script.name} {args[0]}: no reply in {COMMAND_TIMEOUT_S} s")
        line = proc.stdout.readline()
        if not line:
            self.close()                         # the next command starts a new one
            tail = self.stderr_path.read_text(errors="replace")[-4000:]
            pytest.fail(f"{self.script.name} exited ({proc.returncode}) during {args[0]}:\n{tail}")
        reply = json.loads(line)
        assert reply["ok"], reply["error"][-4000:]

    def close(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        # every command's files were written before its reply: nothing is lost by not
        # waiting out the interpreter's (torch's, transformers') seconds-long teardown
        self.proc.kill()
        self.proc.wait()
        self.proc = None


def client_env(**extra: str) -> dict[str, str]:
    """What a client runs with: no inherited venv or PYTHONPATH, one intra-op thread (2
    shared cores), no network for the hub."""
    return {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **extra}
