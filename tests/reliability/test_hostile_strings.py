"""Hostile strings everywhere a name flows into a command: the workdir (every deploy and
probe script), run args, env values, the run dir and log path the probe, `logs` and `stop`
read -- through the local target and through ssh + pct on the rig. Each string tries to run
`touch <marker>` on the host and in the container ($(), backticks, ;, &&, |, quotes,
newlines, ${IFS}, non-ASCII); the property: no marker ever appears, and the program
receives args and env values byte-exact. Run names are refused outright (exit 2)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.playbook import parse_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle
from controller.ship.launch import launch_run, stop_run
from controller.store.runstore import RunRecord, RunStore
from controller.transport.factory import close_all, open_transport
from controller.watch import Watch
from tests.deploy_support import wait_for
from tests.reliability.support import CT_PYTHON, dfctl

M_HOST = f"/tmp/dfctl-inject-{os.getpid()}"
M_CT = f"/workspace/dfctl-inject-{os.getpid()}"
TEMPLATES = ["$(touch {m})", "`touch {m}`", "; touch {m}", "\ntouch {m}\n", "' ; touch {m} ; '",
             '" ; touch {m} ; "', "$(touch${{IFS}}{m})", "| touch {m}", "&& touch {m}", "'$(touch {m})'",
             "\\\"; touch {m} #", "${{x:-$(touch {m})}}", "-- ; touch {m}", "*; touch {m}"]
SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8)
ECHOER = '''import json, os, sys
out = {"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in ("HOSTILE_A", "HOSTILE_B")}}
with open(os.path.join(os.environ["DFCTL_RUN_DIR"], "echo.json"), "w", encoding="utf-8") as fh:
    json.dump(out, fh)
'''


@st.composite
def hostile(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        t = draw(st.sampled_from(TEMPLATES))
        parts.append(draw(SAFE_TEXT) + t.format(m=M_HOST) + t.format(m=M_CT))
    return "".join(parts)


def path_component(s: str) -> str:
    """A directory name made of a hostile string (no NUL; '/' splits into more components;
    ':' is refused by the playbook check, see test_bad_playbooks)."""
    return s.replace("\x00", "").replace(":", "_")


def markers_absent(host=None) -> bool:
    paths = [Path(M_HOST)]
    if host is not None:
        paths.append(host.container_path(host.vmid_running, M_CT))
    return not any(os.path.lexists(p) for p in paths)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-proj")
    (root / "echoer").mkdir()
    (root / "echoer" / "__init__.py").write_text("")
    (root / "echoer" / "__main__.py").write_text(ECHOER)
    return root


def base_playbook(root: Path, target: str):
    return parse_playbook(f"{target}\n[bundle]\npaths = [\"echoer\"]\n[run]\nname = \"hostile\"\nmodule = \"echoer\"\n",
                          str(root / "pb.toml"))


def exercise(transport, pb, root: Path, workdir: str, args: list[str], env_a: str, env_b: str, host=None):
    """Deploy + launch + probe + logs-style read with hostile strings; returns echo.json."""
    pb = dataclasses.replace(pb, run=dataclasses.replace(pb.run, args=tuple(args),
                                                         env={"HOSTILE_A": env_a, "HOSTILE_B": env_b}))
    deploy_bundle(transport, workdir, build_bundle(root, pb.bundle))
    run = launch_run(transport, pb, workdir, environ={})
    echo_path = Path(run.run_dir) / "echo.json" if host is None else \
        host.container_path(host.vmid_running, f"{run.run_dir}/echo.json")
    wait_for(lambda: echo_path.exists() and echo_path.stat().st_size, timeout_s=60, what="the program's echo")
    # the probe over a run whose dir, log path and files carry the hostile workdir
    rec = RunRecord(run_id=run.run_id, name="hostile", target_kind=pb.target.kind, target="t",
                    host=pb.target.host, vmid=pb.target.vmid, workdir=workdir, run_dir=run.run_dir,
                    log_path=run.log_path, pid=run.pid, playbook={"target": dataclasses.asdict(pb.target)})
    return json.loads(echo_path.read_text(encoding="utf-8")), rec, run


def probe_and_stop(transport, pb, rec, run, tmp_path: Path):
    store = RunStore(tmp_path / f"reg-{os.urandom(4).hex()}.sqlite")
    store.add_run(rec)
    w = Watch(store.runs(), store, gpu=False, persistent=False)
    try:
        w.tick()
        assert w.states[0].state != "unreachable", [f.evidence for f in w.states[0].findings]
        assert w.states[0].log.path == run.log_path
    finally:
        w.close()
        store.close()
    # `dfctl logs`' remote read (the probe's read_since, the path inside a JSON request)
    from controller.watch.logstream import LogStream

    stream = LogStream(rec)
    try:
        lr = stream.tail(5)
    finally:
        stream.close()
    inode, size = lr.inode, lr.size_bytes
    assert inode is not None and size is not None
    stop_run(transport, pb.target, rec, grace_s=2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(wd=hostile(), a=hostile(), b=hostile(), args=st.lists(hostile(), min_size=1, max_size=3))
def test_local_target_no_injection(project, tmp_path, wd, a, b, args):
    pb = base_playbook(project, '[target]\nkind = "local"')
    workdir = str(tmp_path / "wd" / path_component(wd))
    transport = open_transport(pb.target)
    echo, rec, run = exercise(transport, pb, project, workdir, args, a, b)
    assert echo == {"argv": args, "env": {"HOSTILE_A": a, "HOSTILE_B": b}}
    probe_and_stop(transport, pb, rec, run, tmp_path)
    assert markers_absent()


@pytest.mark.rig
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(wd=hostile(), a=hostile(), args=st.lists(hostile(), min_size=1, max_size=2))
def test_pct_target_no_injection(rig, project, tmp_path, wd, a, args):
    host = rig.hosts[0]
    pb = base_playbook(project, f'[target]\nkind = "pct"\nhost = "{host.name}"\nvmid = {host.vmid_running}\n'
                                f'python = "{CT_PYTHON}"\nssh_config = "{rig.ssh_config_path}"')
    workdir = "/workspace/hostile-" + str(os.getpid()) + "/" + path_component(wd)
    close_all()
    transport = open_transport(pb.target)
    try:
        echo, rec, run = exercise(transport, pb, project, workdir, args, a, a[::-1], host=host)
        assert echo == {"argv": args, "env": {"HOSTILE_A": a, "HOSTILE_B": a[::-1]}}
        probe_and_stop(transport, pb, rec, run, tmp_path)
    finally:
        close_all()
    assert markers_absent(host)


def test_hostile_run_names_refused(project, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(project)
    pb = project / "pb.toml"
    pb.write_text('[target]\nkind = "local"\n[bundle]\npaths = ["echoer"]\n[run]\nname = "ok"\nmodule = "echoer"\n')
    for name in [f"$(touch {M_HOST})", f"x;touch {M_HOST}", "a\nb", "..", "-rf", "é"]:
        code, out, err = dfctl(capsys, "deploy", str(pb), "--name", name)
        assert code == 2 and "--name" in err and "Traceback" not in err
    bad = project / "bad.toml"
    bad.write_text('[run]\nname = "$(touch ' + M_HOST + ')"\n')
    code, _, err = dfctl(capsys, "deploy", str(bad), "--dry-run")
    assert code == 2 and "run.name" in err
    assert markers_absent()
