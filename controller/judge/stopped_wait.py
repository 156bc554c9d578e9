"""A stop inside a blocking wait: the program was hung in that wait when someone stopped it.

Users whose run stops making progress press Ctrl-C and paste what Python printed: a
`KeyboardInterrupt` traceback. Its innermost frames say what the program was doing at that
moment. When they are a blocking wait -- a torch.distributed collective waiting for the
other ranks, DDP's buffer broadcast in the forward pass, the DataLoader's main process
waiting on its data queue, `ray.get` waiting for a remote task -- a careful reader
concludes the run was stuck there (a hang), and the wait is what to report, with the
user's frame that called it. When they are ordinary computation (a forward pass, a
matmul, NMS, a print), the Ctrl-C is only a user's stop, which the traceback reader
reports as before (`stopped by KeyboardInterrupt`, a warning).

Shape read (CPython's traceback, frames outermost first): the exception is
`KeyboardInterrupt`; walking from the innermost frame outwards over at most WAIT_FRAMES
frames, every frame passed is blocking plumbing (PLUMBING: threading.py, queue.py,
selectors.py, multiprocessing's connection/queues/synchronize, c10d's logger wrapper) until
a frame names a wait. A computation frame met first (a `module.py`, the user's own
code, a kernel) means the stop was not inside a wait. When processes' tracebacks printed into
each other, an excerpt of plumbing frames alone whose line above is the DataLoader's own code
line (`idx, batch = self.data_queue.get()`) is read as that wait too (_orphan_loader_wait).

Waits read, each from a pasted training-split log or the framework's source:
- torch.distributed collectives and waits (`all_reduce`, `barrier`, `broadcast`, `wait`,
  `_store_based_barrier`, ...; torch/distributed/distributed_c10d.py, the names of
  line_scan's COLLECTIVES).
- DDP's buffer broadcast before the forward pass (torch/nn/parallel/distributed.py
  `_sync_buffers` -> `_sync_module_buffers`: pasted ultralytics/ultralytics#1662, a
  Windows DDP run that "stopped after 2 epochs", Ctrl-C lands there).
- The DataLoader's main process on its data queue (torch/utils/data/dataloader.py
  `_try_get_data` / `_get_data`, then queue.py `get` -> threading.py `wait`: pasted
  pytorch/examples#148's `idx, batch = self.data_queue.get()` in a frozen AlexNet run; the
  current frame names as training-split threads show them: chanzuckerberg/cellxgene-census#521's
  hung test at `idx, data = self._get_data()`, RolnickLab/ami-data-companion#140's py-spy dump
  `_get_data` -> `_try_get_data` -> `get (queue.py)` -> `wait (threading.py)`).

- torchelastic's agent still joining the rendezvous (rendezvous/dynamic_rendezvous.py
  `next_rendezvous` -> the join op's poll and `_delay`): no worker started, the other nodes had not
  come (real torchrun output, tests/data/logs/torchrun_rdzv_join_ctrl_c_k14.log; _rendezvous_join).

Deliberately not waits: a launcher or parent that waits for its children (torchelastic's
agent sleeping in its monitor loop, `mp.spawn`'s `join` polling the children's sentinels --
pasted wuhuikai/FastFCN#98 --, the deepspeed launcher's `result.wait()` in subprocess.py --
pasted IntelLabs/academic-budget-bert#8 --, a Ray driver's `ray.get` on its trainer or Ray
Tune's event loop `# blocking` in `ray.wait` -- pasted ray-project/ray#23148, #11048) -- every
Ctrl-C of a healthy job shows those, so they do not say the job hung; a DataLoader
worker's `index_queue.get` in `_worker_loop` (an idle worker waits there for its next
index whenever the main process is busy); `.item()` or `torch.cuda.synchronize()` alone (a
device sync ends when the kernels in flight end: pasted nagadomi/nunif#26, a Ctrl-C in
GradScaler's `v.item()`, is a user's stop); threading's `_shutdown` join at interpreter
exit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from controller.judge.repair import Line
from controller.judge.tracebacks import python_frame

STOP_EXCEPTIONS = frozenset(("KeyboardInterrupt",))
WAIT_FRAMES = 6
"""How many innermost frames may be blocking plumbing under the frame naming the wait."""

COLLECTIVES = frozenset((
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_gather_coalesced", "_all_gather_base", "broadcast", "broadcast_object_list", "barrier",
    "monitored_barrier", "reduce", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
    "all_to_all", "all_to_all_single", "gather", "gather_object", "scatter", "scatter_object_list", "send",
    "recv", "batch_isend_irecv", "wait", "_store_based_barrier"))
"""torch.distributed's collectives and waits (torch/distributed/distributed_c10d.py)."""

_DDP_SYNC = frozenset(("_sync_buffers", "_sync_module_buffers", "_distributed_broadcast_coalesced",
                       "_sync_params_and_buffers", "_default_broadcast_coalesced"))
"""DDP's broadcasts of buffers/parameters from the authoritative rank (torch/nn/parallel/distributed.py;
pasted ultralytics/ultralytics#1662)."""

_LOADER_WAIT = frozenset(("_try_get_data", "_get_data"))
"""The DataLoader's main process reading its data queue (torch/utils/data/dataloader.py;
pasted pytorch/examples#148)."""

_ORPHAN_LOADER = re.compile(r"^\s+\S.*\bdata_queue\.get\(")
"""The DataLoader's own code line `idx, batch = self.data_queue.get()` left above a traceback whose
frame line was lost when processes' tracebacks interleaved (pasted pytorch/examples#148)."""

PLUMBING = ("/threading.py", "/queue.py", "/selectors.py", "/multiprocessing/connection.py",
            "/multiprocessing/queues.py", "/multiprocessing/synchronize.py", "/torch/distributed/c10d_logger.py")
"""Files whose frames sit between a wait and the system call it blocks in."""

_PARENTS = ("/torch/distributed/elastic/", "/torch/multiprocessing/spawn.py", "/subprocess.py")
"""A parent waiting for its children: not a hang by itself (see the module docstring)."""




_RENDEZVOUS = "/torch/distributed/elastic/rendezvous/"
_JOIN_FRAMES = ("next_rendezvous",)
"""torchelastic's rendezvous handlers' entry point (rendezvous/api.py RendezvousHandler.next_rendezvous;
dynamic_rendezvous.py, etcd_rendezvous.py, static_tcp_rendezvous.py implement it)."""


def _rendezvous_join(parsed: Sequence[tuple[str, str, str] | None]) -> str | None:
    """The agent stopped while it was still joining the rendezvous: a `next_rendezvous` frame of
    torch/distributed/elastic/rendezvous/, and every frame inside it in that package too (the join
    op's poll and delay: dynamic_rendezvous.py _DistributedRendezvousOpExecutor.run, which sleeps
    in rendezvous/utils.py `_delay` between tries of the join until enough nodes have joined or the
    join timeout passes). No worker has started yet: the agent is waiting for nodes that have not
    come (real torchrun 2.13 output, `--nnodes 2` with one node, Ctrl-C after 10 s:
    tests/data/logs/torchrun_rdzv_join_ctrl_c_k14.log). Unlike the agent's monitor loop after the
    workers started (a parent waiting for its children, `_PARENTS`), this wait is the job's start."""
    for k in range(len(parsed) - 1, -1, -1):
        p = parsed[k]
        if p is None or _RENDEZVOUS not in p[0]:
            return None  # a frame inside the join outside the rendezvous package (or none shown)
        if p[2] in _JOIN_FRAMES:
            path, line, fn = p
            return (f"torchelastic's rendezvous join ({fn}, {path.rsplit('/', 1)[-1]}:{line}: the agent was "
                    "waiting for the other nodes to join)")
    return None


def _wait_kind(path: str, fn: str) -> str:
    if "/torch/distributed/" in path and "/elastic/" not in path and fn in COLLECTIVES:
        return "torch.distributed"
    if path.endswith("/torch/nn/parallel/distributed.py") and fn in _DDP_SYNC:
        return "DDP's buffer broadcast"
    if path.endswith("/torch/utils/data/dataloader.py") and fn in _LOADER_WAIT:
        return "the DataLoader's data queue"
    return ""


def stopped_wait(rep: Sequence[Line], frames: Sequence[int], name: str) -> tuple[str, str] | None:
    """(wait, where) when a `name` exception (KeyboardInterrupt) was raised with its innermost
    frames inside a blocking wait: `wait` names the wait kind and its frame
    (`torch.distributed's barrier (distributed_c10d.py:3328)`), `where` the innermost frame
    outside the plumbing and the wait's own library (the caller, as `train.py:60 in main`,
    or "" when none is shown). None when the stop was not inside a wait."""
    if name.rsplit(".", 1)[-1] not in STOP_EXCEPTIONS or not frames:
        return None
    parsed = [python_frame(rep[i].text) for i in frames]
    joining = _rendezvous_join(parsed)
    if joining is not None:
        return joining, ""
    if any(p is not None and any(s in p[0] for s in _PARENTS) for p in parsed):
        return None
    found = -1
    for k in range(len(parsed) - 1, max(-1, len(parsed) - 1 - WAIT_FRAMES), -1):
        p = parsed[k]
        if p is None:
            return None
        kind = _wait_kind(p[0], p[2])
        if kind:
            found = k
            break
        if not p[0].endswith(PLUMBING) and "/torch/distributed/" not in p[0]:
            called = _logged_collective(rep, frames, parsed, k)
            if called:
                return called
            return None  # computation (or the user's code) is the innermost thing running
    if found < 0:
        return _orphan_loader_wait(rep, frames, parsed)
    hit = parsed[found]
    assert hit is not None  # (the loop returned on a None frame before reaching a wait)
    path, line, fn = hit
    wait = f"{kind}'s {fn} ({path.rsplit('/', 1)[-1]}:{line})" if kind == "torch.distributed" \
        else f"{kind} ({fn}, {path.rsplit('/', 1)[-1]}:{line})"
    where = ""
    for p in reversed(parsed[:found]):
        if p is not None and "site-packages" not in p[0] and "/lib/python" not in p[0].lower() \
                and "dist-packages" not in p[0]:
            where = f"{p[0].rsplit('/', 1)[-1]}:{p[1]} in {p[2]}"
            break
    return wait, where


_CALLED = re.compile(r"^\s*(?:[\w.\[\]]+\s*=\s*)?(?:[\w.]+\.)?(?P<fn>\w+)\(")
"""The caller's code line under its frame: `dist.barrier()`, `torch.distributed.all_reduce(g)`, `x = dist.recv(t, 0)`."""


def _logged_collective(rep: Sequence[Line], frames: Sequence[int],
                       parsed: Sequence[tuple[str, str, str] | None], k: int) -> tuple[str, str] | None:
    """A stop inside c10d's logging wrapper (torch/distributed/c10d_logger.py `_exception_logger`'s `wrapper`,
    which wraps every public collective of distributed_c10d.py): when the wrapped call raised -- under torchrun
    a Ctrl-C reaches every rank, the peer that dies first closes its gloo pair and the waiting rank's
    `work.wait()` raises `Connection closed by peer` -- the KeyboardInterrupt lands in the wrapper's handler
    (`_get_msg_dict`), so the innermost frames are only the wrapper's and the frame above them is the caller's
    line naming the collective (real output: tests/data/logs/gloo_barrier_hang_sigint.log, torch 2.13.0,
    rank 0 in `dist.barrier()` while rank 1 sleeps). (wait, where) for that collective, else None."""
    inner = parsed[k + 1:]
    if not inner or not all(p is not None and p[0].endswith("/torch/distributed/c10d_logger.py") for p in inner):
        return None
    caller = parsed[k]
    assert caller is not None
    at = frames[k] + 1
    if at >= len(rep) or rep[at].key != rep[frames[k]].key:
        return None
    m = _CALLED.match(rep[at].text)
    if not m or m.group("fn") not in COLLECTIVES:
        return None
    where = f"{caller[0].rsplit('/', 1)[-1]}:{caller[1]} in {caller[2]}"
    return f"torch.distributed's {m.group('fn')} (via c10d_logger.py's wrapper)", where


def _orphan_loader_wait(rep: Sequence[Line], frames: Sequence[int],
                        parsed: Sequence[tuple[str, str, str] | None]) -> tuple[str, str] | None:
    """A headerless excerpt of only plumbing frames (queue.py `get`) whose line above is the
    DataLoader's `self.data_queue.get()` code line: the main process's traceback, its frame line
    lost among the workers' tracebacks printed into it (pasted pytorch/examples#148)."""
    first = frames[0]
    known = [p for p in parsed if p is not None]
    if first == 0 or len(known) < len(parsed) or not all(p[0].endswith(PLUMBING) for p in known):
        return None
    above = rep[first - 1]
    if above.key != rep[first].key or not _ORPHAN_LOADER.match(above.text):
        return None
    path, line, fn = known[0]
    return f"the DataLoader's data queue (`{above.text.strip()}` -> {path.rsplit('/', 1)[-1]}:{line} {fn})", ""
