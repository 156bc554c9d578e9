"""Parsers for /proc/<pid>/stat lines the probe ships raw, and the process-tree totals.

Why /proc and not `kill -0`: the test machines reap orphaned zombies only after ~2 s
(FIELD-NOTES), so a dead trainer still "exists"; the stat state letter says Z. CPU% needs
two readings: the tree's cumulative utime+stime ticks are compared with the previous
tick's against the host's uptime clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.records import ProcessStatus
from controller.remote.proc_stat import NUM_THREADS, PGRP, PPID, RSS, SESSION, STATE, STIME, UTIME, split_stat


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
    """One stat line -> ProcStat; None for missing or malformed text (process gone). Split
    where the kit splits it (controller/remote/proc_stat.py: at the last ')')."""
    parts = split_stat(text)
    if parts is None:
        return None
    pid, comm, f = parts
    try:
        return ProcStat(pid=pid, comm=comm, state=f[STATE], ppid=int(f[PPID]), pgrp=int(f[PGRP]),
                        session=int(f[SESSION]), cpu_ticks=int(f[UTIME]) + int(f[STIME]),
                        threads=int(f[NUM_THREADS]), rss_pages=int(f[RSS]))
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
