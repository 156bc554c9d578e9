"""The followers of a run's progress files: metrics.jsonl, the .wandb transaction log, and
wandb's API where no transaction log can be read.

Each file has one FileFollower (controller/follow/cursor.py), the log's own kind: dev +
inode + committed offset + head and tail fingerprints, persisted as the run cursor's
FileCursor for that file and checked by the probe on every read, so a metrics.jsonl or
.wandb file truncated and rewritten past the old offset, or replaced by another file, is
read again from its start (the steps already delivered are not delivered again: the
RunFollower drops steps at or below the last one). The cursor commits only what was
decoded -- complete JSON lines, complete wandb records -- so a partial one is read again.
"""

from __future__ import annotations

import os

from controller.follow.cursor import FileFollower
from controller.probe.readings import FileRead
from controller.records import FileCursor, ProgressSample, WandbInfo
from controller.wandb_io.api_poller import ApiPoller
from controller.wandb_io.offline_reader import WandbDecoder
from controller.watch.progress import metrics_samples


def _begin(file: FileFollower, fr: FileRead) -> bool:
    """Position the follower for the read `fr`; True when it begins a new file."""
    new = fr.rotated or file.is_new_file(fr.inode, fr.dev, fr.event)
    if new:
        file.restart_file()
    file.begin(start=fr.start, inode=fr.inode, dev=fr.dev, head=fr.head, before=fr.before)
    return new


class MetricsFollower:
    """metrics.jsonl (README contract): progress rows from its complete lines."""

    def __init__(self, cur: FileCursor):
        self.file = FileFollower.from_file_cursor(cur)

    @property
    def offset(self) -> int:
        return self.file.offset

    def cursor(self) -> FileCursor:
        return self.file.file_cursor()

    def take(self, fr: FileRead | None, now: float) -> list[ProgressSample]:
        if fr is None or not fr.exists:
            return []
        _begin(self.file, fr)
        out, used = metrics_samples(fr.data, now)
        self.file.advance(fr.data, fr.start, used, b"")
        return out


class WandbFollower:
    """The run's .wandb transaction log, decoded record by record (WandbDecoder)."""

    def __init__(self, cur: FileCursor):
        self.file = FileFollower.from_file_cursor(cur)
        self.path: str | None = None          # the file read; sent back so the probe reads the same
        self.decoder: WandbDecoder | None = None

    @property
    def offset(self) -> int:
        return self.file.offset

    def cursor(self) -> FileCursor:
        return self.file.file_cursor()

    def take(self, fr: FileRead | None, path: str | None) -> tuple[list[ProgressSample], WandbInfo | None]:
        """(progress rows, what the file says of the run); raises on a file it cannot
        decode (the caller says so and goes on)."""
        if fr is None or not fr.exists or not path:
            return [], None
        if self.path is not None and path != self.path:
            self.file.restart_file()            # another file (a resumed run's newer one): from its start
            self.decoder, self.path = None, path
            if fr.start != 0:
                return [], None
        if _begin(self.file, fr):
            self.decoder = None
        if self.decoder is None:
            self.decoder = WandbDecoder(path, self.file.offset)
            self.path = path
        if fr.start != self.decoder.offset:
            self.file.jump(self.decoder.offset)   # the probe read from elsewhere; next tick asks right
            return [], None
        try:
            batch = self.decoder.feed(fr.data, fr.start)
        except Exception:
            self.decoder = None
            raise
        taken = self.decoder.offset - fr.start
        if 0 <= taken <= len(fr.data):
            self.file.advance(fr.data, fr.start, taken, b"")
        else:
            self.file.jump(self.decoder.offset)   # skipped past corruption: fingerprinted again later
        info = WandbInfo(run_id=batch.run_id, mode="offline" if "/offline-run-" in path else "online",
                         offline_dir=path.rsplit("/", 1)[0], state=batch.state)
        for p in batch.progress:
            p.source = "wandb"
        return list(batch.progress), info


class WandbApiFollower:
    """An online run whose transaction log we cannot read (no wandb/ dir in the run dir):
    wandb.Api() polled on its own thread; the tick only takes what has arrived."""

    def __init__(self) -> None:
        self.poller: ApiPoller | None = None
        self.failed = False

    def take(self, url: str) -> tuple[list[ProgressSample], str | None]:
        """(progress rows, the run's state when known)."""
        if self.poller is None:
            if not os.environ.get("WANDB_API_KEY") or self.failed:
                return [], None
            try:
                self.poller = ApiPoller(url.split("://", 1)[-1].split("/", 1)[-1])
            except Exception:  # noqa: BLE001 - not a run URL we can poll
                self.failed = True
                return [], None
        self.poller.poll_async()
        batch = self.poller.latest()
        state = batch.state if batch.state and batch.state != "unknown" else None
        return list(batch.progress), state
