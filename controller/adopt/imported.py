"""What a registry record says of an imported run (`dfctl import`, controller.adopt.importers).

Apart from the importer because every `dfctl runs`, `logs`, `stop` and `watch` asks "is this
run an import?" of each record, and the importer's module pulls in pyarrow (~0.15 s at
each CLI start); these questions need nothing but the record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.store.runstore import RunRecord

IMPORTED_KIND = "import"
"""RunRecord.target_kind of an imported run: no process of ours, files read locally, an
end state fixed by what the import found."""


def is_imported(record: RunRecord) -> bool:
    return record.target_kind == IMPORTED_KIND


def imported_end_state(record: RunRecord) -> tuple[str, str]:
    """(end state, detail) the import found: 'oom', 'crash', 'finished', … -- not 'unknown'."""
    info = (record.playbook or {}).get("imported") or {}
    meta: dict = {}
    if not info.get("end_state"):   # an import older than the end state in its record
        from controller.store.history import read_meta

        meta = read_meta(record.run_id)
    return (str(info.get("end_state") or meta.get("end_state") or record.state or "unknown"),
            str(info.get("end_detail") or meta.get("end_detail") or ""))


def imported_source(record: RunRecord) -> str:
    return str(((record.playbook or {}).get("imported") or {}).get("source") or "?")
