"""The recovery decision: given a run's state and its playbook's [recover] policy, what to
do now -- nothing (yet), resume it as a new run, stop it, or give up.

Pure: no clock, no I/O, no registry. Everything it needs comes in (the state the watch
built, the policy, how many resumes its chain has had, the time, the successor if one was
already launched), so every rule below is a unit test, and the watch, a test and a
second controller all reach the same answer from the same facts. What to do with the
answer is controller/act/executor.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from controller.playbook import MAX_DURATION_S, RecoverConfig
from controller.records import Finding, RunState

ActionKind = Literal["none", "resume", "stop", "give_up"]


@dataclass(frozen=True)
class Action:
    """What decide() says. `reason` is one line a person reads (printed and recorded)."""

    kind: ActionKind
    reason: str
    finding: Finding | None = None       # the finding acted on (or waited on)
    changes: dict[str, str] = field(default_factory=dict)   # resume: args changes ([recover.KIND].args)
    after_stacks: bool = False           # stop/resume of a hang: only once its stack dump is saved
    target: str | None = None            # resume elsewhere: a playbook of recover.targets; None = its own target
    due_s: float | None = None           # none while waiting: when the window / back-off ends


def none(reason: str, finding: Finding | None = None, due_s: float | None = None) -> Action:
    return Action("none", reason, finding, due_s=due_s)


ACTS_AT_ANY_SEVERITY = ("unreachable",)
"""Kinds acted on whatever their severity (unreachable is a warning: the run may live on).
The others only when critical: a recovered CUDA OOM or a SIGTERM stop is a warning."""


PRIORITY = ("oom", "crash", "hang", "unreachable")
"""Which finding is acted on when several hold: the most specific first (an OOM, whose
resume carries changes, before the crash it may also read as; a death before a silence)."""


def actionable(state: RunState, policy: RecoverConfig) -> list[Finding]:
    """The run's live findings the policy acts on, in PRIORITY order, oldest first."""
    found = [f for f in state.findings if f.cleared_s is None and f.kind in policy.on
             and (f.severity == "critical" or f.kind in ACTS_AT_ANY_SEVERITY)]
    return sorted(found, key=lambda f: (PRIORITY.index(f.kind), f.first_seen_s or 0.0))


def wait_s(policy: RecoverConfig, kind: str, attempts_so_far: int) -> float:
    """How long after a finding was first seen the next action on it may come: the kind's
    window, and for the n-th resume (attempts_so_far = n - 1) backoff_s x 2^(n-1); the
    longer of the two, at most MAX_DURATION_S."""
    backoff = policy.backoff_s * (2.0 ** min(attempts_so_far, 40)) if policy.backoff_s else 0.0
    return min(MAX_DURATION_S, max(policy.window_for(kind), backoff))


def decide(state: RunState, policy: RecoverConfig, attempts_so_far: int, now_s: float, *,
           successor: str | None = None) -> Action:
    """The action for this run now. `attempts_so_far`: resumes before this run in its chain
    (its `attempt`); `successor`: a run already launched to continue this one."""
    if not policy.on:
        return none("no [recover] policy (recover.on is empty)")
    if successor is not None:
        return none(f"already resumed as {successor}")
    if state.state == "stopped" or state.process.stopped_by:
        by = state.process.stopped_by or "an operator"
        return none(f"stopped by {by}: an operator's stop is never acted on")
    if state.state == "finished":
        return none("finished")
    found = actionable(state, policy)
    if not found:
        return none("nothing to act on")
    f = found[0]
    first = f.first_seen_s if f.first_seen_s is not None else now_s
    due = first + wait_s(policy, f.kind, attempts_so_far)
    if now_s < due:
        return none(f"{f.kind} seen {now_s - first:.0f} s ago; acting at {due - first:.0f} s "
                    f"(window / back-off)", f, due)
    cfg = policy.for_kind(f.kind)
    hang = f.kind == "hang"
    if cfg.action == "stop":
        return Action("stop", f"{f.kind}: {f.summary}: stop" + (" after its stack dump" if hang else ""),
                      f, after_stacks=hang)
    if attempts_so_far >= policy.max_attempts:
        return Action("give_up", f"{f.kind}: {f.summary}: {attempts_so_far} resume(s) in this chain already "
                                 f"(recover.max_attempts = {policy.max_attempts})", f)
    target = policy.targets[min(attempts_so_far, len(policy.targets) - 1)] if policy.targets else None
    changes = dict(cfg.args)
    what = "resume" + (f" with {', '.join(f'{k} {v}' for k, v in changes.items())}" if changes else "") + \
        (f" on {target}" if target else "")
    return Action("resume", f"{f.kind}: {f.summary}: {what} (attempt {attempts_so_far + 1} of "
                            f"{policy.max_attempts})", f, changes=changes, after_stacks=hang, target=target)
