"""What the trainer prints and records: progress lines, metrics.jsonl, milestones, wandb.

The progress line and metrics.jsonl are a contract dfctl parses (README "The trainer's
output contract"); keys carry units. metrics.jsonl is flushed line by line. stdout is
left to Python's own buffering, as in most trainers (the user's included): run under
`python -u` / PYTHONUNBUFFERED=1, as `dfctl deploy` launches it, the log is live; launched
the seeds' way (`nohup python … > log`), it is block-buffered -- the case dfctl's
`stale_log` finding exists for, reproducible with the real trainer.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import torch

from .loss import accept_len, tau_from_acc

PROGRESS_KEYS = ("step", "loss", "acc", "tau", "accept_len", "tok_per_s", "samples_per_s", "step_time_s",
                 "data_wait_s", "mem_alloc_gib", "mem_peak_gib", "lr")
EVAL_KEYS = ("eval_loss", "eval_acc", "eval_tau", "eval_accept_len")   # on the steps an evaluation ran
# beside them when the evaluation decodes (--eval-decode-prompts > 0): the serving convention
EVAL_DECODE_KEY = "eval_accept_len_decode"
GIB = 1024 ** 3


def say(line: str) -> None:
    """Print one line (buffered as Python buffers stdout: see the module doc)."""
    print(line)


def milestone(name: str, **fields) -> None:
    say(" ".join([f"[milestone] {name}"] + [f"{k}={v}" for k, v in fields.items()]))


def memory_gib(devices: list[torch.device]) -> tuple[float, float]:
    """(allocated, peak) GiB: the CUDA allocator's numbers summed over this process's GPUs;
    on CPU the process's resident and peak resident memory."""
    cuda = sorted({d.index or 0 for d in devices if d.type == "cuda"})
    if cuda:
        alloc = sum(torch.cuda.memory_allocated(i) for i in cuda)
        peak = sum(torch.cuda.max_memory_allocated(i) for i in cuda)
        return alloc / GIB, peak / GIB
    try:
        with open("/proc/self/statm") as fh:
            rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        rss = 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return rss / GIB, peak / GIB


def format_progress(rec: dict) -> str:
    line = (f"[progress] step={rec['step']} loss={rec['loss']:.4f} acc={rec['acc']:.4f} tau={rec['tau']:.3f} "
            f"accept_len={rec['accept_len']:.3f} "
            f"tok_per_s={rec['tok_per_s']:.1f} samples_per_s={rec['samples_per_s']:.2f} "
            f"step_time_s={rec['step_time_s']:.3f} data_wait_s={rec['data_wait_s']:.3f} "
            f"mem_alloc_gib={rec['mem_alloc_gib']:.2f} mem_peak_gib={rec['mem_peak_gib']:.2f} lr={rec['lr']:.1e}")
    if "eval_loss" in rec:
        line += "".join(f" {k}={rec[k]:.4f}" for k in EVAL_KEYS + (EVAL_DECODE_KEY,) if k in rec)
    return line


def summarise_metrics(vals: list[float], block_size: int) -> dict:
    """loss, acc, per-slot acc, tau and accept_len from a summed metric vector
    [loss_sum, weight_sum, correct[Bk], count[Bk], accepted] (replicas.metric_vector)."""
    bk = block_size
    correct, count = vals[2:2 + bk], vals[2 + bk:2 + 2 * bk]
    acc_pos = [c / n if n else 0.0 for c, n in zip(correct[1:], count[1:])]
    return {"loss": vals[0] / max(vals[1], 1e-12), "acc": sum(correct[1:]) / max(sum(count[1:]), 1.0),
            "tau": tau_from_acc(acc_pos), "accept_len": accept_len(vals[2 + 2 * bk], count[1]),
            "acc_pos": acc_pos}


class WandbLogger:
    """wandb, imported lazily: online when WANDB_API_KEY is set, offline otherwise; WANDB_MODE
    wins when set (WANDB_MODE=disabled imports nothing)."""

    def __init__(self, project: str, run_dir: Path, config: dict):
        self.run = None
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        if mode == "disabled":
            return
        # wandb-core flushes the offline transaction log every 15 s by default; once a second
        # lets dfctl read it live. (The WANDB__X_ form does not work; this one does.)
        os.environ.setdefault("WANDB__TRANSACTION_LOG_FLUSH_INTERVAL", "1")
        try:
            import wandb
        except ImportError:
            say("wandb: not installed; metrics go to metrics.jsonl only")
            return
        self.run = wandb.init(project=project, dir=str(run_dir), config=config, mode=mode)
        say(f"wandb: run id {self.run.id} mode {mode}")

    def log(self, rec: dict, acc_pos: list[float]) -> None:
        if self.run is None:
            return
        data = {k: rec[k] for k in PROGRESS_KEYS + EVAL_KEYS + (EVAL_DECODE_KEY,) if k != "step" and k in rec}
        data.update({f"acc_pos/{k + 1}": v for k, v in enumerate(acc_pos)})
        self.run.log(data, step=rec["step"])

    def finish(self, exit_code: int = 0) -> None:
        if self.run is not None:
            self.run.finish(exit_code=exit_code)
            self.run = None


class ProgressReporter:
    """Accumulates per-step metric vectors on the device; every `log_every` steps syncs once,
    prints the progress line, appends metrics.jsonl and logs wandb."""

    def __init__(self, *, run_dir: Path, block_size: int, log_every: int, devices: list[torch.device],
                 wandb_logger: WandbLogger | None = None, enabled: bool = True,
                 first_record_extra: dict | None = None):
        """`first_record_extra` joins the first record only (after a resume: where from)."""
        self.block_size, self.log_every, self.devices = block_size, max(1, log_every), devices
        self.enabled = enabled
        self.wandb = wandb_logger
        self.jsonl = open(run_dir / "metrics.jsonl", "a", buffering=1) if enabled else None
        self.history: list[dict] = []
        self._extra = dict(first_record_extra or {})
        self._reset(time.perf_counter())

    def _reset(self, now: float) -> None:
        self._t0 = now
        self._sum = None
        self._steps = self._tokens = self._samples = 0
        self._wait = 0.0

    def update(self, step: int, metrics: torch.Tensor, *, tokens: int, samples: int, data_wait_s: float,
               lr: float, evaluation: dict | None = None) -> dict | None:
        """Add one step; returns the record when a line was emitted. `evaluation` (EVAL_KEYS,
        on a step that is also a log step) joins that step's record."""
        self._sum = metrics.detach().clone() if self._sum is None else self._sum + metrics
        self._steps += 1
        self._tokens += tokens
        self._samples += samples
        self._wait += data_wait_s
        if step % self.log_every:
            return None
        vals = self._sum.float().cpu().tolist()
        now = time.perf_counter()
        elapsed = max(now - self._t0, 1e-9)
        summary = summarise_metrics(vals, self.block_size)
        acc_pos = summary.pop("acc_pos")
        alloc, peak = memory_gib(self.devices)
        rec = {
            "step": step, **summary, "tok_per_s": self._tokens / elapsed,
            "samples_per_s": self._samples / elapsed, "step_time_s": elapsed / self._steps,
            "data_wait_s": self._wait / self._steps, "mem_alloc_gib": alloc, "mem_peak_gib": peak, "lr": lr,
            **(evaluation or {}), **self._extra,
        }
        self._extra = {}
        self.history.append(dict(rec, acc_pos=acc_pos))
        if self.enabled:
            say(format_progress(rec))
            self.jsonl.write(json.dumps(dict(rec, time_s=time.time(), acc_pos=acc_pos)) + "\n")
            self.jsonl.flush()
            if self.wandb is not None:
                self.wandb.log(rec, acc_pos)
        self._reset(now)
        return rec

    def close(self) -> None:
        if self.jsonl is not None:
            self.jsonl.close()
            self.jsonl = None


__all__ = ["PROGRESS_KEYS", "EVAL_KEYS", "EVAL_DECODE_KEY", "summarise_metrics", "say", "milestone", "memory_gib", "format_progress", "WandbLogger",
           "ProgressReporter"]
