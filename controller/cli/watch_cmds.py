"""CLI command `dfctl watch`: the tick loop's three faces (live dashboard, lines, JSON).

Wiring only: resolve runs from the registry, build a controller.watch.Watch, call tick()
every interval and render. On a terminal the dashboard (controller.view.dashboard.render) is
drawn in rich's Live at most 4 times a second on the alternate screen, keys read in
cbreak mode (q quits, j/k or Tab pick the run shown in full) and the terminal restored on
any exit. Not a terminal: one readable line per new finding and a status line now and
then. `--json`: JSON lines, one document per run per tick (controller.records.tick_document:
the run's state without its histories, plus the progress samples and log lines that tick
added); with --once one document {"runs": [full RunState...], "hosts": [...]} (and "jobs": [JobState...] when a job is watched).
A job (a run spread over nodes) is watched through its member runs (one probe per host
as always) plus one {"job": JobState} line per tick in the stream; its verdict is the
job's (controller/watch/job_follower.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer

from controller.cli.app import app
from controller.cli.interrupts import interrupts_unwind, raise_if_interrupted
from controller.errors import BadInputError, DfctlError, UnknownRunError, UnreachableError
from controller.records import Finding, RunState, tick_document, to_jsonable

STATUS_EVERY_S = 30.0
PROGRESS_SEED_LEN = 2000   # progress samples a restarted watch takes back from the history
MAX_REFRESH_HZ = 4.0


def _resolve_records(store, runs: list[str], playbook: Optional[Path]):
    records = []
    if playbook is not None:
        from controller.playbook import load_playbook

        pb = load_playbook(playbook, require_target=False)   # only its run.name is used
        try:
            records.append(store.get_run(pb.run.name))
        except UnknownRunError:
            raise UnknownRunError(f"{playbook}: no run launched from this playbook (run name "
                                  f"{pb.run.name!r}) in the registry",
                                  hint=f"dfctl deploy {playbook} launches one") from None
    for ref in runs:
        records.append(store.get_run(ref))
    if not records:   # nothing named: the one live run, else the newest
        records.append(store.default_run("watch"))
    seen, out = set(), []
    for r in records:
        if r.run_id not in seen:
            seen.add(r.run_id)
            out.append(r)
    if not out:
        raise BadInputError("dfctl watch: name at least one RUN, or --playbook P",
                            hint="`dfctl runs` lists known runs")
    return out


def _notifier(command: str):
    try:
        argv = shlex.split(command)
    except ValueError as exc:   # an unbalanced quote
        raise BadInputError(f"--notify {command!r}: {exc}") from None
    if not argv:
        raise BadInputError("--notify: empty command")
    if shutil.which(argv[0]) is None:   # refused now, not silently at the first finding
        where = "not an executable file" if os.sep in argv[0] else "not found on PATH"
        raise BadInputError(f"--notify {argv[0]}: {where}",
                            hint="give a command that exists, e.g. --notify 'notify-send dfctl'")

    def notify(state: RunState, finding: Finding) -> None:
        doc = dict(to_jsonable(finding), run_name=state.name, target=state.target)

        def run() -> None:
            try:
                subprocess.run(argv, input=json.dumps(doc).encode(), timeout=60,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                print(f"dfctl: --notify {argv[0]}: {exc}", file=sys.stderr)

        # never block the tick on a slow notifier; keep order per process by joining briefly
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(0.5)
    return notify


def _notify_setup(playbook: Optional[Path]):
    """The [notify] table that applies, where it was written (for messages) and the secrets a
    message must not carry: --playbook's table when it writes one, else the user's config.toml's."""
    from controller.playbook import NotifyConfig, load_playbook
    from controller.userconfig import load_user_config

    if playbook is not None:
        pb = load_playbook(playbook, require_target=False)
        secrets = [v for k, v in pb.run.env.items() if k in set(pb.secret_names())]
        secrets += [os.environ[k] for k in pb.secret_names() if os.environ.get(k)]
        if pb.notify != NotifyConfig():
            return pb.notify, f"{playbook}: notify", secrets
        cfg = load_user_config()
        return cfg.notify_setup, f"{cfg.path}: notify", secrets
    cfg = load_user_config()
    return cfg.notify_setup, f"{cfg.path}: notify", []


def _notify_command(ctx: typer.Context, flag: Optional[str], setup) -> Optional[str]:
    """--notify / DFCTL_NOTIFY win; else the applying [notify] table's command, none if it
    has none (the config file's reaches the flag as its default; a playbook's table
    replaces the file's, its command included)."""
    source = ctx.get_parameter_source("notify")
    if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
        return flag
    return setup.command


class _HistoryHook:
    """Feeds new progress samples to the Parquet history (controller.store.history): one writer
    per run (the watch's only coupling to history is this call). Progress rows are flushed
    as they come -- the Watch calls this before it persists the cursor covering them, so no
    kill can leave a cursor past rows the history lacks; GPU rows are flushed on close."""

    def __init__(self) -> None:
        self._writers: dict = {}

    def _writer(self, run_id: str):
        from controller.store.history import HistoryWriter

        w = self._writers.get(run_id)
        if w is None:
            w = self._writers[run_id] = HistoryWriter(run_id)
        return w

    def __call__(self, run_id: str, samples) -> None:
        w = self._writer(run_id)
        w.append_progress(samples)
        w.flush("progress")

    def record_gpus(self, report) -> None:
        """Each tick's GPU rows per run, so compare-runs sees peak memory of watched runs."""
        observed = {o.run_id for o in report.observations}   # runs whose host answered this tick
        for st in report.states:
            if st.run_id in observed and st.gpus:
                self._writer(st.run_id).append_gpus(st.updated_s or report.time_s, st.gpus)

    @staticmethod
    def seed(w, keep: int) -> None:
        """A restarted watch resumes its cursors after the lines it has read; give its runs
        back the progress history they had (Parquet), so the throughput chart and the
        regression windows do not start from nothing."""
        from controller.records import ProgressSample
        from controller.store.history import read_progress

        names = [f for f in ProgressSample.__dataclass_fields__ if f != "source"]
        for r in w.runs:
            _HistoryHook.backfill(r)
            if r.state.progress:
                continue
            try:
                table = read_progress(r.record.run_id)
            except Exception:  # noqa: BLE001 - no history yet, or unreadable: start empty
                continue
            if table.num_rows == 0:
                continue
            cut = max(0, table.num_rows - keep)
            rows = table.slice(cut).to_pylist()
            if cut:
                _HistoryHook.seed_older(r.state, table.slice(0, cut))
            r.state.progress = [ProgressSample(**{k: row.get(k) for k in names}, source=row.get("source") or "log")
                                for row in rows if row.get("step") is not None]

    @staticmethod
    def seed_older(state, table) -> None:
        """The history's rows before the ones seeded as objects -> the run's older_throughput
        (its warm-window median is then the whole run's, as compare-runs reads it)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from controller.throughput_columns import FIGURES

        table = table.filter(pc.is_valid(table.column("step")))

        def col(name: str) -> np.ndarray:
            if name not in table.schema.names:
                return np.full(table.num_rows, np.nan)
            return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)

        source = table.column("source") if "source" in table.schema.names else None
        # a row without a source is a log line's, as `seed` reads the rows it makes objects of
        from_log = (pc.fill_null(pc.is_in(source, pa.array(["log", ""])), True).to_numpy(zero_copy_only=False)
                    if source is not None else np.ones(table.num_rows, bool))
        state.older_throughput.load(table.column("step").to_numpy(zero_copy_only=False).astype(np.int64),
                                    col("time_s"), from_log, {name: col(name) for name in FIGURES})

    @staticmethod
    def backfill(r) -> None:
        """A gap in a run's history (rows an older dfctl lost to SIGTERM) is filled from its
        metrics.jsonl -- the part the watch's cursor has passed, which the watch will not
        read again -- read where the run lives (controller/watch/backfill.py)."""
        from controller.watch.backfill import backfill_history

        try:
            added, where = backfill_history(r)
        except (OSError, ValueError, DfctlError) as exc:
            print(f"dfctl: history backfill of {r.record.run_id}: {exc}", file=sys.stderr)
            return
        if added:
            print(f"dfctl: history of {r.record.run_id}: {added} missing step(s) filled from {where}",
                  file=sys.stderr)

    def close(self) -> None:
        for w in self._writers.values():
            try:
                w.close()
            except Exception as exc:  # noqa: BLE001 - history is a side record
                print(f"dfctl: history: {exc}", file=sys.stderr)
        self._writers.clear()


def finding_line(state: RunState, f: Finding) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(f.first_seen_s or time.time()))
    where = f" (line {f.line})" if f.line else ""
    hint = f" -> {f.hint}" if f.hint else ""
    return f"[{when}] {state.name or state.run_id}: {f.severity.upper()} {f.kind}: {f.summary}{where}{hint}"


def status_line(state: RunState) -> str:
    p = state.progress[-1] if state.progress else None
    bits = [f"{state.name or state.run_id}", state.state]
    if p is not None:
        bits.append(f"step={p.step}")
        if p.tok_per_s is not None:
            bits.append(f"tok/s={p.tok_per_s:,.0f}")
        if p.loss is not None:
            bits.append(f"loss={p.loss:.4g}")
    if state.log.size_bytes is not None:
        bits.append(f"log={state.log.size_bytes}B")
    if state.log.event:                      # a rotation/truncation/deletion is an event, said once per tick
        bits.append(f"log_{state.log.event}" + (f"({state.log.followed})" if state.log.followed else ""))
    elif state.log.error:
        bits.append(f"log_unreadable({state.log.error[:80]})")
    if state.log.lost_bytes:                 # a truncation outran the agent's cap: said, never silent
        bits.append(f"log_lost_bytes={state.log.lost_bytes}")
    if state.last_log_growth_s is not None and state.updated_s is not None:
        bits.append(f"log_age={state.updated_s - state.last_log_growth_s:.0f}s")
    if any(g.util_pct is not None for g in state.gpus):
        # every visible GPU keeps its place: one unreadable field shows as n/a, not a gap (issue 12.7)
        bits.append("gpu%=" + ",".join(f"{g.util_pct:.0f}" if g.util_pct is not None else "n/a"
                                       for g in state.gpus))
    elif state.host_sample is not None and state.host_sample.gpu_error:
        bits.append("gpu=n/a")
    if state.findings:
        bits.append(f"findings={len(state.findings)}")
    return f"[{time.strftime('%H:%M:%S')}] " + " ".join(bits)


def closing_lines(states: list[RunState], cfgs: dict | None = None) -> list[str]:
    """What a person needs when the watch ends: how each run ended, its numbers, what next.
    The tok/s median is the warm window's of each run's own watch config (`cfgs` by run
    id; default warm-up otherwise) -- the figure check-log and compare-runs print."""
    from controller.judge.throughput_window import median_text, throughput_summary
    from controller.records import SEVERITY_RANK

    out = []
    for st in states:
        name = st.name or st.run_id
        code = st.process.exit_code
        how: str = st.state
        if st.state == "stopped" and st.process.stopped_by:
            how += f" by {st.process.stopped_by}"
            if st.process.stop_requested_s:
                how += time.strftime(" at %H:%M:%S", time.localtime(st.process.stop_requested_s))
        how += f", exit {code}" if code is not None else (", exit code unknown" if st.state == "ended" else "")
        bits = [f"{st.run_id}: {how}"]
        prog = [p for p in st.progress if p.step is not None]
        if prog:
            span = ""
            if st.started_s and prog[-1].time_s:
                span = f" in {_duration(prog[-1].time_s - st.started_s)}"
            bits.append(f"{prog[-1].step} steps{span}")
            losses = [p.loss for p in prog if p.loss is not None]
            if losses:
                bits.append(f"loss {losses[0]:.4g} -> {losses[-1]:.4g}")
            tput = throughput_summary(prog, (cfgs or {}).get(st.run_id) or st,   # st: its own warm-up
                                      older=st.older_throughput)                 # the whole run's samples
            if tput["tok_per_s"]:
                bits.append(median_text(tput))
        worst = sorted(st.findings, key=lambda f: -SEVERITY_RANK.get(f.severity, 0))
        bits.append(f"{len(worst)} finding(s), worst: {worst[0].kind}: {worst[0].summary}" if worst else "no findings")
        out.append("; ".join(bits))
        if worst and worst[0].hint:
            out.append(f"  next: {worst[0].hint}")
        nxt = st.process.replaced_by if st.state == "stopped" else None
        if nxt:
            out.append(f"  replaced by {nxt}: dfctl watch {nxt} · dfctl compare-runs {st.run_id} {nxt}")
        else:
            out.append(f"  see: dfctl logs {name} --tail 50 · dfctl compare-runs {name} [OTHER_RUN…]")
    return out


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@contextlib.contextmanager
def _cbreak_keys() -> Iterator[Callable[[float], str | None]]:
    """Yield a `wait_key(timeout_s) -> str | None`; the terminal is restored on exit."""
    fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
    if fd is None:
        nothing = threading.Event()             # no keys to wait for: the wait is the timeout

        def no_keys(timeout_s: float) -> str | None:
            nothing.wait(max(0.0, timeout_s))
            return None
        yield no_keys
        return
    import termios
    import tty

    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)

        def wait_key(timeout_s: float) -> str | None:
            r, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
            if not r:
                return None
            return os.read(fd, 16).decode("utf-8", "replace")
        yield wait_key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def _check_reachable_once(w) -> None:
    down = [h for h, health in w.health.items() if not health.ever_reachable]
    if down:
        errors = "; ".join(w.health[h].error or h for h in down)
        raise UnreachableError(f"cannot reach {', '.join(down)}: {errors}")


@app.command()
def watch(
    ctx: typer.Context,
    runs: list[str] = typer.Argument(None, help="Run ids or names (newest of that name); default: the one "
                                                "live run, else the newest."),
    playbook: Optional[Path] = typer.Option(None, "--playbook", help="Watch this playbook's latest run."),
    interval: Optional[float] = typer.Option(None, "--interval", min=0.05, help="Seconds between ticks (default: the playbook's watch.interval_s)."),
    once: bool = typer.Option(False, "--once", help="One tick, print, exit with the verdict."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines (with --once: one document)."),
    notify: Optional[str] = typer.Option(None, "--notify", help="Command run on each new finding, the finding as JSON on stdin (no shell). Slack/Discord webhooks: a [notify] table in config.toml or the --playbook."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", metavar="PORT", help="Serve the runs' metrics for Prometheus at http://ADDR:PORT/metrics while watching (0: a free port, named on stderr)."),
    metrics_addr: Optional[str] = typer.Option(None, "--metrics-addr", metavar="ADDR", help="Address the --metrics-port endpoint listens on (default 127.0.0.1)."),
    recover: bool = typer.Option(False, "--recover", help="Act on each run's playbook [recover] policy after every "
                                                        "tick: resume a failed run as a new linked run, stop a hung "
                                                        "one once its stack dump is saved; each action printed and "
                                                        "recorded (README: Unattended)."),
) -> None:
    """Watch runs: one probe per host per tick over log, GPUs, process and wandb; flag what is wrong.

    A RUN may be a multi-node job: its nodes are watched as one (per-node rows, the job's
    tok/s, torchrun's restarts) and, when ranks fail, one finding names the rank that
    failed first and lists the others as its consequences. Exit: 0 healthy, 4 failure, 5 regression."""
    from controller.cli.redacted_output import redacted_stdio
    from controller.store.runstore import RunStore
    from controller.view.webhook_notifier import WebhookNotifier
    from controller.watch import Watch

    setup, setup_where, secrets = _notify_setup(playbook)
    notify = _notify_command(ctx, notify, setup)
    notify_hook = _notifier(notify) if notify else None   # a bad one is refused before anything else
    check_metrics_flags(metrics_port, metrics_addr, once)
    webhooks = WebhookNotifier(setup, secrets=secrets, where=setup_where)   # an unset $NAME: refused here too
    store = RunStore()
    records = _resolve_records(store, list(runs or []), playbook)
    records, imported_code = _show_imported(store, records, json_out, once)
    if not records:   # only imported runs: nothing to probe, their verdict is known
        store.close()
        raise typer.Exit(imported_code)
    tty_mode = not json_out and sys.stdout.isatty() and not once
    if tty_mode:
        webhooks.hold_messages()   # said after the dashboard quits, not drawn over by it
    line_mode = not json_out and not tty_mode

    def on_finding(state: RunState, f: Finding) -> None:
        if line_mode:
            print(finding_line(state, f), flush=True)
        if notify_hook is not None:
            notify_hook(state, f)
        webhooks.on_finding(state, f)

    endpoint = metrics_endpoint(metrics_port, metrics_addr, once)   # a port taken: refused before any probe
    history = _HistoryHook()
    recoverer, said_later = _recoverer(store, json_out=json_out, line_mode=line_mode) if recover else (None, [])
    try:
        # --interval is the watch's one interval: its ticks, GPU sampling, waits and back-off
        w = Watch(records, store, on_finding=on_finding, on_progress=history, interval_s=interval)
        w.on_tick = tick_hooks(history.record_gpus, lambda _report: webhooks.on_tick(),
                               *([endpoint.collector.publish_report] if endpoint else []),
                               *([lambda _report: recoverer.after_tick(w)] if recoverer is not None else []))
        _HistoryHook.seed(w, keep=PROGRESS_SEED_LEN)
    except BaseException:
        if endpoint is not None:
            endpoint.close()
        raise

    def finished() -> bool:
        return w.all_done and not (recoverer is not None and recoverer.pending)

    def exit_code() -> int:
        return w.exit_code() if recoverer is None else recoverer.exit_code(w)
    interval_s = w.settings.interval_s
    signals = contextlib.ExitStack()
    signals.enter_context(interrupts_unwind())   # SIGTERM/SIGHUP unwind through the finally below
    signals.enter_context(redacted_stdio(webhooks.redact))   # evidence is log text: no secret printed
    try:
        if once:
            rep = w.tick()
            _report_errors(w, set())
            _check_reachable_once(w)
            if json_out:
                print(json.dumps(once_document(rep), ensure_ascii=False), flush=True)
            elif sys.stdout.isatty():
                from rich.console import Console

                from controller.view.dashboard import render
                Console().print(render(rep.states, jobs=rep.jobs))
            else:
                for s in rep.states:
                    print(status_line(s), flush=True)
                for j in rep.jobs:
                    print(job_status_line(j), flush=True)
            raise typer.Exit(exit_code())
        if tty_mode:
            _live_loop(w, interval_s, finished)
        else:
            _plain_loop(w, interval_s, json_out,
                        status_every_s=interval_s if interval is not None else max(STATUS_EVERY_S, interval_s),
                        finished=finished)
        code = exit_code()
        for line in said_later:          # the dashboard's recovery actions, once its screen is gone
            print(line, flush=True)
        if w.all_done:
            for line in closing_lines(w.states, {r.record.run_id: r.cfg for r in w.runs}) + \
                    [ln for j in w.job_states for ln in job_closing_lines(j)]:
                print(line, file=sys.stderr if json_out else sys.stdout, flush=True)
        raise typer.Exit(code)
    finally:
        w.close()
        history.close()
        if endpoint is not None:
            endpoint.close()
        webhooks.close()   # after the last tick: what the rate limit held, then the queue (bounded)
        store.close()
        signals.close()


def _recoverer(store, *, json_out: bool, line_mode: bool):
    """--recover: the act wing's Recoverer, saying each action as the watch's face does --
    a JSON line {"recover": {...}}, a line, or (the dashboard) kept for after it quits."""
    from controller.act.executor import Recoverer

    later: list[str] = []

    def say(line: str, doc: dict) -> None:
        if json_out:
            print(json.dumps({"recover": doc}, ensure_ascii=False), flush=True)
        elif line_mode:
            print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)
        else:
            later.append(line)
    return Recoverer(store, say), later


def check_metrics_flags(port: Optional[int], addr: Optional[str], once: bool = False) -> None:
    """The flags' combinations refused before anything is read or served."""
    if port is None and addr is not None:
        raise BadInputError(f"--metrics-addr {addr}: needs --metrics-port PORT", hint="--metrics-port 9464 "
                            "(or 0 for a free port)")
    if port is not None and once:
        raise BadInputError("--metrics-port with --once: the watch ends after one tick, nothing would stay to scrape",
                            hint="drop --once, or serve every live run with `dfctl export-metrics --metrics-port "
                                 f"{port}`")


def metrics_endpoint(port: Optional[int], addr: Optional[str], once: bool = False):
    """`--metrics-port`/`--metrics-addr` -> a serving MetricsEndpoint (its URL said on stderr),
    or None without a port."""
    check_metrics_flags(port, addr, once)
    if port is None:
        return None
    from controller.expose.scrape_endpoint import DEFAULT_ADDR, MetricsEndpoint

    endpoint = MetricsEndpoint(port, addr or DEFAULT_ADDR)
    print(f"dfctl: metrics at {endpoint.url}", file=sys.stderr, flush=True)
    return endpoint


def tick_hooks(*hooks: Callable) -> Callable:
    """Several Watch.on_tick hooks as one: each runs even when one before it failed (the
    first failure is raised after, for the watch's error list)."""
    def on_tick(report) -> None:
        failed: Optional[BaseException] = None
        for hook in hooks:
            try:
                hook(report)
            except Exception as exc:  # noqa: BLE001 - the others still run; raised below
                failed = failed or exc
        if failed is not None:
            raise failed
    return on_tick


def _show_imported(store, records: list, json_out: bool, once: bool) -> tuple[list, int]:
    """Imported runs have no process to watch: print each one's recorded end state once
    (as a finished watch would) and hand back the runs left to watch, with the imported
    runs' verdict."""
    from controller.adopt.imported import is_imported
    from controller.adopt.importers import imported_state
    from controller.judge import verdict_exit_code

    shown = [imported_state(r, store.findings(r.run_id)) for r in records if is_imported(r)]
    if json_out and once and shown and len(shown) == len(records):
        print(json.dumps({"runs": to_jsonable(shown), "hosts": []}, ensure_ascii=False), flush=True)
        shown_json = []
    else:
        shown_json = shown
    for st in shown_json:
        if json_out:
            print(json.dumps(to_jsonable(st), ensure_ascii=False), flush=True)
            continue
        print(status_line(st), flush=True)
        for f in st.findings:
            print(finding_line(st, f), flush=True)
        for line in closing_lines([st]):
            print(line, flush=True)
    code = verdict_exit_code([f for st in shown for f in st.findings])
    return [r for r in records if not is_imported(r)], code


def once_document(rep) -> dict:
    """`watch --once --json`: every run's full state plus what this tick read (the lines
    and samples it moved the shared registry cursor past, so no later stream has them)."""
    seen = {o.run_id: o for o in rep.observations}
    runs = []
    for st in rep.states:
        doc = to_jsonable(st)
        obs = seen.get(st.run_id)
        doc["log_lines_new"] = list(obs.new_lines) if obs is not None else []
        doc["progress_new"] = to_jsonable(obs.progress) if obs is not None else []
        runs.append(doc)
    doc = {"runs": runs, "hosts": to_jsonable(rep.hosts)}
    if rep.jobs:      # only when a job is watched: a plain watch's document keeps its two keys
        doc["jobs"] = to_jsonable(rep.jobs)
    return doc


def job_status_line(job) -> str:
    """`[12:00:01] job train-x failed 2 nodes step=40 tok/s=8,012 restarts=1 exit=4`."""
    bits = [f"job {job.name or job.job_id}", job.state, f"{len(job.nodes)} nodes"]
    if job.step is not None:
        bits.append(f"step={job.step}")
    if job.tok_per_s is not None:
        bits.append(f"tok/s={job.tok_per_s:,.0f}")
    if job.restarts:
        bits.append(f"restarts={len(job.restarts)}")
    bits += [f"node{n.node_rank}={n.state}" for n in job.nodes]
    bits.append(f"exit={job.exit_code}")
    return f"[{time.strftime('%H:%M:%S')}] " + " ".join(bits)


def job_closing_lines(job) -> list[str]:
    out = [f"{job.job_id}: job {job.state}, {len(job.nodes)} nodes, exit {job.exit_code}"]
    for f in job.findings:
        out.append(f"  {f.severity.upper()} {f.kind}: {f.summary}")
        out += [f"    {e}" for e in f.evidence]
        if f.hint:
            out.append(f"  next: {f.hint}")
    return out


def _report_errors(w, shown: set) -> None:
    for msg in w.errors:
        if msg not in shown:
            shown.add(msg)
            print(f"dfctl: watch: {msg}", file=sys.stderr, flush=True)


def _plain_loop(w, interval_s: float, json_out: bool, status_every_s: float = STATUS_EVERY_S,
                finished: Callable[[], bool] | None = None) -> int:
    """Not a terminal: JSON lines, or a status line per run every `status_every_s` (the
    --interval the user gave, else STATUS_EVERY_S) -- an ended run's line once, not again
    at every later status round nor at the end."""
    from controller.records import ENDED_STATES

    finished = finished or (lambda: w.all_done)
    last_status = float("-inf")
    shown: set = set()
    ended_shown: set[str] = set()
    for _ in w.ticks():
        raise_if_interrupted()   # one a `__del__` swallowed (controller/cli/interrupts.py)
        rep = w.tick()
        _report_errors(w, shown)
        if json_out:
            seen = {o.run_id: o for o in rep.observations}
            for s in rep.states:
                print(json.dumps(tick_document(s, seen.get(s.run_id)), ensure_ascii=False), flush=True)
            for j in rep.jobs:
                print(json.dumps({"job": to_jsonable(j)}, ensure_ascii=False), flush=True)
        elif time.monotonic() - last_status >= status_every_s or finished():
            last_status = time.monotonic()
            for s in rep.states:
                if s.run_id in ended_shown:
                    continue
                print(status_line(s), flush=True)
                if s.state in ENDED_STATES:
                    ended_shown.add(s.run_id)
            for j in rep.jobs:
                print(job_status_line(j), flush=True)
        if finished():
            break
    return w.exit_code()


def _live_loop(w, interval_s: float, finished: Callable[[], bool] | None = None) -> int:
    from rich.console import Console
    from rich.live import Live

    from controller.cli.live_screen import LiveScreen
    from controller.view.dashboard import render

    finished = finished or (lambda: w.all_done)
    console = Console()
    with _cbreak_keys() as wait_key, Live(console=console, screen=True, auto_refresh=False,
                                          transient=True, redirect_stdout=False) as live:
        screen = LiveScreen(lambda selected: live.update(render(w.states, selected, jobs=w.job_states), refresh=True),
                            len(w.runs), wait_key, MAX_REFRESH_HZ)
        for _ in w.ticks(wait=screen.wait):      # the watch's clock; the screen fills the waits
            raise_if_interrupted()
            w.tick()
            screen.runs = len(w.runs)            # --recover adds each resumed run to the watch
            if finished():
                screen.draw()
                break
            screen.changed()
    for line in after_quit_lines(w.states, shutil.get_terminal_size((80, 24)).columns):
        print(line)
    _report_errors(w, set())
    return w.exit_code()


def after_quit_lines(states: list[RunState], width: int) -> list[str]:
    """What stays on the terminal after the dashboard quits: each run's status and findings,
    every line cut to the terminal's width (`…`), so none wraps into the next."""
    def fit(line: str) -> str:
        return line if len(line) <= width else line[:max(1, width - 1)] + "…"

    out = [fit(status_line(s)) for s in states]
    out += [fit(finding_line(s, f)) for s in states for f in s.findings]
    return out
