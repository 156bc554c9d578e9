"""Fill a gap in a run's metric history from its metrics.jsonl, wherever the run lives.

An older dfctl flushed the history only at exit, so a watch it lost to SIGTERM left the
registry cursor past rows that never reached the Parquet files; the next watch does not
read those bytes again. At watch start the part of metrics.jsonl the cursor has passed is
read back -- through the probe's own reader (read_since: the CT root resolution, regular
files only), over a short-lived poller of its own, so the same code serves the local,
ssh and pct targets -- and the steps the history lacks are appended (idempotent).
"""

from __future__ import annotations

import time

from controller.adopt.importers import metrics_samples
from controller.probe import RunProbeRequest
from controller.records import FileCursor, RunCursor
from controller.store.history import backfill_checked_bytes, backfill_progress, set_backfill_checked_bytes
from controller.watch.follower import RunFollower
from controller.watch.poller import HostPoller, default_transport, host_key
from controller.watch.settings import WatchSettings

BACKFILL_MAX_BYTES = 256 << 20
"""More unchecked metrics.jsonl than this behind the cursor is not read back (start-up cost)."""
READ_CAP_BYTES = 8 << 20


def backfill_history(r: RunFollower) -> tuple[int, str]:
    """(steps appended, where they were read); (0, "") when there is nothing to read back.
    Only the bytes past what an earlier backfill already checked are read (a long run's
    watch restarts do not re-read its whole metrics.jsonl each time)."""
    upto = r.metrics_offset
    start = backfill_checked_bytes(r.record.run_id)
    if not upto or start >= upto or not r.record.run_dir or upto - start > BACKFILL_MAX_BYTES:
        return 0, ""
    target = r.target
    vmid = int(target.vmid) if target.kind == "pct" and target.vmid is not None else None
    settings = WatchSettings(interval_s=1.0, gpu=False, read_cap_bytes=READ_CAP_BYTES)
    poller = HostPoller(host_key(target), target, settings, default_transport, time.time)
    where = f"{r.record.run_dir}/metrics.jsonl on {poller.host}"
    data = bytearray()
    try:
        while start + len(data) < upto:
            # the log cursor as it stands (its bytes are not wanted), metrics from where we are
            offset = start + len(data)
            cursor = RunCursor(log=r.log.cursor(), metrics=FileCursor(offset=offset))
            req = RunProbeRequest(run_id=r.record.run_id, log_path=r.record.log_path or f"{r.record.run_dir}/train.log",
                                  run_dir=r.record.run_dir, pid=r.record.pid, vmid=vmid, cursor=cursor)
            reading, error = poller.poll([req], {vmid: target.python} if vmid is not None else {})
            rd = reading.runs.get(r.record.run_id) if reading is not None else None
            m = rd.metrics if rd is not None else None
            if m is None or not m.exists or not m.data or m.start != offset:
                if error:
                    raise OSError(error)
                break            # shorter than the cursor says (replaced, truncated): take what there is
            data += m.data
    finally:
        poller.close()
    added = backfill_progress(r.record.run_id, metrics_samples(bytes(data[:upto - start]).splitlines()))
    set_backfill_checked_bytes(r.record.run_id, start + min(len(data), upto - start))
    return added, where
