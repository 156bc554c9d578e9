"""The short version of bench/load.py (64 runs on 8 hosts for 10 minutes): 16 live runs on
4 rig hosts watched for ~20 s at a 1 s interval. Every tick is complete (every host
answered within the tick, every run `running`) and the controller's open fds do not grow
after warm-up."""

from __future__ import annotations

import pytest

from bench.load import LoadStats, run_load

pytestmark = pytest.mark.rig

FD_SWING = 3
"""fds the pytest worker's own residue may open or close during the 20 s (see below)."""


def test_16_runs_on_4_hosts_every_tick_complete_no_fd_growth(rig, tmp_path):
    stats = run_load(rig, hosts=4, runs_per_host=4, duration_s=20, interval_s=1.0,
                     registry=tmp_path / "registry.sqlite")
    s = stats.summary()
    assert s["runs"] == 16 and s["ticks"] >= 20, s
    assert s["incomplete_ticks"] == 0, stats.incomplete_why
    # A per-tick leak (one fd a tick, in any of 16 runs) climbs >= 13 between the thirds; a
    # swing of a few fds either way is what earlier tests left in this xdist worker doing
    # (closing their pipes: -3 seen in a fresh clone's CI; alone over 60 s the count is flat).
    # Slow leaks are the 10-minute bench/load.py's to find (BENCHMARKS.md).
    assert s["fd_growth"] <= FD_SWING, (s, stats.fds)
    # a leak of one fd every few ticks is growth; a dip and return is not
    assert LoadStats.fd_growth([40] * 5 + [41 + i for i in range(15)]) > FD_SWING   # one fd a tick
    assert LoadStats.fd_growth([47, 47, 44, 44, 47, 47, 47, 50, 47, 47, 47, 47, 47, 47, 47]) == 0
    assert s["log_kib_read"] > 0
