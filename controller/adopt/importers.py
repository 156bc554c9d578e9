"""Read a finished (or running) run from wherever its numbers are, and import it.

Sources, each read the same way by `dfctl compare-runs` and `dfctl import`:

- a log file (`train.log`, any trainer's stdout): progress lines through logparse's
  LineParser, failures through the detectors (OOM, crash) -> the end state;
- a `metrics.jsonl` file (the bundled trainer's contract, README);
- a run directory (launch.py's layout: train.log, exit_code, launch.json, metrics.jsonl,
  wandb/): metrics.jsonl for numbers, train.log + exit_code for the end state,
  launch.json for the start time, the wandb run for config;
- an offline wandb run directory (`wandb/offline-run-<ts>-<id>/` or its `.wandb` file);
- a wandb run path `entity/project/id` (or its URL), through the wandb API.

Everything comes out as one `LoadedRun`: progress as a pyarrow Table with the history's
progress schema (controller/store/history.py), so a 1M-row run is compared without a Python
object per row. `import_run()` writes a LoadedRun into the registry and the Parquet
history, so later commands can name it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from controller.adopt.imported import IMPORTED_KIND, imported_end_state
from controller.errors import BadInputError
from controller.records import Finding, ProgressSample, finite_or_none
from controller.store import history

if TYPE_CHECKING:
    from controller.records import RunState
    from controller.store.runstore import RunRecord, RunStore
    from controller.wandb_io.batch import WandbRunData

WANDB_PATH_RE = re.compile(
    r"^(?:https?://[^/\s]+/)?(?P<entity>[\w.-]+)/(?P<project>[\w.-]+)/(?:runs/)?(?P<run_id>[\w-]+)/?$")
_DONE_RE = re.compile(r"^\[done\].*\bexit_code=(-?\d+)")
MAX_LOG_BYTES_READ = 64 << 20
"""A log bigger than this is read from its last 64 MiB for the end state (its progress
lines are then partial; metrics.jsonl or wandb have the full series)."""

CONFIG_NOISE_KEYS = re.compile(r"(^|\.)(run_dir|data|target_model|resume|wandb_project)$")
"""Config keys that differ between any two runs by construction (paths, bookkeeping),
left out of the config diff so the keys that matter stand out."""

END_STATES = ("finished", "oom", "crash", "killed", "stopped", "running", "unknown")


@dataclass
class LoadedRun:
    """One run's numbers and facts, whatever it was read from."""

    label: str                                  # short name for tables and plots
    source: str                                 # the file, directory, wandb path or run id
    kind: str                                   # log | metrics | run-dir | wandb-offline | wandb-api | registry
    progress: pa.Table                          # history progress schema (run_id = label)
    start_s: float | None = None                # process/run start (unix s) when known
    end_state: str = "unknown"                  # one of END_STATES
    end_detail: str = ""                        # the evidence: "CUDA OOM on GPU 5 …", "exit 1"
    exit_code: int | None = None
    config: dict[str, Any] = field(default_factory=dict)   # flat "a.b" keys
    findings: list[Finding] = field(default_factory=list)
    wandb_run_id: str | None = None
    wandb_state: str | None = None              # running / finished / crashed, as wandb says
    wandb_rows: list[dict[str, Any]] = field(default_factory=list)
    log_path: str | None = None
    run_dir: str | None = None
    gpu_peak_mem_gib: float | None = None       # from GPU samples (nvidia-smi): the fullest one device
    memory_device: str | None = None            # "cuda" | "cpu": what the trainer's mem_peak_gib measures
    warmup: tuple[float, int] | None = None     # its playbook's watch.warmup_s / warmup_steps (registry runs)


# -- conversions ------------------------------------------------------------------------

def progress_table(samples: Iterable[ProgressSample], run_id: str) -> pa.Table:
    """ProgressSamples -> a table with the history's progress schema."""
    cols: dict[str, list] = {f.name: [] for f in history.SCHEMAS["progress"]}
    for s in samples:
        cols["run_id"].append(run_id)
        cols["step"].append(int(s.step))
        cols["time_s"].append(_finite(s.time_s))
        cols["source"].append(s.source)
        for name in history.PROGRESS_FLOAT_FIELDS:
            cols[name].append(_finite(getattr(s, name)))
    return pa.Table.from_pydict(cols, schema=history.SCHEMAS["progress"])


def samples_from_table(table: pa.Table) -> list[ProgressSample]:
    out = []
    for row in table.to_pylist():
        row.pop("run_id", None)
        out.append(ProgressSample(**{k: v for k, v in row.items() if k in ProgressSample.__dataclass_fields__}))
    return out


_finite = finite_or_none


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config -> {"train.lr": 0.003, ...}; wandb's {"value": x} wrappers unwrapped."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if str(key).startswith("_"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        if isinstance(value, dict):
            out.update(flatten_config(value, name + "."))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) or value is None else json.dumps(value)
    return out


def config_from_args(args: Iterable[str]) -> dict[str, Any]:
    """A playbook's `run.args` (argv) -> {"args.token_budget": "49152", "args.compile_drafter": True}.

    Named like the trainer's own wandb config (`args.*`), so a registry run and a wandb run
    of the same flags diff as equal."""
    out: dict[str, Any] = {}
    argv = list(args)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            key, eq, value = a[2:].partition("=")
            key = "args." + key.replace("-", "_")
            if eq:
                out[key] = _scalar(value)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[key] = _scalar(argv[i + 1])
                i += 1
            else:
                out[key] = True
        i += 1
    return out


def _scalar(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


# -- end state --------------------------------------------------------------------------

def scan_log_lines(lines: list[str]) -> list[Finding]:
    """The detectors' verdicts on a whole log (OOM, crash, NaN, ...), post-mortem."""
    from controller import judge

    return list(judge.scan_lines(lines))


def end_state(findings: list[Finding], exit_code: int | None, *, done_exit: int | None = None,
              wandb_state: str | None = None, alive: bool | None = None,
              stopped_by: str | None = None) -> tuple[str, str]:
    """(state, evidence): OOM and crashes from the detectors first, then the exit code,
    the trainer's `[done]` line, wandb's run state, and whether the process still lives."""
    by_kind: dict[str, Finding] = {}
    for f in findings:
        by_kind.setdefault(f.kind, f)
    if "oom" in by_kind:
        return "oom", by_kind["oom"].summary
    code = exit_code if exit_code is not None else done_exit
    if stopped_by and not alive:
        return "stopped", f"by {stopped_by}" + (f", exit {code}" if code is not None else "")
    if code in (137, -9):
        return "killed", f"exit {code} (SIGKILL)"
    if "crash" in by_kind:
        return "crash", by_kind["crash"].summary
    if code is not None and code != 0:
        return "crash", f"exit {code}"
    if code == 0:
        return "finished", "exit 0"
    if wandb_state == "finished":
        return "finished", "wandb: finished"
    if wandb_state in ("crashed", "failed", "killed"):
        return "crash", f"wandb: {wandb_state}"
    if alive or wandb_state == "running":
        return "running", "process alive" if alive else "wandb: running"
    return "unknown", "no exit code or end marker"


# -- readers ----------------------------------------------------------------------------

def _read_log_lines(path: Path) -> list[str]:
    from controller.follow.logparse import flush_carry, split_lines

    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if size > MAX_LOG_BYTES_READ:
                fh.seek(size - MAX_LOG_BYTES_READ)
                fh.readline()  # drop the partial first line
            data = fh.read()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read log file: {exc.strerror or exc}") from None
    lines, carry = split_lines(data)
    return lines + flush_carry(carry)


_DEVICE_RE = re.compile(r"^\[milestone\] target_loaded\b.*\bdevice=(cuda|cpu)\b")
"""The bundled trainer's start-up milestone names the device its memory figures are from."""


def memory_device_of(lines: Iterable[str]) -> str | None:
    """"cuda" when the trainer's mem_peak_gib is the CUDA allocator's peak summed over its
    GPUs, "cpu" when it is the process's peak RSS (ru_maxrss), None when the log does not say."""
    for line in lines:
        m = _DEVICE_RE.match(line)
        if m:
            return m.group(1)
    return None


def read_log(path: str | Path, *, label: str | None = None) -> LoadedRun:
    """A log file: progress lines, wandb id, the detectors' findings and the end state."""
    from controller.follow.logparse import LineParser

    p = Path(path)
    lines = _read_log_lines(p)
    parser = LineParser()
    samples: list[ProgressSample] = []
    wandb_id = None
    done_exit = None
    for line in lines:
        parsed = parser.parse(line)
        if parsed.progress is not None:
            parsed.progress.source = "log"
            samples.append(parsed.progress)
        elif parsed.wandb is not None and parsed.wandb.run_id:
            wandb_id = parsed.wandb.run_id
        m = _DONE_RE.match(line)
        if m:
            done_exit = int(m.group(1))
    findings = scan_log_lines(lines)
    exit_code = _read_int(p.parent / "exit_code") if p.name == "train.log" else None
    state, detail = end_state(findings, exit_code, done_exit=done_exit)
    name = label or (p.parent.name if p.name == "train.log" else p.stem)
    return LoadedRun(label=name, source=str(p), kind="log", progress=progress_table(samples, name),
                     end_state=state, end_detail=detail, exit_code=exit_code if exit_code is not None else done_exit,
                     findings=findings, wandb_run_id=wandb_id, log_path=str(p), memory_device=memory_device_of(lines))


def metrics_samples(lines: Iterable[bytes]) -> list[ProgressSample]:
    """metrics.jsonl lines -> samples (source "metrics"); unreadable lines are skipped."""
    samples = []
    for raw in lines:
        try:
            row = json.loads(raw)
        except ValueError:
            continue  # a partial last line of a live file
        if not isinstance(row, dict) or not isinstance(row.get("step"), (int, float)):
            continue
        s = ProgressSample(step=int(row["step"]), source="metrics")
        for name in ("time_s",) + history.PROGRESS_FLOAT_FIELDS:
            setattr(s, name, _finite(row.get(name)))
        samples.append(s)
    return samples


def read_metrics_jsonl(path: str | Path, *, label: str | None = None) -> LoadedRun:
    """The trainer's metrics.jsonl (README contract); unreadable lines are skipped."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            samples = metrics_samples(fh)
    except OSError as exc:
        raise BadInputError(f"{p}: cannot read metrics file: {exc.strerror or exc}") from None
    name = label or (p.parent.name if p.name == "metrics.jsonl" else p.stem)
    return LoadedRun(label=name, source=str(p), kind="metrics", progress=progress_table(samples, name),
                     start_s=None, end_state="unknown", end_detail="metrics only")


def read_wandb_offline(path: str | Path, *, label: str | None = None) -> LoadedRun:
    """An offline wandb run dir (or .wandb file): history, config, state."""
    from controller.wandb_io.source import read_offline_run, resolve_wandb_file

    data = read_offline_run(resolve_wandb_file(path))
    return _from_wandb_data(data, label=label, kind="wandb-offline", source=str(path))


def read_wandb_path(path: str, *, label: str | None = None) -> LoadedRun:
    """`entity/project/id` through the wandb API (BadInputError 2 / UnreachableError 3)."""
    from controller.wandb_io import source as wandb_source

    m = WANDB_PATH_RE.match(path)
    if not m:
        raise BadInputError(f"{path!r}: not a wandb run path (entity/project/run_id)")
    fetch = getattr(wandb_source, "fetch_run", None)
    if fetch is None:  # pragma: no cover - the API poller lands separately
        raise BadInputError(f"{path}: this dfctl cannot read runs from the wandb API")
    data = fetch(f"{m['entity']}/{m['project']}/{m['run_id']}")
    return _from_wandb_data(data, label=label, kind="wandb-api", source=path)


def _from_wandb_data(data: WandbRunData, *, label: str | None, kind: str, source: str) -> LoadedRun:
    name = label or data.run_id or Path(source).name
    samples = data.progress
    start = None
    first = data.history[0] if data.history else None
    if first and _finite(first.get("_timestamp")) and _finite(first.get("_runtime")):
        start = first["_timestamp"] - first["_runtime"]  # wandb.init time
    state, detail = end_state([], data.exit_code, wandb_state=data.state)
    return LoadedRun(label=name, source=source, kind=kind, progress=progress_table(samples, name),
                     start_s=start, end_state=state, end_detail=detail, exit_code=data.exit_code,
                     config=flatten_config(data.config or {}), wandb_run_id=data.run_id, wandb_state=data.state,
                     wandb_rows=list(data.history))


def _pid_alive(pid_file: Path) -> bool | None:
    """Whether launch.py's wrapper (pid file) still runs on this machine; None if unknown."""
    pid = _read_int(pid_file)
    if pid is None:
        return None
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - gone, or not ours to see
        return False


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_run_dir(path: str | Path, *, label: str | None = None, with_progress: bool = True) -> LoadedRun:
    """launch.py's run directory: metrics.jsonl (else the log, else wandb) for numbers,
    train.log + exit_code for the end state, launch.json for the start, wandb for config."""
    from controller.wandb_io.source import find_offline_runs

    d = Path(path)
    launch: dict[str, Any] = {}
    try:
        launch = json.loads((d / "launch.json").read_text())
    except (OSError, ValueError):
        pass
    name = label or launch.get("name") or d.name
    log = d / "train.log"
    metrics = d / "metrics.jsonl"
    wandb_runs = find_offline_runs(d)
    base: LoadedRun | None = None
    if log.is_file():
        base = read_log(log, label=name)
    wb = read_wandb_offline(wandb_runs[-1], label=name) if wandb_runs else None
    if not with_progress:  # the caller has the numbers (the registry's history)
        numbers = progress_table([], name)
    elif metrics.is_file():
        numbers = read_metrics_jsonl(metrics, label=name).progress
    elif base is not None and base.progress.num_rows:
        numbers = base.progress
    elif wb is not None:
        numbers = wb.progress
    else:
        numbers = progress_table([], name)
    if base is None and wb is None and not metrics.is_file():
        raise BadInputError(f"{d}: not a run directory (no train.log, metrics.jsonl or wandb/ run in it)")
    exit_code = _read_int(d / "exit_code")
    findings = base.findings if base else []
    done_exit = base.exit_code if base else None
    from controller.probe.readings import parse_stop_request
    from controller.remote.launcher import STOP_REQUEST_FILE

    try:
        stopped_by, _, _ = parse_stop_request((d / STOP_REQUEST_FILE).read_text(errors="replace"))
    except OSError:
        stopped_by = None
    state, detail = end_state(findings, exit_code, done_exit=done_exit, wandb_state=wb.wandb_state if wb else None,
                              alive=_pid_alive(d / "pid") if exit_code is None else False, stopped_by=stopped_by)
    start = _finite(launch.get("started_s")) or (wb.start_s if wb else None)
    return LoadedRun(label=name, source=str(d), kind="run-dir", progress=numbers, start_s=start,
                     end_state=state, end_detail=detail, exit_code=exit_code if exit_code is not None else done_exit,
                     config=wb.config if wb else {}, findings=findings,
                     wandb_run_id=(wb.wandb_run_id if wb else None) or (base.wandb_run_id if base else None),
                     wandb_rows=wb.wandb_rows if wb else [], log_path=str(log) if log.is_file() else None,
                     run_dir=str(d), memory_device=base.memory_device if base else None)


def load_path(spec: str, *, label: str | None = None) -> LoadedRun:
    """A file or directory -> LoadedRun, choosing the reader by what is there."""
    from controller.wandb_io.offline_reader import _RUN_DIR_RE  # offline-run-<ts>-<id> / run-<ts>-<id>

    p = Path(spec).expanduser()
    if p.is_dir():
        if _RUN_DIR_RE.match(p.name) or p.name == "wandb" and not (p / "metrics.jsonl").exists():
            return read_wandb_offline(p, label=label)
        return read_run_dir(p, label=label)
    if p.is_file():
        if p.suffix == ".wandb":
            return read_wandb_offline(p, label=label)
        if p.suffix == ".jsonl":
            return read_metrics_jsonl(p, label=label)
        return read_log(p, label=label)
    if p.exists():
        raise BadInputError(f"{spec}: neither a file nor a directory")
    raise BadInputError(f"{spec}: no such file or directory")


# -- import -----------------------------------------------------------------------------

def imported_state(record: RunRecord, findings: Iterable[Finding]) -> RunState:
    """The RunState an imported run shows in `dfctl watch`: its end state, exit code,
    findings and progress as the import recorded them (nothing to probe)."""
    from controller.records import ProcessState, RunState

    state, _ = imported_end_state(record)
    return RunState(run_id=record.run_id, name=record.name, target=record.target, run_dir=record.run_dir,
                    started_s=record.started_s, state=state, findings=list(findings),  # type: ignore[arg-type]  # an import's own end states (oom, crash, killed) are shown as they are
                    process=ProcessState(state="exited", exit_code=record.exit_code),
                    progress=samples_from_table(history.read_progress(record.run_id)))


def import_run(spec: str, *, name: str | None = None, store: RunStore | None = None) -> tuple[RunRecord, LoadedRun]:
    """Read SOURCE (path or wandb path) and record it: a registry row (target "imported"),
    its progress and wandb rows in the Parquet history, its findings, and meta.json with
    the config and end state. Returns (RunRecord, LoadedRun)."""
    from controller.store.runstore import RunRecord, RunStore

    p = Path(spec).expanduser()
    if p.exists():
        loaded = load_path(spec, label=name)
    elif WANDB_PATH_RE.match(spec):
        loaded = read_wandb_path(spec, label=name)
    else:
        raise BadInputError(f"{spec}: no such file or directory, and not a wandb path entity/project/run_id")
    store = store or RunStore()
    run_name = name or loaded.label
    from controller.playbook import check_run_name

    check_run_name(run_name, "--name" if name else f"{spec}: its run name (give --name)")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_id = f"{run_name}-{stamp}"
    n = 2
    while _exists(store, run_id):
        run_id = f"{run_name}-{stamp}-{n}"
        n += 1
    times = [t for t in loaded.progress.column("time_s").to_pylist() if t is not None]
    record = RunRecord(
        run_id=run_id, name=run_name, target_kind=IMPORTED_KIND, target=f"imported ({loaded.kind})",
        run_dir=loaded.run_dir or "", log_path=loaded.log_path or "",
        # its files are on this machine: every command reads them through the local target
        playbook={"imported": {"source": str(p.resolve()) if p.exists() else spec, "kind": loaded.kind,
                               "end_state": loaded.end_state, "end_detail": loaded.end_detail},
                  "target": {"kind": "local"}},
        started_s=loaded.start_s if loaded.start_s is not None else (min(times) if times else time.time()),
        wandb_run_id=loaded.wandb_run_id,
        state={"finished": "finished", "running": "running", "unknown": "unknown"}.get(loaded.end_state, "failed"),
        exit_code=loaded.exit_code, ended_s=max(times) if times else None)
    with history.HistoryWriter(run_id) as writer:
        table = loaded.progress.set_column(0, "run_id", pa.array([run_id] * loaded.progress.num_rows, pa.string()))
        writer.append_progress_table(table)
        if loaded.wandb_rows:
            writer.append_wandb_rows(loaded.wandb_rows)
    history.write_meta(run_id, {
        "label": run_name, "source": record.playbook["imported"]["source"], "kind": loaded.kind,
        "config": loaded.config, "end_state": loaded.end_state, "end_detail": loaded.end_detail,
        "exit_code": loaded.exit_code, "start_s": loaded.start_s, "wandb_run_id": loaded.wandb_run_id,
        "memory_device": loaded.memory_device, "imported_s": time.time()})
    store.add_run(record)
    if loaded.findings:
        store.add_findings(run_id, loaded.findings)
    loaded.label = run_name
    return record, loaded


def _exists(store: RunStore, run_id: str) -> bool:
    from controller.errors import UnknownRunError

    try:
        return store.get_run(run_id).run_id == run_id
    except UnknownRunError:
        return False


# -- registry runs --------------------------------------------------------------------------

PROGRESS_COLUMNS = ("step", "time_s", "tok_per_s", "samples_per_s", "step_time_s", "loss", "tau", "mem_peak_gib",
                    "accept_len", "eval_loss", "eval_accept_len", "eval_accept_len_decode")
"""The progress columns a comparison reads (of a 1M-row history, only these are decoded)."""
LOCAL_METRICS_MAX_BYTES = 256 << 20
"""A registry run's local metrics.jsonl up to this size is read when it holds more steps
than the history (a run the watch saw only in part)."""


def load_registry_run(record: RunRecord, store: RunStore) -> LoadedRun:
    """A registry run: its Parquet history (+ meta.json of an import), else its local run dir
    (the one way compare-runs and the other readers load a run the registry holds)."""

    meta = history.read_meta(record.run_id)
    table = history.read_progress(record.run_id, columns=list(PROGRESS_COLUMNS))
    warmup = playbook_warmup(record.playbook)
    findings = store.findings(record.run_id)
    if table.num_rows == 0 and record.run_dir and Path(record.run_dir).is_dir():
        loaded = read_run_dir(record.run_dir, label=record.name)
        loaded.source = record.run_id
        loaded.kind = "registry"
        loaded.warmup = warmup
        return loaded
    if table.num_rows == 0 and not meta:
        raise BadInputError(f"run {record.name!r} ({record.run_id}): no metric history recorded yet and its run "
                            f"directory {record.run_dir or '?'} is not on this machine",
                            hint="watch it (dfctl watch) or import its log/wandb run (dfctl import)")
    config = meta.get("config") or config_from_args(((record.playbook or {}).get("run") or {}).get("args") or ())
    device = meta.get("memory_device")
    if meta.get("end_state"):
        state, detail = meta["end_state"], meta.get("end_detail", "")
    elif record.run_dir and Path(record.run_dir).is_dir():
        # A local run: its directory knows best (exit_code file, the log's OOM/crash, pid),
        # and its metrics.jsonl has every step even when the watch saw only part of the run.
        metrics = Path(record.run_dir) / "metrics.jsonl"
        fuller = metrics.is_file() and metrics.stat().st_size <= LOCAL_METRICS_MAX_BYTES
        local = read_run_dir(record.run_dir, label=record.name, with_progress=fuller)
        state, detail = local.end_state, local.end_detail
        device = local.memory_device
        config = {**config, **local.config}
        if local.progress.num_rows > table.num_rows:
            table = local.progress
    else:
        state, detail = end_state(findings, record.exit_code,
                                  alive=record.state in ("running", "launched"),
                                  stopped_by="dfctl stop" if record.state == "stopped" else None)
    if state == "unknown" and record.origin == "attached" and record.state in ("ended", "stopped"):
        # a run dfctl attached to leaves no exit code: say how it ended as far as is known
        state, detail = (("stopped", "by dfctl stop, exit code unknown") if record.state == "stopped"
                         else ("ended", "exit code unknown (dfctl did not launch it)"))
    gpus = history.read_table(record.run_id, "gpus", columns=["mem_used_mib"])
    peak = pc.max(gpus.column("mem_used_mib")).as_py() if gpus.num_rows else None
    return LoadedRun(label=record.name, source=record.run_id, kind="registry", progress=table,
                     start_s=meta.get("start_s") or record.started_s, end_state=state, end_detail=detail,
                     exit_code=record.exit_code if record.exit_code is not None else meta.get("exit_code"),
                     config=config, findings=findings, wandb_run_id=record.wandb_run_id,
                     log_path=record.log_path or None, run_dir=record.run_dir or None,
                     gpu_peak_mem_gib=peak / 1024 if peak is not None else None, warmup=warmup,
                     memory_device=device)


def playbook_warmup(playbook: dict[str, Any] | None) -> tuple[float, int] | None:
    """(warmup_s, warmup_steps) of a registered run's [watch] table, None when it has none
    (then compare-runs' defaults apply). Why: the watch judged the run by these values; a
    compare with other ones printed other numbers for the same run (playbooks/local.toml's
    10 s warm-up against the 60 s default made the demo run "short run: start-up included")."""
    from controller.playbook import watch_config_from

    raw = (playbook or {}).get("watch") or {}
    if "warmup_s" not in raw and "warmup_steps" not in raw:
        return None
    cfg = watch_config_from(playbook)
    return float(cfg.warmup_s), int(cfg.warmup_steps)


def load_registry_job(record: RunRecord, store: RunStore) -> LoadedRun:
    """A multi-node job as one run for compare-runs: each node's history (or run dir) read
    as a registry run, folded per step into the job's progress -- tok/s and samples/s
    summed over the nodes that report the step (the bundled trainer reports on global
    rank 0 only, already counting every rank: the trainer's global figure; a trainer that
    reports per node gets its nodes summed), every other field from the lowest node that
    has it. Its end state is the job's (the first-failure finding), else its nodes' worst."""
    members = store.job_members(record.run_id)
    if not members:
        raise BadInputError(f"job {record.name!r} ({record.run_id}): no member rows in the registry",
                            hint="the job's nodes are registered by dfctl deploy; `dfctl runs` lists jobs")
    loaded = [load_registry_run(m, store) for m in members]
    by_step: dict[int, ProgressSample] = {}
    for run in loaded:
        for s in samples_from_table(run.progress):
            have = by_step.get(s.step)
            if have is None:
                by_step[s.step] = s
                continue
            for name in ("tok_per_s", "samples_per_s"):
                a, b = getattr(have, name), getattr(s, name)
                if b is not None:
                    setattr(have, name, b if a is None else a + b)
            for name in history.PROGRESS_FLOAT_FIELDS:
                if name not in ("tok_per_s", "samples_per_s") and getattr(have, name) is None:
                    setattr(have, name, getattr(s, name))
            if s.time_s is not None and (have.time_s is None or s.time_s < have.time_s):
                have.time_s = s.time_s
    findings = store.findings(record.run_id)
    states = [r.end_state for r in loaded]
    if findings:
        state, detail = end_state(findings, None)
    else:
        worst = next((r for r in loaded if r.end_state not in ("finished", "running")), loaded[0])
        state, detail = worst.end_state, worst.end_detail
    peaks = [r.gpu_peak_mem_gib for r in loaded if r.gpu_peak_mem_gib is not None]
    config = config_from_args(((record.playbook or {}).get("run") or {}).get("args") or ())
    config.update({f"distributed.{k}": v for k, v in ((record.playbook or {}).get("distributed") or {}).items()
                   if isinstance(v, (int, float, str, bool))})
    config["nodes"] = len(members)
    return LoadedRun(label=record.name, source=record.run_id, kind="registry",
                     progress=progress_table([by_step[k] for k in sorted(by_step)], record.name),
                     start_s=record.started_s, end_state=state if states else "unknown", end_detail=detail,
                     config=config, findings=findings + [f for r in loaded for f in r.findings],
                     gpu_peak_mem_gib=max(peaks) if peaks else None, warmup=playbook_warmup(record.playbook),
                     memory_device=loaded[0].memory_device)
