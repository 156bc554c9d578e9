"""Dashboard widgets, one per module (rich's house style).

Each widget is a pure function of typed state (controller/records.py) plus the space it is
given -- `(..., width, max_lines, now_s) -> list[Text]` -- so the dashboard can budget the
terminal's rows exactly and tests can render any widget alone. No widget reads files,
probes hosts or parses raw strings; they only draw what the state already says.

The other face of the same state is a chat message: notify_message.py renders a finding
for Slack and Discord (pure, like the widgets); webhook_post.py and webhook_notifier.py
carry it there -- the one place in view/ that does I/O, kept to stdlib HTTP on its own
thread, so the screen's modules stay pure.
"""
