"""Notifications: [notify] webhooks in Slack's and Discord's shapes, posted over real HTTP
to a loopback server (http.server on 127.0.0.1: a stand-in for hooks.slack.com and
discord.com, which this machine cannot reach), rate-limited, retried on 429 as asked, never
carrying a secret -- and a real watch of a real failing run posting one message.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.errors import BadInputError, PlaybookError
from controller.playbook import NotifyConfig, parse_playbook
from controller.records import Finding, RunState
from controller.userconfig import load_user_config
from controller.view.notify_message import (
    DISCORD_CONTENT_MAX_CHARS,
    SLACK_TEXT_MAX_CHARS,
    Redactor,
    discord_body,
    message_for,
    slack_body,
)
from controller.view.webhook_notifier import WebhookNotifier
from controller.view.webhook_post import post_json, retry_after_s
from tests.deploy_support import dfctl, make_project, ticker_playbook

ROOT = Path(__file__).resolve().parents[1]
SLACK_TOKEN = "xq7Zt0kEnSlackPathSecret42"
DISCORD_TOKEN = "Dq9-discordWebhookTokenPart-77aa"
API_KEY = "wk-0123456789abcdef-notify-test"


class Hook:
    """A loopback webhook receiver: records each POST (path, headers, JSON body, arrival
    time) and answers from a script of (status, headers, body), then 204."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.script: list[tuple[int, dict, bytes]] = []
        self.cond = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with hook.cond:
                    hook.posts.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw),
                                       "at": time.monotonic()})
                    status, headers, body = hook.script.pop(0) if hook.script else (204, {}, b"")
                    hook.cond.notify_all()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def wait_posts(self, n: int, timeout_s: float = 30.0) -> list[dict]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.posts) >= n, timeout_s), f"{len(self.posts)} of {n} posts"
            return list(self.posts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # loopback only: a proxy from the environment must not carry these posts elsewhere
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def _state(name: str = "train_v2") -> RunState:
    return RunState(run_id=f"{name}-20261202T000000Z", name=name, target="pct 200 on pve1")


def _finding(kind: str = "oom", severity: str = "critical", n: int = 0, evidence: tuple[str, ...] = ()) -> Finding:
    return Finding(kind=kind, severity=severity, summary=f"CUDA OOM on GPU {n} (tried 2.1 GiB)",   # type: ignore[arg-type]
                   evidence=evidence or ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB",),
                   hint="lower --batch-size or raise --grad-accum", line=1234)


class FakeClock:
    """The notifier's monotonic clock, moved by the test (the rate limit's minutes, at once)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the two shapes -----------------------------------------------------------------------


def test_slack_and_discord_bodies_carry_summary_evidence_and_next_step_within_their_limits():
    redact = Redactor(env={})
    msg = message_for(_state(), _finding(evidence=("a <b> & c", "line two")), redact)
    slack, discord = slack_body(msg), discord_body(msg)
    assert set(slack) == {"text"} and set(discord) == {"content", "allowed_mentions"}
    assert discord["allowed_mentions"] == {"parse": []}           # a log line's @everyone pings nobody
    for text in (slack["text"], discord["content"]):
        assert "train_v2 on pct 200 on pve1: CRITICAL oom" in text
        assert "CUDA OOM on GPU 0 (tried 2.1 GiB) (log line 1234)" in text
        assert "lower --batch-size or raise --grad-accum" in text and "line two" in text
        assert "dfctl logs train_v2 --tail 50" in text
    assert "a &lt;b&gt; &amp; c" in slack["text"]                  # Slack's mrkdwn control characters
    assert "a <b> & c" in discord["content"]

    # a huge finding: evidence is shed first, summary and next step stay; the limits hold
    big = _finding(evidence=tuple("x" * 290 + f" {i}" for i in range(40)))
    big = Finding(**{**big.__dict__, "hint": "restart from the last checkpoint"})
    msg = message_for(_state(), big, redact)
    s, d = slack_body(msg)["text"], discord_body(msg)["content"]
    assert len(d) <= DISCORD_CONTENT_MAX_CHARS and len(s) <= SLACK_TEXT_MAX_CHARS
    assert len(d) > DISCORD_CONTENT_MAX_CHARS - 400                # cut near the limit, not emptied
    for text in (s, d):
        assert "CUDA OOM on GPU 0" in text and "restart from the last checkpoint" in text and " 0\n" in text


def test_each_service_gets_its_own_marks_and_a_code_fence_in_evidence_cannot_end_the_block():
    """Slack's mrkdwn bolds with one *, Discord's markdown with two (and * is its italic);
    a ``` inside a log line is broken up so the evidence block stays one block."""
    from controller.view.notify_message import NotifyMessage, discord_text, slack_text

    msg = NotifyMessage(title="T", summary="S", evidence=("x ``` y",), next_step="N", held=2)
    slack, discord = slack_text(msg).splitlines(), discord_text(msg).splitlines()
    assert slack[0] == "*T*" and discord[0] == "**T**"
    assert "*Next:* N" in slack and "**Next:** N" in discord
    assert slack[-1].startswith("_+2 more finding(s)") and slack[-1].endswith("_")
    assert discord[-1].startswith("*+2 more finding(s)") and not discord[-1].startswith("**")
    assert discord[2:5] == ["```", "x `\u200b`` y", "```"]              # fences on their own lines
    assert slack[2] == "```x `\u200b`` y```"
    for text in (slack_text(msg), discord_text(msg)):
        assert text.count("```") == 2                                   # one block, opened and closed


def test_no_secret_reaches_a_message():
    url = f"https://hooks.slack.com/services/T000/B000/{SLACK_TOKEN}"
    redact = Redactor([url], env={"WANDB_API_KEY": API_KEY, "PATH": "/usr/bin:/bin", "SHORT_TOKEN": "1"})
    f = _finding(evidence=(f"wandb: api_key={API_KEY}", f"posting to {url} failed", f"token {SLACK_TOKEN} rejected",
                           "PATH=/usr/bin:/bin"))
    f = Finding(**{**f.__dict__, "summary": f"auth failed with {API_KEY}"})
    msg = message_for(_state(), f, redact)
    for text in (slack_body(msg)["text"], discord_body(msg)["content"]):
        assert API_KEY not in text and SLACK_TOKEN not in text and "hooks.slack.com/services" not in text
        assert text.count("<redacted>") >= 4 or text.count("&lt;redacted&gt;") >= 4
        assert "PATH=/usr/bin:/bin" in text                         # not a secret: kept


# -- posting --------------------------------------------------------------------------------


def test_a_429_is_retried_after_the_wait_it_names(hook):
    hook.script = [(429, {"Retry-After": "1"}, b"slow down"),
                   (429, {"Content-Type": "application/json"}, b'{"message": "You are being rate limited.", "retry_after": 0.4}'),
                   (200, {}, b"ok")]
    out = post_json(hook.url("/hook"), {"text": "hello"}, timeout_s=5)
    assert out.ok and out.status == 200 and out.attempts == 3
    posts = hook.wait_posts(3)
    assert [p["body"] for p in posts] == [{"text": "hello"}] * 3
    assert posts[1]["at"] - posts[0]["at"] >= 1.0                 # Retry-After: 1 (seconds)
    assert posts[2]["at"] - posts[1]["at"] >= 0.4                 # Discord's retry_after in the body
    assert posts[0]["headers"]["Content-Type"].startswith("application/json")

    # a wait longer than allowed is not slept through: it is a failure that says why
    hook.script = [(429, {"Retry-After": "3600"}, b"")]
    t0 = time.monotonic()
    out = post_json(hook.url("/hook"), {"text": "x"}, timeout_s=5, max_wait_s=5)
    assert not out.ok and out.status == 429 and "3600 s" in out.error and time.monotonic() - t0 < 3


def test_retry_after_forms():
    assert retry_after_s({"Retry-After": "7"}, b"") == 7.0
    assert retry_after_s({"Retry-After": "Wed, 02 Dec 2026 13:00:10 GMT"}, b"", now_s=1796216400.0) == 10.0
    assert retry_after_s({}, b'{"retry_after": 1.5}') == 1.5
    assert retry_after_s({}, b"not json") is None


def test_a_failed_post_is_said_once_without_the_url_and_never_raises(hook):
    hook.script = [(404, {}, b"no_service")] * 3
    err = io.StringIO()
    url = hook.url(f"/services/T000/B000/{SLACK_TOKEN}")
    n = WebhookNotifier(NotifyConfig(slack_webhook=url, min_interval_s=0), err=err, env={})
    for i in range(3):
        n.on_finding(_state(), _finding(n=i))
    n.close()
    assert len(hook.wait_posts(3)) == 3                             # a 404 is final: one attempt each
    lines = err.getvalue().splitlines()
    assert lines[0] == "dfctl: notify: slack webhook (127.0.0.1): HTTP 404 Not Found: no_service (later failures " \
                       "are counted, not printed)"
    assert lines[1:] == ["dfctl: notify: slack webhook (127.0.0.1): 3 of 3 message(s) not delivered"]
    assert SLACK_TOKEN not in err.getvalue()

    # nobody listening: refused, retried, reported once, still no exception
    dead = WebhookNotifier(NotifyConfig(discord_webhook="http://127.0.0.1:9/api/webhooks/1/" + DISCORD_TOKEN),
                           err=(err := io.StringIO()), env={})
    dead.on_finding(_state(), _finding())
    dead.close()
    assert "discord webhook (127.0.0.1): URLError" in err.getvalue() and DISCORD_TOKEN not in err.getvalue()


def test_a_slow_webhook_never_holds_up_the_tick_and_a_raising_post_never_reaches_it(hook):
    gate = threading.Event()
    hook.script = [(200, {}, b"ok")]
    orig = hook.server.RequestHandlerClass.do_POST

    def slow_post(handler) -> None:
        gate.wait(30)                                              # the service answers when the test says
        orig(handler)

    hook.server.RequestHandlerClass.do_POST = slow_post
    n = WebhookNotifier(NotifyConfig(slack_webhook=hook.url("/s"), min_interval_s=0), env={}, err=io.StringIO())
    t0 = time.monotonic()
    for i in range(5):
        n.on_finding(_state(), _finding(n=i))
    assert time.monotonic() - t0 < 0.5                              # queued, not posted, on the caller's thread
    assert hook.posts == []
    gate.set()
    n.close()
    assert [p["body"]["text"].count("GPU") for p in hook.posts] == [1] * 5   # then all, in order
    assert ["GPU %d" % i in p["body"]["text"] for i, p in enumerate(hook.posts)] == [True] * 5

    def raising_post(*args, **kw):   # a stand-in for a post that breaks (post_json itself never raises)
        raise RuntimeError("boom")

    err = io.StringIO()
    n = WebhookNotifier(NotifyConfig(discord_webhook=hook.url("/d")), env={}, err=err, post=raising_post)
    n.hold_messages()                                               # as under the live dashboard
    n.on_finding(_state(), _finding())
    n.on_tick()
    assert err.getvalue() == ""                                     # held until close
    n.close()
    assert err.getvalue() == "dfctl: notify: discord webhook (127.0.0.1): RuntimeError: boom (later failures are " \
                             "counted, not printed)\n"


# -- what is sent, and how often -------------------------------------------------------------


def test_a_storm_sends_one_message_then_one_with_the_count(hook):
    clock = FakeClock()
    n = WebhookNotifier(NotifyConfig(slack_webhook=hook.url("/s"), discord_webhook=hook.url("/d"),
                                     min_interval_s=60), env={}, clock=clock, err=io.StringIO())
    run, other = _state("a"), _state("b")
    for i in range(10):                                             # 10 oom findings of run a in a burst
        n.on_finding(run, _finding(n=i))
    n.on_finding(other, _finding(n=0))                              # run b: its own limit
    n.on_finding(run, _finding("gpu_idle", "warning"))              # another kind: its own limit
    n.on_finding(run, _finding("slow_step", "info"))                # below min_severity: not sent
    posts = hook.wait_posts(6)                                      # 3 messages x 2 webhooks
    n.on_tick()                                                     # the interval is not over: nothing
    clock.now += 61
    n.on_tick()                                                     # now the held nine go as one
    posts = hook.wait_posts(8)
    n.close()
    assert len(hook.posts) == 8
    slack = [p["body"]["text"] for p in posts if p["path"] == "/s"]
    discord = [p["body"]["content"] for p in posts if p["path"] == "/d"]
    assert len(slack) == len(discord) == 4
    assert "GPU 0" in slack[0] and "train_v2" not in slack[0] and "dfctl: a on" in slack[0]
    assert [("CRITICAL oom" in t, "gpu_idle" in t) for t in slack] == [(True, False), (True, False), (False, True),
                                                                      (True, False)]
    assert "GPU 9" in slack[3] and "+8 more finding(s) of this run and kind" in slack[3]   # the latest + the count
    assert "+8 more finding(s)" in discord[3]
    assert not any("slow_step" in t for t in slack + discord)


def test_what_close_sends_and_the_kind_filter(hook):
    clock = FakeClock()
    n = WebhookNotifier(NotifyConfig(slack_webhook=hook.url("/s"), kinds=("crash",), min_severity="info",
                                     min_interval_s=600), env={}, clock=clock)
    n.on_finding(_state(), _finding("oom"))                         # not a listed kind
    n.on_finding(_state(), Finding("crash", "critical", "exit code 1"))
    n.on_finding(_state(), Finding("crash", "critical", "rank 3 exited 1"))
    n.close()                                                       # the watch ends: the held one goes now
    texts = [p["body"]["text"] for p in hook.wait_posts(2)]
    assert len(hook.posts) == 2 and "exit code 1" in texts[0] and "rank 3 exited 1" in texts[1]
    assert "+" not in texts[1].split("\n")[-2]                      # one held and shown: no count line


# -- configuration -----------------------------------------------------------------------------


def test_a_playbook_notify_table_is_validated_and_never_stored_with_its_url(tmp_path, monkeypatch):
    text = f"""
[target]
kind = "local"
[notify]
slack_webhook = "https://hooks.slack.com/services/T0/B0/{SLACK_TOKEN}"
discord_webhook = "$DFCTL_TEST_DISCORD"
min_severity = "critical"
kinds = ["oom", "crash"]
min_interval_s = 120
"""
    pb = parse_playbook(text, "pb.toml")
    assert pb.notify.min_severity == "critical" and pb.notify.kinds == ("oom", "crash")
    stored = json.dumps(pb.for_registry())
    assert SLACK_TOKEN not in stored and '"slack_webhook": "<redacted>"' in stored
    assert '"discord_webhook": "$DFCTL_TEST_DISCORD"' in stored

    bad = text.replace(f"https://hooks.slack.com/services/T0/B0/{SLACK_TOKEN}", f"hooks.slack.com/{SLACK_TOKEN}")
    with pytest.raises(PlaybookError) as exc:
        parse_playbook(bad, "pb.toml")
    assert str(exc.value).startswith("pb.toml: notify.slack_webhook: expected an http(s):// URL")
    assert SLACK_TOKEN not in str(exc.value)
    with pytest.raises(PlaybookError, match=r'notify.min_severity: expected one of "info", "warning", "critical"'):
        parse_playbook(text.replace('"critical"', '"loud"'), "pb.toml")
    with pytest.raises(PlaybookError, match='notify.min_intervl_s: unknown key .did you mean "min_interval_s"'):
        parse_playbook(text.replace("min_interval_s", "min_intervl_s"), "pb.toml")

    # "$NAME" is read when the watch starts: unset is bad input naming the variable
    monkeypatch.delenv("DFCTL_TEST_DISCORD", raising=False)
    with pytest.raises(BadInputError, match=r"pb.toml: notify.discord_webhook: \$DFCTL_TEST_DISCORD is not set"):
        WebhookNotifier(pb.notify, where="pb.toml: notify")
    monkeypatch.setenv("DFCTL_TEST_DISCORD", "https://discord.com/api/webhooks/1/" + DISCORD_TOKEN)
    n = WebhookNotifier(pb.notify)
    assert [h.label for h in n.webhooks] == ["slack webhook (hooks.slack.com)", "discord webhook ($DFCTL_TEST_DISCORD)"]
    assert n.redact(f"x {DISCORD_TOKEN} y") == "x <redacted> y"


def test_the_user_config_takes_a_notify_table_or_the_old_command_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[notify]\ncommand = "notify-send dfctl"\nslack_webhook = "$SLACK_URL"\nmin_interval_s = 30\n')
    uc = load_user_config(cfg)
    assert uc.notify == "notify-send dfctl" and uc.notify_setup.slack_webhook == "$SLACK_URL"
    assert uc.notify_setup.min_interval_s == 30
    cfg.write_text('notify = "notify-send dfctl"\n')
    assert load_user_config(cfg).notify_setup == NotifyConfig(command="notify-send dfctl")
    cfg.write_text('[notify]\nslack_webhook = "ftp://x"\n')
    with pytest.raises(BadInputError, match=rf"{cfg}: notify.slack_webhook: expected an http\(s\):// URL"):
        load_user_config(cfg)


# -- end to end: a real watch of a real run that fails ----------------------------------------

FAILING = '''import os, sys, time
print("wandb: using key %s" % os.environ.get("WANDB_API_KEY"), flush=True)
for i in range(3):
    print("[progress] step=%d" % i, flush=True)
    time.sleep(0.2)
print("Traceback (most recent call last):", flush=True)
print('  File "train.py", line 7, in <module>', flush=True)
print('    wandb.login(key="%s")' % os.environ.get("WANDB_API_KEY"), flush=True)
print("RuntimeError: the loss went away", flush=True)
sys.exit(1)
'''


def everything_of(p: subprocess.CompletedProcess) -> str:
    return p.stdout + p.stderr


def test_a_watch_of_a_failing_run_posts_one_message_per_webhook(tmp_path, capsys, monkeypatch, _dfctl_home, hook):
    root = make_project(tmp_path / "proj", git=True, extra_files={"ticker/__main__.py": FAILING.encode()})
    pb = ticker_playbook(root, name="failing")
    slack_url = hook.url(f"/services/T000/B000/{SLACK_TOKEN}")
    discord_url = hook.url(f"/api/webhooks/123/{DISCORD_TOKEN}")
    pb.write_text(pb.read_text() + f'\n[notify]\nslack_webhook = "$DFCTL_TEST_SLACK"\ndiscord_webhook = "{discord_url}"\n'
                                   'min_severity = "critical"\n')
    monkeypatch.chdir(root)
    monkeypatch.setenv("WANDB_API_KEY", API_KEY)
    code, out, err = dfctl(capsys, "deploy", str(pb), "--json")
    assert code == 0, err
    assert SLACK_TOKEN not in out + err and DISCORD_TOKEN not in out + err
    runs = json.loads(dfctl(capsys, "runs", "--json")[1])
    assert DISCORD_TOKEN not in json.dumps(runs)                   # the registry has no webhook URL
    env = {**os.environ, "DFCTL_TEST_SLACK": slack_url, "XDG_CONFIG_HOME": str(tmp_path / "no-config"),
           "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "controller", "watch", "--playbook", str(pb), "--interval", "0.3"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr                   # a failure found
    assert "CRITICAL crash" in p.stdout
    posts = hook.wait_posts(2)
    assert len(posts) == 2, posts                                   # one failure: one message per webhook
    by_path = {p["path"].split("/")[1]: p["body"] for p in posts}
    slack, discord = by_path["services"]["text"], by_path["api"]["content"]
    for text in (slack, discord):
        assert "failing" in text and "CRITICAL crash" in text and "local" in text
        assert "dfctl logs failing" in text
        assert API_KEY not in text and SLACK_TOKEN not in text and DISCORD_TOKEN not in text
    assert "RuntimeError: the loss went away" in slack + discord
    assert '    wandb.login(key="&lt;redacted&gt;")' in slack           # the evidence, redacted
    assert '    wandb.login(key="<redacted>")' in discord
    assert API_KEY not in everything_of(p)
    assert set(by_path["services"]) == {"text"} and by_path["api"]["allowed_mentions"] == {"parse": []}
    everything = everything_of(p)
    assert SLACK_TOKEN not in everything and DISCORD_TOKEN not in everything and "notify:" not in p.stderr
    # the watch's own --json prints the same evidence: redacted as the messages are
    j = subprocess.run([sys.executable, "-m", "controller", "watch", "--playbook", str(pb), "--once", "--json"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert j.returncode == 4, j.stdout + j.stderr
    evidence = [x for f in json.loads(j.stdout)["runs"][0]["findings"] for x in f["evidence"]]
    assert '    wandb.login(key="<redacted>")' in evidence, evidence
    assert API_KEY not in everything_of(j)


def test_which_command_wins_flag_then_env_then_the_playbook_table_then_the_config_file(tmp_path):
    """Through the real `dfctl` process: a missing command is refused up front naming itself,
    which shows the one that won."""
    (tmp_path / "cfg" / "dfctl").mkdir(parents=True)
    (tmp_path / "cfg" / "dfctl" / "config.toml").write_text('notify = "/from/file"\n')
    pb = tmp_path / "pb.toml"
    pb.write_text('[run]\nname = "x"\n[notify]\ncommand = "/from/playbook"\nmin_severity = "critical"\n')
    plain = tmp_path / "plain.toml"
    plain.write_text('[run]\nname = "x"\n')
    env = {k: v for k, v in os.environ.items() if k != "DFCTL_NOTIFY"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "cfg"), DFCTL_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))

    def refused(*args: str, **extra: str) -> str:
        p = subprocess.run([sys.executable, "-m", "controller", "watch", *args], cwd=ROOT, env={**env, **extra},
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        return p.stderr

    assert "--notify /from/playbook: not an executable file" in refused("--playbook", str(pb))
    assert "--notify /from/file: not an executable file" in refused("--playbook", str(plain))
    assert "--notify /from/env:" in refused("--playbook", str(pb), DFCTL_NOTIFY="/from/env")
    assert "--notify /from/flag:" in refused("--playbook", str(pb), "--notify", "/from/flag", DFCTL_NOTIFY="/from/env")
    # a webhook "$NAME" that is not set: refused before anything is watched, naming the variable;
    # this table has no command, and it replaces the file's: no /from/file
    pb.write_text('[run]\nname = "x"\n[notify]\nslack_webhook = "$DFCTL_UNSET_HOOK"\n')
    assert f"{pb}: notify.slack_webhook: $DFCTL_UNSET_HOOK is not set or empty" in refused("--playbook", str(pb))
