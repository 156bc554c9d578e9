"""Deaths told by the host, the scheduler or the notebook rather than by the training program
(issue 22; helper k13host): srun's `Out Of Memory`, PBS/Torque's and LSF's kill notices, systemd's
and systemd-oomd's OOM kills, the kernel's OOM reaper, kubectl's OOMKilled STATUS, bash's
job-control reports and GNU time's status line (real output made here,
tests/data/logs/programs/make_host_kill_logs.sh), VS Code's kernel-crashed cell error. Each shape
beside a healthy text full of the same words that must stay quiet; host_kills.py and the rules'
comments cite where each wording is printed."""

from __future__ import annotations

from pathlib import Path

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final
from tests.judge_support import summaries_by_kind as _by_kind

DATA = Path(__file__).parent / "data" / "logs"


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


# -- Slurm ---------------------------------------------------------------------------------------


def test_srun_out_of_memory_alone_is_an_oom_and_its_exit_code_twin_a_crash():
    """srun prints `task N: Out Of Memory` (src/srun/launch.c:377) instead of `Exited with exit code`
    when the task's status is SIG_OOM; a paste may keep only srun's line."""
    found = _by_kind(["srun: error: j17r3n18: task 3: Out Of Memory"])
    assert list(found) == ["oom"] and "Out Of Memory" in found["oom"][0]
    assert _kinds(_final(["srun: error: node01: task 0: Exited with exit code 1"])) == ["crash"]
    # srun's verbose 'Completed' of a task that exited 0 is the normal end
    assert _kinds(_final(["srun: node01: task 0: Completed", "srun: error: none of the tasks ran out of memory"])) == []


# -- PBS / Torque and LSF ------------------------------------------------------------------------


def test_pbs_memory_kill_is_an_oom_and_its_walltime_kill_a_stopped_run():
    """pbs_mom's `=>> PBS: job killed: %s` (torque src/resmom/mom_main.c:5845, openpbs :8831)."""
    for text in ("=>> PBS: job killed: vmem 17223929856 exceeded limit 17179869184",
                 "=>> PBS: job killed: mem 2097152kb exceeded limit 1048576kb",
                 "=>> PBS: job killed: mem job total 4323312 kb exceeded limit 3145728 kb"):
        found = _by_kind([text])
        assert list(found) == ["oom"], (text, found)
        assert "memory limit" in found["oom"][0]
    wall = _final(["batch: 19172, current loss: 0.36=>> PBS: job killed: walltime 86489 exceeded limit 86400"])
    assert _kinds(wall) == ["crash"] and [f.severity for f in wall if f.kind == "crash"] == ["warning"]
    # the limits a job asks for, in PBS's own accounting record, are not a kill
    assert _kinds(_final(["10/08/2019 12:57:26  A    user=x jobname=j Resource_List.cput=48:00:00 "
                          "Resource_List.walltime=08:00:00 Resource_List.mem=16gb"])) == []


def test_lsf_term_memlimit_is_an_oom_other_terms_a_stopped_run_and_success_is_quiet():
    """LSF's job report (its documented TERM_* reasons); pasted wheaton5/souporcell#20."""
    found = _by_kind(["TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "Exited with exit code 143."])
    assert list(found) == ["oom"] and "TERM_MEMLIMIT" in found["oom"][0]
    assert _kinds(_final(["TERM_RUNLIMIT: job killed after reaching LSF run time limit.", "Exited with exit code 140."])) == ["crash"]
    healthy = ["Successfully completed.", "", "Resource usage summary:", "",
               "    Max Memory :                                 49 MB",
               "    Total Requested Memory :                     512000.00 MB",
               "    Max Swap :                                   -",
               "The output (if any) is above this job summary."]
    assert _kinds(_final(healthy)) == []


# -- the kernel, systemd, systemd-oomd -------------------------------------------------------------


def test_the_oom_reaper_line_alone_shows_an_oom_kill():
    found = _by_kind(["[79018.562727] oom_reaper: reaped process 5711 (python), now anon-rss:0kB, file-rss:0kB, "
                      "shmem-rss:0kB"])
    assert list(found) == ["oom"] and "pid 5711 (python)" in found["oom"][0]
    # the reaper's own start-up and the OOM killer's enable notice are not kills
    assert _kinds(_final(["[    0.412345] OOM killer enabled.", "oom_reaper thread started"])) == []


def test_systemd_unit_oom_kill_and_systemd_oomd_kill_are_ooms_other_results_are_not():
    for text in ("Apr 05 08:24:14 host systemd[1]: train.service: A process of this unit has been killed by the OOM killer.",
                 "systemd[1]: train.service: Failed with result 'oom-kill'.",
                 "systemd-oomd[812]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/app-train.scope due "
                 "to memory pressure for /user.slice/user-1000.slice/user@1000.service being 61.30% > 50.00% for > 20s "
                 "with reclaim activity"):
        assert _kinds(_final([text])) == ["oom"], text
    assert _kinds(_final(["systemd[1]: train.service: Failed with result 'exit-code'."])) == []
    assert _kinds(_final(["systemd[1]: train.service: Deactivated successfully.",
                          "systemd[1]: train.service: Consumed 10min 23.721s CPU time, 3.1G memory peak."])) == []


# -- Kubernetes ----------------------------------------------------------------------------------------


def test_kubectl_oomkilled_status_row_is_an_oom_completed_and_error_rows_are_not():
    """pasted open-edge-platform/geti_v2#146 / hmcts/cnp-flux-config#28772; kubernetes/kubernetes#14307's
    'Error' STATUS of a pod that exited 0 stays quiet."""
    assert _kinds(_final(["tax-tribunals-application-base-74464f6b98-2kj6g      0/1     OOMKilled   4 (57s ago)   2m40s"])) == ["oom"]
    healthy = ["NAME                 READY     STATUS      RESTARTS   AGE",
               "mxnet                0/1       Completed   0          5m",
               "succeeder  0/1       Error     0          22s",
               "    State:\t\tTerminated", "      Reason:\t\tCompleted", "      Exit Code:\t0",
               "the operator relaunches a pod only when it was OOMKilled 3 times"]
    assert _kinds(_final(healthy)) == []


# -- shells and GNU time (real output) -------------------------------------------------------------


def test_bash_job_reports_real_output_read_by_signal_and_done_stays_quiet():
    """tests/data/logs/bash_job_reports.log: an interactive bash 5.2's `[1]+  Killed ...`,
    `Segmentation fault`, `Aborted`, `Exit 3` and `Done` notices of background jobs."""
    lines = _lines("bash_job_reports.log")
    found = _by_kind(lines)
    assert set(found) == {"oom", "crash"}
    crash = " | ".join(found["crash"])
    assert "SIGSEGV" in crash and "SIGABRT" in crash and "exit code 3" in crash
    assert any("SIGKILL" in s for s in found["oom"])
    done = [ln for ln in lines if "Done" in ln or "epoch 1 done" in ln]
    assert len(done) == 3 and _kinds(_final(done)) == []
    # a training program's own words in the same shape stay quiet
    assert _kinds(_final(["[1] Killed 3 stale workers", "[2]  killed stale dataloader workers: 0",
                          "[1]+  Stopped                 python train.py"])) == []
    # the `(core dumped)` bash puts before the command
    seg = _by_kind(["[1]+  Segmentation fault      (core dumped) python train.py"])
    assert list(seg) == ["crash"] and "(python train.py)" in seg["crash"][0]


def test_gnu_time_status_lines_real_output():
    """tests/data/logs/gnu_time_reports.log: `Command terminated by signal 9` and `Command exited
    with non-zero status 3`; the third run (exit 0) prints only its resource line."""
    lines = _lines("gnu_time_reports.log")
    found = _by_kind(lines)
    assert "oom" in found and any("GNU time" in s and "SIGKILL" in s for s in found["oom"])
    assert any("exit code 3" in s for s in found["crash"])
    ok = lines[lines.index("train ok"):]
    assert _kinds(_final(ok)) == []


# -- notebooks -----------------------------------------------------------------------------------------


def test_vscode_kernel_crashed_is_a_crash_in_both_wordings():
    """microsoft/vscode-jupyter localize.ts (with its doubled 'the the'); pasted
    mrdbourke/tensorflow-deep-learning#531, microsoft/vscode-jupyter#15936."""
    for text in ("The Kernel crashed while executing code in the the current cell or a previous cell. Please review",
                 "\x1b[1;31mThe Kernel crashed while executing code in the current cell or a previous cell. "):
        assert _kinds(_final([text])) == ["crash"], text
    assert _kinds(_final(["Restarted kernel, the cell ran again: no crash", "Kernel started: 3f1c",
                          "the kernel crashed? no -- it finished the epoch"])) == []
