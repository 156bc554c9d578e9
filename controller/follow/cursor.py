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
from controller.records import RunCursor
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
class LogFollower:
    """The controller's cursor over one log file."""

    inode: int | None = None
    offset: int = 0                     # committed: end of the last complete line
    line_no: int = 0                    # complete lines consumed so far
    carry: bytes = field(default=b"", repr=False)
    head: bytes | None = field(default=None, repr=False)        # the file's first bytes, when seen
    head_digest: str | None = None      # from a stored cursor, until the bytes are seen
    recent: bytes = field(default=b"", repr=False)              # file bytes ending at read_offset
    fingerprint_digest: str | None = None   # from a stored cursor, until `recent` covers it
    fingerprint_at: int | None = None   # the offset fingerprint_digest is for

    @classmethod
    def from_cursor(cls, cur: RunCursor) -> LogFollower:
        return cls(inode=cur.log_inode, offset=cur.log_offset, line_no=cur.log_line_no,
                   head_digest=cur.log_head, fingerprint_digest=cur.log_fingerprint,
                   fingerprint_at=cur.log_offset)

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

    def cursor_fields(self) -> dict:
        """The log's part of a RunCursor."""
        return {"log_inode": self.inode, "log_offset": self.offset, "log_line_no": self.line_no,
                "log_fingerprint": self.fingerprint(), "log_head": self.head_fingerprint()}

    def cursor(self) -> RunCursor:
        return RunCursor(**self.cursor_fields())

    def _restart(self) -> tuple[list[str], int]:
        """A new file: the old one's unterminated last line is a line after all."""
        ended, first = self.partial_lines()
        self.offset, self.line_no, self.carry = 0, 0, b""
        self.head, self.head_digest, self.recent = None, None, b""
        self.fingerprint_digest = self.fingerprint_at = None
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

    def feed(self, data: bytes, *, start: int, inode: int | None, rotated: bool,
             head: bytes | None = None, before: bytes | None = None, event: str | None = None) -> LogChunk:
        """Take the bytes the probe read (beginning at file offset `start`)."""
        ended: list[str] = []
        ended_first = 0
        new_inode = self.inode is not None and inode is not None and inode != self.inode
        if rotated or (new_inode and event not in CONTINUING_EVENTS):
            ended, ended_first = self._restart()
            rotated = True
        self.inode = inode if inode is not None else self.inode
        if start != self.read_offset:
            # the probe restarted us (it saw a rotation we did not): drop our carry
            self.offset, self.carry, self.recent = start, b"", b""
        if before is not None and not self.recent:
            self.recent = before
        if head is not None:
            self.head = head
        carry_before = self.carry
        lines, carry = split_lines(data, carry_before)
        first = self.line_no + 1
        total = carry_before + data
        consumed_len = len(total) - len(carry)
        consumed = total[:consumed_len]
        self.offset += consumed_len
        self.carry = carry
        self.line_no += len(lines)
        self.recent = (self.recent + data)[-(FP_BYTES + len(carry)):]
        if self.head is None and start == 0 and data:
            self.head = data[:FP_BYTES]
        elif self.head is not None and len(self.head) < FP_BYTES and len(self.recent) == self.read_offset:
            self.head = self.recent[:FP_BYTES]     # we hold the file from its first byte
        return LogChunk(lines=lines, first_line_no=first, consumed=consumed, rotated=rotated, event=event,
                        ended_lines=ended, ended_first_line_no=ended_first)
