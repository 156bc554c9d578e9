"""The first-failure reader (controller/judge/ranks.py) over logs real torchrun wrote
(tests/corpus/jobs: two "nodes" on this machine, c10d rendezvous, gloo), and as a property:
the order lines arrive in and the nodes' clock skew never change which rank is named
first when the evidence times differ by more than their uncertainty."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.judge.first_failure import consequence_phrase, failure_finding
from controller.judge.ranks import NodeClock, RankEvent, RankEventReader, first_failure

JOBS = Path(__file__).parent / "corpus" / "jobs"
INDEX = {e["name"]: e for e in json.loads((JOBS / "index.json").read_text())}
SEEN_S = time.mktime((2026, 12, 1, 19, 0, 0, 0, 0, -1))   # the watch saw the logs after they were written
GLOG = re.compile(r"^([IWEF]\d{4} )(\d\d):(\d\d):(\d\d)\.(\d+)")
ELASTIC = re.compile(r"(time\s+: \d{4}-\d\d-\d\d_)(\d\d):(\d\d):(\d\d)")


def node_lines(name: str, node: int) -> list[str]:
    return (JOBS / name / f"node{node}.log").read_text().splitlines()


def read(name: str, chunks: dict[int, list[list[str]]] | None = None, clocks=None, world=4, order=None):
    """Feed each node's log (in the given tick chunks, else whole) to its reader; `order`
    (a Random) shuffles which node's evidence reaches the reader first."""
    events, restarts = [], []
    nodes = [0, 1]
    if order is not None:
        order.shuffle(nodes)
    for node in nodes:
        r = RankEventReader(node)
        parts = (chunks or {}).get(node) or [node_lines(name, node)]
        line_no = 1
        for i, part in enumerate(parts):
            events += r.feed(part, line_no, SEEN_S + i, 1.0)
            line_no += len(part)
        restarts += r.restarts
    if order is not None:
        order.shuffle(events)
    return first_failure(events, clocks or {}, world, restarts), events, restarts


@pytest.mark.parametrize("name", ["sigkill-rank3", "oom-rank1", "hang-rank2"])
def test_the_failing_rank_and_node_are_named_first(name):
    truth = INDEX[name]["first"]
    ff, _, _ = read(name)
    assert (ff.rank, ff.node) == (truth["rank"], truth["node"]), ff
    others = {c.rank for c in ff.consequences}
    assert others == {0, 1, 2, 3} - {truth["rank"]}           # every other rank, as a consequence
    assert not any(c.own_failure for c in ff.consequences)
    assert set(ff.agents_failed) == {0, 1}                     # both torchruns raised ChildFailedError


def test_sigkill_is_timed_by_the_agents_line_and_the_rest_lost_their_peer():
    ff, _, _ = read("sigkill-rank3")
    assert ff.kind == "signal" and ff.what == "killed by SIGKILL" and ff.own_failure
    assert ff.time_source == "line" and ff.local_rank == 1      # glog's `E1201 hh:mm:ss.ffffff` line, local rank 1
    killed = next(x for x in node_lines("sigkill-rank3", 1) if "failed (exitcode: -9)" in x)
    assert time.strftime("%H:%M:%S", time.localtime(ff.time_s)) == killed.split()[1][:8]
    assert ff.text == killed.strip()
    assert {c.kind for c in ff.consequences} == {"peer_lost"}
    assert consequence_phrase(ff) == "3 ranks then lost their peers"


def test_oom_names_the_gpu_and_the_finding_reads_like_the_issue():
    ff, _, _ = read("oom-rank1")
    assert ff.kind == "oom" and ff.what == "CUDA OOM (tried 20.00 GiB) on GPU 1"
    f = failure_finding(ff, {0: "pct 200 on pve1", 1: "pct 200 on pve2"}, {0: NodeClock(0.25, 0.004)}, "job-x",
                        SEEN_S)
    assert f.kind == "oom" and f.severity == "critical"
    assert f.summary.startswith("rank 1 (node 0: pct 200 on pve1, local rank 1) CUDA OOM (tried 20.00 GiB) on GPU 1 at ")
    assert f.summary.endswith("; 3 ranks then lost their peers")
    assert any("+0.250 s" in e and "±0.004 s (half the probe's round trip)" in e for e in f.evidence)
    assert sum(e.startswith("then rank ") for e in f.evidence) == 3
    assert "dfctl logs job-x --node 0" in f.hint


def test_only_timeouts_name_the_rank_the_others_waited_for():
    ff, _, _ = read("hang-rank2")
    assert ff.rank == 2 and not ff.own_failure and ff.ranks_not_timed_out == (2,)
    assert "timed out waiting for it" in ff.what
    assert {c.what for c in ff.consequences} == {"timed out in ALLREDUCE"}
    assert consequence_phrase(ff) == "3 ranks then timed out in ALLREDUCE"


def test_torchrun_restarts_are_events_and_only_the_last_attempt_is_judged():
    """--max-restarts 1 with torchrun's default log level (its "will restart" line is INFO,
    not printed): the restart shows as the agent stopping its workers, no ChildFailedError,
    and a new attempt after it -- on both nodes; the first attempt's SIGKILL is not the
    last attempt's failure."""
    ff, events, restarts = read("restart-rank2")
    assert sorted(r.node for r in restarts) == [0, 1]
    assert all("closing signal SIGTERM" in r.text for r in restarts)
    assert ff is not None and ff.attempt == 1
    assert ff.kind != "signal"                                   # the SIGKILL was attempt 0's
    assert any(e.kind == "signal" for e in events)               # ... and it was read


def test_the_info_restart_line_counts_and_says_attempts_left():
    r = RankEventReader(0)
    r.feed(["I1201 10:00:00.000000 77 api.py:941] [default] Worker group FAILED. 2/3 attempts left; "
            "will restart worker group"], 1, SEEN_S, 1.0)
    assert [(x.attempts_left, x.max_restarts, x.line) for x in r.restarts] == [(2, 3, 2)]


def test_tee_prefixes_give_the_local_rank_and_join_the_global_one():
    """`[default1]:[rank3]:` (torchrun --tee) -> global rank 3; a `[default1]:` line alone is
    local rank 1, joined to rank 3 through the summary's `rank : 3 (local_rank: 1)`."""
    lines = ["[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
             "GPU 1 has a total capacity of 79.10 GiB",
             "[default0]:[rank2]: RuntimeError: Connection closed by peer [10.0.0.2]:2000",
             "Failures:", "[0]:", "  time      : 2026-12-01_18:00:00", "  host      : pve2",
             "  rank      : 3 (local_rank: 1)", "  exitcode  : 1 (pid: 10)", "  error_file: <N/A>",
             "============"]
    r = RankEventReader(1)
    ff = first_failure(r.feed(lines, 1, SEEN_S, 1.0), {}, 4)
    assert (ff.rank, ff.local_rank, ff.node, ff.kind) == (3, 1, 1, "oom")
    assert [(c.rank, c.kind) for c in ff.consequences] == [(2, "peer_lost")]


def _shift(line: str, by_s: int) -> str:
    """A log line as a node whose clock runs by_s seconds off would have written it."""
    def glog(m):
        t = (int(m[2]) * 3600 + int(m[3]) * 60 + int(m[4]) + by_s) % 86400
        return f"{m[1]}{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}.{m[5]}"

    def elastic(m):
        t = (int(m[2]) * 3600 + int(m[3]) * 60 + int(m[4]) + by_s) % 86400
        return f"{m[1]}{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
    return ELASTIC.sub(elastic, GLOG.sub(glog, line))


def _chunks(lines: list[str], cuts: list[int]) -> list[list[str]]:
    idx = sorted({c % (len(lines) + 1) for c in cuts} | {0, len(lines)})
    return [lines[a:b] for a, b in zip(idx, idx[1:]) if b > a]


@given(skew_s=st.integers(-600, 600), noise=st.floats(-1.0, 1.0), cuts0=st.lists(st.integers(0, 200), max_size=6),
       cuts1=st.lists(st.integers(0, 200), max_size=6), name=st.sampled_from(["sigkill-rank3", "oom-rank1", "hang-rank2"]),
       order=st.randoms(use_true_random=False))
def test_real_logs_with_a_skewed_clock_and_any_tick_chunking_name_the_same_rank(skew_s, noise, cuts0, cuts1, name,
                                                                                  order):
    """Node 1's clock runs skew_s off (every timestamp of its log shifted), the probe's
    offset says so to within its uncertainty, and the lines arrive in any tick chunks."""
    truth = INDEX[name]["first"]
    unc = 0.05
    node1 = [_shift(x, skew_s) for x in node_lines(name, 1)]
    chunks = {0: _chunks(node_lines(name, 0), cuts0), 1: _chunks(node1, cuts1)}
    clocks = {0: NodeClock(0.0, unc), 1: NodeClock(skew_s + noise * unc, unc)}
    ff, _, _ = read(name, chunks, clocks, order=order)
    assert (ff.rank, ff.node) == (truth["rank"], truth["node"])


def _cause(node: int, rank: int, t: float) -> RankEvent:
    return RankEvent(node=node, rank=rank, local_rank=0, kind="exception", role="cause", what="ValueError: x",
                     time_s=t, time_source="line", time_error_s=0.001, text="[rank%d]: ValueError: x" % rank, line=1)


@given(true_s=st.lists(st.floats(0, 100), min_size=2, max_size=6, unique=True),
       skews=st.lists(st.floats(-3600, 3600), min_size=6, max_size=6),
       noise=st.lists(st.floats(-1, 1), min_size=6, max_size=6), order=st.randoms(use_true_random=False))
def test_two_causes_the_earlier_by_more_than_the_uncertainty_is_named(true_s, skews, noise, order):
    """Each rank on its own node, its clock skewed by up to an hour, the probe's offset
    known to ±u; the events shuffled. Whenever the earliest true time leads the next by
    more than the combined uncertainty, that rank is named."""
    unc = 0.02
    events = [_cause(n, n, t + skews[n]) for n, t in enumerate(true_s)]
    clocks = {n: NodeClock(skews[n] + noise[n] * unc, unc) for n in range(len(true_s))}
    order.shuffle(events)
    ranked = sorted(range(len(true_s)), key=lambda n: true_s[n])
    ff = first_failure(events, clocks)
    if true_s[ranked[1]] - true_s[ranked[0]] > 2 * (unc + 0.001):
        assert ff.rank == ranked[0]
    again = first_failure(list(reversed(events)), clocks)
    assert (again.rank, again.node) == (ff.rank, ff.node)         # never the arrival order's choice


def test_nccl_watchdog_lines_from_a_real_h200_are_timeouts_timed_by_c10s_own_clock():
    """tests/corpus/device/torchrun-nccl-watchdog.log (a lent H200, NCCL 2.28): the watchdog's
    `[rank0]:[E1201 18:40:34.850764840 ProcessGroupNCCL.cpp:689] ... OpType=ALLREDUCE` is a
    timeout, timed by that line; the SIGABRT that takes the process down is its consequence,
    not a failure of its own."""
    lines = (Path(__file__).parent / "corpus" / "device" / "torchrun-nccl-watchdog.log").read_text().splitlines()
    r = RankEventReader(0)
    events = r.feed(lines, 1, SEEN_S, 1.0)
    timeouts = [e for e in events if e.kind == "timeout"]
    assert timeouts and timeouts[0].rank == 0 and timeouts[0].what == "timed out in ALLREDUCE"
    assert timeouts[0].time_source == "line"
    assert time.strftime("%H:%M:%S", time.localtime(timeouts[0].time_s)) == "18:40:34"
    ff = first_failure(events, {}, None, r.restarts)
    assert ff.rank == 0 and not ff.own_failure and ff.kind == "timeout"


def test_a_restart_under_tee_prefixes_is_seen_from_the_new_workers_start_up():
    """torchrun --tee with a `[rank${rank}]:` prefix (how dfctl deploy launches a job): the
    restarted worker's start-up milestone is prefixed too; a SIGTERM'd worker's
    checkpoint_saved on its way out is not a new attempt."""
    cascade = ["W1201 10:00:01.000000 77 api.py:1028] Sending process 80 closing signal SIGTERM",
               "E1201 10:00:01.100000 77 api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 81)"]
    r = RankEventReader(0)
    r.feed(["[rank0]:[progress] step=4 loss=2.0", *cascade, "[rank0]:[milestone] checkpoint_saved step=4"],
           1, SEEN_S, 1.0)
    assert r.restarts == []
    r.feed(["[rank0]:[milestone] dataset_loaded samples=200"], 5, SEEN_S, 1.0)
    assert [(x.node, x.line, x.attempts_left) for x in r.restarts] == [(0, 4, -1)]


def test_a_restart_without_prefixes_is_seen_when_training_starts_again():
    """No --tee: the restarted attempt's first progress step is not past the last step
    before the stop; a step after it (the old attempt's last line) is no restart."""
    cascade = ["W1201 10:00:01.000000 77 api.py:1028] Sending process 80 closing signal SIGTERM"]
    r = RankEventReader(0)
    r.feed(["[progress] step=40 loss=2.0", *cascade, "[progress] step=41 loss=2.0"], 1, SEEN_S, 1.0)
    assert r.restarts == []
    r.feed(["[progress] step=1 loss=9.0"], 4, SEEN_S, 1.0)
    assert [x.line for x in r.restarts] == [3]


def _ev(node: int, rank: int | None, local: int | None, kind: str, role: str, what: str, t: float) -> RankEvent:
    return RankEvent(node=node, rank=rank, local_rank=local, kind=kind, role=role, what=what, time_s=t,
                     time_source="line", time_error_s=0.001, text=what)


def test_a_killed_workers_local_rank_is_made_global_by_the_jobs_layout_until_a_node_disagrees():
    """A SIGKILLed worker prints nothing; its agent names its local rank only. With
    nproc_per_node workers a node, a `[rank2]:` line of node 1's other worker makes node 1's
    workers ranks 2 and 3, so local rank 1 is rank 3 -- but only while the node's ranks agree
    on one position (rank 2 and rank 5 on one node, an uneven layout, give no guess)."""
    from controller.judge.ranks import CAUSE, CONSEQUENCE
    killed = _ev(1, None, 1, "signal", CAUSE, "killed by SIGKILL", 100.0)
    peer = _ev(1, 2, None, "peer_lost", CONSEQUENCE, "lost its peer", 100.5)
    other = _ev(0, 0, None, "peer_lost", CONSEQUENCE, "lost its peer", 100.6)
    ff = first_failure([killed, peer, other], nproc_per_node=2)
    assert ff is not None and (ff.node, ff.rank, ff.local_rank) == (1, 3, 1)
    assert first_failure([killed, peer, other]).rank is None            # no layout known: no guess
    uneven = _ev(1, 5, None, "peer_lost", CONSEQUENCE, "lost its peer", 100.7)
    ff = first_failure([killed, peer, uneven, other], nproc_per_node=2)
    assert ff is not None and ff.rank is None and (ff.node, ff.local_rank) == (1, 1)


def test_the_reader_learns_a_nodes_ranks_from_any_prefixed_line_and_the_layout_uses_them():
    """The bundled trainer's `[dist] ... joined` line (every rank, at start) is no failure
    evidence, but it tells which global ranks node 1 holds: a worker of it killed later
    without a word is named by its global rank at once."""
    from controller.judge.ranks import CAUSE
    reader = RankEventReader(1)
    assert reader.feed(["[rank2]:[dist] rank=2 local_rank=0 world_size=4 joined",
                        "[rank3]:[dist] rank=3 local_rank=1 world_size=4 joined",
                        "[rank3]:[progress] step=1 loss=2.0"], 1, 10.0) == []
    assert reader.ranks_seen == {2, 3}
    killed = _ev(1, None, 1, "signal", CAUSE, "killed by SIGKILL", 100.0)
    assert first_failure([killed], nproc_per_node=2).rank is None
    assert first_failure([killed], nproc_per_node=2, ranks_seen={1: reader.ranks_seen}).rank == 3
