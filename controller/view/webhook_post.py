"""One JSON POST to a webhook, with the retries a chat service asks for, never raising.

stdlib only (urllib): a notification must not need a package the watch does not. A 429 is
retried after the wait the service names -- the Retry-After header (seconds or an
HTTP date, RFC 9110 section 10.2.3), else Discord's `retry_after` seconds in the JSON body
(discord.com/developers/docs/topics/rate-limits) -- up to `max_wait_s`; a 5xx or a
connection failure after a short back-off; any other 4xx is final (the URL or the body is
wrong: asking again changes nothing). The outcome's error never holds the URL: urllib's
messages name the reason, not the address, and the caller redacts on top.
"""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller import __version__

BACKOFF_S = (1.0, 3.0)
"""Waits before the 2nd and 3rd attempt after a 5xx or a failed connection."""


@dataclass(frozen=True)
class PostOutcome:
    ok: bool
    status: int | None        # the last HTTP status, None when no answer came
    attempts: int
    error: str = ""           # why it failed, one line, no URL
    waited_s: float = 0.0     # seconds spent waiting between attempts (Retry-After, back-off)


def retry_after_s(headers: Any, body: bytes, now_s: float | None = None) -> float | None:
    """The wait a 429 asks for: Retry-After (delta-seconds or HTTP-date), else a JSON
    body's `retry_after` (Discord, in seconds); None when neither says."""
    value = headers.get("Retry-After") if headers is not None else None
    if value:
        value = value.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value).timestamp()
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                return max(0.0, when - (time.time() if now_s is None else now_s))
    try:
        doc = json.loads(body or b"null")
    except ValueError:
        return None
    wait = doc.get("retry_after") if isinstance(doc, dict) else None
    return max(0.0, float(wait)) if isinstance(wait, (int, float)) and not isinstance(wait, bool) else None


def post_json(url: str, body: dict, *, timeout_s: float = 10.0, max_attempts: int = 3, max_wait_s: float = 60.0,
              sleep: Callable[[float], object] = time.sleep) -> PostOutcome:
    """POST `body` as JSON to `url`. `sleep` waits between attempts (the notifier passes an
    event's wait, so closing it cuts a wait short). Never raises."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    status: int | None = None
    error = ""
    waited = 0.0
    attempt = 0
    for attempt in range(1, max_attempts + 1):
        wait: float | None = None
        try:
            req = urllib.request.Request(url, data=data, method="POST", headers={
                "Content-Type": "application/json; charset=utf-8", "User-Agent": f"dfctl/{__version__}"})
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                resp.read()
                return PostOutcome(True, resp.status, attempt, waited_s=waited)
        except urllib.error.HTTPError as exc:
            status = exc.code
            answer = _read(exc)
            error = f"HTTP {exc.code} {exc.reason}" + (f": {_first_line(answer)}" if answer.strip() else "")
            if exc.code == 429:
                wait = retry_after_s(exc.headers, answer)
                if wait is None:
                    wait = BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)]
                if wait > max_wait_s:
                    return PostOutcome(False, status, attempt, f"{error} (asks to wait {wait:.0f} s, more than "
                                                               f"{max_wait_s:.0f} s)", waited)
            elif exc.code >= 500:
                wait = BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)]
            else:
                return PostOutcome(False, status, attempt, error, waited)
        except (urllib.error.URLError, OSError, ValueError) as exc:   # refused, DNS, timeout, a bad URL
            status = None
            reason = getattr(exc, "reason", None) or exc
            error = f"{type(exc).__name__}: {reason}"
            wait = BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)]
        except Exception as exc:  # noqa: BLE001 - a notification must never take the watch down
            return PostOutcome(False, status, attempt, f"{type(exc).__name__}: {exc}", waited)
        if attempt < max_attempts and wait is not None:
            sleep(wait)
            waited += wait
    return PostOutcome(False, status, attempt, error, waited)


def _read(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read()[:2000]
    except Exception:  # noqa: BLE001 - the answer's body is only a detail of the error
        return b""


def _first_line(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return (text.splitlines() or [""])[0][:200]
