"""TextScanner: the detectors over a stream of lines (the watch's live follower and
check-log's post-mortem read both use it), in bounded memory."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from controller.follow.logparse import LineParser, merge_wandb
from controller.judge.line_scan import ScanState, final_findings, scan_lines
from controller.records import Finding, ProgressSample, WandbInfo
from controller.throughput_columns import ThroughputColumns

TAIL_LINES = 20
"""The log's last lines kept (what a finding about the end quotes)."""


class TextScanner:
    """Feed clean lines in order; collects findings (de-duplicated by key), progress
    samples, milestones and the wandb run -- in bounded memory.

    Lines are scanned in batches with `overlap_lines` of context on both sides, so a
    traceback cut by a batch edge is still read whole and an error followed by a retry
    in the next batch is still seen as handled (the last `overlap_lines` wait for the
    next feed or `finish`). State that spans batches (the loss-scale trajectory, NaN
    counts) is kept in one ScanState, so any chunking of the same lines gives the same
    findings. Only the last `max_progress` samples are kept as objects (`progress_truncated`
    says so); the throughput figures of the older ones stay in `older_throughput`.
    """

    def __init__(self, progress_pattern: str | None = None, run_id: str | None = None,
                 now_s: float | None = None, batch_lines: int = 8192, overlap_lines: int = 512,
                 max_progress: int = 50_000, batch_chars: int = 8 << 20, overlap_chars: int = 1 << 20):
        self.parser = LineParser(progress_pattern)
        self.run_id = run_id
        self.now_s = now_s
        self.batch_lines = batch_lines
        self.overlap_lines = overlap_lines
        # Lines may be up to logparse.LINE_CAP_BYTES long (a 100 MB line arrives as 64 KiB
        # pieces): batches and overlaps are bounded in characters too, not only in lines.
        self.batch_chars = batch_chars
        self.overlap_chars = overlap_chars
        self._pending_chars = 0
        self.progress: deque[ProgressSample] = deque(maxlen=max_progress)
        self.progress_truncated = False
        self.older_throughput = ThroughputColumns()
        """The throughput figures of the samples that left `progress`: the warm-window
        median is the whole log's (throughput_summary's `older`), at most 49 bytes a step."""
        self.milestones: dict[str, int] = {}
        self.wandb: WandbInfo | None = None
        self.lines_seen = 0
        self.findings: dict[tuple[str, str], Finding] = {}
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._state = ScanState()
        self._deferred: list[Finding] = []
        self._pending: list[str] = []
        self._pending_first = 1
        self._context: list[str] = []

    def feed(self, lines: Sequence[str]) -> list[Finding]:
        leaving: list[ProgressSample] = []   # the samples that leave the deque, in order
        for line in lines:
            parsed = self.parser.parse(line)
            if parsed.progress is not None:
                if len(self.progress) == self.progress.maxlen:
                    self.progress_truncated = True
                    leaving.append(self.progress[0])   # about to leave the deque
                self.progress.append(parsed.progress)
            elif parsed.milestone is not None:
                self.milestones.setdefault(parsed.milestone[0], self.lines_seen + 1)
            elif parsed.wandb is not None:
                self.wandb = merge_wandb(self.wandb, parsed.wandb)
            self.lines_seen += 1
        if leaving:
            self.older_throughput.add_many(leaving)
        self.tail.extend(lines[-TAIL_LINES:])
        self._pending.extend(lines)
        self._pending_chars += sum(len(line) for line in lines)
        new: list[Finding] = []
        while (len(self._pending) >= self.batch_lines + self.overlap_lines
               or self._pending_chars >= self.batch_chars):
            cut = len(self._pending) - self._tail_count(self._pending, len(self._pending))
            if cut <= 0:
                break
            new.extend(self._scan(self._pending[:cut], self._pending[cut:]))
            self._pending_first += cut
            self._context = self._pending[cut - self._tail_count(self._pending, cut):cut]
            self._pending = self._pending[cut:]
            self._pending_chars = sum(len(line) for line in self._pending)
        return new

    def _tail_count(self, lines: Sequence[str], end: int) -> int:
        """How many lines before `end` make the overlap: at most overlap_lines and
        overlap_chars (at least one line, so a batch always moves on)."""
        n, total = 0, 0
        while n < min(end, self.overlap_lines):
            total += len(lines[end - 1 - n])
            if n and total > self.overlap_chars:
                break
            n += 1
        return n

    def finish(self) -> list[Finding]:
        """Scan what is left -- the text is now final: a traceback cut off at its end is a
        crash (scan.final_findings) -- then the secondary findings, if nothing primary was seen."""
        new = self._scan(self._pending, [])
        for f in final_findings(self._state, self.now_s, self.run_id, list(self.findings.values())):
            if f.key not in self.findings:
                self.findings[f.key] = f
                new.append(f)
                if f.kind in ("oom", "crash"):
                    self._state.primary_seen = True
        if not self._state.primary_seen:
            for f in self._deferred:
                if f.key not in self.findings:
                    self.findings[f.key] = f
                    new.append(f)
        self._deferred = []
        self._pending_first += len(self._pending)
        self._context = self._pending[len(self._pending) - self._tail_count(self._pending, len(self._pending)):]
        self._pending = []
        self._pending_chars = 0
        return new

    def _scan(self, lines: Sequence[str], after: Sequence[str]) -> list[Finding]:
        new = []
        for f in scan_lines(lines, self._pending_first, self.now_s, self.run_id,
                            context_before=self._context, context_after=after, state=self._state,
                            deferred=self._deferred):
            if f.key not in self.findings:
                self.findings[f.key] = f
                new.append(f)
        return new

    def all_findings(self) -> list[Finding]:
        return sorted(self.findings.values(), key=lambda f: (f.line or 0))
