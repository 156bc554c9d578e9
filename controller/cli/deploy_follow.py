"""`dfctl deploy --follow`: after the launch, stream the run's log and its start-up
milestones until the first step (or the end), the way `sky launch`, `dstack apply` and
`ray job submit` wait for a job to come up. A failure on the way ends the follow with that
finding's exit code (4 for a crash or an OOM) and its cause quoted; reaching the goal ends
it with 0 and the command that watches on. Ctrl-C (or SIGTERM, SIGHUP) ends the follow,
never the run: it says so, with the commands that watch or stop it, and exits 130.
Wiring only: the ticks are controller.watch's.
"""

from __future__ import annotations

import json
import sys
import time

from controller.cli import EXIT_INTERRUPTED
from controller.cli.interrupts import interrupts_unwind, raise_if_interrupted
from controller.records import ENDED_STATES, SEVERITY_RANK, Finding, RunState

UNTIL = ("first_step", "end")


def _reached(st: RunState, until: str) -> bool:
    if until == "first_step":
        return "first_step" in st.milestones or bool(st.progress)
    return False


def _stopping_finding(st: RunState) -> Finding | None:
    """The worst critical finding (oom, crash, hang, nan), if any: it ends a follow."""
    worst = sorted((f for f in st.findings if f.severity == "critical"),
                   key=lambda f: -SEVERITY_RANK.get(f.severity, 0))
    return worst[0] if worst else None


def _say(text: str, json_out: bool, **doc) -> None:
    if json_out:
        print(json.dumps({"event": doc.pop("event"), **doc}, ensure_ascii=False), flush=True)
    else:
        print(f"dfctl: {text}", file=sys.stderr, flush=True)


def follow_run(record, store, *, until: str = "first_step", interval_s: float = 0.5, json_out: bool = False,
               timeout_s: float | None = None) -> int:
    """Tick a Watch of `record` until `until`, a critical finding or the run's end; the exit
    code: 0 reached, the verdict's code (4, 5) otherwise. Log lines go to stdout as they come
    (JSON lines {"event": "log", "line": …} with --json), milestones and the outcome to stderr."""
    from controller.watch import Watch

    w = Watch([record], store, interval_s=interval_s)
    t0 = time.monotonic()
    seen_milestones: set[str] = set()
    try:
        with interrupts_unwind():   # SIGTERM/SIGHUP as Ctrl-C; one a `__del__` dropped comes back
            return _follow(w, record, until, interval_s, json_out, timeout_s, t0, seen_milestones)
    except KeyboardInterrupt:
        interrupted(record, w.states[0] if w.states else None, json_out)
        return EXIT_INTERRUPTED
    finally:
        w.close()


def interrupted(record, st: RunState | None, json_out: bool) -> None:
    """An interrupted follow: the run is not ours to end -- where it is, and what to type next."""
    rid = record.run_id
    watch_cmd, stop_cmd = f"dfctl watch {rid}", f"dfctl stop {rid}"
    ended = st is not None and st.state in ENDED_STATES
    where = record.target or "its target"
    text = (f"{rid}: the run had already ended ({st.state}); dfctl watch {rid} shows how" if ended and st else
            f"{rid}: only the follow was interrupted: the run goes on, on {where} "
            f"(pid {record.pid or '?'}, {record.run_dir})")
    _say(text, json_out, event="interrupted", run_id=rid, running=not ended, target=record.target,
         watch=watch_cmd, stop=stop_cmd)
    if not json_out and not ended:
        print(f"dfctl:   watch it: {watch_cmd}", file=sys.stderr, flush=True)
        print(f"dfctl:   stop it:  {stop_cmd}", file=sys.stderr, flush=True)


def _follow(w, record, until: str, interval_s: float, json_out: bool, timeout_s: float | None, t0: float,
            seen_milestones: set[str]) -> int:
    """The follow's tick loop (follow_run's doc), paced by the watch's clock (Watch.ticks)."""
    from controller.judge import verdict_exit_code

    for _ in w.ticks():
        raise_if_interrupted()
        rep = w.tick()
        st = rep.states[0]
        for obs in rep.observations:
            for line in obs.new_lines:
                if json_out:
                    print(json.dumps({"event": "log", "line": line}, ensure_ascii=False), flush=True)
                else:
                    print(line, flush=True)
        for name, at_s in st.milestones.items():
            if name not in seen_milestones:
                seen_milestones.add(name)
                _say(f"{record.run_id}: milestone {name} (+{max(0.0, at_s - (st.started_s or at_s)):.0f} s)",
                     json_out, event="milestone", name=name)
        bad = _stopping_finding(st)
        if bad is not None:
            _say(f"{record.run_id}: {bad.kind}: {bad.summary}", json_out, event="failure", kind=bad.kind,
                 summary=bad.summary, evidence=list(bad.evidence))
            for ev in bad.evidence[:6]:
                if not json_out:
                    print(f"dfctl:   | {ev}", file=sys.stderr, flush=True)
            if bad.hint and not json_out:
                print(f"dfctl:   -> {bad.hint}", file=sys.stderr, flush=True)
            return verdict_exit_code(st.findings) or 4
        if _reached(st, until):
            _say(f"{record.run_id}: first step reached; dfctl watch {record.run_id} follows it on",
                 json_out, event="reached", until=until)
            return 0
        if w.all_done or (st.state in ENDED_STATES and until == "end" and w.all_done):
            code = verdict_exit_code(st.findings)
            _say(f"{record.run_id}: ended {st.state}, exit {st.process.exit_code}", json_out, event="ended",
                 state=st.state, exit_code=st.process.exit_code)
            if until == "first_step" and code == 0:
                return 4 if st.process.exit_code not in (0, None) else 0
            return code
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            _say(f"{record.run_id}: still no {until} after {timeout_s:g} s; it keeps running", json_out,
                 event="timeout", until=until)
            return 0
    return 0                        # (the ticks do not end by themselves)
