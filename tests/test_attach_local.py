"""dfctl scan / attach / stacks / stop on the local target, with real processes and real
py-spy: a program started by hand (stdout to a file, no PYTHONUNBUFFERED), a pid that the
system hands to another process after the run ended (never signalled), and the parts that
read untrusted container files (links refused, environ reduced to one fact)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.adopt.attach import Selector, redacted_argv, select
from controller.probe.scan import OpenFile, ScanReport, TrainingProcess
from controller.remote import process_scan
from controller.ship.stacks import parse_py_spy_json, summarize
from controller.store.runstore import RunRecord, RunStore
from tests.deploy_support import dfctl, wait_for

# A real training-shaped program: worker threads blocked in queue.get, a main loop writing
# a progress line (block-buffered: stdout is a file, PYTHONUNBUFFERED unset) and a
# metrics.jsonl it keeps open, line-buffered.
PROGRAM = r'''
import queue, sys, threading, time
q = queue.Queue()
def drafter_loop():
    q.get()
for i in range(3):
    threading.Thread(target=drafter_loop, name="drafter-%d" % i, daemon=True).start()
metrics = open(sys.argv[1] + "/metrics.jsonl", "a", buffering=1)
step = 0
while True:
    step += 1
    print("[progress] step=%d loss=1.0" % step)
    metrics.write('{"step": %d}\n' % step)
    time.sleep(0.05)
'''


def start_by_hand(run_dir: Path, secret: str = "") -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["MY_API_KEY"] = secret or "not-a-secret"
    log = open(run_dir / "train.log", "wb")
    proc = subprocess.Popen([sys.executable, str(run_dir / "train.py"), str(run_dir), "--token", "abc123"],
                            cwd=run_dir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    log.close()
    wait_for(lambda: (run_dir / "metrics.jsonl").exists() and (run_dir / "metrics.jsonl").stat().st_size > 0,
             what="the program's first metrics line")
    return proc


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_local_scan_attach_stacks_stop(tmp_path, capsys):
    secret = "s3cr3t-" + os.urandom(4).hex()
    proc = start_by_hand(tmp_path / "run", secret)
    try:
        code, out, err = dfctl(capsys, "scan", "--target", "local", "--json")
        assert code == 0, err
        row = next(p for p in json.loads(out)["processes"] if p["pid"] == proc.pid)
        assert row["log"]["path"] == str(tmp_path / "run" / "train.log") and row["env"]["block_buffered"] is True
        assert row["metrics_jsonl"] == [str(tmp_path / "run" / "metrics.jsonl")] and row["cwd"] == str(tmp_path / "run")
        assert secret not in out and row["threads"] >= 4

        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "byhand")
        assert code == 0 and "block-buffered" in out and "PYTHONUNBUFFERED is unset" in out, err
        home = Path(os.environ["DFCTL_HOME"])
        for f in home.iterdir():
            assert secret.encode() not in f.read_bytes() and b"abc123" not in f.read_bytes()

        code, out, err = dfctl(capsys, "stacks", "byhand", "--json")
        assert code == 0, err
        dump = json.loads(out)
        drafters = [t for t in dump["threads"] if (t["name"] or "").startswith("drafter-")]
        assert len(drafters) == 3
        assert all(any(f["function"] == "drafter_loop" for f in t["frames"]) for t in drafters)
        assert "3 threads in Queue.get (queue.py:" in dump["summary"] and "from drafter_loop (train.py:5)" in \
            dump["summary"], dump["summary"]
        store = RunStore()
        kept = store.stacks(store.get_run("byhand").run_id)
        store.close()
        assert len(kept) == 1 and kept[0][1]["summary"] == dump["summary"]

        code, out, err = dfctl(capsys, "stop", "byhand", "--grace-s", "5", "--json")
        assert code == 0 and json.loads(out)["signals"] == ["SIGTERM"] and json.loads(out)["left"] == [], err
        assert proc.wait(10) == -signal.SIGTERM
        code, out, _ = dfctl(capsys, "runs", "--json")
        assert [(r["state"], r["exit_code"]) for r in json.loads(out)] == [("stopped", None)]
    finally:
        _end(proc)


def _spawn_with_pid(pid: int, tries: int = 200) -> subprocess.Popen | None:
    """A new process that gets `pid`: the kernel's next pid set through ns_last_pid (root).
    Other processes on the machine fork too, so it is tried until it lands."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
            fh.write(str(pid - 1))
        p = subprocess.Popen(["sleep", "600"], start_new_session=True)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


def test_reused_pid_is_never_signalled(tmp_path, capsys):
    proc = start_by_hand(tmp_path / "run")
    code, out, err = dfctl(capsys, "attach", "--target", "local", "--log", str(tmp_path / "run" / "train.log"),
                           "--name", "gone")
    assert code == 0, err
    pid = proc.pid
    _end(proc)                                   # the run ends; its pid is free again
    other = _spawn_with_pid(pid)
    assert other is not None, "could not get the freed pid back"
    try:
        code, out, err = dfctl(capsys, "stop", "gone", "--grace-s", "1")
        assert code == 2 and f"pid {pid} now belongs to another process" in err and "nothing was signalled" in err
        assert other.poll() is None
        code, out, _ = dfctl(capsys, "runs", "--json")      # alive by pid + start time: no
        assert [r["state"] for r in json.loads(out)] == ["ended"]
        code, out, err = dfctl(capsys, "stacks", "gone")
        assert code == 1 and "now belongs to another process" in err and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_doctor_says_which_py_spy(capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    code, out, err = dfctl(capsys, "doctor", "playbooks/local.toml", "--json")
    row = next(c for c in json.loads(out)["checks"] if c["check"] == "py-spy")
    assert row["ok"] is True and row["detail"] == "dfctl's own (local target)"


# -- pure parts -------------------------------------------------------------------------------
def _proc(pid: int, argv: list[str], log: str | None, descendants=(), where="ct 200") -> TrainingProcess:
    f = OpenFile(target=log, kind="file", inode=pid) if log else None
    return TrainingProcess(where=where, vmid=200, pid=pid, ppid=1, pgid=pid, sid=pid, uid=0, user="root", argv=argv,
                           cwd="/w", start_ticks=pid, start_s=None, cpu_pct=None, rss_bytes=0, threads=1, stdout=f,
                           stderr=f, descendants=list(descendants))


def test_select_names_every_candidate_and_folds_a_wrapper():
    wrapper = _proc(10, ["bash", "/root/run.sh"], "/w/a.log", descendants=[11])
    child = _proc(11, ["python", "-m", "trainer"], "/w/a.log")
    other = _proc(20, ["python", "-m", "trainer", "--seed", "2"], "/w/b.log")
    report = ScanReport(host="pve", processes=[wrapper, child, other])
    assert select(report, Selector(log="/w/./a.log")).pid == 10           # the wrapper's tree is one run
    with pytest.raises(Exception) as exc:
        select(report, Selector(match="trainer"))
    assert exc.value.exit_code == 2 and "pid 11" in exc.value.message and "pid 20" in exc.value.message
    with pytest.raises(Exception) as exc:
        select(report, Selector(log="/w/none.log"))
    assert "no process on pve writes /w/none.log" in exc.value.message and "/w/b.log (pid 20)" in exc.value.message
    with pytest.raises(Exception) as exc:
        Selector(pid=1, match="x")
    assert exc.value.exit_code == 2


def test_redacted_argv_hides_secret_looking_values():
    assert redacted_argv(["python", "t.py", "--api-key", "abc", "--lr", "1", "WANDB_API_KEY=xyz", "--token=q"]) == \
        ["python", "t.py", "--api-key", "<redacted>", "--lr", "1", "WANDB_API_KEY=<redacted>", "--token=<redacted>"]


def test_container_links_are_not_followed(tmp_path):
    """A CT's /etc/passwd that is a link to the node's files is resolved inside the CT's
    root (so it reads nothing of the node); a link within the CT is followed there."""
    outside = tmp_path / "node-secret"
    outside.write_text("root:x:0:0::/root:/bin/sh\nleak:x:7:7::/:/bin/sh\n")
    ct = tmp_path / "ct"
    (ct / "etc").mkdir(parents=True)
    (ct / "etc" / "passwd").symlink_to(outside)                       # absolute: the node's path
    assert process_scan._user_names(str(ct)) == {}
    (ct / "etc" / "passwd").unlink()
    (ct / "etc" / "passwd").symlink_to("../../" * 8 + str(outside).lstrip("/"))   # `..` past the root
    assert process_scan._user_names(str(ct)) == {}
    (ct / "etc" / "passwd").unlink()
    (ct / "etc" / "passwd.real").write_text("trainer:x:1000:1000::/home/t:/bin/sh\n")
    (ct / "etc" / "passwd").symlink_to("passwd.real")                  # inside the CT: fine
    assert process_scan._user_names(str(ct)) == {1000: "trainer"}


def test_environ_gives_one_fact_only(tmp_path):
    env = {"PATH": "/usr/bin", "WANDB_API_KEY": "zzz-secret", "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(["sleep", "30"], env=env)
    q = subprocess.Popen(["sleep", "30"], env={"PATH": "/usr/bin", "PYTHONUNBUFFERED": ""})
    try:
        assert process_scan._env_facts(p.pid) == {"readable": True, "pythonunbuffered": True}
        assert process_scan._env_facts(q.pid) == {"readable": True, "pythonunbuffered": False}
    finally:
        for x in (p, q):
            x.kill()
            x.wait()


def test_py_spy_json_parsed_and_summarised(tmp_path):
    """Real py-spy on a real program: threads named, frames innermost first, one sentence."""
    from controller.ship.stacks import local_py_spy

    prog = tmp_path / "w.py"
    prog.write_text("import queue, threading, time\nq = queue.Queue()\ndef loader():\n    q.get()\n"
                    "for i in range(2):\n    threading.Thread(target=loader, name='loader-%d' % i).start()\n"
                    "print('ready', flush=True)\ntime.sleep(600)\n")
    p = subprocess.Popen([sys.executable, str(prog)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        out = subprocess.run([str(local_py_spy()), "dump", "--pid", str(p.pid), "--json"], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        threads = parse_py_spy_json(p.pid, json.loads(out.stdout))
        by_name = {t.name: t for t in threads}
        assert set(by_name) == {"MainThread", "loader-0", "loader-1"}
        assert [f.function for f in by_name["loader-0"].frames[:3]] == ["Condition.wait", "Queue.get", "loader"]
        assert by_name["MainThread"].frames[0].file == "w.py" and by_name["MainThread"].frames[0].line == 8
        text = summarize(threads)
        assert text.startswith("2 threads in Queue.get (queue.py:") and "from loader (w.py:4)" in text
        assert "MainThread in <module> (w.py:8)" in text
    finally:
        p.kill()
        p.wait()


def test_registry_of_an_older_dfctl_gets_the_new_columns(tmp_path):
    db = tmp_path / "registry.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, name TEXT, target_kind TEXT, target TEXT, host TEXT, "
                "vmid INTEGER, workdir TEXT, run_dir TEXT, log_path TEXT, pid INTEGER, release_id TEXT, "
                "git_commit TEXT, git_dirty INTEGER, playbook TEXT, playbook_path TEXT, started_s REAL, "
                "wandb_run_id TEXT, state TEXT, exit_code INTEGER, ended_s REAL)")
    con.execute("INSERT INTO runs (run_id, name, target_kind, target, playbook, started_s, state) "
                "VALUES ('old-1', 'old', 'local', 'local', '{}', 1, 'finished')")
    con.commit()
    con.close()
    store = RunStore(db)
    try:
        assert store.get_run("old-1").origin == "launched"
        store.add_run(RunRecord(run_id="new-1", name="new", target_kind="local", target="local", pid=5,
                                origin="attached", pid_start_ticks=123, started_s=time.time()))
        got = store.get_run("new-1")
        assert (got.origin, got.pid_start_ticks) == ("attached", 123)
    finally:
        store.close()


def test_deploy_replace_stops_an_attached_run_and_launches_unbuffered(tmp_path, capsys, monkeypatch):
    """The seeds' fix: the hand-started (block-buffered) run is refused as a neighbour, then
    stopped by `deploy --replace`, which launches the playbook's run unbuffered instead."""
    from tests.deploy_support import make_project, ticker_playbook

    proc = start_by_hand(tmp_path / "run")
    try:
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--log", str(tmp_path / "run" / "train.log"),
                               "--name", "byhand")
        assert code == 0, err
        root = make_project(tmp_path / "proj", git=False)
        pb = ticker_playbook(root)
        monkeypatch.chdir(root)
        code, out, err = dfctl(capsys, "deploy", str(pb))
        assert code == 2 and "byhand-" in err and "still alive" in err and proc.poll() is None
        code, out, err = dfctl(capsys, "deploy", str(pb), "--replace", "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert proc.wait(15) == -signal.SIGTERM
        assert [s["signals"] for s in doc["stopped"]] == [["SIGTERM"]]
        assert "PYTHONUNBUFFERED" in doc["run"]["env_names"]
        code, out, _ = dfctl(capsys, "runs", "--json")
        states = {r["name"]: r["state"] for r in json.loads(out)}
        assert states == {"byhand": "stopped", "tick": "running"}
        code, out, err = dfctl(capsys, "stop", "tick", "--json")
        assert code == 0 and json.loads(out)["left"] == []
    finally:
        _end(proc)


def test_logs_of_an_attached_run(tmp_path, capsys):
    proc = start_by_hand(tmp_path / "run")
    try:
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "l")
        assert code == 0, err
        log = tmp_path / "run" / "train.log"
        wait_for(lambda: log.stat().st_size > 0, what="the first buffered block reaching the log")
        code, out, err = dfctl(capsys, "logs", "l", "--tail", "2")
        assert code == 0 and out.count("\n") == 2 and out.startswith("[progress] step="), err
    finally:
        _end(proc)


def test_untrusted_command_lines_print_as_text_and_one_process_attaches_once(tmp_path, capsys, monkeypatch):
    """A command line holding an escape sequence and rich markup is shown as text (the
    terminal gets no control character, rich no markup); a second attach is refused."""
    # A piped scan is 200 columns unless COLUMNS says otherwise; the checkout's and pytest's
    # paths (a CI clone's, an xdist worker's) can be long enough to wrap the row at 200.
    monkeypatch.setenv("COLUMNS", "600")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    weird = "\x1b[2J[bold red]x.py"            # the script's own name, as a CT user may choose it
    (run_dir / weird).write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(run_dir / "train.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, weird, str(run_dir)], cwd=run_dir, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_for(lambda: (run_dir / "metrics.jsonl").exists(), what="the program's first step")
        code, out, err = dfctl(capsys, "scan", "--target", "local")
        row = next(line for line in out.splitlines() if f" {proc.pid} " in line)
        assert code == 0 and "\x1b" not in out and "\\x1b[2J[bold red]x.py" in row, row
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "once")
        assert code == 0, err
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid))
        assert code == 2 and "is already attached as once-" in err and "nothing registered" in err
        code, out, _ = dfctl(capsys, "runs", "--json")
        assert len(json.loads(out)) == 1
    finally:
        _end(proc)


def test_attached_run_watched_to_its_end_then_compared(tmp_path, capsys):
    """After attach the run is a run like any other: `dfctl watch` follows it to its end
    (ended, exit code unknown, exit 0: nothing failed that anyone could see) and
    compare-runs reads the progress the watch kept."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # it runs until the watch has begun (a `finish` file), so the watch sees it live and to its end
    (run_dir / "train.py").write_text(PROGRAM.replace("while True:", "while not os.path.exists('finish'):")
                                      .replace("import queue,", "import os, queue,"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(run_dir / "train.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, str(run_dir / "train.py"), str(run_dir)], cwd=run_dir, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_for(lambda: (run_dir / "metrics.jsonl").exists(), what="the program's first step")
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "fin")
        assert code == 0, err

        def finish_once_watched():
            store = RunStore()
            try:
                rec = store.get_run("fin")
                wait_for(lambda: (store.get_cursor(rec.run_id).progress_step or 0) >= 10, timeout_s=60,
                         what="the watch reading ten steps of the run")
            finally:
                store.close()
            (run_dir / "finish").write_text("")

        import threading

        t = threading.Thread(target=finish_once_watched)
        t.start()
        code, out, err = dfctl(capsys, "watch", "fin", "--interval", "0.3")
        t.join()
        assert code == 0 and "fin-" in out and "ended, exit code unknown" in out, out + err
        code, out, err = dfctl(capsys, "compare-runs", "fin", "--json")
        assert code == 0, err
        doc = json.loads(out)
        (col,) = doc["runs"]
        assert (col["end_state"], col["end_detail"]) == ("ended", "exit code unknown (dfctl did not launch it)")
        assert col["exit_code"] is None and col["loss_at"] and all(v == 1.0 for v in col["loss_at"].values()), json.dumps(doc)[:3000]
        code, out, _ = dfctl(capsys, "runs", "--json")
        assert [(r["state"], r["exit_code"]) for r in json.loads(out)] == [("ended", None)]
    finally:
        _end(proc)


def test_stacks_of_a_run_dfctl_launched(tmp_path, capsys, monkeypatch):
    """A deployed run: the dump is of the trainer, not of dfctl's wrapper above it."""
    from tests.deploy_support import make_project, ticker_playbook

    root = make_project(tmp_path / "proj", git=False)
    pb = ticker_playbook(root)
    monkeypatch.chdir(root)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    try:
        wait_for(lambda: Path(run["log"]).exists() and "[progress]" in Path(run["log"]).read_text(), what="progress")
        code, out, err = dfctl(capsys, "stacks", run["run_id"], "--json")
        assert code == 0, err
        dump = json.loads(out)
        frames = [f for t in dump["threads"] for f in t["frames"]]
        assert {t["pid"] for t in dump["threads"]} == {json.loads(Path(run["run_dir"], "launch.json").read_text())
                                                        ["trainer_pid"]}
        assert any(f["file"].endswith("__main__.py") for f in frames)
        assert " in <module> (ticker/__main__.py:" in dump["summary"], dump["summary"]
    finally:
        dfctl(capsys, "stop", run["run_id"])


# -- a run behind a wrapper (issue 26 item 2), and who a pid is (issue 27 item 2) ----------
# A hand-started loop printing the seeds' own free-form progress line (`step 65 loss 1.4292
# tok/s 6020`: the number before `tok/s` is the loss, and must not be read as the rate).
LOOP = r'''
import time
step = 0
while True:
    step += 1
    print("step %d loss 1.4292 tok/s 6020" % step)
    time.sleep(0.005)
'''


def start_nohup_wrapped(run_dir: Path, *, buffered: bool) -> tuple[subprocess.Popen, int]:
    """`nohup bash -c 'python loop.py > train.log 2>&1; echo done'`, the wrapper shell's own
    output a file (wrapper.out): (the wrapper, the python child's pid)."""
    import psutil

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "loop.py").write_text(LOOP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open(run_dir / "wrapper.out", "wb") as out:
        proc = subprocess.Popen(["nohup", "bash", "-c", f"{sys.executable} {run_dir}/loop.py > train.log 2>&1; echo done"],
                                cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    child = wait_for(lambda: next((c.pid for c in psutil.Process(proc.pid).children()
                                   if c.cmdline()[1:2] == [f"{run_dir}/loop.py"]), None), what="the wrapper's python child")
    wait_for(lambda: (run_dir / "train.log").stat().st_size > 0, what="the loop's first bytes in train.log")
    return proc, child


@pytest.mark.parametrize("buffered", [True, False], ids=["block-buffered", "unbuffered"])
def test_attach_follows_a_nohup_wrapper_to_the_python_that_writes_the_log(tmp_path, capsys, buffered):
    """attach --pid of the wrapper shell: the python child is the run, train.log its log (not
    the shell's wrapper.out), the buffered warning judged on the python; --match loop.py
    names the same process (not dfctl's own command line); the watch reads 6020 tok/s."""
    from controller.watch import Watch

    run_dir = tmp_path / "run"
    wrapper, child = start_nohup_wrapped(run_dir, buffered=buffered)
    try:
        code, out, err = dfctl(capsys, "scan", "--target", "local", "--json")
        listed = {p["pid"] for p in json.loads(out)["processes"]}
        assert code == 0 and child in listed and os.getpid() not in listed, err   # dfctl's own process is left out

        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(wrapper.pid), "--name", "wrapped")
        assert code == 0, err
        assert f"pid {child} " in out and f"log {run_dir / 'train.log'}" in out, out
        assert ("block-buffered" in out) is buffered, out
        store = RunStore()
        try:
            rec = store.get_run("wrapped")
            att = store.attachment(rec.run_id)
            assert (rec.pid, rec.log_path, att["wrapper_pid"], att["printer_pid"]) == \
                (child, str(run_dir / "train.log"), wrapper.pid, child)
            assert att["env"]["block_buffered"] is buffered and att["pid_ns"].startswith("pid:[")
            w = Watch([rec], store, gpu=False, interval_s=0.2)
            try:
                def tok_per_s():
                    w.tick()
                    return next((s.tok_per_s for s in w.states[0].progress if s.tok_per_s), None)
                assert wait_for(tok_per_s, what="a progress sample from the log") == 6020
                assert {s.loss for s in w.states[0].progress if s.tok_per_s} == {1.4292}   # the loss stays the loss
                assert w.states[0].state == "running"
            finally:
                w.close()
        finally:
            store.close()

        # --match over the command lines: the wrapper's `bash -c` string and dfctl's own
        # `attach --match loop.py` hold it too; the one run found is the python child's
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--match", re.escape(f"{run_dir}/loop.py"))
        assert code == 2 and f"pid {child} is already attached as wrapped-" in err, err
    finally:
        _end(wrapper)


def test_a_pid_of_another_pid_namespace_is_not_the_attached_run(tmp_path, capsys):
    """The identity is (pid, start time, pid namespace): the same pid and start time in
    another namespace (a CT restarted, its numbering begun again) is a different process."""
    proc = start_by_hand(tmp_path / "run")
    try:
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "ns")
        assert code == 0, err
        code, out, err = dfctl(capsys, "watch", "ns", "--once", "--json")
        assert json.loads(out)["runs"][0]["state"] == "running", out
        db = sqlite3.connect(Path(os.environ["DFCTL_HOME"]) / "registry.sqlite")
        (doc,) = db.execute("SELECT doc FROM attachments").fetchone()
        att = json.loads(doc)
        assert att["pid_ns"] == os.readlink(f"/proc/{proc.pid}/ns/pid")
        att["pid_ns"] = "pid:[4026531000]"
        db.execute("UPDATE attachments SET doc = ?", (json.dumps(att),))
        db.commit()
        db.close()
        code, out, err = dfctl(capsys, "watch", "ns", "--once", "--json")
        assert json.loads(out)["runs"][0]["state"] != "running" and proc.poll() is None, out
    finally:
        _end(proc)


def test_procfs_is_told_by_its_statfs_magic(tmp_path):
    """The one check before a CT-side /proc is read: a directory (what a CT root can mount
    over /proc) is refused, saying what it is; the kernel's procfs passes."""
    from controller.remote import probe_agent

    assert probe_agent.procfs_refusal("/proc") is None
    why = probe_agent.procfs_refusal(str(tmp_path))
    assert why is not None and f"{tmp_path} is not procfs (filesystem magic 0x" in why and "procfs is 0x9fa0" in why
    (tmp_path / "ct" / "proc").mkdir(parents=True)
    assert "/proc is not procfs" in probe_agent.procfs_refusal("/proc", str(tmp_path / "ct"))


def test_a_descriptor_is_described_only_as_the_file_at_its_path_inside_the_root(tmp_path):
    """A process's fd facts for a CT (`root`): its target resolved inside the CT's root must
    be the very file it holds; otherwise the kind only, no inode or size of that file."""
    ct = tmp_path / "ct"
    (ct / "w").mkdir(parents=True)
    inside = ct / "w" / "train.log"
    with open(tmp_path / "node.txt", "wb") as node_file, open(inside, "wb") as ct_file:
        node_file.write(b"n" * 321)
        node_file.flush()
        p = subprocess.Popen(["sleep", "30"], stdout=node_file, stderr=ct_file)
    try:
        # stdout: a file that is not at its path inside the root; stderr: one that is (/w/train.log
        # inside `ct` is the same inode as the path the kernel names, seen from the root's parent)
        out = process_scan._fd_doc(p.pid, 1, str(ct))
        assert out["kind"] == "file" and out.get("outside_root") and "inode" not in out and "size" not in out
        assert process_scan._fd_doc(p.pid, 1, "")["size"] == 321        # the node's own process: its file
        (ct / str(tmp_path).lstrip("/") / "ct" / "w").mkdir(parents=True)
        os.link(inside, ct / str(tmp_path).lstrip("/") / "ct" / "w" / "train.log")
        err = process_scan._fd_doc(p.pid, 2, str(ct))
        assert err["inode"] == inside.stat().st_ino and not err.get("outside_root")
    finally:
        p.kill()
        p.wait()


def test_a_pipe_into_tee_the_log_is_tees_file_and_the_python_is_buffered(tmp_path, capsys):
    """`nohup sh -c 'python loop.py | tee train.log'`: the run is the python, the log the
    file tee writes, and the python's stdout -- a pipe, block-buffered by CPython -- is
    what makes the log lag."""
    import psutil

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "loop.py").write_text(LOOP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(run_dir / "wrapper.out", "wb") as out:
        proc = subprocess.Popen(["nohup", "sh", "-c", f"{sys.executable} {run_dir}/loop.py | tee train.log > /dev/null"],
                                cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        child = wait_for(lambda: next((c.pid for c in psutil.Process(proc.pid).children()
                                       if c.cmdline()[1:2] == [f"{run_dir}/loop.py"]), None), what="the python child")
        wait_for(lambda: (run_dir / "train.log").exists(), what="tee's file")
        code, out, err = dfctl(capsys, "attach", "--target", "local", "--pid", str(proc.pid), "--name", "tee", "--json")
        assert code == 0, err
        att = json.loads(out)
        assert att["run"]["pid"] == child and att["run"]["log_path"] == str(run_dir / "train.log")
        assert att["attachment"]["env"]["stdout_kind"] == "pipe" and att["attachment"]["env"]["block_buffered"] is True
        assert att["attachment"]["log"]["writer_pid"] != child          # tee holds the file
    finally:
        _end(proc)
