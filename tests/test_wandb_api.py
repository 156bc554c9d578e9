"""The wandb API poller against the local STAND-IN GraphQL server (tests/wandb_standin/).

The real wandb 0.31 client (`wandb.Api()` and its wandb-core sidecar) does the talking;
only the server is a stand-in, answering the operations that client was captured sending.
"""

from __future__ import annotations

import time

import pytest

from controller.errors import BadInputError, DfctlError, UnreachableError
from controller.wandb_io.api_poller import ApiPoller, fetch_run, parse_run_path
from tests.wandb_standin.server import StandinWandbServer, load_fixture

KEY = "0123456789abcdef0123456789abcdef01234567"   # a made-up 40-char key
LIVE = "ops/dfctl-test/live01"
DONE = "ops/dfctl-test/done02"
IMPLEMENTED = {"Viewer", "GetDefaultEntity", "Run", "RunState", "RunHistoryKeys",
               "RunFullHistory", "RunSampledHistory", "RunParquetHistory", "HistoryPage"}


@pytest.fixture(scope="module")
def server():
    with StandinWandbServer(KEY) as srv:
        yield srv


@pytest.fixture
def fresh(server):
    """Fixture data reloaded and no faults left over from another test."""
    server.runs = load_fixture()
    server.clear_faults()
    server.requests.clear()
    return server


def poller(srv, path=LIVE, **kw) -> ApiPoller:
    kw.setdefault("timeout_s", 3)
    kw.setdefault("backoff_s", 0.1)
    kw.setdefault("min_interval_s", 0.0)
    return ApiPoller(path, base_url=srv.url, api_key=KEY, **kw)


def steps(rows):
    return [r["_step"] for r in rows]


def test_parse_run_path():
    assert parse_run_path("ops/proj/abc") == ("ops", "proj", "abc")
    assert parse_run_path("ops/proj/runs/abc") == ("ops", "proj", "abc")
    with pytest.raises(BadInputError, match="entity/project/run_id"):
        parse_run_path("just-an-id")


def test_poll_incremental_by_step_and_queries_are_served(fresh):
    p = poller(fresh)
    assert p.poll_async()
    assert p.wait(60)
    first = p.latest()
    assert first.error is None, first.error
    assert steps(first.history) == list(range(60))
    assert first.state == "running" and first.run_id == "live01"
    assert first.config == {"lr": 0.0006, "batch_size": 4, "layout": "restored"}
    assert first.summary["tok_per_s"] == 21590.0
    sample = first.progress[12]
    assert (sample.step, sample.tok_per_s, sample.source) == (12, 21120.0, "wandb")
    assert sample.time_s == first.history[12]["_timestamp"]

    # The run goes on and then finishes: only the new steps arrive, no repeats.
    fresh.append_history(LIVE, [{"_step": 60, "loss": 0.08}, {"_step": 61, "loss": 0.079}])
    fresh.set_state(LIVE, "finished")
    assert p.poll_async() and p.wait(60)
    second = p.latest()
    assert steps(second.history) == [60, 61]
    assert second.state == "finished"
    assert second.config is None            # unchanged since the last batch
    assert p.latest().history == []         # drained
    # The second scan asked the server only from step 60 on.
    pages = [r.variables for r in fresh.requests if r.op == "HistoryPage"]
    assert pages[0]["minStep"] == 0 and pages[-1]["minStep"] == 60
    # Every request the real client sent is one the stand-in implements, all answered.
    assert set(fresh.ops()) <= IMPLEMENTED
    assert all(r.status == 200 for r in fresh.requests)


def test_fetch_run_whole_run_keeps_rows_missing_some_keys(fresh):
    data = fetch_run(DONE, base_url=fresh.url, api_key=KEY, timeout_s=5)
    assert data.state == "finished" and data.run_id == "done02"
    assert steps(data.history) == list(range(0, 200, 5))
    # eval_loss is only on every 10th step; the rows without it are still there
    assert sum("eval_loss" in r for r in data.history) == 20
    assert data.config["batch_size"] == 8
    assert [s.step for s in data.progress] == list(range(0, 200, 5))


def test_base_url_from_environment(fresh, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", fresh.url)
    p = ApiPoller("ops/dfctl-test/oom03", api_key=KEY, timeout_s=5, min_interval_s=0)
    batch = p.fetch_new()
    assert batch.state == "failed" and steps(batch.history) == list(range(10))


@pytest.mark.parametrize("status", [429, 500])
def test_transient_errors_are_retried_with_backoff(fresh, status):
    fresh.inject("Run", status=status, times=2)      # wandb-core tries twice, then we retry
    p = poller(fresh, max_attempts=3)
    batch = p.fetch_new()
    assert steps(batch.history) == list(range(60))
    assert p.attempts_made == 2
    run_requests = [r.status for r in fresh.requests if r.op == "Run"]
    assert run_requests == [status, status, 200]


def test_retries_are_bounded_and_errors_name_the_run(fresh):
    fresh.inject("Run", status=500, times=1000)
    p = poller(fresh, max_attempts=2, timeout_s=3)
    t0 = time.monotonic()
    with pytest.raises(UnreachableError) as err:
        p.fetch_new()
    elapsed = time.monotonic() - t0
    assert err.value.exit_code == 3
    assert LIVE in err.value.message and "gave up after 2 attempts" in err.value.message
    assert KEY not in err.value.message
    # each of our attempts lets wandb-core try at most twice
    assert 2 <= sum(r.op == "Run" for r in fresh.requests) <= 4
    assert elapsed < 2 * (3 + 1) + 5


def test_poll_never_blocks_on_a_slow_server(fresh):
    fresh.inject("Run", delay_s=5, times=1)          # longer than timeout_s
    p = poller(fresh, timeout_s=2, max_attempts=3)
    t0 = time.monotonic()
    assert p.poll_async()
    assert time.monotonic() - t0 < 0.5
    t1 = time.monotonic()
    early = p.latest()
    assert time.monotonic() - t1 < 0.5
    assert early.history == [] and p.in_flight
    assert not p.poll_async()                        # no pile-up of fetches
    assert p.wait(60)
    batch = p.latest()
    assert batch.error is None and steps(batch.history) == list(range(60))
    assert p.attempts_made == 2                      # the slow call was cut at timeout_s


def test_unknown_run_and_project_are_bad_input(fresh):
    for path in ("ops/dfctl-test/nope99", "ops/no-such-project/live01"):
        with pytest.raises(BadInputError) as err:
            fetch_run(path, base_url=fresh.url, api_key=KEY, timeout_s=5)
        assert err.value.exit_code == 2 and path in err.value.message
        assert "no such run" in err.value.message and KEY not in err.value.message


def test_wrong_key_is_bad_input_and_never_printed(fresh):
    wrong = "f" * 40
    with pytest.raises(BadInputError) as err:
        fetch_run(LIVE, base_url=fresh.url, api_key=wrong, timeout_s=5)
    assert "no access" in err.value.message and LIVE in err.value.message
    assert wrong not in err.value.message and wrong not in (err.value.hint or "")


def test_no_server_is_unreachable_and_reported_by_the_background_poll(fresh):
    import socket
    with socket.socket() as s:                       # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    p = ApiPoller(LIVE, base_url=dead, api_key=KEY, timeout_s=1, max_attempts=2,
                  backoff_s=0.1, min_interval_s=0)
    assert p.poll_async()
    assert p.wait(60)
    batch = p.latest()                               # the error is data, not an exception
    assert batch.history == [] and batch.error
    assert isinstance(p.error, UnreachableError) and p.error.exit_code == 3
    assert LIVE in batch.error and KEY not in batch.error
    assert not p.poll_async()                        # backing off before the next try
    with pytest.raises(DfctlError):
        fetch_run(LIVE, base_url=dead, api_key=KEY, timeout_s=1, max_attempts=1)
