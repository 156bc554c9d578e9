"""NCCL's own back trace: an error returned out of the top of one of NCCL's threads.

With NCCL_DEBUG=INFO (or WARN for the WARN line), NCCL prints no exception and no
summary when a call fails inside it: the failing call WARNs (`NCCL WARN socketProgress:
Connection closed by remote peer ...`, `NCCL WARN NET/IB : Got completion from peer ...
with error 4 ...`), and each NCCLCHECK the error passes on its way up prints one INFO
line, `FILE:LINE -> RES` (NVIDIA/nccl src/include/checks.h, NCCLCHECK / NCCLCHECKGOTO:
`INFO(NCCL_ALL,"%s:%d -> %d", __FILE__, __LINE__, RES)` when RES is neither ncclSuccess
nor ncclInProgress; read at 0456df2). Such a chain alone proves little -- a cleanup path
prints it too (NCCLCHECKIGNORE), and a caller may fall back. What ends the communicator is
the chain reaching the top of a thread, which NCCL marks:

- `-> RES [Async thread]`: the communicator's init thread returned the error
  (checks.h NCCLCHECKTHREAD / CUDACHECKTHREAD, `INFO(NCCL_INIT,"%s:%d -> %d [Async
  thread]", ...)`): ncclCommInitRank fails;
- `-> RES [Progress Thread]`: the proxy progress loop stored the error as the
  communicator's async result and left its loop (src/proxy.cc ncclProxyProgress at
  7614543: `__atomic_store_n(&proxyState->asyncResult, ret, ...); INFO(NCCL_ALL,"%s:%d ->
  %d [Progress Thread]", ...); break;`); older releases' src/proxy.cc print `[Proxy
  Thread]` right after `comm->fatalError = ret` / `ncclCommSetAsyncError(comm, ret)` and
  return -- either way every later collective on that communicator fails and torch's
  watchdog reports it (the 2.3-era lower-case `[Proxy thread]`, printed with no error
  stored, is not read);
- `NCCL WARN [Proxy Service N] Failed to execute operation OP from rank R, retcode RES`
  (src/proxy.cc, the proxy service loop: printed only when the communicator is not
  already being aborted) -- the peer's connection is closed.

Pasted: NVIDIA/nccl-tests#252 (an IB completion error ending the progress thread),
#166 (a socket closed by the peer ending init), #188 (a proxy Connect that failed).
The reader here reads that one line; the rule is rules.py `nccl-thread-error`, and the
cause -- the nearest `NCCL WARN` above printed by the same NCCL thread (`host:pid:tid`,
NCCL's line prefix) -- is what `warn_cause` adds to its summary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from controller.judge.repair import Line

RESULTS = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError", 4: "ncclInvalidArgument",
           5: "ncclInvalidUsage", 6: "ncclRemoteError"}
"""ncclResult_t (NVIDIA/nccl src/nccl.h.in): the codes a back-trace line carries."""

TOP = (r"NCCL INFO \S+:\d+ -> (?P<code>\d+) \[(?P<thread>Async thread|Progress Thread|Proxy Thread)\]"
       r"|NCCL WARN \[Proxy Service \d+\] Failed to execute operation (?P<op>\w+) from rank \d+, retcode (?P<rc>\d+)")
"""The rule's pattern (rules.py nccl-thread-error)."""

_THREAD = re.compile(r"(?P<tid>[^\s:]+:\d+:\d+) \[\d+\] ")
"""NCCL's line prefix, `host:pid:tid [cudaDev] ` (src/debug.cc ncclDebugLog)."""
_WARN = re.compile(r"NCCL WARN (?P<msg>.+?)\s*$")
WARN_LOOKBACK_LINES = 16
"""Lines above the thread-top line its WARN may be (the chain between, other threads' lines)."""
MAX_CAUSE_CHARS = 160


def _thread_ended(m: re.Match) -> str:
    if m.group("op"):
        code = int(m.group("rc"))
        what = f"the proxy service failed to execute {m.group('op')}"
    else:
        code = int(m.group("code"))
        what = {"Async thread": "communicator init failed in its async thread",
                "Progress Thread": "the proxy progress thread stopped on an error",
                "Proxy Thread": "the proxy progress thread stopped on an error"}[m.group("thread")]
    name = RESULTS.get(code)
    return f"NCCL: {what} ({name}, {code})" if name else f"NCCL: {what} (code {code})"


def summary(m: re.Match, line: str) -> str:
    return _thread_ended(m)


def warn_cause(lines: Sequence[Line], i: int) -> tuple[str, int | None]:
    """The nearest `NCCL WARN` at or above index i printed by the same NCCL thread as line i:
    (its message, its index); ("", None) when none is near."""
    m = _THREAD.search(lines[i].text)
    if m is None:
        return "", None
    tid = m.group("tid")
    for j in range(i, max(-1, i - 1 - WARN_LOOKBACK_LINES), -1):
        text = lines[j].text
        if tid not in text:
            continue
        w = _WARN.search(text)
        if w is None or "[Proxy Service" in w.group("msg"):
            continue
        cause = w.group("msg")
        if len(cause) > MAX_CAUSE_CHARS:
            cause = cause[:MAX_CAUSE_CHARS - 3] + "..."
        return cause, j
    return "", None
