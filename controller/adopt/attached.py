"""What the watch says about a run dfctl did not launch (an attached run), from the facts
`dfctl attach` recorded (controller.adopt.attach: the registry's `attachments` row).

Pure: findings and state in, findings out. Two things differ from a launched run:
- there is no exit_code file and no wrapper: the run has ended when its pid + start time
  are gone, and its verdict comes from the log tail (the detectors' crash/OOM text), the
  container cgroup's oom_kill counter and -- where nothing says more -- "exit code unknown";
  never an invented exit code;
- a stale log is explained by what attach saw: stdout a regular file and PYTHONUNBUFFERED
  unset is block-buffering for certain, not a guess, and the fix is `dfctl deploy --replace`
  (which stops the run and launches the playbook's run unbuffered in its place).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from controller.records import Finding, RunState

REPLACE_HINT = ("relaunch it unbuffered: `dfctl deploy PLAYBOOK --replace` stops this run (SIGTERM, grace, SIGKILL) "
                "and starts the playbook's run with PYTHONUNBUFFERED=1 and python -u")


def buffering_facts(attachment: dict[str, Any] | None) -> list[str]:
    """The recorded reasons the log lags: ['stdout is a regular file', 'PYTHONUNBUFFERED unset']."""
    env = (attachment or {}).get("env") or {}
    facts = []
    kind = env.get("stdout_kind")
    if kind == "file":
        facts.append("stdout is a regular file")
    elif kind == "pipe" and env.get("block_buffered"):
        facts.append("stdout is a pipe")
    if env.get("pythonunbuffered") is False:
        facts.append("PYTHONUNBUFFERED unset")
    if env.get("python_u_flag") is False and (kind == "file" or (kind == "pipe" and env.get("block_buffered"))):
        facts.append("no python -u")
    return facts


def _advance_since(state: RunState, since_s: float | None) -> tuple[str, int] | None:
    """(source, steps advanced) of the non-log progress after `since_s`."""
    if since_s is None:
        return None
    later = [s for s in state.progress if s.source != "log" and s.time_s is not None and s.time_s > since_s]
    if not later:
        return None
    by_source: dict[str, list[int]] = {}
    for s in later:
        by_source.setdefault(s.source, []).append(s.step)
    source, steps = max(by_source.items(), key=lambda kv: max(kv[1]) - min(kv[1]))
    before = [s.step for s in state.progress if s.source == source and s.time_s is not None and s.time_s <= since_s]
    first = max(before) if before else min(steps)
    return source, max(steps) - first


def explain_stale_log(finding: Finding, state: RunState, attachment: dict[str, Any] | None, now_s: float) -> Finding:
    """A stale_log of an attached run, with the buffering evidence attach recorded and the fix:
    'stdout is a regular file, PYTHONUNBUFFERED unset, log unchanged 180 s while wandb advanced
    40 steps'. Other findings, and runs without such facts, come back unchanged."""
    if finding.kind != "stale_log" or not attachment:
        return finding
    facts = buffering_facts(attachment)
    if not (attachment.get("env") or {}).get("block_buffered"):
        return finding
    since = state.last_log_growth_s if state.last_log_growth_s is not None else state.started_s
    quiet = f"log unchanged {now_s - since:.0f} s" if since is not None else "log unchanged"
    moved = _advance_since(state, since)
    sentence = ", ".join(facts + [quiet]) + (f" while {moved[0]} advanced {moved[1]} steps" if moved else "")
    return dataclasses.replace(finding, summary=f"log block-buffered: {finding.summary}",
                               evidence=(sentence, *finding.evidence), hint=REPLACE_HINT)


def ended_verdict(run_id: str, findings: Sequence[Finding], log_tail: Sequence[str], oom_kill_before: int | None,
                  oom_kill_after: int | None, now_s: float) -> Finding | None:
    """The closing finding of an attached run whose process is gone, or None when the log
    already said why (a crash or OOM the detectors found)."""
    if any(f.kind in ("crash", "oom") for f in findings):
        return None
    last = [ln for ln in log_tail if ln.strip()][-3:]
    if oom_kill_before is not None and oom_kill_after is not None and oom_kill_after > oom_kill_before:
        return Finding(kind="oom", severity="critical",
                       summary="killed by the OOM killer (exit code unknown: dfctl did not launch it)",
                       evidence=(f"the container cgroup's oom_kill counter went {oom_kill_before} -> {oom_kill_after}",
                                 *last),
                       hint="lower the batch / token budget, or raise the container's memory limit",
                       first_seen_s=now_s, run_id=run_id)
    return Finding(kind="crash", severity="warning",
                   summary="the process ended; exit code unknown (dfctl did not launch it)",
                   evidence=("no error text in the log tail and no OOM kill in the container's cgroup", *last),
                   hint="if it should still run, relaunch it with `dfctl deploy` (which records the exit code)",
                   first_seen_s=now_s, run_id=run_id)
