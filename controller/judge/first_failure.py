"""A job's first failure as the one finding the operator reads: which rank, on which node, when,
and what the other ranks did next. Pure: the FirstFailure (controller/judge/ranks.py) plus the
node labels and clocks the watch knows, in; a Finding, out -- so the watch and the dashboard's
demo write the same finding."""
from __future__ import annotations

import time

from controller.judge.ranks import FirstFailure, NodeClock
from controller.records import Finding

CONSEQUENCE_LINES = 6      # consequence lines in a finding's evidence (the rest counted)


def rank_label(rank: int | None, local_rank: int | None) -> str:
    if rank is not None:
        return f"rank {rank}"
    return f"local rank {local_rank}" if local_rank is not None else "a rank"


def failure_finding(ff: FirstFailure, labels: dict[int, str], clocks: dict[int, NodeClock], job_id: str,
                    now: float, *, restarts: int = 0) -> Finding:
    """'rank 3 (node 1: pct 200 on pve2, local rank 1) killed by SIGKILL at 18:34:23; 3 ranks
    then lost their peer' -- with the times, the clocks and every consequence as evidence."""
    where = labels.get(ff.node, f"node {ff.node}")
    local = f", local rank {ff.local_rank}" if ff.local_rank is not None and ff.rank is not None else ""
    at = time.strftime("%H:%M:%S", time.localtime(ff.time_s))
    summary = f"{rank_label(ff.rank, ff.local_rank)} (node {ff.node}: {where}{local}) {ff.what} at {at}"
    tail = consequence_phrase(ff)
    if tail:
        summary += "; " + tail
    clock = clocks.get(ff.node)
    skew = (f"node {ff.node} clock {clock.offset_s:+.3f} s vs the controller's, known to "
            f"±{clock.uncertainty_s:.3f} s (half the probe's round trip)") if clock else "node clock not measured"
    source = {"line": "the line's own timestamp", "elastic": "torchrun's error summary `time :` (whole seconds)",
              "seen": "when the watch first saw the line"}.get(ff.time_source, ff.time_source)
    evidence = [f"first: {ff.text}" + (f" (node {ff.node} log line {ff.line})" if ff.line else ""),
                f"time: {time.strftime('%H:%M:%S', time.localtime(ff.time_s))}.{int(ff.time_s % 1 * 1000):03d} "
                f"on the controller's clock ±{ff.uncertainty_s:.3f} s, from {source}; {skew}"]
    for c in ff.consequences[:CONSEQUENCE_LINES]:
        own = " (a failure of its own)" if c.own_failure else ""
        evidence.append(f"then {rank_label(c.rank, c.local_rank)} on node {c.node}: {c.what}{own}"
                        + (f" (line {c.line})" if c.line else ""))
    if len(ff.consequences) > CONSEQUENCE_LINES:
        evidence.append(f"... and {len(ff.consequences) - CONSEQUENCE_LINES} more ranks")
    if ff.agents_failed:
        evidence.append("torchrun raised ChildFailedError on node(s) " + ", ".join(map(str, ff.agents_failed)))
    if restarts:
        evidence.append(f"after {restarts} torchrun restart event(s) (max_restarts): this is the last attempt")
    kind = "oom" if ff.kind == "oom" else ("hang" if not ff.own_failure else "crash")
    return Finding(kind=kind, severity="critical", summary=summary, evidence=tuple(evidence)[:12],
                   hint=f"read that node's log first: dfctl logs {job_id} --node {ff.node}",
                   first_seen_s=now, run_id=job_id)


def consequence_phrase(ff: FirstFailure) -> str:
    """'3 ranks then lost their peer (connection reset by peer)' / '15 ranks then timed out in ALLREDUCE'."""
    by_what: dict[str, int] = {}
    for c in ff.consequences:
        if c.own_failure:
            continue
        by_what[c.kind if c.kind in ("peer_lost", "sigterm") else c.what] = \
            by_what.get(c.kind if c.kind in ("peer_lost", "sigterm") else c.what, 0) + 1
    words = {"peer_lost": ("lost its peer", "lost their peers"),
             "sigterm": ("was stopped by its agent (SIGTERM)", "were stopped by their agent (SIGTERM)")}
    parts = [f"{n} rank{'s' if n != 1 else ''} then {words[w][n != 1] if w in words else w}"
             for w, n in sorted(by_what.items(), key=lambda x: -x[1])]
    own = sum(1 for c in ff.consequences if c.own_failure)
    if own:
        parts.append(f"{own} more failed on their own later")
    return ", ".join(parts)
