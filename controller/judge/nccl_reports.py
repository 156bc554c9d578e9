"""The NCCL error-report reader: one NCCL error as torch prints it is several lines, and
its cause is the last of them.

torch builds the message of a NCCL failure (`DistBackendError` / `RuntimeError`: `NCCL
error in: FILE:LINE, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version
2.28.9`) from the NCCL result and, in getNcclErrorDetailStr
(torch/csrc/distributed/c10d/NCCLUtils.cpp), appends on lines of their own the result
code's interpretation (`ncclInvalidUsage: This usually reflects invalid usage of NCCL
library.`) and NCCL's own last error (`Last error:` then, on the next line, what NCCL
said -- `Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60`; or `Last
error: Unknown NCCL Error` on one line). Real example: tests/corpus/device/
torchrun-nccl-same-gpu.log, made on an H200.

Read line by line, the report is two failures (the header's reason and the code's
interpretation) and hides the one thing a reader needs (NCCL's last error). `read_report`
reads the lines after the header, on the same launcher prefix, as one report: the cause,
and which lines it used, so no rule reads them again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from controller.judge.repair import Line

_INTERPRETATION = re.compile(r"^nccl[A-Z]\w+: ")
_LAST_ERROR = re.compile(r"^Last error:\s*(?P<rest>.*?)\s*$")
REPORT_LINES = 6
"""Lines after the header a report may span (interpretation, `Last error:`, the cause,
and a line or two of another rank's output interleaved)."""
MAX_CAUSE_CHARS = 200


@dataclass(frozen=True)
class NcclReport:
    cause: str                  # NCCL's last error ("" when it printed none, or an unknown one)
    lines: tuple[int, ...]      # indexes of the report's continuation lines (after the header)


def read_report(lines: Sequence[Line], header: int) -> NcclReport:
    """The report that continues the NCCL error header at index `header`."""
    key = lines[header].key
    used: list[int] = []
    cause = ""
    waiting_cause = False
    for j in range(header + 1, min(len(lines), header + 1 + REPORT_LINES)):
        ln = lines[j]
        if ln.key != key:
            continue
        text = ln.text.strip()
        if waiting_cause:
            if text:
                used.append(j)
                cause = text
            break
        if _INTERPRETATION.match(text):
            used.append(j)
            continue
        m = _LAST_ERROR.match(text)
        if m:
            used.append(j)
            rest = m.group("rest")
            if rest:
                cause = "" if rest.lower().startswith("unknown nccl error") else rest
                break
            waiting_cause = True
            continue
        break
    if len(cause) > MAX_CAUSE_CHARS:
        cause = cause[:MAX_CAUSE_CHARS - 3] + "..."
    return NcclReport(cause, tuple(used))
