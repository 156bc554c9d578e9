"""compare-runs' RUN arguments -> LoadedRun, every one read through controller.adopt.importers
(a path, a registry run, a wandb path): this module only decides which reader a spec names."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from controller.adopt.importers import (
    WANDB_PATH_RE,
    LoadedRun,
    load_path,
    load_registry_job,
    load_registry_run,
    read_wandb_path,
)
from controller.errors import BadInputError, UnknownRunError

if TYPE_CHECKING:
    from controller.store.runstore import RunStore


def resolve(spec: str, store: RunStore | None = None) -> LoadedRun:
    """A RUN argument -> LoadedRun. Tried in order: an existing path (log file, metrics.jsonl,
    run directory, wandb run dir or file), a registry run id/name, a wandb path."""
    from controller.store.runstore import RunStore

    if Path(spec).expanduser().exists():
        return load_path(spec)
    store = store or RunStore()
    try:
        record = store.get_run(spec)
    except UnknownRunError as exc:
        if WANDB_PATH_RE.match(spec) and spec.count("/") >= 2:
            return read_wandb_path(spec)
        raise BadInputError(
            f"run {spec!r}: not a file or directory, not in the registry, and not a wandb path "
            f"entity/project/run_id", hint=str(exc.message)) from None
    if record.target_kind == "job":     # a multi-node job: compared on its aggregate throughput
        return load_registry_job(record, store)
    return load_registry_run(record, store)
