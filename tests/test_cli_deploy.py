"""The deploy-area commands end to end on the local target, run in-process through
controller.cli.main (exit codes included): deploy --dry-run/--json, runs, logs, stop, doctor."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.deploy_support import dfctl, make_project, only_error_doc, session_members, ticker_playbook, wait_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj", git=True)
    monkeypatch.chdir(root)
    return root, ticker_playbook(root)


def test_deploy_runs_logs_stop(project, capsys, monkeypatch):
    root, pb = project
    code, out, _ = dfctl(capsys, "deploy", str(pb), "--dry-run")
    assert code == 0 and "tar -x -f -" in out and "launch" in out and "sha256sum -c" in out
    assert not (root / ".dfctl-local").exists()                      # a dry run changes nothing

    monkeypatch.setenv("WANDB_API_KEY", "cli-secret-123")
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--name", "clirun")
    assert code == 0, err
    doc = json.loads(out)
    run = doc["run"]
    assert run["run_id"].startswith("clirun-") and doc["release"]["transferred_bytes"] > 0
    assert "cli-secret-123" not in out + err

    code, out, _ = dfctl(capsys, "runs", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["run_id"] == run["run_id"] and rows[0]["state"] == "running"
    assert rows[0]["git_commit"] and rows[0]["git_dirty"] is True     # pb.toml is untracked

    wait_for(lambda: os.path.getsize(run["log"]) > 100, what="log output")
    code, out, _ = dfctl(capsys, "logs", "clirun", "--tail", "2")
    assert code == 0 and len(out.splitlines()) == 2 and "[progress] step=" in out

    code, out, err = dfctl(capsys, "stop", "clirun", "--grace-s", "5", "--json")
    assert code == 0, err
    assert json.loads(out)["left"] == [] and session_members(run["pid"]) == []
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert json.loads(out)[0]["state"] == "stopped"

    # logs -f of an ended run prints the rest and returns
    code, out, _ = dfctl(capsys, "logs", run["run_id"], "-f", "--tail", "1")
    assert code == 0 and out.count("\n") >= 1

    # an unchanged redeploy without launch transfers nothing
    code, out, _ = dfctl(capsys, "deploy", str(pb), "--no-launch", "--json")
    assert code == 0 and json.loads(out)["release"]["transferred_bytes"] == 0


def test_a_second_run_on_a_busy_target_is_refused_unless_replace(project, capsys):
    """The seeds' loop (kill the old run, patch, relaunch) as one command: deploy refuses to
    put a second run on a target whose run is alive (exit 2, nothing pushed or launched);
    --replace pushes the new release, stops the old run, then launches; exclusive = false
    allows runs side by side."""
    root, pb = project
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    first = json.loads(out)
    a = first["run"]
    releases = root / ".dfctl-local" / "releases"
    before = sorted(p.name for p in releases.iterdir())
    (root / "ticker" / "patch.py").write_text("FIX = 1\n")               # the patch of the next iteration
    code, out, err = dfctl(capsys, "deploy", str(pb), "--name", "next")
    assert code == 2 and out == "" and "Traceback" not in err
    assert a["run_id"] in err and "still alive" in err and "--replace" in err and "dfctl stop" in err
    assert sorted(p.name for p in releases.iterdir()) == before        # nothing pushed
    assert session_members(a["pid"])                                   # nor stopped
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [a["run_id"]]     # nor launched
    code, out, _ = dfctl(capsys, "deploy", str(pb), "--dry-run", "--replace", "--json")
    assert code == 0 and json.loads(out)["would_stop"] == [a["run_id"]] and session_members(a["pid"])

    code, out, err = dfctl(capsys, "deploy", str(pb), "--name", "next", "--replace", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [s["run_id"] for s in doc["stopped"]] == [a["run_id"]] and "SIGTERM" in doc["stopped"][0]["signals"]
    assert session_members(a["pid"]) == []
    assert doc["release"]["release_id"] != first["release"]["release_id"] and doc["run"]["run_id"].startswith("next-")
    assert session_members(doc["run"]["pid"])
    code, out, _ = dfctl(capsys, "runs", "--json")
    states = {r["run_id"]: r["state"] for r in json.loads(out)}
    assert states == {a["run_id"]: "stopped", doc["run"]["run_id"]: "running"}

    # the replaced run is reported as stopped by the deploy, not as a crash
    code, out, _ = dfctl(capsys, "watch", a["run_id"], "--once", "--json")
    w = json.loads(out)["runs"][0]
    assert code == 0 and w["state"] == "stopped"
    assert (w["process"]["stopped_by"], w["process"]["replaced_by"]) == ("dfctl deploy --replace", doc["run"]["run_id"])
    assert [f["kind"] for f in w["findings"]] == []
    from controller.cli.watch_cmds import closing_lines
    from controller.store.runstore import RunStore
    from controller.watch import Watch

    store = RunStore()
    watch = Watch([store.get_run(a["run_id"])], store, gpu=False)
    try:
        watch.tick()
        nxt = doc["run"]["run_id"]
        assert f"  replaced by {nxt}: dfctl watch {nxt} · dfctl compare-runs {a['run_id']} {nxt}" in closing_lines(watch.states)
    finally:
        watch.close()
        store.close()

    side = ticker_playbook(root, name="side", extra_run="exclusive = false")
    code, out, err = dfctl(capsys, "deploy", str(side), "--json")
    assert code == 0, err
    c = json.loads(out)["run"]
    assert session_members(c["pid"]) and session_members(doc["run"]["pid"])   # side by side
    for rid in (doc["run"]["run_id"], c["run_id"]):
        assert dfctl(capsys, "stop", rid, "--grace-s", "5")[0] == 0


def test_a_run_that_ended_unseen_does_not_block_the_next_deploy(project, capsys):
    """The registry still says `running` for a run that ended while nobody watched: deploy
    asks the target, finds it gone, records how it ended, and launches."""
    from controller.store.runstore import RunStore

    root, pb = project
    short = ticker_playbook(root, name="short", args='"--steps", "3"')
    code, out, err = dfctl(capsys, "deploy", str(short), "--json")
    assert code == 0, err
    first = json.loads(out)["run"]
    wait_for(lambda: os.path.exists(os.path.join(first["run_dir"], "exit_code")), what="the short run's end")
    assert RunStore().get_run(first["run_id"]).state == "running"       # nobody told the registry
    code, out, err = dfctl(capsys, "deploy", str(short), "--json")
    assert code == 0, err
    second = json.loads(out)["run"]
    assert RunStore().get_run(first["run_id"]).state == "finished"      # learnt on the way
    wait_for(lambda: os.path.exists(os.path.join(second["run_dir"], "exit_code")), what="the second run's end")


def test_a_watch_sees_a_dfctl_stop_as_a_stop_not_a_crash(project, capsys):
    """A run stopped with `dfctl stop` while a watch follows it: the watch's state is
    `stopped` (by dfctl stop, exit 143), it raises no crash finding, its verdict is 0, and
    the registry and compare-runs keep `stopped` -- the marker travels in the run dir, so
    a watch of another controller knows it too."""
    from controller import compare
    from controller.cli.watch_cmds import closing_lines
    from controller.store.runstore import RunStore
    from controller.watch import Watch

    root, pb = project
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--name", "tostop")
    assert code == 0, err
    run = json.loads(out)["run"]
    store = RunStore()
    w = Watch(store.runs(), store, gpu=False)
    try:
        wait_for(lambda: w.tick() and w.states[0].state == "running", what="the run seen running")
        assert dfctl(capsys, "stop", run["run_id"], "--grace-s", "5")[0] == 0
        wait_for(lambda: w.tick() and w.all_done, what="the watch to see the end")
        st = w.states[0]
        assert (st.state, st.process.exit_code, st.process.stopped_by) == ("stopped", 143, "dfctl stop")
        assert st.findings == [] and w.exit_code() == 0
        assert re.match(rf"{run['run_id']}: stopped by dfctl stop at \d\d:\d\d:\d\d, exit 143; ", closing_lines(w.states)[0])
    finally:
        w.close()
    assert store.get_run(run["run_id"]).state == "stopped"
    store.close()
    loaded = compare.resolve(run["run_id"])
    assert loaded.end_state == "stopped" and "dfctl stop" in loaded.end_detail


def test_logs_follow_keeps_reading_a_log_renamed_under_a_running_run(project, capsys):
    """`dfctl logs -f` reads as the watch does: the run keeps its stdout on train.log after
    `mv train.log train.log.1` (no new file appears), and the follower prints every byte
    the run wrote -- up to its stop -- exactly once."""
    import subprocess
    import sys

    root, pb = project
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json", "--name", "mv")
    assert code == 0, err
    run = json.loads(out)["run"]
    log = Path(run["log"])
    wait_for(lambda: log.exists() and log.stat().st_size > 200, what="the run's first lines")
    errs_file = log.parent.parent / "follower.err"
    follower = subprocess.Popen([sys.executable, "-m", "controller", "logs", run["run_id"], "-f", "--tail", "100000"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=errs_file.open("wb"))
    try:
        first = follower.stdout.readline()
        assert first.startswith(b"started ")
        log.rename(log.with_name("train.log.1"))
        moved = log.with_name("train.log.1")
        size_at_move = moved.stat().st_size
        wait_for(lambda: moved.stat().st_size > size_at_move + 500, what="the run writing on into the renamed file")
        assert not log.exists()
        assert dfctl(capsys, "stop", run["run_id"], "--grace-s", "5")[0] == 0
        rest = follower.stdout.read()                   # to EOF: the follower ends with the run
        follower.wait(60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, errs_file.read_text()
    assert first + rest == moved.read_bytes()


def test_bad_input_exit_codes(project, capsys):
    root, pb = project
    code, _, err = dfctl(capsys, "logs", "no-such-run")
    assert code == 2 and "no-such-run" in err
    bad = root / "bad.toml"
    bad.write_text('[target]\nkind = "pct"\nhost = "h"\nvmid = "abc"\n')
    code, _, err = dfctl(capsys, "deploy", str(bad))
    assert code == 2 and "target.vmid: expected an integer" in err and "Traceback" not in err


def test_doctor_local(project, capsys):
    root, pb = project
    code, out, err = dfctl(capsys, "doctor", str(pb), "--json")
    assert code == 0, err
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert checks["python"]["ok"] and checks["torch"]["ok"] and checks["free disk"]["detail"]
    assert checks["nvidia-smi"]["ok"] is not False


def assert_exactly_one_launched(results, capsys) -> dict:
    """Of racing deploys of one playbook: one exit 0 with a run, every other exit 2 naming
    that run; the registry and the target hold that one run only."""
    won = [json.loads(out) for code, out, _ in results if code == 0]
    assert len(won) == 1, [(c, e[-300:]) for c, _, e in results]
    run_id = won[0]["run"]["run_id"]
    for code, out, err in results:
        if code != 0:
            assert code == 2 and only_error_doc(out, code) and "Traceback" not in err, (code, out, err)
            assert f"run {run_id} (pid " in err and "still alive" in err, err
    code, out, _ = dfctl(capsys, "runs", "--json")
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == [run_id] and rows[0]["state"] == "running"
    return won[0]


@pytest.mark.parametrize("n", [2, 5])
def test_concurrent_deploys_of_one_playbook_exactly_one_launches(project, capsys, tmp_path, n):
    """Issue 12 item 3: N deploys let go together past their early live-run check (each saw
    the target free) -- before the fix every one launched, N trainers on one target. Now
    the target's check and start happen under the deploy lock in one exec."""
    root, pb = project
    from tests.deploy_support import race_deploys

    results = race_deploys(n, pb, root, tmp_path / "barrier")
    won = assert_exactly_one_launched(results, capsys)
    assert session_members(won["run"]["pid"])
    runs_dir = root / ".dfctl-local" / "runs"
    assert sorted(p.name for p in runs_dir.iterdir()) == [won["run"]["run_id"]]     # one run dir
    code, _, err = dfctl(capsys, "stop", won["run"]["run_id"], "--grace-s", "2")
    assert code == 0, err


@pytest.mark.parametrize("text", ["", "\n# truncated\n", "[run]\nname = \"tick\"\n"])
def test_an_empty_or_truncated_playbook_launches_nothing_here(project, capsys, tmp_path, text):
    """Issue 12 item 11: before, an empty playbook file deployed the trainer to the local
    target with every default (a truncated playbook launched on the operator's machine)."""
    root, _ = project
    p = tmp_path / "empty.toml"
    p.write_text(text)
    code, out, err = dfctl(capsys, "deploy", str(p))
    assert code == 2 and out == "" and f"{p}: target: required" in err, err
    assert not (root / ".dfctl-local").exists() and not (root / "trainer").exists()
    code, out, _ = dfctl(capsys, "runs", "--json")
    assert json.loads(out) == []


def test_runs_with_a_target_unreachable_exits_3_naming_it(project, capsys):
    """Issue 12 item 10: before, `dfctl runs` exited 0 with the rows `unknown` and only a
    stderr line. Now the partial list is printed (its rows `unknown`, with `read_error`),
    the target is named and the exit code is 3. A target whose runs have all ended is not
    asked (their state is final), so a gone machine from last month costs nothing."""
    import socket

    from controller.store.runstore import RunRecord, RunStore

    root, pb = project
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    local = json.loads(out)["run"]
    with socket.socket() as s:                     # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = {"kind": "ssh", "host": "127.0.0.1", "port": port, "connect_timeout_s": 2.0}
    store = RunStore()
    for run_id, state in (("gone-1", "running"), ("old-1", "finished")):
        store.add_run(RunRecord(run_id=run_id, name=run_id, target_kind="ssh", target=f"127.0.0.1:{port}",
                                host="127.0.0.1", workdir="/w", run_dir=f"/w/runs/{run_id}", pid=4242,
                                playbook={"target": target}, started_s=1.0, state=state))
    store.close()
    try:
        code, out, err = dfctl(capsys, "runs", "--json")
        rows = {r["run_id"]: r for r in json.loads(out)}
        assert code == 3, (code, err)
        assert f"127.0.0.1:{port}" in err.splitlines()[-1] and "Traceback" not in err
        assert rows[local["run_id"]]["state"] == "running" and rows[local["run_id"]]["read_error"] is None
        assert rows["gone-1"]["state"] == "unknown" and rows["gone-1"]["read_error"]
        assert rows["old-1"]["state"] == "finished" and rows["old-1"]["read_error"] is None
        code, out, err = dfctl(capsys, "runs")                     # the table too, and exit 3
        assert code == 3 and "gone-1" in out and local["run_id"] in out
        store = RunStore()
        store.update_run("gone-1", state="failed")
        store.close()
        code, out, err = dfctl(capsys, "runs", "--json")
        assert code == 0, err                                      # only ended runs there: not asked
    finally:
        dfctl(capsys, "stop", local["run_id"], "--grace-s", "2")
