"""Helpers for local multi-node jobs: the workers of a node (to kill one), a stop that
leaves nothing, and launch_local_job -- two workdirs on this machine, each node's torchrun
launched through controller.ship.launch.launch_run (detached, unbuffered, its own run dir),
rendezvous c10d on 127.0.0.1, and the registry rows of the job contract. The tests deploy
their jobs with `dfctl deploy`; bench/watch.py uses launch_local_job, so its timings hold
no CLI start-up."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from controller.playbook import load_playbook
from controller.ship.bundle import build_bundle
from controller.ship.deploy import deploy_bundle
from controller.ship.launch import launch_run, launch_spec
from controller.store.runstore import RunRecord, RunStore
from controller.transport.factory import target_label
from controller.transport.local import LocalTransport

ROOT = Path(__file__).resolve().parents[1]

TRAINER_ARGS = ["--config", "tiny", "--data", "{workdir}/data/tiny", "--synthetic-samples", "240",
                "--run-dir", "{run_dir}", "--steps", "100000", "--log-every", "2", "--device", "cpu",
                "--prefetch-workers", "1"]


def job_rest_toml(*, name: str, steps: int, nproc: int, ifname: str, master_port: int | None = None,
                  rdzv_timeout_s: float | None = 60, watch_interval_s: float | None = None) -> str:
    """Everything of a job playbook after its [[nodes]]: [distributed] (gloo over `ifname`),
    the bundled trainer's tiny config for `steps` steps on CPU, wandb off -- the one recipe
    the job tests (local, rig, watch) share."""
    port = master_port if master_port is not None else free_port()
    timeout = f"rdzv_timeout_s = {rdzv_timeout_s:g}\n" if rdzv_timeout_s is not None else ""
    watch = f"[watch]\ninterval_s = {watch_interval_s:g}\n" if watch_interval_s is not None else ""
    return f"""[distributed]
nproc_per_node = {nproc}
master_port = {port}
{timeout}env = {{ GLOO_SOCKET_IFNAME = "{ifname}" }}
[bundle]
paths = ["trainer"]
[run]
name = "{name}"
module = "trainer"
args = ["--config", "tiny", "--data", "{{workdir}}/data/synth", "--synthetic-samples", "200",
        "--run-dir", "{{run_dir}}", "--steps", "{steps}", "--log-every", "1", "--device", "cpu",
        "--prefetch-workers", "1"]
env = {{ WANDB_MODE = "disabled", OMP_NUM_THREADS = "1" }}
stop_grace_s = 10
{watch}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalJob:
    job_id: str
    members: list[RunRecord]
    workdirs: list[str]


def playbook_file(tmp: Path, name: str) -> Path:
    pb = tmp / "job.toml"
    pb.write_text(f"""
[target]
kind = "local"
workdir = "{tmp}/node0"
[bundle]
paths = ["trainer"]
[run]
name = "{name}"
module = "trainer"
env = {{ WANDB_MODE = "disabled", OMP_NUM_THREADS = "1" }}
[watch]
interval_s = 0.5
""")
    return pb


def launch_local_job(tmp: Path, store: RunStore, *, name: str = "job", nodes: int = 2, nproc: int = 1,
                     extra_trainer_args: list[str] | None = None) -> LocalJob:
    pb = load_playbook(playbook_file(tmp, name))
    bundle = build_bundle(ROOT, pb.bundle)
    t = LocalTransport()
    job_id = f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(2).hex()}"
    port = free_port()
    members, workdirs = [], []
    started = time.time()
    for i in range(nodes):
        workdir = str(tmp / f"node{i}")
        deploy_bundle(t, workdir, bundle)
        spec = launch_spec(pb, workdir, name=name)
        spec["run_id"] = job_id
        spec["module"] = "torch.distributed.run"
        spec["args"] = ["--nnodes", str(nodes), "--node-rank", str(i), "--nproc-per-node", str(nproc),
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", job_id,
                        "--max-restarts", "0", "-m", "trainer", *TRAINER_ARGS, *(extra_trainer_args or [])]
        run = launch_run(t, pb, workdir, spec=spec)
        target = {"kind": "local", "workdir": workdir}
        members.append(RunRecord(
            run_id=f"{job_id}.node{i}", name=name, target_kind="local", target=target_label(pb.target),
            workdir=workdir, run_dir=run.run_dir, log_path=run.log_path, pid=run.pid, release_id=run.release_id,
            playbook={**pb.for_registry(), "target": target}, started_s=run.started_s, state="running",
            job_id=job_id, node_rank=i))
        workdirs.append(workdir)
    reg = pb.for_registry()
    reg["nodes"] = [m.playbook["target"] for m in members]
    reg["distributed"] = {"nproc_per_node": nproc, "rdzv_backend": "c10d", "max_restarts": 0}
    store.add_run(RunRecord(run_id=job_id, name=name, target_kind="job",
                            target=f"job: {nodes} nodes ({', '.join(m.target for m in members)})",
                            playbook=reg, release_id=members[0].release_id, started_s=started, state="running"))
    for m in members:
        store.add_run(m)
    return LocalJob(job_id, members, workdirs)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def workers_of(wrapper_pid: int) -> list[tuple[int, int, int]]:
    """(pid, global rank, local rank) of each trainer worker under a node's wrapper ->
    torchrun -> workers, by local rank."""
    out = []
    for agent in children(wrapper_pid):
        for w in children(agent):
            try:
                env = dict(e.split(b"=", 1) for e in Path(f"/proc/{w}/environ").read_bytes().split(b"\0") if b"=" in e)
            except OSError:
                continue
            if b"RANK" in env and b"LOCAL_RANK" in env:
                out.append((w, int(env[b"RANK"]), int(env[b"LOCAL_RANK"])))
    return sorted(out, key=lambda x: x[2])


def worker_of(wrapper_pid: int) -> tuple[int, int] | None:
    """(pid, global rank) of the first trainer worker under a node's wrapper."""
    ws = workers_of(wrapper_pid)
    return (ws[0][0], ws[0][1]) if ws else None


def stop_job(job: LocalJob, timeout_s: float = 60.0) -> None:
    """SIGTERM each node's session as `dfctl stop` does (the wrapper outlives it, records the
    exit code and exits itself); wait until every wrapper is gone."""
    import signal

    for m in job.members:
        try:
            os.killpg(m.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    end = time.monotonic() + timeout_s
    for m in job.members:
        while time.monotonic() < end:
            try:
                if Path(f"/proc/{m.pid}/stat").read_text().split(") ")[-1].startswith("Z"):
                    break
            except OSError:
                break
            time.sleep(0.05)
