"""What an exit status or a signal means, mapped once (launchers, the shell and the
process watcher all report deaths this way).

A launcher prints a child's end as a negative code (-11: killed by signal 11, Python's
subprocess and torch.elastic), a shell as 128+N (139), and both often only as a name.
SIGKILL is what the kernel's OOM killer sends, so on its own it most likely means host
memory ran out; SIGSEGV/SIGBUS/SIGILL/SIGFPE are native crashes; SIGABRT is a failed
native check; SIGTERM/SIGINT/SIGHUP are someone stopping the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.judge.evidence import signal_name
from controller.judge.hints import HINT_ABORT, HINT_CRASH, HINT_HOST_OOM, HINT_SEGV


@dataclass(frozen=True)
class Death:
    kind: str          # "oom" | "crash"
    severity: str
    what: str          # "SIGSEGV (segmentation fault)", "exit code 3"
    hint: str
    signum: int | None = None


_SIGNALS = {
    9: ("oom", "critical", "SIGKILL: host OOM likely", HINT_HOST_OOM + "; or someone ran kill -9"),
    11: ("crash", "critical", "SIGSEGV (segmentation fault)", HINT_SEGV),
    6: ("crash", "critical", "SIGABRT (aborted)", HINT_ABORT),
    7: ("crash", "critical", "SIGBUS (bus error: /dev/shm full, or a truncated mmap'd file)", HINT_SEGV),
    4: ("crash", "critical", "SIGILL (illegal instruction: a binary built for another CPU)", HINT_SEGV),
    8: ("crash", "critical", "SIGFPE (floating point exception)", HINT_SEGV),
    15: ("crash", "warning", "SIGTERM (stopped)", "someone or something stopped it (a scheduler, dfctl stop)"),
    2: ("crash", "warning", "SIGINT (interrupted)", "someone pressed Ctrl-C or sent SIGINT"),
    1: ("crash", "warning", "SIGHUP (terminal closed)", "the terminal closed: launch with setsid nohup"),
}

SIGNAL_BY_WORD = {
    "segmentation fault": 11, "aborted": 6, "abort trap": 6, "bus error": 7, "illegal instruction": 4,
    "floating point exception": 8, "killed": 9, "terminated": 15, "hangup": 1, "trace/breakpoint trap": 5, "quit": 3,
    "trace/bpt trap": 5, "trace trap": 5,
    "段错误": 11, "已中止": 6, "已放弃": 6, "总线错误": 7, "非法指令": 4, "浮点异常": 8, "浮点数例外": 8,
}
"""What a shell prints for a child killed by a signal (bash's strsignal texts; macOS's
`Abort trap: 6` is its SIGABRT's; under a zh_CN locale glibc's translations, po/zh_CN.po at
bminor/glibc 04e750e75b73957cf1c791535a3f4319534a52fc: 段错误 :5497, 已中止 :5477 -- 已放弃 in
older releases (pasted linghu8812/tensorrt_inference#117) -- 总线错误 :5489, 非法指令 :5469,
浮点异常 :5481, older 浮点数例外)."""


def death_by_signal(signum: int) -> Death:
    kind, severity, what, hint = _SIGNALS.get(signum, ("crash", "critical", f"{signal_name(signum) or 'signal'} "
                                                       f"({signum})", HINT_CRASH))
    return Death(kind, severity, what, hint, signum)


def death_by_code(code: int, shell: bool = False) -> Death:
    """A launcher's return code: negative = signal; above 128 from a shell = 128+signal."""
    if code < 0:
        return death_by_signal(-code)
    if shell and code > 128:
        return death_by_signal(code - 128)
    return Death("crash", "critical", f"exit code {code}", HINT_CRASH)
