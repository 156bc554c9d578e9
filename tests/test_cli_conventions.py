"""The CLI conventions people expect, asserted through the real `dfctl` process: -h,
--version, shell completion, an Examples block and the exit codes (130 included) in each
--help, plain metavars, Click's usage errors in dfctl's one-line error/hint style, and one
JSON error document on stdout for a failing --json command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_watch import ROOT

COMMANDS = ["deploy", "runs", "logs", "stop", "prune", "doctor", "watch", "export-metrics", "check-log", "compare-runs",
            "import", "version"]


def dfctl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "100", **(env or {})})


def test_h_is_help_and_version_prints_the_version():
    long, short = dfctl("--help"), dfctl("-h")
    assert long.returncode == short.returncode == 0 and long.stdout == short.stdout
    assert "Usage: dfctl [OPTIONS] COMMAND" in short.stdout and "130 interrupted" in short.stdout
    from controller import __version__
    v = dfctl("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"dfctl {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_help_has_examples_exit_codes_and_plain_metavars(command):
    p = dfctl(command, "-h")
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "Examples:\n" in text and f"$ dfctl {command}" in text
    assert "130 interrupted" in text and "4 a failure found" in text
    for typer_form in ("<bool>", "<str>", "<path>", "<list", "<float", "{", "}"):
        assert typer_form not in text, (typer_form, text)


def test_plain_metavars_and_dashboard_keys_in_watch_help():
    text = dfctl("watch", "-h").stdout
    assert "Usage: dfctl watch [OPTIONS] [RUN]..." in text
    assert "--interval INTERVAL" in text and "--once  " in text
    assert "Dashboard keys" in text and "q or Esc quit" in text and "Tab" in text
    assert "Usage: dfctl deploy [OPTIONS] PLAYBOOK" in dfctl("deploy", "-h").stdout


def test_shell_completion_script_and_answers():
    script = dfctl("--show-completion", "bash", env={"SHELL": "/bin/bash"})
    assert script.returncode == 0 and "_dfctl_completion" in script.stdout and "complete" in script.stdout
    words = dfctl(env={"_DFCTL_COMPLETE": "complete_bash", "COMP_WORDS": "dfctl wat", "COMP_CWORD": "1"})
    assert words.returncode == 0 and words.stdout.split() == ["watch"]


def test_click_usage_errors_in_the_one_line_style():
    p = dfctl("watch", "--bogus")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == ["dfctl: error: No such option: --bogus",
                                     "dfctl: hint: `dfctl watch --help` shows the usage, examples and exit codes"]
    p = dfctl("compare-runs")
    assert p.returncode == 2 and p.stderr.splitlines()[0] == "dfctl: error: Missing argument 'RUN...'."
    p = dfctl("logs", "x", "--tail", "many")
    assert p.returncode == 2 and p.stderr.startswith("dfctl: error: Invalid value for '--tail' / '-n'") and len(p.stderr.splitlines()) == 2


def test_json_failure_is_one_error_document_on_stdout_plus_the_stderr_line(tmp_path):
    env = {"DFCTL_HOME": str(tmp_path / "home")}
    for argv in (("watch", "no-such-run", "--once", "--json"), ("runs", "--json", "--bogus"),
                 ("compare-runs", "no-such-run", "--json")):
        p = dfctl(*argv, env=env)
        assert p.returncode == 2, (argv, p.stderr)
        doc = json.loads(p.stdout)                          # exactly one document
        assert set(doc) == {"error"} and doc["error"]["code"] == 2
        assert p.stderr.splitlines()[0] == f"dfctl: error: {doc['error']['message']}"
