"""`--profile-steps A:B`: torch.profiler over optimizer steps A..B of a real run.

Why: the bench's micro phases time the target and the drafter apart, on a few batches; the
run end to end is ~5 % slower than their sum (BENCHMARKS.md trainer runs 10-12), and only a
trace of the run itself -- both threads, both CUDA streams, the pipeline's waits -- says
whether that is the streams contending, a stream running dry, or host-side launches.

Writes, into <run-dir>/profile/: `trace-steps-A-B.json.gz` (a Chrome/Perfetto trace: every
kernel with its stream, every CPU op with its thread) and `kernels-steps-A-B.txt` (the ops by
self device time). `streams_summary` reads such a trace back (bench/trainer_streams.py).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import torch


def parse_steps(text: str) -> tuple[int, int]:
    """'A:B' (1-based optimizer steps, inclusive) -> (A, B); ValueError naming the text."""
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"--profile-steps {text!r}: expected A:B, two step numbers") from None
    if a < 1 or b < a:
        raise ValueError(f"--profile-steps {text!r}: needs 1 <= A <= B")
    return a, b


class StepProfiler:
    """Starts the profiler before step `first` and stops it after step `last`."""

    def __init__(self, steps: tuple[int, int], run_dir: Path, cuda: bool, out=print):
        self.first, self.last = steps
        self.dir = Path(run_dir) / "profile"
        self.cuda = cuda
        self.out = out
        self._prof = None
        self._step_ctx = None
        self.trace_path: Path | None = None

    def before(self, step: int) -> None:
        """Call before running `step` (1-based)."""
        if step == self.first and self._prof is None:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            if self.cuda:
                torch.cuda.synchronize()          # earlier steps' kernels are not in the window
            self._prof = profile(activities=acts)
            self._prof.__enter__()
        if self._prof is not None:
            self._step_ctx = torch.profiler.record_function(f"dfctl_step_{step}")
            self._step_ctx.__enter__()

    def after(self, step: int) -> None:
        """Call after `step` was launched."""
        if self._step_ctx is not None:
            self._step_ctx.__exit__(None, None, None)
            self._step_ctx = None
        if self._prof is not None and step >= self.last:
            self.stop()

    def stop(self) -> None:
        """End the window (at the last step, or early when the run ends first) and write."""
        if self._prof is None:
            return
        if self.cuda:
            torch.cuda.synchronize()              # the window's kernels have all run
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"steps-{self.first}-{self.last}"
        self.trace_path = self.dir / f"trace-{name}.json.gz"
        prof.export_chrome_trace(str(self.trace_path))
        key = "self_cuda_time_total" if self.cuda else "self_cpu_time_total"
        (self.dir / f"kernels-{name}.txt").write_text(
            prof.key_averages().table(sort_by=key, row_limit=60, max_name_column_width=90))
        self.out(f"profile: steps {self.first}-{self.last} -> {self.trace_path}")


@dataclass
class StreamsSummary:
    """What a trace's device side did: per stream, and all streams together."""

    window_us: float                          # first kernel start .. last kernel end
    busy_us: float                            # union of every stream's kernels
    overlap_us: float                         # time two or more streams ran kernels at once
    per_stream_us: dict[int, float]           # kernel time per stream
    top_kernels: dict[int, list[tuple[str, float]]]   # per stream, the 8 longest by total time
    steps: int                                # step annotations seen (dfctl_step_N)

    def to_dict(self) -> dict:
        return {"window_us": self.window_us, "busy_us": self.busy_us, "overlap_us": self.overlap_us,
                "per_stream_us": {str(k): v for k, v in self.per_stream_us.items()},
                "top_kernels": {str(k): v for k, v in self.top_kernels.items()}, "steps": self.steps}


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def streams_summary(trace_path: Path) -> StreamsSummary:
    """Read a Chrome trace written by StepProfiler: kernel time per CUDA stream, the union,
    and how long streams ran at the same time (the pipeline's overlap)."""
    opener = gzip.open if str(trace_path).endswith(".gz") else open
    with opener(trace_path, "rt") as fh:
        events = json.load(fh).get("traceEvents", [])
    per_stream: dict[int, list[tuple[float, float]]] = {}
    names: dict[int, dict[str, float]] = {}
    steps = 0
    for ev in events:
        if ev.get("ph") != "X":
            continue
        if str(ev.get("name", "")).startswith("dfctl_step_") and ev.get("cat") == "user_annotation":
            steps += 1
        if ev.get("cat") != "kernel":
            continue
        stream = int(ev.get("args", {}).get("stream", -1))
        start, dur = float(ev["ts"]), float(ev.get("dur", 0.0))
        per_stream.setdefault(stream, []).append((start, start + dur))
        by_name = names.setdefault(stream, {})
        by_name[ev["name"]] = by_name.get(ev["name"], 0.0) + dur
    merged = {k: _union(v) for k, v in per_stream.items()}
    everything = _union([iv for v in merged.values() for iv in v])
    busy = _length(everything)
    # overlap = sum of per-stream busy minus the union, when at most two streams overlap;
    # in general: time covered by >= 2 streams, by a sweep over the merged intervals
    points = sorted([(a, 1) for v in merged.values() for a, _ in v] + [(b, -1) for v in merged.values() for _, b in v])
    depth, last, overlap = 0, 0.0, 0.0
    for t, d in points:
        if depth >= 2:
            overlap += t - last
        depth += d
        last = t
    window = (everything[-1][1] - everything[0][0]) if everything else 0.0
    top = {k: sorted(v.items(), key=lambda kv: -kv[1])[:8] for k, v in names.items()}
    return StreamsSummary(window_us=window, busy_us=busy, overlap_us=overlap,
                          per_stream_us={k: _length(v) for k, v in merged.items()}, top_kernels=top, steps=steps)


__all__ = ["parse_steps", "StepProfiler", "StreamsSummary", "streams_summary"]
