"""The remote side of one watch tick: stdlib-only Python run as `python3 -` on the host.

Why a script and not a row of shell commands: one process start per host per tick reads
everything for every watched run on that host (log bytes since the cursor, the process
tree, metrics.jsonl, the .wandb file, nvidia-smi, the container's cgroup), so a tick costs
one round trip however many things we look at -- the seeds paid one ssh + pct start-up
per question. The script keeps no state on the host: the controller sends the cursors
in, and it prints ONE JSON document with raw readings out. Parsing (nvidia-smi CSV,
/proc/<pid>/stat, cgroup files) happens controller-side in controller/probe/, where it
can be tested without a host.

Container targets (`pct`): the container's files are read from the host through
/proc/<container init pid>/root and its processes through that container's own procfs
(/proc/<init>/root/proc, pids in the container's namespace, as the pid file holds them),
so no `pct exec` starts per tick. When that fails, this same script re-runs itself
inside the container through `pct exec <vmid> -- <python> -` for that container's runs.

Must run on Python >= 3.6 (old hosts): no walrus, no dataclasses, no f-string `=`.
The controller sends: `_SRC = <this file>; exec(_SRC); main(<request>, _SRC)`.
"""

import base64
import glob
import json
import os
import re
import subprocess
import sys
import time
import zlib

GPU_QUERY = ("index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
             "power.draw,clocks_event_reasons.active")
APPS_QUERY = "pid,gpu_uuid,used_memory"
ZIP_ABOVE_BYTES = 64 * 1024


def _blob(data):
    """Bytes -> JSON-safe text: base64, zlib first when large (logs compress ~5-10x)."""
    if len(data) > ZIP_ABOVE_BYTES:
        return {"enc": "zb64", "data": base64.b64encode(zlib.compress(data, 1)).decode("ascii")}
    return {"enc": "b64", "data": base64.b64encode(data).decode("ascii")}


def _read_text(path, limit=65536):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _run(argv, timeout_s, stdin=None):
    """(rc, stdout, stderr); rc 127 when the program is missing, 124 on timeout."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return 127, b"", str(exc).encode()
    try:
        out, err = p.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return 124, out, err + b"\ntimed out"
    return p.returncode, out, err


def _cmd_doc(rc, out, err):
    return {"rc": rc, "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")[-2000:]}


# -- files ----------------------------------------------------------------------------

def _open_stat(path):
    """(file, fstat, None) or (None, None, strerror)."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        return None, None, exc.strerror
    try:
        return f, os.fstat(f.fileno()), None
    except OSError as exc:
        f.close()
        return None, None, exc.strerror


def _renamed_to(path, inode):
    """Where the file with `inode` went when it left `path`: a name in the same directory
    (logrotate's rename, `mv train.log train.log.1`), or None (deleted, or moved away)."""
    try:
        with os.scandir(os.path.dirname(path) or ".") as entries:
            for e in entries:
                try:
                    if e.inode() == inode and e.is_file(follow_symlinks=False):
                        return e.path
                except OSError:
                    continue
    except OSError:
        return None
    return None


def _still_the_cursors_file(path, inode, offset, st):
    """The renamed file to go on reading, or None for `path` (st: its fstat, or None when
    it is missing). After a rename the old file is read to its end first (its last lines
    would be lost otherwise), and it stays the one followed while nothing is written at
    `path`: a process that keeps its stdout open (nohup, a shell redirect) goes on writing
    to the renamed file. Only asked when `path` no longer is the cursor's inode."""
    old = _renamed_to(path, inode)
    try:
        size = os.stat(old).st_size if old else None
    except OSError:
        size = None
    if size is None or size < (offset or 0):
        return None
    if size > (offset or 0) or st is None or st.st_size == 0:
        return old
    return None


def read_since(path, inode, offset, cap, context=0):
    """New bytes of a growing file from a cursor. New inode or size below offset -> from 0,
    except that a file renamed away in its directory is read to its end first (and followed
    while nothing is written at `path`; `followed` then names it).

    Returns {exists, inode, size, mtime, start, rotated, bytes(blob)}; `start` is the
    offset the returned bytes begin at (0 after a rotation/truncation). With `context`
    (and the cursor still valid) also up to that many bytes before the cursor, as
    {context(blob), context_start}: what a restarted watch shows as its log tail.
    """
    f, st, err = _open_stat(path)
    follow = path
    if inode is not None and (st is None or st.st_ino != inode):
        old = _still_the_cursors_file(path, inode, offset, st)
        if old is not None:
            if f is not None:
                f.close()
            f, st, err = _open_stat(old)
            follow = old
    if f is None:
        return {"exists": False, "error": err}
    try:
        rotated = False
        start = offset or 0
        if inode is not None and st.st_ino != inode:
            rotated, start = True, 0
        elif st.st_size < start:
            rotated, start = True, 0
        n = max(0, min(st.st_size - start, cap))
        data = b""
        if n:
            f.seek(start)
            data = f.read(n)
        out = {"exists": True, "inode": st.st_ino, "size": st.st_size, "mtime": st.st_mtime,
               "start": start, "rotated": rotated, "bytes": _blob(data)}
        if follow != path:
            out["followed"] = follow
        if context and start > 0:
            c0 = max(0, start - context)
            f.seek(c0)
            out["context"], out["context_start"] = _blob(f.read(start - c0)), c0
        return out
    finally:
        f.close()


def run_dir_disk(run_dir):
    """Free space on the run dir's filesystem (and an exit_code.tmp's size): read while no
    exit code is recorded, so a run that vanished can be told apart from a kill -9 -- a
    full disk kills the trainer, then the wrapper, leaving exit_code.tmp empty."""
    try:
        st = os.statvfs(run_dir)
    except OSError:
        return None
    try:
        tmp_bytes = os.lstat(os.path.join(run_dir, "exit_code.tmp")).st_size
    except OSError:
        tmp_bytes = None
    return {"free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize,
            "exit_code_tmp_bytes": tmp_bytes}


def _int_file(path):
    text = _read_text(path, 64)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


# -- processes -----------------------------------------------------------------------

def _stat_fields(text):
    """/proc/<pid>/stat after the `(comm)` (comm may hold spaces and parens)."""
    r = text.rfind(")")
    return text[r + 2:].split()


def process_tree(proc_root, leader):
    """Raw stat lines of the leader and every process in its session (= the run's tree).

    `proc_root` is the procfs whose pid numbers the pid file uses: /proc locally, the
    container's /proc seen from the host otherwise.
    """
    out = {"leader_stat": _read_text("%s/%d/stat" % (proc_root, leader)), "tree": []}
    table = _PROC_SCANS.get(proc_root)
    if table is None:
        table = _PROC_SCANS[proc_root] = _scan_stats(proc_root)
    if isinstance(table, str):
        out["error"] = table
        return out
    key = str(leader)
    # f[2] pgrp, f[3] session (fields 5 and 6 of stat): the leader's session is the tree
    out["tree"] = [text for f, text in table if len(f) > 3 and (f[3] == key or f[2] == key)]
    return out


_PROC_SCANS = {}  # proc_root -> [(fields, stat text)], one scan per probe however many runs


def _scan_stats(proc_root):
    try:
        names = os.listdir(proc_root)
    except OSError as exc:
        return "cannot list %s: %s" % (proc_root, exc.strerror)
    table = []
    for name in names:
        if name.isdigit():
            text = _read_text("%s/%s/stat" % (proc_root, name), 4096)
            if text:
                table.append((_stat_fields(text), text))
    return table


def _nspid(pid):
    text = _read_text("/proc/%d/status" % pid, 8192) or ""
    m = re.search(r"^NSpid:\s*(.*)$", text, re.M)
    return [int(x) for x in m.group(1).split()] if m else None


def container_init_pid(vmid, hint_pid, lxcpath, pct, timeout_s):
    """The container's init pid on the host, found once and then cached by the controller:
    the cached pid if still right, else `lxc-info -n <vmid> -p -H` (Proxmox's own LXC),
    else the host process whose pid namespace is the one `pct exec` shows as the CT's
    (one pct start-up, first tick only; works whatever the cgroup naming or lxcpath)."""
    if hint_pid and _is_init_of(hint_pid, vmid):
        return hint_pid, "cached"
    argv = ["lxc-info", "-n", str(vmid), "-p", "-H"]
    if lxcpath:
        argv[1:1] = ["-P", lxcpath]
    rc, out, _ = _run(argv, 5)
    if rc == 0 and out.strip().isdigit():
        return int(out.strip()), "lxc-info"
    rc, out, err = _run([pct, "exec", str(vmid), "--", "readlink", "/proc/1/ns/pid"], timeout_s)
    want = out.decode("utf-8", "replace").strip()
    if rc != 0 or not want.startswith("pid:["):
        return None, "not found (lxc-info failed; pct exec %d exit %d: %s)" % (
            vmid, rc, err.decode("utf-8", "replace").strip()[-200:])
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink("/proc/%s/ns/pid" % name) != want:
                    continue
            except OSError:
                continue
            ns = _nspid(int(name))
            if ns and ns[-1] == 1:
                return int(name), "pct-ns"
    return None, "not found (no host process in pid namespace %s)" % want


def _is_init_of(pid, vmid):
    ns = _nspid(pid)
    cg = _read_text("/proc/%d/cgroup" % pid) or ""
    return bool(ns and len(ns) > 1 and ns[-1] == 1 and str(vmid) in cg)


_CG_FILES = {1: ["memory.oom_control", "memory.max_usage_in_bytes", "memory.limit_in_bytes",
                  "memory.usage_in_bytes"],
             2: ["memory.events", "memory.peak", "memory.max", "memory.current"]}


def cgroup_files_at(version, path):
    """The raw memory files of one cgroup directory; None when none can be read."""
    files = {}
    for n in _CG_FILES[int(version)]:
        t = _read_text(path + "/" + n, 8192)
        if t is not None:
            files[n] = t
    return {"version": int(version), "path": path, "files": files} if files else None


def cgroup_files(cgroup_text):
    """The memory cgroup of a process: path and the raw oom/peak/limit files (v2 or v1).

    Proxmox puts a CT's processes in /lxc/<vmid>/ns and sets the limits one level up:
    both levels are read (the counter where the processes are -- the level the launcher
    saw from inside -- and the limit where it is set); the parser combines them.
    """
    v1 = v2 = None
    for line in (cgroup_text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            v1 = parts[2]
        elif parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
    cands = []
    if v1 is not None:
        cands.append((1, "/sys/fs/cgroup/memory", v1))
    if v2 is not None:
        cands.append((2, "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") and v1 is not None
                      else "/sys/fs/cgroup", v2))
    for version, root, rel in cands:
        doc = cgroup_files_at(version, root + rel.rstrip("/"))
        if doc is None:
            continue
        if rel.rstrip("/").endswith("/ns"):
            doc["parent"] = cgroup_files_at(version, root + rel.rstrip("/")[:-3])
        return doc
    return None


# -- one run -------------------------------------------------------------------------

def probe_run(run, root, proc_root, cap, host_cgroup):
    """Everything about one run. `root` prefixes file paths ("" or /proc/<init>/root)."""
    rd = run.get("run_dir") or ""
    out = {"run_id": run["run_id"]}
    log = run.get("log") or {}
    out["log"] = read_since(root + run["log_path"], log.get("inode"), log.get("offset", 0), cap,
                            log.get("context", 0))
    pid = _int_file(root + rd + "/pid") if rd else None
    if pid is None:
        pid = run.get("pid")
    out["pid"] = pid
    out["exit_code_text"] = _read_text(root + rd + "/exit_code", 64) if rd else None
    if rd and out["exit_code_text"] is None:
        out["disk"] = run_dir_disk(root + rd)
    out["stop_request_text"] = _read_text(root + rd + "/stop_request", 4096) if rd else None
    if run.get("want_launch") and rd:
        out["launch_json"] = _read_text(root + rd + "/launch.json", 65536)
    if pid:
        out["proc"] = process_tree(proc_root, pid)
        if host_cgroup:
            out["cgroup"] = cgroup_files(_read_text("%s/%d/cgroup" % (proc_root, pid)))
    if host_cgroup and not out.get("cgroup") and run.get("cgroup"):
        # the process is gone (its /proc entry with it): read the cgroup it was in
        cg = run["cgroup"]
        out["cgroup"] = cgroup_files_at(cg["version"], cg["path"])
    if rd:
        out["metrics"] = read_since(root + rd + "/metrics.jsonl", None, run.get("metrics_offset", 0), cap)
        wb = run.get("wandb") or {}
        wpath = wb.get("path")
        if not wpath:
            # offline runs and online runs alike keep the transaction log locally; newest last
            found = sorted(glob.glob(root + rd + "/wandb/offline-run-*/run-*.wandb") +
                           glob.glob(root + rd + "/wandb/run-*/run-*.wandb"),
                           key=lambda p: os.path.basename(os.path.dirname(p)).replace("offline-", ""))
            wpath = found[-1][len(root):] if found else None
        if wpath:
            out["wandb"] = read_since(root + wpath, None, wb.get("offset", 0), cap)
            out["wandb"]["path"] = wpath
    return out


def probe_inside(req):
    """Mode for running inside a container (the pct fallback) or on a plain host."""
    cap = int(req.get("read_cap_bytes", 1 << 20))
    runs = []
    for run in req.get("runs", []):
        try:
            runs.append(probe_run(run, "", "/proc", cap, True))
        except Exception as exc:  # one bad run never hides the others
            runs.append({"run_id": run.get("run_id"), "error": "%s: %s" % (type(exc).__name__, exc)})
    return runs


def probe_container(ct, runs, req, src):
    """All runs of one container: via the host's view of its files, else `pct exec`."""
    vmid = int(ct["vmid"])
    cap = int(req.get("read_cap_bytes", 1 << 20))
    doc = {"vmid": vmid}
    init, how = container_init_pid(vmid, ct.get("init_pid"), ct.get("lxcpath"), ct.get("pct", "pct"),
                                   float(req.get("pct_timeout_s", 20)))
    doc["init_pid"], doc["init_found_by"] = init, how
    if init:
        doc["cgroup"] = cgroup_files(_read_text("/proc/%d/cgroup" % init))
    root = "/proc/%d/root" % init if init else None
    if root and not ct.get("force_pct") and os.path.isdir(root + "/proc/1"):
        doc["via"] = "host"
        results = []
        for run in runs:
            try:
                results.append(probe_run(run, root, root + "/proc", cap, False))
            except Exception as exc:
                results.append({"run_id": run.get("run_id"), "error": "%s: %s" % (type(exc).__name__, exc)})
        return doc, results
    # Fallback: the same script inside the container (one pct start-up per tick).
    doc["via"] = "pct"
    sub = {"mode": "inside", "runs": runs, "read_cap_bytes": cap}
    payload = ("_SRC = %r\nexec(compile(_SRC, 'dfctl-probe', 'exec'))\nmain(json.loads(%r), _SRC)\n"
               % (src, json.dumps(sub))).encode()
    argv = [ct.get("pct", "pct"), "exec", str(vmid), "--", ct.get("python") or "python3", "-"]
    rc, out, err = _run(argv, float(req.get("pct_timeout_s", 20)), payload)
    if rc != 0:
        doc["error"] = "pct exec %d failed (exit %d): %s" % (vmid, rc, err.decode("utf-8", "replace").strip()[-300:])
        return doc, [{"run_id": r["run_id"], "error": doc["error"]} for r in runs]
    try:
        return doc, json.loads(out.decode("utf-8"))["runs"]
    except (ValueError, KeyError) as exc:
        doc["error"] = "pct exec %d: unreadable probe output: %s" % (vmid, exc)
        return doc, [{"run_id": r["run_id"], "error": doc["error"]} for r in runs]


class _Started(object):
    """A command started now and collected later, so nvidia-smi (often the slowest part
    of a tick) runs while the files are read."""

    def __init__(self, argv, timeout_s):
        self.deadline = time.time() + timeout_s
        try:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            self.error = None
        except OSError as exc:
            self.p, self.error = None, exc

    def result(self):
        if self.p is None:
            return 127, b"", str(self.error).encode()
        try:
            out, err = self.p.communicate(timeout=max(0.1, self.deadline - time.time()))
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
            return 124, out, err + b"\ntimed out"
        return self.p.returncode, out, err


def start_gpu_queries(req):
    """Start `--query-gpu` (and `--query-compute-apps` when asked) side by side."""
    smi = req.get("nvidia_smi", "nvidia-smi")
    gpu = _Started([smi, "--query-gpu=" + GPU_QUERY, "--format=csv,noheader,nounits"], 10)
    apps = None
    if req.get("gpu_apps", True) and gpu.p is not None:
        apps = _Started([smi, "--query-compute-apps=" + APPS_QUERY, "--format=csv,noheader,nounits"], 10)
    return gpu, apps


def gpu_readings(started):
    """Collect the GPU table + compute apps + each app pid's cgroup/NSpid (host pids)."""
    gpu, apps = started
    return _gpu_doc(gpu.result(), apps.result() if apps is not None else None)


def gpu_from_fd(fd, timeout_s):
    """The nvidia-smi output the shell piped to `fd` (started before this interpreter, so
    Python's start-up and the GPU query overlap): sections end in `@@dfctl-rc=<code>`."""
    import select
    chunks, deadline = [], time.time() + timeout_s
    while True:
        left = deadline - time.time()
        if left <= 0:
            return _gpu_doc((124, b"".join(chunks), b"nvidia-smi timed out"), None)
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        block = os.read(fd, 65536)
        if not block:
            break
        chunks.append(block)
    sections, cur = [], []
    for line in b"".join(chunks).splitlines(True):
        if line.startswith(b"@@dfctl-rc="):
            try:
                rc = int(line[len(b"@@dfctl-rc="):].strip())
            except ValueError:
                rc = 1
            sections.append((rc, b"".join(cur), b""))
            cur = []
        else:
            cur.append(line)
    if not sections:
        return _gpu_doc((1, b"".join(cur), b"no output from the GPU query"), None)
    return _gpu_doc(sections[0], sections[1] if len(sections) > 1 else None)


def _gpu_doc(gpu, apps):
    rc, out, err = gpu
    doc = {"gpu": _cmd_doc(rc, out, err)}
    if apps is None or rc != 0:
        return doc
    arc, aout, aerr = apps
    doc["apps"] = _cmd_doc(arc, aout, aerr)
    pids = {}
    if arc == 0:
        for line in aout.decode("utf-8", "replace").splitlines():
            first = line.split(",", 1)[0].strip()
            if first.isdigit():
                p = int(first)
                pids[str(p)] = {"cgroup": _read_text("/proc/%d/cgroup" % p, 8192), "nspid": _nspid(p)}
    doc["app_pids"] = pids
    return doc


def handle(req, src=""):
    """One request -> one document (the body of a tick on this host)."""
    t0 = time.time()
    _PROC_SCANS.clear()   # a fresh process table per request (the agent serves many)
    if req.get("mode") == "inside":
        return {"runs": probe_inside(req)}
    doc = {"version": 1, "time_s": t0, "clk_tck": os.sysconf("SC_CLK_TCK"),
           "page_size": os.sysconf("SC_PAGE_SIZE"), "hostname": os.uname()[1]}
    doc["uptime_s"] = float((_read_text("/proc/uptime") or "0").split()[0])
    started = None
    gpu = req.get("gpu", True)
    if gpu and req.get("gpu_sampler"):
        doc.update(_SAMPLER.latest(req))
        gpu = False
    elif gpu and req.get("gpu_fd") is None:
        started = start_gpu_queries(req)
    by_ct = {}
    plain = []
    for run in req.get("runs", []):
        if run.get("vmid") is not None:
            by_ct.setdefault(int(run["vmid"]), []).append(run)
        else:
            plain.append(run)
    doc["runs"] = probe_inside({"runs": plain, "read_cap_bytes": req.get("read_cap_bytes", 1 << 20)})
    cts = {int(c["vmid"]): c for c in req.get("containers", [])}
    doc["containers"] = []
    for vmid, runs in sorted(by_ct.items()):
        ct_doc, results = probe_container(cts.get(vmid, {"vmid": vmid}), runs, req, src)
        doc["containers"].append(ct_doc)
        doc["runs"].extend(results)
    if started is not None:
        doc.update(gpu_readings(started))
    elif gpu:
        doc.update(gpu_from_fd(int(req["gpu_fd"]), 12.0))
    doc["duration_s"] = time.time() - t0
    return doc


def main(req, src=""):
    """One-shot mode: one request, one document on stdout, exit."""
    sys.stdout.write(json.dumps(handle(req, src)))
    sys.stdout.flush()


class _GpuSampler(object):
    """Agent mode: nvidia-smi sampled by a background thread every `gpu_every_s` (compute
    apps every `gpu_apps_every_s`), so a tick returns the latest sample at once instead of
    waiting for nvidia-smi (the slowest part of a tick on a real 8-GPU node)."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()
        self.doc = None
        self.thread = None
        self.every_s, self.apps_every_s, self.smi = 1.0, 10.0, "nvidia-smi"
        self.apps_at = 0.0

    def _sample(self):
        want_apps = time.time() - self.apps_at >= self.apps_every_s
        started = start_gpu_queries({"nvidia_smi": self.smi, "gpu_apps": want_apps})
        doc = gpu_readings(started)
        doc["gpu_sampled_s"] = time.time()
        with self.lock:
            if want_apps and "apps" in doc:
                self.apps_at = doc["gpu_sampled_s"]
            elif self.doc is not None and "apps" in self.doc and doc["gpu"]["rc"] == 0:
                doc["apps"], doc["app_pids"] = self.doc["apps"], self.doc.get("app_pids", {})
            self.doc = doc

    def _loop(self):
        while True:
            time.sleep(self.every_s)
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - keep sampling; the next tick shows the error
                pass

    def latest(self, req):
        import threading
        self.every_s = max(0.2, float(req.get("gpu_every_s", 1.0)))
        self.apps_every_s = float(req.get("gpu_apps_every_s", 10.0))
        self.smi = req.get("nvidia_smi", "nvidia-smi")
        if self.doc is None:
            self._sample()
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop)
            self.thread.daemon = True
            self.thread.start()
        with self.lock:
            return dict(self.doc)


_SAMPLER = _GpuSampler()


def serve(src=""):
    """Agent mode: JSON request lines on stdin, one JSON document line each on stdout, until
    stdin closes (the controller went away). Holds no state a restart would lose: every
    cursor arrives with each request."""
    inp = sys.stdin.buffer
    while True:
        line = inp.readline()
        if not line:
            return
        try:
            doc = handle(json.loads(line.decode("utf-8")), src)
        except Exception as exc:  # noqa: BLE001 - answer, never die mid-conversation
            doc = {"error": "probe agent: %s: %s" % (type(exc).__name__, exc)}
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


if __name__ == "__main__" and "_SRC" not in globals():  # `python3 remote.py < request.json`
    main(json.load(sys.stdin), open(__file__).read())
