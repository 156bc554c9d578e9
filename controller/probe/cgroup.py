"""Parsers for the memory cgroup files the probe ships raw (cgroup v2 and v1).

The `oom_kill` counter tells an OOM kill (exit 137 with the counter up) from a SIGKILL of
another cause (FIELD-NOTES). v2: `memory.events` (`oom_kill N`), `memory.peak`,
`memory.max` (`max` = no limit). v1 (the test machines): `memory.oom_control`
(`oom_kill N`, kernels >= 4.13), `memory.max_usage_in_bytes`, `memory.limit_in_bytes`
(a huge number = no limit).
"""

from __future__ import annotations

from dataclasses import dataclass

_V1_NO_LIMIT_BYTES = 1 << 60   # v1 writes 9223372036854771712 for "unlimited"


@dataclass(frozen=True)
class MemoryCgroup:
    version: int | None = None
    path: str | None = None
    oom_kill_count: int | None = None
    peak_bytes: int | None = None
    limit_bytes: int | None = None
    current_bytes: int | None = None


def _keyed(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def _int(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _one_level(doc: dict) -> MemoryCgroup:
    files = doc.get("files") or {}
    if doc.get("version") == 2:
        limit_text = (files.get("memory.max") or "").strip()
        limit = None if limit_text in ("", "max") else _int(limit_text)
        return MemoryCgroup(2, doc.get("path"), _keyed(files.get("memory.events"), "oom_kill"),
                            _int(files.get("memory.peak")), limit, _int(files.get("memory.current")))
    limit = _int(files.get("memory.limit_in_bytes"))
    if limit is not None and limit >= _V1_NO_LIMIT_BYTES:
        limit = None
    return MemoryCgroup(1, doc.get("path"), _keyed(files.get("memory.oom_control"), "oom_kill"),
                        _int(files.get("memory.max_usage_in_bytes")), limit,
                        _int(files.get("memory.usage_in_bytes")))


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def parse_memory_cgroup(doc: dict | None) -> MemoryCgroup | None:
    """The probe's {"version", "path", "files": {name: text}, "parent": {...}?} -> MemoryCgroup.

    With a parent level (Proxmox's /lxc/<vmid> above /lxc/<vmid>/ns): oom_kill is the
    larger counter (v2 counts hierarchically, v1 may count only locally), the limit the
    tighter one, the peak the larger. `path` stays the processes' own level.
    """
    if not doc:
        return None
    own = _one_level(doc)
    if not doc.get("parent"):
        return own
    up = _one_level(doc["parent"])
    limits = [x for x in (own.limit_bytes, up.limit_bytes) if x is not None]
    return MemoryCgroup(own.version, own.path, _max(own.oom_kill_count, up.oom_kill_count),
                        _max(own.peak_bytes, up.peak_bytes), min(limits) if limits else None,
                        _max(own.current_bytes, up.current_bytes))


def vmid_from_cgroup(text: str | None) -> int | None:
    """/proc/<pid>/cgroup -> the LXC container id (`/lxc/<vmid>/`, `lxc.payload.<vmid>`)."""
    import re

    m = re.search(r"/lxc(?:\.payload)?[./](\d+)(?:/|$)", text or "", re.M)
    return int(m.group(1)) if m else None
