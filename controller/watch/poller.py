"""HostPoller: one host's side of a tick -- transport, agent or one-shot probe, back-off, health.

In: the probe requests of the runs on this host (each carries its RunCursor). Out: a
HostReading, or the error that says why there is none. Runs in a worker thread, one
round trip per tick: through the host's long-lived probe agent when one can be held
(controller/probe/session.py), else the one-shot probe. A host that fails is retried
with exponential back-off (WatchSettings.backoff_s) while the other hosts carry on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

from controller.playbook import TargetConfig
from controller.probe import ContainerProbeRequest, HostProbeRequest, ProbeError, RunProbeRequest, run_probe
from controller.probe.readings import HostReading, parse_probe_document
from controller.probe.session import ProbeSession, SessionUnsupported
from controller.records import GpuProcess, HostSample
from controller.transport.base import Transport
from controller.watch.settings import WatchSettings

TransportFor = Callable[[TargetConfig], Transport]


@dataclass
class HostHealth:
    """Back-off bookkeeping for one host."""

    failures: int = 0
    next_try_s: float = 0.0
    down_since_s: float | None = None
    error: str | None = None
    ever_reachable: bool = False

    @property
    def first_try(self) -> bool:
        """Never reached, never failed: its first connect may take the whole probe timeout."""
        return not self.ever_reachable and self.failures == 0 and self.down_since_s is None


class HostPoller:
    """Probes one host for all of its watched runs."""

    def __init__(self, host: str, target: TargetConfig, settings: WatchSettings,
                 transport_for: TransportFor, clock: Callable[[], float]):
        self.host, self.target, self.settings = host, target, settings
        self._transport_for, self.clock = transport_for, clock
        self.health = HostHealth()
        self.sample: HostSample | None = None      # the last reading's host part (or why none)
        self.round_trips = 0
        self.session: ProbeSession | None = None
        self._no_agent = False
        self._apps: tuple[float, list[GpuProcess], dict[int, list[int]]] | None = None
        self._init_pids: dict[int, int] = {}

    @property
    def python(self) -> str:
        return sys.executable if self.target.kind == "local" else "python3"

    @property
    def has_agent(self) -> bool:
        return self.session is not None and self.session.alive

    def request(self, runs: list[RunProbeRequest], container_pythons: dict[int, str], apps_due: bool) -> HostProbeRequest:
        s = self.settings
        req = HostProbeRequest(runs=list(runs), read_cap_bytes=s.read_cap_bytes, gpu=s.gpu, gpu_apps=apps_due,
                               nvidia_smi=s.nvidia_smi)
        for vmid, python in container_pythons.items():
            req.containers.append(ContainerProbeRequest(vmid=vmid, init_pid=self._init_pids.get(vmid),
                                                        lxcpath=s.lxcpath, python=python, force_pct=s.force_pct))
        return req

    def agent_request(self, req: HostProbeRequest) -> dict[str, Any]:
        """The agent's form of a request: GPUs sampled in its background every interval,
        and how long it may wait for the next request before it exits."""
        doc = req.to_json()
        doc.update(gpu_sampler=True, gpu_every_s=self.settings.gpu_every_s,
                   gpu_apps_every_s=self.settings.gpu_apps_every_s,
                   idle_exit_s=self.settings.agent_idle_exit_s)
        return doc

    def poll(self, runs: list[RunProbeRequest], container_pythons: dict[int, str]) -> tuple[HostReading | None, str | None]:
        """One probe round trip for every run on this host (worker thread)."""
        health = self.health
        now = self.clock()
        if health.failures and now < health.next_try_s:
            return None, health.error
        # Which process uses which GPU changes rarely; asking every tick would double the
        # nvidia-smi cost, so --query-compute-apps runs every gpu_apps_every_s.
        apps_due = self._apps is None or now - self._apps[0] >= self.settings.gpu_apps_every_s
        req = self.request(runs, container_pythons, apps_due)
        transport: Transport | None = None
        try:
            transport = self._transport_for(self.target)
            sent_s = self.clock()
            doc = self._via_agent(transport, req)
            if doc is None:
                sent_s = self.clock()
                self.round_trips += 1
                doc = run_probe(transport, req, python=self.python, timeout_s=self.settings.probe_timeout_s)
            got_s = self.clock()
        except ProbeError as exc:
            self._failed(exc.message, now, transport)
            return None, exc.message
        except Exception as exc:  # noqa: BLE001 - a transport bug must not end the watch
            msg = f"host {self.host}: {type(exc).__name__}: {exc}"
            self._failed(msg, now, transport)
            return None, msg
        health.failures, health.error, health.down_since_s = 0, None, None
        health.ever_reachable = True
        reading = parse_probe_document(doc, self.host)
        if reading.host.time_s is not None:
            # the host's clock against ours: its probe read the time somewhere inside the
            # round trip, so the middle of it, to within half of it (a job's first failure
            # compares node-local timestamps through this)
            reading.host.clock_offset_s = reading.host.time_s - (sent_s + got_s) / 2
            reading.host.clock_uncertainty_s = (got_s - sent_s) / 2
        if apps_due and "apps" in doc:
            self._apps = (now, reading.host.gpu_processes, reading.gpu_pid_nspids)
        elif not apps_due and self._apps is not None and reading.host.gpu_error is None:
            _, reading.host.gpu_processes, reading.gpu_pid_nspids = self._apps
        for vmid, ct in reading.containers.items():
            if ct.init_pid:
                self._init_pids[vmid] = ct.init_pid
        self.sample = reading.host
        return reading, None

    def _via_agent(self, transport: Transport, req: HostProbeRequest) -> dict[str, Any] | None:
        """The round trip through the host's agent; None when there is none (the caller
        runs the one-shot probe). A timeout means the host is unreachable; a closed
        channel (sshd restarted) falls back to one-shot."""
        if not self.settings.persistent or self._no_agent:
            return None
        if self.session is None or not self.session.alive:
            try:
                self.session = ProbeSession(transport, self.python,
                                            connect_timeout_s=min(10.0, self.settings.probe_timeout_s))
            except SessionUnsupported:
                self._no_agent = True
                return None
            except ProbeError:
                return None
        self.round_trips += 1
        try:
            return self.session.request(self.agent_request(req), timeout_s=self.settings.probe_timeout_s)
        except ProbeError as exc:
            self.session = None
            if exc.unreachable:
                raise
            return None

    def _failed(self, message: str, now: float, transport: Transport | None) -> None:
        h = self.health
        h.failures += 1
        h.error = message
        if h.down_since_s is None:
            h.down_since_s = now
        h.next_try_s = now + self.settings.backoff_s(h.failures)
        self.sample = HostSample(host=self.host, reachable=False, error=message, time_s=None)
        if transport is not None:
            try:
                transport.close()   # the next try opens a fresh connection
            except Exception:  # noqa: BLE001
                pass

    def timed_out(self, waited_s: float) -> None:
        """The tick stopped waiting for this host's answer (it is applied when it comes)."""
        if self.health.down_since_s is None:
            self.health.down_since_s = self.clock() - waited_s
        self.sample = HostSample(host=self.host, reachable=False, error=f"no answer for {waited_s:.0f} s")

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def host_key(target: TargetConfig) -> str:
    return "local" if target.kind == "local" else str(target.host)


def default_transport(target: TargetConfig) -> Transport:
    from controller.transport.factory import open_host_transport  # paramiko: only when a host is probed

    return open_host_transport(target)
