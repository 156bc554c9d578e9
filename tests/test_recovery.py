"""controller.act.recovery.decide: every rule of the recovery decision, as a table and as
properties over generated states (hypothesis; the CI profile is derandomized)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.act.recovery import decide, wait_s
from controller.playbook import RECOVER_KINDS, RecoverConfig, RecoverKindConfig, parse_playbook
from controller.records import Finding, ProcessState, RunState

T0 = 1_000_000.0


def finding(kind: str, severity: str = "critical", seen: float = T0, summary: str | None = None,
            cleared: float | None = None) -> Finding:
    return Finding(kind=kind, severity=severity, summary=summary or f"{kind} happened", first_seen_s=seen,
                   run_id="r", cleared_s=cleared)


def state(*found: Finding, run_state: str = "failed", stopped_by: str | None = None) -> RunState:
    return RunState(run_id="r", state=run_state, findings=list(found),   # type: ignore[arg-type]
                    process=ProcessState(state="exited", stopped_by=stopped_by))


def policy(**kw) -> RecoverConfig:
    kw.setdefault("on", RECOVER_KINDS)
    kw.setdefault("backoff_s", 0.0)
    return RecoverConfig(**kw)


def test_no_policy_never_acts():
    a = decide(state(finding("crash")), RecoverConfig(), 0, T0 + 1e6)
    assert a.kind == "none" and "recover.on is empty" in a.reason


def test_crash_resumes_with_the_same_args():
    a = decide(state(finding("crash")), policy(), 0, T0)
    assert a.kind == "resume" and a.changes == {} and a.target is None and not a.after_stacks
    assert a.finding is not None and a.finding.kind == "crash"
    assert "attempt 1 of 3" in a.reason


def test_oom_resume_carries_the_declared_change_and_wins_over_a_crash():
    p = policy(oom=RecoverKindConfig(args={"--token-budget": "half"}))
    a = decide(state(finding("crash", seen=T0 - 5), finding("oom")), p, 0, T0)
    assert a.kind == "resume" and a.finding.kind == "oom" and a.changes == {"--token-budget": "half"}
    assert "--token-budget half" in a.reason


def test_operators_stop_is_never_acted_on():
    for s in (state(finding("crash"), run_state="stopped"), state(finding("crash"), run_state="running",
                                                                  stopped_by="dfctl stop")):
        a = decide(s, policy(), 0, T0 + 1e6)
        assert a.kind == "none" and "never acted on" in a.reason


@pytest.mark.parametrize("kind,severity,acts", [
    ("crash", "critical", True), ("crash", "warning", False),       # SIGTERM from elsewhere: a warning
    ("oom", "warning", False),                                       # recovered: the trainer skipped it
    ("hang", "critical", True), ("unreachable", "warning", True),   # unreachable acts at any severity
    ("stale_log", "critical", False), ("nan", "critical", False),   # kinds no policy may name
])
def test_which_findings_count(kind, severity, acts):
    a = decide(state(finding(kind, severity)), policy(), 0, T0)
    assert (a.kind != "none") is acts


def test_only_listed_kinds_and_live_findings_count():
    assert decide(state(finding("oom")), policy(on=("crash",)), 0, T0).kind == "none"
    assert decide(state(finding("crash", cleared=T0)), policy(), 0, T0).kind == "none"
    assert decide(state(finding("crash"), run_state="finished"), policy(), 0, T0).kind == "none"


def test_link_down_waits_for_the_window():
    p = policy(unreachable=RecoverKindConfig(window_s=600))
    f = finding("unreachable", "warning")
    before = decide(state(f, run_state="unreachable"), p, 0, T0 + 599.9)
    assert before.kind == "none" and before.due_s == T0 + 600 and before.finding == f
    assert decide(state(f, run_state="unreachable"), p, 0, T0 + 600).kind == "resume"


def test_backoff_doubles_along_the_chain():
    p = policy(backoff_s=10.0)
    assert [wait_s(p, "crash", n) for n in range(4)] == [10, 20, 40, 80]
    assert decide(state(finding("crash")), p, 2, T0 + 39).kind == "none"
    assert decide(state(finding("crash")), p, 2, T0 + 40).kind == "resume"
    assert wait_s(policy(backoff_s=1.0), "crash", 10_000) == 7 * 86400   # capped, no overflow


def test_max_attempts_gives_up_with_a_reason():
    a = decide(state(finding("crash")), policy(max_attempts=2), 2, T0)
    assert a.kind == "give_up" and "recover.max_attempts = 2" in a.reason


def test_hang_stop_and_resume_wait_for_stacks():
    stop = decide(state(finding("hang"), run_state="running"), policy(hang=RecoverKindConfig(action="stop")), 0, T0)
    assert stop.kind == "stop" and stop.after_stacks
    resume = decide(state(finding("hang"), run_state="running"), policy(), 0, T0)
    assert resume.kind == "resume" and resume.after_stacks
    crash_stop = decide(state(finding("crash")), policy(crash=RecoverKindConfig(action="stop")), 0, T0)
    assert crash_stop.kind == "stop" and not crash_stop.after_stacks


def test_targets_next_of_the_list_and_the_last_keeps_the_rest():
    p = policy(targets=("a.toml", "b.toml"), max_attempts=5)
    assert [decide(state(finding("crash")), p, n, T0).target for n in range(4)] == \
        ["a.toml", "b.toml", "b.toml", "b.toml"]


def test_a_resumed_run_is_not_resumed_twice():
    a = decide(state(finding("crash")), policy(), 0, T0, successor="r-2")
    assert a.kind == "none" and "r-2" in a.reason


def test_the_playbooks_policy_is_what_decide_reads():
    pb = parse_playbook('[target]\nkind = "local"\n[run]\nargs = ["--token-budget", "8"]\n[recover]\n'
                        'on = ["oom"]\nbackoff_s = 0\n[recover.oom]\nargs = { "--token-budget" = "half" }\n')
    assert decide(state(finding("oom")), pb.recover, 0, T0).changes == {"--token-budget": "half"}


# -- properties ------------------------------------------------------------------------
kinds = st.sampled_from(RECOVER_KINDS + ("stale_log", "nan", "regression"))
findings = st.builds(finding, kinds, st.sampled_from(("info", "warning", "critical")),
                     st.floats(T0 - 1000, T0), st.none(), st.one_of(st.none(), st.just(T0)))
policies = st.builds(RecoverConfig, on=st.lists(st.sampled_from(RECOVER_KINDS), unique=True).map(tuple),
                     max_attempts=st.integers(0, 5), backoff_s=st.floats(0, 100), window_s=st.floats(0, 1000),
                     targets=st.lists(st.sampled_from(("a.toml", "b.toml")), max_size=2).map(tuple),
                     hang=st.builds(RecoverKindConfig, action=st.sampled_from(("resume", "stop"))))
run_states = st.sampled_from(("running", "failed", "finished", "stopped", "unreachable", "unknown"))


@given(st.lists(findings, max_size=5), policies, st.integers(0, 8), st.floats(T0 - 10, T0 + 5000), run_states,
       st.sampled_from((None, "dfctl stop", "dfctl deploy --replace")))
def test_properties_of_every_decision(found, p, attempts, now, run_state, stopped_by):
    s = state(*found, run_state=run_state, stopped_by=stopped_by)
    a = decide(s, p, attempts, now)
    assert a == decide(s, p, attempts, now)                         # a function of its inputs
    assert a.reason
    if a.kind == "none":
        return
    f = a.finding
    assert f is not None and f.kind in p.on and f.cleared_s is None and f in found
    assert run_state not in ("stopped", "finished") and stopped_by is None
    assert now >= f.first_seen_s + p.window_for(f.kind)           # never inside the window
    if a.kind == "resume":
        assert attempts < p.max_attempts
        assert now >= f.first_seen_s + min(7 * 86400, p.backoff_s * 2 ** attempts)
        assert a.after_stacks == (f.kind == "hang")
        assert (a.target is None) == (not p.targets)
    if a.kind == "give_up":
        assert attempts >= p.max_attempts
    if a.kind == "stop":
        assert p.for_kind(f.kind).action == "stop"
    # the same run, stopped by an operator, is never acted on
    stopped = dataclasses.replace(s, state="stopped")
    assert decide(stopped, p, attempts, now).kind == "none"
