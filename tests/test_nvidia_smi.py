"""nvidia-smi CSV parsers: columns by position, unreadable fields -> None for that field only.

Rows follow FIELD-NOTES (driver 580 on an H200, csv,noheader,nounits) for the exact query
dfctl sends; real captures dropped into tests/data/nvidia-smi/ are parsed too.
"""

from pathlib import Path

from controller.probe import APPS_QUERY, GPU_QUERY
from controller.probe.nvidia_smi import GPU_QUERY_FIELDS, gpu_error_from, parse_compute_apps_csv, parse_gpu_csv

DATA = Path(__file__).parent / "data" / "nvidia-smi"

BUSY = ("0, GPU-3bc0a1f2-9d7e-4c1b-8a55-0e6f3b2d9c10, NVIDIA H200, 100, 143771, 143771, 53, "
        "689.46, 0x0000000000000004")
IDLE = "1, GPU-77aa0000-1111-2222-3333-444455556666, NVIDIA H200, 0, 1, 143771, 31, 74.12, 0x0000000000000001"


def test_the_query_sent_is_the_query_parsed():
    assert GPU_QUERY.split(",") == list(GPU_QUERY_FIELDS)
    assert APPS_QUERY == "pid,gpu_uuid,used_memory"


def test_busy_and_idle_rows():
    gpus = parse_gpu_csv(BUSY + "\n" + IDLE + "\n")
    assert [g.index for g in gpus] == [0, 1]
    g = gpus[0]
    assert g.uuid.startswith("GPU-3bc0") and g.name == "NVIDIA H200"
    assert (g.util_pct, g.mem_used_mib, g.mem_total_mib, g.temp_c, g.power_w) == (100, 143771, 143771, 53, 689.46)
    assert g.clocks_event_reasons == "0x0000000000000004"
    assert gpus[1].util_pct == 0 and gpus[1].power_w == 74.12


def test_unreadable_fields_are_none_for_that_field_only():
    text = ("0, GPU-a, NVIDIA H200, [N/A], 1024, 143771, [Not Supported], [N/A], [N/A]\n"
            "1, GPU-b, NVIDIA H200, 97, garbage, 143771, 60, 12abc, zz\n"
            "2, [N/A], [N/A], 5\n")
    a, b, c = parse_gpu_csv(text)
    assert a.util_pct is None and a.temp_c is None and a.power_w is None and a.clocks_event_reasons is None
    assert a.mem_used_mib == 1024 and a.mem_total_mib == 143771
    assert b.util_pct == 97 and b.mem_used_mib is None and b.power_w is None and b.temp_c == 60
    assert b.clocks_event_reasons is None
    # a row of 4 columns for a 9-field query: which ones went missing is unknowable, so
    # the GPU stays (visible, index 2) with no readings rather than with shifted ones
    assert c.index == 2 and c.uuid is None and c.name is None and c.util_pct is None and c.mem_total_mib is None


def test_a_row_with_more_columns_than_the_query_is_not_read_shifted():
    # issue 12.7: an unquoted "12,34" in memory.used made GPU 2 read 143771 degC
    text = (BUSY + "\n"
            "2, GPU-cc00aa11-2222-3333-4444-555566667777, NVIDIA H200, 100, 12,34, 143771, 53, 689.46, 0x0\n")
    busy, shifted = parse_gpu_csv(text)
    assert busy.temp_c == 53
    assert shifted.index == 2 and shifted.uuid.startswith("GPU-cc00")
    assert (shifted.util_pct, shifted.mem_used_mib, shifted.mem_total_mib, shifted.temp_c, shifted.power_w) == \
        (None, None, None, None, None)


def test_compute_app_rows_with_shifted_columns_are_dropped():
    procs = parse_compute_apps_csv("421, GPU-a, 1002 MiB\n422, GPU-b, 1,002 MiB\n")
    assert [p.pid for p in procs] == [421]


def test_driver_failure_text_is_kept_for_the_finding():
    # nvidia-smi prints this on stdout and exits 9 when the driver is gone (issue 12.6)
    msg = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
           "latest NVIDIA driver is installed and running.")
    err = gpu_error_from(9, msg + "\n", "")
    assert err.startswith("nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate")


def test_non_gpu_lines_are_skipped_and_units_tolerated():
    text = ("WARNING: infoROM is corrupted at gpu 0000:41:00.0\n"
            "index, uuid, name, utilization.gpu [%]\n"
            '3, GPU-c, "NVIDIA H200, 141GB", 40 %, 100 MiB, 143771 MiB, 44 C, 300.5 W, 0x0\n')
    (g,) = parse_gpu_csv(text)
    assert g.index == 3 and g.name == "NVIDIA H200, 141GB"
    assert (g.util_pct, g.mem_used_mib, g.temp_c, g.power_w) == (40, 100, 44, 300.5)


def test_compute_apps():
    text = ("421, GPU-3bc0a1f2-9d7e-4c1b-8a55-0e6f3b2d9c10, 1002\n"
            "9000, GPU-77aa, [N/A]\n"
            "No running processes found\n"
            "77, GPU-x, 512 MiB\n")
    procs = parse_compute_apps_csv(text)
    assert [(p.pid, p.used_mib) for p in procs] == [(421, 1002), (9000, None), (77, 512)]
    assert procs[0].gpu_uuid.startswith("GPU-3bc0") and procs[0].vmid is None


def test_errors_in_words():
    assert gpu_error_from(0, "x", "") is None
    assert "not found" in gpu_error_from(127, "", "No such file")
    assert "is not a valid field" in gpu_error_from(2, "", 'Field "x" is not a valid field to query.\n')


def _capture(name: str) -> tuple[str, int]:
    return (DATA / f"{name}.out").read_text(), int((DATA / f"{name}.rc").read_text())


def test_real_h200_captures():
    """Real outputs (2x H200, driver 580.159.04) in tests/data/nvidia-smi/ (see its README)."""
    for phase in ("idle", "busy"):
        text, rc = _capture(f"{phase}-query-gpu-noheader-nounits")
        gpus = parse_gpu_csv(text)
        assert rc == 0 and [g.index for g in gpus] == [0, 1]
        assert all(g.uuid.startswith("GPU-") and g.name == "NVIDIA H200" for g in gpus)
        assert all(g.mem_total_mib == 143771 and g.temp_c and g.power_w for g in gpus)
        assert all(g.clocks_event_reasons.startswith("0x") for g in gpus)
        # the same query with header and units parses to the same numbers
        with_units = parse_gpu_csv(_capture(f"{phase}-query-gpu-csv")[0])
        assert [(g.index, g.mem_total_mib) for g in with_units] == [(g.index, g.mem_total_mib) for g in gpus]
        assert all(u.util_pct is not None and u.mem_used_mib is not None for u in with_units)
    busy = parse_gpu_csv(_capture("busy-query-gpu-noheader-nounits")[0])
    assert busy[0].util_pct == 100 and busy[0].clocks_event_reasons.endswith("4")
    idle = parse_gpu_csv(_capture("idle-query-gpu-noheader-nounits")[0])
    assert all(g.util_pct == 0 and g.clocks_event_reasons.endswith("1") for g in idle)
    apps = parse_compute_apps_csv(_capture("busy-compute-apps")[0])
    assert len(apps) == 3 and all(a.pid > 0 and a.gpu_uuid.startswith("GPU-") and a.used_mib for a in apps)
    assert [(a.pid, a.used_mib) for a in parse_compute_apps_csv(_capture("busy-compute-apps-header")[0])] == \
        [(a.pid, a.used_mib) for a in apps]
    text, rc = _capture("idle-compute-apps")
    assert rc == 0 and parse_compute_apps_csv(text) == []
    text, rc = _capture("unknown-field")
    assert rc == 2 and parse_gpu_csv(text) == []
    assert 'not_a_field" is not a valid field' in gpu_error_from(rc, text, "")
