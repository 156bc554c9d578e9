"""SSH transport benchmark on the test rig: dfctl's paramiko transport beside
fabric.Connection given the same host-key strictness (RejectPolicy + the rig's known_hosts),
keepalive and TCP_USER_TIMEOUT -- the question of issue 13: move the transport onto fabric
unless it measurably loses.

Per round, one fresh Python process per side (as a `dfctl` command starts): the import of
the transport, the connect (TCP + SSH handshake + auth), then EXECS commands (`true`) on the
one connection. Rounds alternate sides (dfctl, fabric, dfctl, …) against the same sshd, so
load drifts hit both alike. fabric runs from its own venv (fabric 3.2.3 pins invoke < 3,
the shared venv has invoke 3 from paramiko 5): $DFCTL_BENCH_FABRIC_PYTHON, else
.bench-fabric/bin/python, made here with pip when missing. Figures: bench/results/ssh.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results" / "ssh.md"
ROUNDS = 12
EXECS = 20
FABRIC_SPEC = ("fabric==3.2.3", "paramiko==5.1.0")

DFCTL_SIDE = r"""
import json, sys, time
t0 = time.perf_counter()
from controller.playbook import TargetConfig
from controller.transport.factory import open_host_transport
t_import = time.perf_counter() - t0
host, ssh_config, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = open_host_transport(TargetConfig(kind="ssh", host=host, ssh_config=ssh_config, connect_timeout_s=10))
t0 = time.perf_counter(); t.connect(); t_connect = time.perf_counter() - t0
execs = []
for _ in range(n):
    t0 = time.perf_counter(); r = t.run(["true"]); execs.append(time.perf_counter() - t0)
    assert r.ok, r.summary()
t.close()
print(json.dumps({"import_s": t_import, "connect_s": t_connect, "exec_s": execs}))
"""

FABRIC_SIDE = r"""
import json, socket, sys, time
t0 = time.perf_counter()
import paramiko
from fabric import Config, Connection
t_import = time.perf_counter() - t0
host, ssh_config, n, known_hosts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cfg = Config(runtime_ssh_path=ssh_config)
c = Connection(host, config=cfg, connect_timeout=10)
# our strictness on fabric's public client: known_hosts only, unknown keys refused
c.client.load_host_keys(known_hosts)
c.client.set_missing_host_key_policy(paramiko.RejectPolicy())
t0 = time.perf_counter()
c.open()
c.transport.set_keepalive(15)
c.transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 30000)
t_connect = time.perf_counter() - t0
execs = []
for _ in range(n):
    t0 = time.perf_counter(); r = c.run("true", hide=True, in_stream=False, warn=True); execs.append(time.perf_counter() - t0)
    assert r.ok, r.stderr
c.close()
print(json.dumps({"import_s": t_import, "connect_s": t_connect, "exec_s": execs}))
"""


def _fabric_python() -> str:
    explicit = os.environ.get("DFCTL_BENCH_FABRIC_PYTHON")
    if explicit:
        return explicit
    venv = PROJECT / ".bench-fabric"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *FABRIC_SPEC], check=True)
    return str(py)


def _side(python: str, script: str, args: list[str], env: dict) -> dict:
    p = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, timeout=300, env=env,
                       cwd=PROJECT)
    if p.returncode != 0:
        raise RuntimeError(f"{python}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


def main() -> int:
    sys.path.insert(0, str(PROJECT))
    from tests.rig.rig import Rig

    fabric_py = _fabric_python()
    versions = subprocess.run([fabric_py, "-c", "import fabric, paramiko, invoke; print(fabric.__version__, "
                               "paramiko.__version__, invoke.__version__)"], capture_output=True, text=True,
                              check=True).stdout.split()
    rig = Rig.create(hosts=1)
    try:
        host = rig.hosts[0]
        env = {**os.environ, "PYTHONPATH": str(PROJECT), "HOME": os.environ.get("HOME", "/root")}
        args = [host.name, str(rig.ssh_config_path), str(EXECS)]
        runs: dict[str, list[dict]] = {"dfctl (paramiko)": [], "fabric.Connection": []}
        for _ in range(ROUNDS):
            runs["dfctl (paramiko)"].append(_side(sys.executable, DFCTL_SIDE, args, env))
            runs["fabric.Connection"].append(_side(fabric_py, FABRIC_SIDE, args + [str(rig.known_hosts_path)], env))
    finally:
        rig.close()
    rows = []
    for name, rs in runs.items():
        execs = [e for r in rs for e in r["exec_s"]]
        rows.append((name, _ms([r["import_s"] for r in rs]), _ms([r["connect_s"] for r in rs]), _ms(execs),
                     f"{statistics.quantiles(execs, n=10)[-1] * 1000:.1f}"))
    load = os.getloadavg()[0]
    text = [
        "# SSH transport: dfctl's paramiko layer beside fabric.Connection (bench/ssh.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on the dev machine ({platform.platform()}, "
        f"{os.cpu_count()} cores, no GPU; shared with other helpers, 1-min load {load:.1f}), against one rig host "
        f"(real OpenSSH sshd in a network namespace). {ROUNDS} rounds alternating sides, each a fresh Python "
        f"process: import, connect, then {EXECS} execs of `true` on the one connection. fabric {versions[0]} "
        f"(paramiko {versions[1]}, invoke {versions[2]}) with our RejectPolicy + known_hosts, keepalive 15 s and "
        "TCP_USER_TIMEOUT set on its public client/transport. Medians (ms):",
        "",
        "| transport | import | connect | exec (p50) | exec (p90) |",
        "|---|---|---|---|---|",
        *[f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |" for r in rows],
        "",
    ]
    RESULTS.write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
