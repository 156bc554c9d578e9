"""Following a remote log by (inode, byte offset) with no state on the remote side.

The probe returns the bytes since `read_offset`; this turns them into complete lines.
A partial last line stays in `carry` and is NOT counted as read: the committed offset
(what the registry stores) is the end of the last complete line, so a watcher killed and
restarted re-reads the partial line and no byte is lost or delivered twice. A new inode
or a file shorter than our offset (truncation) restarts at 0 (FIELD-NOTES). `\\r` ends a
line (tqdm), invalid UTF-8 and NULs pass through the decoder, and a line longer than
the splitter's bound is cut there (bounded memory for a 10 MB line without newline).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.logparse import split_lines


@dataclass
class LogChunk:
    """What one read of the log yielded."""

    lines: list[str]
    first_line_no: int                  # 1-based number of lines[0]
    consumed: bytes = b""               # the raw bytes of those lines (committed this read)
    rotated: bool = False


@dataclass
class LogFollower:
    """The controller's cursor over one log file."""

    inode: int | None = None
    offset: int = 0                     # committed: end of the last complete line
    line_no: int = 0                    # complete lines consumed so far
    carry: bytes = field(default=b"", repr=False)

    @property
    def read_offset(self) -> int:
        """Where the next read starts: past the carried partial line."""
        return self.offset + len(self.carry)

    def request(self) -> dict:
        return {"inode": self.inode, "offset": self.read_offset}

    def feed(self, data: bytes, *, start: int, inode: int | None, rotated: bool) -> LogChunk:
        """Take the bytes the probe read (beginning at file offset `start`)."""
        if rotated or (self.inode is not None and inode is not None and inode != self.inode):
            self.offset, self.line_no, self.carry, rotated = 0, 0, b"", True
        self.inode = inode if inode is not None else self.inode
        if start != self.read_offset:
            # the probe restarted us (it saw a rotation we did not): drop our carry
            self.offset, self.carry = start, b""
        carry_before = self.carry
        lines, carry = split_lines(data, carry_before)
        first = self.line_no + 1
        total = carry_before + data
        consumed_len = len(total) - len(carry)
        consumed = total[:consumed_len]
        self.offset += consumed_len
        self.carry = carry
        self.line_no += len(lines)
        return LogChunk(lines=lines, first_line_no=first, consumed=consumed, rotated=rotated)
