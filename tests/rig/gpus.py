"""GPU scenarios for the nvidia-smi stand-in: what each fake host's GPUs report.

A scenario is a JSON file the stand-in reads on every call, so a test can change it at
any moment (FakeHost.set_gpus). Any field may be given as a string instead of a number;
the stand-in then prints it verbatim, which is how a test asks for `[N/A]` or
`[Not Supported]` in exactly one field of one GPU.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

NA = "[N/A]"
NOT_SUPPORTED = "[Not Supported]"

Value = int | float | str


@dataclass
class FakeComputeApp:
    """One process using a GPU, as `--query-compute-apps` lists it (a *host* pid)."""

    pid: int
    used_memory_mib: Value = 1002
    process_name: str = "python3"


@dataclass
class FakeGpu:
    index: int
    uuid: str = ""
    name: str = "NVIDIA H200"
    utilization_gpu_pct: Value = 0
    utilization_memory_pct: Value = 0
    memory_used_mib: Value = 0
    memory_total_mib: Value = 143771
    memory_reserved_mib: Value = 614
    """Driver-reserved memory: free = total - used - reserved (as on an H200, driver 580)."""
    temperature_c: Value = 30
    power_draw_w: Value = 75.0
    power_limit_w: Value = 700.0
    clocks_sm_mhz: Value = 345
    clocks_mem_mhz: Value = 3201
    pstate: str = "P0"
    clocks_event_reasons: Value = 0x1
    """Bit mask (0x1 = GPU idle, 0x4 = SW power cap, 0x20 = SW thermal slowdown …)."""
    fan_speed_pct: Value = NA
    pci_bus_id: str = ""
    apps: list[FakeComputeApp] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.uuid:
            self.uuid = f"GPU-3bc0{self.index:04x}-0000-4000-8000-0000000000{self.index:02x}"
        if not self.pci_bus_id:
            self.pci_bus_id = f"00000000:{0x18 + 0x10 * self.index:02X}:00.0"


def busy_gpu(index: int, **overrides: Value) -> FakeGpu:
    """A GPU in the middle of training (the busy H200 row in FIELD-NOTES)."""
    values: dict = dict(utilization_gpu_pct=100, utilization_memory_pct=23, memory_used_mib=1011,
                        temperature_c=53, power_draw_w=689.46, clocks_sm_mhz=1515,
                        clocks_event_reasons=0x4)
    values.update(overrides)
    return FakeGpu(index=index, **values)


def default_gpus(count: int = 8) -> list[FakeGpu]:
    return [FakeGpu(index=i) for i in range(count)]


def write_scenario(path: Path, gpus: list[FakeGpu], *, failure: dict | None = None,
                   raw: dict | None = None, driver_version: str = "580.95.05",
                   cuda_version: str = "13.0") -> None:
    """Write atomically (temp file + rename) so a concurrent nvidia-smi never reads half."""
    doc = {"driver_version": driver_version, "cuda_version": cuda_version,
           "gpus": [asdict(g) for g in gpus]}
    if failure is not None:
        doc["failure"] = failure
    if raw is not None:
        doc["raw"] = raw
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)
