"""A job's block: one line for the job (state, aggregate tok/s, step, restarts, verdict),
a row per node (GPUs, process, step, its own worst finding, last log line), the first
failure with its consequences, and torchrun's restarts as events."""

from __future__ import annotations

import time

from rich.text import Text

from controller.records import JobNode, JobState
from controller.view.findings import worst
from controller.view.format import NA, SEVERITY_LABEL, SEVERITY_STYLE, STATE_STYLE, si
from controller.view.logtail import clean_line


def job_headline(job: JobState, width: int) -> Text:
    """`job train-2n failed FAILED (exit 4)  2 nodes  42.6K tok/s (job total)  step 800  1 restart(s)`:
    the verdict right after the state, so a narrow terminal still shows it."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("job ", style="bold")
    t.append(f"{job.name or job.job_id} ", style="bold cyan")
    t.append(f"{job.state} ", style=STATE_STYLE.get(job.state, ""))
    verdict = {0: ("healthy", "green"), 4: ("FAILED (exit 4)", "bold red"), 5: ("regression (exit 5)", "yellow")}.get(
        job.exit_code, (f"exit {job.exit_code}", ""))
    t.append(f"{verdict[0]}  ", style=verdict[1])
    t.append(f"{len(job.nodes)} nodes  ")
    t.append(f"{si(job.tok_per_s)} tok/s", style="bold")
    t.append(" (job total)  ", style="dim")
    t.append(f"step {job.step if job.step is not None else '-'}  ", style="dim")
    if job.restarts:
        t.append(f"{len(job.restarts)} restart(s)", style="yellow")
    return t


def node_row(n: JobNode, width: int) -> Text:
    """`node 1 pct 200 on pve2  failed 1  2 GPUs 87%  pid 4242 cpu 180% 3.1G  step 40  CRIT crash …  │ last line`."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"  node {n.node_rank} ", style="bold")
    t.append(f"{n.target[:24]:<24} ")
    code = n.process.exit_code
    label = n.state + (f" {code}" if n.state in ("failed", "stopped") and code is not None else "")
    t.append(f"{label[:11]:<11} ", style=STATE_STYLE.get(n.state, ""))
    utils = [g.util_pct for g in n.gpus if g.util_pct is not None]
    gpus = f"{len(n.gpus)} GPU{'s' if len(n.gpus) != 1 else ''}" + (f" {sum(utils) / len(utils):.0f}%" if utils else "")
    t.append(f"{gpus:<11} " if n.gpus else f"{'no GPUs':<11} ", style="dim")
    p = n.process
    proc = f"pid {p.pid}" if p.pid else "pid ?"
    if p.cpu_pct is not None:
        proc += f" cpu {p.cpu_pct:.0f}%"
    if p.rss_bytes:
        proc += f" {si(p.rss_bytes, 1)}B"
    t.append(f"{proc:<26} ", style="dim")
    t.append(f"step {n.step if n.step is not None else '-':<6} ", style="dim")
    if n.tok_per_s is not None:
        t.append(f"{si(n.tok_per_s)} tok/s ")
    w = worst(n.findings)
    if w is not None:
        sev = SEVERITY_STYLE.get(w.severity, "")
        t.append(f"{SEVERITY_LABEL.get(w.severity, '?')} {w.kind} ", style=sev)
    if n.last_line and width >= 100:
        t.append("│ ", style="bright_black")
        t.append(clean_line(n.last_line)[:200], style="dim")
    return t


def job_lines(job: JobState, width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """The block in at most max_lines: headline, nodes, first failure, restarts."""
    if max_lines <= 0:
        return []
    out = [job_headline(job, width)] + [node_row(n, width) for n in job.nodes]
    final = next((f for f in job.findings if f.kind in ("oom", "crash", "hang")), None)
    ff = job.first_failure
    if final is not None or ff is not None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("  first failure: ", style="bold red")
        if final is not None:
            t.append(final.summary, style="red")
        elif ff is not None:
            rank = f"rank {ff.rank}" if ff.rank is not None else f"local rank {ff.local_rank}"
            t.append(f"{rank} (node {ff.node}) {ff.what} at "
                     f"{time.strftime('%H:%M:%S', time.localtime(ff.time_s))} (so far)", style="red")
        out.append(t)
    for r in job.restarts:
        t = Text(no_wrap=True, overflow="ellipsis")
        when = time.strftime("%H:%M:%S", time.localtime(r.time_s)) if r.time_s else NA
        left = f", {r.attempts_left}/{r.max_restarts} attempts left" if r.attempts_left >= 0 else ""
        t.append(f"  restart: node {r.node_rank} at {when} (torchrun restarted its workers{left})", style="yellow")
        out.append(t)
    return out[:max_lines]


def job_lines_wanted(job: JobState) -> int:
    return 1 + len(job.nodes) + (1 if job.first_failure or job.findings else 0) + len(job.restarts)
