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
from typing import Callable

from controller.follow.cursor import FileFollower
from controller.probe.readings import FileRead, RunReading
from controller.records import FileCursor, ProgressSample, RunCursor, RunState, WandbInfo
from controller.wandb_io.api_poller import ApiPoller
from controller.wandb_io.offline_reader import WandbDecoder
from controller.watch.progress import add_progress, merge_wandb, metrics_samples


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


ProgressHook = Callable[[str, list[ProgressSample]], None]


class RunProgress:
    """A run's progress beyond its log: metrics.jsonl, the .wandb file (or wandb's API),
    merged with the log's samples one per step. `last_step` is the highest step delivered
    (the cursor keeps it), so a restarted watch, or a file read again from its start,
    never delivers a step twice."""

    def __init__(self, state: RunState, cur: RunCursor, on_progress: ProgressHook | None):
        self.state, self.on_progress = state, on_progress
        self.metrics = MetricsFollower(cur.metrics)
        self.wandb_file = WandbFollower(cur.wandb)
        self.wandb_api = WandbApiFollower()
        self.resumed_step = cur.progress_step     # delivered before a restart: never again
        self.last_step: int | None = cur.progress_step

    def fingerprint_files(self) -> tuple[str, ...]:
        """The progress files whose next read must bring fingerprint bytes."""
        return tuple(name for name, f in (("metrics", self.metrics.file), ("wandb", self.wandb_file.file))
                     if f.wants_fingerprint_bytes)

    def read(self, rd: RunReading, now: float) -> list[ProgressSample]:
        """This tick's samples of metrics.jsonl and the .wandb file (or the API); the run's
        wandb facts noted in its state."""
        return self.metrics.take(rd.metrics, now) + self._wandb_file(rd) + self._wandb_api()

    def _wandb_file(self, rd: RunReading) -> list[ProgressSample]:
        st = self.state
        try:
            progress, info = self.wandb_file.take(rd.wandb, rd.wandb_path)
        except Exception as exc:  # noqa: BLE001 - a bad wandb file must not end the watch
            st.wandb = merge_wandb(st.wandb, WandbInfo(mode="offline", offline_dir=rd.wandb_path,
                                                       state=f"unreadable: {exc}"[:120]))
            return []
        if info is not None:
            st.wandb = merge_wandb(st.wandb, info)
        return progress

    def _wandb_api(self) -> list[ProgressSample]:
        st = self.state
        if self.wandb_file.path is not None or st.wandb is None or not st.wandb.url:
            return []
        progress, state = self.wandb_api.take(st.wandb.url)
        if state:
            st.wandb = merge_wandb(st.wandb, WandbInfo(state=state))
        return progress

    def deliver(self, samples: list[ProgressSample], now: float) -> list[ProgressSample]:
        """Into the run's history, one per step; returns the new samples (this tick's)."""
        if self.resumed_step is not None:
            samples = [s for s in samples if s.step > self.resumed_step]
        fresh, filled, last = add_progress(self.state, samples, now, self.last_step)
        self.last_step = last
        if (fresh or filled) and self.on_progress is not None:
            try:
                self.on_progress(self.state.run_id, fresh + filled)   # the history folds rows per step
            except Exception:  # noqa: BLE001 - history is a side channel; never end the watch
                pass
        return fresh
