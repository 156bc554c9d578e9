"""The target side of launch / stop / status: a stdlib-only script run by the target's python.

Shipped as `python -c <this file's source> <command>`, with its JSON input (secrets
included) on stdin -- so no secret is ever in an argv, and nothing needs installing on the
target. It must run on any Python >= 3.8 and import nothing from dfctl.

launch: makes the run directory (never reusing one), writes `env` (0600: environment,
secrets, argv), forks a child that calls setsid (so it is the session leader and its pid
is the process group id), points stdin at /dev/null and stdout+stderr at train.log and
execs the wrapper, which reads and deletes `env`, starts `python -u -m <module> …` in its
group and, when that ends, writes `exit_code` (128+N for signal N). The launcher writes
`pid` and `launch.json`. The launching process returns as soon as the trainer
has been started: the exec that ran us does not wait for the run.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

if "split_stat" not in globals():  # imported (tests, type checks); shipped, proc_stat.py's text came first
    from controller.remote.proc_stat import (  # noqa: F401
        PGRP,
        PPID,
        SESSION,
        STARTTIME,
        STATE,
        read_stat,
        split_stat,
        stat_fields,
        stat_int,
    )

RUN_FILES = ("train.log", "pid", "exit_code", "launch.json", "env")
STOP_REQUEST_FILE = "stop_request"
"""Written into the run dir by `stop` before its SIGTERM: who stopped the run and when."""
RESUMED_BY_FILE = "resumed_by"
"""Written into a run dir (under the deploy lock, O_EXCL) once a resume of it has started:
the new run's id. A second resume of the same run -- another controller's -- is refused."""
RESUME_FROM = "{resume_from}"


def _write_atomic(path, text, mode=0o644):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _oom_kill_count():
    """The container cgroup's oom_kill counter as seen from inside (v2, then v1)."""
    try:
        with open("/sys/fs/cgroup/memory.events") as fh:
            for line in fh:
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
    except (OSError, ValueError):
        pass
    cands = []
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                parts = line.strip().split(":", 2)
                if len(parts) == 3 and "memory" in parts[1].split(","):
                    cands.append("/sys/fs/cgroup/memory" + parts[2] + "/memory.oom_control")
    except OSError:
        pass
    cands.append("/sys/fs/cgroup/memory/memory.oom_control")
    for path in cands:
        try:
            with open(path) as fh:
                for line in fh:
                    k, _, v = line.partition(" ")
                    if k == "oom_kill":
                        return int(v)
        except (OSError, ValueError):
            continue
    return None


def _proc_stat(pid):
    """(state, pgrp, session) of a pid from /proc/<pid>/stat, or None."""
    f = stat_fields(read_stat(pid))
    pgrp, session = stat_int(f, PGRP), stat_int(f, SESSION)
    if pgrp is None or session is None:
        return None
    return f[STATE], pgrp, session


def _members(leader):
    """Live (non-zombie) pids in the run's process group or session."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _proc_stat(int(name))
        if st and st[0] != "Z" and (st[1] == leader or st[2] == leader):
            out.append(int(name))
    return sorted(out)


def _escaped(leader, known):
    """Add to `known` ({pid: start ticks}) the descendants of the run's group and session that
    started a session of their own: signalling the group misses them and they outlive it.
    wandb's service is one (wandb/sdk/lib/service/service_process.py:116,154: Popen with
    start_new_session=True); it ends by itself once the process it serves is gone (`--pid`,
    line 141), so it is waited for, and killed only with the rest after the grace."""
    table = _ppids()
    kids = {}  # type: dict
    for p, (pp, _) in table.items():
        kids.setdefault(pp, []).append(p)
    members = set(_members(leader))
    todo = list(members)
    seen = set(members)
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in seen:
                seen.add(k)
                todo.append(k)
                ticks = _start_ticks(k)
                if ticks is not None:
                    known.setdefault(k, ticks)
    return known


def _alive_as(known):
    """The pids of `known` still alive as the processes recorded (same start ticks)."""
    out = []
    for p, ticks in known.items():
        st = _proc_stat(p)
        if st and st[0] not in ("Z", "X") and _start_ticks(p) == ticks:
            out.append(p)
    return sorted(out)


def _start_ticks(pid):
    """Field 22 of /proc/<pid>/stat (clock ticks after boot): a pid and its start time name
    one process; a pid alone may have been reused by another since."""
    return stat_int(stat_fields(read_stat(pid)), STARTTIME)


def _ppids():
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        f = stat_fields(read_stat(name))
        ppid, pgrp = stat_int(f, PPID), stat_int(f, PGRP)
        if ppid is not None and pgrp is not None and f[STATE] not in ("Z", "X"):
            table[int(name)] = (ppid, pgrp)
    return table


def _attached_members(pid):
    """(pids, pgrp or None) of a run dfctl did not launch: the process, its descendants, and
    its whole process group when everything in that group belongs to the run (the process,
    its descendants, or a wrapper above it such as `nohup run.sh`). A group shared with
    anything else (an interactive shell's job) is not signalled as a group: only the run's
    own processes are."""
    table = _ppids()
    if pid not in table:
        return [], None
    kids = {}  # type: dict
    for p, (pp, _) in table.items():
        kids.setdefault(pp, []).append(p)
    tree, todo = set([pid]), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in tree:
                tree.add(k)
                todo.append(k)
    pgrp = table[pid][1]
    ancestors, p = set(), table[pid][0]
    while p in table and p not in ancestors and p > 1:
        ancestors.add(p)
        p = table[p][0]
    group = set(p for p, (_, g) in table.items() if g == pgrp)
    if group <= tree | ancestors:
        return sorted(tree | group), pgrp
    return sorted(tree), None


def _attached_identity(spec):
    """None when spec's pid is still the attached process, else why not (for the reply)."""
    pid, want = int(spec["pid"]), spec.get("start_ticks")
    have = _start_ticks(pid)
    st = _proc_stat(pid)
    if have is None or st is None or st[0] == "Z":
        return "gone"
    if want is not None and have != int(want):
        return "pid %d now belongs to another process (started at tick %d, the run's at tick %d)" % (
            pid, have, int(want))
    return None


def _leader_is_ours(pid, run_dir):
    """The leader is alive and is the wrapper of this run (its cwd is the run dir)."""
    st = _proc_stat(pid)
    if not st or st[0] == "Z":
        return False
    try:
        return os.path.realpath("/proc/%d/cwd" % pid) == os.path.realpath(run_dir)
    except OSError:
        return True  # cannot read cwd (other user): trust the session check


# The detached session leader, exec'd as `python -c WRAPPER_SOURCE <run_dir> <report fd>`:
# its cmdline names the run dir and its environ holds DFCTL_RUN_ID (never a secret), so
# anyone looking at the process table can tell which run it belongs to.
WRAPPER_SOURCE = r"""
import json, os, signal, subprocess, sys
run_dir, report_fd = sys.argv[1], int(sys.argv[2])
env_path = os.path.join(run_dir, "env")
with open(env_path) as fh:
    spec = json.load(fh)
os.unlink(env_path)  # read: the secrets now live only in this process and the trainer
# The whole session gets `dfctl stop`'s SIGTERM; the wrapper outlives it to record the
# trainer's exit code. A handler (not SIG_IGN) so the trainer starts with defaults.
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda *_: None)

def write_code(code):
    tmp = os.path.join(run_dir, "exit_code.tmp")
    with open(tmp, "w") as fh:
        fh.write("%d\n" % code)
    os.replace(tmp, os.path.join(run_dir, "exit_code"))

try:
    proc = subprocess.Popen(spec["argv"], cwd=run_dir, env=spec["env"], stdin=subprocess.DEVNULL,
                            stdout=1, stderr=2, close_fds=True)
except OSError as exc:
    sys.stderr.write("[dfctl] cannot start %s: %s\n" % (spec["argv"][0], exc))
    sys.stderr.flush()
    write_code(127)
    os.write(report_fd, ("error cannot start %s: %s\n" % (spec["argv"][0], exc)).encode())
    sys.exit(0)
os.write(report_fd, ("ok %d\n" % proc.pid).encode())
os.close(report_fd)
rc = proc.wait()
write_code(rc if rc >= 0 else 128 - rc)
"""


def _become_wrapper(run_dir, run_id, path, report_fd):
    """In the forked child: new session, fds to /dev/null and train.log, exec the wrapper."""
    try:
        os.setsid()
        os.chdir(run_dir)
        devnull = os.open(os.devnull, os.O_RDONLY)
        log = os.open(os.path.join(run_dir, "train.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(devnull)
        os.close(log)
        os.closerange(3, report_fd)
        try:
            os.closerange(report_fd + 1, os.sysconf("SC_OPEN_MAX"))
        except (ValueError, OSError):
            os.closerange(report_fd + 1, 4096)
        os.set_inheritable(report_fd, True)
        env = {"PATH": path, "HOME": os.environ.get("HOME") or "/root", "LANG": "C.UTF-8",
               "DFCTL_RUN_ID": run_id, "DFCTL_RUN_DIR": run_dir}
        os.execve(sys.executable, [sys.executable, "-c", WRAPPER_SOURCE, run_dir, str(report_fd)], env)
    except BaseException as exc:  # noqa: B036 - report anything, then die without cleanup
        try:
            os.write(report_fd, ("error wrapper: %s\n" % exc).encode())
        finally:
            os._exit(1)


def _take_deploy_lock(workdir, owner, wait_s):
    """(fd, None) holding the workdir's deploy lock (flock(2), the lock ship/push.py's
    PUSH_SCRIPT takes with flock(1)), or (None, who holds it) after wait_s."""
    import fcntl
    fd = os.open(os.path.join(workdir, ".deploy.lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    end = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > end:
                os.close(fd)
                try:
                    with open(os.path.join(workdir, ".deploy.owner")) as fh:
                        return None, fh.read().strip() or "unknown"
                except OSError:
                    return None, "unknown"
            time.sleep(0.05)
    _write_atomic(os.path.join(workdir, ".deploy.owner"), str(owner) + "\n")
    return fd, None


def _live_runs(workdir, known):
    """Runs with a live process: every run dir under this workdir (whichever controller
    launched it) plus the runs the controller knows of this target elsewhere."""
    cands = {}  # type: dict
    runs = os.path.join(workdir, "runs")
    try:
        names = os.listdir(runs)
    except OSError:
        names = []
    for name in names:
        cands[os.path.join(runs, name)] = None
    live = []
    for run in known:
        if run.get("attached"):            # a run dfctl did not launch: alive by pid + start time
            if run.get("pid") and _attached_identity(run) is None:
                live.append({"run_id": run.get("run_id") or "pid %d" % run["pid"],
                             "run_dir": run.get("run_dir") or "", "pid": int(run["pid"])})
            continue
        cands.setdefault(run["run_dir"], run.get("pid"))
    for run_dir, pid in sorted(cands.items()):
        pid = pid or _read_pid(run_dir)
        if pid and _leader_is_ours(pid, run_dir) and _members(pid):
            live.append({"run_id": os.path.basename(run_dir), "run_dir": run_dir, "pid": pid})
    return live


def launch(spec):
    """Start the run. An exclusive launch (spec["exclusive"]) holds the deploy lock from
    its live-run check to the start, so two deploys at once cannot both launch."""
    workdir = spec["workdir"]
    current = os.path.join(workdir, "current")
    if not spec.get("release_id") and not os.path.isdir(current):     # a resume names its release (_launch)
        return {"error": "no release at %s (deploy first)" % current}
    excl = spec.get("exclusive")
    resume_of = spec.get("resume_of")
    if excl is None and not resume_of:
        return _launch(spec)
    lock = excl or spec.get("lock") or {}
    fd, held_by = _take_deploy_lock(workdir, lock.get("owner") or "launch", float(lock.get("lock_wait_s", 10)))
    if fd is None:
        return {"error": "deploy lock %s is held by: %s" % (os.path.join(workdir, ".deploy.lock"), held_by),
                "locked": True}
    try:
        own = os.path.join(workdir, "runs", spec["run_id"])
        if spec.get("adopt") and os.path.isdir(own):
            return _adopt(own)       # our own earlier attempt: never a conflict with itself
        # a resume on another target (controller/ship/move.py) cannot mark the previous run's
        # dir, which is not here: its marker names that run in this workdir instead
        marker = spec.get("resume_marker") or os.path.join(resume_of or "", RESUMED_BY_FILE)
        if resume_of:
            if os.path.exists(marker):
                with open(marker) as fh:
                    by = fh.read().strip() or "unknown"
                return {"error": "run %s was already resumed by %s" % (os.path.basename(resume_of), by),
                        "resumed": by}
        live = _live_runs(workdir, excl.get("runs") or []) if excl else []
        if live:
            return {"error": "run %s is still alive" % ", ".join("%s (pid %d)" % (r["run_id"], r["pid"]) for r in live),
                    "conflict": live}
        info = _launch(spec)
        if resume_of and "pid" in info:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            fd2 = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd2, "w") as fh:
                fh.write(info["run_id"] + "\n")
        return info
    finally:
        os.close(fd)


def newest_checkpoint(run_dir):
    """The newest complete checkpoint of the bundled trainer's layout under run_dir (its
    checkpoints/latest pointer, else the highest checkpoints/step-*.pt; *.pt.tmp are
    partial saves and never count -- trainer/checkpoint.py newest_complete's rule), or None."""
    cdir = os.path.join(run_dir, "checkpoints")
    try:
        with open(os.path.join(cdir, "latest")) as fh:
            path = os.path.join(cdir, fh.read().strip())
        if path != cdir and os.path.isfile(path):
            return path
    except OSError:
        pass
    try:
        found = sorted(n for n in os.listdir(cdir) if n.startswith("step-") and n.endswith(".pt"))
    except OSError:
        return None
    return os.path.join(cdir, found[-1]) if found else None


def _resume_args(spec):
    """spec["args"] with {resume_from} replaced by the newest complete checkpoint of the
    first of spec["resume_from_dirs"] that has one (the previous run, then its own
    predecessors); none anywhere: the flag and its value are dropped (a fresh start).
    Returns (args, the checkpoint or None)."""
    args = list(spec.get("args", []))
    if RESUME_FROM not in args:
        return args, None
    found = None
    for d in spec.get("resume_from_dirs") or []:
        found = newest_checkpoint(d)
        if found:
            break
    i = args.index(RESUME_FROM)
    if found:
        args[i] = found
        return args, found
    del args[i]
    if i > 0 and args[i - 1].startswith("--"):
        del args[i - 1]
    return args, None


def _launch(spec):
    workdir = spec["workdir"]
    runs = os.path.join(workdir, "runs")
    if spec.get("release_id"):             # a resume: the previous run's release, whatever `current` is now
        release_dir = os.path.join(workdir, "releases", spec["release_id"])
        if not os.path.isdir(release_dir):
            return {"error": "release %s is gone from %s (pruned?)" % (spec["release_id"], workdir)}
    else:
        release_dir = os.path.realpath(os.path.join(workdir, "current"))   # fixed now: a later deploy cannot change this run's code
    spec_args, resumed_from = _resume_args(spec)
    os.makedirs(runs, exist_ok=True)
    base, n = spec["run_id"], 1
    while True:
        run_id = base if n == 1 else "%s-%d" % (base, n)
        run_dir = os.path.join(runs, run_id)
        try:
            os.mkdir(run_dir, 0o755)   # atomic: an existing run dir is never reused
            break
        except FileExistsError:
            if spec.get("adopt"):
                # a retry after the connection dropped mid-launch: the first attempt got
                # this far, so it starts the run; report that run, never a second one
                return _adopt(run_dir)
            if spec.get("exact"):
                return {"error": "run directory %s already exists" % run_dir, "exists": True,
                        "run_id": run_id, "run_dir": run_dir}
            n += 1
    subst = {"{run_dir}": run_dir, "{workdir}": workdir}

    def expand(a):
        for k, v in subst.items():
            a = a.replace(k, v)
        return a

    path = spec["path"]
    env = {"PATH": path, "HOME": os.environ.get("HOME") or "/root", "LANG": "C.UTF-8",
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": release_dir, "DFCTL_RUN_ID": run_id,
           "DFCTL_RUN_DIR": run_dir}
    for k, v in spec.get("env", {}).items():
        env[k] = expand(v)
    env.update(spec.get("secrets", {}))
    argv = [spec["python"], "-u", "-m", spec["module"]] + [expand(a) for a in spec_args]
    # stdbuf line-buffers C tools the trainer may start (python itself is unbuffered by -u).
    stdbuf = shutil.which("stdbuf", path=path)
    full_argv = ([stdbuf, "-oL", "-eL"] if stdbuf else []) + argv
    fd = os.open(os.path.join(run_dir, "env"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"env": env, "argv": full_argv}, fh)
    started_s = time.time()
    info = {"run_id": run_id, "name": spec["name"], "argv": argv, "stdbuf": bool(stdbuf),
            "release_id": os.path.basename(release_dir), "release_dir": release_dir,
            "run_dir": run_dir, "workdir": workdir, "started_s": started_s,
            "oom_kill_at_launch": _oom_kill_count(), "env_names": sorted(env),
            "secret_env_names": sorted(spec.get("secrets", {}))}
    if spec.get("resume_of"):
        info.update(resume_of=spec["resume_of"], resumed_from=resumed_from)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _become_wrapper(run_dir, run_id, path, w)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    reply = b"".join(chunks).decode(errors="replace").strip()
    if not reply.startswith("ok "):
        return {"error": reply or "the run's wrapper exited before starting it", "run_id": run_id,
                "run_dir": run_dir}
    info["pid"] = pid
    info["trainer_pid"] = int(reply.split()[1])
    _write_atomic(os.path.join(run_dir, "pid"), "%d\n" % pid)
    _write_atomic(os.path.join(run_dir, "launch.json"), json.dumps(info, indent=1) + "\n")
    return info


def _adopt(run_dir, wait_s=60.0):
    """The run an earlier attempt of this same launch started (its launch.json)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            with open(os.path.join(run_dir, "launch.json")) as fh:
                info = json.load(fh)
            info["adopted"] = True
            return info
        except (OSError, ValueError):
            pass
        if time.monotonic() > end:
            return {"error": "an earlier attempt of this launch made %s but did not finish starting "
                             "the run (no launch.json after %d s)" % (run_dir, wait_s), "run_dir": run_dir}
        time.sleep(0.1)


def _read_pid(run_dir):
    try:
        with open(os.path.join(run_dir, "pid")) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _read_exit_code(run_dir):
    try:
        with open(os.path.join(run_dir, "exit_code")) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def status(spec):
    out = []
    for run in spec["runs"]:
        run_dir, pid = run["run_dir"], run.get("pid")
        if run.get("attached"):
            # no run dir of ours, no exit_code file: alive while pid + start time are
            why = _attached_identity(run)
            alive = _attached_members(int(pid))[0] if why is None else []
            out.append({"run_dir": run_dir, "exists": True, "attached": True, "alive_pids": alive, "pid": pid,
                        "exit_code": None, "gone": why})
            continue
        if not os.path.isdir(run_dir):
            out.append({"run_dir": run_dir, "exists": False})
            continue
        alive = []
        if not pid:
            pid = _read_pid(run_dir)   # registered before the launch finished: the run knows
        if pid:
            alive = _members(pid) if _leader_is_ours(pid, run_dir) or _proc_stat(pid) is None else []
        try:
            log_size = os.stat(os.path.join(run_dir, "train.log")).st_size
        except OSError:
            log_size = None
        out.append({"run_dir": run_dir, "exists": True, "alive_pids": alive, "pid": pid,
                    "exit_code": _read_exit_code(run_dir), "log_size": log_size,
                    "stop_requested": os.path.exists(os.path.join(run_dir, STOP_REQUEST_FILE))})
    return {"runs": out}


def _signal_group(pgrp, pids, sig):
    if pgrp is not None:
        try:
            os.killpg(pgrp, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_attached(spec):
    """SIGTERM -> grace -> SIGKILL for a run dfctl attached to: only while the pid is still
    the same process (its start time), on its process group when the group is the run's."""
    pid, grace_s = int(spec["pid"]), float(spec.get("grace_s", 10))
    why = _attached_identity(spec)
    if why == "gone":
        return {"signals": [], "left": [], "exit_code": None}
    if why is not None:
        return {"signals": [], "left": [], "refused": why}
    pids, pgrp = _attached_members(pid)
    # each member by pid + start time: a worker orphaned when the main process died is
    # still the run's; a pid the system hands to someone else meanwhile is never signalled
    known = dict((p, _start_ticks(p)) for p in pids)

    def left():
        return sorted(p for p, t in known.items() if t is not None and _start_ticks(p) == t
                      and (_proc_stat(p) or ("Z",))[0] != "Z")

    def wait_gone(limit_s):
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if not left():
                return True
            time.sleep(0.05)
        return not left()

    sent = []
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
        now = left()
        if not now:
            break
        # the group as a group only while its leader's identity holds (its pgrp cannot be reused then)
        _signal_group(pgrp if _attached_identity(spec) is None else None, now, sig)
        sent.append(signal.Signals(sig).name)
        if wait_gone(wait_s):
            break
    return {"signals": sent, "left": left(), "exit_code": None}


def stop(spec):
    if spec.get("attached"):
        return stop_attached(spec)
    pid, run_dir, grace_s = int(spec["pid"]), spec["run_dir"], float(spec.get("grace_s", 10))
    if _proc_stat(pid) is not None and not _leader_is_ours(pid, run_dir):
        return {"signals": [], "left": [], "note": "pid %d is no longer this run's" % pid}
    sent = []
    escaped = {}  # type: dict

    def left():
        if _members(pid):
            _escaped(pid, escaped)
        return sorted(set(_members(pid)) | set(_alive_as(escaped)))

    def signal_all(sig, also_escaped):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in _members(pid) + (_alive_as(escaped) if also_escaped else []):
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        sent.append(signal.Signals(sig).name)

    def wait_gone(limit_s):
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if not left():
                return True
            time.sleep(0.05)
        return not left()

    if not _members(pid):
        return {"signals": [], "left": [], "exit_code": _read_exit_code(run_dir)}
    _escaped(pid, escaped)
    # the watch (any controller's) reads this and says "stopped by ...", not "crash"
    _write_atomic(os.path.join(run_dir, STOP_REQUEST_FILE),
                  json.dumps({"by": str(spec.get("by") or "dfctl stop"), "time_s": time.time(), "grace_s": grace_s,
                              "successor": spec.get("successor")}))
    signal_all(signal.SIGTERM, also_escaped=False)
    if not wait_gone(grace_s):
        signal_all(signal.SIGKILL, also_escaped=True)
        wait_gone(10)
    # give the wrapper a moment to record the exit code when it outlived SIGTERM
    end = time.monotonic() + 2
    while _read_exit_code(run_dir) is None and time.monotonic() < end and "SIGKILL" not in sent:
        time.sleep(0.05)
    return {"signals": sent, "left": left(), "exit_code": _read_exit_code(run_dir)}


PTRACE_DENIED_WORDS = ("Permission denied", "Operation not permitted", "os error 1)", "os error 13)")


def _ptrace_facts():
    """What decides whether this process may ptrace the run: CAP_SYS_PTRACE in its effective
    set, and the Yama sysctl (absent on kernels without Yama)."""
    facts = {"ptrace_scope": None, "cap_sys_ptrace": None, "uid": os.getuid()}
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            facts["ptrace_scope"] = int(fh.read().strip())
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    facts["cap_sys_ptrace"] = bool(int(line.split()[1], 16) & (1 << 19))
    except (OSError, ValueError):
        pass
    return facts


def _is_python(pid):
    """Its executable is a Python; the exe link of another user's process may be unreadable
    without CAP_SYS_PTRACE (the case py-spy will report), then its comm says."""
    try:
        exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        parts = split_stat(read_stat(pid))
        if parts is None:
            return False
        exe = parts[1]
    return exe.startswith(("python", "pypy"))


def _dump(py_spy, pid, native, timeout_s):
    argv = [py_spy, "dump", "--pid", str(pid), "--json"] + (["--native"] if native else [])
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return 127, b"", str(exc).encode()
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return 124, out, err + b"\ntimed out after %d s" % timeout_s
    return p.returncode, out, err


def stacks(spec):
    """`py-spy dump --json` of every Python process of the run, where it runs (the run's own
    pid namespace), `--native` first where permitted. Bounded: timeout_s per dump, at most
    max_processes processes."""
    pid = int(spec["pid"])
    if spec.get("attached"):
        why = _attached_identity(spec)
        if why is not None:
            return {"error": "run's process is %s" % why if why != "gone" else "the run's process is gone",
                    "gone": True}
        pids = _attached_members(pid)[0]
    else:
        pids = [p for p in _members(pid) if p != pid]     # the wrapper is dfctl's, not the run's
    timeout_s = float(spec.get("timeout_s", 20))
    out = {"processes": [], "facts": _ptrace_facts()}
    for p in [p for p in pids if _is_python(p)][:int(spec.get("max_processes", 16))]:
        entry = {"pid": p}
        for native in ([True, False] if spec.get("native", True) else [False]):
            rc, so, se = _dump(spec["py_spy"], p, native, timeout_s)
            err = se.decode("utf-8", "replace")
            if rc == 0:
                try:
                    entry.update({"native": native, "threads": json.loads(so.decode("utf-8", "replace"))})
                    entry.pop("error", None)
                    break
                except ValueError:
                    err = "py-spy printed no JSON: %r" % so[:200]
            entry.update({"error": "\n".join(err.strip().splitlines()[:6])[:1500], "rc": rc})
            if any(w in err for w in PTRACE_DENIED_WORDS):
                entry["denied"] = True
                break
            if rc in (124, 127):
                break
        out["processes"].append(entry)
    return out


def main():
    cmd = sys.argv[1]
    spec = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    result = {"launch": launch, "status": status, "stop": stop, "stacks": stacks}[cmd](spec)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 2 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
