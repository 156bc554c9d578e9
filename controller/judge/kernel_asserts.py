"""The CUDA kernel-assertion reader: which assertion failed on the GPU, read from the lines
the device printed before the host saw `device-side assert triggered`.

A failing `CUDA_KERNEL_ASSERT` in a kernel (torch's bounds checks: nll_loss's `t >= 0 &&
t < n_classes`, the gather/index kernels' `ind >= 0 && ind < ind_dim_size`) prints, through
the device's printf buffer, one line per thread that failed it:

    /pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d:
    block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.

(one line in the log; tests/corpus/device/gpu-assert-label.log, -index.log, made on an
H200). The host learns of it only at the next synchronising call, as `CUDA error:
device-side assert triggered` -- which names neither the kernel nor the condition, and a
traceback that may point at an unrelated `loss.item()`. So the lines are kept, in line
order, as a bounded summary (the first line, how many repeat it, their line numbers), and
the device-assert rule names the assertion from it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_ASSERT = re.compile(r"(?P<file>[^\s:]+\.cuh?):(?P<line>\d+): (?P<kernel>.+?): block: \[[\d, ]+\], "
                     r"thread: \[[\d, ]+\] Assertion `(?P<cond>.*)` failed\.")
RECENT_LINES = 1000
"""How close to the host's error the last assertion line must be to be its cause: the
printf buffer is flushed at the synchronising call that raises, so the lines sit just
above the error (other ranks' or a logger's lines may come between)."""
MAX_COND_CHARS = 120


@dataclass
class KernelAssertion:
    where: str          # "Loss.cu:245"
    kernel: str
    condition: str
    first_line_no: int
    first_raw: str
    last_line_no: int
    repeats: int = 1    # lines that failed this same assertion (one per thread)
    others: int = 0     # lines of other assertions seen meanwhile

    def detail(self) -> str:
        cond = self.condition if len(self.condition) <= MAX_COND_CHARS else self.condition[:MAX_COND_CHARS - 3] + "..."
        return f"assertion `{cond}` failed in kernel {self.kernel} ({self.where})"

    def evidence(self) -> list[str]:
        ev = [self.first_raw]
        if self.repeats > 1:
            ev.append(f"  … the same assertion failed {self.repeats} times in all, log lines "
                      f"{self.first_line_no}-{self.last_line_no} (one line per GPU thread)")
        if self.others:
            ev.append(f"  … and {self.others} line(s) of other kernel assertions")
        return ev


class KernelAssertions:
    """Fed every line that holds "assertion", in order; answers the assertion behind a
    device-side assert reported at a given line. Bounded: one KernelAssertion."""

    def __init__(self) -> None:
        self.current: KernelAssertion | None = None

    def feed(self, text: str, line_no: int, raw: str) -> bool:
        """Read one line; True when it was a kernel assertion line."""
        if "Assertion `" not in text:
            return False
        m = _ASSERT.search(text)
        if m is None:
            return False
        where = f"{os.path.basename(m.group('file'))}:{m.group('line')}"
        cur = self.current
        if cur is not None and line_no - cur.last_line_no <= RECENT_LINES:
            if (cur.where, cur.kernel, cur.condition) == (where, m.group("kernel"), m.group("cond")):
                cur.repeats += 1
            else:
                cur.others += 1
            cur.last_line_no = line_no
            return True
        self.current = KernelAssertion(where, m.group("kernel"), m.group("cond"), line_no, raw, line_no)
        return True

    def take(self, line_no: int) -> KernelAssertion | None:
        """The assertion behind a device-side assert at `line_no`, if one was printed
        recently; it is then used up (a later failure needs its own lines)."""
        cur = self.current
        if cur is None or not 0 <= line_no - cur.last_line_no <= RECENT_LINES:
            return None
        self.current = None
        return cur
