"""Issue 12 items 1, 2, 4 on the rig (real sshd, real LXC CT 200): the node-side probe
reads a container's files as the untrusted input they are, and leaves nothing behind.

1. symlinks planted in the CT (absolute, relative past the root, through `..`) never make
   the probe deliver a node file's bytes -- log, metrics.jsonl or tail;
2. a FIFO at the log path costs a finding that says so, not a hung probe (a blocked root
   python per tick) and not an "unreachable" host -- and once a regular file is back
   there, the finding is cleared (issue 27 item 3): gone from the live list up to the
   final `stopped` tick, kept in the registry marked cleared;
4. the probe agent exits when no request comes (a link cut brings no end-of-file)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from controller.records import tick_document, to_jsonable
from controller.store.runstore import RunStore
from controller.watch import Watch
from tests.test_probe import wait_for
from tests.test_watch import tick_until
from tests.test_watch_rig import ct_record, launch_in_ct

pytestmark = pytest.mark.rig

WRITER = """
    import time
    for i in range(100000):
        print("[progress] step=%d loss=2.5" % i, flush=True)
        time.sleep(0.05)
"""


def _stop(host, run_dir: Path) -> None:
    try:
        pid = int((run_dir / "pid").read_text())
        host.ct_exec(200, ["sh", "-c", f"kill -9 -{pid} 2>/dev/null; kill -9 {pid} 2>/dev/null; true"])
    except (OSError, ValueError):
        pass


@pytest.mark.parametrize("how", ["absolute", "relative", "dotdot"])
def test_a_symlink_planted_in_the_ct_never_delivers_a_node_file(rig, rig_host, tmp_path, how):
    host = rig_host
    secret = Path(f"/tmp/dfctl-node-secret-{os.getpid()}.txt")
    secret.write_text("NODE-SECRET-7f3a /etc/pve/priv/authkey.key\n" * 20)
    name = f"sec-link-{how}-{os.getpid()}"
    run_dir = launch_in_ct(host, name, WRITER)
    try:
        target = {"absolute": str(secret), "relative": "../../../../../../../.." + str(secret),
                  "dotdot": "/workspace/../../../.." + str(secret)}[how]
        for f in ("train.log", "metrics.jsonl"):
            p = run_dir / f
            tmp = run_dir / (f + ".tmp")
            tmp.symlink_to(target)
            os.replace(tmp, p)                      # the writer's open fd keeps its old file
        store = RunStore(tmp_path / "reg.sqlite")
        store.add_run(ct_record(rig, host, name))
        w = Watch(store.runs(), store, gpu=False)
        try:
            seen = []
            for _ in range(6):
                rep = w.tick()
                seen.append(repr(to_jsonable(rep.states)) + repr([o.new_lines for o in rep.observations]))
                time.sleep(0.2)
            assert w.hosts[host.name].reachable and w.states[0].state != "unreachable"
            assert not any("NODE-SECRET" in s for s in seen)
        finally:
            w.close()
    finally:
        _stop(host, run_dir)
        secret.unlink()


def test_a_fifo_at_the_log_path_is_a_finding_not_a_hung_probe(rig, rig_host, tmp_path):
    host = rig_host
    name = f"sec-fifo-{os.getpid()}"
    run_dir = launch_in_ct(host, name, WRITER)
    try:
        (run_dir / "train.log").unlink()
        os.mkfifo(run_dir / "train.log")
        store = RunStore(tmp_path / "reg.sqlite")
        store.add_run(ct_record(rig, host, name))
        w = Watch(store.runs(), store, gpu=False, probe_timeout_s=8.0)
        try:
            took = []
            for _ in range(4):
                t0 = time.monotonic()
                w.tick()
                took.append(time.monotonic() - t0)
            st = w.states[0]
            assert max(took) < 5.0, took
            assert st.state != "unreachable" and w.hosts[host.name].reachable
            (f,) = [f for f in st.findings if f.kind == "log_unreadable"]
            assert "a FIFO" in f.summary and "/workspace/" in f.summary
        finally:
            w.close()
    finally:
        _stop(host, run_dir)


def test_a_fifo_then_a_file_at_the_log_path_clears_log_unreadable_to_the_last_tick(rig, rig_host, tmp_path):
    host = rig_host
    name = f"sec-fifo-file-{os.getpid()}"
    run_dir = launch_in_ct(host, name, WRITER)
    log = run_dir / "train.log"
    try:
        log.unlink()
        os.mkfifo(log)
        store = RunStore(tmp_path / "reg.sqlite")
        rec = ct_record(rig, host, name)
        store.add_run(rec)
        w = Watch(store.runs(), store, gpu=False, probe_timeout_s=8.0)
        try:
            st = w.states[0]
            tick_until(w, lambda: any(f.kind == "log_unreadable" for f in st.findings), 20, "log_unreadable")
            # the FIFO replaced by a regular file, the way a user's `mv` puts one there
            tmp = run_dir / "train.log.new"
            tmp.write_text("[progress] step=1 loss=2.5\n")
            os.replace(tmp, log)
            tick_until(w, lambda: st.log.size_bytes is not None, 20, "the regular file read")
            docs = []
            for _ in range(2):
                rep = w.tick()
                docs += [tick_document(s, o) for s, o in zip(rep.states, rep.observations)]
            # then the run is stopped the way `dfctl stop` does: its stop_request, a SIGTERM
            (run_dir / "stop_request").write_text(json.dumps({"by": "dfctl stop", "time_s": time.time()}))
            pid = int((run_dir / "pid").read_text())
            host.ct_exec(200, ["sh", "-c", f"kill -TERM $(cat /proc/{pid}/task/{pid}/children)"])
            while not w.all_done:
                rep = w.tick()
                docs += [tick_document(s, o) for s, o in zip(rep.states, rep.observations)]
                time.sleep(0.2)
            assert st.state == "stopped"
            assert docs[-1]["state"] == "stopped"
            for doc in docs:
                assert not [f for f in doc["findings"] if f["kind"] == "log_unreadable"], doc["state"]
            (gone,) = [f for f in st.cleared_findings if f.kind == "log_unreadable"]
            assert "a FIFO" in gone.summary and gone.cleared_s is not None and gone.cleared_s >= gone.first_seen_s
            assert [f["kind"] for f in docs[-1]["cleared_findings"]] == ["log_unreadable"]
            (kept,) = [f for f in RunStore(tmp_path / "reg.sqlite").findings(rec.run_id) if f.kind == "log_unreadable"]
            assert kept.cleared_s == gone.cleared_s
        finally:
            w.close()
    finally:
        _stop(host, run_dir)


def _agents(host) -> set[int]:
    """The probe agents on `host` (the rig's hosts are namespaces of this machine: an agent of
    another xdist worker's rig runs in its own host's network namespace)."""
    netns_inode = os.stat(f"/run/netns/{host.netns}").st_ino
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
                in_host = os.stat(f"/proc/{p}/ns/net").st_ino == netns_inode
            except OSError:
                continue
            if b"serve(_SRC, b[n:])" in cmd and state != "Z" and in_host:
                out.add(int(p))
    return out


def test_the_agent_exits_after_a_link_cut_instead_of_living_on(rig, rig_host, tmp_path):
    host = rig_host
    name = f"sec-agent-{os.getpid()}"
    run_dir = launch_in_ct(host, name, WRITER)
    before = _agents(host)
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(ct_record(rig, host, name, connect_timeout_s=2.0))
    w = Watch(store.runs(), store, gpu=False, probe_timeout_s=3.0, agent_idle_exit_s=3.0)
    try:
        w.tick()
        assert w.agent_hosts == [host.name]
        mine = wait_for(lambda: _agents(host) - before, 10, "the agent on the host")
        host.link_down()
        try:
            t0 = time.monotonic()
            wait_for(lambda: not (_agents(host) & mine), 30, "the agent gone after the link cut")
            assert time.monotonic() - t0 < 15
            assert not (_agents(host) & mine)
        finally:
            host.link_up()
    finally:
        w.close()
        _stop(host, run_dir)
