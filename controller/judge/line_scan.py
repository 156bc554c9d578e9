"""`scan_lines`: log text -> findings, by rules plus structure.

The pass over a batch of lines: repair every line (repair.py), then
0. elastic restarts that recovered (a worker's death, then the group's progress again):
   that attempt's deaths and tracebacks count as handled;
1. the rule table on each line that holds a trigger word (rules.py);
2. the metric-record reader on each line that holds "nan"/"inf" (metrics.py), and on
   lines with a finite gradient norm while a run of NaN ones is open;
3. the loss-scale trajectory (loss_scale.py) and a wait for peers retried past a minute
   (peer_wait.py);
4. the traceback reader (tracebacks.py) and usage errors (usage_errors.py);
then the findings that only explain a failure when nothing better does (secondary).

A rule's finding is one per (kind, rule summary) -- another rank's copy of the same error,
or a library's echo of it (CuPy failing at exit after an illegal address), is that
finding again -- but its summary says more than the rule's words where the structure
around the line tells: the kernel assertion printed above a device-side assert
(kernel_asserts.py), NCCL's last error printed below a NCCL error (nccl_reports.py), the
collective whose timeout made the watchdog end the process; and, when the line is a
traceback's exception line, a crash names the exception and the user's frame and
expression (`torch.AcceleratorError: CUDA illegal memory access at train.py:147 in step
(`loss.item()`)`).
State that must outlive a batch -- the loss-scale trajectory, the wait for peers, the run of non-finite
gradient-norm records in a row, whether compile trouble was seen, the kernel assertions seen,
which rule findings were reported under which summary -- lives in a ScanState the
caller may keep (TextScanner does), so a log fed in any chunking gives the same findings.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from controller.follow.logparse import LineParser
from controller.judge import hints as H
from controller.judge.distribution_args import HEAD_LOOKBACK_LINES, VALUES_LOOKAHEAD_LINES, nan_argument
from controller.judge.evidence import EVIDENCE_LINES, bounded, signal_suffix
from controller.judge.kernel_asserts import KernelAssertions
from controller.judge.loss_scale import LossScaleTrajectory, unit_scale
from controller.judge.metric_values import finite_norm, maybe_non_finite, non_finite_values, zero_loss
from controller.judge.nan_records import MIN_PAIRS as NAN_RECORD_PAIRS
from controller.judge.nan_records import NanRecords
from controller.judge.nccl_backtrace import warn_cause
from controller.judge.nccl_reports import read_report
from controller.judge.peer_wait import WAIT_WORDS, PeerWait
from controller.judge.progress_stall import STOP_WORDS, Recent, frozen_bar, stop_after_silence
from controller.judge.repair import Line, repaired
from controller.judge.rules import Hit, classify, recoverable, triggered
from controller.judge.runtime_crashes import WORDS as RUNTIME_WORDS
from controller.judge.runtime_crashes import runtime_crashes
from controller.judge.stack_dumps import WORD as TIMER_DUMP_WORD
from controller.judge.stack_dumps import TimerDump
from controller.judge.stopped_wait import COLLECTIVES, stopped_wait
from controller.judge.tensor_dumps import MAX_ROWS as TENSOR_DUMP_ROWS
from controller.judge.tensor_dumps import all_nan_dump
from controller.judge.tracebacks import (
    GDB_PY_BT,
    TB_START,
    Traceback,
    failing_expression,
    frame_location,
    python_frame,
    read_tracebacks,
    user_frame,
)
from controller.judge.usage_errors import usage_errors
from controller.judge.word_sieve import WordSieve, lines_with_words
from controller.judge.xla_rendezvous import WORDS as XLA_WAIT_WORDS
from controller.judge.xla_rendezvous import RendezvousWait
from controller.records import Finding

MATCH_CHARS = 8192
MAX_FINDINGS_PER_SCAN = 100
HANDLED_LOOKAHEAD_LINES = 5
PROGRESS_LOOKAHEAD_LINES = 60
PROGRESS_LOOKBACK_LINES = 300
RESTART_LOOKAHEAD_LINES = 400
"""How far after an elastic launcher's worker-death line to look for what it did next:
give up (its ChildFailedError report) or restart the workers (their progress again)."""
_ELASTIC_DEATH = "failed (exitcode"
_ELASTIC_GIVE_UP = ("ChildFailedError", "Root Cause (first observed failure)")
NONFINITE_NORM_RECORDS = 3
"""Gradient-norm records IN A ROW that must read NaN/Inf before it is a finding, once a
finite norm has been seen: one or two are a skipped fp16 step (the scaler grows, overflows,
halves: normal at any point of a run); a NaN *loss* counts at once."""
STARTUP_NONFINITE_NORM_RECORDS = 20
"""The same before any finite norm: an fp16 scaler's search starts high (DeepSpeed 2**32,
torch 2**16) and halves once per overflowing step, so a run's first ~16 records can all be
NaN/Inf and it is still healthy; past this many it is not a search."""

_EXC_IN_LINE = re.compile(r"(?:^|[\s:])(?:[a-z_]\w*\.)*([A-Za-z]\w*(?:Error|Exception))"
                          r"(?: \(see above for traceback\))?:\s+(\S.*)$")
"""`FloatingPointError: Loss became infinite or NaN at iteration=166!` -- an exception named in
the line a NaN/hang rule read (also behind another word: `Runtime Error: floatingPointError: ...`;
and in TensorFlow 1.x's re-raise, `InvalidArgumentError (see above for traceback): Nan in ...`)."""
ZERO_LOSS_NAN_NORM_RECORDS = 2
"""Records whose loss reads exactly 0 while the gradient norm is NaN/Inf: the fp16 scaler's
start-up search overflows the gradients of a finite loss; a loss of 0.0 beside a NaN norm
is masked-out or broken data, at any point of a run -- so the start-up allowance ends."""
FINAL_NONFINITE_NORM_RECORDS = 2
"""Records in a row that read NaN/Inf where the text ends (the last thing the run printed;
one is enough beside a loss of exactly 0): no finite norm came after them, so a reader
sees a run still not training -- judged only on final text (final_findings). The fp16
start-up search is told from it by what follows: finite norms, which end the run of NaN
ones (a healthy log shows its recovery)."""
CUT_OFF_TRAILING_LINES = 1
"""Lines of other text a traceback cut off at the end may have after its last frame."""
OOM_EXCEPTIONS = ("OutOfMemoryError", "ResourceExhaustedError", "MemoryError")
"""Exception names that mean memory ran out (torch.cuda / torch / ray, TF and Paddle, Python)."""

NOT_RAM_MEMORYERROR = "Cannot allocate write+execute memory"
"""A MemoryError that is no shortage of RAM: cffi's ffi.callback() when the system refuses a
writable+executable page (W^X hardening, SELinux, systemd MemoryDenyWriteExecute, Apple silicon's
libffi) -- python-cffi/cffi src/c/_cffi_backend.c:6394 @ 45f531087c53e1977de2712056a1d3193eab73bc,
PyErr_SetString(PyExc_MemoryError, "Cannot allocate write+execute memory for ffi.callback(). You
might be running on a system that prevents this. ..."). Read as a crash, not an OOM."""

TABLE_LOOKBACK_LINES = 40
_TABLE_SPLIT = re.compile(r"\s*\|\s*|\t+|\s{2,}")
_HEADER_CELL = re.compile(r"^[A-Za-z][\w@./()%-]*(?: (?:[A-Za-z][\w@./()%-]*|/))*$")  # nolearn's `Train / Val`
_YOLO_LOSS_COLUMNS = frozenset(("box", "obj", "cls", "total", "dfl", "seg", "kobj", "pose", "mask", "rpn"))
"""Loss columns of YOLO's epoch tables (header `Epoch gpu_mem box obj cls total ...`),
whose names do not say loss: read as losses only under a header that starts with Epoch."""

_HANDLED = re.compile(
    r"\b(?:retry(?:ing)?|will retry|retried|re-?trying|attempt(?:ing)? to recover|recover(?:ed|ing)|"
    r"continuing|skipping (?:this )?(?:batch|sample|step|example)|ignor(?:ed|ing) (?:this|the) (?:error|exception)|"
    r"falling back)\b", re.I)
_RECOMPILE_FUNC = re.compile(r"function: '([^']+)' \(([^)]+)\)")
_LAUNCHER_EXCEPTIONS = ("ChildFailedError", "CalledProcessError", "ProcessRaisedException", "ProcessExitedException")
"""A launcher's own exception only says a child failed: secondary to the child's error."""
_RUN_ENDING_THREAD = "background workers are no longer alive"
"""A thread death that ends the run: batchgenerators' `results_loop` thread (nnU-Net's data
loader) sets the abort event and then raises this RuntimeError, and the main thread's
`__get_next_item` raises the same on seeing the event (MIC-DKFZ/batchgenerators
batchgenerators/dataloading/nondet_multi_threaded_augmenter.py, results_loop line 130-133 and
__get_next_item line 203-207, commit 9dc3d49b68ea11e0f37c14d5b75658d9eb364a5e; pasted
MIC-DKFZ/nnUNet#1437): not a thread the process lives on without."""
_COMPILE_WORDS = ("flex_attention", "torch._dynamo", "recompile", "torch.compile", "inductor")


@dataclass(frozen=True)
class _CutOff:
    line: int                  # log line of the traceback's first line
    name: str                  # the exception an IPython header named, else ""
    where: str                 # ' at file.py:12 in f' of its last frame
    evidence: tuple[str, ...]


@dataclass
class ScanState:
    """What outlives one batch (see module doc)."""

    loss_scale: LossScaleTrajectory = field(default_factory=LossScaleTrajectory)
    peer_wait: PeerWait = field(default_factory=PeerWait)
    xla_wait: RendezvousWait = field(default_factory=RendezvousWait)
    nan_records: NanRecords = field(default_factory=NanRecords)
    timer_dump: TimerDump = field(default_factory=TimerDump)
    nonfinite_norms: int = 0          # NaN/Inf gradient-norm records in a row
    finite_norm_seen: bool = False
    zero_loss_norms: int = 0          # ... of which the loss read exactly 0
    norm_evidence: list[tuple[int, str]] = field(default_factory=list)
    norm_reported: bool = False
    compile_trouble: bool = False
    primary_seen: bool = False
    kernel_asserts: KernelAssertions = field(default_factory=KernelAssertions)
    rule_keys: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """A rule's own (kind, summary) -> the key it was reported under (a summary that names
    the exception, the cause...): the same failure seen again -- another rank's copy, a
    library's echo of it -- is that finding, in this batch or a later one."""
    consumed: set[int] = field(default_factory=set)  # log lines a structure reader used (no rule reads them)
    last_collective: str = ""  # the last NCCL collective the watchdog reported timed out
    open_at_end: _CutOff | None = None
    """A traceback still being printed where the text read so far ends (no exception line
    yet): a crash only once the text is known to be final (final_findings)."""
    final_reported: bool = False
    last_line: str = ""        # the last non-blank line read (repaired), and its number
    last_line_no: int = 0
    last_line_explained: bool = False  # a reader made a finding of it
    recent: Recent = field(default_factory=Recent)  # the last lines earlier batches read (progress_stall.py)
    hang_note: str = ""  # the text ends with the user's note that it hangs (`... hangs forever`): _note_last_line


@dataclass
class _Made:
    i: int
    base: tuple[str, str]
    detail: str = ""
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


def _compose(summary: str, detail: str) -> str:
    return f"{summary}: {detail}" if detail else summary


def _now(now_s: float | None) -> float:
    return time.time() if now_s is None else now_s


class _Batch:
    """One call's lines, their repair, and the findings made from them."""

    def __init__(self, raw: list[str], base: int, end: int, line_no0: int, t: float, run_id: str | None,
                 st: ScanState):
        self.st = st
        self.raw = raw
        self.rep = repaired(raw)
        self.base, self.end = base, end
        self.line_no0 = line_no0
        self.t = t
        self.run_id = run_id
        self.found: dict[tuple[str, str], Finding] = {}
        self.secondary: list[Finding] = []
        self.hit_at: dict[int, tuple[str, str]] = {}
        self.secondary_at: set[int] = set()
        self.ended_at: set[int] = set()  # lines whose NaN/hang wording is an exception's: its crash is made
        self.ignored_at: set[int] = set()  # exception lines of tracebacks Python printed and went on from
        # a rule finding made at line index i: its rule summary and detail, and the evidence
        # its readers added before/after the line (kept when a traceback gives it frames)
        self.made: dict[tuple[str, str], _Made] = {}

    def reported(self, i: int) -> bool:
        return self.base <= self.rep[i].src < self.end

    def make(self, hit: Hit, i: int, evidence: list[str]) -> Finding:
        return Finding(kind=hit.kind, severity=hit.severity, summary=hit.summary,  # type: ignore[arg-type]
                       evidence=bounded(evidence), hint=hit.hint, first_seen_s=self.t,
                       line=self.line_no0 + self.rep[i].src, run_id=self.run_id)

    def add(self, f: Finding, i: int, secondary: bool = False) -> None:
        if secondary:
            self.secondary.append(f)
            self.secondary_at.add(i)
            return
        if f.key not in self.found and len(self.found) < MAX_FINDINGS_PER_SCAN:
            self.found[f.key] = f
        self.hit_at[i] = f.key

    def replace_finding(self, old: tuple[str, str], new: Finding) -> None:
        """A finding made from a rule, now with a fuller summary (the exception's name and
        where it was raised): the same finding under its new key."""
        del self.found[old]
        self.found.setdefault(new.key, new)
        for i, k in self.hit_at.items():
            if k == old:
                self.hit_at[i] = new.key
        made = self.made.pop(old, None)
        if made is not None:
            self.made[new.key] = made
            self.st.rule_keys[made.base] = new.key

    def handled_after(self, i: int, progress_key: str | None = None, since: int | None = None) -> bool:
        """A retry/recovery message soon after; or (with progress_key) training progress
        resumed on the same launcher prefix -- another rank's progress proves nothing, and
        neither does a progress bar redrawn at the step it stopped at (tqdm closing)."""
        rep = self.rep
        for j in range(i + 1, min(len(rep), i + 1 + HANDLED_LOOKAHEAD_LINES)):
            if "Traceback" in rep[j].text:
                break
            if _HANDLED.search(rep[j].text[:MATCH_CHARS]):
                return True
        if progress_key is None:
            return False
        probe = LineParser()
        before = self._last_step(since if since is not None else i, progress_key, probe)
        bar_step: int | None = None
        for j in range(i + 1, min(len(rep), i + 1 + PROGRESS_LOOKAHEAD_LINES)):
            ln = rep[j]
            low = ln.text.lower()
            if ln.key != progress_key or not ("step" in low or "%|" in ln.text or "iter" in low):
                continue
            p = probe.parse(ln.text).progress
            if p is None or (before is not None and p.step <= before):
                continue
            if "%|" not in ln.text:
                return True
            # a bar: its closing redraw follows any exception; only a bar that moves on
            # twice says the loop went on
            if bar_step is not None and p.step > bar_step:
                return True
            bar_step = p.step
        return False

    def _last_step(self, i: int, key: str, probe: LineParser) -> int | None:
        """The step of the last progress line (same prefix) before index i, if near."""
        for j in range(i - 1, max(-1, i - 1 - PROGRESS_LOOKBACK_LINES), -1):
            ln = self.rep[j]
            if ln.key != key:
                continue
            p = probe.parse(ln.text).progress
            if p is not None:
                return p.step
        return None


def scan_lines(lines: Sequence[str], first_line_no: int = 1, now_s: float | None = None,
               run_id: str | None = None, *, context_before: Sequence[str] = (),
               context_after: Sequence[str] = (), state: ScanState | None = None,
               deferred: list[Finding] | None = None) -> list[Finding]:
    """Findings in `lines` (clean text, as split_lines returns; lines[0] is line
    `first_line_no` of the log).

    `context_before`: lines just before `lines` (the end of the previous batch), used
    only to complete a traceback that started there; `context_after`: lines that follow
    (held back for the next batch), used only to see whether an error was handled. No
    finding is reported for a context line. An error followed within a few lines by a
    retry/recovery message, or by more training progress on the same launcher prefix, was
    handled and is not reported. One finding per (kind, summary); evidence is bounded.

    Secondary findings (a launcher's "a child failed") are reported only when no primary
    failure was seen; a caller that scans in batches passes `deferred` to collect them and
    decides at the end (TextScanner.finish), so the answer does not depend on where the
    batches were cut.
    """
    st = state if state is not None else ScanState()
    ctx = list(context_before)
    raw = ctx + list(lines) + list(context_after)
    b = _Batch(raw, len(ctx), len(ctx) + len(lines), first_line_no - len(ctx), _now(now_s), run_id, st)
    if st.consumed:
        st.consumed = {n for n in st.consumed if n >= b.line_no0}
    texts = _texts(b)
    want_norms = st.nonfinite_norms > 0 or not st.finite_norm_seen
    candidates, structure = _candidates(texts, want_norms)
    if not want_norms and any(_nonfinite_norm(texts[i]) for i in candidates):
        candidates, structure = _candidates(texts, True)  # a run of NaN norms starts here: see where it ends
    restarted = _recovered_restarts(b, texts, candidates)
    _line_rules(b, st, candidates, restarted)
    if st.timer_dump.open or st.timer_dump.pending:
        st.timer_dump.pending = False
        _timer_dump_lines(b, st)
    if st.nan_records.pending or any(texts[i].count("=") >= NAN_RECORD_PAIRS and "nan" in texts[i].lower()
                                     for i in candidates):
        # an all-NaN record is in this batch or open from an earlier one: read every record line, finite or not
        for i, text in enumerate(texts):
            if b.reported(i) and text.count("=") >= NAN_RECORD_PAIRS:
                st.nan_records.feed(text if len(text) <= MATCH_CHARS else text[:MATCH_CHARS], b.line_no0 + b.rep[i].src)
    if lines:
        st.open_at_end = None  # (an empty batch says nothing new about where the text ends)
    if structure - _NOT_TRACEBACK_WORDS:
        _traceback_findings(b, restarted, record_open=bool(lines) and not context_after)
    if "usage:" in structure:
        _usage_findings(b)
    if structure & set(RUNTIME_WORDS):
        _runtime_crash_findings(b)
    if lines:
        _note_last_line(b, st)
    _loss_scale_finding(b, st)
    _peer_wait_finding(b, st)
    st.recent.remember(b.rep, b.line_no0, b.base, b.end)
    found = b.found
    if any(f.kind in ("oom", "crash", "hang") and f.severity == "critical" for f in found.values()):
        st.primary_seen = True
    if deferred is not None:
        deferred.extend(b.secondary)
    elif not st.primary_seen:
        for f in b.secondary:
            if f.key not in found:
                found[f.key] = f
    if st.compile_trouble:
        for k, f in list(found.items()):
            if f.kind == "oom" and f.hint == H.HINT_CUDA_OOM:
                found[k] = replace(f, hint=f.hint + H.HINT_OOM_AFTER_COMPILE)
    return sorted(found.values(), key=lambda f: (f.line or 0))


LINE_WORDS = (
    "memory", "kill", "nan", "inf", "scal", "overflow", "skipped", "exit", "segmentation", "sigsegv",
    "abort", "fatal", "timed out", "timeout", "timing out", "watchdog", "nccl", "error", "alloc_failed",
    "exhausted", "cache", "warming up", "dataloader", "encountered in worker", "illegal", "assert", "xid",
    "off the bus", "floating", "heartbeat", "rendezvous", "recompil", "hit config", "flex_attention", "matrix",
    "lost communication", "will shutdown",
    "childfailed", "died", "return code", "terminat", "hangup", "finite", "process down", "oom", "allocat",
    "dead", "free", "py_callstack", "received by pid", "signal", "barrier", "check fail", "output for",
    "from device", "remainder", "dump debug", "retry", "running for", "pending", "still waiting", "only has", "核心已转储",
    "cancelled at", "exception in device", "stack trace", "已杀死", "dst tensor", "failedscheduling", "c10d",
    "段错误", "已中止", "已放弃", "总线错误", "非法指令", "浮点异常", "munmap", "malloc", "corrupted", "backtrace",
    "restart", "crashloop", "crashed", "overrides", "trap", "primary job", "unhandled exception", "luajit", "lua: ", "lua5", "exception code",
    "fulfill", "waiting for model", "log is in", "invalid __", "mesh master", "unstuck", "may be stuck",
    "placement group", "not enough gpus", "f tensorflow/", "f external/org_tensorflow/", "1.#ind",
    "f .\\tensorflow/", "f external/xla/", "f external/tsl/", "f external/local_tsl/", "f xla/", "f tsl/",
    "received at time",
    "total mem size", "executable batch", "paging file", "tasks to connect", "times out", "connecting to rank",
)
"""A coarse word list: every word a per-line reader (a rule's trigger, the metric reader's
nan/inf, the loss-scale words) contains one of these, so a line holding none is skipped
after the batch's word sieve (word_sieve.py) -- fewer, shorter words than the rules' own
triggers, because this test runs on every line (tests/test_detectors_readers.py checks the
covering). The sieve looks for each word once in the whole batch and then only for the
words found, so a word a healthy log never holds costs one pass over its batch's sieved
text; words are still shared: "memory" stands for every "... out of memory", "error" for
every "... error" wording, "allocat" for the allocators'."""


STRUCTURE_WORDS = ("traceback", 'file "', "exception", "cell in", ".py in ", "│", "usage:", "c++ call stacks",
                   *[w for w in RUNTIME_WORDS if w != "exception"])
"""Words that wake the traceback, usage and other-runtime crash readers (they read whole batches)."""
_NOT_TRACEBACK_WORDS = {"usage:", *RUNTIME_WORDS} - {"exception"}
"""Structure words that wake no traceback reading (their own readers' only)."""

_LINE_SIEVE = WordSieve(LINE_WORDS)
_LINE_SIEVE_NORMS = WordSieve(LINE_WORDS + ("norm",))
_STRUCTURE_SIEVE = WordSieve(STRUCTURE_WORDS)


def _texts(b: _Batch) -> list[str]:
    return [ln.text for ln in b.rep] if isinstance(b.rep, list) else b.raw


def _nonfinite_norm(text: str) -> bool:
    low = text.lower()
    return "norm" in low and maybe_non_finite(low)


def _candidates(texts: list[str], norms: bool = False) -> tuple[list[int], set[str]]:
    """Indexes of lines that hold any LINE_WORDS word (and, with `norms`, the word "norm":
    finite gradient norms end a run of NaN ones, so they are read while such a run is open
    or before the first finite norm), and which STRUCTURE_WORDS occur anywhere in the
    batch."""
    return lines_with_words(texts, _LINE_SIEVE_NORMS if norms else _LINE_SIEVE, _STRUCTURE_SIEVE)


def _recovered_restarts(b: _Batch, texts: list[str], candidates: list[int]) -> list[int]:
    """Indexes of elastic worker-death lines (torchrun: `failed (exitcode: 1) local_rank: 1
    (pid: N)`) after which the launcher restarted the workers instead of giving up: before
    any ChildFailedError report, training progress starts again at or below the step it had
    reached (a restarted group begins anew or from its checkpoint; a dying attempt's late
    lines would be past it). That attempt's deaths and tracebacks were recovered from, as a
    retried exception is; the last attempt's, which the launcher gave up on, are reported."""
    out: list[int] = []
    for i in candidates:
        if _ELASTIC_DEATH not in texts[i]:
            continue
        probe = LineParser()
        reached = None
        for j in range(i - 1, max(-1, i - 1 - PROGRESS_LOOKBACK_LINES), -1):
            p = probe.parse(b.rep[j].text).progress
            if p is not None:
                reached = p.step
                break
        if reached is None:
            continue
        for j in range(i + 1, min(len(texts), i + 1 + RESTART_LOOKAHEAD_LINES)):
            if any(w in texts[j] for w in _ELASTIC_GIVE_UP):
                break
            if "step" not in texts[j].lower():
                continue
            p = probe.parse(b.rep[j].text).progress
            if p is not None and p.step <= reached:
                out.append(i)
                break
    return out


def _in_restarted_attempt(i: int, restarted: list[int]) -> bool:
    """Line i belongs to an attempt that a restart recovered: at or before one of its
    death lines, after the previous one, within the lookback."""
    prev = -1
    for r in restarted:
        if prev < i <= r and r - i <= PROGRESS_LOOKBACK_LINES:
            return True
        prev = r
    return False


def _timer_dump_lines(b: _Batch, st: ScanState) -> None:
    """Every line of a batch that holds a faulthandler timer header, or that a dump open from an
    earlier batch runs into: the dump's thread headers and frames hold no trigger word
    (stack_dumps.TimerDump reads where each thread waits)."""
    td = st.timer_dump
    for i, ln in enumerate(b.rep):
        line_no = b.line_no0 + ln.src
        if not b.reported(i) or line_no <= td.last_fed:
            continue
        td.last_fed = line_no
        td.feed(ln.text if len(ln.text) <= MATCH_CHARS else ln.text[:MATCH_CHARS], line_no, ln.raw)


def _line_rules(b: _Batch, st: ScanState, candidates: list[int], restarted: list[int]) -> None:
    rep = b.rep
    for i in candidates:
        if not b.reported(i) or i in restarted:
            continue
        ln = rep[i]
        line_no = b.line_no0 + ln.src
        if line_no in st.consumed:
            continue  # a line of a report a structure reader already read (nccl_reports.py)
        line = ln.text if len(ln.text) <= MATCH_CHARS else ln.text[:MATCH_CHARS]
        low = line.lower()
        if "assertion" in low and st.kernel_asserts.feed(line, line_no, ln.raw):
            continue
        st.loss_scale.feed(line, low, b.line_no0 + ln.src)
        if any(w in low for w in WAIT_WORDS):
            st.peer_wait.feed(line, line_no, ln.raw, ln.key)
        elif "running for" in low or "pending" in low:
            st.peer_wait.feed_status(line, line_no)
        if any(w in low for w in XLA_WAIT_WORDS):
            st.xla_wait.feed(line, line_no, ln.raw)
        if TIMER_DUMP_WORD in low:
            st.timer_dump.pending = True  # a timer header in this batch: _timer_dump_lines reads its dump
        if not st.compile_trouble and ("flex_attention" in low or "hit config." in low):
            st.compile_trouble = True
        non_finite = maybe_non_finite(low) and (_metric_record(b, st, i, line) or _table_record(b, i, line))
        if not non_finite and "norm" in low and (st.nonfinite_norms or not st.finite_norm_seen) and finite_norm(line):
            st.finite_norm_seen = True
            st.nonfinite_norms = st.zero_loss_norms = 0
            st.norm_evidence.clear()
        if any(w in low for w in STOP_WORDS):
            stall = stop_after_silence(rep, i, line, b.line_no0, st.recent)
            if stall is not None:
                h = Hit("hang", "critical", stall.summary, H.HINT_STALL, rule="stop-after-stall")
                b.found.setdefault((h.kind, h.summary), b.make(h, i, list(stall.evidence)))
        hit = classify(line, low) if triggered(low) else None
        if hit is None:
            hit = _c10d_timeout(b, i, line, low) or ((_pyspy_collective(b, i, line) or _gdb_collective(b, i, line))
                                                     if "c10d" in low else None) \
                or (_distribution_nan(b, i, line) if "found invalid values" in low else None) \
                or (_nan_tensor_dump(b, i, line) if "nan" in low and ("tensor([" in low or "array([" in low) else None)
            if hit is None:
                continue
        if hit.rule == "c10-error-frames" and _warning_backtrace(b, i):
            continue
        evidence = [ln.raw]
        if hit.rule == "bare-killed":
            hit = _own_teardown(b, i, hit)
        if hit.rule == "recompile-limit":
            hit, evidence = _recompile_detail(b, i, hit, evidence)
        elif hit.rule == "child-failed":
            hit, evidence = _child_failed_detail(b, i, hit, evidence)
        if hit.kind == "oom" and recoverable(hit) and b.handled_after(i):
            hit = Hit("oom", "warning", hit.summary + " (recovered: the trainer skipped or retried)",
                      "the trainer caught it; if it repeats, lower the batch/token budget", rule=hit.rule)
        if hit.secondary:
            b.add(b.make(hit, i, evidence), i, True)
            continue
        if hit.rule == "nccl-watchdog":
            st.last_collective = _collective(line)
        elif hit.rule == "nccl-dump-signal" and any(k[0] == "hang" for k in st.rule_keys):
            continue  # the monitor's echo of a timeout a line above already reported (rules.py nccl-dump-signal)
        if hit.kind in ("nan", "hang") and hit.severity == "critical":
            em = _EXC_IN_LINE.search(line)
            if em is None and hit.rule == "distribution-nan":
                # the argument check's message began lines above (a parameter's repr between): its head names it
                em = next((m for m in (_EXC_IN_LINE.search(rep[j].text) for j in range(i - 1, max(-1, i - 1 - HEAD_LOOKBACK_LINES), -1))
                           if m is not None), None)
            if em is not None:
                # the wording is an exception's message: that exception ended the program
                crash = Hit("crash", "critical", _ended(em.group(1), em.group(2)), H.HINT_CRASH)
                b.found.setdefault((crash.kind, crash.summary), b.make(crash, i, [ln.raw]))
                b.ended_at.add(i)
        base = (hit.kind, hit.summary)
        made = _rule_detail(b, st, i, line_no, hit, base)  # also when seen: its readers use up their lines
        seen = st.rule_keys.get(base)
        if seen is not None:
            b.hit_at[i] = seen  # the same failure again (another rank's copy, a library's echo)
            continue
        f = b.make(replace(hit, summary=_compose(hit.summary, made.detail)), i, made.before + evidence + made.after)
        b.add(f, i)
        if f.key in b.found:  # (not when the batch's finding cap refused it)
            st.rule_keys[base] = f.key
            b.made[f.key] = made


_C10D_RAISE = re.compile(r"^\s*Exception raised from (?P<fn>\w+) at (?P<path>\S*?distributed/c10d/(?P<file>[\w.]+)):"
                         r"(?P<line>\d+)")
"""The origin c10::Error prints under its message (`Exception raised from doWait at
../torch/csrc/distributed/c10d/TCPStore.cpp:445 (most recent call first):`)."""
_TIMEOUT_WORD = re.compile(r"[Tt]ime(?:d ?out|out)\b|TIMEOUT\b")
C10D_RAISE_LOOKAHEAD_LINES = 2
"""Lines after an exception's message its origin line may be (a blank line between)."""


_C10D_RETRY = re.compile(r" - retrying \(try=\d+, timeout=\d+ms")
"""TCPStore's client warning that it will try again (`[W ... TCPStore.cpp:340] [c10d] TCP client failed to
connect/validate to host H:P - retrying (try=0, timeout=600000ms, delay=3647ms): ...`, with the socket
error's C++ frames below it; real torch 2.13 output: tests/data/logs/tcpstore_client_retry_interrupted_k14.log):
its `timeout=` is the budget the client has left, not a timeout that happened, and a client that connects on
a later try trains on."""


def _c10d_timeout(b: _Batch, i: int, line: str, low: str) -> Hit | None:
    """A timeout raised by torch's distributed runtime, told by where it was raised: a
    message that says it timed out (whatever its wording -- TCPStore::doWait throws a bare
    `Socket Timeout`, torch/csrc/distributed/c10d/TCPStore.cpp at 00321a0, `C10_THROW_ERROR(
    DistStoreError, "Socket Timeout")`; pasted rwth-i6/returnn#1621) whose origin line below
    names a c10d source file (the store, a process group, its socket layer). The same words
    raised from anywhere else are that code's error, not a peer that never came."""
    if "time" not in low or not _TIMEOUT_WORD.search(line) or _C10D_RETRY.search(line):
        return None
    rep, key = b.rep, b.rep[i].key
    for j in range(i + 1, min(len(rep), i + 1 + C10D_RAISE_LOOKAHEAD_LINES)):
        if rep[j].key != key:
            continue
        text = rep[j].text
        if not text.strip():
            continue
        m = _C10D_RAISE.match(text) if "Exception raised from" in text else None
        if m is None:
            return None
        what = ("the c10d store" if "Store" in m.group("file") else
                "a process group" if m.group("file").startswith("ProcessGroup") else "torch.distributed")
        em = _EXC_IN_LINE.search(line)
        said = (f"{em.group(1)}: {em.group(2)}" if em else line.strip())[:120]
        return Hit("hang", "critical", f"{what} timed out ({said}, raised from {m.group('fn')} at "
                   f"{m.group('file')}:{m.group('line')}): a rank never answered or never arrived",
                   H.HINT_NCCL_TIMEOUT, rule="c10d-raise-timeout")
    return None


def _distribution_nan(b: _Batch, i: int, line: str) -> Hit | None:
    """torch.distributions' argument check whose printed tensor below holds NaN (distribution_args.py)."""
    rep = b.rep
    before = [rep[j].text for j in range(max(0, i - HEAD_LOOKBACK_LINES), i)]
    following = [rep[j].text for j in range(i + 1, min(len(rep), i + 1 + VALUES_LOOKAHEAD_LINES))]
    said = nan_argument(line, before, following)
    return None if said is None else Hit("nan", "critical", said, H.HINT_NAN, rule="distribution-nan")


def _nan_tensor_dump(b: _Batch, i: int, line: str) -> Hit | None:
    """A printed tensor/array whose every value down its rows is NaN (tensor_dumps.py)."""
    rep = b.rep
    following = [rep[j].text for j in range(i + 1, min(len(rep), i + 1 + TENSOR_DUMP_ROWS))]
    said = all_nan_dump(line, following)
    return None if said is None else Hit("nan", "critical", said, H.HINT_NAN, rule="nan-tensor-dump")


_PYSPY_THREAD = re.compile(r"^\s*Thread (?P<id>\S+) \((?P<st>idle|active|gil)\)(?:: \"(?P<name>[^\"]*)\")?\s*$")
_PYSPY_FRAME = re.compile(r"^\s+(?P<fn>[\w<>.]+) \((?P<file>[^()\s]+?\.py)(?::(?P<line>\d+))?\)\s*$")
_PYSPY_NATIVE = re.compile(r"^\s+(?P<fn>\S.*?) \((?P<lib>[^()\s]+)\)\s*$")
"""A native frame of `py-spy dump --native` (src/dump.rs: a C/C++ frame prints its symbol, or its
address `0x7f6b47aa3f16`, then the library in parentheses, `    c10d::Work::wait (libtorch_cpu.so)`);
they stand above the innermost Python frame (real py-spy 0.4.3 output of a gloo rank parked in
dist.barrier: tests/data/logs/pyspy_native_barrier_k14.log). A `.py` in the parentheses is a
Python frame, not a native one."""
_NATIVE_WAIT = re.compile(r"^(?:c10d::|gloo::|nccl|at::cuda::|cuda)", re.I)
"""The native frame that names the wait (c10d's Work::wait, a gloo/NCCL/CUDA call) rather than libc's futex."""
_NATIVE_NAME = re.compile(r"[^<(\s]*")
"""A C++ frame's name without its template arguments and parameters."""
PYSPY_FRAMES_LOOKBACK = 64
"""Lines to look across for a py-spy thread's header (another process's lines between) and for
the first caller outside torch.distributed below its innermost frame (deep stacks)."""


def _pyspy_collective(b: _Batch, i: int, line: str) -> Hit | None:
    """A py-spy dump (benfred/py-spy src/dump.rs at d230d82: `Thread <id> (<idle|active>):
    "<name>"`, then its frames innermost first, `    <function> (<file>:<line>)`) whose thread
    is inside one of torch.distributed's collectives: its innermost frame is that collective
    in torch/distributed/ (pasted huggingface/accelerate#3104: `all_gather_into_tensor
    (torch/distributed/distributed_c10d.py:2709)`). A dump is what one takes of a process
    that stopped; a thread parked in a collective is a rank waiting for the others. A thread
    that only passes through a collective further up its stack is not read as waiting in it.
    `py-spy dump --native` puts the C/C++ frames (`c10d::Work::wait (libtorch_cpu.so)`) above
    the innermost Python frame: they are passed over to the thread's header, and the c10d /
    gloo / NCCL / CUDA one among them is named (real py-spy 0.4.3 output of a gloo rank in
    dist.barrier: tests/data/logs/pyspy_native_barrier_k14.log)."""
    m = _PYSPY_FRAME.match(line)
    if m is None or m.group("fn") not in COLLECTIVES or "torch/distributed/" not in m.group("file"):
        return None
    rep, key = b.rep, b.rep[i].key
    native: list[str] = []  # `py-spy dump --native`: C/C++ frames above the innermost Python frame
    head = None
    for j in range(i - 1, max(-1, i - 1 - PYSPY_FRAMES_LOOKBACK), -1):
        if rep[j].key != key:
            continue
        head = _PYSPY_THREAD.match(rep[j].text)
        nat = None if head is not None else _PYSPY_NATIVE.match(rep[j].text)
        if nat is None or ".py" in nat.group("lib"):
            break
        native.append(nat.group("fn"))
    if head is None:
        return None  # no thread header right above: not a dump, or not the thread's innermost Python frame
    caller = ""
    for j in range(i + 1, min(len(rep), i + 1 + PYSPY_FRAMES_LOOKBACK)):
        f = _PYSPY_FRAME.match(rep[j].text) if rep[j].key == key else None
        if f is None:
            break
        if "torch/distributed/" not in f.group("file") and "torch/_dynamo/" not in f.group("file"):
            caller = f", called from {f.group('fn')} ({f.group('file')}:{f.group('line') or '?'})"
            break
    name = f' "{head.group("name")}"' if head.group("name") else ""
    where = f"{m.group('file')}:{m.group('line')}" if m.group("line") else m.group("file")
    waits = next((f for f in reversed(native) if _NATIVE_WAIT.search(f)), "")  # innermost first
    name_m = _NATIVE_NAME.match(waits)
    below = f", blocked in {name_m.group(0)} (native frames)" if waits and name_m else ""
    return Hit("hang", "critical", f"a rank waits in a collective: py-spy shows thread {head.group('id')}{name} "
               f"({head.group('st')}) inside {m.group('fn')} ({where}){caller}{below}", H.HINT_NCCL_TIMEOUT,
               rule="pyspy-collective")


_GDB_BUILTIN = re.compile(r"^\s*<built-in method (?P<fn>\w+) of \w+ object at remote 0x[0-9a-f]+>\s*$")


def _gdb_collective(b: _Batch, i: int, line: str) -> Hit | None:
    """gdb's py-bt of a live process (tracebacks.GDB_PY_BT: `Traceback (most recent call first):`, then
    the innermost frame first; a C function shows as `<built-in method allreduce of PyCapsule object at
    remote 0x...>`) whose innermost Python frame is one of torch.distributed's collectives: the
    process is parked in it, a rank waiting for the others (pasted deepspeedai/DeepSpeed#1969: every
    rank of a 512-GPU job in all_reduce). Only the frame right under the header (or under the
    built-in it called) is read: a collective further out is a frame the stack passes through."""
    fr = python_frame(line)
    if fr is None or fr[2] not in COLLECTIVES or "torch/distributed/" not in fr[0]:
        return None
    path, lineno, fn = fr
    rep, key = b.rep, b.rep[i].key
    above = [j for j in range(i - 1, max(-1, i - 4), -1) if rep[j].key == key and rep[j].text.strip()][:2]
    texts = [rep[j].text.strip() for j in above]
    if not texts:
        return None
    if texts[0] == GDB_PY_BT:
        via = ""
    elif len(texts) == 2 and texts[1] == GDB_PY_BT and _GDB_BUILTIN.match(texts[0]):
        via = f", in {_GDB_BUILTIN.match(texts[0]).group('fn')}"  # type: ignore[union-attr]
    else:
        return None
    return Hit("hang", "critical", f"a rank waits in a collective: gdb's py-bt shows the process inside "
               f"{fn} ({path.rsplit('/', 1)[-1]}:{lineno}){via}", H.HINT_NCCL_TIMEOUT,
               rule="gdb-collective")


_GLOG_WARNING = re.compile(r"^\[?W\d{4} \d\d:\d\d:\d\d")
"""c10's warning prefix (`[W1204 04:19:04.028172676 TCPStore.cpp:340]`, glog's `W1204 ...` without brackets)."""
WARNING_BACKTRACE_LOOKBACK = 3


def _warning_backtrace(b: _Batch, i: int) -> bool:
    """The c10::Error frames at line i belong to a WARNING that carries the error's backtrace, not to an
    exception raised: the `Exception raised from ...` line above them continues a c10 warning line
    (TCPStore's client `[W ... TCPStore.cpp:340] [c10d] TCP client failed to connect/validate ... - retrying`
    prints the socket error's what() with its frames and tries again: real torch 2.13 output,
    tests/data/logs/tcpstore_client_retry_interrupted_k14.log)."""
    rep, key = b.rep, b.rep[i].key
    seen = [j for j in range(i - 1, max(-1, i - 1 - WARNING_BACKTRACE_LOOKBACK), -1) if rep[j].key == key]
    for n, j in enumerate(seen):
        if rep[j].text.startswith("Exception raised from "):
            above = seen[n + 1] if n + 1 < len(seen) else None
            return above is not None and bool(_GLOG_WARNING.match(rep[above].text.lstrip()))
    return False


_TEARDOWN = re.compile(r"Received sigquit from a child proces")
"""A program announcing that it is about to SIGKILL its own process tree: sglang's SIGQUIT
handler (python/sglang/srt/entrypoints/engine.py _set_envs_and_config at 001067f: it logs
`Received sigquit from a child process. It usually means the child failed.` and calls
kill_process_tree(os.getpid()), itself included; pasted sgl-project/sglang#3752)."""
TEARDOWN_LOOKBACK_LINES = 3


def _own_teardown(b: _Batch, i: int, hit: Hit) -> Hit:
    """A shell's bare `Killed` right after the program said it is killing its process tree is
    that teardown, not the kernel's OOM killer: the failure it follows is the cause."""
    for j in range(i - 1, max(-1, i - 1 - TEARDOWN_LOOKBACK_LINES), -1):
        if _TEARDOWN.search(b.rep[j].text):
            return Hit("crash", "critical", "process killed by SIGKILL: the program killed its own process tree "
                       "after a failure (its teardown, not the OOM killer)",
                       "the failure reported above the kill is the cause", rule="own-teardown")
    return hit


_OP_TYPE = re.compile(r"SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")


def _collective(line: str) -> str:
    m = _OP_TYPE.search(line)
    return f"{m.group('op')} (SeqNum {m.group('seq')})" if m else ""


def _rule_detail(b: _Batch, st: ScanState, i: int, line_no: int, hit: Hit, base: tuple[str, str]) -> _Made:
    """What structure around a rule's line adds to its finding: the kernel assertion a
    device-side assert came from (the lines above it), NCCL's last error (the lines below
    a NCCL error), the collective whose timeout made the watchdog end the process."""
    made = _Made(i, base)
    if hit.rule == "device-assert":
        ka = st.kernel_asserts.take(line_no)
        if ka is not None:
            made.detail, made.before = ka.detail(), ka.evidence()
    elif hit.rule == "nccl-error":
        report = read_report(b.rep, i)
        made.detail = report.cause
        made.after = [b.rep[j].raw for j in report.lines]
        st.consumed.update(b.line_no0 + b.rep[j].src for j in report.lines)
    elif hit.rule == "nccl-thread-error":
        cause, j = warn_cause(b.rep, i)
        made.detail = cause
        if j is not None and j != i:
            made.before = [b.rep[j].raw]
    elif hit.rule == "nccl-takedown" and st.last_collective:
        made.detail = f"{st.last_collective} had timed out"
    return made


def _metric_record(b: _Batch, st: ScanState, i: int, line: str) -> bool:
    """Judge a line's NaN/Inf metric values; True when it held one."""
    values = non_finite_values(line)
    if not values:
        pairs = _NAN_PAIR.findall(line)
        if len(pairs) >= NAN_PAIRS_IN_RECORD and _ITERATION.search(line):
            b.add(b.make(Hit("nan", "critical", f"every value of a training record reads NaN/Inf ({', '.join(pairs[:4])} "
                             "...)", H.HINT_NAN), i, [b.rep[i].raw]), i)
            return True
        m = _SPLIT_LOSS.search(line) if "loss" in line.lower() else None
        if m is not None:
            b.add(b.make(Hit("nan", "critical", f"loss is NaN/Inf ({m.group('part')} loss = {m.group('v').lower()})",
                             H.HINT_NAN), i, [b.rep[i].raw]), i)
            return True
        return False
    loss = next((v for v in values if v.is_loss), None)
    if loss is not None:
        what = ("the policy's outputs are NaN/Inf" if "/chosen" in loss.key or "/rejected" in loss.key
                else "loss is NaN/Inf")
        b.add(b.make(Hit("nan", "critical", f"{what} ({loss.key} = {loss.value})", H.HINT_NAN), i,
                     [b.rep[i].raw]), i)
        return True
    st.nonfinite_norms += 1
    # a record cut in two (a hard wrap inside a progress bar's line): its loss is on the line before
    st.zero_loss_norms += zero_loss(line) or ("loss" not in line.lower() and i > 0
                                              and zero_loss(b.rep[i - 1].text[-MATCH_CHARS:]))
    if len(st.norm_evidence) < EVIDENCE_LINES:
        st.norm_evidence.append((b.line_no0 + b.rep[i].src, b.rep[i].raw))
    if not st.norm_reported and "scal" in line.lower() and unit_scale(line):
        # a record that shows its loss scale at 1.0 (bf16: no scaler): nothing skipped this step
        st.norm_reported = True
        v = values[0]
        what = "loss pinned at 0.0 while the gradient norm" if zero_loss(line) else "gradient norm"
        hit = Hit("nan", "critical", f"{what} is NaN/Inf ({v.key} = {v.value}) at a loss scale of 1.0: no dynamic "
                  "fp16 scaler skipped this step, the NaN gradients were applied", H.HINT_NAN)
        b.add(b.make(hit, i, [b.rep[i].raw]), i)
        return True
    need = (NONFINITE_NORM_RECORDS if st.finite_norm_seen or st.zero_loss_norms >= ZERO_LOSS_NAN_NORM_RECORDS
            else STARTUP_NONFINITE_NORM_RECORDS)
    if st.nonfinite_norms >= need and not st.norm_reported:
        st.norm_reported = True
        v = values[0]
        if st.zero_loss_norms >= need:
            what = (f"loss pinned at 0.0 while the gradient norm is NaN/Inf ({v.key} = {v.value}) in {need}+ "
                    "records in a row: every step is skipped or the weights are already NaN")
        else:
            what = f"gradient norm is NaN/Inf ({v.key} = {v.value}) in {need}+ records in a row"
        f = b.make(Hit("nan", "critical", what, H.HINT_NAN), i, [e for _, e in st.norm_evidence])
        b.add(replace(f, line=st.norm_evidence[0][0]), i)
    return True


_NAN_PAIR = re.compile(r"(?<![\w.])([A-Za-z][\w/]{0,24}):\s*[-+]?(?:nan|inf)\b", re.I)
_ITERATION = re.compile(r"\b(?:iters?|iteration|step|epoch)\b", re.I)
NAN_PAIRS_IN_RECORD = 4
"""A training record (`(epoch: 1, iters: 500, ...) D_A: nan G_A: nan cycle_A: nan idt_A: nan`)
whose losses carry their own names (a GAN's D_A/G_A): four or more `name: nan` pairs on
a line that counts iterations. An evaluation's `precision: nan recall: nan` is fewer, or
names no iteration."""
_SPLIT_LOSS = re.compile(r"(?:^|[\s|,(\[])(?P<part>train|training|dev|val|valid|validation|eval|test)\s*[:=]\s*"
                         r"(?P<v>[-+]?(?:nan|inf))(?![a-z])", re.I)
"""A loss line that names its parts: `Loss(time/mini-batch) - Epoch 1: train = nan(1581s) | dev = nan`
(only on a line that says loss)."""


def _table_record(b: _Batch, i: int, line: str) -> bool:
    """A row of a fixed-width table (a header line of column names above, then rows of
    values: YOLO's epoch table, a notebook's `Step  Training Loss  Validation Loss`) whose
    loss column reads NaN/Inf. True when it held one."""
    if _TENSOR_NAN.match(line) and any(_TENSOR_FINITE.match(b.rep[j].text)
                                       for j in range(max(0, i - TABLE_LOOKBACK_LINES), i)):
        # a loop that prints its loss tensor: finite, then NaN
        hit = Hit("nan", "critical", f"a printed loss tensor turned NaN/Inf ({line.strip()[:40]})", H.HINT_NAN)
        b.add(b.make(hit, i, [b.rep[i].raw]), i)
        return True
    if _FASTPROGRESS_NAN.search(line):
        # fastprogress's bar carries the smoothed training loss as its comment
        hit = Hit("nan", "critical", "loss is NaN/Inf (the progress bar's running loss)", H.HINT_NAN)
        b.add(b.make(hit, i, [b.rep[i].raw]), i)
        return True
    m = _STEP_VALUE_NAN.match(line)
    if m is not None:
        # a step counter and one unnamed value: the loop prints its loss so
        hit = Hit("nan", "critical", f"loss is NaN/Inf (step {m.group('step')}: {m.group('v').lower()}, the only value "
                  "a step line prints)", H.HINT_NAN)
        b.add(b.make(hit, i, [b.rep[i].raw]), i)
        return True
    csv = _CSV_ROW.match(line) is not None
    row = ([c.strip() for c in line.split(",")] if csv
           else _LIST_CELL.sub(_list_cell_value, line).translate(_BOX_TO_SPACE).split())
    if not any(v.lower().strip(":,") in ("nan", "inf", "-inf", "+inf") for v in row):
        return False
    if len(row) == 2 and row[0].isdigit() and i > 0:
        # a bare `step value` series (a script's own print): NaN after finite values of its kind
        prev = b.rep[i - 1].text.split()
        if len(prev) == 2 and prev[0].isdigit() and _FINITE.match(prev[1]) and int(prev[0]) < int(row[0]) \
                and not _pandas_missing(b, i, row[1]):
            hit = Hit("nan", "critical", f"a printed step/value series turned NaN/Inf (step {row[0]}: {row[1]})",
                      H.HINT_NAN)
            b.add(b.make(hit, i, [b.rep[i - 1].raw, b.rep[i].raw]), i)
            return True
    for j in range(i - 1, max(-1, i - 1 - TABLE_LOOKBACK_LINES), -1):
        text = b.rep[j].text.strip()
        delimited = text[:1] in _TABLE_EDGES and text[-1:] in _TABLE_EDGES
        head = text.translate(_BOX_TO_PIPE).strip("|").strip()
        if not head[:1].isalpha():
            continue  # (every header cell starts with a letter: a timestamp, `[`, a digit open no header)
        if csv:
            if "," not in head:
                continue
            cols = [c.strip() for c in head.split(",")]
            if len(cols) != len(row):
                continue  # a CSV row has its header's cells, one for one
        else:
            cols = [c for c in _TABLE_SPLIT.split(head) if c]
            if len(cols) < 3 and " " in head and not delimited:
                cols = head.split()
        # a header of two columns only where its cells are delimited (markdown, box drawing, CSV):
        # two words apart by spaces are too often prose
        if len(cols) < (2 if delimited or csv else 3) or not all(_HEADER_CELL.match(c) for c in cols):
            continue
        if len(row) < len(cols):
            cols = _two_word_losses(cols)  # fastai v1: `epoch train loss valid loss ...`
        if len(row) < len(cols):
            return False  # a header, but this line is no row of it
        frame = not csv and len(row) == len(cols) + 1 and row[0].isdigit() and b.rep[j].text[:1] == " "
        if frame:
            row = row[1:]  # a pandas DataFrame's index: its header cell is blank
        yolo = cols[0].lower() == "epoch"
        for k, (name, value) in enumerate(zip(cols, row)):
            low = name.lower()
            v = value.lower().strip(":,")
            if v not in ("nan", "inf", "-inf", "+inf") or _IGNORED_COLUMN.match(low):
                continue
            if frame and value == PANDAS_NA and _frame_missing_cell(b, i, cols, row, k):
                continue
            if "loss" in low or (yolo and low in _YOLO_LOSS_COLUMNS):
                hit = Hit("nan", "critical", f"loss is NaN/Inf ({name} = {v}, a table's column)", H.HINT_NAN)
                b.add(b.make(hit, i, [b.rep[j].raw, b.rep[i].raw]), i)
                return True
        return False
    if _YOLO_ROW.match(line):
        # a YOLO epoch row without its header in view: the values after the GPU memory are losses
        hit = Hit("nan", "critical", "loss is NaN/Inf (a YOLO epoch row's loss column)", H.HINT_NAN)
        b.add(b.make(hit, i, [b.rep[i].raw]), i)
        return True
    return False


_PANDAS_FOOTER = re.compile(r"^(?:Name: (?P<name>.+?), )?(?:Length: \d+, )?dtype: \w+$")
"""The footer pandas prints under a Series (`Name: time, dtype: float64`)."""
PANDAS_FOOTER_LOOKAHEAD = 40


def _pandas_missing(b: _Batch, i: int, value: str) -> bool:
    """Row i of a bare `index value` series is a pandas Series' row whose `NaN` (spelled so:
    pandas' marker of a missing cell) belongs to a column that is no loss: the footer below
    the rows names it (`Name: time, dtype: float64` -- pasted torchmd/torchmd-net#231: the
    `time` column of Lightning's metrics.csv, NaN in a row that logged no time). A Series
    named for a loss, or without its footer in view, is judged as any series."""
    if value != "NaN":
        return False
    for j in range(i + 1, min(len(b.rep), i + 1 + PANDAS_FOOTER_LOOKAHEAD)):
        text = b.rep[j].text.strip()
        m = _PANDAS_FOOTER.match(text)
        if m is not None:
            return "loss" not in (m.group("name") or "").lower()
        cells = text.split()
        if len(cells) != 2 or not cells[0].isdigit():
            return False  # (the series ended without a footer)
    return False


FRAME_LOOKAHEAD_LINES = 40


def _frame_missing_cell(b: _Batch, i: int, cols: list[str], row: list[str], k: int) -> bool:
    """Row i of a printed pandas DataFrame (an index column first, under a blank header cell) whose
    loss column k reads `NaN`, pandas' marker of a missing cell, is a cell that was never logged when
    another loss column of the row holds a finite value (the row is another split's record) or a row
    below it in the frame shows the column finite again. Lightning's CSVLogger writes its metrics.csv
    one row per logging call, so the training rows have no val_loss and the validation rows no
    train_loss (Lightning-AI/pytorch-lightning src/lightning/fabric/loggers/csv_logs.py at 75e112f,
    _ExperimentWriter: log_metrics appends one dict per row, save() writes them with a csv.DictWriter
    over the union of the keys, _record_new_keys :251); the notebook's `pd.read_csv(.../metrics.csv)` prints
    those holes as NaN. A loss that went NaN stays NaN in every loss column, in every row after it."""
    for c, other in enumerate(row[:len(cols)]):
        if c != k and "loss" in cols[c].lower() and _FINITE_CELL.match(other):
            return True
    for j in range(i + 1, min(len(b.rep), i + 1 + FRAME_LOOKAHEAD_LINES)):
        cells = b.rep[j].text.split()
        if len(cells) != len(cols) + 1 or not cells[0].isdigit():
            return False
        if _FINITE_CELL.match(cells[k + 1]):
            return True
    return False


_FINITE_CELL = re.compile(r"^[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?$")


def _two_word_losses(cols: list[str]) -> list[str]:
    """A header written with single spaces whose loss columns are two words (`train loss`,
    `valid loss`): each `loss` joins the word before it, so the names line up with a row."""
    out: list[str] = []
    for c in cols:
        if c.lower() == "loss" and out and out[-1].lower() not in ("epoch", "step", "iter", "iteration"):
            out[-1] += " " + c
        else:
            out.append(c)
    return out


PANDAS_NA = "NaN"
"""pandas prints a missing value of a float Series as `NaN` (`Series.to_string(na_rep='NaN')`, its
default): `10          NaN` above `Name: time, dtype: float64` is an index and an empty cell, not a
step whose loss went NaN (torchmd/torchmd-net#231). A script's own print of a float reads `nan`
(Python's, numpy's and torch's repr; C's printf `nan`/`-nan`), as the step/value series do
(prajdabre/yanmtt#7: `76980 nan`)."""
_FASTPROGRESS_NAN = re.compile(r"\d+(?:\.\d+)?% \[\d+/\d+ [\d:]+<[\d:]+ [-+]?(?:nan|inf)\]")
"""fastprogress (fastai's bars): `71.39% [6930/9707 3:56:27<1:34:45 nan]`, done/total,
elapsed<remaining and then the bar's comment, which fastai fills with the smoothed loss."""
_STEP_VALUE_NAN = re.compile(r"^\s*(?:step|iter(?:ation)?)\s+(?P<step>\d+)(?:/\d+)?\s*:\s*(?P<v>[-+]?(?:nan|inf))"
                             r"\s*(?:[(\[]\d+(?:\.\d+)?%[)\]])?\s*$", re.I)
"""A step line whose only value is unnamed: OpenSplat prints its loss as `Step 101: 0.1734 (20%)`
(WebODM/OpenSplat opensplat.cpp:163 at 0f17ec3f58ef05bb2ed51a69e89d1f2b48b8a109, `"Step " << step
<< ": " << mainLoss.item<float>() << " (" ...`; `[20%]` from 2947938b7a2152b560489a963e47e961825dd32a
on, :178; before its progress percentage, `Step 10: 0.17`). A NaN/Inf there is the loss's."""
_CSV_ROW = re.compile(r"^\s*[^\s,\[\]{}()|]+(?:\s*,\s*[^\s,\[\]{}()|]+)+\s*$")
"""A CSV row: single-token cells between commas, nothing else (`2,nan,nan`, `2, nan, nan`)."""
_TABLE_EDGES = frozenset("|│┃║")
"""A table row's first and last character when its cells are delimited: markdown's and
prettytable's `|`, rich's and tabulate's box drawing (`│ 20 │ nan │`, `┃ step ┃ loss ┃`)."""
_BOX_TO_PIPE = str.maketrans({"│": "|", "┃": "|", "║": "|"})
_BOX_TO_SPACE = str.maketrans({"|": " ", "│": " ", "┃": " ", "║": " "})
_YOLO_ROW = re.compile(r"^\s*\d+/\d+\s+\d+(?:\.\d+)?G\s+(?:[\d.]+\s+){0,3}(?:nan|inf)\s", re.I)
"""`  41/299  65.1G  nan  0.01516 ...`: epoch/epochs, GPU memory, then the loss columns (every
YOLO from v3 to v11 prints them so)."""
_TENSOR_NAN = re.compile(r"^\s*tensor\(\[?[-+]?(?:nan|inf)\b")
_TENSOR_FINITE = re.compile(r"^\s*tensor\(\[?[-+]?\d")
_FINITE = re.compile(r"^[-+]?\d+\.\d+(?:[eE][-+]?\d+)?$")
_LIST_NUMBER = r"[-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf)"
_LIST_CELL = re.compile(r"\[\s*(" + _LIST_NUMBER + r"(?:\s*,\s*" + _LIST_NUMBER + r")*)\s*\]", re.I)
"""A table cell that is a printed list of numbers: DeepXDE's `Step  Train loss  Test loss
Test metric` table prints each loss as `[5.47e+03, 1.20e-01]` (deepxde/display.py
`list_to_str`, `"[{:s}]".format(", ".join(...))`, one list per column): one cell however
many members it has, so the rows line up with the header."""


def _list_cell_value(m: re.Match) -> str:
    """One token for a list cell: `nan` (or `inf`) when a member is non-finite, else the
    first member (a finite value of the column)."""
    members = [v.strip().lower() for v in m.group(1).split(",")]
    bad = [v for v in members if v.lstrip("+-") in ("nan", "inf")]
    return bad[0] if bad else members[0]
_IGNORED_COLUMN = re.compile(r"^(?:best|min|lowest|prev|previous|init|initial|max|target|expected)[ _]")


_LAST_EXCEPTION = re.compile(r"^(?:(?:[a-z_]\w*\.)*(?P<name>[A-Z]?\w*(?:Error|Exception))(?:\([\w.]+\))?(?::\s+\S|$)"
                             r"|(?:[a-z_]\w*\.)+[A-Z]\w*:\s+\S)")
"""An exception line (`RuntimeError: ...`, `FloatingPointError: ...`) that is the last line of
final text: the program ended on it, traceback or not (a paste of the last line)."""


_RAY_UNSCHEDULABLE = re.compile(r"(?:The following resource request|The actor or task with ID \w+(?: is pending and)?) "
                                r"cannot (?:be scheduled right now|currently be scheduled)")
"""Ray's word that a task or actor waits for resources it cannot get: the autoscaler's `Warning: The
following resource request cannot be scheduled right now: {...}. This is likely due to all cluster
resources being claimed by actors.` (ray-project/ray python/ray/autoscaler/_private/autoscaler.py
StandardAutoscaler._report_pending_infeasible at 8f70aec, emitted only while the cluster is full of
actors, every 30 s) and the driver's `The actor or task with ID ... cannot be scheduled right now` /
older `... is pending and cannot currently be scheduled` (pasted ray-project/ray#21097, #6016). A
warning that progress follows was a wait for resources that came; as the LAST line of final text it
is the program's last word: the actor never ran (pasted ray-project/llm-applications#58)."""


def final_findings(st: ScanState, now_s: float | None = None, run_id: str | None = None,
                   found: Sequence[Finding] = ()) -> list[Finding]:
    """What only text known to be final shows (check-log at end of file; the watch once the
    process ended and its log was read to the end): a traceback cut off in its frames, a
    run of NaN/Inf gradient norms that is the last thing the run printed, and -- given the
    log's findings `found` -- that a run whose only end is a SIGKILL (no memory reason
    printed: host OOM is the likely cause, not a fact) died: a crash beside that OOM
    finding. A live read cannot judge these -- the traceback may be being written right
    now, the next record may be finite -- so scan_lines never does. Reported once per state."""
    if st.final_reported:
        return []
    st.final_reported = True
    out: list[Finding] = []
    t = _now(now_s)
    killed = [f for f in found if f.kind == "oom" and "SIGKILL" in f.summary]
    if killed and not any(f.kind == "crash" and f.severity == "critical" for f in found):
        k = killed[0]
        out.append(Finding(kind="crash", severity="critical", summary="the run died by SIGKILL (" + k.summary + ")",
                           evidence=k.evidence, hint=k.hint, first_seen_s=t, line=k.line, run_id=run_id))
    last = st.last_line
    em = _LAST_EXCEPTION.match(last) or (len(last) >= 4 and TB_START.startswith(last.rstrip(":")))
    if em and st.open_at_end is None and not st.last_line_explained:
        memory = (isinstance(em, re.Match) and (em.group("name") or "").endswith(OOM_EXCEPTIONS)
                  and NOT_RAM_MEMORYERROR not in last)
        out.append(Finding(kind="oom" if memory else "crash", severity="critical",
                           summary=f"{last[:160]} (the last line of the log)", evidence=(last,),
                           hint=H.HINT_HOST_OOM if memory else H.HINT_CRASH, first_seen_s=t, line=st.last_line_no,
                           run_id=run_id))
    ka = st.kernel_asserts.current
    if ka is not None and not any(f.kind == "crash" for f in found) and not any(f.kind == "crash" for f in out):
        # a kernel's assertion printed and the text ends before the device-side assert it raises
        out.append(Finding(kind="crash", severity="critical", summary=f"CUDA kernel assertion failed: {ka.detail()}",
                           evidence=bounded(ka.evidence()), hint=H.HINT_CUDA_FATAL, first_seen_s=t,
                           line=ka.first_line_no, run_id=run_id))
    cut = st.open_at_end
    if cut is not None:
        kind = "oom" if cut.name and cut.name.rsplit(".", 1)[-1] in OOM_EXCEPTIONS else "crash"
        what = f"{cut.name}: " if cut.name else ""
        hint = H.HINT_CUDA_OOM if kind == "oom" else H.HINT_CRASH
        out.append(Finding(kind=kind, severity="critical",
                           summary=f"{what}traceback cut off, last frame{cut.where or ' unknown'} (the output "
                                   "stopped inside the traceback: the process was dying)",
                           evidence=bounded(list(cut.evidence)), hint=hint, first_seen_s=t, line=cut.line,
                           run_id=run_id))
        if cut.name.rsplit(".", 1)[-1] == "FloatingPointError":
            # the exception an IPython header names is the invalid-value check of JAX (jax/_src/dispatch.py
            # _check_special under jax_debug_nans/jax_debug_infs: `raise FloatingPointError(f"invalid value (nan)
            # encountered in {name}")`) or of NumPy's seterr(all='raise'): a NaN/Inf was produced, even though the
            # paste stops before the message (pasted google-deepmind/mujoco#1484)
            out.append(Finding(kind="nan", severity="critical",
                               summary="a FloatingPointError was being raised: an invalid-value check (JAX "
                                       "debug_nans/debug_infs, NumPy seterr) caught a NaN/Inf (its traceback is cut off)",
                               evidence=bounded(list(cut.evidence)), hint=H.HINT_NAN, first_seen_s=t, line=cut.line,
                               run_id=run_id))
    xw = st.xla_wait
    if xw.waiting and not xw.reported and not any(f.kind == "hang" for f in found):
        xw.reported = True
        out.append(Finding(kind="hang", severity="critical", summary=xw.summary(), evidence=bounded(list(xw.evidence)),
                           hint=H.HINT_NCCL_TIMEOUT + "; XLA: the devices/processes that never reached the collective "
                           "(a rank that diverged, died or is still compiling); xla_gpu_executable_warn_stuck_timeout",
                           first_seen_s=t, line=xw.first_line, run_id=run_id))
    if (_RAY_UNSCHEDULABLE.search(st.last_line) and not st.last_line_explained
            and not any(f.kind == "hang" for f in found)):
        out.append(Finding(kind="hang", severity="critical",
                           summary="a Ray task/actor cannot be scheduled and nothing follows where the text ends: "
                                   "it waits for resources it never gets",
                           evidence=(st.last_line,) + ((st.hang_note,) if st.hang_note else ()),
                           hint="compare what the task/actor requests (num_gpus, num_cpus, custom resources) with "
                                "`ray status`: free the resources other actors hold, or add nodes",
                           first_seen_s=t, line=st.last_line_no, run_id=run_id))
    nr = st.nan_records.at_end(st.last_line_no)
    if nr is not None and not any(f.kind == "nan" for f in found):
        st.nan_records.reported = True
        out.append(Finding(kind="nan", severity="critical", summary=nr[0], evidence=bounded(nr[1]), hint=H.HINT_NAN,
                           first_seen_s=t, line=nr[2], run_id=run_id))
    pw = st.peer_wait
    if pw.barrier_open_at_end(st.last_line_no) and not any(f.kind == "hang" for f in found):
        pw.reported = True
        out.append(Finding(kind="hang", severity="critical", summary=pw.barrier_summary(),
                           evidence=bounded(list(pw.evidence) + [st.last_line]), hint=pw.wording.hint if pw.wording
                           else "", first_seen_s=t, line=pw.first_line, run_id=run_id))
    if pw.connect_open_at_end(st.last_line, st.last_line_no) and not any(f.kind == "hang" for f in [*found, *out]):
        pw.reported = True
        assert pw.connect_wait is not None
        out.append(Finding(kind="hang", severity="critical", summary=pw.connect_summary(),
                           evidence=bounded([pw.connect_wait[3], st.last_line]),
                           hint="start every task of the cluster (TF_CONFIG / jax.distributed num_processes) and check "
                                "that each can reach the coordinator's host:port", first_seen_s=t,
                           line=pw.connect_wait[0], run_id=run_id))
    td = st.timer_dump
    parked = not td.reported and not td.ends_text(st.last_line, st.last_line_no) and td.parked_then_exited(found)
    if parked and not any(f.kind == "hang" for f in found):
        td.reported = True
        out.append(Finding(kind="hang", severity="critical", summary=td.collective_summary(),
                           evidence=bounded([td.raw, td.frame]), hint=H.HINT_NCCL_TIMEOUT,
                           first_seen_s=t, line=td.line, run_id=run_id))
    if not td.reported and td.ends_text(st.last_line, st.last_line_no) and not any(f.kind == "hang" for f in found):
        td.reported = True
        summary = td.summary() + (f" (a thread in the collective {td.collective})" if td.collective else "")
        out.append(Finding(kind="hang", severity="critical", summary=summary,
                           evidence=bounded([td.raw, st.last_line]),
                           hint="the dumped stacks show where each thread waits (a queue get, a lock, a collective, "
                                "a socket read): the innermost frames under each `Thread 0x...` header",
                           first_seen_s=t, line=td.line, run_id=run_id))
    if (not st.norm_reported and st.norm_evidence and (st.nonfinite_norms >= FINAL_NONFINITE_NORM_RECORDS
                                                       or (st.zero_loss_norms and st.nonfinite_norms))):
        st.norm_reported = True
        out.append(Finding(kind="nan", severity="critical",
                           summary=f"gradient norm is NaN/Inf in the last {st.nonfinite_norms} records (where the "
                                   "log ends)", evidence=bounded([e for _, e in st.norm_evidence]), hint=H.HINT_NAN,
                           first_seen_s=t, line=st.norm_evidence[0][0], run_id=run_id))
    return out


def _recompile_detail(b: _Batch, i: int, hit: Hit, evidence: list[str]) -> tuple[Hit, list[str]]:
    """dynamo prints the function and the last guard failure on the next lines."""
    import os

    for j in range(i + 1, min(len(b.rep), i + 4)):
        text = b.rep[j].text
        fm = _RECOMPILE_FUNC.search(text)
        if fm:
            hit = replace(hit, summary=f"{hit.summary.split(':')[0]} for '{fm.group(1)}' "
                                       f"({os.path.basename(fm.group(2))}): that code now runs eager")
        if "function:" in text or "last reason" in text:
            evidence.append(b.rep[j].raw)
    return hit, evidence


_BLOCK_FIELD = re.compile(r"^\s*(rank|exitcode|traceback|host|error_file)\s*:")
_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)")


def _child_failed_detail(b: _Batch, i: int, hit: Hit, evidence: list[str]) -> tuple[Hit, list[str]]:
    """torchrun's block: rank / exitcode / traceback lines follow."""
    for j in range(i + 1, min(len(b.rep), i + 24)):
        text = b.rep[j].text
        if _BLOCK_FIELD.search(text):
            evidence.append(b.rep[j].raw)
            em = _EXITCODE.search(text)
            if em and em.group(1) != "-9":
                code = int(em.group(1))
                hit = replace(hit, summary=f"torchrun: a worker failed (exitcode {code}"
                                           f"{signal_suffix(-code) if code < 0 else ''})")
    return hit, evidence


def _traceback_findings(b: _Batch, restarted: list[int], record_open: bool = False) -> None:
    rep = b.rep
    opened: list[Traceback] = []
    done = read_tracebacks(rep, opened)
    if record_open:
        _record_cut_off(b, opened)
    for tb in done:
        i = tb.exc
        if i is not None and tb.ignored:
            # `Exception ignored in: ...` (CPython's unraisable hook: a __del__ at interpreter exit,
            # a finaliser) or a logging error: printed, and the program went on or was already
            # ending -- its exception line is explained, even as the log's last line
            # (ultralytics/yolov5#8406: the DataLoader's __del__ at the end of training)
            b.ignored_at.add(i)
        if i is None or not b.reported(i) or tb.superseded or tb.ignored or _in_restarted_attempt(i, restarted):
            continue
        if i in b.hit_at and _explains(b, i):
            # The exception line itself is an OOM/crash rule's line: give that finding the
            # frames; a crash's summary also names the exception and where it was raised.
            # (A hang's or NaN's wording in an exception -- `RuntimeError: Wait timeout`,
            # `ValueError: nan loss` -- says why; the exception ending the program is a crash.)
            key = b.hit_at[i]
            f = b.found.get(key)
            made = b.made.get(key)
            if f is None:
                continue
            if made is not None and made.i == i:
                if f.kind == "crash":
                    summary = _compose(_named(made.base[1], rep, tb), made.detail)
                elif f.kind == "oom" and tb.short_name not in f.summary and tb.name.endswith(("Error", "Exception")):
                    summary = f"{f.summary} ({tb.name})"  # the exception, as the user will search for it
                else:
                    summary = f.summary
                b.replace_finding(key, replace(f, summary=summary,
                                               evidence=bounded(made.before + _tb_evidence(rep, tb) + made.after)))
            elif len(f.evidence) == 1:
                b.found[key] = replace(f, evidence=bounded(_tb_evidence(rep, tb)))
            continue
        if tb.inner and tb.inner.rsplit(".", 1)[-1] in OOM_EXCEPTIONS[:2]:
            hit = Hit("oom", "critical", f"{tb.short_name}({tb.inner}){_loc(rep, tb)}: {tb.message[:120]}",
                      H.HINT_ACCEL_OOM)
            b.add(b.make(hit, i, _tb_evidence(rep, tb)), i)
            continue
        if tb.short_name == "OutOfMemoryError" or tb.short_name == "ResourceExhaustedError":
            hit = Hit("oom", "critical", f"{tb.short_name}{_loc(rep, tb)}: {tb.message[:120] or 'out of memory'}",
                      H.HINT_CUDA_OOM if tb.short_name == "OutOfMemoryError" else H.HINT_ACCEL_OOM)
            b.add(b.make(hit, i, _tb_evidence(rep, tb)), i)
            continue
        if tb.short_name == "MemoryError" and NOT_RAM_MEMORYERROR not in tb.message:
            hit = Hit("oom", "critical", f"MemoryError{_loc(rep, tb)}: host RAM ran out", H.HINT_HOST_OOM)
            b.add(b.make(hit, i, _tb_evidence(rep, tb)), i)
            continue
        if b.handled_after(i, None if tb.thread else rep[i].key, since=tb.start):
            continue
        if tb.short_name == "AssertionError":
            checked = _finite_assert(rep, tb)
            if checked:
                # the failed statement tests that a value is finite: the value was NaN/Inf
                # (`assert math.isfinite(loss_value)`), whatever the bare exception says
                nan = Hit("nan", "critical", f"a finiteness check failed (`{checked}`): a value was NaN/Inf",
                          H.HINT_NAN)
                b.found.setdefault((nan.kind, nan.summary), b.make(nan, i, _tb_evidence(rep, tb)))
        timed_out = _timed_out_collective(rep, tb)
        if timed_out:
            hang = Hit("hang", "critical", f"a collective timed out: {tb.short_name}: {tb.message[:80]} raised inside "
                       f"torch.distributed's {timed_out}", H.HINT_NCCL_TIMEOUT, rule="collective-timeout-raised")
            b.found.setdefault((hang.kind, hang.summary), b.make(hang, i, _tb_evidence(rep, tb)))
        stuck = stopped_wait(rep, tb.frames, tb.name)
        if stuck:
            wait, where = stuck
            hang = Hit("hang", "critical", f"stopped by {tb.short_name} while blocked in {wait}"
                       + (f", called from {where}" if where else "") + ": the run was stuck in that wait",
                       H.HINT_STOPPED_WAIT, rule="stopped-in-wait")
            b.found.setdefault((hang.kind, hang.summary), b.make(hang, i, _tb_evidence(rep, tb)))
        elif tb.short_name == "KeyboardInterrupt":
            bar = frozen_bar(rep, tb.start, b.line_no0, b.st.recent)
            if bar is not None:
                hang = Hit("hang", "critical", f"{bar.summary}, then KeyboardInterrupt (Ctrl-C/SIGINT): the run was "
                           "stuck", H.HINT_STALL, rule="stop-after-stall")
                b.found.setdefault((hang.kind, hang.summary), b.make(hang, i, list(bar.evidence) + [rep[i].raw]))
        text = f"{tb.short_name}: {tb.message}" if tb.message else tb.short_name
        if len(text) > 160:
            text = text[:157] + "..."
        loc = _loc(rep, tb)
        if i in b.hit_at:
            # a hang's or NaN's wording ended the program: the crash names the exception only
            # (its frames vary with how much of the traceback a batch saw; the rule's finding
            # already holds them)
            hit = Hit("crash", "critical", _ended(tb.short_name, tb.message), H.HINT_CRASH)
        elif tb.short_name == "KeyboardInterrupt":
            hit = Hit("crash", "warning", f"stopped by KeyboardInterrupt{loc}", "someone pressed Ctrl-C or sent SIGINT")
        elif tb.thread and _RUN_ENDING_THREAD in tb.message:
            hit = Hit("crash", "critical", f"thread {tb.thread} died: {text}{loc} (the main thread raises the "
                      "same: the run ends)", H.HINT_CRASH)
        elif tb.thread:
            hit = Hit("crash", "warning", f"thread {tb.thread} died: {text}{loc}",
                      "the process lives on without that thread: throughput or a queue may stall; " + H.HINT_CRASH)
        elif tb.short_name in _LAUNCHER_EXCEPTIONS:
            hit = Hit("crash", "critical", f"{text}{loc}", H.HINT_LAUNCHER, secondary=True)
        else:
            hit = Hit("crash", "critical", f"{text}{loc}", H.HINT_CRASH)
        b.add(b.make(hit, i, _tb_evidence(rep, tb)), i, hit.secondary)


_TIMEOUT_WORDS = re.compile(r"\b(?:timed? ?out|timeout)\b", re.I)
COLLECTIVE_FRAMES = 2
"""How far from the innermost frame a collective of torch.distributed may sit (its own
wrapper, e.g. c10d_logger's, is the one frame allowed under it)."""


def _timed_out_collective(rep: Sequence[Line], tb: Traceback) -> str:
    """The torch.distributed collective a traceback was raised in when its exception says a
    timeout (pasted dmlc/dgl#3629: `dist.all_reduce` -> distributed_c10d.py `all_reduce` ->
    `RuntimeError: Socket Timeout`, gloo's peer never answered): a rank waited for the others
    past the timeout -- a hang, besides the crash the exception is. "" when it is not that."""
    if not tb.message or not _TIMEOUT_WORDS.search(tb.message):
        return ""
    for idx in tb.frames[-COLLECTIVE_FRAMES:]:
        fr = python_frame(rep[idx].text)
        if fr is not None and "torch/distributed/" in fr[0] and fr[2] in COLLECTIVES:
            return f"{fr[2]} ({fr[0].rsplit('/', 1)[-1]}:{fr[1]})"
    return ""


_FINITE_ASSERT = re.compile(r"^\s*assert\b.*\b(?:isfinite|isnan|isinf|is_finite|all_finite)\b")


def _finite_assert(rep: Sequence[Line], tb: Traceback) -> str:
    """The `assert` statement a traceback's last frame shows, when it tests finiteness."""
    if not tb.frames or tb.exc is None:
        return ""
    for j in range(tb.frames[-1] + 1, tb.exc):
        text = rep[j].text
        if _FINITE_ASSERT.match(text):
            return text.strip()[:100]
    return ""


def _is_fence(text: str) -> bool:
    """A markdown fence (```, ```text) a paste was wrapped in: no line of the log."""
    t = text.strip().lstrip(">").strip()
    return t.startswith("```") or t.startswith("~~~")


_HANG_NOTE = re.compile(r"^(?:\.{2,}|…|<|\(|\[)\s*(?:and |then |it |just |the program |here )*(?:hangs?|hanging|"
                        r"hung|stuck|freezes|frozen)\b[^\n]{0,40}$", re.I)
"""The user's note under a paste that the program stops there (`... hangs forever`, `<stuck here>`:
pasted ray-project/ray#6016): not a line the program printed, so the line above it is the program's
last word (what the final readers judge), and the note is kept for the evidence."""


def _note_last_line(b: _Batch, st: ScanState) -> None:
    """The batch's last line of text (not blank once repaired, no markdown fence, not the user's
    note that it hangs: _HANG_NOTE)."""
    note = ""
    for j in range(len(b.rep) - 1, -1, -1):
        ln = b.rep[j]
        if ln.src >= b.end:
            continue
        if ln.src < b.base:
            break
        text = ln.text.strip()
        if text and not _is_fence(text):
            if len(text) <= 80 and _HANG_NOTE.match(text):
                note = note or text
                continue
            st.last_line, st.last_line_no = text, b.line_no0 + ln.src
            st.last_line_explained = ((j in b.hit_at and _explains(b, j)) or j in b.secondary_at or j in b.ended_at
                                      or j in b.ignored_at)
            st.hang_note = note
            return
    if note:
        st.hang_note = note


def _explains(b: _Batch, i: int) -> bool:
    """Line i's rule finding says the program died (an OOM or a crash), not only why."""
    f = b.found.get(b.hit_at[i])
    return f is None or f.kind in ("oom", "crash")


def _record_cut_off(b: _Batch, opened: list[Traceback]) -> None:
    """Remember a traceback whose frames run to the end of the text read (its last frame
    or code line among the batch's own lines, at most CUT_OFF_TRAILING_LINES non-blank
    lines after it)."""
    rep, st = b.rep, b.st
    for tb in opened:
        if not tb.frames or not b.reported(tb.last):
            continue
        trailing = 0
        for j in range(len(rep) - 1, tb.last, -1):  # non-blank lines after its last frame/code line
            if rep[j].text.strip() and not _is_fence(rep[j].text):
                trailing += 1
                if trailing > CUT_OFF_TRAILING_LINES:
                    break
        if trailing > CUT_OFF_TRAILING_LINES:
            continue
        where = frame_location(rep[tb.frames[-1]].text) or f" {rep[tb.frames[-1]].text.strip()[:100]}"
        ev = [rep[tb.start].raw] + ([rep[tb.frames[-1]].raw] if tb.frames[-1] != tb.start else [])
        if tb.last != tb.frames[-1]:
            ev.append(rep[tb.last].raw)
        name = tb.ipython_name or (tb.seen_exception.split(":", 1)[0] if tb.seen_exception else "")
        if tb.seen_exception:
            where += f"; an exception line among its frames: {tb.seen_exception[:120]}"
        st.open_at_end = _CutOff(b.line_no0 + rep[tb.start].src, name, where, tuple(ev))


def _ended(name: str, message: str) -> str:
    """The crash of an exception whose message a NaN/hang rule read: one spelling whether
    the exception line came with its traceback or alone (the same finding either way)."""
    message = message.strip()
    return f"{name}: {message[:150]} (the exception ended the program)" if message else \
        f"{name} (the exception ended the program)"


def _named(summary: str, rep: Sequence[Line], tb: Traceback) -> str:
    """A rule's summary of an exception line, with the exception's name (unless the
    summary has it) and where the user's code raised it."""
    head = summary if tb.short_name in summary else f"{tb.name}: {summary}"
    return head + _loc(rep, tb)


def _loc(rep: Sequence[Line], tb: Traceback) -> str:
    """' at file.py:12 in func' for the user's innermost frame (else the last), with the
    sub-expression CPython marked on its code line: ' (`loss.item()`)'."""
    idx = user_frame(rep, tb)
    if idx is None and tb.frames:
        idx = tb.frames[-1]
    if idx is None:
        return ""
    loc = frame_location(rep[idx].text)
    expr = failing_expression(rep, tb, idx) if loc else ""
    return f"{loc} (`{expr}`)" if expr else loc


def _tb_evidence(rep: Sequence[Line], tb: Traceback) -> list[str]:
    """Header, the user's own innermost frame (where their code called in), the last
    frame and its code line, the exception: the user's frame is what they can change."""
    ev = [rep[tb.start].raw]
    shown: list[int] = []
    mine = user_frame(rep, tb)
    if mine is not None and tb.frames and mine != tb.frames[-1]:
        shown.append(mine)
    if tb.frames:
        shown.append(tb.frames[-1])
    skipped = len(tb.frames) - len(shown) - (1 if tb.frames and tb.start == tb.frames[0] else 0)
    if skipped > 0:
        ev.append(f"  … {skipped} more frame(s)")
    for idx in shown:
        ev.append(rep[idx].raw)
        if idx + 1 < (tb.exc or 0) and idx + 1 not in tb.frames and rep[idx + 1].text.strip():
            ev.append(rep[idx + 1].raw)
    ev.append(rep[tb.exc].raw)  # type: ignore[index]
    return ev


def _usage_findings(b: _Batch) -> None:
    for usage, err, text in usage_errors(b.rep):
        if not b.reported(err):
            continue
        hit = Hit("crash", "critical", f"command line refused: {text[:200]}", H.HINT_USAGE)
        b.add(b.make(hit, err, [b.rep[usage].raw, b.rep[err].raw]), err)


def _runtime_crash_findings(b: _Batch) -> None:
    """Rust panics, Go panics, JVM/.NET/Node/Julia/R uncaught errors (runtime_crashes.py)."""
    for rc in runtime_crashes(b.rep):
        if not b.reported(rc.at):
            continue
        hint = H.HINT_HOST_OOM if rc.kind == "oom" else H.HINT_CRASH
        hit = Hit(rc.kind, "critical", rc.summary[:240], hint)
        ev = [b.rep[j].raw for j in range(rc.start, min(len(b.rep), max(rc.at, rc.start) + 3))]
        b.add(b.make(hit, rc.at, ev), rc.at)


def _loss_scale_finding(b: _Batch, st: ScanState) -> None:
    ls = st.loss_scale
    if not ls.collapsed or ls.reported:
        return
    ls.reported = True
    ev = list(ls.evidence[:1]) + [f"… {ls.skips} skipped-step line(s); loss scale from {ls.highest:g} down to "
                                  f"{ls.last:g}"] + list(ls.evidence[1:2])
    hit = Hit("nan", "critical", "fp16 loss scale collapsed: gradients overflow every step", H.HINT_NAN +
              "; with fp16 prefer bf16")
    f = Finding(kind=hit.kind, severity=hit.severity, summary=hit.summary, evidence=bounded(ev),  # type: ignore
                hint=hit.hint, first_seen_s=b.t, line=ls.collapse_line, run_id=b.run_id)
    b.add(f, -1)


def _peer_wait_finding(b: _Batch, st: ScanState) -> None:
    pw = st.peer_wait
    if not pw.stuck or pw.reported:
        return
    pw.reported = True
    f = Finding(kind="hang", severity="critical", summary=pw.summary(), evidence=bounded(list(pw.evidence)),
                hint=pw.hint(), first_seen_s=b.t, line=pw.stuck_line, run_id=b.run_id)
    b.add(f, -1)
