"""Parsers for `nvidia-smi --query-* --format=csv,noheader,nounits` output.

Columns are mapped by POSITION to the query we sent (the header does not echo query
names on driver 580, FIELD-NOTES). A value that cannot be read -- `[N/A]`,
`[Not Supported]`, `N/A`, garbage, a missing column -- becomes None for that field of
that GPU only; a line that is not a GPU row at all (no integer index) is skipped, so a
warning printed among the rows never crashes the table (nvitop's rule).

A row whose column count differs from the query (a value holding an unquoted comma,
`12,34`; a driver that printed one field more or less) cannot be mapped by position:
every value after the break would be read as the wrong field (a memory reading taken for
a temperature). Such a row keeps its GPU -- index, and uuid where it still looks like one --
with every reading None, so the GPU is still counted as visible and shown as n/a.
"""

from __future__ import annotations

import csv
import io
import re

from controller.records import GpuProcess, GpuSample

GPU_QUERY_FIELDS = ("index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total",
                    "temperature.gpu", "power.draw", "clocks_event_reasons.active")
APPS_QUERY_FIELDS = ("pid", "gpu_uuid", "used_memory")

_UNREADABLE = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]",
               "[gpu is lost]", "[insufficient permissions]", "[requires profiling]", "-"}
_NUMBER_RE = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _UNREADABLE else v


def _number(value: str | None) -> float | None:
    """'23', '689.46', '1002 MiB' (units left on by some drivers) -> float; else None."""
    v = _text(value)
    if v is None:
        return None
    m = _NUMBER_RE.match(v)
    if not m:
        return None
    rest = v[m.end():].strip()
    if rest and not re.fullmatch(r"(%|MiB|W|C|MHz|KiB|GiB)", rest):
        return None
    try:
        x = float(m.group(0))
    except ValueError:
        return None
    # '1e999' parses as inf: not a reading, and --json would print the invalid `Infinity`
    return x if x == x and abs(x) != float("inf") else None


def _rows(text: str) -> list[list[str]]:
    # csv handles a GPU name with a quoted comma; skipinitialspace eats ", " separators.
    return [row for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


def parse_gpu_csv(text: str) -> list[GpuSample]:
    """Rows of --query-gpu=GPU_QUERY_FIELDS (by position) -> GpuSample per GPU."""
    gpus = []
    for row in _rows(text):
        cols = list(row) + [None] * (len(GPU_QUERY_FIELDS) - len(row))
        index = _number(cols[0])
        if index is None or index != int(index) or index < 0:
            continue  # not a GPU row (a warning line, a header)
        if len(row) != len(GPU_QUERY_FIELDS):
            uuid = _text(cols[1])
            gpus.append(GpuSample(index=int(index), uuid=uuid if uuid and uuid.startswith("GPU-") else None))
            continue
        reasons = _text(cols[8])
        if reasons is not None and not re.fullmatch(r"0x[0-9a-fA-F]+", reasons):
            reasons = None
        gpus.append(GpuSample(
            index=int(index), uuid=_text(cols[1]), name=_text(cols[2]),
            util_pct=_number(cols[3]), mem_used_mib=_number(cols[4]), mem_total_mib=_number(cols[5]),
            temp_c=_number(cols[6]), power_w=_number(cols[7]), clocks_event_reasons=reasons))
    return gpus


def parse_compute_apps_csv(text: str) -> list[GpuProcess]:
    """Rows of --query-compute-apps=pid,gpu_uuid,used_memory -> GpuProcess (vmid unset)."""
    procs = []
    for row in _rows(text):
        if len(row) != len(APPS_QUERY_FIELDS):
            continue  # columns shifted: the memory figure would be another field's
        cols = list(row)
        pid = _number(cols[0])
        if pid is None or pid != int(pid) or pid <= 0:
            continue
        procs.append(GpuProcess(pid=int(pid), gpu_uuid=_text(cols[1]), used_mib=_number(cols[2])))
    return procs


def gpu_error_from(rc: int, stdout: str, stderr: str) -> str | None:
    """Why the GPU table is empty, in words, or None when nvidia-smi answered."""
    if rc == 0:
        return None
    tail = (stderr.strip() or stdout.strip()).splitlines()
    detail = tail[-1][:200] if tail else ""
    if rc == 127:
        return "nvidia-smi not found on the host"
    if rc == 124:
        return "nvidia-smi timed out"
    return f"nvidia-smi exit {rc}" + (f": {detail}" if detail else "")
