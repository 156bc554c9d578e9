"""The /metrics endpoint: a prometheus_client custom collector over the latest tick, served
by the library's own HTTP server on a registry of its own.

Why a registry of our own: prometheus_client's global REGISTRY also carries the process,
platform and GC collectors and whatever else imports the library; a dfctl scrape is
exactly the watch's families. Why families built at publish time (in the tick's thread)
and not in collect(): the tick mutates its RunStates in place while a scrape runs in the
server's thread; reading them there could see half a tick. `publish` swaps one finished
list under a lock, `collect` hands out the list it finds, so every scrape is one tick.

Serving: prometheus_client.exposition.start_http_server (start_wsgi_server, exposition.py
in 0.26.0) binds in the caller's thread and serves from a daemon thread; a port taken is
the OSError of that bind (EADDRINUSE), turned here into a BadInputError that names it.
"""

from __future__ import annotations

import errno
import socket
import threading
from typing import TYPE_CHECKING, Iterable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric

from controller.errors import BadInputError
from controller.expose.metric_families import tick_families

if TYPE_CHECKING:
    from controller.watch.tick import TickReport

DEFAULT_ADDR = "127.0.0.1"
"""Loopback unless asked: the run names, targets and numbers are the operator's, not the network's."""


class TickCollector:
    """The latest tick's metric families; prometheus_client calls collect() per scrape."""

    def __init__(self) -> None:
        self._families: list[Metric] = []
        self._lock = threading.Lock()
        self.publishes = 0

    def publish(self, families: Iterable[Metric]) -> None:
        done = list(families)
        with self._lock:
            self._families = done
            self.publishes += 1

    def publish_report(self, report: TickReport) -> None:
        """A Watch's tick, as Watch.on_tick hands it over."""
        self.publish(tick_families(report.states, report.hosts, report.jobs, report.time_s, report.duration_s))

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            return list(self._families)


class MetricsEndpoint:
    """`http://ADDR:PORT/metrics` serving one TickCollector; port 0 takes a free port
    (`.port` says which). close() stops the server and frees the port."""

    def __init__(self, port: int, addr: str = DEFAULT_ADDR, *, flag: str = "--metrics-port") -> None:
        if not 0 <= port <= 65535:
            raise BadInputError(f"{flag} {port}: not a TCP port (0..65535; 0 picks a free one)")
        self.collector = TickCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        try:
            self._server, self._thread = start_http_server(port, addr=addr, registry=self.registry)
        except socket.gaierror as exc:
            raise BadInputError(f"--metrics-addr {addr}: not an address this host has ({exc.strerror})",
                                hint="127.0.0.1 (the default), 0.0.0.0 for every interface, or one of the host's "
                                     "own addresses") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise BadInputError(f"{flag} {port}: port {port} on {addr} is already in use",
                                    hint=f"another exporter or watch holds it (`ss -ltnp 'sport = :{port}'` "
                                         f"names it); pick another port, or {flag} 0 for a free one") from None
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
                raise BadInputError(f"{flag} {port} on {addr}: {exc.strerror}",
                                    hint="ports below 1024 need root; --metrics-addr must be this host's") from None
            raise
        self.addr = addr

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
