#!/usr/bin/python3 -IS
"""STAND-IN for Proxmox VE's `pct` (pve-container, src/PVE/CLI/pct.pm), for the dfctl test rig.

Not the real tool: the real pct is a Perl program tied to a Proxmox cluster and cannot
run here. This one drives the same real LXC containers pct would (lxc-attach, lxc-info,
lxc-start, lxc-stop with this fake host's lxcpath) and copies pct's documented behaviour
(FIELD-NOTES "Proxmox pct"), including its quirks:

* Options are parsed anywhere on the line (Getopt::Long permute) until `--`; so
  `pct exec 200 ls -la` fails with `Unknown option: la` / `400 unable to parse option`.
* `pct exec <vmid> [--keep-env 0|1] -- CMD…`: checks the config exists, then that the CT
  runs (`container '<id>' not running!`), then `missing command`; sets
  PATH=/sbin:/bin:/usr/sbin:/usr/bin (as PVE::CLIHandler does for every pct call), drops
  SSL_CERT_FILE/SSL_CERT_DIR, and execs `lxc-attach -n <vmid> --keep-env|--clear-env --
  CMD…`, so the exit status is the command's (128+N when killed by signal N).
* `pct push <vmid> <file> <dest> [--perms --user --group]`: one regular file, no parent
  directories created, the file is created inside the CT's mount namespace. Errors in
  that step happen in pct's forked worker: pct prints `TASK ERROR: …` and still exits 0.
* `pct pull` mirrors push. `pct status` prints `status: running|stopped`. `pct list` is
  fixed-width (`%-10s %-10s %-12s %-20s`). `pct config` prints sorted `key: value` lines.
* Errors of pct itself (Perl `die`) go to stderr with exit 255.

Also: `pct start <vmid>`, `pct stop <vmid>`. Standard library only.

Backend "chroot" (rig-host.json; only where LXC cannot start containers): the same
commands over unshare/chroot containers (see tests/rig/chroot_containers.py): exec is
`nsenter -t <init> -m -u -i -p -r -w`, run as a child so a signal death still becomes
128+N, as lxc-attach reports it.
"""

import ctypes
import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time

PCT_PATH_ENV = "/sbin:/bin:/usr/sbin:/usr/bin"
PERL_SOURCE = "/usr/share/perl5/PVE/CLI/pct.pm"
CLONE_NEWNS = 0x00020000

USAGE = {
    "exec": "pct exec <vmid> [<extra-args>] [OPTIONS]",
    "push": "pct push <vmid> <file> <destination> [OPTIONS]",
    "pull": "pct pull <vmid> <path> <destination> [OPTIONS]",
    "status": "pct status <vmid> [OPTIONS]",
    "config": "pct config <vmid> [OPTIONS]",
    "list": "pct list",
    "start": "pct start <vmid> [OPTIONS]",
    "stop": "pct stop <vmid> [OPTIONS]",
}
OPTIONS = {
    "exec": {"keep-env": "bool"},
    "push": {"perms": "str", "user": "str", "group": "str"},
    "pull": {"perms": "str", "user": "str", "group": "str"},
    "status": {"verbose": "bool"},
    "config": {"current": "bool", "snapshot": "str"},
    "list": {},
    "start": {"skiplock": "bool", "debug": "bool"},
    "stop": {"skiplock": "bool", "overrule-shutdown": "bool"},
}
POSITIONAL = {"exec": ["vmid"], "push": ["vmid", "file", "destination"],
              "pull": ["vmid", "path", "destination"], "status": ["vmid"], "config": ["vmid"],
              "list": [], "start": ["vmid"], "stop": ["vmid"]}
EXTRA_ARGS = {"exec"}


class Die(Exception):
    """A Perl `die` in pct: message on stderr, exit 255."""


def die_at(message, line):
    """`die "msg"` without a newline: Perl appends the source location."""
    raise Die("%s at %s line %d.\n" % (message, PERL_SOURCE, line))


def host_config():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "rig-host.json")) as f:
        return json.load(f)


HOST = host_config()
BACKEND = HOST.get("backend", "lxc")
CGROUP_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "blkio", "freezer")


def parse_bool(name, value):
    table = {"": 1, "1": 1, "0": 0, "yes": 1, "no": 0, "on": 1, "off": 0, "true": 1, "false": 0}
    if value.lower() not in table:
        raise Die("400 Parameter verification failed.\n%s: type check ('boolean') failed - got '%s'\n"
                  % (name, value))
    return table[value.lower()]


def parse_command_line(command, args):
    """Getopt::Long with permute: options anywhere until `--`; -x and --x both accepted."""
    spec = OPTIONS[command]
    opts, positional = {}, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positional.extend(args[i + 1:])
            break
        if arg.startswith("-") and arg != "-":
            name, eq, value = arg.lstrip("-").partition("=")
            if name not in spec:
                sys.stderr.write("Unknown option: %s\n" % name)
                raise Die("400 unable to parse option\n%s\n" % USAGE[command])
            if spec[name] == "bool":
                if not eq:
                    nxt = args[i + 1] if i + 1 < len(args) else None
                    if nxt is not None and not nxt.startswith("-"):
                        value = nxt
                        i += 1
                    else:
                        value = ""
                opts[name] = parse_bool(name, value)
            else:
                if not eq:
                    if i + 1 >= len(args):
                        sys.stderr.write("Option %s requires an argument\n" % name)
                        raise Die("400 unable to parse option\n%s\n" % USAGE[command])
                    value = args[i + 1]
                    i += 1
                opts[name] = value
        else:
            positional.append(arg)
        i += 1
    names = POSITIONAL[command]
    if len(positional) < len(names):
        raise Die("400 not enough arguments\n%s\n" % USAGE[command])
    fixed = dict(zip(names, positional))
    extra = positional[len(names):]
    if extra and command not in EXTRA_ARGS:
        raise Die("400 too many arguments\n%s\n" % USAGE[command])
    if "vmid" in fixed:
        vmid = fixed["vmid"]
        if not vmid.isdigit() or not 100 <= int(vmid) <= 999999999:
            raise Die("400 Parameter verification failed.\nvmid: invalid format - "
                      "value does not look like a valid VM ID\n\n%s\n" % USAGE[command])
    return fixed, opts, extra


def conf_path(vmid):
    return os.path.join(HOST["pve_dir"], "nodes", HOST["node"], "lxc", "%s.conf" % vmid)


def load_config(vmid):
    path = conf_path(vmid)
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        raise Die("Configuration file 'nodes/%s/lxc/%s.conf' does not exist\n" % (HOST["node"], vmid)) from None
    conf = {}
    for line in text.splitlines():
        if line.startswith("["):
            break  # snapshot sections follow the current config
        key, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            conf[key.strip()] = value.strip()
    return conf


def lxc(tool, vmid, *args):
    return subprocess.run(["/usr/bin/" + tool, "-P", HOST["lxcpath"], "-n", str(vmid), *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)


def chroot_init_pid(vmid):
    try:
        with open(os.path.join(HOST["lxcpath"], str(vmid), "init.pid")) as f:
            pid = int(f.read())
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError):
        return None
    return None if state == "Z" else pid


def check_running(vmid):
    if BACKEND == "chroot":
        return chroot_init_pid(vmid) is not None
    return lxc("lxc-info", vmid, "-s", "-H").stdout.strip() == "RUNNING"


def find_lxc_pid(vmid):
    if BACKEND == "chroot":
        out = str(chroot_init_pid(vmid) or "")
    else:
        out = lxc("lxc-info", vmid, "-p", "-H").stdout.strip()
    if not out.isdigit():
        raise Die("unable to get PID for CT %s (not running?)\n" % vmid)
    return int(out)


def enter_mount_namespace(pid):
    if BACKEND == "chroot":
        os.chroot("/proc/%d/root" % pid)  # the CT's root, seen through its mount namespace
        os.chdir("/")
        return
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/proc/%d/ns/mnt" % pid, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNS) != 0:
        raise Die("failed to enter the container's mount namespace\n")
    os.close(fd)
    os.chdir("/")


def parse_perms(perms):
    if perms is None:
        return None
    if not perms.startswith("0"):
        perms = "0" + perms  # pct: "assume octal as default"
    try:
        if perms[:2].lower() == "0x":
            return int(perms[2:], 16)
        return int(perms, 8)
    except ValueError:
        raise Die("invalid mode: '%s'\n" % perms) from None


def create_file(path, perms, user, group):
    """pct's create_file(): explicit perms (umask ignored), owner by name or number."""
    uid = gid = None
    if user is not None:
        uid = int(user) if user.isdigit() else _lookup(pwd.getpwnam, user, "uid")
    if group is not None:
        gid = int(group) if group.isdigit() else _lookup(grp.getgrnam, group, "gid")
    mode = parse_perms(perms)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0)
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    except OSError:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as exc:
            raise Die("failed to create file: %s: %s\n" % (path, os.strerror(exc.errno))) from None
    if mode is not None:
        os.fchmod(fd, mode)
    if uid is not None or gid is not None:
        st = os.fstat(fd)
        os.fchown(fd, st.st_uid if uid is None else uid, st.st_gid if gid is None else gid)
    return os.fdopen(fd, "wb")


def _lookup(fn, name, what):
    try:
        entry = fn(name)
    except KeyError:
        raise Die("failed to get %s for: %s\n" % (what, name)) from None
    return entry[2]


def run_worker(work):
    """pct's fork_worker in CLI mode: the worker's error is printed, the exit code ignored."""
    try:
        work()
    except Die as exc:
        sys.stdout.write("TASK ERROR: %s\n" % str(exc).strip().replace("\n", " "))
    except OSError as exc:
        sys.stdout.write("TASK ERROR: %s\n" % exc)
    return 0


def cmd_exec(fixed, opts, extra):
    vmid = fixed["vmid"]
    keep_env = opts.get("keep-env", 1)
    load_config(vmid)
    if not check_running(vmid):
        raise Die("container '%s' not running!\n" % vmid)
    if not extra:
        die_at("missing command", 234)
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ.pop("SSL_CERT_DIR", None)
    if BACKEND == "chroot":
        return chroot_exec(vmid, keep_env, extra)
    argv = ["lxc-attach", "-P", HOST["lxcpath"], "-n", vmid,
            "--keep-env" if keep_env else "--clear-env", "--", *extra]
    sys.stdout.flush()
    os.execv("/usr/bin/lxc-attach", argv)


def cmd_push(fixed, opts, _extra):
    vmid, src, dest = fixed["vmid"], fixed["file"], fixed["destination"]
    if not check_running(vmid):
        raise Die("can only push files to a running CT\n")
    load_config(vmid)

    def work():
        pid = find_lxc_pid(vmid)
        try:
            srcfd = open(src, "rb")
        except OSError:
            raise Die("failed to open %s for reading\n" % src) from None
        enter_mount_namespace(pid)
        with srcfd, create_file(dest, opts.get("perms"), opts.get("user"), opts.get("group")) as out:
            shutil.copyfileobj(srcfd, out, 1 << 20)

    return run_worker(work)


def cmd_pull(fixed, opts, _extra):
    vmid, path, dest = fixed["vmid"], fixed["path"], fixed["destination"]
    if not check_running(vmid):
        die_at("can only pull files from a running VM", 497)

    def work():
        pid = find_lxc_pid(vmid)
        out = create_file(dest, opts.get("perms"), opts.get("user"), opts.get("group"))
        enter_mount_namespace(pid)
        try:
            srcfd = open(path, "rb")
        except OSError as exc:
            raise Die("failed to open %s: %s\n" % (path, os.strerror(exc.errno))) from None
        with srcfd, out:
            shutil.copyfileobj(srcfd, out, 1 << 20)

    return run_worker(work)


def cmd_status(fixed, opts, _extra):
    vmid = fixed["vmid"]
    conf = load_config(vmid)
    status = "running" if check_running(vmid) else "stopped"
    if opts.get("verbose"):
        info = {"name": conf.get("hostname", "CT%s" % vmid), "status": status, "vmid": vmid,
                "type": "lxc"}
        for key in sorted(info):
            sys.stdout.write("%s: %s\n" % (key, info[key]))
    else:
        sys.stdout.write("status: %s\n" % status)
    return 0


def cmd_list(_fixed, _opts, _extra):
    folder = os.path.dirname(conf_path(0))
    vmids = sorted(int(n[:-5]) for n in os.listdir(folder) if n.endswith(".conf") and n[:-5].isdigit())
    if not vmids:
        return 0
    fmt = "%-10s %-10s %-12s %-20s\n"
    sys.stdout.write(fmt % ("VMID", "Status", "Lock", "Name"))
    for vmid in vmids:
        conf = load_config(vmid)
        status = "running" if check_running(vmid) else "stopped"
        sys.stdout.write(fmt % (vmid, status, conf.get("lock", ""), conf.get("hostname", "")))
    return 0


def cmd_config(fixed, _opts, _extra):
    conf = load_config(fixed["vmid"])
    for key in sorted(conf):
        if key in ("digest", "lxc") or key.startswith("lxc."):
            continue
        sys.stdout.write("%s: %s\n" % (key, conf[key]))
    return 0


def chroot_config(vmid):
    with open(os.path.join(HOST["lxcpath"], str(vmid), "chroot.json")) as f:
        return json.load(f)


def join_ct_cgroup(cgroup, pid):
    for ctrl in CGROUP_CONTROLLERS:
        folder = os.path.join("/sys/fs/cgroup", ctrl, cgroup, "ns")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass  # a controller this machine lacks


def chroot_exec(vmid, keep_env, extra):
    pid = find_lxc_pid(vmid)
    join_ct_cgroup(chroot_config(vmid)["cgroup"], os.getpid())
    env = dict(os.environ) if keep_env else {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container": "lxc"}
    sys.stdout.flush()
    proc = subprocess.Popen(["/usr/bin/nsenter", "-t", str(pid), "-m", "-u", "-i", "-p", "-r", "-w",
                             "--", *extra], env=env)
    status = proc.wait()
    return 128 - status if status < 0 else status


def chroot_start(vmid):
    cfg = chroot_config(vmid)
    ct_dir = os.path.join(HOST["lxcpath"], str(vmid))
    root = os.path.join(ct_dir, "rootfs")
    lines = ["set -e", "R=%s" % root]
    for src, rel, ro in cfg["binds"]:
        target = os.path.join(root, rel)
        lines.append("mkdir -p %s && mount --bind %s %s" % (target, src, target))
        if ro:
            lines.append("mount -o remount,bind,ro %s" % target)
    lines += ["mount --rbind /dev $R/dev", "mount -t proc proc $R/proc",
              "mount --rbind /sys $R/sys", "hostname %s" % cfg["hostname"],
              "exec chroot $R /sbin/init"]
    with open(os.path.join(ct_dir, "console.log"), "ab") as log:
        proc = subprocess.Popen(["/usr/bin/unshare", "--mount", "--pid", "--uts", "--ipc", "--fork",
                                 "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    children_file = "/proc/%d/task/%d/children" % (proc.pid, proc.pid)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Die("startup for container '%s' failed\n" % vmid)
        try:
            with open(children_file) as f:
                kids = f.read().split()
            if kids and os.readlink("/proc/%s/root" % kids[0]) == root:
                with open("/proc/%s/comm" % kids[0]) as f:
                    if f.read().strip() == "init":
                        join_ct_cgroup(cfg["cgroup"], int(kids[0]))
                        with open(os.path.join(ct_dir, "init.pid"), "w") as f:
                            f.write(kids[0])
                        return 0
        except OSError:
            pass
        time.sleep(0.01)
    proc.kill()
    raise Die("startup for container '%s' failed\n" % vmid)


def chroot_stop(vmid):
    pid = chroot_init_pid(vmid)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while chroot_init_pid(vmid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
    try:
        os.unlink(os.path.join(HOST["lxcpath"], str(vmid), "init.pid"))
    except FileNotFoundError:
        pass
    return 0


def cmd_start(fixed, _opts, _extra):
    vmid = fixed["vmid"]
    load_config(vmid)
    if check_running(vmid):
        raise Die("CT %s already running\n" % vmid)
    if BACKEND == "chroot":
        return chroot_start(vmid)
    proc = lxc("lxc-start", vmid)
    if proc.returncode != 0:
        raise Die("startup for container '%s' failed\n" % vmid)
    return 0


def cmd_stop(fixed, _opts, _extra):
    vmid = fixed["vmid"]
    load_config(vmid)
    if not check_running(vmid):
        raise Die("CT %s not running\n" % vmid)
    if BACKEND == "chroot":
        return chroot_stop(vmid)
    lxc("lxc-stop", vmid, "-k")
    return 0


COMMANDS = {"exec": cmd_exec, "push": cmd_push, "pull": cmd_pull, "status": cmd_status,
            "list": cmd_list, "config": cmd_config, "start": cmd_start, "stop": cmd_stop}


def main(argv):
    os.environ["PATH"] = PCT_PATH_ENV
    if not argv or argv[0] not in COMMANDS:
        got = " ".join(["pct"] + argv[:1])
        sys.stderr.write("ERROR: unknown command '%s'\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n"
                         % got if argv else "ERROR: no command specified\n")
        for usage in USAGE.values():
            sys.stderr.write("       %s\n" % usage)
        return 255
    command = argv[0]
    try:
        fixed, opts, extra = parse_command_line(command, argv[1:])
        return COMMANDS[command](fixed, opts, extra)
    except Die as exc:
        sys.stdout.flush()
        sys.stderr.write(str(exc))
        return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
