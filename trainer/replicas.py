"""Drafter replicas that stay in sync: one optimizer step on the union of their batches.

Each replica (one per drafter device, in threads) runs forward + backward of its batch's
*unnormalised* loss sum. The master (replica 0) sums the replicas' gradients, all-reduces
them across processes when run under torchrun (one flat bucket — what DDP does, done here
so that in-process replicas and processes share one path), divides by the *global* weight
sum, clips, steps, and copies the new weights back to the other replicas. That is exactly
one step on the combined batch (tests/trainer check it), whatever the split.

Metrics stay on the device as one vector per step, [loss_sum, weight_sum, correct[Bk],
count[Bk], accepted], so a step needs no host sync; the reporter syncs once per log interval.
"""

from __future__ import annotations

import contextlib
import math
from concurrent.futures import ThreadPoolExecutor

import torch

from .loss import dflash_loss
from .model import Drafter
from .pipeline import DeviceBatch


def lr_lambda(total_steps: int, warmup_frac: float, min_lr_frac: float):
    warmup = max(1, int(round(total_steps * warmup_frac)))

    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def metric_vector(out) -> torch.Tensor:
    """[loss_sum, weight_sum, correct[Bk], count[Bk], accepted]: sums, so replicas and
    processes add them (ProgressReporter reads this layout)."""
    return torch.cat([out.loss_sum.detach().float().view(1), out.weight_sum.float().view(1),
                      out.correct.float(), out.count.float(), out.accepted.float().view(1)])


class DrafterReplicas:
    def __init__(self, drafters: list[Drafter], devices: list[torch.device], *, lr: float, weight_decay: float,
                 grad_clip: float, total_steps: int, warmup_frac: float, min_lr_frac: float, gamma: float,
                 chunk_rows: int, use_flex: bool, autocast_dtype: torch.dtype | None,
                 process_group_world: int = 1, compiled: bool = False, loss_kernel: str = "inductor"):
        self.drafters, self.devices = drafters, devices
        self.master = drafters[0]
        self.params = [p for _, p in self.master.trainable_parameters()]
        fused = devices[0].type == "cuda"
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay,
                                           fused=fused)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(total_steps, warmup_frac, min_lr_frac))
        self.grad_clip, self.gamma, self.chunk_rows = grad_clip, gamma, chunk_rows
        self.use_flex, self.autocast_dtype = use_flex, autocast_dtype
        self.world = process_group_world
        self.compiled = compiled
        self.loss_kernel = loss_kernel
        self._buffers: list[dict[str, torch.Tensor]] = [{} for _ in drafters]
        self._pool = ThreadPoolExecutor(max_workers=len(drafters), thread_name_prefix="drafter") \
            if len(drafters) > 1 else None
        self.sync_replicas()

    def sync_replicas(self) -> None:
        """Copy the master's trainable weights to every other replica."""
        with torch.no_grad():
            for other in self.drafters[1:]:
                for (_, src), (_, dst) in zip(self.master.trainable_parameters(), other.trainable_parameters()):
                    dst.copy_(src, non_blocking=True)

    def _persistent(self, i: int, name: str, t: torch.Tensor) -> torch.Tensor:
        """Compiled mode only: copy into one fixed buffer per input so the compiled graph
        always sees the same storage; eager mode uses the batch's own tensors (a per-shape
        buffer cache in eager mode was the seed's OOM)."""
        if not self.compiled:
            return t
        buf = self._buffers[i].get(name)
        if buf is None or buf.shape != t.shape:
            buf = self._buffers[i][name] = torch.empty_like(t)
        return buf.copy_(t, non_blocking=True)

    def _forward_backward(self, i: int, batch: DeviceBatch) -> torch.Tensor:
        drafter, dev = self.drafters[i], self.devices[i]
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        batch.wait_ready()
        feats = self._persistent(i, "features", batch.features)
        block_ids = self._persistent(i, "block_ids", batch.block_ids)
        anchors = self._persistent(i, "anchors", batch.anchors)
        labels = self._persistent(i, "labels", batch.labels)
        autocast = torch.autocast(dev.type, dtype=self.autocast_dtype) if self.autocast_dtype else \
            contextlib.nullcontext()
        with autocast:
            hidden = drafter(feats, block_ids, anchors, use_flex=self.use_flex)
            out = dflash_loss(hidden, labels, drafter.lm_head.weight, gamma=self.gamma, chunk_rows=self.chunk_rows,
                              rows=batch.loss_rows, kernel=self.loss_kernel)
        out.loss_sum.backward()
        return metric_vector(out)

    def evaluate(self, batch: DeviceBatch) -> torch.Tensor:
        """The master's metric vector on one batch, no gradient and no update (held-out eval)."""
        drafter, dev = self.master, self.devices[0]
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        batch.wait_ready()
        autocast = torch.autocast(dev.type, dtype=self.autocast_dtype) if self.autocast_dtype else \
            contextlib.nullcontext()
        drafter.eval()
        try:
            with torch.no_grad(), autocast:
                hidden = drafter(batch.features, batch.block_ids, batch.anchors, use_flex=self.use_flex)
                out = dflash_loss(hidden, batch.labels, drafter.lm_head.weight, gamma=self.gamma,
                                  chunk_rows=self.chunk_rows, rows=batch.loss_rows, kernel=self.loss_kernel)
        finally:
            drafter.train()
        return metric_vector(out)

    def step(self, batches: list[DeviceBatch]) -> torch.Tensor:
        """One optimizer step over R batches; returns the step's metric vector (global
        under torchrun) on the master's device."""
        for p in self.params:
            p.grad = None
        for d in self.drafters[1:]:
            d.zero_grad(set_to_none=True)
        if self._pool is None:
            metrics = [self._forward_backward(0, batches[0])]
        else:
            metrics = list(self._pool.map(self._forward_backward, range(len(batches)), batches))
        master_dev = self.devices[0]
        total = torch.stack([m.to(master_dev) for m in metrics]).sum(0)
        with torch.no_grad():
            for other in self.drafters[1:]:
                for (_, mp), (_, op) in zip(self.master.trainable_parameters(), other.trainable_parameters()):
                    if op.grad is not None:
                        if mp.grad is None:
                            mp.grad = torch.zeros_like(mp)
                        mp.grad.add_(op.grad.to(master_dev, non_blocking=True))
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            if self.world > 1:
                import torch.distributed as dist

                flat = torch.cat([p.grad.reshape(-1) for p in self.params])
                dist.all_reduce(flat)
                dist.all_reduce(total)
                offset = 0
                for p in self.params:
                    n = p.numel()
                    p.grad.copy_(flat[offset:offset + n].view_as(p))
                    offset += n
            weight_sum = total[1].clamp(min=1e-12)
            for p in self.params:
                p.grad.div_(weight_sum)
        torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        self.last_lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()
        self.sync_replicas()
        return total

    last_lr: float = 0.0  # the learning rate the last step used

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
