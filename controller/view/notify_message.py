"""A finding as a chat message: its one-line summary, evidence and next step, in the two
shapes the webhooks take -- Slack's `{"text": ...}` and Discord's `{"content": ...}`.

Pure: records in, JSON-ready dicts out (the posting is webhook_post.py). Every string that
goes out passes a Redactor first: a log line can carry a token (a trainer printing its
environment, a URL with its key), and a chat channel is read by more people than the run's
log. Each shape is cut to its service's limit -- Discord refuses content over 2000
characters (discord.com/developers/docs/resources/webhook, Execute Webhook: "content ...
up to 2000 characters"); Slack takes long text but folds it, and a section block's text is
at most 3000 characters (api.slack.com/reference/block-kit/blocks, section), the cap used
here -- evidence goes first, line by line, so the summary and the next step always arrive.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from controller.playbook import looks_secret
from controller.records import Finding, RunState

DISCORD_CONTENT_MAX_CHARS = 2000
SLACK_TEXT_MAX_CHARS = 3000
EVIDENCE_MAX_LINES = 8
EVIDENCE_LINE_MAX_CHARS = 300
REDACTED = "<redacted>"
MIN_SECRET_CHARS = 6
"""Shorter env values are not treated as secrets to cut out: "1" or "true" would shred every line."""


class Redactor:
    """Replaces each known secret (and the token parts of each webhook URL) with <redacted>."""

    def __init__(self, secrets: Iterable[str] = (), *, env: Mapping[str, str] | None = None) -> None:
        found: set[str] = set()
        for s in secrets:
            found.update(_secret_parts(s))
        for name, value in (os.environ if env is None else env).items():
            if looks_secret(name) and len(value) >= MIN_SECRET_CHARS:
                found.add(value)
        # longest first: a URL goes before its own path segments
        self._pattern = (re.compile("|".join(re.escape(s) for s in sorted(found, key=len, reverse=True)))
                         if found else None)

    def __call__(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern is not None else text


def _secret_parts(secret: str) -> set[str]:
    """The secret itself; for a URL also its path segments and query values that look like
    tokens (Slack's /services/T../B../<token>, Discord's /api/webhooks/<id>/<token>), which a
    log line may quote without the rest of the URL."""
    out = {secret} if len(secret) >= MIN_SECRET_CHARS else set()
    if "://" in secret:
        parts = urlsplit(secret)
        pieces = parts.path.split("/") + [kv.partition("=")[2] for kv in parts.query.split("&")]
        out.update(p for p in pieces if len(p) >= 8 and not p.isalpha())
    return out


@dataclass(frozen=True)
class NotifyMessage:
    """What a person reads: who, what, why, what next. `held`: findings of the same run and
    kind that the rate limit kept back since `held_since_s`, told as a count."""

    title: str
    summary: str
    evidence: tuple[str, ...] = ()
    next_step: str = ""
    see: str = ""
    held: int = 0
    held_since_s: float | None = None


def message_for(state: RunState, f: Finding, redact: Redactor, *, held: int = 0,
                held_since_s: float | None = None) -> NotifyMessage:
    """The message for one finding of one run, redacted."""
    name = state.name or state.run_id
    where = f" on {state.target}" if state.target else ""
    line = f" (log line {f.line})" if f.line else ""
    evidence = tuple(redact(_kept_indent(e)[:EVIDENCE_LINE_MAX_CHARS]) for e in f.evidence[:EVIDENCE_MAX_LINES])
    return NotifyMessage(
        title=redact(f"dfctl: {name}{where}: {f.severity.upper()} {f.kind}"),
        summary=redact(_one_line(f.summary) + line),
        evidence=evidence,
        next_step=redact(_one_line(f.hint)),
        see=redact(f"dfctl logs {name} --tail 50 · dfctl watch {name}"),
        held=held, held_since_s=held_since_s)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _kept_indent(line: str) -> str:
    """An evidence line as one line, its indentation kept (a traceback's frames read by it)."""
    return line.replace("\r", " ").replace("\n", " ").replace("\t", "    ").rstrip()


def _held_line(msg: NotifyMessage) -> str:
    if not msg.held:
        return ""
    since = time.strftime(" since %H:%M:%S UTC", time.gmtime(msg.held_since_s)) if msg.held_since_s else ""
    return f"+{msg.held} more finding(s) of this run and kind{since}, held back by the rate limit"


def _slack_escape(text: str) -> str:
    """Slack's three control characters in mrkdwn (api.slack.com/reference/surfaces/formatting:
    escape &, < and >); a ``` in evidence would end the code block, so it is broken up."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("```", "`\u200b``")


def _discord_escape(text: str) -> str:
    return text.replace("```", "`\u200b``")


@dataclass(frozen=True)
class Markup:
    """How one chat service's markdown spells what a message uses: the two dialects differ
    only in these marks and in what must be escaped, so one renderer serves both."""

    bold: str
    italic: str
    code_open: str
    code_close: str
    escape: Callable[[str], str]


SLACK_MARKUP = Markup(bold="*", italic="_", code_open="```", code_close="```", escape=_slack_escape)
DISCORD_MARKUP = Markup(bold="**", italic="*", code_open="```\n", code_close="\n```", escape=_discord_escape)


def marked_up_text(msg: NotifyMessage, m: Markup) -> str:
    e = m.escape
    lines = [f"{m.bold}{e(msg.title)}{m.bold}", e(msg.summary)]
    if msg.evidence:
        lines.append(m.code_open + "\n".join(e(x) for x in msg.evidence) + m.code_close)
    if msg.next_step:
        lines.append(f"{m.bold}Next:{m.bold} {e(msg.next_step)}")
    if msg.held:
        lines.append(f"{m.italic}{e(_held_line(msg))}{m.italic}")
    if msg.see:
        lines.append(e(msg.see))
    return "\n".join(lines)


def slack_text(msg: NotifyMessage) -> str:
    return marked_up_text(msg, SLACK_MARKUP)


def discord_text(msg: NotifyMessage) -> str:
    return marked_up_text(msg, DISCORD_MARKUP)


def _fitted(msg: NotifyMessage, render: Callable[[NotifyMessage], str], limit: int) -> str:
    """render(msg) within `limit` characters: evidence lines go from the end first, then the
    text is cut (a cut marked with …)."""
    text = render(msg)
    while len(text) > limit and msg.evidence:
        msg = replace(msg, evidence=msg.evidence[:-1])
        text = render(msg)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def slack_body(msg: NotifyMessage) -> dict:
    """Slack incoming webhook: `{"text": ...}` (mrkdwn)."""
    return {"text": _fitted(msg, slack_text, SLACK_TEXT_MAX_CHARS)}


def discord_body(msg: NotifyMessage) -> dict:
    """Discord webhook: `{"content": ...}`; no @everyone/@here/role pings from a log line
    (allowed_mentions with an empty parse list)."""
    return {"content": _fitted(msg, discord_text, DISCORD_CONTENT_MAX_CHARS), "allowed_mentions": {"parse": []}}


BODY_OF = {"slack": slack_body, "discord": discord_body}
"""Webhook kind -> the body it is posted."""
