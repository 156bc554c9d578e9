#!/usr/bin/python3 -IS
"""STAND-IN for NVIDIA's `nvidia-smi`, used by the dfctl test rig on machines without a GPU.

Not the real tool. It follows the output of the real nvidia-smi (driver 580, measured on
an H200; see FIELD-NOTES "GPUs and nvidia-smi") for the invocations dfctl uses:

  nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits] [-i IDS]
  nvidia-smi --query-compute-apps=FIELDS --format=csv[,noheader][,nounits]
  nvidia-smi -L
  nvidia-smi            (a short summary table; not the real layout, do not parse it)

Columns come in query order. The header uses the driver's own names, not the query's
(`clocks.sm` prints as `clocks.current.sm [MHz]`), and keeps its `[unit]` even with
nounits. Unreadable values print `[N/A]` / `[Not Supported]`. An unknown field prints
`Field "x" is not a valid field to query.` and a blank line on *stdout* and exits 2 (as
the real tool does). The GPUs come from `gpus.json` next to this file (written by
tests/rig/gpus.py); a scenario may also ask for a driver failure or raw output.
Standard library only: it also runs inside the containers with the host's /usr/bin/python3.
"""

import json
import os
import sys
import time

# query name -> (header name, scenario key, unit or None, kind)
GPU_FIELDS = {
    "timestamp": ("timestamp", None, None, "timestamp"),
    "driver_version": ("driver_version", None, None, "driver"),
    "count": ("count", None, None, "count"),
    "index": ("index", "index", None, "int"),
    "name": ("name", "name", None, "str"),
    "gpu_name": ("name", "name", None, "str"),
    "uuid": ("uuid", "uuid", None, "str"),
    "gpu_uuid": ("uuid", "uuid", None, "str"),
    "pci.bus_id": ("pci.bus_id", "pci_bus_id", None, "str"),
    "gpu_bus_id": ("pci.bus_id", "pci_bus_id", None, "str"),
    "pstate": ("pstate", "pstate", None, "str"),
    "utilization.gpu": ("utilization.gpu [%]", "utilization_gpu_pct", "%", "int"),
    "utilization.memory": ("utilization.memory [%]", "utilization_memory_pct", "%", "int"),
    "memory.total": ("memory.total [MiB]", "memory_total_mib", "MiB", "int"),
    "memory.used": ("memory.used [MiB]", "memory_used_mib", "MiB", "int"),
    "memory.reserved": ("memory.reserved [MiB]", "memory_reserved_mib", "MiB", "int"),
    "memory.free": ("memory.free [MiB]", None, "MiB", "free"),
    "temperature.gpu": ("temperature.gpu", "temperature_c", None, "int"),
    "power.draw": ("power.draw [W]", "power_draw_w", "W", "watts"),
    "power.limit": ("power.limit [W]", "power_limit_w", "W", "watts"),
    "enforced.power.limit": ("enforced.power.limit [W]", "power_limit_w", "W", "watts"),
    "clocks.sm": ("clocks.current.sm [MHz]", "clocks_sm_mhz", "MHz", "int"),
    "clocks.current.sm": ("clocks.current.sm [MHz]", "clocks_sm_mhz", "MHz", "int"),
    "clocks.gr": ("clocks.current.graphics [MHz]", "clocks_sm_mhz", "MHz", "int"),
    "clocks.current.graphics": ("clocks.current.graphics [MHz]", "clocks_sm_mhz", "MHz", "int"),
    "clocks.mem": ("clocks.current.memory [MHz]", "clocks_mem_mhz", "MHz", "int"),
    "clocks.current.memory": ("clocks.current.memory [MHz]", "clocks_mem_mhz", "MHz", "int"),
    "clocks_event_reasons.active": ("clocks_event_reasons.active", "clocks_event_reasons", None, "mask"),
    "clocks_throttle_reasons.active": ("clocks_event_reasons.active", "clocks_event_reasons", None, "mask"),
    "fan.speed": ("fan.speed [%]", "fan_speed_pct", "%", "int"),
    "compute_mode": ("compute_mode", None, None, "const:Default"),
    "persistence_mode": ("persistence_mode", None, None, "const:Enabled"),
}

APP_FIELDS = {
    "timestamp": ("timestamp", None, None, "timestamp"),
    "gpu_name": ("gpu_name", "gpu.name", None, "str"),
    "gpu_bus_id": ("gpu_bus_id", "gpu.pci_bus_id", None, "str"),
    "gpu_uuid": ("gpu_uuid", "gpu.uuid", None, "str"),
    "pid": ("pid", "pid", None, "int"),
    "process_name": ("process_name", "process_name", None, "str"),
    "name": ("process_name", "process_name", None, "str"),
    "used_memory": ("used_gpu_memory [MiB]", "used_memory_mib", "MiB", "int"),
    "used_gpu_memory": ("used_gpu_memory [MiB]", "used_memory_mib", "MiB", "int"),
}


def load_scenario():
    here = os.path.dirname(os.path.realpath(__file__))
    with open(os.path.join(here, "gpus.json")) as f:
        return json.load(f)


def timestamp():
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + ".%03d" % int(now % 1 * 1000)


def lookup(record, key):
    for part in key.split("."):
        record = record[part]
    return record


def render(value, unit, kind, units):
    if isinstance(value, str) and kind not in ("str",):
        return value  # "[N/A]", "[Not Supported]" or a test's garbage, verbatim
    if kind == "watts":
        text = "%.2f" % float(value)
    elif kind == "mask":
        text = "0x%016x" % int(value)
    elif kind == "int":
        text = str(int(value))
    else:
        text = str(value)
    return "%s %s" % (text, unit) if unit and units else text


def cell(field, spec, record, scenario, gpu_count, units):
    _header, key, unit, kind = spec
    if kind == "timestamp":
        return timestamp()
    if kind == "driver":
        return scenario.get("driver_version", "580.95.05")
    if kind == "count":
        return str(gpu_count)
    if kind.startswith("const:"):
        return kind.split(":", 1)[1]
    if kind == "free":
        parts = [record.get(k) for k in ("memory_total_mib", "memory_used_mib", "memory_reserved_mib")]
        if any(isinstance(p, str) for p in parts):
            return "[N/A]"
        return render(int(parts[0]) - int(parts[1]) - int(parts[2]), unit, "int", units)
    return render(lookup(record, key), unit, kind, units)


def parse_fields(text, table):
    fields = [f.strip() for f in text.split(",") if f.strip()]
    for f in fields:
        if f not in table:
            sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % f)
            sys.exit(2)
    return fields


def print_csv(fields, table, rows, header, units, scenario, gpu_count):
    out = []
    if header:
        out.append(", ".join(table[f][0] for f in fields))
    for record in rows:
        out.append(", ".join(cell(f, table[f], record, scenario, gpu_count, units) for f in fields))
    if out:
        sys.stdout.write("\n".join(out) + "\n")


def parse_args(argv):
    opts = {"query_gpu": None, "query_apps": None, "format": None, "list": False, "ids": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        takes = {"--query-gpu": "query_gpu", "--query-compute-apps": "query_apps",
                 "--format": "format", "-i": "ids", "--id": "ids"}
        if name in takes:
            if not eq:
                i += 1
                if i >= len(argv):
                    sys.stdout.write("Option %s requires an argument.\n" % name)
                    sys.exit(2)
                value = argv[i]
            opts[takes[name]] = value
        elif arg in ("-L", "--list-gpus"):
            opts["list"] = True
        else:
            sys.stdout.write('Invalid combination of input arguments. Please run '
                             '\'nvidia-smi -h\' for help.\n\n')
            sys.exit(2)
        i += 1
    return opts


def summary_table(scenario, gpus):
    lines = ["STAND-IN nvidia-smi (dfctl test rig) -- not the real table layout",
             "NVIDIA-SMI %s    Driver Version: %s    CUDA Version: %s" % (
                 scenario.get("driver_version", "580.95.05"), scenario.get("driver_version", "580.95.05"),
                 scenario.get("cuda_version", "13.0"))]
    for g in gpus:
        lines.append("GPU %s  %s  %s%%  %s / %s MiB  %sC  %s W" % (
            g["index"], g["name"], g["utilization_gpu_pct"], g["memory_used_mib"],
            g["memory_total_mib"], g["temperature_c"], g["power_draw_w"]))
    return "\n".join(lines) + "\n"


def main(argv):
    scenario = load_scenario()
    failure = scenario.get("failure")
    if failure:
        sys.stdout.write(failure.get("stdout", ""))
        sys.stderr.write(failure.get("stderr", ""))
        return int(failure.get("exit_code", 9))
    opts = parse_args(argv)
    raw = scenario.get("raw")
    if raw:
        sys.stdout.write(raw.get("stdout", ""))
        return int(raw.get("exit_code", 0))
    gpus = scenario.get("gpus", [])
    if opts["ids"] is not None:
        wanted = {s.strip() for s in opts["ids"].split(",")}
        gpus = [g for g in gpus if str(g["index"]) in wanted or g["uuid"] in wanted]
        if not gpus:
            sys.stdout.write("No devices were found\n")
            return 6
    if opts["list"]:
        for g in gpus:
            sys.stdout.write("GPU %s: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]))
        return 0
    query = opts["query_gpu"] or opts["query_apps"]
    if query is None:
        sys.stdout.write(summary_table(scenario, gpus))
        return 0
    fmt = [f.strip() for f in (opts["format"] or "").split(",") if f.strip()]
    if "csv" not in fmt:
        sys.stdout.write('"--format=" option must be specified with csv when querying.\n\n')
        return 2
    header = "noheader" not in fmt
    units = "nounits" not in fmt
    if opts["query_gpu"] is not None:
        fields = parse_fields(opts["query_gpu"], GPU_FIELDS)
        print_csv(fields, GPU_FIELDS, gpus, header, units, scenario, len(gpus))
    else:
        fields = parse_fields(opts["query_apps"], APP_FIELDS)
        rows = []
        for g in gpus:
            for app in g.get("apps", []):
                rows.append(dict(app, gpu=g))
        print_csv(fields, APP_FIELDS, rows, header, units, scenario, len(gpus))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
