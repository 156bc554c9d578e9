"""Deaths told by the host rather than by the training program: a batch scheduler's kill notice
(PBS/Torque, LSF), systemd and systemd-oomd in the journal, the kernel's OOM reaper, a shell's
job-control report, GNU time's status line.

The program itself often prints nothing when it is killed from outside: the only line about its
end is the one the host wrote. A scheduler that killed a job for going past its memory limit is
an out-of-memory death; one that killed it for its wall time or CPU time stopped the run (a crash
of the run, WARN like slurm-cancelled); a signal named alone is read through exit_codes (SIGKILL:
host OOM likely, the rest native crashes or a stop).
"""

from __future__ import annotations

import re

from controller.judge import hints as H
from controller.judge.exit_codes import SIGNAL_BY_WORD, death_by_code, death_by_signal

MEMORY_LIMITS_PBS = ("mem", "vmem", "pmem", "pvmem")
"""Torque's and OpenPBS's memory resources whose overrun makes pbs_mom kill the job
(adaptivecomputing/torque src/resmom/linux/mom_mach.c:2635 `vmem %llu exceeded limit %lu`,
src/resmom/mom_main.c:3864 `%s job total %lu %s exceeded limit %lu %s` @34ff845417cc0348dfe0a61a491e5e0f4adf6ef4;
openpbs/openpbs src/resmom/mom_main.c:5972/5987 `vmem %lukb exceeded limit %lukb`, `mem %lukb ...`
@cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a); walltime, cput and ncpus are time/CPU limits."""


def pbs_job_killed(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """pbs_mom's notice written into the job's stderr before it kills the job: `=>> PBS: job killed: %s`
    (torque src/resmom/mom_main.c:5845, openpbs src/resmom/mom_main.c:8831 at the commits above), %s the
    limit message: `mem 2097152kb exceeded limit 1048576kb`, `vmem 17223929856 exceeded limit 17179869184`,
    `walltime 3622 exceeded limit 3600`."""
    res = m.group("res").lower()
    what = m.group(0).split("job killed:", 1)[1].strip()[:120]
    if res in MEMORY_LIMITS_PBS:
        return ("oom", "critical", f"PBS killed the job: it went past its memory limit ({what})",
                H.HINT_HOST_OOM + "; ask PBS for more (-l mem= / vmem=, select=...:mem=) or use less")
    return ("crash", "warning", f"PBS killed the job: it went past its {res} limit ({what}): the run was stopped",
            "the scheduler ended the run: a wall-time/CPU-time limit wants a checkpoint/resume or a longer -l walltime")


LSF_MEMORY_REASONS = ("MEMLIMIT", "SWAP")
"""LSF's termination reasons (IBM Spectrum LSF 10.1 docs, lsf_admin/termination_reasons_lsf.html:
TERM_MEMLIMIT `Job killed after reaching LSF memory usage limit`, TERM_SWAP for the swap limit;
TERM_RUNLIMIT, TERM_CPULIMIT, TERM_OWNER, TERM_ADMIN, ... are limits of time or someone's bkill).
LSF is closed source: the wording is from its docs and job reports quoted in public repositories'
parsers (e.g. `TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.` then `Exited with
exit code 137.`)."""


def lsf_term(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """The job report LSF appends to a job's output (`TERM_<reason>: job killed after ...`)."""
    why = m.group("why").upper()
    text = m.group(0).strip().rstrip(".")[:140]
    if any(why.startswith(r) for r in LSF_MEMORY_REASONS):
        return ("oom", "critical", f"LSF killed the job: it reached its memory limit ({text})",
                H.HINT_HOST_OOM + "; ask LSF for more (bsub -M / -R rusage[mem=...]) or use less")
    return ("crash", "warning", f"LSF killed the job ({text}): the run was stopped",
            "the scheduler ended the run: a run/CPU limit wants a checkpoint/resume or a longer -W; "
            "TERM_OWNER/TERM_ADMIN is someone's bkill")


JOB_REPORT_WORDS = ("Killed", "Segmentation fault", "Aborted", "Bus error", "Illegal instruction",
                    "Floating point exception", "Terminated", "Hangup")
"""bash's job-control report of a job that ended by a signal: `[1]+  Killed                  python3 ...`
(real output: tests/data/logs/bash_job_reports.log, bash 5.2.15 interactive, made by
tests/data/logs/programs/make_host_kill_logs.sh); the words are strsignal's, exit_codes.SIGNAL_BY_WORD."""


def job_report_death(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """`[N]+  <signal text>   <command>` (bash's notify of a background job) or `[N]+  Exit 3  <command>`."""
    cmd = (m.group("cmd") or "").strip()[:80]
    if m.group("code"):
        d = death_by_code(int(m.group("code")))
        return d.kind, d.severity, f"job [{m.group('job')}] ({cmd}) ended with {d.what} (bash's job report)", d.hint
    d = death_by_signal(SIGNAL_BY_WORD[m.group("what").lower()])
    core = " (core dumped)" if m.group("core") else ""
    return (d.kind, d.severity, f"job [{m.group('job')}] ({cmd}) killed by {d.what} (bash's job report "
            f"'{m.group('what')}{core}')", d.hint)


def gnu_time_status(m: re.Match, line: str) -> tuple[str, str, str, str]:
    """GNU time's status line before its resource summary: `Command terminated by signal 9`, `Command
    exited with non-zero status 3` (real output: tests/data/logs/gnu_time_reports.log, Debian's GNU time)."""
    if m.group("sig"):
        d = death_by_signal(int(m.group("sig")))
        return d.kind, d.severity, f"the timed command was killed by {d.what} (GNU time's report)", d.hint
    d = death_by_code(int(m.group("code")), shell=True)
    return d.kind, d.severity, f"the timed command ended with {d.what} (GNU time's report)", d.hint
