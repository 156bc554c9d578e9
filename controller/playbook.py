"""Playbooks: TOML run recipes, validated at load time into frozen, typed dataclasses.

A bad playbook gets one message naming file, key and problem
(`playbooks/ct200.toml: target.vmid: expected an integer, got "abc"`) and exit code 2 --
never a traceback. Field docs live next to the fields (torchtitan's habit) and README's
playbook reference is written from them.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
import tomllib
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from controller.errors import BadInputError, PlaybookError

SECRET_NAME_RE = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|PRIVATE|COOKIE|SIGNATURE|BEARER)"   # anywhere in the name
    r"|(^|_)(PAT|PW|PWD|PASS|DSN|SIG|CERT|SESSION)(_|$)", re.I)                   # as a whole word
"""Environment names whose values are treated as secrets: HF_TOKEN, WANDB_API_KEY, MY_AUTH,
GITHUB_PAT, DB_PASS, SENTRY_DSN... (a short word such as PAT only whole, so PATH is not one)."""


def looks_secret(name: str) -> bool:
    """Does this environment variable's name say its value is a secret?"""
    return SECRET_NAME_RE.search(name) is not None


def doc(text: str, *, required: str = "", **kw: Any) -> Any:
    """A dataclass field with a one-line doc (shown by `dfctl playbook-reference`);
    `required`: the key must be written in the playbook (its default only types it), and
    the text says what to write."""
    return field(metadata={"doc": text, "required": required}, **kw)


RUN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RUN_NAME_RULE = "expected letters, digits, '.', '_' or '-' (at most 64, first a letter or digit)"
"""One rule for a run name wherever it is given (playbook run.name, deploy --name, import
--name): it becomes part of the run id and of the run directory's name."""


def total_steps_of(args: Iterable[Any] | None) -> int | None:
    """The `--steps N` / `--steps=N` of a run's args (the bundled trainer's flag), if given."""
    args = [str(a) for a in args or ()]
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--steps=") else (
            args[i + 1] if a == "--steps" and i + 1 < len(args) else None)
        if value is not None and value.isdigit():
            return int(value)
    return None


def check_run_name(name: str, where: str = "--name") -> str:
    """`name` if it follows RUN_NAME_RE, else BadInputError in the one wording."""
    if not RUN_NAME_RE.fullmatch(name):
        raise BadInputError(f"{where}: {RUN_NAME_RULE}, got {_describe(name)}")
    return name


@dataclass(frozen=True)
class TargetConfig:
    kind: Literal["local", "ssh", "pct"] = doc("Where the run lives: this machine, a plain SSH host, or a Proxmox LXC container. Required: an empty or truncated playbook never launches anywhere by default.", default="local", required='"local", "ssh" or "pct"')
    host: str | None = doc("SSH host name or ~/.ssh/config alias (ssh, pct).", default=None)
    user: str | None = doc("SSH user; default from ~/.ssh/config, else root.", default=None)
    port: int | None = doc("SSH port; default from ~/.ssh/config, else 22.", default=None)
    identity_file: str | None = doc("Private key file; default from ~/.ssh/config / ssh-agent.", default=None)
    vmid: int | None = doc("Proxmox container id (pct targets).", default=None)
    workdir: str = doc("Directory on the target holding releases/, current and runs/.", default=".dfctl-local")
    python: str = doc("Python interpreter on the target that runs the trainer.", default="python3")
    path: str = doc("PATH the run gets (pct's own PATH lacks /usr/local/bin and venvs).", default="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    connect_timeout_s: float = doc("SSH connect + banner timeout; past it: exit 3 naming the host.", default=10.0)
    keepalive_s: int = doc("SSH keepalive interval.", default=15)
    known_hosts: str | None = doc("known_hosts file to check host keys against (default ~/.ssh/known_hosts).", default=None)
    accept_new_host_key: bool = doc("Add an unknown host key to known_hosts (a changed key is always refused).", default=False)
    ssh_config: str | None = doc("ssh_config file to read aliases from (default ~/.ssh/config).", default=None)


@dataclass(frozen=True)
class NodeConfig(TargetConfig):
    """One node of a multi-node job: a target (every [target] key) plus the address the
    other nodes reach it at."""

    addr: str | None = doc("Address the other nodes reach this node at (its CT's or host's IP or DNS name): node 0's is the rendezvous endpoint's host, every node's is torchrun's --local-addr (the workers' MASTER_ADDR comes from it). Required for ssh and pct nodes; local nodes default to 127.0.0.<rank+1> (all loopback). torchrun's c10d rendezvous numbers the nodes (and so the global ranks) in the sorted order of these addresses (it ignores --node-rank).", default=None)

    @property
    def reach_addr(self) -> str:
        """addr (the loader gives local nodes one)."""
        return self.addr or "127.0.0.1"


@dataclass(frozen=True)
class DistributedConfig:
    nproc_per_node: int = doc("Worker processes per node (torchrun --nproc-per-node; usually its GPU count).", default=1)
    rdzv_backend: Literal["c10d"] = doc("torchrun rendezvous backend: c10d, whose TCPStore node 0's torchrun hosts at the endpoint.", default="c10d")
    rdzv_endpoint: str | None = doc("HOST:PORT of the rendezvous (default: node 0's addr and master_port).", default=None)
    master_port: int = doc("Port of the rendezvous store on node 0 (the default endpoint's port).", default=29500)
    max_restarts: int = doc("torchrun --max-restarts: times the agents restart all workers after one fails.", default=0)
    rdzv_timeout_s: float = doc("Seconds the nodes wait for each other at the rendezvous (torchrun's rdzv-conf join_timeout).", default=600.0)
    env: dict[str, str] = doc("Environment for every node's workers on top of run.env: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_DEBUG, ...", default_factory=dict)


@dataclass(frozen=True)
class BundleConfig:
    paths: tuple[str, ...] = doc("Paths (relative to the project root) that make up the bundle.", default=("trainer",))
    exclude: tuple[str, ...] = doc("Extra glob patterns to leave out (on top of .gitignore).", default=())


@dataclass(frozen=True)
class RunConfig:
    name: str = doc("Run name; the run directory is runs/<name>-<UTC timestamp>/.", default="run")
    module: str = doc("Python module to run with `python -u -m` inside the release.", default="trainer")
    args: tuple[str, ...] = doc("Arguments for the module (argv, no shell).", default=())
    env: dict[str, str] = doc("Environment for the run. Names that look secret (*KEY*, *TOKEN*, *SECRET*, *PASSW*, *AUTH*, *_PAT, *_DSN, ...) are sent like secret_env.", default_factory=dict)
    secret_env: tuple[str, ...] = doc("Secret variables, passed to the run through a 0600 file, never argv, never stored: from your local environment, or the run.env value of that name (naming a run.env key here marks its value secret).", default=("WANDB_API_KEY",))
    exclusive: bool = doc("Launch only while no other run of this target is alive (they would share its GPUs); deploy --replace stops those first.", default=True)
    stop_grace_s: float = doc("Seconds between SIGTERM and SIGKILL when deploy --replace stops a run (the bundled trainer saves a checkpoint on SIGTERM).", default=60.0)


@dataclass(frozen=True)
class WatchConfig:
    interval_s: float = doc("Seconds between ticks.", default=2.0)
    baseline_tok_per_s: float | None = doc("Reference throughput (target tok/s); a regression is measured against it.", default=None)
    regression_threshold_pct: float = doc("Deficit below the baseline that counts as a regression.", default=15.0)
    regression_windows: int = doc("Consecutive windows below the threshold before a regression is reported.", default=3)
    warmup_s: float = doc("Seconds after the first step excluded from throughput judgements.", default=60.0)
    warmup_steps: int = doc("Progress samples after the first step excluded from throughput judgements.", default=3)
    stale_log_s: float = doc("Log not grown this long while the run advances -> stale_log.", default=120.0)
    hang_factor: float = doc("No progress for hang_factor x median step interval (and GPUs idle) -> hang.", default=10.0)
    hang_min_s: float = doc("Never call a hang before this many seconds without progress.", default=300.0)
    startup_deadlines_s: dict[str, float] = doc("Milestone -> seconds after launch by which it must be seen.", default_factory=lambda: {"dataset_loaded": 600.0, "first_step": 1800.0})
    progress_pattern: str | None = doc("Regex with named groups (step, tok_per_s, loss, ...) for another trainer's progress lines.", default=None)
    gpus_expected: int | None = doc("GPUs the run should use; fewer busy -> gpu_idle.", default=None)
    gpu_idle_s: float = doc("A GPU counts as idle only after this many seconds without a busy sample.", default=60.0)


NOTIFY_SEVERITIES = ("info", "warning", "critical")
WEBHOOK_ENV_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
"""A webhook written as `$NAME`: its URL is that environment variable's value."""


@dataclass(frozen=True)
class NotifyConfig:
    command: str | None = doc("Command run on each new finding, the finding as JSON on stdin, no shell (what `watch --notify CMD` runs; the flag and DFCTL_NOTIFY win over it). It gets every new finding: the keys below shape only what the webhooks are sent.", default=None)
    slack_webhook: str | None = doc("Slack incoming-webhook URL, or \"$NAME\": the URL is in that environment variable (keep the token out of a committed file). Posted `{\"text\": ...}`. A URL is never printed, stored or put into --json.", default=None)
    discord_webhook: str | None = doc("Discord webhook URL, or \"$NAME\" as for slack_webhook. Posted `{\"content\": ...}` (at most 2000 characters).", default=None)
    min_severity: Literal["info", "warning", "critical"] = doc("Least severity of a finding that is posted to the webhooks.", default="warning")
    kinds: tuple[str, ...] = doc("Finding kinds posted to the webhooks (oom, crash, hang, nan, regression, ...); empty: every kind.", default=())
    min_interval_s: float = doc("Rate limit per run and finding kind: after a message, the next waits this long, and the findings held meanwhile come as one message with their count.", default=300.0)

    def webhooks(self) -> tuple[tuple[str, str], ...]:
        """(kind, url or "$NAME") of each webhook written."""
        return tuple((k, u) for k, u in (("slack", self.slack_webhook), ("discord", self.discord_webhook)) if u)


def check_notify(cfg: NotifyConfig, src: str, where: str = "notify") -> None:
    """A [notify] table's values. A webhook's value is never echoed: a URL carries its token."""
    for kind, url in cfg.webhooks():
        if WEBHOOK_ENV_RE.fullmatch(url):
            continue
        if not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", url):
            raise PlaybookError(f"{src}: {where}.{kind}_webhook: expected an http(s):// URL or \"$NAME\" (an "
                                f"environment variable holding it); the value is not shown, it may carry a token")
    if not (0 <= cfg.min_interval_s <= MAX_DURATION_S):
        raise PlaybookError(f"{src}: {where}.min_interval_s: expected 0..{MAX_DURATION_S:g} seconds, got {cfg.min_interval_s:g}")
    for i, kind in enumerate(cfg.kinds):
        if not re.fullmatch(r"[a-z][a-z0-9_]*", kind):
            raise PlaybookError(f"{src}: {where}.kinds[{i}]: expected a finding kind such as \"oom\", got {_describe(kind)}")
    if cfg.command is not None and not cfg.command.strip():
        raise PlaybookError(f"{src}: {where}.command: must not be empty")


def parse_notify_table(table: dict[str, Any], src: str) -> NotifyConfig:
    """A [notify] table wherever it is written (a playbook, the user's config.toml)."""
    cfg = _build(NotifyConfig, table, "notify", src)
    check_notify(cfg, src)
    return cfg


RECOVER_KINDS = ("crash", "oom", "hang", "unreachable")
"""Finding kinds (records.FindingKind) a recovery policy may act on. An operator's stop
(dfctl stop, deploy --replace) raises no finding at all (judge/state.py _process_end), so
it can never be acted on."""

ARG_CHANGE_OPS = ("half", "double")
"""Arithmetic on an integer flag's current value; any other string is the new value."""


@dataclass(frozen=True)
class RecoverKindConfig:
    """What to do about one finding kind."""

    action: Literal["resume", "stop"] = doc("resume: a new run, linked to this one, from its newest complete checkpoint with the same release; stop: stop it (a hang only after its stack dump is saved) and leave it.", default="resume")
    args: dict[str, str] = doc('Changes to the run\'s args for the resumed run: flag -> "half" or "double" (an integer flag already in run.args; half rounds down, at least 1) or a new value, e.g. { "--token-budget" = "half" }. They add up over a chain.', default_factory=dict)
    window_s: float | None = doc("This kind's own window (default: [recover].window_s).", default=None)


@dataclass(frozen=True)
class RecoverConfig:
    on: tuple[str, ...] = doc('Finding kinds to act on: "crash", "oom", "hang", "unreachable". Empty: never act (the default). Only critical crash/oom/hang findings count (a recovered OOM is a warning); an operator\'s stop is never acted on.', default=())
    max_attempts: int = doc("Resumes at most this many times along one chain; then give up (said and recorded).", default=3)
    backoff_s: float = doc("Wait before the n-th resume of a chain: backoff_s x 2^(n-1) after the finding was first seen (0: none).", default=30.0)
    window_s: float = doc("A finding must hold this long before anything is done (a link down for less never acts).", default=0.0)
    targets: tuple[str, ...] = doc("Playbook files of other targets, relative to this playbook's directory, in order: attempt n resumes on the n-th one's [target] (the last one keeps the rest), its release and newest checkpoint carried there first (README: Unattended); empty: the run's own target.", default=())
    crash: RecoverKindConfig = doc("[recover.crash]: the process died (non-zero exit, vanished).", default_factory=RecoverKindConfig)
    oom: RecoverKindConfig = doc("[recover.oom]: out of memory (CUDA OOM line, OOM killer).", default_factory=RecoverKindConfig)
    hang: RecoverKindConfig = doc("[recover.hang]: no progress with idle GPUs.", default_factory=RecoverKindConfig)
    unreachable: RecoverKindConfig = doc("[recover.unreachable]: the host or run files do not answer.", default_factory=RecoverKindConfig)

    def for_kind(self, kind: str) -> RecoverKindConfig:
        return typing.cast(RecoverKindConfig, getattr(self, kind))

    def window_for(self, kind: str) -> float:
        own = self.for_kind(kind).window_s
        return self.window_s if own is None else own


def recover_config_from(playbook: dict[str, Any] | None) -> RecoverConfig:
    """The run's [recover] table as the registry stored it (asdict) -> RecoverConfig
    (values were validated when the playbook was loaded)."""
    raw = dict((playbook or {}).get("recover") or {})
    known = {f.name for f in dataclasses.fields(RecoverConfig)}
    kw: dict[str, Any] = {}
    for k, v in raw.items():
        if k not in known:
            continue
        if k in RECOVER_KINDS:
            kk = {f.name for f in dataclasses.fields(RecoverKindConfig)}
            kw[k] = RecoverKindConfig(**{a: b for a, b in dict(v or {}).items() if a in kk})
        else:
            kw[k] = tuple(v) if k in ("on", "targets") else v
    return RecoverConfig(**kw)


def watch_config_from(playbook: dict[str, Any] | None) -> WatchConfig:
    """The run's [watch] table as the registry stored it (asdict) -> WatchConfig (the
    watch and compare-runs judge a run by the same values)."""
    raw = dict((playbook or {}).get("watch") or {})
    known = {f.name for f in dataclasses.fields(WatchConfig)}
    return WatchConfig(**{k: v for k, v in raw.items() if k in known})


@dataclass(frozen=True)
class Playbook:
    target: TargetConfig = doc("Where to deploy and run.", default_factory=TargetConfig, required='a [target] table with kind = "local", "ssh" or "pct"')
    bundle: BundleConfig = doc("What code to ship.", default_factory=BundleConfig)
    run: RunConfig = doc("What to launch.", default_factory=RunConfig)
    watch: WatchConfig = doc("How to watch and what counts as a failure.", default_factory=WatchConfig)
    nodes: tuple[NodeConfig, ...] = doc("A job across several nodes instead of one [target]: one [[nodes]] table per node, in node-rank order (node 0 hosts the rendezvous). Each takes every [target] key, plus:", default=())
    distributed: DistributedConfig = doc("How torchrun joins the nodes of a [[nodes]] job.", default_factory=DistributedConfig)
    notify: NotifyConfig = doc("Where `dfctl watch --playbook` sends new findings: a command, Slack and Discord webhooks (this table replaces the one in your config.toml).", default_factory=NotifyConfig)
    recover: RecoverConfig = doc("What `dfctl watch --recover` does when the run fails (README: Unattended).", default_factory=RecoverConfig)
    source: str = doc("File this playbook was loaded from (set by the loader).", default="<memory>")

    @property
    def is_job(self) -> bool:
        """Several nodes ([[nodes]]) under torchrun, not one [target]."""
        return bool(self.nodes)

    def for_node(self, rank: int) -> Playbook:
        """This playbook with node `rank` as its target: what deploy and launch of that node use."""
        return dataclasses.replace(self, target=self.nodes[rank])

    def rdzv_endpoint(self) -> str:
        """HOST:PORT of the job's rendezvous: [distributed].rdzv_endpoint, else node 0's addr."""
        return self.distributed.rdzv_endpoint or f"{self.nodes[0].reach_addr}:{self.distributed.master_port}"

    def secret_names(self) -> tuple[str, ...]:
        """Env names whose values never appear in argv, logs, the registry or --json."""
        names = set(self.run.secret_env)
        names.update(k for k in self.run.env if looks_secret(k))
        return tuple(sorted(names))

    def redacted(self) -> dict[str, Any]:
        """The playbook as resolved, secrets replaced by "<redacted>": what the registry stores."""
        data = dataclasses.asdict(self)
        secrets = set(self.secret_names())
        data["run"]["env"] = {k: ("<redacted>" if k in secrets else v) for k, v in self.run.env.items()}
        for kind, url in self.notify.webhooks():   # a webhook URL is its own secret; "$NAME" is not
            data["notify"][f"{kind}_webhook"] = url if WEBHOOK_ENV_RE.fullmatch(url) else "<redacted>"
        return data

    def for_registry(self) -> dict[str, Any]:
        """What the registry stores: the redacted playbook with no env value at all -- a
        secret is "<redacted>", any other value a hash (two runs' env still compare), since
        a value that is a secret under an innocent name must not sit in a file either."""
        data = self.redacted()
        secrets = set(self.secret_names())
        data["run"]["env"] = {k: ("<redacted>" if k in secrets else env_value_hash(k, v)) for k, v in self.run.env.items()}
        data["distributed"]["env"] = {k: env_value_hash(k, v) for k, v in self.distributed.env.items()}
        if self.is_job:
            del data["target"]          # a job has no one target: its nodes are (runstore's job contract)
        return data


def env_value_hash(name: str, value: str) -> str:
    """`sha256:<16 hex>` of name=value: equal for equal values, the value not recoverable from it
    unless guessable."""
    return "sha256:" + hashlib.sha256(f"{name}={value}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _describe(value: Any) -> str:
    if isinstance(value, str):
        # JSON quoting: a newline, CR or escape in the value cannot break the one-line message
        return json.dumps(value if len(value) <= 60 else value[:57] + "...", ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)[:60]


def _convert(tp: Any, value: Any, where: str, src: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where, src)
    if origin is Literal:
        if value not in args:
            choices = ", ".join(f'"{a}"' for a in args)
            raise PlaybookError(f"{src}: {where}: expected one of {choices}, got {_describe(value)}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise PlaybookError(f"{src}: {where}: expected a list, got {_describe(value)}")
        return tuple(_convert(args[0], v, f"{where}[{i}]", src) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise PlaybookError(f"{src}: {where}: expected a table, got {_describe(value)}")
        return {str(k): _convert(args[1], v, f"{where}.{k}", src) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise PlaybookError(f"{src}: {where}: expected a table, got {_describe(value)}")
        return _build(tp, value, where, src)
    if tp is bool:
        if not isinstance(value, bool):
            raise PlaybookError(f"{src}: {where}: expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlaybookError(f"{src}: {where}: expected an integer, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlaybookError(f"{src}: {where}: expected a number, got {_describe(value)}")
        if value != value or value in (float("inf"), float("-inf")):
            raise PlaybookError(f"{src}: {where}: expected a finite number, got {value}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise PlaybookError(f"{src}: {where}: expected a string, got {_describe(value)}")
        if "\x00" in value:
            raise PlaybookError(f"{src}: {where}: NUL characters are not allowed")
        return value
    raise PlaybookError(f"{src}: {where}: unsupported type {tp!r}")  # pragma: no cover


def _build(cls: type, table: dict[str, Any], prefix: str, src: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{prefix}.{key}" if prefix else key
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            extra = f' (did you mean "{close[0]}"?)' if close else f" (known: {', '.join(fields)})"
            raise PlaybookError(f"{src}: {where}: unknown key{extra}")
        kwargs[key] = _convert(hints[key], value, where, src)
    return cls(**kwargs)


def _check_target(src: str, t: TargetConfig, where: str) -> None:
    """One target's values ([target], or one [[nodes]] entry: `where` is "target" or "nodes[i]")."""
    if t.kind in ("ssh", "pct") and not t.host:
        raise PlaybookError(f"{src}: {where}.host: required when {where}.kind is \"{t.kind}\"")
    if t.kind == "pct" and t.vmid is None:
        raise PlaybookError(f"{src}: {where}.vmid: required when {where}.kind is \"pct\"")
    if t.vmid is not None and not (100 <= t.vmid <= 999_999_999):
        raise PlaybookError(f"{src}: {where}.vmid: expected a Proxmox id from 100 to 999999999, got {t.vmid}")
    if t.port is not None and not (1 <= t.port <= 65535):
        raise PlaybookError(f"{src}: {where}.port: expected 1..65535, got {t.port}")
    if not (0 < t.connect_timeout_s <= 600):
        raise PlaybookError(f"{src}: {where}.connect_timeout_s: expected 0 < seconds <= 600, got {t.connect_timeout_s}")
    if not t.workdir.strip():
        raise PlaybookError(f"{src}: {where}.workdir: must not be empty")
    if ":" in t.workdir:
        # the release dir goes into the run's PYTHONPATH, where ':' separates entries
        raise PlaybookError(f"{src}: {where}.workdir: ':' is not allowed (it would split the run's PYTHONPATH), got {_describe(t.workdir)}")
    _check_workdir(src, t.workdir, where)
    if not t.python.strip() or t.python != t.python.strip():
        raise PlaybookError(f"{src}: {where}.python: expected an interpreter name or absolute path, got {_describe(t.python)}")
    if "/" in t.python and not t.python.startswith("/"):
        raise PlaybookError(f"{src}: {where}.python: a path must be absolute, got {_describe(t.python)}")
    if not (1 <= t.keepalive_s <= 3600):
        raise PlaybookError(f"{src}: {where}.keepalive_s: expected 1..3600 seconds, got {t.keepalive_s}")


ADDR_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\]")
"""A node address: a host name or IPv4 address, or a bracketed IPv6 address (it goes into HOST:PORT)."""


def _check_nodes(pb: Playbook) -> None:
    """[[nodes]] and [distributed]: each node a valid target with an address, no node twice."""
    src, d = pb.source, pb.distributed
    seen: dict[tuple, int] = {}
    for i, node in enumerate(pb.nodes):
        where = f"nodes[{i}]"
        _check_target(src, node, where)
        if node.addr is None and node.kind != "local":
            raise PlaybookError(f"{src}: {where}.addr: required for a {node.kind} node (the address the other "
                                f"nodes reach it at; node 0's is the rendezvous host)")
        if node.addr is not None and not ADDR_RE.fullmatch(node.addr):
            raise PlaybookError(f"{src}: {where}.addr: expected a host name or IP address, got {_describe(node.addr)}")
        key = (node.kind, node.host, node.port, node.user, node.vmid, node.workdir)
        if key in seen:
            raise PlaybookError(f"{src}: {where}: the same target and workdir as nodes[{seen[key]}] "
                                f"(two nodes of one job need their own run dirs)")
        seen[key] = i
    if not (1 <= d.nproc_per_node <= MAX_GPUS):
        raise PlaybookError(f"{src}: distributed.nproc_per_node: expected 1..{MAX_GPUS}, got {d.nproc_per_node}")
    if not (1 <= d.master_port <= 65535):
        raise PlaybookError(f"{src}: distributed.master_port: expected 1..65535, got {d.master_port}")
    if not (0 <= d.max_restarts <= 1000):
        raise PlaybookError(f"{src}: distributed.max_restarts: expected 0..1000, got {d.max_restarts}")
    if not (0 < d.rdzv_timeout_s <= MAX_DURATION_S):
        raise PlaybookError(f"{src}: distributed.rdzv_timeout_s: expected 0 < seconds <= {MAX_DURATION_S:g}, "
                            f"got {d.rdzv_timeout_s:g}")
    if d.rdzv_endpoint is not None:
        host, _, port = d.rdzv_endpoint.rpartition(":")
        if not ADDR_RE.fullmatch(host) or not port.isdigit() or not (1 <= int(port) <= 65535):
            raise PlaybookError(f"{src}: distributed.rdzv_endpoint: expected HOST:PORT, got {_describe(d.rdzv_endpoint)}")
    for k in d.env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise PlaybookError(f"{src}: distributed.env: {_describe(k)} is not a valid environment variable name")
        if looks_secret(k):
            raise PlaybookError(f"{src}: distributed.env.{k}: looks like a secret; put it in run.env or "
                                f"run.secret_env (sent through the 0600 env file)")


def _check(pb: Playbook) -> None:
    src, w = pb.source, pb.watch
    if pb.is_job:
        _check_nodes(pb)
    else:
        _check_target(src, pb.target, "target")
    if not RUN_NAME_RE.fullmatch(pb.run.name):
        raise PlaybookError(f"{src}: run.name: {RUN_NAME_RULE}, got {_describe(pb.run.name)}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", pb.run.module):
        raise PlaybookError(f"{src}: run.module: expected a Python module name, got {_describe(pb.run.module)}")
    for k in list(pb.run.env) + list(pb.run.secret_env):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise PlaybookError(f"{src}: run.env: {_describe(k)} is not a valid environment variable name")
    if not (0 <= pb.run.stop_grace_s <= 3600):
        raise PlaybookError(f"{src}: run.stop_grace_s: expected 0..3600 seconds, got {pb.run.stop_grace_s}")
    if not pb.bundle.paths:
        raise PlaybookError(f"{src}: bundle.paths: must name at least one path")
    for p in pb.bundle.paths:
        if p.startswith("/") or ".." in Path(p).parts:
            raise PlaybookError(f"{src}: bundle.paths: {_describe(p)} must be relative and inside the project")
    if not (0.05 <= w.interval_s <= 3600):
        raise PlaybookError(f"{src}: watch.interval_s: expected 0.05..3600 seconds, got {w.interval_s}")
    if w.baseline_tok_per_s is not None and w.baseline_tok_per_s <= 0:
        raise PlaybookError(f"{src}: watch.baseline_tok_per_s: expected a positive number, got {w.baseline_tok_per_s}")
    if not (0 < w.regression_threshold_pct < 100):
        raise PlaybookError(f"{src}: watch.regression_threshold_pct: expected 0 < pct < 100, got {w.regression_threshold_pct}")
    if w.regression_windows < 1:
        raise PlaybookError(f"{src}: watch.regression_windows: expected at least 1, got {w.regression_windows}")
    for name, value in (("warmup_s", w.warmup_s), ("stale_log_s", w.stale_log_s), ("hang_min_s", w.hang_min_s),
                        ("gpu_idle_s", w.gpu_idle_s)):
        if value < 0:
            raise PlaybookError(f"{src}: watch.{name}: expected a number >= 0, got {value}")
    if w.hang_factor <= 0:
        raise PlaybookError(f"{src}: watch.hang_factor: expected a positive number, got {w.hang_factor}")
    _check_bounds(pb)
    check_notify(pb.notify, src)
    _check_recover(pb)
    if w.progress_pattern is not None:
        try:
            rx = re.compile(w.progress_pattern)
        except re.error as exc:
            raise PlaybookError(f"{src}: watch.progress_pattern: not a valid regex: {exc}") from None
        if "step" not in rx.groupindex:
            raise PlaybookError(f"{src}: watch.progress_pattern: needs a named group (?P<step>...)")


FLAG_RE = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
RESERVED_FLAGS = ("--run-dir", "--resume-from", "--resume")
"""Flags a resume sets itself: a declared change may not touch them."""


def flag_value(args: Iterable[str], flag: str) -> str | None:
    """The value of `flag V` / `flag=V` in argv, if given (the last one wins, as argparse's)."""
    args = list(args)
    found = None
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            found = a.split("=", 1)[1]
        elif a == flag and i + 1 < len(args):
            found = args[i + 1]
    return found


def changed_args(args: Iterable[str], changes: dict[str, str]) -> list[str]:
    """`args` with each declared change applied (RecoverKindConfig.args): "half"/"double" of
    the flag's integer value (half rounds down, at least 1), any other string the new value.
    A flag not in `args` is appended with the value (half/double of a missing flag were
    refused when the playbook was loaded). `flag=V` spellings are rewritten in place."""
    out = [str(a) for a in args]
    for flag, change in changes.items():
        current = flag_value(out, flag)
        if change in ARG_CHANGE_OPS:
            if current is None or not current.isdigit():
                raise BadInputError(f'recover: "{change}" of {flag} needs an integer value in the run\'s args, '
                                    f"got {_describe(current) if current is not None else 'none'}")
            n = int(current)
            new = str(max(1, n // 2) if change == "half" else n * 2)
        else:
            new = change
        if current is None:
            out += [flag, new]
            continue
        for i, a in enumerate(out):
            if a.startswith(flag + "="):
                out[i] = f"{flag}={new}"
            elif a == flag and i + 1 < len(out):
                out[i + 1] = new
    return out


def _check_recover(pb: Playbook) -> None:
    """[recover]: known kinds only, sane numbers, changes a resume can make."""
    src, r = pb.source, pb.recover
    known = ", ".join(f'"{k}"' for k in RECOVER_KINDS)
    for i, kind in enumerate(r.on):
        if kind == "stop":
            raise PlaybookError(f"{src}: recover.on[{i}]: \"stop\" is an operator's stop, never acted on (known: {known})")
        if kind not in RECOVER_KINDS:
            raise PlaybookError(f"{src}: recover.on[{i}]: unknown finding kind {_describe(kind)} (known: {known})")
    if r.on and pb.is_job:
        raise PlaybookError(f"{src}: recover.on: not for a [[nodes]] job yet (single-target runs only)")
    if not (0 <= r.max_attempts <= 100):
        raise PlaybookError(f"{src}: recover.max_attempts: expected 0..100, got {r.max_attempts}")
    for name, value in (("backoff_s", r.backoff_s), ("window_s", r.window_s)):
        if not (0 <= value <= MAX_DURATION_S):
            raise PlaybookError(f"{src}: recover.{name}: expected 0..{MAX_DURATION_S:g} seconds, got {value:g}")
    for i, t in enumerate(r.targets):
        path = Path(src).parent / t if src != "<memory>" else Path(t)
        if not t.strip() or not path.is_file():
            raise PlaybookError(f"{src}: recover.targets[{i}]: no such playbook file {_describe(t)} "
                                f"(relative to the playbook's directory)")
    for kind in RECOVER_KINDS:
        k = r.for_kind(kind)
        where = f"recover.{kind}"
        if k.window_s is not None and not (0 <= k.window_s <= MAX_DURATION_S):
            raise PlaybookError(f"{src}: {where}.window_s: expected 0..{MAX_DURATION_S:g} seconds, got {k.window_s:g}")
        if k.args and k.action != "resume":
            raise PlaybookError(f"{src}: {where}.args: changes apply to a resume; action is {_describe(k.action)}")
        for flag, change in k.args.items():
            at = f'{where}.args."{flag}"'
            if not FLAG_RE.fullmatch(flag):
                raise PlaybookError(f"{src}: {at}: expected a flag such as --token-budget, got {_describe(flag)}")
            if flag in RESERVED_FLAGS:
                raise PlaybookError(f"{src}: {at}: set by the resume itself; not a change to declare")
            if not change.strip():
                raise PlaybookError(f"{src}: {at}: expected \"half\", \"double\" or a value, got an empty string")
            if change in ARG_CHANGE_OPS:
                current = flag_value(pb.run.args, flag)
                if current is None or not current.isdigit():
                    raise PlaybookError(f"{src}: {at}: \"{change}\" needs {flag} with an integer in run.args, "
                                        f"got {_describe(current) if current is not None else 'none'}")


SYSTEM_DIRS = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run",
                         "sbin", "sys", "usr"})
"""Top-level directories a workdir may not be in: deploy writes releases/, runs/, current
and its lock there, as root on the target."""
MAX_DURATION_S = 7 * 86400.0
MAX_GPUS = 4096


def _check_workdir(src: str, w: str, where: str = "target") -> None:
    if "\x00" in w or w != w.strip():
        raise PlaybookError(f"{src}: {where}.workdir: leading or trailing spaces are not allowed, got {_describe(w)}")
    parts = w.split("/")
    if ".." in parts:
        raise PlaybookError(f"{src}: {where}.workdir: '..' is not allowed (it would resolve elsewhere than written), "
                            f"got {_describe(w)}")
    if w.startswith("/"):
        top = [p for p in parts if p not in ("", ".")]
        if not top:
            raise PlaybookError(f"{src}: {where}.workdir: \"/\" is not allowed (releases/ and runs/ would go into the root)")
        if top[0] in SYSTEM_DIRS:
            raise PlaybookError(f"{src}: {where}.workdir: not under /{top[0]} (a system directory), got {_describe(w)}")


def _check_bounds(pb: Playbook) -> None:
    """Values that parse but cannot be meant: each with its sane range."""
    src, w = pb.source, pb.watch
    if w.gpus_expected is not None and not (1 <= w.gpus_expected <= MAX_GPUS):
        raise PlaybookError(f"{src}: watch.gpus_expected: expected 1..{MAX_GPUS}, got {w.gpus_expected}")
    if w.baseline_tok_per_s is not None and not (1e-3 <= w.baseline_tok_per_s <= 1e12):
        raise PlaybookError(f"{src}: watch.baseline_tok_per_s: expected a positive number from 0.001 to 1e12, "
                            f"got {w.baseline_tok_per_s:g}")
    for name, value in (("warmup_s", w.warmup_s), ("stale_log_s", w.stale_log_s), ("hang_min_s", w.hang_min_s),
                        ("gpu_idle_s", w.gpu_idle_s)):
        if value > MAX_DURATION_S:
            raise PlaybookError(f"{src}: watch.{name}: expected at most {MAX_DURATION_S:g} seconds (7 days), got {value:g}")
    for milestone, value in w.startup_deadlines_s.items():
        if not (0 < value <= MAX_DURATION_S):
            raise PlaybookError(f"{src}: watch.startup_deadlines_s.{milestone}: expected 0 < seconds <= "
                                f"{MAX_DURATION_S:g} (7 days), got {value:g}")
    if not (1 <= w.hang_factor <= 1000):
        raise PlaybookError(f"{src}: watch.hang_factor: expected 1..1000, got {w.hang_factor:g}")
    if w.regression_windows > 10_000 or not (0 <= w.warmup_steps <= 1_000_000):
        bad = ("regression_windows", w.regression_windows) if w.regression_windows > 10_000 else ("warmup_steps", w.warmup_steps)
        raise PlaybookError(f"{src}: watch.{bad[0]}: out of range (regression_windows 1..10000, warmup_steps "
                            f"0..1000000), got {bad[1]}")


def _check_required(cls: type, table: dict[str, Any], prefix: str, src: str) -> None:
    """Keys marked required (doc(required=True)) that the playbook does not write. Checked
    last, so a playbook with a wrong value is told about the value first."""
    if cls is Playbook and "nodes" in table:
        for i, node in enumerate(table["nodes"]):
            _check_required(NodeConfig, node, f"nodes[{i}]", src)
        table = {**table, "target": {"kind": "local"}}    # a job's targets are its nodes
    for f in dataclasses.fields(cls):
        where = f"{prefix}.{f.name}" if prefix else f.name
        if f.metadata.get("required") and f.name not in table:
            raise PlaybookError(f"{src}: {where}: required: {f.metadata['required']} (an empty or truncated "
                                f"playbook never launches on this machine by default)")
        sub = typing.get_type_hints(cls)[f.name]
        if isinstance(sub, type) and dataclasses.is_dataclass(sub) and isinstance(table.get(f.name), dict):
            _check_required(sub, table[f.name], where, src)


def parse_playbook(text: str | bytes, source: str = "<memory>", *, require_target: bool = True) -> Playbook:
    """Parse and validate playbook text; raises PlaybookError with `source: key: problem`.
    `require_target=False` only for readers that never reach the target (watch --playbook
    picks a run by its name): there a playbook without [target] is fine."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PlaybookError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlaybookError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib parses nested arrays/tables recursively: thousands of levels overflow it
        raise PlaybookError(f"{source}: not valid TOML: arrays or tables nested too deeply") from None
    if "nodes" in data and "target" in data:
        raise PlaybookError(f"{source}: nodes: a playbook has either [target] or [[nodes]], not both")
    pb = _build(Playbook, data, "", source)
    pb = dataclasses.replace(pb, source=source, nodes=tuple(
        dataclasses.replace(n, addr=f"127.0.0.{i + 1}") if n.kind == "local" and n.addr is None else n
        for i, n in enumerate(pb.nodes)))
    _check(pb)
    if require_target:
        _check_required(Playbook, data, "", source)
    return pb


def load_playbook(path: str | Path, *, require_target: bool = True) -> Playbook:
    """Read a playbook file. Missing or unreadable file -> PlaybookError (exit 2)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise PlaybookError(f"{p}: no such playbook file") from None
    except IsADirectoryError:
        raise PlaybookError(f"{p}: is a directory, expected a .toml playbook") from None
    except OSError as exc:
        raise PlaybookError(f"{p}: cannot read: {exc.strerror}") from None
    return parse_playbook(raw, str(path), require_target=require_target)


def _type_name(tp: Any) -> str:
    """A TOML-facing name for a field's type (for the README reference table)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _type_name(inner[0]) + " (optional)"
    if origin is Literal:
        return " / ".join(f'"{a}"' for a in args)
    if origin is tuple:
        return "list of " + _type_name(args[0]) + "s"
    if origin is dict:
        return "table of " + _type_name(args[1]) + "s"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, str(tp))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return f"{value:g}" if isinstance(value, float) else str(value)


def reference_markdown() -> str:
    """The playbook reference (README) generated from the field docs."""
    out = []
    for sec in dataclasses.fields(Playbook):
        if sec.name == "source":
            continue
        cls = typing.get_type_hints(Playbook)[sec.name]
        shown_fields = list(dataclasses.fields(cls)) if typing.get_origin(cls) is not tuple else None
        if shown_fields is None:            # [[nodes]]: an array of tables; only what a node adds to a target
            cls = typing.get_args(cls)[0]
            inherited = {f.name for f in dataclasses.fields(TargetConfig)}
            shown_fields = [f for f in dataclasses.fields(cls) if f.name not in inherited]
            out.append(f"### [[{sec.name}]] — {sec.metadata['doc']}\n")
        else:
            out.append(f"### [{sec.name}] — {sec.metadata['doc']}\n")
        out.append("| key | type | default | meaning |\n|---|---|---|---|")
        nested = []
        for f in shown_fields:
            sub = typing.get_type_hints(cls)[f.name]
            if isinstance(sub, type) and dataclasses.is_dataclass(sub):
                nested.append((f, sub))
                out.append(f"| `{f.name}` | table | — | {f.metadata.get('doc', '')} |")
                continue
            out.append(_reference_row(cls, f))
        out.append("")
        if nested:
            names = ", ".join(f"[{sec.name}.{f.name}]" for f, _ in nested)
            sub = nested[0][1]
            out.append(f"#### {names} — {(sub.__doc__ or '').strip()}\n")
            out.append("| key | type | default | meaning |\n|---|---|---|---|")
            out += [_reference_row(sub, f) for f in dataclasses.fields(sub)]
            out.append("")
    return "\n".join(out)


def _reference_row(cls: type, f: dataclasses.Field) -> str:
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else "")
    tp = _type_name(typing.get_type_hints(cls)[f.name])
    shown = "required" if f.metadata.get("required") else ("—" if default is None else f"`{_toml_value(default)}`")
    return f"| `{f.name}` | {tp} | {shown} | {f.metadata.get('doc', '')} |"
