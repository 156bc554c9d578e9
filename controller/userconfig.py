"""The user's own defaults: ~/.config/dfctl/config.toml (or $DFCTL_CONFIG).

    playbook = "playbooks/proxmox-ct200.toml"   # deploy / doctor PLAYBOOK when none is given
    notify = "notify-send dfctl"                # watch --notify when none is given

    [notify]                                    # or, instead of the line above, a table:
    command = "notify-send dfctl"               #   the same command
    slack_webhook = "$DFCTL_SLACK_WEBHOOK"      #   webhooks (a URL, or $NAME: read from the environment)
    min_severity = "warning"                    #   playbook.py NotifyConfig: every key

    [hosts]                                     # target.host aliases (before ~/.ssh/config)
    pve = "root@10.1.2.6:22"

What wins: the command line, then the DFCTL_* environment variable (DFCTL_PLAYBOOK,
DFCTL_NOTIFY, DFCTL_INTERVAL; each --help names its variable), then this file, then the
built-in default -- Click's order for envvar and default_map, which is how it is applied
(cli/conventions.py). A file that does not parse, or a key of the wrong type, is bad input
naming the file and the key; an unknown key too (a typo must not be silently ignored).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from controller.errors import BadInputError
from controller.playbook import NotifyConfig, parse_notify_table


@dataclass(frozen=True)
class UserConfig:
    path: Path | None = None
    playbook: str | None = None
    notify: str | None = None            # the command (`notify = "..."`, or [notify].command)
    notify_setup: NotifyConfig = field(default_factory=NotifyConfig)
    """The whole [notify] table (webhooks, filters, rate limit); `notify = "CMD"` is its command alone."""
    hosts: dict[str, str] = field(default_factory=dict)


def config_path() -> Path:
    if os.environ.get("DFCTL_CONFIG"):
        return Path(os.environ["DFCTL_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dfctl" / "config.toml"


def load_user_config(path: Path | None = None) -> UserConfig:
    """The file's defaults; an absent file is an empty config."""
    p = path or config_path()
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        if os.environ.get("DFCTL_CONFIG") and path is None:
            raise BadInputError(f"DFCTL_CONFIG={p}: no such file") from None
        return UserConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{p}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{p}: not valid TOML: {exc}") from None
    unknown = sorted(set(raw) - {"playbook", "notify", "hosts"})
    if unknown:
        raise BadInputError(f"{p}: unknown key {unknown[0]!r} (known: playbook, notify, hosts)")
    if "playbook" in raw and not isinstance(raw["playbook"], str):
        raise BadInputError(f"{p}: playbook: expected a string, got {type(raw['playbook']).__name__}")
    notify = raw.get("notify")
    if isinstance(notify, dict):
        setup = parse_notify_table(notify, str(p))
    elif notify is None or isinstance(notify, str):
        setup = NotifyConfig(command=notify)
    else:
        raise BadInputError(f"{p}: notify: expected a string (a command) or a [notify] table, "
                            f"got {type(notify).__name__}")
    hosts = raw.get("hosts", {})
    if not isinstance(hosts, dict) or not all(isinstance(v, str) and v for v in hosts.values()):
        raise BadInputError(f"{p}: hosts: expected a table of alias = \"user@host[:port]\" strings")
    return UserConfig(path=p, playbook=raw.get("playbook"), notify=setup.command, notify_setup=setup,
                      hosts=dict(hosts))


def default_map(cfg: UserConfig) -> dict[str, dict[str, str]]:
    """Click's default_map for the commands the file gives defaults to."""
    out: dict[str, dict[str, str]] = {}
    if cfg.playbook:
        out["deploy"] = {"playbook": cfg.playbook}
        out["doctor"] = {"playbook": cfg.playbook}
    if cfg.notify:
        out["watch"] = {"notify": cfg.notify}
    return out


def host_alias(host: str) -> str:
    """`target.host` through the file's [hosts] aliases (unchanged when it has none)."""
    try:
        return load_user_config().hosts.get(host, host)
    except BadInputError:
        return host   # the command's own start-up already reported a broken file
