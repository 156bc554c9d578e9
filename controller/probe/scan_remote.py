"""The remote side of `dfctl scan` / `dfctl attach`: which training processes run on a host
or in its containers, in ONE round trip per host.

Shipped like the probe, and after it: the controller sends remote.py's text followed by
this file's as one `_SRC` through the probe's one bootstrap (controller.probe.probe_stdin),
so the helpers below (_read_text, _run, _nspid, container_init_pid, start_gpu_queries,
gpu_readings) are the probe's own, and this file's `main` replaces the probe's.

What it reads, per process, and why each is safe on a node where every file, link and
process of a container is untrusted input:
- /proc/<pid>/{stat,status,cmdline,fdinfo/N} of the container's own procfs (seen from the
  node as /proc/<CT init>/root/proc, checked to be a directory, not a link): kernel-made.
- fd and cwd targets with readlink only: read as strings, never walked.
- os.stat of /proc/<pid>/fd/N: the kernel resolves the open file itself (no path walk in
  the container's tree), which says regular file / pipe / socket, its inode and size.
- a log's bytes through its writer's /proc/<pid>/fd/N, for the same reason.
- /proc/<pid>/environ: only whether PYTHONUNBUFFERED is set; nothing else leaves this
  script (an environment holds secrets).
- the container's /etc/passwd (user names) through the probe's open_regular: its links
  resolved inside the container's root (openat2 RESOLVE_IN_ROOT, or a walk), never out.

Must run on Python >= 3.6 (old hosts), stdlib only, like remote.py.
"""

import json
import os
import re
import stat
import sys

if "_SRC" not in globals():  # imported (tests, type checks); shipped, remote.py's text came first
    from controller.probe.remote import (  # noqa: F401
        _blob,
        _nspid,
        _read_text,
        _run,
        container_init_pid,
        gpu_readings,
        start_gpu_queries,
    )

# A process is a training candidate when its program is one of these (or it holds a GPU,
# or the request's regex matches its command line).
TRAINING_PROGRAM_RE = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|torchrun|deepspeed|accelerate|colossalai)$")
LOG_NAME_RE = re.compile(r"\.(log|out|txt|err)(\.\d+)?$|(^|/)(nohup\.out|stdout|stderr)$")
WANDB_FILE_RE = re.compile(r"^(.*/wandb/(?:offline-)?run-[0-9]{8}_[0-9]{6}-([A-Za-z0-9]+))/run-[A-Za-z0-9]+\.wandb$")
ARGV_CAP_CHARS = 4096
FD_CAP = 4096              # fds looked at per process (a data loader may hold thousands)
LOG_SAMPLE_BYTES = 65536   # head and tail of a selected run's log, for its wandb URL


def _stat_fields(text):
    r = text.rfind(")")
    return text[:text.find("(")].strip(), text[text.find("(") + 1:r], text[r + 2:].split()


def _proc_table(proc_root):
    """pid -> (comm, fields) for every process of one procfs; or an error string."""
    try:
        names = os.listdir(proc_root)
    except OSError as exc:
        return "cannot list %s: %s" % (proc_root, exc.strerror)
    table = {}
    for name in names:
        if not name.isdigit():
            continue
        text = _read_text("%s/%s/stat" % (proc_root, name), 4096)
        if not text:
            continue
        try:
            _, comm, f = _stat_fields(text)
            table[int(name)] = (comm, f)
        except (ValueError, IndexError):
            continue
    return table


def _argv(proc_root, pid):
    try:
        with open("%s/%d/cmdline" % (proc_root, pid), "rb") as fh:
            raw = fh.read(ARGV_CAP_CHARS)
    except OSError:
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


def _fd_doc(proc_root, pid, fd):
    link = "%s/%d/fd/%s" % (proc_root, pid, fd)
    target = _readlink(link)
    if target is None:
        return None
    try:
        st = os.stat(link)          # the kernel's open file, not a walk of the target path
    except OSError:
        st = None
    doc = {"target": target, "kind": _fd_kind(target, st)}
    if st is not None and stat.S_ISREG(st.st_mode):
        doc["inode"], doc["size"], doc["mtime"] = st.st_ino, st.st_size, st.st_mtime
    if target.endswith(" (deleted)"):
        doc["deleted"] = True
    return doc


def _open_for_writing(proc_root, pid, fd):
    text = _read_text("%s/%d/fdinfo/%s" % (proc_root, pid, fd), 4096) or ""
    m = re.search(r"^flags:\s*([0-7]+)", text, re.M)
    return bool(m) and (int(m.group(1), 8) & 3) != 0    # O_WRONLY or O_RDWR


def _files(proc_root, pid):
    """Regular files the process holds open: written ones, wandb transaction logs, metrics."""
    written, wandb, metrics = [], [], []
    try:
        fds = os.listdir("%s/%d/fd" % (proc_root, pid))[:FD_CAP]
    except OSError:
        return written, wandb, metrics, False
    for fd in fds:
        if fd in ("0", "1", "2"):
            continue
        target = _readlink("%s/%d/fd/%s" % (proc_root, pid, fd))
        if not target or not target.startswith("/"):
            continue
        m = WANDB_FILE_RE.match(target)
        if m:
            wandb.append({"file": target, "run_dir": m.group(1), "run_id": m.group(2)})
            continue
        if target.endswith("metrics.jsonl"):
            metrics.append(target)
            continue
        if _open_for_writing(proc_root, pid, fd):
            doc = _fd_doc(proc_root, pid, fd)
            if doc and doc["kind"] == "file":
                doc["fd"] = int(fd)
                written.append(doc)
    return written, wandb, metrics, True


def _env_facts(proc_root, pid):
    """Only the facts that matter, never a value: is PYTHONUNBUFFERED set (non-empty)?"""
    try:
        with open("%s/%d/environ" % (proc_root, pid), "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
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
    names = {}
    for line in (text or "").splitlines():
        f = line.split(":")
        if len(f) > 2 and f[2].isdigit():
            names.setdefault(int(f[2]), f[0][:64])
    return names


def _uid(proc_root, pid):
    m = re.search(r"^Uid:\s*(\d+)", _read_text("%s/%d/status" % (proc_root, pid), 8192) or "", re.M)
    return int(m.group(1)) if m else None


def _children_map(table):
    kids = {}
    for pid, (_, f) in table.items():
        try:
            kids.setdefault(int(f[1]), []).append(pid)
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


def describe_process(proc_root, pid, comm, f, kids, users):
    """One candidate, everything scan shows and attach records."""
    argv = _argv(proc_root, pid) or []
    uid = _uid(proc_root, pid)
    doc = {"pid": pid, "comm": comm, "state": f[0], "ppid": int(f[1]), "pgid": int(f[2]), "sid": int(f[3]),
           "cpu_ticks": int(f[11]) + int(f[12]), "threads": int(f[17]), "start_ticks": int(f[19]),
           "rss_pages": int(f[21]), "uid": uid, "user": users.get(uid) if uid is not None else None,
           "argv": argv, "cwd": _readlink("%s/%d/cwd" % (proc_root, pid)),
           "stdout": _fd_doc(proc_root, pid, 1), "stderr": _fd_doc(proc_root, pid, 2),
           "env": _env_facts(proc_root, pid), "descendants": _descendants(kids, pid)}
    written, wandb, metrics, readable = _files(proc_root, pid)
    for child in doc["descendants"][:64]:          # wandb-core, data workers: their files count
        _, w2, m2, _ = _files(proc_root, child)
        wandb.extend(w for w in w2 if w not in wandb)
        metrics.extend(m for m in m2 if m not in metrics)
    doc.update({"written_files": written[:32], "wandb": wandb[:8], "metrics": metrics[:8], "fds_readable": readable})
    return doc


def _matches(regex, argv):
    return regex is not None and argv and regex.search(" ".join(argv)) is not None


def _writes_one_of(proc_root, pid, paths):
    """Its stdout or stderr is one of `paths` (strings compared, nothing walked)."""
    for fd in (1, 2):
        target = _readlink("%s/%d/fd/%d" % (proc_root, pid, fd))
        if target and (target in paths or target.replace(" (deleted)", "") in paths):
            return True
    return False


def scan_procfs(proc_root, root, req):
    """Candidates of one procfs (the host's /proc, or a container's seen from the host)."""
    table = _proc_table(proc_root)
    if isinstance(table, str):
        return {"error": table}
    kids = _children_map(table)
    users = _user_names(root)
    regex = re.compile(req["match"]) if req.get("match") else None
    extra = set(int(p) for p in req.get("pids") or [])
    logs = set(req.get("logs") or [])
    out = []
    for pid, (comm, f) in sorted(table.items()):
        if f[0] in ("Z", "X"):
            continue
        argv = _argv(proc_root, pid)
        if not (pid in extra or _is_candidate(argv, comm) or _matches(regex, argv) or
                (logs and _writes_one_of(proc_root, pid, logs))):
            continue
        try:
            out.append(describe_process(proc_root, pid, comm, f, kids, users))
        except (OSError, ValueError, IndexError):
            continue                                # it exited while we looked
    return {"processes": out}


def sample_log(proc_root, pid, fd, head=LOG_SAMPLE_BYTES, tail=LOG_SAMPLE_BYTES):
    """Head and tail of the file a process writes on `fd`, read through its descriptor."""
    try:
        with open("%s/%d/fd/%d" % (proc_root, pid, int(fd)), "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return {"error": "not a regular file"}
            first = fh.read(head)
            last = b""
            if st.st_size > head:
                fh.seek(max(head, st.st_size - tail))
                last = fh.read(tail)
    except OSError as exc:
        return {"error": exc.strerror}
    return {"inode": st.st_ino, "size": st.st_size, "head": _blob(first), "tail": _blob(last)}


def _samples(proc_root, req, vmid):
    """Logs asked for by (vmid, pid, fd): the selected run's, after the controller chose it."""
    return [dict(s, **sample_log(proc_root, int(s["pid"]), int(s["fd"]))) for s in req.get("samples") or []
            if s.get("vmid") == vmid]


def running_vmids(lxcpath=None):
    """Every running container of this node: `lxc-ls --running` (Proxmox's own LXC, a C
    tool: no pct start-up), else the host processes whose cgroup names /lxc/<vmid>/ with
    an innermost pid of 1 (a node's /proc holds only its own containers)."""
    argv = ["lxc-ls", "--running", "-1"] + (["-P", lxcpath] if lxcpath else [])
    rc, out, _ = _run(argv, 10)
    if rc == 0:
        return sorted(int(w) for w in out.decode("utf-8", "replace").split() if w.isdigit()), {}
    found = {}
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
    doc = {"vmid": vmid, "init_pid": init, "init_found_by": how}
    if not init:
        doc["error"] = "CT %d: no init pid (%s)" % (vmid, how)
        return doc
    root = "/proc/%d/root" % init
    proc_root = root + "/proc"
    if req.get("force_pct") or os.path.islink(proc_root) or not os.path.isdir(proc_root + "/1"):
        doc["error"] = "CT %d: its /proc cannot be read from the host" % vmid
        doc["need_pct"] = True
        return doc
    doc["via"] = "host"
    doc.update(scan_procfs(proc_root, root, req))
    doc["samples"] = _samples(proc_root, req, vmid)
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
    doc = {"version": 1, "time_s": t0}
    doc.update(_host_facts())
    started = start_gpu_queries(req) if req.get("gpu", True) else None
    if req.get("host", True):
        doc["host"] = scan_procfs("/proc", "", req)
        doc["host"]["samples"] = _samples("/proc", req, None)
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
        doc.update(scan_procfs("/proc", "", req))
        doc["samples"] = _samples("/proc", req, req.get("vmid"))
    else:
        doc = scan(req)
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
