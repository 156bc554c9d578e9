"""Parsers for /proc/<pid>/stat lines the probe ships raw, and the process-tree totals.

Why /proc and not `kill -0`: the test machines reap orphaned zombies only after ~2 s
(FIELD-NOTES), so a dead trainer still "exists"; the stat state letter says Z. CPU% needs
two readings: the tree's cumulative utime+stime ticks are compared with the previous
tick's against the host's uptime clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.records import ProcessStatus


@dataclass(frozen=True)
class ProcStat:
    """The fields of one /proc/<pid>/stat line that a watch uses."""

    pid: int
    comm: str
    state: str            # R S D Z T X ...
    ppid: int
    pgrp: int
    session: int
    cpu_ticks: int        # utime + stime (clock ticks)
    threads: int
    rss_pages: int


def parse_stat(text: str | None) -> ProcStat | None:
    """One stat line -> ProcStat; None for missing or malformed text (process gone)."""
    if not text:
        return None
    lp, rp = text.find("("), text.rfind(")")
    if lp < 0 or rp < lp:
        return None
    try:
        pid = int(text[:lp].strip())
        f = text[rp + 2:].split()
        # f[0]=state(3) f[1]=ppid f[2]=pgrp f[3]=session ... f[11]=utime(14) f[12]=stime
        # f[17]=num_threads(20) f[21]=rss(24)
        return ProcStat(pid=pid, comm=text[lp + 1:rp], state=f[0], ppid=int(f[1]), pgrp=int(f[2]),
                        session=int(f[3]), cpu_ticks=int(f[11]) + int(f[12]),
                        threads=int(f[17]), rss_pages=int(f[21]))
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class TreeTotals:
    """The run's process tree (its session) summed."""

    processes: int
    cpu_ticks: int
    threads: int
    rss_bytes: int


def tree_totals(stat_texts: list[str], page_size: int) -> TreeTotals | None:
    """Sum live (non-zombie) processes of the tree; None when nothing lives."""
    stats = [s for s in (parse_stat(t) for t in stat_texts) if s is not None]
    live = [s for s in stats if s.state not in ("Z", "X")]
    if not live:
        return None
    return TreeTotals(processes=len(live), cpu_ticks=sum(s.cpu_ticks for s in stats),
                      threads=sum(s.threads for s in live),
                      rss_bytes=sum(s.rss_pages for s in live) * page_size)


def cpu_pct(prev_ticks: int | None, prev_uptime_s: float | None, ticks: int, uptime_s: float,
            clk_tck: int) -> float | None:
    """Average CPU% of the tree between two readings (100 = one core busy)."""
    if prev_ticks is None or prev_uptime_s is None or clk_tck <= 0:
        return None
    dt = uptime_s - prev_uptime_s
    if dt <= 0 or ticks < prev_ticks:
        return None
    return round(100.0 * (ticks - prev_ticks) / clk_tck / dt, 1)


def leader_state(stat_text: str | None) -> ProcessStatus:
    """running | zombie | exited, from the session leader's stat line."""
    st = parse_stat(stat_text)
    if st is None or st.state == "X":
        return "exited"
    if st.state == "Z":
        return "zombie"
    return "running"
