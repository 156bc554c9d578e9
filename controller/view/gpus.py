"""One row per GPU: utilisation and memory bars, temperature, power, who uses it.

A field nvidia-smi could not read is None in the state and `n/a` here, for that field and
that GPU only. Given fewer rows than GPUs, the first line summarises all of them.
"""

from __future__ import annotations

from rich.text import Text

from controller.records import GpuSample, HostSample, RunState
from controller.view.bars import bar
from controller.view.format import NA, known, num


def run_gpus(state: RunState) -> tuple[list[GpuSample], str | None]:
    """The run's GPUs (else its host's), and why there are none when there are none."""
    host: HostSample | None = state.host_sample
    gpus = state.gpus or (host.gpus if host else [])
    error = None
    if not gpus:
        error = (host.gpu_error or (host.error if host and not host.reachable else None)) if host else None
        error = error or "no GPU readings"
    return gpus, error


def _mem_fraction(g: GpuSample) -> float | None:
    if known(g.mem_used_mib) and known(g.mem_total_mib) and g.mem_total_mib > 0:
        return g.mem_used_mib / g.mem_total_mib
    return None


def _mem_text(g: GpuSample) -> str:
    used = num(g.mem_used_mib / 1024, 1) if known(g.mem_used_mib) else NA
    total = num(g.mem_total_mib / 1024, 0) if known(g.mem_total_mib) else NA
    return f"{used}/{total}G"


def needs_attention(g: GpuSample) -> bool:
    """Idle, partly unreadable, hot or nearly out of memory."""
    fields = (g.util_pct, g.mem_used_mib, g.mem_total_mib, g.temp_c, g.power_w)
    frac = _mem_fraction(g)
    return (any(not known(v) for v in fields) or (known(g.util_pct) and g.util_pct < 5)
            or (known(g.temp_c) and g.temp_c >= 85) or (frac is not None and frac >= 0.95))


def gpu_row(g: GpuSample, width: int) -> Text:
    """`0 H200 ████··· 98% ███···· 71.2/141G  65C  300W run-a`, sized to `width`."""
    show_name = width >= 100
    bar_w = max(6, min(24, (width - 60 - (10 if show_name else 0)) // 2 + 6))
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{g.index:>2} ", style="bold")
    if show_name:
        t.append(f"{(g.name or NA).replace('NVIDIA ', '')[:9]:<9} ", style="dim")
    util = g.util_pct / 100 if known(g.util_pct) else None
    t.append_text(bar(util, bar_w))
    t.append(f" {num(g.util_pct, 0) + '%' if known(g.util_pct) else NA:>4} ")
    t.append_text(bar(_mem_fraction(g), bar_w))
    t.append(f" {_mem_text(g):>11} ")
    t.append(f"{(num(g.temp_c, 0) + 'C') if known(g.temp_c) else NA:>4} ")
    t.append(f"{(num(g.power_w, 0) + 'W') if known(g.power_w) else NA:>5} ")
    t.append(",".join(g.users) if g.users else "-", style="cyan" if g.users else "dim")
    return t


def summary_line(gpus: list[GpuSample], error: str | None) -> Text:
    """'GPUs 8  util avg 87% (2 idle)  mem 550/1128G  max 71C  2.4kW' in one line."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("GPUs", style="bold")
    if not gpus:
        t.append(f"  {NA} ({error})", style="dim")
        return t
    utils = [g.util_pct for g in gpus if known(g.util_pct)]
    idle = sum(1 for u in utils if u < 5)
    used = [g.mem_used_mib for g in gpus if known(g.mem_used_mib)]
    total = [g.mem_total_mib for g in gpus if known(g.mem_total_mib)]
    temps = [g.temp_c for g in gpus if known(g.temp_c)]
    power = [g.power_w for g in gpus if known(g.power_w)]
    t.append(f" {len(gpus)}  util ")
    t.append(f"avg {sum(utils) / len(utils):.0f}%" if utils else NA)
    if idle:
        t.append(f" ({idle} idle)", style="yellow")
    t.append("  mem ")
    t.append(f"{sum(used) / 1024:.0f}/{sum(total) / 1024:.0f}G" if used and total else NA)
    t.append(f"  max {max(temps):.0f}C" if temps else f"  temp {NA}")
    t.append(f"  {sum(power) / 1000:.1f}kW" if power else f"  power {NA}")
    return t


TWO_COLUMNS_FROM = 170
"""From this width on, GPU rows go two per line (8 GPUs in 4 lines), leaving rows for the log."""


def gpu_columns(width: int, n_gpus: int) -> int:
    return 2 if width >= TWO_COLUMNS_FROM and n_gpus > 2 else 1


def gpu_lines_wanted(width: int, n_gpus: int) -> int:
    """Lines the GPU section needs to show every GPU (summary line included)."""
    cols = gpu_columns(width, n_gpus)
    return 1 + -(-n_gpus // cols)


def gpu_lines(state: RunState, width: int, max_lines: int, now_s: float = 0.0) -> list[Text]:
    """Summary line then one row per GPU, as many as `max_lines` allows (+N more)."""
    if max_lines <= 0:
        return []
    gpus, error = run_gpus(state)
    lines = [summary_line(gpus, error)]
    room = max_lines - 1
    if room <= 0 or not gpus:
        return lines
    if gpu_columns(width, len(gpus)) == 2 and gpu_lines_wanted(width, len(gpus)) - 1 <= room:
        half = (width - 3) // 2
        rows = [gpu_row(g, half) for g in gpus]
        for i in range(0, len(rows), 2):
            line = rows[i]
            line.truncate(half, overflow="ellipsis", pad=True)
            if i + 1 < len(rows):
                line.append(" │ ", style="bright_black")
                line.append_text(rows[i + 1])
            lines.append(line)
        return lines
    if len(gpus) <= room:
        return lines + [gpu_row(g, width) for g in gpus]
    # Too few rows: show the GPUs worth a look (idle, unreadable, hot, full) first.
    picked = sorted(gpus, key=lambda g: (not needs_attention(g), g.index))[: room - 1]
    shown = [gpu_row(g, width) for g in sorted(picked, key=lambda g: g.index)]
    more = Text(f"   … +{len(gpus) - (room - 1)} more GPUs", style="dim", no_wrap=True, overflow="ellipsis")
    return lines + shown + [more]
