"""The watch's webhooks: which findings go out, how often, and posting them off the tick.

A [notify] table (controller.playbook.NotifyConfig) names Slack and Discord webhooks, the
least severity and the kinds to send, and `min_interval_s`: per run and finding kind, one
message, then nothing until the interval has passed; what came meanwhile is held and goes
as one message (the latest finding plus a count) once the interval is over -- at the next
tick, at the next finding of that kind, or when the watch ends. A storm of 50 gpu_idle
findings is two messages, not 50.

Posts run on one worker thread in order, so a slow or rate-limited service never holds
up a tick; close() waits a bounded time for what is queued (a watch that ends on a crash
still sends it). Nothing raises into the watch loop: a failed post is said once per
webhook on stderr (later ones are counted, the count said at close), and no message, error
or count names a webhook's URL -- a webhook is shown as `slack webhook (hooks.slack.com)`
or by the `$NAME` it was read from.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import IO
from urllib.parse import urlsplit

from controller.errors import BadInputError
from controller.playbook import WEBHOOK_ENV_RE, NotifyConfig
from controller.records import SEVERITY_RANK, Finding, RunState
from controller.view.notify_message import BODY_OF, Redactor, message_for
from controller.view.webhook_post import PostOutcome, post_json

CLOSE_WAIT_S = 20.0
"""How long close() waits for queued posts (one Retry-After of a few seconds fits)."""


@dataclass
class Webhook:
    kind: str                 # "slack" | "discord"
    url: str
    label: str                # what messages call it: never the URL
    sent: int = 0
    failed: int = 0


@dataclass
class _Held:
    count: int
    since_s: float            # wall clock of the first one held
    state: RunState
    finding: Finding


def resolve_webhooks(setup: NotifyConfig, env: Mapping[str, str], where: str = "notify") -> list[Webhook]:
    """Each written webhook with its URL ("$NAME" read from `env`); an unset variable or a
    value that is no http(s) URL is bad input naming the variable, never the value."""
    out = []
    for kind, written in setup.webhooks():
        m = WEBHOOK_ENV_RE.fullmatch(written)
        if m:
            url = env.get(m.group(1), "").strip()
            label = f"{kind} webhook (${m.group(1)})"
            if not url:
                raise BadInputError(f"{where}.{kind}_webhook: ${m.group(1)} is not set or empty",
                                    hint=f"export {m.group(1)}=<the webhook URL>, or write the URL in the table")
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise BadInputError(f"{where}.{kind}_webhook: ${m.group(1)} does not hold an http(s):// URL "
                                    f"(the value is not shown)")
        else:
            url, label = written, f"{kind} webhook ({urlsplit(written).hostname})"
        out.append(Webhook(kind, url, label))
    return out


class WebhookNotifier:
    """on_finding(state, f) per new finding, on_tick() per tick, close() at the end."""

    def __init__(self, setup: NotifyConfig, *, secrets: Iterable[str] = (), env: Mapping[str, str] | None = None,
                 err: IO[str] | None = None, clock: Callable[[], float] = time.monotonic,
                 post: Callable[..., PostOutcome] = post_json, timeout_s: float = 10.0, where: str = "notify") -> None:
        env = os.environ if env is None else env
        self.setup = setup
        self.webhooks = resolve_webhooks(setup, env, where)
        self.redact = Redactor([w.url for w in self.webhooks] + list(secrets), env=env)
        self._err = err
        self._clock = clock
        self._post = post
        self._timeout_s = timeout_s
        self._last_sent: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], _Held] = {}
        self._queue: queue.Queue = queue.Queue()
        self._abort = threading.Event()
        self._worker: threading.Thread | None = None
        self._said_later: list[str] | None = None

    def hold_messages(self) -> None:
        """Keep what would go to stderr until close(): the live dashboard owns the screen
        (a line printed under it would be drawn over at the next refresh)."""
        if self._said_later is None:
            self._said_later = []

    def __bool__(self) -> bool:
        return bool(self.webhooks)

    def wants(self, f: Finding) -> bool:
        """Severity at least min_severity, and the kind listed (or no list)."""
        rank = SEVERITY_RANK.get(f.severity, 0)
        return rank >= SEVERITY_RANK[self.setup.min_severity] and (not self.setup.kinds or f.kind in self.setup.kinds)

    def on_finding(self, state: RunState, f: Finding) -> None:
        if not self.webhooks or not self.wants(f):
            return
        key = (state.run_id, f.kind)
        last = self._last_sent.get(key)
        if last is not None and self._clock() - last < self.setup.min_interval_s:
            held = self._held.get(key)
            if held is None:
                self._held[key] = _Held(1, time.time(), state, f)
            else:
                held.count, held.state, held.finding = held.count + 1, state, f
            return
        earlier = self._held.pop(key, None)       # held ones not yet sent: counted in this message
        self._send(key, state, f, earlier.count if earlier else 0, earlier.since_s if earlier else None)

    def on_tick(self, *_: object) -> None:
        """Send what the rate limit held once its interval is over."""
        now = self._clock()
        for key in [k for k in self._held if now - self._last_sent.get(k, now) >= self.setup.min_interval_s]:
            self._send_held(key)

    def _send_held(self, key: tuple[str, str]) -> None:
        held = self._held.pop(key)
        self._send(key, held.state, held.finding, held.count - 1, held.since_s)   # the latest shown, the rest counted

    def _send(self, key: tuple[str, str], state: RunState, f: Finding, held: int, since_s: float | None) -> None:
        self._last_sent[key] = self._clock()
        msg = message_for(state, f, self.redact, held=held, held_since_s=since_s if held else None)
        for hook in self.webhooks:
            self._queue.put((hook, BODY_OF[hook.kind](msg)))
        if self._worker is None:
            self._worker = threading.Thread(target=self._drain, name="dfctl-notify", daemon=True)
            self._worker.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            hook, body = item
            if self._abort.is_set():
                hook.failed += 1
                continue
            try:
                outcome = self._post(hook.url, body, timeout_s=self._timeout_s, sleep=self._abort.wait)
            except Exception as exc:  # noqa: BLE001 - post_json never raises; a stand-in might
                outcome = PostOutcome(False, None, 1, f"{type(exc).__name__}: {exc}")
            if outcome.ok:
                hook.sent += 1
                continue
            hook.failed += 1
            if hook.failed == 1:
                self._say(f"{hook.label}: {self.redact(outcome.error)} (later failures are counted, "
                          f"not printed)")

    def _say(self, text: str) -> None:
        if self._said_later is not None:
            self._said_later.append(text)
            return
        try:
            print(f"dfctl: notify: {text}", file=self._err or sys.stderr, flush=True)
        except (OSError, ValueError):   # stderr gone: nothing to tell
            pass

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Send what is held (the storm's count), wait up to `wait_s` for the queue, say
        what failed."""
        for key in list(self._held):
            self._send_held(key)
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(wait_s)
            if self._worker.is_alive():
                self._abort.set()          # cut a Retry-After wait; what is left counts as failed
                self._worker.join(5.0)
            self._worker = None
        held, self._said_later = self._said_later or [], None
        for text in held:
            self._say(text)
        for hook in self.webhooks:
            if hook.failed > 1 or (hook.failed and hook.sent):
                self._say(f"{hook.label}: {hook.failed} of {hook.sent + hook.failed} message(s) not delivered")
