"""The threaded pipeline: prefetch workers -> target workers -> drafter replicas, joined by
bounded queues (the seed's shape, any device count).

    feeder ──(batch positions)──▶ prefetch workers ──host_q──▶ target workers ──hs_q──▶ step loop
      read Arrow, pad, anchors;       one per target device,       reorders by seq, hands one batch
      pinned tensors                  own CUDA stream, copies      to each drafter replica, reduces
                                      features to the replica's    their gradients, one optimizer step
                                      device

Why threads and not processes: the target and drafter run in CUDA kernels that release the
GIL; what Python does between them (reading Arrow, building anchors) is small, and threads
share the models without copies. Why reorder: batches finish out of order across workers,
but the step loop takes them in order, so a run is a function of (seed, step) alone —
resume and the replica tests depend on that (bitwise on CPU; on CUDA the fused RMSNorm
rounds an input at another address alignment differently, ~1e-5 relative: BENCHMARKS.md).

Batch positions: each optimizer step consumes world*replicas consecutive global batch
positions; rank r's replica j takes position base + r*R + j. Position p is batch p % N of
epoch p // N (N batches per epoch), so every sample is seen once per epoch whatever the
device split.

`sequential=True` does the same work in the calling thread, one stage after the other,
with a device sync between stages so nothing overlaps (the benchmark's baseline; works
with any --target-devices / --drafter-devices split).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from .data import ArrowDataset, BucketPlan, HostBatch, make_host_batch
from .loss import IGNORE


@dataclass
class DeviceBatch:
    """One batch after the target, on its drafter replica's device."""

    seq: int
    features: torch.Tensor        # [S, L, K*H]
    block_ids: torch.Tensor       # [S, A, Bk]
    anchors: torch.Tensor         # [S, A]
    labels: torch.Tensor          # [S, A, Bk]
    num_tokens: int
    num_samples: int
    ready: object = None          # a CUDA event the consumer waits on (None on CPU)
    loss_rows: object = None      # [N] int64 flat indices of supervised label slots (host-computed), or None

    def wait_ready(self) -> None:
        """Make the consumer's stream wait for the producer's copies, and tell the caching
        allocator these tensors are used on the consumer's stream too."""
        if self.ready is None:
            return
        stream = torch.cuda.current_stream(self.features.device)
        stream.wait_event(self.ready)
        for t in (self.features, self.block_ids, self.anchors, self.labels, self.loss_rows):
            if t is not None:
                t.record_stream(stream)


@dataclass(frozen=True)
class BatchingSpec:
    """How host batches are built (shapes, anchors) — the same for every worker."""

    block_size: int
    max_anchors: int
    max_length: int
    mask_token_id: int
    seed: int
    len_multiple: int = 1
    anchor_multiple: int = 1
    fixed_anchors: int | None = None
    length_steps: tuple[int, ...] = ()   # compiled drafter: pad L up to the next of these (bucket edges)


class BatchPositions:
    """Maps this process's local batch sequence number to a global position and its rows."""

    def __init__(self, plan: BucketPlan, *, start_pos: int, world: int, rank: int, replicas: int):
        self.plan, self.start_pos = plan, start_pos
        self.world, self.rank, self.replicas = world, rank, replicas
        self._epochs: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def global_pos(self, local_seq: int) -> int:
        step, j = divmod(local_seq, self.replicas)
        return self.start_pos + step * self.world * self.replicas + self.rank * self.replicas + j

    def rows(self, local_seq: int) -> tuple[int, np.ndarray]:
        epoch, index = divmod(self.global_pos(local_seq), self.plan.num_batches)
        with self._lock:
            if epoch not in self._epochs:
                for old in [e for e in self._epochs if e < epoch - 1]:
                    del self._epochs[old]
                self._epochs[epoch] = self.plan.epoch_batches(epoch)
            return epoch, self._epochs[epoch][index]


def host_batch_for(dataset: ArrowDataset, positions: BatchPositions, spec: BatchingSpec,
                   local_seq: int) -> HostBatch:
    epoch, rows = positions.rows(local_seq)
    fixed_len = None
    if spec.length_steps:
        longest = min(int(dataset.lengths[rows].max()), spec.max_length)
        fixed_len = next((s for s in spec.length_steps if s >= longest), spec.length_steps[-1])
    return make_host_batch(dataset, rows, seq=local_seq, epoch=epoch, seed=spec.seed, block_size=spec.block_size,
                           max_anchors=spec.max_anchors, max_length=spec.max_length,
                           mask_token_id=spec.mask_token_id, len_multiple=spec.len_multiple,
                           anchor_multiple=spec.anchor_multiple, fixed_len=fixed_len,
                           fixed_anchors=spec.fixed_anchors)


def host_tensors(hb: HostBatch, pin: bool) -> dict[str, torch.Tensor]:
    """The batch as (optionally pinned) host tensors. `loss_rows` (the supervised label
    slots) is found here, on the host, so the loss needs no device->host sync to size its
    row selection (`nonzero` on the device was one sync per step)."""
    rows = np.flatnonzero(hb.labels.reshape(-1) != IGNORE).astype(np.int64)
    out = {"input_ids": torch.from_numpy(hb.input_ids), "block_ids": torch.from_numpy(hb.block_ids),
           "anchors": torch.from_numpy(hb.anchors), "labels": torch.from_numpy(hb.labels),
           "loss_rows": torch.from_numpy(rows)}
    if pin:
        out = {k: v.pin_memory() for k, v in out.items()}
    return out


def run_target(target, host: dict[str, torch.Tensor], hb: HostBatch, target_device: torch.device,
               drafter_device: torch.device, stream, copy_stream=None) -> DeviceBatch:
    """Target forward on its device (and stream), results copied to the drafter's device.

    When the drafter is on another GPU, `copy_stream` (a side stream on the drafter's
    device) is that device's current stream during the copies. Why: a cross-device copy
    waits for whatever is queued on the destination's current stream and makes it wait
    for the copy; on the drafter's default stream that chained every ~1 GB hidden-state
    copy behind the running drafter step and stalled the drafter GPU for the copy's
    duration. On the side stream the copy overlaps the drafter's work; the consumer waits
    on the `ready` event (DeviceBatch.wait_ready) and the allocator is told via
    record_stream. The copy itself runs on the target's stream (the source side), so the
    source tensor needs no record_stream."""
    ctx = torch.cuda.stream(stream) if stream is not None else _nullcontext()
    rows = host.get("loss_rows")
    if rows is None and host["labels"].device.type == "cpu":
        rows = torch.nonzero(host["labels"].reshape(-1) != IGNORE).squeeze(1)   # host op, no device sync
    with ctx:
        ids = host["input_ids"].to(target_device, non_blocking=True)
        features = target(ids)
        cross = copy_stream is not None and drafter_device != target_device
        with (torch.cuda.stream(copy_stream) if cross else _nullcontext()):
            moved = {k: host[k].to(drafter_device, non_blocking=True) for k in ("block_ids", "anchors", "labels")}
            if rows is not None:
                moved["loss_rows"] = rows.to(drafter_device, non_blocking=True)
            features = features.to(drafter_device, non_blocking=True)
            ready = None
            if stream is not None:
                ready = torch.cuda.Event()
                ready.record(copy_stream if cross else stream)
    return DeviceBatch(seq=hb.seq, features=features, num_tokens=hb.num_tokens, num_samples=len(hb.rows),
                       ready=ready, **moved)


# Compiled models on two threads (--compile-drafter / --compile-target with the threaded
# pipeline): while one thread traces a graph (dynamo -> AOT autograd's make_fx patches
# nn.Module.__call__ process-wide), the other calling a compiled module dies with
# "Detected that you are using FX to symbolically trace a dynamo-optimized function"
# (torch/_dynamo/eval_frame.py; on the H200 both compiled-target runs of one call died so
# at start-up, 2026-12-02, while run 10's had not). So when anything is compiled the target
# thread and the step loop launch their work under this one lock. It covers the host-side
# launches only: the GPU still runs both streams' queued kernels as before.
LAUNCH_LOCK = threading.RLock()


def launch_guard(compiled: bool):
    """LAUNCH_LOCK when something is compiled, else a no-op context."""
    return LAUNCH_LOCK if compiled else _nullcontext()


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Pipeline:
    """Produces, per optimizer step, one DeviceBatch per drafter replica, in order."""

    def __init__(self, *, dataset: ArrowDataset, positions: BatchPositions, spec: BatchingSpec,
                 targets: list, target_devices: list[torch.device], drafter_devices: list[torch.device],
                 prefetch_workers: int = 4, sequential: bool = False, compiled: bool = False):
        self.dataset, self.positions, self.spec = dataset, positions, spec
        self.targets, self.target_devices, self.drafter_devices = targets, target_devices, drafter_devices
        self.replicas = len(drafter_devices)
        self.sequential = sequential
        self.compiled = compiled            # the target's launches go under LAUNCH_LOCK
        self.cuda = any(d.type == "cuda" for d in target_devices)
        self._next_seq = 0
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._ready: dict[int, DeviceBatch] = {}
        self._threads: list[threading.Thread] = []
        self._streams = [torch.cuda.Stream(device=d) if d.type == "cuda" else None for d in target_devices]
        # one side stream per drafter device for the incoming copies (see run_target)
        self._copy_streams = {d: torch.cuda.Stream(device=d) for d in set(drafter_devices) if d.type == "cuda"}
        if sequential:
            return
        n_prefetch = max(1, prefetch_workers)
        self._index_q: queue.Queue = queue.Queue(maxsize=2 * n_prefetch)
        self._host_q: queue.Queue = queue.Queue(maxsize=max(2, n_prefetch))
        self._hs_q: queue.Queue = queue.Queue(maxsize=max(2, 2 * self.replicas))
        self._threads.append(threading.Thread(target=self._guard, args=(self._feed,), name="feeder", daemon=True))
        for i in range(n_prefetch):
            self._threads.append(threading.Thread(target=self._guard, args=(self._prefetch,),
                                                  name=f"prefetch-{i}", daemon=True))
        for i in range(len(targets)):
            self._threads.append(threading.Thread(target=self._guard, args=(self._target_loop, i),
                                                  name=f"target-{i}", daemon=True))

    # -- worker plumbing ------------------------------------------------------------
    def start(self) -> "Pipeline":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)

    def _guard(self, fn, *args) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 — forwarded to the step loop, which re-raises it
            self._errors.append(exc)
            self._stop.set()

    def _put(self, q: queue.Queue, item) -> bool:
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, q: queue.Queue):
        while not self._stop.is_set():
            try:
                return q.get(timeout=0.2)
            except queue.Empty:
                continue
        return None

    def _feed(self) -> None:
        seq = 0
        while self._put(self._index_q, seq):
            seq += 1

    def _prefetch(self) -> None:
        while True:
            seq = self._get(self._index_q)
            if seq is None:
                return
            hb = host_batch_for(self.dataset, self.positions, self.spec, seq)
            if not self._put(self._host_q, (hb, host_tensors(hb, self.cuda))):
                return

    def _target_loop(self, i: int) -> None:
        target, dev, stream = self.targets[i], self.target_devices[i], self._streams[i]
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        while True:
            item = self._get(self._host_q)
            if item is None:
                return
            hb, host = item
            ddev = self.drafter_devices[hb.seq % self.replicas]
            with launch_guard(self.compiled):
                out = run_target(target, host, hb, dev, ddev, stream, self._copy_streams.get(ddev))
            if not self._put(self._hs_q, out):
                return

    def _sync_devices(self) -> None:
        """Sequential mode only: stages never overlap, not even through CUDA's asynchronous
        queue (host batch, then target, then drafter, one after another, on any device split)."""
        for d in sorted({d.index for d in self.target_devices + self.drafter_devices if d.type == "cuda"}):
            torch.cuda.synchronize(d)

    # -- the step loop's side -----------------------------------------------------------
    def next_step_batches(self) -> list[DeviceBatch]:
        """The next R batches (one per replica), waiting for the pipeline as needed."""
        wanted = list(range(self._next_seq, self._next_seq + self.replicas))
        self._next_seq += self.replicas
        if self.sequential:
            self._sync_devices()          # the previous step's drafter work is finished
            out = []
            for seq in wanted:
                hb = host_batch_for(self.dataset, self.positions, self.spec, seq)
                i = seq % len(self.targets)
                out.append(run_target(self.targets[i], host_tensors(hb, False), hb, self.target_devices[i],
                                      self.drafter_devices[seq % self.replicas], None))
            self._sync_devices()          # the target stage and its copies are finished
            return out
        while any(s not in self._ready for s in wanted):
            if self._errors:
                raise self._errors[0]
            try:
                item = self._hs_q.get(timeout=0.2)
            except queue.Empty:
                continue
            self._ready[item.seq] = item
        return [self._ready.pop(s) for s in wanted]


def wait_time(fn):
    """(result, seconds) of fn()."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
