"""A tick's states as Prometheus metric families: gauges of what the watch already knows.

Why gauges re-read from the tick, not counters the watch would have to feed: every figure
here is a reading a RunState, HostSample or JobState holds, so a scrape says what the
dashboard and `watch --json` say, and the exporter keeps no tally of its own to drift.
A figure that is unknown (None) is no sample at all -- not 0, not NaN -- so Prometheus
shows the series absent, the way the dashboard shows n/a. Units are Prometheus' base units
and stand in the names (`_seconds`, `_bytes`, `_ratio` for 0..1). A run's state and its
findings are one sample per possible value (1 for the state it is in, 0 for the others; a
count for every finding kind, 0 included), so an alert on `dfctl_run_findings{kind="oom"} > 0`
or on a state has a series to read from the first scrape, not only after the first event.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, get_args

from prometheus_client.core import GaugeMetricFamily, Metric

from controller.records import FindingKind, HostSample, JobState, RunState, RunStatus
from controller.view.training import latest

RUN_LABELS = ("run", "name", "job", "node", "target")
"""Every run series': its id, its name, and for a job's member the job id and node rank
("" for a run on its own), and where it runs ("local", "ssh root@pve1", "pct 200 on pve1")."""
GPU_LABELS = (*RUN_LABELS, "gpu", "uuid")
JOB_LABELS = ("job", "name", "target")
HOST_LABELS = ("host",)

RUN_STATES: tuple[str, ...] = get_args(RunStatus)
FINDING_KINDS: tuple[str, ...] = get_args(FindingKind)
MIB_BYTES = 1 << 20                  # nvidia-smi's memory.used / memory.total are MiB (nounits)


BASE_UNITS = ("seconds", "bytes", "ratio")


def _gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
    """A gauge whose unit (OpenMetrics' `# UNIT` line) is the base unit its name ends in."""
    unit = next((u for u in BASE_UNITS if name.endswith("_" + u)), "")
    return GaugeMetricFamily(name, doc, labels=list(labels), unit=unit)


def _add(family: GaugeMetricFamily, labels: list[str], value: float | None) -> None:
    if value is not None:
        family.add_metric(labels, float(value))


def _memberships(jobs: Iterable[JobState]) -> dict[str, tuple[str, str]]:
    """Member run id -> (job id, node rank as text)."""
    return {n.run_id: (j.job_id, str(n.node_rank)) for j in jobs for n in j.nodes}


def _one_hot(family: GaugeMetricFamily, labels: list[str], state: str) -> None:
    for s in RUN_STATES if state in RUN_STATES else (*RUN_STATES, state):
        family.add_metric([*labels, s], 1.0 if s == state else 0.0)


def _finding_counts(family: GaugeMetricFamily, labels: list[str], kinds: Iterable[str]) -> None:
    counts = Counter(kinds)
    for kind in (*FINDING_KINDS, *sorted(set(counts) - set(FINDING_KINDS))):
        family.add_metric([*labels, kind], float(counts.get(kind, 0)))


def run_families(states: Iterable[RunState], jobs: Iterable[JobState] = ()) -> list[Metric]:
    """One sample per run per figure (its newest known value); GPUs per run and GPU."""
    member = _memberships(jobs)
    tok = _gauge("dfctl_run_tokens_per_second", "Training throughput: target tokens per second, newest progress "
                 "sample that has one.", RUN_LABELS)
    step = _gauge("dfctl_run_step", "Newest training step seen.", RUN_LABELS)
    loss = _gauge("dfctl_run_loss", "Newest training loss seen.", RUN_LABELS)
    accept = _gauge("dfctl_run_accept_len", "Newest accept length seen (accepted prefix per block + 1).", RUN_LABELS)
    started = _gauge("dfctl_run_start_time_seconds", "When the run was launched (unix time).", RUN_LABELS)
    progressed = _gauge("dfctl_run_last_progress_time_seconds", "When the run last made progress "
                        "(unix time, controller's clock).", RUN_LABELS)
    state = _gauge("dfctl_run_state", "The run's state: 1 for the state it is in, 0 for the others.",
                   (*RUN_LABELS, "state"))
    findings = _gauge("dfctl_run_findings", "Live findings of the run (their cause holds), by kind.",
                      (*RUN_LABELS, "kind"))
    util = _gauge("dfctl_gpu_utilization_ratio", "GPU utilization (nvidia-smi utilization.gpu), 0..1, per GPU "
                  "the run uses.", GPU_LABELS)
    used = _gauge("dfctl_gpu_memory_used_bytes", "GPU memory in use (nvidia-smi memory.used), per GPU the run "
                  "uses.", GPU_LABELS)
    total = _gauge("dfctl_gpu_memory_total_bytes", "GPU memory in all (nvidia-smi memory.total), per GPU the "
                   "run uses.", GPU_LABELS)
    for st in states:
        job, node = member.get(st.run_id, ("", ""))
        labels = [st.run_id, st.name or st.run_id, job, node, st.target]
        _add(tok, labels, latest(st.progress, "tok_per_s"))
        _add(step, labels, st.progress[-1].step if st.progress else None)
        _add(loss, labels, latest(st.progress, "loss"))
        _add(accept, labels, latest(st.progress, "accept_len"))
        _add(started, labels, st.started_s)
        _add(progressed, labels, st.last_progress_s)
        _one_hot(state, labels, st.state)
        _finding_counts(findings, labels, (f.kind for f in st.findings))
        for g in st.gpus:
            gl = [*labels, str(g.index), g.uuid or ""]
            _add(util, gl, g.util_pct / 100.0 if g.util_pct is not None else None)
            _add(used, gl, g.mem_used_mib * MIB_BYTES if g.mem_used_mib is not None else None)
            _add(total, gl, g.mem_total_mib * MIB_BYTES if g.mem_total_mib is not None else None)
    return [tok, step, loss, accept, started, progressed, state, findings, util, used, total]


def job_families(jobs: Iterable[JobState]) -> list[Metric]:
    """A job's own figures (its members are runs above, labelled with the job's id)."""
    tok = _gauge("dfctl_job_tokens_per_second", "A job's throughput: the sum of its nodes' newest tokens per "
                 "second.", JOB_LABELS)
    step = _gauge("dfctl_job_step", "A job's newest step.", JOB_LABELS)
    loss = _gauge("dfctl_job_loss", "A job's newest loss.", JOB_LABELS)
    restarts = _gauge("dfctl_job_restarts", "torchrun worker restarts seen in the job.", JOB_LABELS)
    state = _gauge("dfctl_job_state", "The job's state: 1 for the state it is in, 0 for the others.",
                   (*JOB_LABELS, "state"))
    findings = _gauge("dfctl_job_findings", "The job's own findings (the rank that failed first), by kind.",
                      (*JOB_LABELS, "kind"))
    for j in jobs:
        labels = [j.job_id, j.name or j.job_id, j.target]
        _add(tok, labels, j.tok_per_s)
        _add(step, labels, j.step)
        _add(loss, labels, j.loss)
        _add(restarts, labels, len(j.restarts))
        _one_hot(state, labels, j.state)
        _finding_counts(findings, labels, (f.kind for f in j.findings))
    return [tok, step, loss, restarts, state, findings]


def host_families(hosts: Iterable[HostSample]) -> list[Metric]:
    """Whether each watched host answered, and how long its probe took."""
    up = _gauge("dfctl_host_reachable", "1 when the host answered the watch's last probe, else 0.", HOST_LABELS)
    probe = _gauge("dfctl_host_probe_duration_seconds", "How long the host's last probe took.", HOST_LABELS)
    for h in hosts:
        _add(up, [h.host], 1.0 if h.reachable else 0.0)
        _add(probe, [h.host], h.probe_duration_s)
    return [up, probe]


def tick_families(states: Iterable[RunState], hosts: Iterable[HostSample], jobs: Iterable[JobState],
                  time_s: float | None, duration_s: float | None) -> list[Metric]:
    """Everything one tick exposes, plus when that tick was (a scraper can tell a stuck
    watch from a quiet run: the tick's time stops moving)."""
    jobs = list(jobs)
    tick = _gauge("dfctl_watch_last_tick_time_seconds", "When the watch's newest tick finished (unix time).", ())
    took = _gauge("dfctl_watch_last_tick_duration_seconds", "How long the watch's newest tick took.", ())
    _add(tick, [], time_s)
    _add(took, [], duration_s)
    return [*run_families(states, jobs), *job_families(jobs), *host_families(hosts), tick, took]
