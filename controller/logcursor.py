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

import re
from dataclasses import dataclass, field

MAX_LINE_BYTES = 64 * 1024


_EOL_RE = re.compile(rb"\r\n|\r|\n")


def _cut(data: bytes, start: int, stop: int, lines: list[str]) -> None:
    """data[start:stop] as lines of at most MAX_LINE_BYTES (a 10 MB line stays bounded)."""
    for i in range(start, max(stop, start + 1), MAX_LINE_BYTES):
        lines.append(data[i:min(stop, i + MAX_LINE_BYTES)].decode("utf-8", "replace"))


def _split_lines(buf: bytes, carry: bytes) -> tuple[list[str], bytes]:
    """controller.logparse.split_lines when it exists; this fallback follows its contract."""
    try:
        from controller.logparse import split_lines
    except ImportError:
        split_lines = None
    if split_lines is not None:
        return split_lines(buf, carry)
    data = carry + buf
    lines: list[str] = []
    start = 0
    # a trailing \r may be the first half of \r\n: hold it back until the next read
    end = len(data) - 1 if data.endswith(b"\r") else len(data)
    for m in _EOL_RE.finditer(data, 0, end):
        _cut(data, start, m.start(), lines)
        start = m.end()
    if end - start > MAX_LINE_BYTES:
        _cut(data, start, end - (end - start) % MAX_LINE_BYTES, lines)
        start = end - (end - start) % MAX_LINE_BYTES
    return lines, data[start:]


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
        lines, carry = _split_lines(data, carry_before)
        first = self.line_no + 1
        total = carry_before + data
        consumed_len = len(total) - len(carry)
        consumed = total[:consumed_len]
        self.offset += consumed_len
        self.carry = carry
        self.line_no += len(lines)
        return LogChunk(lines=lines, first_line_no=first, consumed=consumed, rotated=rotated)
