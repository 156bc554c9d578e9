"""The Prometheus endpoint, scraped the way Prometheus scrapes it: a real HTTP GET on
loopback (urllib) and the text parsed by prometheus_client's own parser
(prometheus_client.parser.text_string_to_metric_families). Constructed states for the
shape of every family; a real watch of real local runs (python programs in tmp dirs,
tests/test_watch.py's) for the values; the real CLI in a child process for
`watch --metrics-port` and `export-metrics`, ended by SIGTERM as a service manager would."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.errors import BadInputError
from controller.expose.live_fleet import LiveFleet, live_records
from controller.expose.metric_families import FINDING_KINDS, MIB_BYTES, RUN_STATES, tick_families
from controller.expose.scrape_endpoint import MetricsEndpoint
from controller.records import (
    Finding,
    GpuSample,
    HostSample,
    JobNode,
    JobState,
    ProgressSample,
    RestartEvent,
    RunState,
)
from controller.store.runstore import RunRecord, RunStore
from controller.watch import Watch
from tests.deploy_support import dfctl, wait_for
from tests.test_probe import launch_local
from tests.test_watch import PROGRESS_PROGRAM, ROOT, record_for

Samples = dict[tuple[str, frozenset], float]


def scrape(url: str) -> tuple[str, Samples]:
    """GET the endpoint; (content type, {(sample name, labels): value}) as the library parses it."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        ctype = resp.headers.get("Content-Type", "")
        text = resp.read().decode("utf-8")
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return ctype, out


def value(samples: Samples, metric: str, /, **labels: str) -> float | None:
    """The one sample of `metric` whose labels include `labels` (None: no such sample)."""
    hits = [v for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= ls]
    assert len(hits) <= 1, (metric, labels, hits)
    return hits[0] if hits else None


def names(samples: Samples) -> set[str]:
    return {n for n, _ in samples}


def finding(kind: str, summary: str, run_id: str) -> Finding:
    return Finding(kind=kind, severity="critical", summary=summary, run_id=run_id)


def constructed() -> tuple[list[RunState], list[HostSample], list[JobState]]:
    solo = RunState(run_id="r-solo", name="solo", target="ssh root@pve1", state="running", started_s=1700000000.0,
                    last_progress_s=1700000100.5,
                    progress=[ProgressSample(step=10, tok_per_s=20000.0, loss=3.25, accept_len=2.5),
                              ProgressSample(step=11, tok_per_s=21500.0),      # newest: no loss, no accept_len
                              ProgressSample(step=12)],                         # newest step: no figures at all
                    gpus=[GpuSample(index=0, uuid="GPU-a", util_pct=87.0, mem_used_mib=40960.0, mem_total_mib=81559.0),
                          GpuSample(index=1, uuid="GPU-b", util_pct=None, mem_used_mib=None, mem_total_mib=81559.0)],
                    findings=[finding("oom", "CUDA OOM on GPU 0", "r-solo"), finding("oom", "CUDA OOM on GPU 1", "r-solo"),
                              finding("hang", "no step for 600 s", "r-solo"), finding("custom_kind", "x", "r-solo")])
    member = RunState(run_id="j1.node1", name="big node1", target="pct 200 on pve2", state="failed",
                      progress=[ProgressSample(step=7, tok_per_s=9000.0, loss=4.0)])
    job = JobState(job_id="j1", name="big", target="2 nodes", state="failed", tok_per_s=9000.0, step=7, loss=4.0,
                   nodes=[JobNode(node_rank=1, run_id="j1.node1", target="pct 200 on pve2")],
                   restarts=[RestartEvent(node_rank=1, time_s=None, attempts_left=2, max_restarts=3)],
                   findings=[finding("crash", "rank 3 failed first", "j1")])
    hosts = [HostSample(host="pve1", reachable=True, probe_duration_s=0.042),
             HostSample(host="pve2", reachable=False, probe_duration_s=None)]
    return [solo, member], hosts, [job]


@pytest.fixture
def endpoint():
    ep = MetricsEndpoint(0)
    yield ep
    ep.close()


def test_constructed_states_scrape_back_as_their_newest_known_values(endpoint):
    states, hosts, jobs = constructed()
    endpoint.collector.publish(tick_families(states, hosts, jobs, time_s=1700000200.25, duration_s=0.125))
    ctype, got = scrape(endpoint.url)
    assert ctype.startswith("text/plain")
    solo = {"run": "r-solo", "name": "solo", "job": "", "node": "", "target": "ssh root@pve1"}
    assert value(got, "dfctl_run_step", **solo) == 12                      # the newest sample's step
    assert value(got, "dfctl_run_tokens_per_second", **solo) == 21500.0    # the newest sample that has one
    assert value(got, "dfctl_run_loss", **solo) == 3.25
    assert value(got, "dfctl_run_accept_len", **solo) == 2.5
    assert value(got, "dfctl_run_start_time_seconds", **solo) == 1700000000.0
    assert value(got, "dfctl_run_last_progress_time_seconds", **solo) == 1700000100.5
    # one-hot state over every state a run can be in
    assert {s: value(got, "dfctl_run_state", run="r-solo", state=s) for s in RUN_STATES} == \
        {s: (1.0 if s == "running" else 0.0) for s in RUN_STATES}
    # findings by kind: every known kind has a series (0 included), an unknown kind is added
    counts = {k: value(got, "dfctl_run_findings", run="r-solo", kind=k) for k in (*FINDING_KINDS, "custom_kind")}
    assert counts == {k: {"oom": 2.0, "hang": 1.0, "custom_kind": 1.0}.get(k, 0.0) for k in counts}
    # GPUs in base units; an unreadable field is no sample, the readable ones stay
    g0 = dict(solo, gpu="0", uuid="GPU-a")
    assert value(got, "dfctl_gpu_utilization_ratio", **g0) == pytest.approx(0.87)
    assert value(got, "dfctl_gpu_memory_used_bytes", **g0) == 40960.0 * MIB_BYTES
    assert value(got, "dfctl_gpu_memory_total_bytes", **g0) == 81559.0 * MIB_BYTES
    assert value(got, "dfctl_gpu_utilization_ratio", run="r-solo", gpu="1") is None
    assert value(got, "dfctl_gpu_memory_used_bytes", run="r-solo", gpu="1") is None
    assert value(got, "dfctl_gpu_memory_total_bytes", run="r-solo", gpu="1", uuid="GPU-b") == 81559.0 * MIB_BYTES
    # a job's member carries the job id and its node rank; the job has its own series
    member = {"run": "j1.node1", "job": "j1", "node": "1", "target": "pct 200 on pve2"}
    assert value(got, "dfctl_run_step", **member) == 7
    assert value(got, "dfctl_run_state", **member, state="failed") == 1.0
    job = {"job": "j1", "name": "big", "target": "2 nodes"}
    assert (value(got, "dfctl_job_tokens_per_second", **job), value(got, "dfctl_job_step", **job),
            value(got, "dfctl_job_loss", **job), value(got, "dfctl_job_restarts", **job)) == (9000.0, 7, 4.0, 1)
    assert value(got, "dfctl_job_findings", **job, kind="crash") == 1.0
    assert value(got, "dfctl_job_state", **job, state="failed") == 1.0
    assert value(got, "dfctl_host_reachable", host="pve1") == 1.0
    assert value(got, "dfctl_host_reachable", host="pve2") == 0.0
    assert value(got, "dfctl_host_probe_duration_seconds", host="pve1") == 0.042
    assert value(got, "dfctl_host_probe_duration_seconds", host="pve2") is None
    assert value(got, "dfctl_watch_last_tick_time_seconds") == 1700000200.25
    assert value(got, "dfctl_watch_last_tick_duration_seconds") == 0.125


def test_a_run_with_nothing_known_yet_has_only_its_state_and_zero_findings(endpoint):
    endpoint.collector.publish(tick_families([RunState(run_id="fresh")], [], [], time_s=None, duration_s=None))
    _, got = scrape(endpoint.url)
    assert names(got) == {"dfctl_run_state", "dfctl_run_findings"}
    assert value(got, "dfctl_run_state", run="fresh", name="fresh", state="unknown") == 1.0
    assert sum(v for (n, _), v in got.items() if n == "dfctl_run_findings") == 0


def test_openmetrics_scrape_names_the_units_and_the_global_registry_is_untouched(endpoint):
    states, hosts, jobs = constructed()
    endpoint.collector.publish(tick_families(states, hosts, jobs, time_s=1.0, duration_s=0.5))
    req = urllib.request.Request(endpoint.url, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse

    units = {f.name: f.unit for f in om_parse(text)}
    assert units["dfctl_gpu_memory_used_bytes"] == "bytes" and units["dfctl_gpu_utilization_ratio"] == "ratio"
    assert units["dfctl_watch_last_tick_duration_seconds"] == "seconds" and units["dfctl_run_step"] == ""
    # a registry of its own: no process/GC collectors here, no dfctl family in the library's global one
    _, got = scrape(endpoint.url)
    assert all(n.startswith("dfctl_") for n in names(got))
    assert not [n for n in prometheus_client.REGISTRY._names_to_collectors if n.startswith("dfctl_")]


def test_each_scrape_is_one_whole_tick(endpoint):
    """publish() swaps the list whole: a scrape never mixes two ticks."""
    a = tick_families([RunState(run_id="a", state="running")], [], [], time_s=1.0, duration_s=0.1)
    b = tick_families([RunState(run_id="b", state="running")], [], [], time_s=2.0, duration_s=0.1)
    endpoint.collector.publish(a)
    _, first = scrape(endpoint.url)
    endpoint.collector.publish(b)
    _, second = scrape(endpoint.url)
    assert {dict(ls).get("run") for n, ls in first if n == "dfctl_run_state"} == {"a"}
    assert {dict(ls).get("run") for n, ls in second if n == "dfctl_run_state"} == {"b"}
    assert value(second, "dfctl_watch_last_tick_time_seconds") == 2.0


def held_port() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def test_a_port_in_use_is_bad_input_naming_it():
    holder = held_port()
    try:
        port = holder.getsockname()[1]
        with pytest.raises(BadInputError) as exc:
            MetricsEndpoint(port)
        assert f"--metrics-port {port}: port {port} on 127.0.0.1 is already in use" in str(exc.value)
        assert exc.value.exit_code == 2
    finally:
        holder.close()
    with pytest.raises(BadInputError, match="not a TCP port"):
        MetricsEndpoint(70000)


def test_close_frees_the_port():
    ep = MetricsEndpoint(0)
    port, url = ep.port, ep.url
    scrape(url)
    ep.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)
    again = MetricsEndpoint(port)      # the same port binds again at once
    again.close()


def test_a_real_watch_of_a_local_run_scrapes_as_its_run_state(tmp_path, endpoint):
    store = RunStore(tmp_path / "reg.sqlite")
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM)
    store.add_run(record_for(run, "local-r"))
    w = Watch(store.runs(), store, gpu=False)
    w.on_tick = endpoint.collector.publish_report
    try:
        def stepped():
            rep = w.tick()
            st = rep.states[0]
            return rep if st.progress and st.state == "running" else None
        rep = wait_for(stepped, timeout_s=40, interval_s=0.2, what="a step of the local run")
        _, got = scrape(endpoint.url)
        st = rep.states[0]
        labels = {"run": "local-r", "name": "local-r", "job": "", "node": "", "target": "local"}
        assert value(got, "dfctl_run_step", **labels) == st.progress[-1].step
        assert value(got, "dfctl_run_tokens_per_second", **labels) == st.progress[-1].tok_per_s
        assert value(got, "dfctl_run_loss", **labels) == st.progress[-1].loss
        assert value(got, "dfctl_run_state", **labels, state="running") == 1.0
        assert value(got, "dfctl_run_last_progress_time_seconds", **labels) == st.last_progress_s
        assert value(got, "dfctl_watch_last_tick_time_seconds") == rep.time_s
        assert value(got, "dfctl_host_reachable", host="local") == 1.0
        # the program's own numbers, from its metrics file: what the endpoint says is what it wrote
        written = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines() if line]
        assert value(got, "dfctl_run_loss", run="local-r") == written[-1]["loss"]
        assert 1 <= value(got, "dfctl_run_step", run="local-r") <= written[-1]["step"]
        # killed: the next ticks turn it failed, and the scrape says so
        os.kill(run.trainer_pid(), signal.SIGKILL)
        wait_for(lambda: w.tick().states[0].state == "failed", timeout_s=40, interval_s=0.2, what="the kill seen")
        _, got = scrape(endpoint.url)
        assert value(got, "dfctl_run_state", run="local-r", state="failed") == 1.0
        assert value(got, "dfctl_run_state", run="local-r", state="running") == 0.0
        found = [f.kind for f in w.states[0].findings]
        assert {"crash", "oom"} & set(found)                      # SIGKILL: exit 137 (test_watch.py's reading)
        assert {k: value(got, "dfctl_run_findings", run="local-r", kind=k) for k in set(found)} == \
            {k: float(found.count(k)) for k in set(found)}
    finally:
        w.close()
        store.close()
        if run.proc.poll() is None:
            run.proc.kill()


def test_live_fleet_picks_up_a_run_registered_after_it_started(tmp_path):
    store = RunStore(tmp_path / "reg.sqlite")
    a = launch_local(tmp_path / "a", PROGRESS_PROGRAM)
    b = launch_local(tmp_path / "b", PROGRESS_PROGRAM)
    store.add_run(record_for(a, "run-a"))
    fleet = LiveFleet(store, gpu=False, interval_s=0.3)
    try:
        assert fleet.refresh() == ["run-a"] and fleet.refresh() == []          # nothing new: the same Watch
        wait_for(lambda: fleet.tick().states[0].progress, timeout_s=40, interval_s=0.2, what="run-a's first step")
        store.add_run(record_for(b, "run-b"))
        assert fleet.refresh() == ["run-b"] and fleet.remakes == 2
        assert sorted(s.run_id for s in fleet.states) == ["run-a", "run-b"]
        assert sorted(r.run_id for r in live_records(store)) == ["run-a", "run-b"]
    finally:
        fleet.close()
        store.close()
        for r in (a, b):
            if r.proc.poll() is None:
                r.proc.kill()


def test_an_exporter_with_no_live_run_still_says_it_ticks(tmp_path, endpoint):
    store = RunStore(tmp_path / "reg.sqlite")
    store.add_run(RunRecord(run_id="old", name="old", target_kind="local", target="local", state="finished"))
    fleet = LiveFleet(store, gpu=False, on_tick=endpoint.collector.publish_report)
    try:
        assert fleet.refresh() == [] and fleet.watch is None           # an ended run is not watched
        before = time.time()
        fleet.tick()
        _, got = scrape(endpoint.url)
        assert names(got) == {"dfctl_watch_last_tick_time_seconds", "dfctl_watch_last_tick_duration_seconds"}
        assert value(got, "dfctl_watch_last_tick_time_seconds") >= before
    finally:
        fleet.close()
        store.close()


def test_a_jobs_nodes_carry_its_id_and_their_rank_in_a_real_watch(tmp_path, endpoint):
    """A job row and one member row per node (the registry's job contract), each node a
    real local program: the members' series are labelled job/node, the job has its own."""
    store = RunStore(tmp_path / "reg.sqlite")
    nodes = [launch_local(tmp_path / f"n{i}", PROGRESS_PROGRAM) for i in (0, 1)]
    store.add_run(RunRecord(run_id="jb", name="jb", target_kind="job", target="job: 2 nodes", started_s=time.time(),
                            playbook={"distributed": {"nproc_per_node": 1, "max_restarts": 0}}))
    for i, run in enumerate(nodes):
        rec = record_for(run, f"jb.node{i}")
        rec.name, rec.job_id, rec.node_rank = "jb", "jb", i
        store.add_run(rec)
    fleet = LiveFleet(store, gpu=False, interval_s=0.3, on_tick=endpoint.collector.publish_report)
    try:
        assert fleet.refresh() == ["jb"]                       # the job once; its nodes come with it
        wait_for(lambda: all(s.progress for s in fleet.tick().states), timeout_s=40, interval_s=0.2,
                 what="a step on both nodes")
        _, got = scrape(endpoint.url)
        job = fleet.watch.job_states[0] if fleet.watch else None
        assert job is not None and job.step is not None and job.tok_per_s is not None and job.state == "running"
        for i in (0, 1):
            st = next(s for s in fleet.states if s.run_id == f"jb.node{i}")
            assert value(got, "dfctl_run_step", run=f"jb.node{i}", job="jb", node=str(i), name="jb node%d" % i) == \
                st.progress[-1].step
        assert value(got, "dfctl_job_step", job="jb") == job.step
        assert value(got, "dfctl_job_tokens_per_second", job="jb") == job.tok_per_s
        assert value(got, "dfctl_job_state", job="jb", state=job.state) == 1.0
    finally:
        fleet.close()
        store.close()
        for r in nodes:
            if r.proc.poll() is None:
                r.proc.kill()


# -- the CLI, in child processes --------------------------------------------------------------

def _child(args: list[str], err: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "controller", *args], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err.open("w"))


def _served_url(err: Path, child: subprocess.Popen) -> str:
    def said():
        if child.poll() is not None:
            raise AssertionError(f"exited {child.returncode}: {err.read_text()}")
        return next((ln.split(" at ", 1)[1] for ln in err.read_text().splitlines()
                     if ln.startswith("dfctl: metrics at ")), None)
    return wait_for(said, timeout_s=60, interval_s=0.1, what="the endpoint's URL on stderr")


def _stop(child: subprocess.Popen) -> int:
    child.send_signal(signal.SIGTERM)
    return child.wait(timeout=60)


def test_cli_watch_metrics_port_serves_the_watched_run_until_sigterm(tmp_path, _dfctl_home):
    store = RunStore()
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM)
    store.add_run(record_for(run, "cli-r"))
    store.close()
    err = tmp_path / "watch.err"
    child = _child(["watch", "cli-r", "--interval", "0.3", "--metrics-port", "0"], err)
    try:
        url = _served_url(err, child)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")

        def a_step():
            _, got = scrape(url)
            return got if (value(got, "dfctl_run_step", run="cli-r") or 0) >= 1 else None
        got = wait_for(a_step, timeout_s=60, interval_s=0.2, what="a step in the scrape")
        assert value(got, "dfctl_run_state", run="cli-r", state="running") == 1.0
        assert value(got, "dfctl_run_tokens_per_second", run="cli-r", target="local") == 21500.0
        assert _stop(child) == 130
        with pytest.raises(urllib.error.URLError):       # the port is given back
            urllib.request.urlopen(url, timeout=5)
    finally:
        if child.poll() is None:
            child.kill()
        if run.proc.poll() is None:
            run.proc.kill()


def test_cli_export_metrics_serves_every_live_run_and_one_deployed_later(tmp_path, _dfctl_home):
    store = RunStore()
    a = launch_local(tmp_path / "a", PROGRESS_PROGRAM)
    b = launch_local(tmp_path / "b", PROGRESS_PROGRAM)
    store.add_run(record_for(a, "exp-a"))
    err = tmp_path / "export.err"
    child = _child(["export-metrics", "--metrics-port", "0", "--interval", "0.3"], err)
    try:
        url = _served_url(err, child)

        def steps(*runs: str):
            def check():
                _, got = scrape(url)
                return got if all((value(got, "dfctl_run_step", run=r) or 0) >= 1 for r in runs) else None
            return check
        wait_for(steps("exp-a"), timeout_s=60, interval_s=0.2, what="exp-a's step in the scrape")
        store.add_run(record_for(b, "exp-b"))       # deployed while the exporter runs
        got = wait_for(steps("exp-a", "exp-b"), timeout_s=60, interval_s=0.2, what="both runs in the scrape")
        assert value(got, "dfctl_run_state", run="exp-b", state="running") == 1.0
        assert "dfctl: export-metrics: watching exp-b" in err.read_text()
        assert _stop(child) == 130
    finally:
        store.close()
        if child.poll() is None:
            child.kill()
        for r in (a, b):
            if r.proc.poll() is None:
                r.proc.kill()


def test_cli_refuses_a_taken_port_a_lone_addr_and_once(tmp_path, _dfctl_home, capsys):
    store = RunStore()
    run = launch_local(tmp_path / "r", PROGRESS_PROGRAM)
    store.add_run(record_for(run, "ref-r"))
    store.close()
    holder = held_port()
    port = holder.getsockname()[1]
    try:
        code, _, err = dfctl(capsys, "watch", "ref-r", "--metrics-port", str(port))
        assert code == 2 and f"dfctl: error: --metrics-port {port}: port {port} on 127.0.0.1 is already in use" in err
        code, _, err = dfctl(capsys, "export-metrics", "--metrics-port", str(port))
        assert code == 2 and f"port {port} on 127.0.0.1 is already in use" in err
    finally:
        holder.close()
        if run.proc.poll() is None:
            run.proc.kill()
    code, _, err = dfctl(capsys, "watch", "ref-r", "--metrics-addr", "127.0.0.1")
    assert code == 2 and "--metrics-addr 127.0.0.1: needs --metrics-port PORT" in err
    code, _, err = dfctl(capsys, "watch", "ref-r", "--once", "--metrics-port", "0")
    assert code == 2 and "--metrics-port with --once" in err
    code, _, err = dfctl(capsys, "watch", "no-such-run", "--once", "--metrics-port", "0")   # the flags first
    assert code == 2 and "--metrics-port with --once" in err and "no-such-run" not in err
    code, _, err = dfctl(capsys, "export-metrics", "--metrics-port", "0", "--metrics-addr", "no-such-host.invalid")
    assert code == 2 and "--metrics-addr no-such-host.invalid" in err
    assert errno.EADDRINUSE   # the errno the refusal is keyed on exists on this platform
