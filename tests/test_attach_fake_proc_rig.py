"""Root in a container mounts a made-up /proc over the CT's (issue 27): the node-side scan,
attach, the watch and stacks must take their process facts from the node's own /proc and
read nothing of the node's. Real sshd, real LXC CT 200, the pct stand-in (tests/rig)."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import pytest

from tests.deploy_support import dfctl, wait_for
from tests.test_attach_rig import ct_pid_alive, target_args
from tests.test_deploy_rig import CT_PYTHON

pytestmark = pytest.mark.rig

LOOP = ("import time\nstep = 0\nwhile True:\n    step += 1\n"
        "    print('[progress] step=%d loss=1.0 tok_per_s=6020' % step, flush=True)\n    time.sleep(0.05)\n")
FAKE_PID = 4242


def start_loop(host, vmid: int, run_dir: str, name: str) -> int:
    """A real loop started by hand in the CT (nohup, stdout to a file): its CT pid."""
    script = (f"mkdir -p {run_dir}; cd {run_dir}; printf %s {shlex.quote(LOOP)} > {name}.py; "
              f"nohup {CT_PYTHON} {name}.py > {run_dir}/{name}.log 2>&1 < /dev/null & echo $!")
    r = host.ct_exec(vmid, ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[-1])
    log = host.container_path(vmid, f"{run_dir}/{name}.log")
    wait_for(lambda: log.exists() and log.stat().st_size > 0, what=f"{name}'s first line")
    return pid


def fake_entry(pid: int, start_ticks: int, node_file: str) -> str:
    """Shell lines making /tmp/fakeproc/<pid>: a python 'training' process whose fd 1, 2
    and 3 (open for writing) are links to a node-only path, with the given start time."""
    fields = f"S 1 {pid} {pid} 0 -1 4194304 100 0 0 0 50 50 0 0 20 0 1 0 {start_ticks} 100000000 5000"
    d = f"/tmp/fakeproc/{pid}"
    return "\n".join([
        f"mkdir -p {d}/fd {d}/fdinfo",
        f"printf '%s' {shlex.quote(f'{pid} (python3) {fields}')} > {d}/stat",
        f"printf 'python3\\0fake-loop.py\\0--train\\0' > {d}/cmdline",
        f"printf 'Name:\\tpython3\\nUid:\\t0\\t0\\t0\\t0\\nNSpid:\\t{pid}\\n' > {d}/status",
        f"printf 'PYTHONUNBUFFERED=1\\0' > {d}/environ",
        *[f"ln -sfn {shlex.quote(node_file)} {d}/fd/{n}" for n in (1, 2, 3)],
        *[f"printf 'pos:\\t0\\nflags:\\t0100001\\n' > {d}/fdinfo/{n}" for n in (1, 2, 3)],
        f"ln -sfn / {d}/cwd",
    ])


@pytest.fixture
def node_only_file():
    """A file on the node that no CT has: read, its atime moves (relatime: atime < mtime)."""
    path = Path(f"/tmp/dfctl-node-only-{os.getpid()}.txt")
    path.write_bytes(b"NODE-ONLY-BYTES-" * 771 + b"x")       # 12337 bytes
    now = time.time()
    os.utime(path, (now - 10 * 86400, now - 5 * 86400))
    yield path
    path.unlink(missing_ok=True)


def test_a_fake_proc_in_a_ct_delivers_nothing_of_the_node(rig, rig_host, capsys, node_only_file):
    vmid = rig_host.vmid_running
    base = f"/workspace/fakeproc-{os.getpid()}"
    real = start_loop(rig_host, vmid, base, "real")
    gone = start_loop(rig_host, vmid, base, "gone")
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(real), "--name", "real")
    assert code == 0, err
    code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(gone), "--name", "gone",
                           "--json")
    assert code == 0, err
    gone_ticks = json.loads(out)["run"]["pid_start_ticks"]
    rig_host.ct_exec(vmid, ["kill", "-9", str(gone)])
    wait_for(lambda: not ct_pid_alive(rig_host, vmid, gone), what="the second loop to end")

    # the attack: a made-up /proc over the CT's, holding a new fake process and one at the
    # ended run's pid with its start time; every fd a link to the node-only file
    before = os.stat(node_only_file)
    setup = "\n".join(["set -e", "mkdir -p /tmp/fakeproc/1", "printf '1 (init) S 0 1 1 0' > /tmp/fakeproc/1/stat",
                       fake_entry(FAKE_PID, 1000, str(node_only_file)), fake_entry(gone, gone_ticks, str(node_only_file)),
                       "mount --bind /tmp/fakeproc /proc", "ls /proc"])
    r = rig_host.ct_exec(vmid, ["sh", "-c", setup])
    assert r.returncode == 0 and str(FAKE_PID) in r.stdout, r.stderr
    outputs = []
    try:
        code, out, err = dfctl(capsys, "scan", *target_args(rig, rig_host, vmid), "--json")
        outputs.append(out + err)
        assert code == 0, err
        doc = json.loads(out)
        pids = {p["pid"] for p in doc["processes"]}
        assert FAKE_PID not in pids and gone not in pids and real in pids, doc["processes"]
        row = next(p for p in doc["processes"] if p["pid"] == real)
        assert row["log"]["path"] == f"{base}/real.log" and row["cwd"] == base
        assert any(f"CT {vmid}: /proc is not procfs" in e for e in doc["errors"]), doc["errors"]

        code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--pid", str(FAKE_PID))
        outputs.append(out + err)
        assert code == 2 and f"no process {FAKE_PID}" in err, err
        code, out, err = dfctl(capsys, "attach", *target_args(rig, rig_host, vmid), "--match", "fake-loop")
        outputs.append(out + err)
        assert code == 2 and "nothing on" in err and "matches 'fake-loop'" in err, err

        # the watch: the real run still runs (and its log is read), the ended one is not revived
        code, out, err = dfctl(capsys, "watch", "real", "--once", "--json")
        outputs.append(out + err)
        w = json.loads(out)["runs"][0]
        assert w["state"] == "running", w
        code, out, err = dfctl(capsys, "watch", "gone", "--once", "--json")
        outputs.append(out + err)
        w = json.loads(out)["runs"][0]
        assert w["state"] != "running", w

        # stacks: py-spy inside the CT would read the CT's /proc -- refused, naming the CT
        code, out, err = dfctl(capsys, "stacks", "real")
        outputs.append(out + err)
        assert code == 1 and "/proc is not procfs" in err and f"CT {vmid}" in err, err

        # the fallbacks that must read the CT's own /proc (inside `pct exec`): refused, naming the CT
        from controller.playbook import TargetConfig
        from controller.probe.scan import scan_target
        from controller.store.runstore import RunStore
        from controller.transport.factory import close_all
        from controller.watch import Watch

        inside = scan_target(TargetConfig(kind="pct", host=rig_host.name, vmid=vmid,
                                          ssh_config=str(rig.ssh_config_path)), force_pct=True)
        close_all()
        outputs.append(repr(inside))
        assert inside.processes == [] and any(f"CT {vmid}: /proc is not procfs" in e for e in inside.errors), \
            inside.errors
        store = RunStore()
        w = Watch([store.get_run("real")], store, gpu=False, force_pct=True)
        try:
            w.tick()
            st = w.states[0]
            outputs.append(repr(st))
            assert st.state != "running" and f"CT {vmid}: /proc is not procfs" in repr(st), repr(st)[:2000]
        finally:
            w.close()
            store.close()
    finally:
        rig_host.ct_exec(vmid, ["umount", "/proc"])
        rig_host.ct_exec(vmid, ["kill", str(real)])
    after = os.stat(node_only_file)
    assert after.st_atime == before.st_atime, "the node-only file was read"
    home = Path(os.environ["DFCTL_HOME"])
    kept = b"".join(f.read_bytes() for f in home.rglob("*") if f.is_file())
    for text in [*outputs, kept.decode("utf-8", "replace")]:
        assert "NODE-ONLY" not in text and str(before.st_ino) not in text and "12337" not in text
