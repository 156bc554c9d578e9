"""A run's log as the watch follows it: the cursor (LogFollower), the tail it shows, what
its lines say (progress, milestones, the wandb run) and the text detectors over them.

The detectors see each line once: a tick's new lines with the last SCAN_CONTEXT_LINES of
the tail as context (a traceback begun in the last tick completes), and the run's last,
unterminated line once the run has ended (an OOM message written just before the process
died). Findings from a file that replaced the old one say so in their evidence.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from controller import judge
from controller.follow.cursor import LogChunk, LogFollower
from controller.follow.logparse import LineParser, split_lines
from controller.probe.readings import FileRead
from controller.records import FileCursor, Finding, LogStatus, ProgressSample, RunState, TickObservation, WandbInfo
from controller.watch.finding_book import FindingBook
from controller.watch.progress import merge_wandb

LOG_TAIL_LEN = 200
SCAN_CONTEXT_LINES = 20   # lines of the last tick given to the detectors as context (no finding from them)
LOG_CONTEXT_BYTES = 32 << 10
"""A watch that starts past the log's beginning (a restart: its cursor is in the registry)
asks once for this much of the log before the cursor, so its log tail is not empty until
the run writes again -- for a run that ended, never. Shown only: the detectors saw those
lines before."""

LogBytesHook = Callable[[str, int, bytes], None]


class RunLog:
    """One run's log: cursor, tail, parsed lines, text findings."""

    def __init__(self, state: RunState, log_path: str, cursor: FileCursor, progress_pattern: str | None,
                 book: FindingBook):
        self.state, self.log_path, self.book = state, log_path, book
        self.file = LogFollower.from_cursor(cursor)
        self.parser = LineParser(progress_pattern)
        # what the text detectors carry from one tick's lines to the next (the fp16 loss-scale
        # trajectory, the count of non-finite grad norms), as check-log's TextScanner does
        self.scan_state = judge.ScanState()
        self.size_seen: int | None = None
        self.end_read: int | None = None          # read offset whose partial last line was delivered
        self.tail_context_wanted = True           # ask for the log before the cursor (once, for the tail)

    @property
    def context_bytes(self) -> int:
        """How much of the log before the cursor the next read should bring (for the tail)."""
        return LOG_CONTEXT_BYTES if self.tail_context_wanted and self.file.read_offset > 0 else 0

    def follow(self, lr: FileRead | None, host_time_s: float | None, now: float,
               obs: TickObservation, on_bytes: LogBytesHook | None) -> LogChunk | None:
        """Take this tick's read: the cursor moves, the log's state and growth are noted,
        the new lines go to `obs`."""
        st = self.state
        if lr is None or not lr.exists:
            st.log = replace(st.log, size_bytes=None, rotated=False, event=None,
                             error=lr.error if lr is not None else None)
            obs.log = st.log
            return None
        if self.tail_context_wanted:
            self.tail_context_wanted = False
            if lr.context and not lr.rotated and not st.log_tail:
                before, _ = split_lines(lr.context)
                st.log_tail = before[1 if lr.context_start > 0 else 0:][-LOG_TAIL_LEN:]  # [0] may be cut
        chunk = self.file.feed(lr.data, start=lr.start, inode=lr.inode, dev=lr.dev, rotated=lr.rotated,
                               head=lr.head, before=lr.before, event=lr.event)
        if chunk.consumed and on_bytes is not None:
            on_bytes(st.run_id, self.file.offset - len(chunk.consumed), chunk.consumed)
        grew = self.size_seen is None or (lr.size_bytes or 0) > self.size_seen or chunk.rotated
        if self.size_seen is None and lr.mtime_s is not None and host_time_s is not None:
            # first sight: the log last grew at its mtime, on the host's clock
            st.last_log_growth_s = now - max(0.0, host_time_s - lr.mtime_s)
        elif grew:
            st.last_log_growth_s = now
        self.size_seen = lr.size_bytes
        st.log = LogStatus(path=self.log_path, inode=lr.inode, size_bytes=lr.size_bytes, mtime_s=lr.mtime_s,
                           offset_bytes=self.file.offset, rotated=chunk.rotated, event=lr.event,
                           deleted=lr.deleted, followed=lr.followed, lost_bytes=lr.lost_bytes)
        obs.log = st.log
        obs.new_lines = chunk.ended_lines + chunk.lines
        obs.first_line_no = chunk.ended_first_line_no if chunk.ended_lines else chunk.first_line_no
        return chunk

    def parse(self, chunk: LogChunk | None, now: float) -> tuple[list[ProgressSample], list[Finding]]:
        """Progress, milestones and wandb ids in the new lines; the text detectors over them."""
        if chunk is None:
            return [], []
        st = self.state
        samples: list[ProgressSample] = []
        wandb_seen: WandbInfo | None = None
        for line in chunk.lines:
            parsed = self.parser.parse(line)
            if parsed.progress is not None:
                p = parsed.progress
                if p.time_s is None:
                    p.time_s = now
                samples.append(p)
            if parsed.milestone:
                st.milestones.setdefault(parsed.milestone[0], now)
            if parsed.wandb is not None:
                wandb_seen = parsed.wandb
        if wandb_seen is not None:        # the log's word first; the .wandb file's overrides it
            st.wandb = merge_wandb(st.wandb, wandb_seen)
        found = self.scan(chunk.ended_lines, chunk.ended_first_line_no, now, rotated_from=None)
        found += self.scan(chunk.lines, chunk.first_line_no, now,
                           rotated_from=chunk.event if chunk.rotated or chunk.event else None)
        return samples, found

    def scan(self, lines: list[str], first_line_no: int, now: float, *, rotated_from: str | None) -> list[Finding]:
        if not lines:
            return []
        st = self.state
        before = st.log_tail[-SCAN_CONTEXT_LINES:]   # completes a traceback begun in the last tick's lines
        st.log_tail = (st.log_tail + lines)[-LOG_TAIL_LEN:]
        found = self.book.guarded("scan_lines", lambda: judge.scan_lines(
            lines, first_line_no, now, st.run_id, context_before=before, state=self.scan_state))
        if rotated_from:
            # the line numbers restarted (or continue in a copy): say so where it is read
            note = f"log_rotated: {rotated_from} (line numbers count from the new file)"
            found = [replace(f, evidence=tuple(f.evidence) + (note,)) for f in found]
        return found

    def flush_end(self, obs: TickObservation, now: float) -> list[Finding]:
        """The run ended: its last line, unterminated (an OOM message written just before
        the process died), is a line; scan and deliver it as check-log does."""
        if self.end_read == self.file.read_offset:
            return []                   # delivered once
        self.end_read = self.file.read_offset
        lines, first = self.file.partial_lines()
        found: list[Finding] = []
        if lines:
            if not obs.new_lines:
                obs.first_line_no = first
            obs.new_lines = obs.new_lines + lines
            found = self.scan(lines, first, now, rotated_from=None)
        # the text is final now: a traceback its last lines were still printing is a crash
        # (while the process lived, it may have been being written); how the process
        # itself ended is state.py's to say, so no SIGKILL reading here
        return found + self.book.guarded("final_findings", lambda: judge.final_findings(
            self.scan_state, now, self.state.run_id))
