"""STAND-IN for the W&B cloud GraphQL API (the real one cannot be reached from here).

It answers, on 127.0.0.1 only, exactly the GraphQL operations the real wandb 0.31.0
public client (`wandb.Api()`, whose requests wandb-core sends) was captured sending for
what dfctl does -- query names and variables as recorded against this server:

    Viewer                 viewer { id entity username email flags teams {...} }  (Api(api_key=...) login check)
    GetDefaultEntity       viewer { id entity }
    Run                    project(name, entityName) { run(name) { projectId ...RunFragment } }
                           RunFragment: id tags name displayName sweepName state config group jobType
                           commit readOnly createdAt heartbeatAt description notes systemMetrics
                           summaryMetrics historyLineCount user { name username } historyKeys
    RunState               project { run { state } }
    RunHistoryKeys         project { run { historyKeys } }                 ({lastStep, keys})
    RunFullHistory         project { run { history(samples) | events(samples) } }   (JSON strings)
    RunSampledHistory      project { run { sampledHistory(specs) } }      (one list per spec)
    RunParquetHistory      project { run(name: $runName) { parquetHistory(liveKeys) { parquetUrls liveData } } }
    HistoryPage            project { run(name: $run) { history(minStep: Int64!, maxStep: Int64!, samples: $pageSize) } }

(`scan_history()` in 0.31 goes through wandb-core: RunHistoryKeys for the last step, then
RunParquetHistory, then HistoryPage per page of steps [minStep, maxStep).) wandb-core
also POSTs OpenTelemetry metrics to /sdk/otel/v1/metrics; answered 200 and ignored.

Behaviour follows the real service where dfctl depends on it: HTTP Basic auth with user
`api` and the API key (401 otherwise); an unknown project or run is `null` in `data`;
JSON-typed fields (config, summaryMetrics, systemMetrics) are JSON strings; history rows
are JSON strings; runs are addressed by entity/project/name. Anything else gets a GraphQL
error naming the operation, so a client change shows up as a failing test.

Fault injection for the retry tests: `inject(op, status=429|500, times=N)` answers the next
N matching requests with that status; `inject(op, delay_s=S, times=N)` answers them late.
Every request is logged (`requests`) with its operation name and variables -- never the key.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).with_name("fixture_runs.json")
CLIENT_VERSION = "0.31.0"
_OP_RE = re.compile(r"\b(query|mutation)\s+([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Fault:
    op: str               # operation name, or "*" for any GraphQL request
    status: int = 200
    delay_s: float = 0.0
    times: int = 1


@dataclass
class LoggedRequest:
    op: str
    variables: dict[str, Any]
    status: int
    time_s: float


@dataclass
class StandinRun:
    entity: str
    project: str
    name: str
    attrs: dict[str, Any]                 # RunFragment fields (JSON-typed ones as objects)
    history: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def load_fixture(path: Path = FIXTURE) -> dict[tuple[str, str, str], StandinRun]:
    raw = json.loads(path.read_text())
    runs = {}
    for r in raw["runs"]:
        run = StandinRun(r["entity"], r["project"], r["name"], r["attrs"],
                         r.get("history", []), r.get("events", []))
        runs[(run.entity, run.project, run.name)] = run
    return runs


class StandinWandbServer:
    """A threaded HTTP server on 127.0.0.1:<free port> answering wandb 0.31's queries."""

    def __init__(self, api_key: str, runs: dict[tuple[str, str, str], StandinRun] | None = None,
                 viewer_entity: str = "ops"):
        self.api_key = api_key
        self.viewer_entity = viewer_entity
        self.runs = runs if runs is not None else load_fixture()
        self.requests: list[LoggedRequest] = []
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="wandb-standin")

    # -- control

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StandinWandbServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "StandinWandbServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def inject(self, op: str, *, status: int = 200, delay_s: float = 0.0, times: int = 1) -> None:
        with self._lock:
            self._faults.append(Fault(op, status, delay_s, times))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def ops(self) -> list[str]:
        with self._lock:
            return [r.op for r in self.requests]

    def append_history(self, path: str, rows: list[dict[str, Any]]) -> None:
        """The run logs more steps (a live run)."""
        with self._lock:
            self.runs[tuple(path.split("/"))].history.extend(copy.deepcopy(rows))

    def set_state(self, path: str, state: str) -> None:
        with self._lock:
            self.runs[tuple(path.split("/"))].attrs["state"] = state

    # -- request handling

    def _take_fault(self, op: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.op in (op, "*") and f.times > 0:
                    f.times -= 1
                    return f
        return None

    def _authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, key = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return key == self.api_key

    def _run(self, variables: dict[str, Any], name_var: str) -> StandinRun | None:
        key = (variables.get("entity"), variables.get("project"), variables.get(name_var))
        return self.runs.get(key)  # type: ignore[arg-type]

    def _project_exists(self, variables: dict[str, Any]) -> bool:
        return any(e == variables.get("entity") and p == variables.get("project")
                   for e, p, _ in self.runs)

    def _answer(self, op: str, query: str, v: dict[str, Any]) -> dict[str, Any]:
        """The `data` of the GraphQL response (or raises KeyError for an unknown op)."""
        if op in ("Viewer", "GetDefaultEntity"):
            return {"viewer": {"id": "VXNlcjox", "entity": self.viewer_entity,
                               "username": self.viewer_entity, "email": None, "flags": "{}",
                               "teams": {"edges": []}}}
        if op in ("Run", "RunState", "RunHistoryKeys", "RunFullHistory", "RunSampledHistory"):
            name_var = "name"
        elif op == "RunParquetHistory":
            name_var = "runName"
        elif op == "HistoryPage":
            name_var = "run"
        else:
            raise KeyError(op)
        if not self._project_exists(v):
            return {"project": None}
        with self._lock:
            run = self._run(v, name_var)
            if run is None:
                return {"project": {"run": None}}
            run = copy.deepcopy(run)
        rows = run.history
        last_step = max((r.get("_step", -1) for r in rows), default=-1)
        history_keys = {"lastStep": last_step,
                        "keys": {k: {"typeCounts": [{"type": "number", "count": 1}]}
                                 for r in rows for k in r}}
        a = run.attrs
        if op == "Run":
            node = {"projectId": 1, "id": a.get("id", "UnVuOjE="),
                    "name": run.name, "tags": a.get("tags", []),
                    "displayName": a.get("displayName", run.name), "sweepName": None,
                    "state": a.get("state", "running"),
                    "config": json.dumps({k: {"value": val, "desc": None}
                                          for k, val in a.get("config", {}).items()}),
                    "group": None, "jobType": None, "commit": None, "readOnly": False,
                    "createdAt": a.get("createdAt", "2026-11-29T10:00:00"),
                    "heartbeatAt": a.get("heartbeatAt", "2026-11-29T10:00:00"),
                    "description": None, "notes": None,
                    "systemMetrics": json.dumps(a.get("systemMetrics", {})),
                    "summaryMetrics": json.dumps(a.get("summaryMetrics", {})),
                    "historyLineCount": len(rows),
                    "user": {"name": "ops", "username": "ops"},
                    "historyKeys": history_keys}
        elif op == "RunState":
            node = {"state": a.get("state", "running")}
        elif op == "RunHistoryKeys":
            node = {"historyKeys": history_keys}
        elif op == "RunFullHistory":
            which = "events" if re.search(r"\bevents\s*\(", query) else "history"
            src = run.events if which == "events" else rows
            node = {which: [json.dumps(r) for r in src[: v.get("samples") or 500]]}
        elif op == "RunSampledHistory":
            out = []
            for spec in v.get("specs", []):
                s = json.loads(spec)
                keys = s.get("keys", [])
                out.append([{k: r[k] for k in keys if k in r} for r in rows
                            if all(k in r for k in keys)][: s.get("samples", 500)])
            node = {"sampledHistory": out}
        elif op == "RunParquetHistory":
            # No parquet export for these runs: everything is live data (the client then
            # pages through HistoryPage).
            node = {"parquetHistory": {"parquetUrls": [],
                                       "liveData": [{"_step": last_step}] if rows else []}}
        else:  # HistoryPage
            lo, hi, n = int(v["minStep"]), int(v["maxStep"]), int(v["pageSize"])
            page = [r for r in rows if lo <= r.get("_step", -1) < hi][:n]
            node = {"history": [json.dumps(r) for r in page]}
        return {"project": {"run": node}}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:   # quiet
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, val in (headers or {}).items():
                    self.send_header(k, val)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(404, b'{"error":"not found"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path.startswith("/sdk/otel/"):
                    self._send(200, b"", "application/x-protobuf")
                    return
                if self.path.rstrip("/") != "/graphql":
                    self._send(404, b'{"error":"not found"}')
                    return
                try:
                    req = json.loads(body or b"{}")
                except ValueError:
                    self._send(400, b'{"errors":[{"message":"bad json"}]}')
                    return
                query = req.get("query") or ""
                m = _OP_RE.search(query)
                op = req.get("operationName") or (m.group(2) if m else "?")
                variables = req.get("variables") or {}
                status = 200
                fault = server._take_fault(op)
                if fault is not None:
                    if fault.delay_s:
                        time.sleep(fault.delay_s)
                    status = fault.status
                if status == 200 and not server._authorized(self.headers.get("Authorization")):
                    status = 401
                with server._lock:
                    server.requests.append(LoggedRequest(op, variables, status, time.time()))
                if status == 401:
                    self._send(401, b'{"errors":[{"message":"user is not logged in"}]}')
                    return
                if status != 200:
                    extra = {"Retry-After": "1"} if status == 429 else None
                    self._send(status, json.dumps({"errors": [{"message": f"stand-in {status}"}]})
                               .encode(), headers=extra)
                    return
                try:
                    data = server._answer(op, query, variables)
                except KeyError:
                    self._send(200, json.dumps({"errors": [{
                        "message": f"wandb stand-in does not implement operation {op!r}"}],
                        "data": None}).encode())
                    return
                self._send(200, json.dumps({"data": data}).encode())

        return Handler
