"""The conventions every dfctl command shares, applied once to the whole Click tree.

Why one place: the commands live in several modules (owned by their areas), yet `-h`,
plain metavars (`PLAYBOOK`, `RUN`, flags without `<bool>`), an Examples block and the exit
codes at the end of each `--help` are one promise to the user. `apply(group)` walks the
built Click command tree and sets them; the command modules stay wiring only.
"""

from __future__ import annotations

from typing import Any

EXIT_CODES = ("Exit codes: 0 ok/healthy · 1 unexpected error · 2 bad input or usage · 3 cannot reach "
              "host/container · 4 a failure found (OOM, crash, hang) · 5 throughput regression · "
              "130 interrupted (Ctrl-C, SIGTERM, SIGHUP).")

DASHBOARD_KEYS = ("Dashboard keys (on a terminal): q or Esc quit · ↓ / j / Tab / n next run · ↑ / k / p "
                  "previous run · Ctrl-C quit (exit 130).")

EXAMPLES: dict[str, tuple[str, ...]] = {
    "deploy": ("dfctl deploy playbooks/local.toml --follow",
               "dfctl deploy playbooks/proxmox-ct200.toml --name train_v2 --replace",
               "dfctl deploy playbooks/proxmox-ct200.toml --dry-run"),
    "runs": ("dfctl runs", "dfctl runs -w", "dfctl runs --json"),
    "logs": ("dfctl logs train_v2 --tail 100", "dfctl logs train_v2 -f"),
    "stop": ("dfctl stop train_v2", "dfctl stop train_v2 --grace-s 120 --json"),
    "doctor": ("dfctl doctor playbooks/proxmox-ct200.toml",),
    "prune": ("dfctl prune playbooks/proxmox-ct200.toml --keep 3 --dry-run",
              "dfctl prune playbooks/proxmox-ct200.toml --keep 1"),
    "watch": ("dfctl watch train_v2", "dfctl watch --playbook playbooks/local.toml --interval 1",
              "dfctl watch train_v2 --json | jq .state", "dfctl watch train_v2 --notify 'notify-send dfctl'",
              "dfctl watch train_v2 --metrics-port 9464"),
    "export-metrics": ("dfctl export-metrics --metrics-port 9464",
                       "dfctl export-metrics --metrics-port 9464 --metrics-addr 0.0.0.0 --interval 5"),
    "check-log": ("dfctl check-log runs/train_v2/train.log --baseline-tok-s 21500",),
    "compare-runs": ("dfctl compare-runs train_v1 train_v2 --baseline-tok-s 21500",
                     "dfctl compare-runs runs/a/ runs/b/train.log --plot cmp.svg --plot-x step"),
    "import": ("dfctl import runs/train_eager_restored/ --name train_eager_restored",
               "dfctl import ops/dflash/abc123xy"),
    "version": ("dfctl version", "dfctl --version"),
}

ARGUMENT_METAVARS = {"runs": "RUN", "run": "RUN", "playbook": "PLAYBOOK", "path": "PATH", "source": "SOURCE"}
"""A positional argument's name in usage and help (Typer would print `{playbook}`, `[runs]...`)."""


def epilog(name: str) -> str:
    """The Examples block and the exit codes (the watch also lists its dashboard keys)."""
    lines = ["\b", "Examples:", *(f"  $ {e}" for e in EXAMPLES.get(name, ()))]
    text = "\n".join(lines) + "\n\n" + EXIT_CODES
    if name == "watch":
        text += "\n\n" + DASHBOARD_KEYS
    return text


def _plain_metavars(cmd: Any) -> None:
    for param in cmd.params:
        if param.param_type_name == "argument":
            name = (param.metavar or ARGUMENT_METAVARS.get(param.name, param.name.upper())).rstrip(".")
            many = "..." if param.nargs != 1 else ""
            usage = f"{name}{many}" if param.required else f"[{name}]{many}"
            param.metavar = name + many
            # Typer prints `{PLAYBOOK}` and `PLAYBOOK <path>`: the plain form instead (these
            # two are Typer's per-parameter display hooks; unknown to an older Typer: harmless)
            param._usage_display_name = lambda usage=usage: usage
            param.display_type_rich = lambda ctx=None: None
        elif getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""                       # a flag takes no value: no `<bool>`
        elif param.metavar is None:
            param.metavar = param.name.upper()       # `--interval INTERVAL`, not `<float range>`


ENV_VARS = {("deploy", "playbook"): "DFCTL_PLAYBOOK", ("doctor", "playbook"): "DFCTL_PLAYBOOK",
            ("prune", "playbook"): "DFCTL_PLAYBOOK",
            ("watch", "notify"): "DFCTL_NOTIFY", ("watch", "interval"): "DFCTL_INTERVAL"}
"""(command, parameter) -> the environment variable that sets it (userconfig.py: the order)."""


def apply(group: Any) -> Any:
    """Set the shared conventions on `group` (the root Click group) and every command."""
    group.epilog = EXIT_CODES
    _plain_metavars(group)
    for name, cmd in group.commands.items():
        if not cmd.epilog:
            cmd.epilog = epilog(name)
        _plain_metavars(cmd)
        for param in cmd.params:
            var = ENV_VARS.get((name, param.name))
            if var:
                param.envvar, param.show_envvar = var, True
    return group
