"""The remote side of `dfctl scan` / `dfctl attach`: which training processes run on a host
or in its containers, in ONE round trip per host.

Shipped like the probe, and after it: the controller sends probe_agent.py's text followed by
this file's as one `_SRC` through the probe's one bootstrap (controller.probe.probe_stdin),
so the helpers below (_read_text, _run, _nspid, PidView, procfs_refusal, open_regular's
_path_fd, container_init_pid, gpu_readings) are the probe's own, and this file's `main`
replaces the probe's.

What it reads, per process, and why each is safe on a node where every file, link and
process of a container is untrusted input:
- the node's OWN /proc, never a container's: a CT's processes are the node's processes in
  the pid namespace of the CT's init (remote.PidView), numbered as the CT numbers them
  (NSpid / NSpgid / NSsid). Root in a CT can mount a made-up directory over the CT's
  /proc; nothing here reads it (the scan only says, when it is not procfs, that it is not).
  Inside `pct exec` (the fallback) the CT's /proc must be read: it is checked to be procfs
  (statfs magic 0x9fa0) and refused otherwise, naming the CT.
- /proc/<host pid>/{stat,status,cmdline,fdinfo/N}: kernel-made.
- fd and cwd targets with readlink only: read as strings, never walked on the node.
- the file behind fd N: the kernel's open file (an O_PATH open of /proc/<host pid>/fd/N,
  no path walked), and for a CT only when the fd's target resolved INSIDE the CT's root
  (openat2 RESOLVE_IN_ROOT, the log follower's reader) is that same file (or it is
  unlinked); a log's bytes through that descriptor, on the same condition.
- /proc/<host pid>/environ: only whether PYTHONUNBUFFERED is set; nothing else leaves this
  script (an environment holds secrets).
- the container's /etc/passwd (user names) through the probe's open_regular: its links
  resolved inside the container's root, never out.
dfctl's own processes (this scan, its children, its ancestors up to the dfctl process on
the local target) are left out by pid ancestry.

Must run on Python >= 3.6 (old hosts), stdlib only, like probe_agent.py.
"""

import json
import os
import re
import stat
import sys

if "_SRC" not in globals():  # imported (tests, type checks); shipped, probe_agent.py's text came first
    from controller.remote.probe_agent import (  # noqa: F401
        _O_PATH,
        RawFile,
        _blob,
        _nspid,
        _path_fd,
        _pid_ns,
        _read_text,
        _run,
        container_init_pid,
        gpu_readings,
        pid_view,
        procfs_refusal,
        start_gpu_queries,
    )
    from controller.remote.proc_stat import (  # noqa: F401
        NUM_THREADS,
        PGRP,
        PPID,
        RSS,
        SESSION,
        STARTTIME,
        STATE,
        STIME,
        UTIME,
        split_stat,
    )

# A process is a training candidate when its program is one of these (or it holds a GPU,
# or the request's regex matches its command line).
TRAINING_PROGRAM_RE = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|torchrun|deepspeed|accelerate|colossalai)$")
LOG_NAME_RE = re.compile(r"\.(log|out|txt|err)(\.\d+)?$|(^|/)(nohup\.out|stdout|stderr)$")
WANDB_FILE_RE = re.compile(r"^(.*/wandb/(?:offline-)?run-[0-9]{8}_[0-9]{6}-([A-Za-z0-9]+))/run-[A-Za-z0-9]+\.wandb$")
ARGV_CAP_CHARS = 4096
FD_CAP = 4096              # fds looked at per process (a data loader may hold thousands)
LOG_SAMPLE_BYTES = 65536   # head and tail of a selected run's log, for its wandb URL


def _proc_table(view):
    """pid -> (comm, fields) of every process of one PidView (own numbering); or an error string."""
    rows = view.table()
    if isinstance(rows, str):
        return rows
    table = {}
    for _, text in rows:
        parts = split_stat(text)
        if parts is not None and parts[2]:
            table[parts[0]] = parts[1:]
    return table


def _argv(hp):
    try:
        with open("/proc/%d/cmdline" % hp, "rb") as fh:
            raw = fh.read(ARGV_CAP_CHARS)
    except (OSError, TypeError):
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a != b""] or None


def _is_candidate(argv, comm):
    if not argv:
        return False            # kernel threads, zombies
    prog = os.path.basename(argv[0])
    if not TRAINING_PROGRAM_RE.match(prog) and not TRAINING_PROGRAM_RE.match(comm or ""):
        return False
    rest = argv[1:]
    if "-c" in rest[:3] or rest[:2] == ["-S", "-"] or rest == ["-"] or not rest:
        return False            # one-liners, REPLs and our own probes are not runs
    return True


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _fd_kind(target, st):
    if target is None:
        return None
    if st is not None:
        if stat.S_ISREG(st.st_mode):
            return "file"
        if stat.S_ISFIFO(st.st_mode):
            return "pipe"
        if stat.S_ISSOCK(st.st_mode):
            return "socket"
        if stat.S_ISCHR(st.st_mode):
            return "null" if target == "/dev/null" else "tty" if target.startswith(("/dev/pts/", "/dev/tty")) \
                else "char"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    return "other"


def _held_file(hp, fd, root):
    """(fstat, target, same) of what host pid `hp` holds on `fd`: the kernel's open file
    (an O_PATH open of the node's own /proc/<hp>/fd/N, no walk of any path), and for a CT
    (`root`) whether its target, resolved INSIDE the CT's root, is that same file."""
    link = "/proc/%d/fd/%s" % (hp, fd)
    target = _readlink(link)
    if target is None:
        return None, None, False
    try:
        pfd = os.open(link, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return None, target, False
    try:
        st = os.fstat(pfd)
    except OSError:
        st = None
    finally:
        os.close(pfd)
    if st is None or not stat.S_ISREG(st.st_mode) or not root:
        return st, target, True
    name = target[:-len(" (deleted)")] if target.endswith(" (deleted)") else target
    try:
        qfd = _path_fd(name, root)
        try:
            there = os.fstat(qfd)
        finally:
            os.close(qfd)
        same = (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino)
    except OSError:
        same = False
    if not same and target.endswith(" (deleted)"):
        same = st.st_nlink == 0      # an unlinked file has no path to compare: the descriptor is all
    return st, target, same


def _fd_doc(hp, fd, root):
    st, target, same = _held_file(hp, fd, root)
    if target is None:
        return None
    doc = {"target": target, "kind": _fd_kind(target, st)}
    if st is not None and stat.S_ISREG(st.st_mode):
        if same:
            doc["inode"], doc["size"], doc["mtime"] = st.st_ino, st.st_size, st.st_mtime
        else:
            doc["outside_root"] = True     # not the CT's file at that path: no fact of it leaves the node
    if target.endswith(" (deleted)"):
        doc["deleted"] = True
    return doc


def _open_for_writing(hp, fd):
    text = _read_text("/proc/%d/fdinfo/%s" % (hp, fd), 4096) or ""
    m = re.search(r"^flags:\s*([0-7]+)", text, re.M)
    return m is not None and (int(m.group(1), 8) & 3) != 0    # O_WRONLY or O_RDWR


def _files(hp, root):
    """Regular files the process holds open: written ones, wandb transaction logs, metrics."""
    written, wandb, metrics = [], [], []  # type: list, list, list
    try:
        fds = os.listdir("/proc/%d/fd" % hp)[:FD_CAP]
    except (OSError, TypeError):
        return written, wandb, metrics, False
    for fd in fds:
        if fd in ("0", "1", "2"):
            continue
        target = _readlink("/proc/%d/fd/%s" % (hp, fd))
        if not target or not target.startswith("/"):
            continue
        m = WANDB_FILE_RE.match(target)
        if m:
            wandb.append({"file": target, "run_dir": m.group(1), "run_id": m.group(2)})
            continue
        if target.endswith("metrics.jsonl"):
            metrics.append(target)
            continue
        if _open_for_writing(hp, fd):
            doc = _fd_doc(hp, fd, root)
            if doc and doc["kind"] == "file":
                doc["fd"] = int(fd)
                written.append(doc)
    return written, wandb, metrics, True


def _env_facts(hp):
    """Only the facts that matter, never a value: is PYTHONUNBUFFERED set (non-empty)?"""
    try:
        with open("/proc/%d/environ" % hp, "rb") as fh:
            raw = fh.read(1 << 20)
    except (OSError, TypeError):
        return {"readable": False}
    set_ = False
    for item in raw.split(b"\0"):
        if item.startswith(b"PYTHONUNBUFFERED="):
            set_ = len(item) > len(b"PYTHONUNBUFFERED=")
    return {"readable": True, "pythonunbuffered": set_}


def _user_names(root):
    """uid -> name from the container's /etc/passwd, its links resolved inside the
    container's root (the probe's open_regular), never into the node's files."""
    text = _read_text("/etc/passwd", 1 << 20, root) if root else _read_text("/etc/passwd", 1 << 20)
    names = {}  # type: dict
    for line in (text or "").splitlines():
        f = line.split(":")
        if len(f) > 2 and f[2].isdigit():
            names.setdefault(int(f[2]), f[0][:64])
    return names


def _uid(hp):
    m = re.search(r"^Uid:\s*(\d+)", _read_text("/proc/%d/status" % hp, 8192) or "", re.M)
    return int(m.group(1)) if m else None


def _children_map(table):
    kids = {}  # type: dict
    for pid, (_, f) in table.items():
        try:
            kids.setdefault(int(f[PPID]), []).append(pid)
        except (ValueError, IndexError):
            continue
    return kids


def _descendants(kids, pid):
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return sorted(out)


def describe_process(view, root, pid, comm, f, kids, users):
    """One candidate, everything scan shows and attach records: read from the node's own
    /proc/<host pid> (pids reported in the view's numbering), its files resolved in `root`."""
    hp = view.host_pid(pid)
    if hp is None:
        raise ValueError("gone")
    argv = _argv(hp) or []
    uid = _uid(hp)
    doc = {"pid": pid, "comm": comm, "state": f[STATE], "ppid": int(f[PPID]), "pgid": int(f[PGRP]),
           "sid": int(f[SESSION]), "cpu_ticks": int(f[UTIME]) + int(f[STIME]), "threads": int(f[NUM_THREADS]),
           "start_ticks": int(f[STARTTIME]), "rss_pages": int(f[RSS]), "uid": uid, "user": users.get(uid) if uid is not None else None,
           "argv": argv, "cwd": _readlink("/proc/%d/cwd" % hp), "pid_ns": _pid_ns(hp),
           "stdout": _fd_doc(hp, 1, root), "stderr": _fd_doc(hp, 2, root),
           "env": _env_facts(hp), "descendants": _descendants(kids, pid)}
    written, wandb, metrics, readable = _files(hp, root)
    for child in doc["descendants"][:64]:          # wandb-core, data workers: their files count
        _, w2, m2, _ = _files(view.host_pid(child), root)
        wandb.extend(w for w in w2 if w not in wandb)
        metrics.extend(m for m in m2 if m not in metrics)
    doc.update({"written_files": written[:32], "wandb": wandb[:8], "metrics": metrics[:8], "fds_readable": readable})
    return doc


def _argv_matches(regex, argv):
    return regex is not None and argv and regex.search(" ".join(argv)) is not None


def _writes_one_of(hp, paths):
    """Its stdout or stderr is one of `paths` (strings compared, nothing walked)."""
    for fd in (1, 2):
        target = _readlink("/proc/%d/fd/%d" % (hp, fd))
        if target and (target in paths or target.replace(" (deleted)", "") in paths):
            return True
    return False


def _own_processes(view, table, kids):
    """dfctl's own processes in this view, by pid ancestry (never by name): this scan, its
    children (nvidia-smi, lxc-info) and every ancestor (the shell or sshd session that
    started it and, on the local target, the dfctl process itself)."""
    me = view.own_pid(os.getpid())
    if me is None:
        return set()
    own, p = set([me]), me
    while p in table and p > 1:
        try:
            p = int(table[p][1][1])
        except (ValueError, IndexError):
            break
        if p in own or p <= 0:
            break
        own.add(p)
    own.update(_descendants(kids, me))
    return own


def scan_procfs(view, root, req):
    """Candidates of one pid namespace (the node's own, or a CT's read from the node's /proc)."""
    table = _proc_table(view)
    if isinstance(table, str):
        return {"error": table}
    kids = _children_map(table)
    own = _own_processes(view, table, kids)
    users = _user_names(root)
    regex = re.compile(req["match"]) if req.get("match") else None
    extra = set(int(p) for p in req.get("pids") or [])
    logs = set(req.get("logs") or [])
    chosen = []
    for pid, (comm, f) in sorted(table.items()):
        if f[STATE] in ("Z", "X") or pid in own:
            continue
        hp = view.host_pid(pid)
        argv = _argv(hp)
        if pid in extra or _is_candidate(argv, comm) or _argv_matches(regex, argv) or \
                (logs and _writes_one_of(hp, logs)):
            chosen.append(pid)
    # a wrapper named by pid or regex (nohup's shell, bash -c, srun) is followed down: its
    # descendants (tee, the python that writes the output) are described too
    picked = set(chosen)
    for pid in list(chosen):
        if pid in extra or _argv_matches(regex, _argv(view.host_pid(pid))):
            for d in _descendants(kids, pid)[:64]:
                if d not in picked and d not in own and table[d][1][0] not in ("Z", "X"):
                    picked.add(d)
    out = []
    for pid in sorted(picked):
        comm, f = table[pid]
        try:
            out.append(describe_process(view, root, pid, comm, f, kids, users))
        except (OSError, ValueError, IndexError):
            continue                                # it exited while we looked
    return {"processes": out}


def sample_log(view, pid, fd, root, head=LOG_SAMPLE_BYTES, tail=LOG_SAMPLE_BYTES):
    """Head and tail of the file a process writes on `fd`, read through its descriptor in
    the node's own /proc -- for a CT only when that descriptor's file is the CT's file at
    its path (resolved inside the CT's root) or an unlinked one."""
    hp = view.host_pid(pid)
    if hp is None:
        return {"error": "no process %d" % pid}
    st0, target, same = _held_file(hp, int(fd), root)
    if st0 is None or not stat.S_ISREG(st0.st_mode):
        return {"error": "not a regular file"}
    if not same:
        return {"error": "%s is not the file at that path in the container: not read" % target}
    try:
        pfd = os.open("/proc/%d/fd/%d" % (hp, int(fd)), _O_PATH | os.O_CLOEXEC)
        try:
            if (os.fstat(pfd).st_dev, os.fstat(pfd).st_ino) != (st0.st_dev, st0.st_ino):
                return {"error": "the descriptor changed while it was read"}
            rfd = os.open("/proc/self/fd/%d" % pfd, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        finally:
            os.close(pfd)
        f = RawFile(rfd)
        try:
            st = os.fstat(rfd)
            first = f.pread(0, head)
            last = f.pread(max(head, st.st_size - tail), tail) if st.st_size > head else b""
        finally:
            f.close()
    except OSError as exc:
        return {"error": exc.strerror}
    return {"inode": st.st_ino, "size": st.st_size, "head": _blob(first), "tail": _blob(last)}


def _samples(view, req, vmid, root):
    """Logs asked for by (vmid, pid, fd): the selected run's, after the controller chose it."""
    return [dict(s, **sample_log(view, int(s["pid"]), int(s["fd"]), root)) for s in req.get("samples") or []
            if s.get("vmid") == vmid]


def running_vmids(lxcpath=None):
    """Every running container of this node: `lxc-ls --running` (Proxmox's own LXC, a C
    tool: no pct start-up), else the host processes whose cgroup names /lxc/<vmid>/ with
    an innermost pid of 1 (a node's /proc holds only its own containers)."""
    argv = ["lxc-ls", "--running", "-1"] + (["-P", lxcpath] if lxcpath else [])
    rc, out, _ = _run(argv, 10)
    if rc == 0:
        return sorted(int(w) for w in out.decode("utf-8", "replace").split() if w.isdigit()), {}
    found = {}  # type: dict
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        ns = _nspid(int(name))
        if not ns or len(ns) < 2 or ns[-1] != 1:
            continue
        m = re.search(r"/lxc/(\d+)(/|$)", _read_text("/proc/%s/cgroup" % name, 8192) or "", re.M)
        if m:
            found.setdefault(int(m.group(1)), int(name))
    return sorted(found), found


def scan_container(vmid, init, how, req):
    """One CT's processes: the node's own /proc entries in the pid namespace of the CT's
    init, their files resolved inside the CT's root. The CT's own /proc is never read
    here; when it is not procfs that is said (a mount over it), and nothing else changes."""
    doc = {"vmid": vmid, "init_pid": init, "init_found_by": how}
    if not init:
        doc["error"] = "CT %d: no init pid (%s)" % (vmid, how)
        return doc
    root = "/proc/%d/root" % init
    if req.get("force_pct") or not os.path.isdir(root) or not _pid_ns(init):
        doc["error"] = "CT %d: its processes cannot be read from the host" % vmid
        doc["need_pct"] = True
        return doc
    doc["via"] = "host"
    refused = procfs_refusal("/proc", root)
    if refused:
        doc["proc_refused"] = "CT %d: %s; its processes were read from the node's /proc instead" % (vmid, refused)
    view = pid_view(init)
    doc.update(scan_procfs(view, root, req))
    doc["samples"] = _samples(view, req, vmid, root)
    return doc


def _host_facts():
    btime = None
    for line in (_read_text("/proc/stat", 1 << 16) or "").splitlines():
        if line.startswith("btime "):
            btime = int(line.split()[1])
    return {"clk_tck": os.sysconf("SC_CLK_TCK"), "page_size": os.sysconf("SC_PAGE_SIZE"), "btime_s": btime,
            "uptime_s": float((_read_text("/proc/uptime") or "0").split()[0]), "hostname": os.uname()[1]}


def scan(req):
    """The whole host: its own processes (req["host"]) and the containers asked for
    (req["containers"]: [{"vmid", ...}] or "all"), with the GPU compute apps."""
    import time
    t0 = time.time()
    doc = {"version": 1, "time_s": t0}  # type: dict
    doc.update(_host_facts())
    started = start_gpu_queries(req) if req.get("gpu", True) else None
    if req.get("host", True):
        doc["host"] = scan_procfs(pid_view(), "", req)
        doc["host"]["samples"] = _samples(pid_view(), req, None, "")
        if req.get("host_cgroups"):
            for p in doc["host"].get("processes", []):
                m = re.search(r"/lxc/(\d+)(/|$)", _read_text("/proc/%d/cgroup" % p["pid"], 8192) or "", re.M)
                p["vmid"] = int(m.group(1)) if m else None
    cts = req.get("containers") or []
    doc["containers"] = []
    if cts:
        lxcpath = req.get("lxcpath")
        if cts == "all":
            vmids, inits = running_vmids(lxcpath)
            cts = [{"vmid": v, "init_pid": inits.get(v), "lxcpath": lxcpath} for v in vmids]
        for c in cts:
            vmid = int(c["vmid"])
            init, how = container_init_pid(vmid, c.get("init_pid"), c.get("lxcpath"), c.get("pct", "pct"),
                                           float(req.get("pct_timeout_s", 20)))
            doc["containers"].append(scan_container(vmid, init, how, req))
    if started is not None:
        doc.update(gpu_readings(started))
    doc["duration_s"] = time.time() - t0
    return doc


def main(req, src=""):
    """One request, one JSON document on stdout (mode "inside": this procfs only, for the
    `pct exec` fallback, where /proc is the container's own)."""
    if req.get("mode") == "inside":
        doc = _host_facts()
        refused = procfs_refusal("/proc")
        if refused:    # inside a CT whose /proc is not the kernel's: nothing read from it is a fact
            doc.update({"error": "CT %s: %s; its processes are not read from it" % (req.get("vmid"), refused),
                        "processes": [], "samples": []})
        else:
            doc.update(scan_procfs(pid_view(), "", req))
            doc["samples"] = _samples(pid_view(), req, req.get("vmid"), "")
    else:
        doc = scan(req)
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
