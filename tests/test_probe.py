"""The probe on the local target with real processes: files, process tree, cgroup, cursors.

The probe script is executed the way it is on a remote host (`python3 -`, the script on
stdin); only the transport differs (LocalTransport instead of SSH).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.follow.cursor import LogFollower
from controller.probe import HostProbeRequest, RunProbeRequest, decode_blob, run_probe
from controller.probe.cgroup import parse_memory_cgroup, vmid_from_cgroup
from controller.probe.procfs import cpu_pct, leader_state, parse_stat, tree_totals
from controller.probe.readings import parse_probe_document
from controller.records import RunCursor
from controller.transport.local import LocalTransport

LOCAL = LocalTransport()


# -- helpers shared with test_watch.py --------------------------------------------------

@dataclass
class LocalRun:
    run_dir: Path
    proc: subprocess.Popen

    @property
    def log(self) -> Path:
        return self.run_dir / "train.log"

    def pid(self, deadline_s: float = 20.0) -> int:
        wait_for(lambda: (self.run_dir / "pid").exists() and (self.run_dir / "pid").read_text().strip(),
                 deadline_s, "pid file")
        return int((self.run_dir / "pid").read_text())

    def trainer_pid(self, deadline_s: float = 20.0) -> int:
        """The python child of the wrapper (the process doing the work)."""
        leader = self.pid()

        def child():
            for p in os.listdir("/proc"):
                if p.isdigit():
                    st = parse_stat(_read(f"/proc/{p}/stat"))
                    if st and st.ppid == leader and st.state != "Z":
                        return st.pid
            return None
        wait_for(child, deadline_s, "trainer child")
        return child()

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def wait_for(cond, deadline_s: float, what: str):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")


def launch_local(run_dir: Path, program: str, *, unbuffered: bool = True) -> LocalRun:
    """Start `program` the way dfctl's launch does: a setsid session-leader wrapper writing
    pid and exit_code, stdout+stderr to train.log, stdin from /dev/null."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "prog.py").write_text(textwrap.dedent(program))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    script = f'echo $$ > pid; "{sys.executable}" prog.py > train.log 2>&1; echo $? > exit_code'
    proc = subprocess.Popen(["sh", "-c", script], cwd=run_dir, env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return LocalRun(run_dir, proc)


def probe_once(*runs: RunProbeRequest, cap: int = 1 << 20):
    doc = run_probe(LOCAL, HostProbeRequest(runs=list(runs), read_cap_bytes=cap, nvidia_smi="nvidia-smi-absent"),
                    python=sys.executable)
    return doc, parse_probe_document(doc, "local")


# -- parsers ------------------------------------------------------------------------------

def test_stat_parser_handles_parens_and_spaces_in_comm():
    line = "4242 (python3 (x) y) S 1 4242 4242 0 -1 4194304 1 0 0 0 150 50 0 0 20 0 7 0 1 2 2560 18 0"
    st = parse_stat(line)
    assert (st.pid, st.comm, st.state, st.ppid, st.pgrp, st.session) == (4242, "python3 (x) y", "S", 1, 4242, 4242)
    assert st.cpu_ticks == 200 and st.threads == 7 and st.rss_pages == 2560
    assert parse_stat("garbage") is None and parse_stat(None) is None
    assert leader_state(line.replace(" S 1 ", " Z 1 ")) == "zombie"
    assert leader_state(None) == "exited"
    totals = tree_totals([line, line.replace("4242 (", "4243 (").replace(" S 1 ", " Z 1 ")], 4096)
    assert totals.processes == 1 and totals.rss_bytes == 2560 * 4096 and totals.threads == 7
    assert cpu_pct(100, 10.0, 300, 12.0, 100) == 100.0
    assert cpu_pct(None, None, 300, 12.0, 100) is None


def test_cgroup_parsers_v1_and_v2():
    v2 = parse_memory_cgroup({"version": 2, "path": "/sys/fs/cgroup/lxc/200", "files": {
        "memory.events": "low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\noom_group_kill 0\n",
        "memory.peak": "1073741824\n", "memory.max": "max\n"}})
    assert (v2.oom_kill_count, v2.peak_bytes, v2.limit_bytes) == (1, 1 << 30, None)
    v1 = parse_memory_cgroup({"version": 1, "path": "/sys/fs/cgroup/memory/lxc/200", "files": {
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        "memory.max_usage_in_bytes": "2048\n", "memory.limit_in_bytes": "9223372036854771712\n"}})
    assert (v1.oom_kill_count, v1.peak_bytes, v1.limit_bytes) == (3, 2048, None)
    assert vmid_from_cgroup("12:memory:/lxc/200/ns\n") == 200
    assert vmid_from_cgroup("0::/lxc.payload.201/init.scope\n") == 201
    assert vmid_from_cgroup("4:memory:/lxc.monitor.200\n") is None
    assert vmid_from_cgroup("4:memory:/user.slice\n") is None


# -- the real probe ---------------------------------------------------------------------

def test_probe_reads_a_live_run_tree_and_its_cgroup(tmp_path):
    run = launch_local(tmp_path / "run", """
        import json, threading, time
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        print("hello", flush=True)
        with open("metrics.jsonl", "a") as m:
            m.write(json.dumps({"step": 1, "tok_per_s": 10.0}) + "\\n"); m.flush()
        t = time.time()
        while time.time() - t < 60:
            pass  # busy: the tree's CPU must show
        """)
    try:
        leader = run.pid()
        wait_for(lambda: run.log.exists() and run.log.stat().st_size > 0, 20, "first log line")
        req = RunProbeRequest(run_id="r", log_path=str(run.log), run_dir=str(run.run_dir), want_launch=True)
        doc, reading = probe_once(req)
        r = reading.runs["r"]
        assert r.process.state == "running" and r.process.pid == leader
        assert r.process.threads >= 3 and r.process.rss_bytes > 1 << 20   # sh + python with a thread
        assert len(r.tree_pids) == 2 and leader in r.tree_pids
        assert r.log.data == b"hello\n" and r.log.inode == run.log.stat().st_ino and r.log.start == 0
        assert r.metrics.data.startswith(b'{"step": 1')
        assert r.launch is None   # no launch.json in this layout: asked for, absent
        # this machine is cgroup v1: the run's memory cgroup with an oom_kill counter
        assert r.cgroup is not None and r.cgroup.version in (1, 2)
        assert isinstance(r.cgroup.oom_kill_count, int)
        assert reading.host.gpu_error and "not found" in reading.host.gpu_error
        # CPU% from two readings of the busy tree
        time.sleep(0.5)
        _, again = probe_once(req)
        pct = cpu_pct(r.tree_cpu_ticks, reading.uptime_s, again.runs["r"].tree_cpu_ticks, again.uptime_s,
                      again.clk_tck)
        assert pct is not None and pct > 20
    finally:
        run.stop()


def test_probe_sees_a_zombie_leader_kill0_would_call_alive(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: (parse_stat(_read(f"/proc/{child.pid}/stat")) or parse_stat("1 (x) Z 1 1 1")).state == "Z",
             20, "zombie")
    os.kill(child.pid, 0)   # kill -0 lies: no error for a zombie
    log = tmp_path / "x.log"
    log.write_bytes(b"")
    _, reading = probe_once(RunProbeRequest(run_id="z", log_path=str(log), pid=child.pid))
    assert reading.runs["z"].process.state == "zombie"
    child.wait()
    _, reading = probe_once(RunProbeRequest(run_id="z", log_path=str(log), pid=child.pid))
    assert reading.runs["z"].process.state == "exited"


def test_missing_log_and_missing_nvidia_smi_do_not_hide_the_rest(tmp_path):
    _, reading = probe_once(RunProbeRequest(run_id="a", log_path=str(tmp_path / "nope.log"),
                                            run_dir=str(tmp_path)),
                            RunProbeRequest(run_id="b", log_path=str(tmp_path / "b.log")))
    assert not reading.runs["a"].log.exists and reading.runs["a"].process.state == "not_started"
    assert "b" in reading.runs and reading.host.gpus == [] and reading.host.gpu_error


def _follow(path: Path, follower: LogFollower, cap: int, sink: list[bytes], lines: list[str]):
    """Probe until the follower has read all complete lines of `path`."""
    for _ in range(10_000):
        doc, reading = probe_once(RunProbeRequest(run_id="f", log_path=str(path), cursor=RunCursor(log=follower.cursor()),
                                                  log_carry_bytes=len(follower.carry)), cap=cap)
        lr = reading.runs["f"].log
        chunk = follower.feed(lr.data, start=lr.start, inode=lr.inode, rotated=lr.rotated)
        sink.append(chunk.consumed)
        lines += chunk.lines
        if lr.start + len(lr.data) >= lr.size_bytes:
            return chunk
    raise AssertionError("never caught up")


def test_log_cursor_survives_rotation_truncation_cr_utf8_nul_and_a_10mb_line(tmp_path):
    log = tmp_path / "train.log"
    body = (b"plain line\n" b"tqdm 10%\rtqdm 20%\rtqdm done\r\n" b"bad utf8 \xff\xfe here\n"
            b"nul\x00\x00in line\n" + b"x" * (10 * 1024 * 1024) + b"\nafter the long line\npartial")
    log.write_bytes(body)
    f, sink, lines = LogFollower(), [], []
    _follow(log, f, 1 << 20, sink, lines)
    assert b"".join(sink) == body[:-len(b"partial")]           # byte for byte, partial held back
    assert f.read_offset == len(body) and f.offset == len(body) - len(b"partial")
    assert lines[:5] == ["plain line", "tqdm 10%", "tqdm 20%", "tqdm done", "bad utf8 \ufffd\ufffd here"]
    assert lines[5] == "nulin line"
    assert max(len(x.encode()) for x in lines) <= 70 * 1024     # the 10 MB line is cut: bounded
    assert lines[-1] == "after the long line"
    assert f.line_no == len(lines)
    # the partial line completes
    with open(log, "ab") as fh:
        fh.write(b" now complete\n")
    chunk = _follow(log, f, 1 << 20, sink, lines)
    assert chunk.lines == ["partial now complete"] and not chunk.rotated
    # truncation: size below our offset -> from 0, flagged
    log.write_bytes(b"fresh\n")
    chunk = _follow(log, f, 1 << 20, sink, lines)
    assert chunk.rotated and chunk.lines == ["fresh"] and chunk.first_line_no == 1
    # rotation: a new inode (logrotate's rename + create) -> from 0, flagged
    log.rename(tmp_path / "train.log.1")
    log.write_bytes(b"rotated one\nrotated two\n" * 3)
    chunk = _follow(log, f, 1 << 20, sink, lines)
    assert chunk.rotated and chunk.lines[0] == "rotated one" and f.inode == log.stat().st_ino
    assert f.offset == log.stat().st_size


def test_a_log_renamed_away_is_read_to_its_end_then_followed_while_nothing_is_written_at_its_path(tmp_path):
    """logrotate's rename + create, and `mv train.log train.log.1` under a nohup'd writer:
    the lines the old file got after the last read are delivered before the new file's,
    and a writer that keeps its fd on the renamed file is still followed."""
    log = tmp_path / "train.log"
    log.write_bytes(b"one\n")
    f, sink, lines = LogFollower(), [], []
    _follow(log, f, 1 << 20, sink, lines)
    # rename + create with unread lines in the old file: old lines first, then the new file
    with open(log, "ab") as fh:
        fh.write(b"two\nthree\n")
    log.rename(tmp_path / "train.log.1")
    log.write_bytes(b"new one\n")
    chunk = _follow(log, f, 4, sink, lines)                          # a small cap: several reads of the old file
    assert lines == ["one", "two", "three"] and not chunk.rotated
    chunk = _follow(log, f, 1 << 20, sink, lines)
    assert chunk.rotated and lines[-1] == "new one" and f.inode == log.stat().st_ino
    # a writer holding its fd on the file that is renamed, nothing created at the path
    with open(log, "ab", buffering=0) as writer:
        log.rename(tmp_path / "train.log.2")
        writer.write(b"still here\n")
        doc, reading = probe_once(RunProbeRequest(run_id="f", log_path=str(log), cursor=RunCursor(log=f.cursor()),
                                                  log_carry_bytes=len(f.carry)))
        lr = reading.runs["f"].log
        chunk = f.feed(lr.data, start=lr.start, inode=lr.inode, rotated=lr.rotated)
        assert chunk.lines == ["still here"] and not chunk.rotated
        assert doc["runs"][0]["log"]["followed"] == str(tmp_path / "train.log.2")
        log.write_bytes(b"")                                           # an empty new file: stay on the old one
        writer.write(b"and here\n")
        chunk = _follow(log, f, 1 << 20, sink, lines)
        assert chunk.lines == ["and here"] and not chunk.rotated


@pytest.mark.parametrize("cap", [331, 4096])
def test_any_read_cap_yields_the_same_lines(tmp_path, cap):
    log = tmp_path / "train.log"
    body = b"".join(b"line %d \xe2\x82\xac\r\n" % i for i in range(200)) + b"tail"
    log.write_bytes(body)
    f, sink, lines = LogFollower(), [], []
    _follow(log, f, cap, sink, lines)
    assert lines == [f"line {i} \u20ac" for i in range(200)]
    assert b"".join(sink) == body[:-4]


def test_blob_encoding_roundtrip_large_is_compressed(tmp_path):
    log = tmp_path / "big.log"
    log.write_bytes(b"step=1 loss=2.0\n" * 40_000)
    doc, reading = probe_once(RunProbeRequest(run_id="b", log_path=str(log)))
    blob = doc["runs"][0]["log"]["bytes"]
    assert blob["enc"] == "zb64" and len(blob["data"]) < 100_000
    assert decode_blob(blob) == log.read_bytes()


def test_cgroup_parser_combines_the_ns_level_and_its_parent():
    doc = {"version": 1, "path": "/sys/fs/cgroup/memory/lxc/200/ns", "files": {
        "memory.oom_control": "oom_kill 2\n", "memory.max_usage_in_bytes": "100\n",
        "memory.limit_in_bytes": "9223372036854771712\n"},
        "parent": {"version": 1, "path": "/sys/fs/cgroup/memory/lxc/200", "files": {
            "memory.oom_control": "oom_kill 0\n", "memory.max_usage_in_bytes": "300\n",
            "memory.limit_in_bytes": "1048576\n"}}}
    cg = parse_memory_cgroup(doc)
    assert (cg.oom_kill_count, cg.peak_bytes, cg.limit_bytes) == (2, 300, 1 << 20)
    assert cg.path.endswith("/ns")


def test_an_old_background_gpu_sample_is_flagged_not_dropped():
    row = "0, GPU-a, NVIDIA H200, 97, 1, 143771, 50, 300.0, 0x0"
    doc = {"time_s": 1000.0, "gpu": {"rc": 0, "stdout": row, "stderr": ""}, "gpu_sampled_s": 960.0, "runs": []}
    hs = parse_probe_document(doc, "h").host
    assert hs.gpus[0].util_pct == 97 and "40 s old" in hs.gpu_error
    doc["gpu_sampled_s"] = 999.0
    assert parse_probe_document(doc, "h").host.gpu_error is None


def _runtime_annotation_problems(tree) -> list[int]:
    """Lines whose annotation an old Python evaluates and cannot: `list[str]` (3.9+), `X | Y` (3.10+)."""
    import ast

    exprs = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.AnnAssign, ast.arg)) and n.annotation]
    exprs += [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns]
    bad = set()
    for e in exprs:
        for n in ast.walk(e):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr) or isinstance(n, ast.Subscript) \
                    and isinstance(n.value, ast.Name) and n.value.id in ("list", "dict", "tuple", "set", "type"):
                bad.add(n.lineno)
    return sorted(bad)


def test_the_stdlib_scripts_stay_runnable_on_their_oldest_python():
    # probe_agent.py, log_reader.py and process_scan.py promise Python >= 3.6, remote/launcher.py >= 3.8: mypy checks
    # them through type comments, since an annotation like list[str] would fail there at import.
    import ast

    root = Path(__file__).resolve().parents[1] / "controller"
    for rel, oldest in (("remote/probe_agent.py", (3, 6)), ("remote/log_reader.py", (3, 6)), ("remote/process_scan.py", (3, 6)),
                        ("remote/launcher.py", (3, 8))):
        src = (root / rel).read_text()
        assert f"Python >= {oldest[0]}.{oldest[1]}" in src                # the promise this test keeps
        tree = ast.parse(src, type_comments=True, feature_version=max(oldest, (3, 7)))  # 3.7: the oldest ast knows
        assert _runtime_annotation_problems(tree) == [], f"{rel}: use a type comment there"
    assert _runtime_annotation_problems(ast.parse("x: list[int] = []\ndef f(a: int | None) -> None: ...")) == [1, 2]
