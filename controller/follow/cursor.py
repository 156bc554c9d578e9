"""Following a remote log by inode + byte offset + fingerprints, with no state on the remote side.

The probe returns the bytes since `read_offset`; this turns them into complete lines.
A partial last line stays in `carry` and is NOT counted as read: the committed offset
(what the registry stores) is the end of the last complete line, so a watcher killed and
restarted re-reads the partial line and no byte is lost or delivered twice. `\\r` ends a
line (tqdm), invalid UTF-8 and NULs pass through the decoder, and a line longer than
the splitter's bound is cut there (bounded memory for a 10 MB line without newline).

Like the log shippers (Vector, Fluent Bit, Filebeat) the cursor also carries two
fingerprints -- a digest of the bytes just before the committed offset and one of the
file's first bytes -- which the probe checks on every read: a new inode, a file shorter
than the offset, or bytes that no longer match (a truncation that regrew past the
offset, an inode number reused by a new file) all restart at 0, flagged `rotated`, with
the event named (`truncated`, `replaced`, ...). After a copytruncate the probe reads the
copy from the cursor first: the stream continues in another inode (not a rotation).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from controller.follow.logparse import split_lines
from controller.records import FileCursor
from controller.remote.probe_agent import FP_BYTES

CONTINUING_EVENTS = ("copytruncate",)
"""Events after which the bytes come from another inode but continue the same stream."""


def digest(data: bytes) -> str:
    """A fingerprint as the cursor spells it: "<length>:<sha1 hex>" (probe_agent.py's _digest)."""
    return f"{len(data)}:{hashlib.sha1(data).hexdigest()}"


@dataclass
class LogChunk:
    """What one read of the log yielded."""

    lines: list[str]
    first_line_no: int                  # 1-based number of lines[0]
    consumed: bytes = b""               # the raw bytes of those lines (committed this read)
    rotated: bool = False
    event: str | None = None            # what happened to the file (see read_since)
    ended_lines: list[str] = field(default_factory=list)  # the old file's unterminated last line
    ended_first_line_no: int = 0


@dataclass
class FileFollower:
    """The controller's cursor over one followed file (the log, metrics.jsonl, the .wandb
    file): which file (dev + inode), how far (the committed `offset`, plus `carry`: bytes
    past it the reader holds but has not committed) and the fingerprint material (the
    file's first bytes, the bytes ending at `read_offset`). Persisted as a FileCursor;
    what the bytes mean is the reader's (LogFollower splits lines; the metrics and .wandb
    readers commit what they decoded)."""

    inode: int | None = None
    dev: int | None = None
    offset: int = 0                     # committed: end of the last complete line / record
    carry: bytes = field(default=b"", repr=False)
    head: bytes | None = field(default=None, repr=False)        # the file's first bytes, when seen
    head_digest: str | None = None      # from a stored cursor, until the bytes are seen
    recent: bytes = field(default=b"", repr=False)              # file bytes ending at read_offset
    fingerprint_digest: str | None = None   # from a stored cursor, until `recent` covers it
    fingerprint_at: int | None = None   # the offset fingerprint_digest is for

    @classmethod
    def from_file_cursor(cls, cur: FileCursor) -> FileFollower:
        return cls(inode=cur.inode, dev=cur.dev, offset=cur.offset, head_digest=cur.head,
                   fingerprint_digest=cur.tail, fingerprint_at=cur.offset)

    @property
    def read_offset(self) -> int:
        """Where the next read starts: past the carried partial line."""
        return self.offset + len(self.carry)

    @property
    def wants_fingerprint_bytes(self) -> bool:
        """Does the next read need the file's first bytes / the bytes before the cursor?"""
        return (self.head is None and self.offset > 0) or \
            len(self.recent) - len(self.carry) < min(FP_BYTES, self.offset)

    def fingerprint(self) -> str | None:
        """Digest of the bytes before the committed offset (None: not known; not checked)."""
        known = len(self.recent) - len(self.carry)
        n = min(FP_BYTES, self.offset)
        if known >= n:
            before = self.recent[:known]
            return digest(before[len(before) - n:])
        return self.fingerprint_digest if self.fingerprint_at == self.offset else None

    def head_fingerprint(self) -> str | None:
        return digest(self.head) if self.head is not None else self.head_digest

    def file_cursor(self, line_no: int = 0) -> FileCursor:
        return FileCursor(inode=self.inode, dev=self.dev, offset=self.offset, line_no=line_no,
                          tail=self.fingerprint(), head=self.head_fingerprint())

    def restart_file(self) -> None:
        """A new file: nothing of the old one's cursor holds."""
        self.offset, self.carry = 0, b""
        self.head, self.head_digest, self.recent = None, None, b""
        self.fingerprint_digest = self.fingerprint_at = None

    def is_new_file(self, inode: int | None, dev: int | None, event: str | None) -> bool:
        """Do bytes from (dev, inode) begin another file than the cursor's? (not after a
        copytruncate: the copy continues the stream)"""
        if self.inode is None or inode is None or event in CONTINUING_EVENTS:
            return False
        return inode != self.inode or (self.dev is not None and dev is not None and dev != self.dev)

    def begin(self, *, start: int, inode: int | None, dev: int | None = None, head: bytes | None = None,
              before: bytes | None = None) -> None:
        """Before taking a read's bytes (after restart_file() if it is a new file)."""
        self.inode = inode if inode is not None else self.inode
        self.dev = dev if dev is not None else self.dev
        if start != self.read_offset:
            # the probe restarted us (it saw a rotation we did not): drop our carry
            self.offset, self.carry, self.recent = start, b"", b""
        if before is not None and not self.recent:
            self.recent = before
        if head is not None:
            self.head = head

    def jump(self, offset: int) -> None:
        """The reader skipped to `offset` (past bytes it could not use): the bytes before
        it are not held, so its fingerprint is asked for again."""
        self.offset, self.carry, self.recent = offset, b"", b""

    def advance(self, data: bytes, start: int, taken: int, carry: bytes) -> None:
        """After a read beginning at `start` (== read_offset): its first `taken` bytes are
        the reader's now, of which the last len(carry) stay uncommitted."""
        kept = data[:taken]
        self.offset = self.read_offset + len(kept) - len(carry)
        self.carry = carry
        self.recent = (self.recent + kept)[-(FP_BYTES + len(carry)):]
        if self.head is None and start == 0 and data:
            self.head = data[:FP_BYTES]
        elif self.head is not None and len(self.head) < FP_BYTES and len(self.recent) == self.read_offset:
            self.head = self.recent[:FP_BYTES]     # we hold the file from its first byte


@dataclass
class LogFollower(FileFollower):
    """The controller's cursor over one log file: a FileFollower whose bytes are lines."""

    line_no: int = 0                    # complete lines consumed so far

    @classmethod
    def from_cursor(cls, cur: FileCursor) -> LogFollower:
        return cls(inode=cur.inode, dev=cur.dev, offset=cur.offset, line_no=cur.line_no,
                   head_digest=cur.head, fingerprint_digest=cur.tail, fingerprint_at=cur.offset)

    def cursor(self) -> FileCursor:
        return self.file_cursor(self.line_no)

    def _restart(self) -> tuple[list[str], int]:
        """A new file: the old one's unterminated last line is a line after all."""
        ended, first = self.partial_lines()
        self.restart_file()
        self.line_no = 0
        return ended, first

    def partial_lines(self) -> tuple[list[str], int]:
        """The carried partial line read as complete (the run ended, or the file was
        replaced), with its line number: check-log and the importers read a last line
        without newline too. The cursor does not move past it: the bytes are not a
        complete line of the file (a restarted watch reads them again, as it must if the
        writer completes the line after all)."""
        if not self.carry:
            return [], self.line_no + 1
        lines, _ = split_lines(self.carry + b"\n")
        return lines, self.line_no + 1

    def feed(self, data: bytes, *, start: int, inode: int | None, rotated: bool, head: bytes | None = None,
             before: bytes | None = None, event: str | None = None, dev: int | None = None) -> LogChunk:
        """Take the bytes the probe read (beginning at file offset `start`)."""
        ended: list[str] = []
        ended_first = 0
        if rotated or self.is_new_file(inode, dev, event):
            ended, ended_first = self._restart()
            rotated = True
        self.begin(start=start, inode=inode, dev=dev, head=head, before=before)
        carry_before = self.carry
        lines, carry = split_lines(data, carry_before)
        first = self.line_no + 1
        total = carry_before + data
        consumed = total[:len(total) - len(carry)]
        self.advance(data, start, len(data), carry)
        self.line_no += len(lines)
        return LogChunk(lines=lines, first_line_no=first, consumed=consumed, rotated=rotated, event=event,
                        ended_lines=ended, ended_first_line_no=ended_first)
