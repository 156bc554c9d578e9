"""nvidia-smi answering badly under a running watch (rig stand-in, `set_nvidia_smi_raw`):
`[N/A]`, `[Not Supported]`, a missing GPU, truncated rows, garbage, numbers that are not
readings (1e9999), and nvidia-smi failing outright. Each unreadable field or GPU is n/a
(None / JSON null) on its own; the rest of the GPU table, the run and its log carry on,
and `dfctl watch --once --json` stays strict JSON (no NaN/Infinity)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.store.runstore import RunStore
from controller.watch import Watch
from tests.reliability.test_faults_watch import APPENDER
from tests.test_watch import tick_until
from tests.test_watch_rig import ct_record, launch_in_ct, stop_ct_run

pytestmark = pytest.mark.rig
ROOT = Path(__file__).resolve().parents[2]

RAW = ("0, GPU-aaaa, NVIDIA H200, 97, 70000, 143771, 65, 650.12, 0x0000000000000000\n"
       "1, GPU-bbbb, NVIDIA H200, [N/A], [N/A], 143771, [Not Supported], [N/A], [N/A]\n"
       "WARNING: infoROM is corrupted at gpu 0000:4E:00.0 \x01\x02\n"
       "3, GPU-dddd, NVIDIA H200, 5\n"
       "4, GPU-eeee, NVIDIA H200, abc, 1e9999, -5, hot, 1kW, ???\n"
       "\xff\xfe garbage ,,,,,\n")


def strict_json(text: str):
    def refuse(c):
        raise AssertionError(f"non-JSON constant {c} in --json output")
    return json.loads(text, parse_constant=refuse)


def test_garbage_nvidia_smi_fields_na_rest_works(rig, rig_host, tmp_path, _dfctl_home):
    host = rig_host
    name = f"rel-gpu-{os.getpid()}"
    run_dir = launch_in_ct(host, name, APPENDER)
    store = RunStore()
    store.add_run(ct_record(rig, host, name, connect_timeout_s=3.0))
    w = Watch(store.runs(), store, gpu=True, probe_timeout_s=8.0)
    try:
        host.set_nvidia_smi_raw(RAW)
        tick_until(w, lambda: w.states[0].state == "running" and {g.index for g in w.hosts[host.name].gpus} == {0, 1, 3, 4},
                   60, "the garbage table read")
        gpus = {g.index: g for g in w.hosts[host.name].gpus}
        assert gpus[0].util_pct == 97 and gpus[0].mem_used_mib == 70000 and gpus[0].power_w == 650.12
        assert gpus[1].util_pct is None and gpus[1].mem_used_mib is None and gpus[1].temp_c is None
        assert gpus[1].mem_total_mib == 143771 and gpus[1].uuid == "GPU-bbbb"
        # a short row cannot be mapped by position (issue 12.7): the GPU stays, every reading n/a
        assert gpus[3].uuid == "GPU-dddd" and gpus[3].util_pct is None and gpus[3].mem_total_mib is None
        assert gpus[4].util_pct is None and gpus[4].mem_used_mib is None and gpus[4].temp_c is None
        assert gpus[4].power_w is None and gpus[4].clocks_event_reasons is None
        n = w.states[0].log.offset_bytes
        tick_until(w, lambda: w.states[0].log.offset_bytes > n, 30, "the log still read")
        # the CLI's JSON with this table: strict JSON, nulls where unreadable
        p = subprocess.run([sys.executable, "-m", "controller", "watch", w.states[0].run_id, "--once", "--json"],
                           cwd=ROOT, env={**os.environ, "DFCTL_HOME": str(_dfctl_home)}, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode in (0, 4, 5), p.stderr
        doc = strict_json(p.stdout)
        assert doc["runs"][0]["process"]["state"] == "running"
        # nvidia-smi failing outright: no GPUs, an error in words, the run still watched
        host.set_nvidia_smi_raw("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
                                exit_code=9)
        tick_until(w, lambda: w.hosts[host.name].gpu_error and not w.hosts[host.name].gpus, 60, "the failure seen")
        assert "9" in w.hosts[host.name].gpu_error and w.states[0].state == "running"
        n = w.states[0].log.offset_bytes
        tick_until(w, lambda: w.states[0].log.offset_bytes > n, 30, "the log still read")
    finally:
        w.close()
        host.reset_gpus()
        stop_ct_run(host, run_dir)
