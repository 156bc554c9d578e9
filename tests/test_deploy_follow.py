"""`dfctl deploy --follow` on the local target: a run
that fails at argument parsing exits with the crash's code (4) and its argparse line is
printed; a healthy run is followed to its first step (exit 0), or to its end (--until end) --
these through dfctl's main() in-process (tests/cli_support.py: what the follow reports is
the point, not the child's start-up); Ctrl-C and SIGTERM through the real `dfctl` process,
whose signals they are."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli_support import dfctl_in_process
from tests.deploy_support import make_project, ticker_playbook, wait_for
from tests.test_watch import ROOT


def _deploy(root, pb, *args, home):
    return dfctl_in_process("deploy", str(pb), "--follow", *args, env={"DFCTL_HOME": str(home)}, cwd=root)


def test_follow_of_a_run_failing_at_argument_parsing_exits_with_the_crash_code(tmp_path, _dfctl_home):
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, args='"--stepz", "300"')
    p = _deploy(root, pb, home=_dfctl_home)
    assert p.returncode == 4, p.stdout + p.stderr                # was: deploy exit 0, a green launch
    assert "error: unrecognized arguments: --stepz 300" in p.stdout   # the argparse line, as the log has it
    assert "crash" in p.stderr


def test_follow_until_first_step_then_until_end(tmp_path, _dfctl_home):
    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, args='"--steps", "20", "--interval-s", "0.05"')
    p = _deploy(root, pb, home=_dfctl_home)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[progress] step=" in p.stdout and "first step reached" in p.stderr
    # the first run goes on after its first step: a second exclusive launch waits for its end
    # (else it is refused as "still alive", on a loaded machine)
    wait_for(lambda: all((d / "exit_code").exists() for d in (root / ".dfctl-local" / "runs").iterdir()),
             timeout_s=60, what="the first run's end")
    p = _deploy(root, pb, "--until", "end", home=_dfctl_home)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[progress] step=19" in p.stdout and "done" in p.stdout.splitlines()
    assert "ended finished, exit 0" in p.stderr
    bad = _deploy(root, pb, "--until", "forever", home=_dfctl_home)
    assert bad.returncode == 2 and bad.stderr.startswith("dfctl: error: --until 'forever'")


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_the_follow_not_the_run_and_says_how_to_watch_or_stop_it(tmp_path, _dfctl_home, sig):
    """Issue 26.5: Ctrl-C on `deploy --follow` said only "interrupted"; the run went on
    unsaid. Now: exit 130 still, the run named as going on, and the commands for it. SIGTERM
    (`timeout`, a closed pane's SIGHUP alike) unwinds the same way instead of dying unsaid."""
    import signal

    from controller.store.runstore import RunStore

    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root, args='"--steps", "100000", "--interval-s", "0.05"')
    env = {**os.environ, "DFCTL_HOME": str(_dfctl_home), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "controller", "deploy", str(pb), "--follow", "--until", "end"],
                         cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while "[progress] step=" not in (p.stdout.readline() or "[progress] step="):
            pass                                           # following: the log streams
        p.send_signal(getattr(signal, sig))                # SIGINT: what Ctrl-C sends
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        (rec,) = RunStore().runs()
        lines = err.splitlines()
        assert f"{rec.run_id}: only the follow was interrupted: the run goes on" in err
        assert f"dfctl:   watch it: dfctl watch {rec.run_id}" in lines
        assert f"dfctl:   stop it:  dfctl stop {rec.run_id}" in lines
        assert lines[-1] == "dfctl: interrupted"
        os.kill(rec.pid, 0)                                # the run lives on
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        stop = dfctl_in_process("stop", RunStore().runs()[0].run_id, "--grace-s", "2",
                                env={"DFCTL_HOME": str(_dfctl_home)}, cwd=root)
        assert stop.returncode == 0, stop.stderr
