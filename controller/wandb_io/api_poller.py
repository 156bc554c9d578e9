"""Poll an online wandb run through `wandb.Api()`, incrementally by step, off the tick.

Why it looks like this (wandb 0.31, read from its source and checked against the
stand-in server in tests/wandb_standin/):

- `wandb.Api()` sends every GraphQL request through the wandb-core sidecar. wandb-core
  retries 429/5xx itself, with exponential back-off from ~2 s; `x_graphql_retry_max=0`
  counts as unset (the default: retry on and on), so the least it can be told is 1 retry.
  `Api(timeout=...)` bounds how long Python waits for wandb-core per call, which then
  raises "the service process is busy and did not respond in time". So each call here is
  bounded by `timeout_s`, wandb-core retries at most once, and this module adds its own
  bounded attempts with back-off -- all on a background thread, so the watch tick never
  waits: `poll_async()` starts a fetch when none is running, `latest()` returns what has
  arrived.
- The retry settings are read from the global wandb settings when an `Api` is built
  (the settings are copied into its wandb-core session), so they are set for the
  duration of the construction only, under a lock.
- `run.history()` is *sampled* and differs per call; `scan_history(keys=...)` drops rows
  missing any key. We call `scan_history(min_step=next_step)` without keys: every row,
  from the first step not yet seen, by pages (RunHistoryKeys, RunParquetHistory,
  HistoryPage). A failed fetch leaves `next_step` where it was: nothing lost or repeated.
- `Api.run()` caches the Run; its state/config/summary are refreshed with
  `run.load(force=True)`.

Errors: an unknown run or project, or a key without access -> BadInputError (exit 2);
no connection, timeouts, 429/5xx after the bounded attempts -> UnreachableError (exit 3).
Messages name the run path and the server and never contain the API key.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Iterator

from controller.errors import BadInputError, DfctlError, UnreachableError
from controller.wandb_io.batch import WandbBatch, WandbRunData, progress_from_row

DEFAULT_BASE_URL = "https://api.wandb.ai"

_settings_lock = threading.Lock()


def parse_run_path(path: str) -> tuple[str, str, str]:
    """"entity/project/run_id" (or ".../runs/run_id") -> (entity, project, run_id)."""
    parts = [p for p in str(path).strip().strip("/").split("/") if p]
    if len(parts) == 4 and parts[2] == "runs":
        parts = [parts[0], parts[1], parts[3]]
    if len(parts) != 3:
        raise BadInputError(f"wandb run path {path!r}: expected entity/project/run_id")
    return parts[0], parts[1], parts[2]


class _Retryable(Exception):
    """A failure worth another attempt (429, 5xx, timeout, no connection)."""


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _http_status(exc: BaseException) -> int | None:
    for e in _chain(exc):
        resp = getattr(e, "response", None)
        status = getattr(resp, "http_status", None)
        if isinstance(status, int) and status:
            return status
    return None


class ApiPoller:
    """Incremental poller of one online run: `poll_async()` each tick, `latest()` to read.

    `fetch_new()` is the same fetch, synchronously (raises the typed errors).
    """

    def __init__(self, path: str = "", base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 10, *, max_attempts: int = 3, backoff_s: float = 1.0,
                 backoff_max_s: float = 30.0, min_interval_s: float = 10.0,
                 max_steps_per_fetch: int = 100_000):
        self.entity, self.project, self.run_id = parse_run_path(path)
        self.path = f"{self.entity}/{self.project}/{self.run_id}"
        self.base_url = (base_url or os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key
        self.timeout_s = float(timeout_s)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.min_interval_s = min_interval_s
        self.max_steps_per_fetch = max_steps_per_fetch
        self.next_step = 0
        self.state: str = "unknown"
        self.error: DfctlError | None = None        # the last fetch's error, None after a good one
        self.consecutive_failures = 0
        self.attempts_made = 0                      # over the poller's life (tests, status)
        self._api: Any = None                      # wandb.Api, built on the first fetch
        self._run: Any = None                      # its wandb.apis.public.Run
        self._config: dict[str, Any] | None = None
        self._summary: dict[str, Any] | None = None
        self._pending = WandbBatch(run_id=self.run_id, project=self.project, entity=self.entity,
                                   state="unknown")
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._not_before = 0.0                      # monotonic time the next fetch may start
        self._sleep: Callable[[float], None] = time.sleep

    # ------------------------------------------------------------------ public

    @property
    def in_flight(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def poll_async(self) -> bool:
        """Start a background fetch unless one runs or the back-off/interval says wait.

        Returns at once; True if a fetch was started.
        """
        with self._lock:
            if self.in_flight or time.monotonic() < self._not_before:
                return False
            self._thread = threading.Thread(target=self._fetch_in_background, daemon=True,
                                            name=f"wandb-poll {self.path}")
            self._thread.start()
            return True

    def latest(self) -> WandbBatch:
        """What arrived since the previous `latest()` (never blocks on the network)."""
        with self._lock:
            out = self._pending
            self._pending = WandbBatch(run_id=self.run_id, project=self.project,
                                       entity=self.entity, state=self.state)
            out.state = self.state
            out.offset = self.next_step
            out.error = self.error.message if self.error else None
            return out

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the running fetch (tests, one-shot commands). True if none is left."""
        t = self._thread
        if t is not None:
            t.join(timeout_s)
        return not self.in_flight

    def fetch_new(self) -> WandbBatch:
        """One fetch of everything new, synchronously, with bounded attempts and back-off."""
        last: DfctlError | None = None
        for attempt in range(self.max_attempts):
            if attempt:
                self._sleep(min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))
            self.attempts_made += 1
            try:
                return self._fetch_once()
            except _Retryable as e:
                last = UnreachableError(str(e), hint="the wandb server is slow, rate-limiting "
                                        "or unreachable; dfctl keeps trying with back-off")
        assert last is not None
        raise UnreachableError(f"{last.message} (gave up after {self.max_attempts} attempts)",
                               hint=last.hint)

    # ------------------------------------------------------------------ internals

    def _fetch_in_background(self) -> None:
        try:
            batch = self.fetch_new()
        except DfctlError as e:
            with self._lock:
                self.error = e
                self.consecutive_failures += 1
                delay = min(self.backoff_max_s, self.backoff_s * 2 ** self.consecutive_failures)
                self._not_before = time.monotonic() + max(delay, self.min_interval_s)
            return
        except Exception as e:  # a bug or a wandb surprise: report it, keep the tick alive
            with self._lock:
                self.error = DfctlError(self._scrub(f"wandb run {self.path}: {type(e).__name__}: {e}"))
                self.consecutive_failures += 1
                self._not_before = time.monotonic() + self.backoff_max_s
            return
        with self._lock:
            self.error = None
            self.consecutive_failures = 0
            self._not_before = time.monotonic() + self.min_interval_s
            self._pending.absorb(batch)

    def _scrub(self, text: str) -> str:
        key = self._api_key or os.environ.get("WANDB_API_KEY")
        return text.replace(key, "***") if key else text

    def _where(self) -> str:
        return f"wandb run {self.path} at {self.base_url}"

    def _classify(self, exc: BaseException) -> Exception:
        """A wandb exception -> BadInputError (permanent) or _Retryable."""
        from wandb.apis.public.runs import RunNotFoundError

        text = self._scrub(" ".join(str(e) for e in _chain(exc)))
        status = _http_status(exc)
        if any(isinstance(e, RunNotFoundError) for e in _chain(exc)) or "Could not find run" in text:
            return BadInputError(f"{self._where()}: no such run (or no access to it)",
                                 hint="check the entity/project/run_id and the API key's team")
        if status in (401, 403) or "not logged in" in text or "permission" in text.lower():
            return BadInputError(f"{self._where()}: the API key has no access (HTTP {status or 'auth'})",
                                 hint="set WANDB_API_KEY to a key that can read this project")
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        reason = f"HTTP {status}" if status else self._scrub(first)[:200]
        return _Retryable(f"{self._where()}: {reason}")

    def _make_api(self) -> Any:                   # a wandb.Api
        import wandb
        from wandb.sdk import wandb_setup

        api_key = self._api_key or os.environ.get("WANDB_API_KEY")
        if not api_key:
            from wandb.sdk.lib import wbauth
            auth = wbauth.authenticate_session(host=self.base_url, source="dfctl", no_offline=True,
                                               prompt=False, update_session=False)
            if auth is None:
                raise BadInputError(f"{self._where()}: no wandb API key",
                                    hint="set WANDB_API_KEY or run `wandb login`")
        settings = wandb_setup.singleton().settings
        ours = {"x_graphql_retry_max": 1,                       # 0 would mean "default"
                "x_graphql_retry_wait_max_seconds": min(self.timeout_s, 5.0),
                "x_graphql_timeout_seconds": self.timeout_s}
        with _settings_lock:
            saved = {k: getattr(settings, k) for k in ours}
            try:
                for k, v in ours.items():
                    setattr(settings, k, v)
                return wandb.Api(overrides={"base_url": self.base_url},
                                 timeout=max(1, int(round(self.timeout_s))), api_key=api_key)
            finally:
                for k, v in saved.items():
                    setattr(settings, k, v)

    def _fetch_once(self) -> WandbBatch:
        try:
            if self._api is None:
                self._api = self._make_api()
            if self._run is None:
                self._run = self._api.run(self.path)
            else:
                self._run.load(force=True)
            run = self._run
            max_step = self.next_step + self.max_steps_per_fetch
            rows = list(run.scan_history(min_step=self.next_step, max_step=max_step,
                                         page_size=1000, use_cache=False))
            state = run.state
            config = dict(run.config)
            summary = dict(run.summary_metrics or {})
        except DfctlError:
            raise
        except Exception as e:  # wandb raises CommError/AuthenticationError/...; sort them
            err = self._classify(e)
            if self._run is None:
                self._api = None          # e.g. the login check failed: build it afresh
            raise err from None
        rows = [r for r in rows if isinstance(r.get("_step"), int) and r["_step"] >= self.next_step]
        rows.sort(key=lambda r: r["_step"])
        batch = WandbBatch(run_id=self.run_id, project=self.project, entity=self.entity,
                           state=state, history=rows)
        batch.progress = [s for s in (progress_from_row(r) for r in rows) if s is not None]
        if config != self._config:
            batch.config = self._config = config
        if summary != self._summary:
            batch.summary = self._summary = summary
        if rows:
            self.next_step = rows[-1]["_step"] + 1
        self.state = state
        batch.offset = self.next_step
        return batch


def fetch_run(path: str, base_url: str | None = None, api_key: str | None = None,
              timeout_s: float = 30, *, max_attempts: int = 3) -> WandbRunData:
    """A whole online run (history, config, summary, state), for compare-runs/importers."""
    poller = ApiPoller(path, base_url=base_url, api_key=api_key, timeout_s=timeout_s,
                       max_attempts=max_attempts)
    data = WandbRunData(run_id=poller.run_id, project=poller.project, entity=poller.entity,
                        source=poller.path)
    poller.max_steps_per_fetch = 1 << 62          # the whole run in one fetch
    batch = poller.fetch_new()
    data.history = batch.history
    data.config = batch.config or {}
    data.summary = batch.summary or {}
    data.state = batch.state
    try:
        events = poller._run.history(stream="system", pandas=False, samples=10_000)
        data.system = [dict(e) for e in events]
    except Exception:   # system metrics are a nice-to-have for compare-runs
        data.system = []
    return data
