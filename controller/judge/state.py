"""State detectors: a run's accumulated RunState (the watch fills it each tick) -> findings.

A stale (block-buffered) log, a hang, idle GPUs, GPUs that cannot be read, start-up
stalls, a NaN in metrics the text rules never saw, and how the process ended (exit 137 +
the cgroup's oom_kill counter; any other exit quotes the log's last error lines, so a
failed launch names its cause).

A finding of a condition (a silent log, idle or unreadable GPUs, a file that is not a
file, a host that does not answer) lives as long as its cause: CLEARED_BY says, per kind,
what ends it, and `cleared()` judges it each tick. A failure (a crash, an OOM, a NaN, a
regression episode) happened: it never clears.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from controller.judge.evidence import EVIDENCE_LINES, FAILURE_KINDS, clip, signal_suffix
from controller.judge.hints import HINT_CRASH, HINT_GPU_UNREADABLE, HINT_HOST_OOM, HINT_NAN, HINT_STALE
from controller.judge.regression import _same_episode, detect_regression
from controller.judge.throughput_window import by_step, finite, fmt_tok_per_s, median
from controller.records import Finding, ProgressSample, RunState

if TYPE_CHECKING:
    from controller.playbook import WatchConfig

IDLE_UTIL_PCT = 5.0
"""A GPU at or below this utilization.gpu is idle (nvidia-smi samples 1/6 s - 1 s)."""


def _utc(ts: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ts))


def _gpu_utils(state: RunState) -> list[tuple[int, float]]:
    return [(g.index, g.util_pct) for g in state.gpus if g.util_pct is not None]


def _sustained_idle(state: RunState, cfg: WatchConfig, now_s: float) -> tuple[list[int], list[int]] | None:
    """(idle, busy) GPU indices where idle means no busy sample for cfg.gpu_idle_s; None
    while the run has not been watched that long. A state without busy-time history (built
    by hand, or by an older watcher) falls back to the instantaneous reading."""
    utils = _gpu_utils(state)
    if not utils:
        return None
    if state.gpus_seen_since_s is None:
        return ([i for i, u in utils if u <= IDLE_UTIL_PCT], [i for i, u in utils if u > IDLE_UTIL_PCT])
    window = getattr(cfg, "gpu_idle_s", 60.0)
    if now_s - state.gpus_seen_since_s < window:
        return None
    idle = [i for i, _ in utils
            if now_s - state.gpu_busy_seen_s.get(i, state.gpus_seen_since_s) >= window]
    return idle, [i for i, _ in utils if i not in idle]


def _alive(state: RunState) -> bool:
    return state.process.state == "running"


def _last_growth(state: RunState) -> float | None:
    if state.last_log_growth_s is not None:
        return state.last_log_growth_s
    return state.started_s


def _median_interval_s(samples: Sequence[ProgressSample]) -> float | None:
    times = [s.time_s for s in samples if s.time_s is not None]
    diffs = [b - a for a, b in zip(times, times[1:]) if b > a]
    return median(diffs)


def _stale_log(state: RunState, cfg: WatchConfig, now_s: float) -> Finding | None:
    if not _alive(state):
        return None
    since = _last_growth(state)
    if since is None or now_s - since <= cfg.stale_log_s:
        return None
    advancing = [s for s in state.progress if s.source != "log" and s.time_s is not None and s.time_s > since]
    utils = _gpu_utils(state)
    busy = [(i, u) for i, u in utils if u > IDLE_UTIL_PCT]
    if not advancing and not busy:
        return None
    evidence = [f"log {state.log.path or ''} has not grown for {now_s - since:.0f} s "
                f"(threshold {cfg.stale_log_s:.0f} s, size {state.log.size_bytes} bytes)"]
    if advancing:
        last = max(advancing, key=lambda s: s.step)
        why = f"metrics advance (step {last.step} from {last.source})"
        evidence.append(f"{len(advancing)} progress sample(s) from {last.source} since, last step {last.step}"
                        + (f" at {fmt_tok_per_s(last.tok_per_s)} tok/s" if finite(last.tok_per_s) else ""))
    else:
        why = "GPUs are busy"
    if busy:
        evidence.append("GPU util: " + ", ".join(f"{i}: {u:.0f}%" for i, u in busy))
    hint = HINT_STALE
    if not advancing:
        hint += "; if metrics do not advance either, GPUs may be spinning in a stuck NCCL collective"
    return Finding(kind="stale_log", severity="warning",
                   summary=f"log silent since {_utc(since)} while {why.split(' (')[0]}",
                   evidence=tuple(evidence), hint=hint, first_seen_s=now_s, run_id=state.run_id)


def _hang(state: RunState, cfg: WatchConfig, now_s: float) -> Finding | None:
    if not _alive(state) or not state.progress:
        return None
    marks = [x for x in (state.last_log_growth_s, state.last_progress_s) if x is not None]
    if not marks:
        return None
    quiet_since = max(marks)
    samples = by_step(state.progress)
    interval = _median_interval_s(samples)
    threshold = max(cfg.hang_min_s, cfg.hang_factor * interval) if interval else cfg.hang_min_s
    quiet = now_s - quiet_since
    if quiet <= threshold:
        return None
    utils = _gpu_utils(state)
    if utils:
        if any(u > IDLE_UTIL_PCT for _, u in utils):
            return None
        idle_note = "GPUs idle (" + ", ".join(f"{i}: {u:.0f}%" for i, u in utils) + ")"
    else:
        cpu = state.process.cpu_pct
        if cpu is None or cpu > IDLE_UTIL_PCT:
            return None
        idle_note = f"no GPUs seen; process CPU {cpu:.0f}%"
    last = samples[-1]
    evidence = (
        f"no new log bytes or progress for {quiet:.0f} s (threshold {threshold:.0f} s = max(hang_min_s, "
        f"{cfg.hang_factor:g} x median interval {interval:.1f} s))" if interval else
        f"no new log bytes or progress for {quiet:.0f} s (threshold hang_min_s {threshold:.0f} s)",
        idle_note,
    ) + tuple(clip(x) for x in state.log_tail[-3:])
    pid = state.process.pid
    return Finding(kind="hang", severity="critical",
                   summary=f"no progress since step {last.step} ({_utc(quiet_since)}) and the GPUs sit idle",
                   evidence=evidence,
                   hint=f"py-spy dump --pid {pid or '<pid>'} shows where it waits (data loader, a lock, a "
                        "collective); kill it and resume from the last checkpoint",
                   first_seen_s=now_s, run_id=state.run_id)


def _gpu_idle(state: RunState, cfg: WatchConfig, now_s: float) -> Finding | None:
    if not _alive(state):
        return None
    if not state.progress and "first_step" not in state.milestones:
        return None  # still starting up: loading weights leaves GPUs idle
    utils = _gpu_utils(state)
    split = _sustained_idle(state, cfg, now_s)
    if split is None:
        return None
    idle, busy = split
    # A GPU whose utilization could not be read this tick ([N/A]) is unknown, not idle and
    # not missing: it still counts as visible, and as possibly busy (issue 12.7).
    unknown = [g.index for g in state.gpus if g.util_pct is None]
    visible = len({g.index for g in state.gpus})
    expected = cfg.gpus_expected
    ev: tuple[str, ...] = ("GPU util: " + ", ".join(f"{i}: {u:.0f}%" for i, u in utils),)
    hint = ("an idle GPU is a stalled stage: a dead worker thread, a starved queue, or a rank "
            "waiting in a collective; compare with the log tail and py-spy dump")
    if unknown:
        ev = ev + (f"utilization unreadable on GPU {', '.join(map(str, unknown))}",)
    if not busy and not unknown:
        return Finding(kind="gpu_idle", severity="warning",
                       summary=f"all {len(utils)} GPUs idle while the process lives",
                       evidence=ev, hint=hint, first_seen_s=now_s, run_id=state.run_id)
    if expected is not None and len(busy) + len(unknown) < expected:
        if visible < expected:
            summary = f"{visible} GPUs visible, {expected} expected; idle: {', '.join(map(str, idle)) or 'none'}"
        else:
            summary = f"{expected - len(busy)} of {expected} expected GPUs idle (GPU {', '.join(map(str, idle))})"
        return Finding(kind="gpu_idle", severity="warning", summary=summary, evidence=ev, hint=hint,
                       first_seen_s=now_s, run_id=state.run_id)
    if expected is None and idle:
        return Finding(kind="gpu_idle", severity="warning",
                       summary=f"GPU {', '.join(map(str, idle))} idle while {len(busy)} other(s) work",
                       evidence=ev, hint=hint, first_seen_s=now_s, run_id=state.run_id)
    return None


GPU_ERROR_NOT_GPU = ("nvidia-smi not found", "GPU readings not requested")
"""gpu_error texts that mean "no GPU here" (a CPU run), not "the GPUs were lost"."""


def _gpu_unreadable(state: RunState, cfg: WatchConfig, now_s: float) -> Finding | None:
    """nvidia-smi failing (exit 9 "couldn't communicate with the NVIDIA driver", a hung
    or lost GPU) on a run that has or expects GPUs: a warning naming the host and the
    text, not a silent `gpu=n/a` (issue 12.6)."""
    hs = state.host_sample
    if hs is None or not hs.gpu_error or not _alive(state):
        return None
    err = hs.gpu_error
    expects = bool(getattr(cfg, "gpus_expected", None)) or state.gpus_seen_since_s is not None
    if not expects and any(err.startswith(x) for x in GPU_ERROR_NOT_GPU):
        return None
    host = hs.host or state.host or state.target or "host"
    first_line = err.splitlines()[0][:200]
    return Finding(kind="gpu_unreadable", severity="warning", summary=f"{host}: GPUs unreadable: {first_line}",
                   evidence=(f"nvidia-smi on {host}: {err[:400]}",), hint=HINT_GPU_UNREADABLE,
                   first_seen_s=now_s, run_id=state.run_id)


def _startup_stall(state: RunState, cfg: WatchConfig, now_s: float) -> list[Finding]:
    if state.started_s is None or state.progress or not _alive(state):
        return []
    out = []
    elapsed = now_s - state.started_s
    seen = sorted(state.milestones.items(), key=lambda kv: kv[1])
    last_seen = (f"last milestone: {seen[-1][0]} at +{seen[-1][1] - state.started_s:.0f} s"
                 if seen else "no milestone seen yet")
    for name, deadline in sorted(cfg.startup_deadlines_s.items(), key=lambda kv: kv[1]):
        if name in state.milestones or elapsed <= deadline:
            continue
        out.append(Finding(
            kind="startup_stall", severity="warning",
            summary=f"{name} not reached {deadline:.0f} s after launch",
            evidence=(f"{elapsed:.0f} s since launch; {last_seen}",) + tuple(clip(x) for x in state.log_tail[-3:]),
            hint=("look at the log tail and py-spy dump --pid: slow weight loading, a dataset "
                  "scan, a compile, or a wait on another rank"),
            first_seen_s=now_s, run_id=state.run_id))
    return out


DISK_FULL_BYTES = 64 << 20
"""Less free space than this on the run dir's filesystem when a run vanished: the disk,
not a kill -9, is the likely cause (issue 12 item 8)."""


def _process_end(state: RunState, cfg: WatchConfig, now_s: float) -> Finding | None:
    ps = state.process
    if ps.state not in ("exited", "zombie"):
        return None
    if ps.stopped_by:
        return None   # an operator stopped it (dfctl stop / deploy --replace): its end is no crash
    code = ps.exit_code
    tail = tuple(clip(x) for x in state.log_tail[-EVIDENCE_LINES:])
    text_kinds = {f.kind for f in state.findings if f.kind in FAILURE_KINDS}
    if code is None and not ps.exit_code_known:
        return None   # an attached run: no wrapper of ours records a code (controller.adopt.attached judges its end)
    if code is None:
        # exited or a zombie alike: the probe reads exit_code after the process tree, so a
        # zombie leader (the wrapper, dead, not yet reaped -- slow on containers whose pid 1
        # reaps late) had written whatever code it would write
        if ps.disk_free_bytes is not None and ps.disk_free_bytes < DISK_FULL_BYTES:
            left = ("; exit_code.tmp left empty: the wrapper died writing the exit code"
                    if ps.exit_code_tmp_bytes == 0 else "")
            return Finding(kind="crash", severity="critical",
                           summary="process vanished with the disk full: no exit code recorded",
                           evidence=(f"pid {ps.pid} is gone; the run dir's filesystem has {ps.disk_free_bytes // 1024} KiB "
                                     f"free{left}",) + tail,
                           hint="the trainer and then its wrapper died of ENOSPC (No space left on device): free space "
                                "under the workdir (old releases, checkpoints, wandb dirs; `df -h` there), then redeploy",
                           first_seen_s=now_s, run_id=state.run_id)
        return Finding(kind="crash", severity="critical", summary="process vanished: no exit code recorded",
                       evidence=(f"pid {ps.pid} is gone and the wrapper wrote no exit_code file",) + tail,
                       hint="the wrapper died with it (kill -9 of the process group, container restart, "
                            "host reboot?): check dmesg, pct status and the host's uptime",
                       first_seen_s=now_s, run_id=state.run_id)
    if code == 0:
        return None
    if code in (137, -9):
        after = state.host_sample.oom_kill_count if state.host_sample else None
        before = state.oom_kill_at_launch
        if after is not None and before is not None and after > before:
            return Finding(kind="oom", severity="critical",
                           summary=f"killed by the kernel OOM killer (exit 137; oom_kill {before} -> {after})",
                           evidence=(f"container cgroup oom_kill counter went from {before} at launch to {after}",) + tail,
                           hint=HINT_HOST_OOM, first_seen_s=now_s, run_id=state.run_id)
        if "oom" in text_kinds:
            return None
        counter = ("oom_kill counter unchanged" if after is not None and before is not None
                   else "oom_kill counter unknown")
        return Finding(kind="oom", severity="critical", summary="killed by SIGKILL (exit 137), OOM likely",
                       evidence=(f"exit code 137 = 128 + SIGKILL; {counter} ({before} -> {after})",) + tail,
                       hint=HINT_HOST_OOM + "; or someone ran kill -9", first_seen_s=now_s, run_id=state.run_id)
    if text_kinds:
        return None
    signum = code - 128 if code > 128 else (-code if code < 0 else 0)
    sig = signal_suffix(signum)[2:] if signum else ""
    if sig in ("SIGTERM", "SIGINT", "SIGHUP"):
        return Finding(kind="crash", severity="warning", summary=f"stopped by {sig} (exit {code})",
                       evidence=tail, hint="someone or something stopped it (dfctl stop, a scheduler, a closed "
                                           "terminal without setsid)", first_seen_s=now_s, run_id=state.run_id)
    cause = last_error_line(state.log_tail)
    summary = f"process exited with code {code}" + (f" ({sig})" if sig else "")
    if cause:
        summary += f": {cause[:200]}"
    return Finding(kind="crash", severity="critical", summary=summary, evidence=tail,
                   hint=("the log's last error line is quoted above; " if cause else
                         "no error text was recognised: read the log tail; ") + HINT_CRASH,
                   first_seen_s=now_s, run_id=state.run_id)


_ERRORISH = re.compile(r"error|Error|Exception|fatal|FATAL|failed|refused|not found|No such "
                       r"|denied|invalid|unrecognized|Killed|Aborted|Segmentation fault|core dumped", re.I)


def last_error_line(tail: Sequence[str]) -> str | None:
    """The last line of the log tail that reads like an error (argparse's `error:
    unrecognized arguments`, an exception line, a fatal message), or None. What a person
    reads first when a process exits; the whole tail is in the evidence anyway."""
    lines = [x.strip() for x in tail if x and x.strip()]
    for line in reversed(lines[-EVIDENCE_LINES:]):
        if _ERRORISH.search(line):
            return clip(line)
    return None


def _nan_from_metrics(state: RunState, now_s: float) -> Finding | None:
    """A NaN/Inf loss in the latest progress (metrics.jsonl, wandb, or a log line read
    through a custom progress_pattern that the text rules do not know)."""
    for s in reversed(state.progress[-20:]):
        if s.loss is not None and not math.isfinite(s.loss):
            return Finding(kind="nan", severity="critical", summary="loss is NaN/Inf",
                           evidence=(f"step {s.step} loss={s.loss} (from {s.source})",), hint=HINT_NAN,
                           first_seen_s=now_s, run_id=state.run_id)
    return None


def evaluate(state: RunState, cfg: WatchConfig, now_s: float) -> list[Finding]:
    """State detectors over one run's accumulated state (see module doc); cfg is the
    run's WatchConfig. Returns only state-derived findings; text findings come from
    scan_lines and are expected in state.findings (used to avoid double reports)."""
    out: list[Finding] = []
    regression = detect_regression(state.progress, cfg,
                                   state.baseline_tok_per_s if state.baseline_tok_per_s else cfg.baseline_tok_per_s,
                                   now_s, state.run_id)
    for f in (
        _stale_log(state, cfg, now_s),
        _hang(state, cfg, now_s),
        _same_episode(regression, state.findings),
        _gpu_idle(state, cfg, now_s),
        _gpu_unreadable(state, cfg, now_s),
        _process_end(state, cfg, now_s),
        _nan_from_metrics(state, now_s),
    ):
        if f is not None:
            out.append(f)
    out.extend(_startup_stall(state, cfg, now_s))
    return out




UNREADABLE_FILE_HINT = "something in the container put a non-file there; the watch reads regular files only"


def unreadable_file(what: str, error: str, now_s: float, run_id: str | None) -> Finding:
    """A FIFO, device, socket or directory where a run file (`what`: "log",
    "metrics.jsonl", ".wandb file") should be: the probe did not read it."""
    return Finding(kind="log_unreadable", severity="warning", summary=f"{what} not read: {error}"[:300],
                   evidence=(error,), hint=UNREADABLE_FILE_HINT, first_seen_s=now_s, run_id=run_id)


def _unreadable_file_of(f: Finding) -> str:
    return f.summary.split(" not read: ", 1)[0]


def _stall_milestone_of(f: Finding) -> str:
    return f.summary.split(" not reached ", 1)[0]


CLEARED_BY: dict[str, str] = {
    "log_unreadable": "the file it names is read as a regular file again",
    "unreachable": "the host and the run's files answer again",
    "gpu_unreadable": "a tick reads the GPUs again",
    "stale_log": "the log grows again",
    "hang": "the log grows or the run reports progress again",
    "gpu_idle": "every GPU of the run reads busy again while the process lives",
    "startup_stall": "the milestone it names is reached, or the first step",
}
"""What ends a finding of each kind (README "Findings" prints this table). A kind not named
here is a failure that happened (crash, oom, nan, regression, ...): it stays."""


def cleared(f: Finding, state: RunState, cfg: WatchConfig, now_s: float, *,
            files_read: Collection[str]) -> bool:
    """Whether f's cause went away (CLEARED_BY), judged on the run's state after this
    tick; files_read: the run files this tick read as regular files ("log", ...)."""
    since = f.first_seen_s if f.first_seen_s is not None else -math.inf
    if f.kind == "log_unreadable":
        return _unreadable_file_of(f) in files_read
    if f.kind == "unreachable":
        return state.state != "unreachable"
    if f.kind == "gpu_unreadable":
        hs = state.host_sample
        return hs is not None and not hs.gpu_error and bool(hs.gpus)
    if f.kind == "stale_log":
        return state.last_log_growth_s is not None and state.last_log_growth_s > since
    if f.kind == "hang":
        marks = [x for x in (state.last_log_growth_s, state.last_progress_s) if x is not None]
        return bool(marks) and max(marks) > since
    if f.kind == "gpu_idle":
        utils = _gpu_utils(state)
        return (_alive(state) and bool(utils) and _gpu_idle(state, cfg, now_s) is None
                and all(state.gpu_busy_seen_s.get(i, -math.inf) > since for i, _ in utils))
    if f.kind == "startup_stall":
        return bool(state.progress) or _stall_milestone_of(f) in state.milestones
    return False
