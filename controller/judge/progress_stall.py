"""A stop after a stall, told by the run's own clocks: progress stood still, then someone stopped it.

A careful reader concludes "it hung" without any hang wording when the text's own clocks show
that nothing moved for a long time before an external stop. Two clocks are read, both printed by
the program, never the time the text was read (a pasted log and a live one judge alike):

- A progress bar's elapsed time. tqdm draws `desc:  1%|▏   | 5/400 [00:02<03:17,  2.00it/s]`
  (tqdm/std.py `format_meter`: `{n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]`, elapsed
  as `[H:]MM:SS` by `format_interval`; tqdm 4.70.1). A bar redraws when it is updated, refreshed
  or closed; when an exception (Ctrl-C's KeyboardInterrupt) leaves the loop, tqdm's iterator
  closes the bar and its last redraw shows the count it had with the elapsed time grown by the
  stall (real output: tests/data/logs/tqdm_stall_sigint.log, `5/400 [00:02<...]` then
  `5/400 [11:37<...]` then the traceback). The two redraws nearest the stop, of one bar, with the
  count still (or one item on: the item in flight when it last drew) while its elapsed time grew
  by BAR_STALL_S and by BAR_STALL_FACTOR times the bar's own time per item, are a stall.
  A bar redrawn with the same count after a long evaluation (tqdm.write clears and redraws every
  bar: tests/data/logs/tqdm_long_eval_healthy.log) is not ended by a stop, so it is not read.
- The loggers' dates (`2021-12-12 08:24:41,346`, ISO `2023-05-10T12:34:56`). A stop line that
  carries its date -- slurmstepd's `CANCELLED AT <date>`, Ray's release harness `Exiting with exit
  code N` (pasted ray-project/ray#21097), its `Process timed out.` -- with the nearest dated line
  before it STALL_S or more earlier, and nothing between but that line's continuation (no progress
  bar, no step record), is a run that went silent and was stopped: the last thing it said is
  what it was stuck after (#21097: Ray's `cannot be scheduled right now`, then 54 minutes of
  nothing, then the harness gives up).

What keeps healthy runs quiet: only an external stop is read, never a paste that simply ends or a
long gap alone (pasted NVIDIA/DeepLearningExamples#543 logs every 89 minutes, rvc-project's
epochs are 93 minutes apart, gentaiscool/end2end-asr-pytorch#39 has 262 minutes between two
lines -- all healthy); the silence must also be CADENCE_FACTOR times the longest gap between the
dated lines before it (a run that logs hourly and is stopped 70 minutes after its last line is
slow, not stuck); and a last line that announces a long phase (evaluation, saving a checkpoint,
loading, compiling, downloading) explains a silence.

State across batches: the reader looks back from the stop line over at most LOOKBACK_LINES lines;
those that an earlier batch read are kept in `Recent` (a bounded deque), so any cut of the text
into batches reads the same lines.
"""

from __future__ import annotations

import calendar
import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from controller.judge.repair import Line

BAR_STALL_S = 600.0
"""A bar standing at one count this long before the stop: ten minutes. The pasted training-split
logs hold no healthy bar redrawn at one count for even ten minutes and then stopped; a step of a
healthy run that takes that long shows it in the bar's own rate (see BAR_STALL_FACTOR)."""
BAR_STALL_FACTOR = 20.0
"""... and this many times the bar's own time per item (elapsed / count at the earlier redraw): a
run whose steps take 40 s each may spend 10 minutes on one step (a slow batch, a checkpoint), but
not twenty steps' time without moving."""
BAR_FIRST_STALL_S = 1800.0
"""A bar still at 0 (no time per item known: the first item includes start-up, compilation,
the first shard's download) must stand this long: half an hour."""
STALL_S = 1800.0
"""Dated lines: silence this long before the stop (half an hour). Shorter silences are a slow
phase (evaluation, a save) as often as a hang; the stalls pasted and stopped by harnesses and
schedulers are of tens of minutes to hours (ray-project/ray#21097: 54 minutes)."""
MAX_STALL_S = 14 * 86400.0
"""A gap longer than two weeks is two clocks (a collector's stamp beside the program's), not a
silence of one run: no job scheduler lets a job run that long."""
CADENCE_FACTOR = 3.0
"""The silence must be this many times the longest gap between the dated lines before it."""
NEAR_LINES = 12
"""The dated line the silence starts at must be this near the stop (non-blank lines): what is
between is that line's continuation (a warning's detail lines), not more output."""
LOOKBACK_LINES = 48
"""Lines looked back from the stop (the bar's two redraws, the dated lines for the cadence)."""

STOP_WORDS = ("exit", "cancelled at", "timed out")
"""The caller's cheap test (lower-case; LINE_WORDS covers them): every STOPS wording holds one."""

STOPS: tuple[tuple[str, re.Pattern], ...] = (
    # slurmstepd's kill report: `*** JOB 123 ON node CANCELLED AT 2023-05-10T12:34:56 DUE TO TIME LIMIT ***`
    # (SchedMD/slurm src/slurmd/slurmstepd/req.c:1122-1149 at 284c3b9, rules.py slurm-cancelled): the date is
    # the stop's own
    ("the scheduler (Slurm) cancelled the job", re.compile(r"CANCELLED AT (?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
                                                          r"(?: DUE TO (?P<why>[A-Z ]+[A-Z]))?")),
    # Ray's release-test harness (ray-project/ray release/e2e.py): `logger.warning("Process timed out.")` when its
    # timeout passes (at 00732fe, run_test_config's wait loop) and, on its way out, `Exiting with exit code N`
    # under its `[%(levelname)s %(asctime)s]` format (pasted ray-project/ray#21097: exit code 6, 54 minutes after
    # the run's last line)
    ("the harness stopped the run", re.compile(r"\bExiting with exit code (?P<code>[1-9]\d*)\b|\bProcess timed out\.")),
)

_DATE = re.compile(r"(?<!\d)(?P<Y>(?:19|20)\d\d)[-/](?P<M>[01]\d)[-/](?P<D>[0-3]\d)[T ](?P<h>[0-2]\d):(?P<m>[0-5]\d)"
                   r":(?P<s>[0-5]\d)")
_BAR = re.compile(r"(?:(?P<pct>\d{1,3})%\|[^|\n]{0,100}\|\s*)?(?P<n>\d+)(?:/(?P<total>\d+)|it) \[(?P<el>(?:\d+:)?\d\d:\d\d)"
                  r"(?:<|,|\])")
_QUIET_PHASE = re.compile(r"\b(?:eval\w*|validat\w*|testing|test set|sav(?:e|ing)|checkpoint\w*|download\w*|load\w*|"
                          r"compil\w*|export\w*|upload\w*|merg\w*|predict\w*|inference|generat\w*)\b", re.I)
"""A last line that names a long phase: its silence is that phase."""
_STEP_RECORD = re.compile(r"\b(?:step|iter(?:ation)?|epoch|batch)\b\s*[:=#]?\s*\d", re.I)


@dataclass(frozen=True)
class Stall:
    summary: str
    evidence: tuple[str, ...]


@dataclass
class Recent:
    """The last LOOKBACK_LINES lines earlier batches reported, as (line number, line)."""

    lines: deque = field(default_factory=lambda: deque(maxlen=LOOKBACK_LINES))

    def remember(self, rep: Sequence[Line], line_no0: int, base: int, end: int) -> None:
        last = self.lines[-1][0] if self.lines else 0
        tail: list[Line] = []
        for j in range(len(rep) - 1, -1, -1):  # (from the end: a batch is thousands of lines)
            ln = rep[j]
            if ln.src >= end:
                continue
            if ln.src < base or line_no0 + ln.src <= last or len(tail) >= LOOKBACK_LINES:
                break
            tail.append(ln)
        self.lines.extend((line_no0 + ln.src, ln) for ln in reversed(tail))


def _back(rep: Sequence[Line], i: int, line_no0: int, recent: Recent) -> Iterator[tuple[int, Line]]:
    """The lines before rep[i], nearest first: this batch's, then those earlier batches read."""
    lowest = line_no0 + rep[i].src
    for j in range(i - 1, -1, -1):
        no = line_no0 + rep[j].src
        if no < lowest:
            lowest = no
            yield no, rep[j]
    for no, ln in reversed(recent.lines):
        if no < lowest:
            yield no, ln


def _elapsed_s(text: str) -> int:
    s = 0
    for part in text.split(":"):
        s = s * 60 + int(part)
    return s


def _bar(text: str) -> tuple[str, int, str, int] | None:
    """(bar's description, count, total, elapsed s) of the last tqdm redraw in the text."""
    found = list(_BAR.finditer(text)) if "[" in text else []
    if not found:
        return None
    m = found[-1]
    desc = text[:m.start()].rstrip(" :")[-40:]
    return desc, int(m.group("n")), m.group("total") or "", _elapsed_s(m.group("el"))


def _fmt(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def frozen_bar(rep: Sequence[Line], i: int, line_no0: int, recent: Recent) -> Stall | None:
    """The two tqdm redraws nearest before rep[i] (a stop), of one bar, that show it stalled
    (module doc), or None."""
    later: tuple[Line, tuple[str, int, str, int]] | None = None
    for k, (_, ln) in enumerate(_back(rep, i, line_no0, recent)):
        if k >= LOOKBACK_LINES:
            return None
        bar = _bar(ln.raw)
        if bar is None:
            continue
        if later is None:
            later = (ln, bar)
            continue
        (ln1, (desc1, n1, total1, el1)), (desc0, n0, total0, el0) = later, bar
        if (ln.key, desc0, total0) != (ln1.key, desc1, total1):
            continue  # another bar (another worker's, an inner loop's) between: look further for this one's
        grew = el1 - el0
        if not 0 <= n1 - n0 <= 1 or grew <= 0:
            return None
        per_item = el0 / n0 if n0 else None
        if per_item is None and n1 == 0 and grew >= BAR_FIRST_STALL_S:
            rate = "it had not finished its first item"
        elif (per_item is not None and grew >= BAR_STALL_S
              and grew >= BAR_STALL_FACTOR * max(per_item, 1e-3) * max(1, n1 - n0)):
            rate = f"it had taken {per_item:.2g} s an item"
        else:
            return None
        what = f"`{desc1.strip()[-30:]}` " if desc1.strip() else ""
        at = f"{n1}/{total1}" if total1 else f"{n1}"
        return Stall(f"the progress bar {what}stood at {at} for {_fmt(grew)} by its own clock ({rate}) before "
                     "the stop", (ln.raw, ln1.raw))
    return None


def _dates(text: str, before: int | None = None) -> list[float]:
    out = []
    for m in _DATE.finditer(text):
        if before is not None and m.start() > before:
            break
        try:
            t = calendar.timegm((int(m["Y"]), int(m["M"]), int(m["D"]), int(m["h"]), int(m["m"]), int(m["s"])))
        except (ValueError, OverflowError):
            continue
        if 1 <= int(m["M"]) <= 12 and 1 <= int(m["D"]) <= 31:
            out.append(float(t))
    return out


def stop_after_silence(rep: Sequence[Line], i: int, line: str, line_no0: int, recent: Recent) -> Stall | None:
    """rep[i] (holding a STOP_WORDS word, `line` its repaired text) is a dated external stop after
    a silence by the dated lines' clock (module doc), or None."""
    hit = next(((who, m) for who, pat in STOPS if (m := pat.search(line)) is not None), None)
    if hit is None:
        return None
    who, m = hit
    why = f" due to {m.group('why').lower()}" if m.groupdict().get("why") else ""
    code = f" (exit code {m.group('code')})" if m.groupdict().get("code") else ""
    bar = frozen_bar(rep, i, line_no0, recent)
    if bar is not None:
        return Stall(f"{bar.summary}, then {who}{why}{code}: the run was stuck", bar.evidence + (rep[i].raw,))
    raw = rep[i].raw
    at = m.groupdict().get("at")
    if at:
        stop = _dates(at)
    else:
        pos = raw.find(m.group(0))
        stop = _dates(raw, pos if pos >= 0 else None)[-1:]
    if not stop:
        return None
    t_stop = stop[-1]
    last: tuple[float, Line] | None = None
    stamps: list[float] = []
    near = 0
    for k, (_, ln) in enumerate(_back(rep, i, line_no0, recent)):
        if k >= LOOKBACK_LINES:
            break
        if not ln.text.strip():
            continue
        ts = [t for t in _dates(ln.raw) if t <= t_stop]
        if last is None:
            near += 1
            if near > NEAR_LINES:
                return None
            if not ts:
                if _bar(ln.raw) or _STEP_RECORD.search(ln.text):
                    return None  # progress printed in the silence: not silent
                continue
            if _QUIET_PHASE.search(ln.text):
                return None
            last = (max(ts), ln)
            stamps.append(max(ts))
        elif ts:
            stamps.append(max(ts))
    if last is None:
        return None
    silence = t_stop - last[0]
    if not STALL_S <= silence <= MAX_STALL_S:
        return None
    run = [t for t in stamps if t <= last[0]]
    gaps = [a - b for a, b in zip(run, run[1:]) if a >= b]
    if gaps and silence < CADENCE_FACTOR * max(gaps):
        return None
    return Stall(f"no output for {_fmt(silence)} by the log's own clock, then {who}{why}{code}: the run was stuck "
                 f"after its last line", (last[1].raw, raw))
