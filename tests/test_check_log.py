"""`dfctl check-log`: the detectors over log files, through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import main

DATA = Path(__file__).parent / "data" / "logs"
SEED = DATA / "seed_dflash_oom.log"


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["check-log", *args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_seed_shaped_log_json(capsys):
    """Buckets table, wandb URL, 12.4K tok/s against a 21.5K baseline, OOM at the end."""
    code, out, err = run_cli(capsys, str(SEED), "--baseline-tok-s", "21500", "--json")
    assert code == 4
    doc = json.loads(out)  # exactly one document
    assert set(doc) == {"findings", "wandb", "throughput"}
    by_kind = {f["kind"]: f for f in doc["findings"]}
    assert set(by_kind) == {"oom", "crash", "regression", "recompile"}
    oom = by_kind["oom"]
    assert oom["summary"] == ("CUDA OOM on GPU 5: tried to allocate 2.10 GiB, 0.31 GiB free of 139.8 GiB "
                              "(torch.OutOfMemoryError)")
    assert oom["severity"] == "critical" and oom["line"] == 78
    assert oom["evidence"][-1].startswith("torch.OutOfMemoryError") and oom["hint"]
    assert set(oom) == {"kind", "severity", "line", "evidence", "hint", "summary"}
    assert by_kind["regression"]["summary"].endswith("% below the 21.5K baseline")
    assert doc["wandb"]["run_id"] == "khjugi7w"
    assert doc["wandb"]["url"] == "https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w"
    t = doc["throughput"]
    assert 12000 < t["tok_per_s"]["median"] < 12800 and 40 < t["deficit_pct"] < 45
    assert t["window"]["first_step"] == 50 and t["window"]["last_step"] == 400
    assert "dfctl: hint: oom:" in err  # hints go to stderr with --json


def test_seed_log_human_output(capsys):
    code, out, _ = run_cli(capsys, str(SEED), "--baseline-tok-s", "21500")
    assert code == 4
    first = [line for line in out.splitlines() if "CUDA OOM on GPU 5" in line][0]
    assert "CRITICAL" in first and "line 78" in first and "oom" in first
    assert "→ lower the batch" in out and "│ torch.OutOfMemoryError" in out
    assert "wandb: run khjugi7w (online)" in out
    assert "failure found" in out.splitlines()[-1]


def test_regression_only_exits_5(tmp_path, capsys):
    lines = SEED.read_text().splitlines()
    cut = lines.index("Exception in thread Thread-7 (drafter_loop):")
    log = tmp_path / "slow.log"
    log.write_text("\n".join(lines[:cut]) + "\n")
    code, out, _ = run_cli(capsys, str(log), "--baseline-tok-s", "21500", "--json")
    assert code == 5
    assert {f["kind"] for f in json.loads(out)["findings"]} == {"regression", "recompile"}
    # without a baseline there is nothing to regress against: warnings only -> healthy
    code, out, _ = run_cli(capsys, str(log), "--json")
    assert code == 0 and json.loads(out)["throughput"]["deficit_pct"] is None


def test_healthy_log(capsys):
    code, out, _ = run_cli(capsys, str(DATA / "healthy_bundled_trainer.log"), "--baseline-tok-s", "21500")
    assert code == 0
    assert "0 finding(s): healthy" in out
    assert "wandb: run q7m2x9ab (offline)" in out and "throughput: median 21." in out


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable"])
def test_unreadable_path_exits_2_naming_it(tmp_path, capsys, kind):
    path = tmp_path / "nope.log"
    if kind == "directory":
        path.mkdir()
    elif kind == "unreadable":
        path = Path("/proc/self/mem")  # exists, but read() fails with EIO
    code, out, err = run_cli(capsys, str(path))
    assert code == 2 and out == ""
    assert str(path) in err


def test_progress_pattern_and_bad_pattern(tmp_path, capsys):
    log = tmp_path / "other.log"
    log.write_text("".join(f"ep 1 it {i} thr={12.4 if i > 4 else 3.0}K l=2.5\n" for i in range(1, 30)))
    code, out, _ = run_cli(capsys, str(log), "--progress-pattern", r"it (?P<step>\d+) thr=(?P<tok_per_s>[\d.]+K)",
                           "--baseline-tok-s", "21500", "--json")
    doc = json.loads(out)
    assert code == 5 and doc["throughput"]["tok_per_s"]["median"] == pytest.approx(12400.0)
    code, out, err = run_cli(capsys, str(log), "--progress-pattern", "(?P<step>")
    assert code == 2 and "progress pattern" in err


def test_hostile_bytes(tmp_path, capsys):
    """3 MB without a newline, NULs, ANSI colour, CRLF and a lone CR before the OOM."""
    log = tmp_path / "hostile.log"
    with open(log, "wb") as fh:
        fh.write(b"\x00" * 1000 + b"junk" * (3 << 18) + b"\r\n")
        fh.write(b"\x1b[31mRuntimeError: CUDA error: out of memory\x1b[0m\r")
        fh.write(b"tail without newline \xff")
    code, out, _ = run_cli(capsys, str(log), "--json")
    doc = json.loads(out)
    assert code == 4
    (f,) = doc["findings"]
    assert f["evidence"] == ["RuntimeError: CUDA error: out of memory"]


def test_real_entry_point_subprocess():
    proc = subprocess.run([sys.executable, "-m", "controller", "check-log", str(DATA / "torchrun_nccl_timeout.log"),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    hang, death = json.loads(proc.stdout)["findings"]
    assert hang["kind"] == "hang" and hang["line"] == 6
    assert death["kind"] == "crash" and "local rank 0" in death["summary"] and "SIGABRT" in death["summary"]


def test_dash_reads_standard_input():
    """`dfctl check-log -`: a log pasted from an issue or a chat, through the real entry point."""
    pasted = ("> step=10 loss=2.31\n> [rank1]: Traceback (most recent call last):\n"
              '> [rank1]:   File "/w/train.py", line 9, in <module>\n> [rank1]:     main()\n'
              "> [rank1]: ValueError: batch has 0 tokens\n")
    proc = subprocess.run([sys.executable, "-m", "controller", "check-log", "-", "--json"], input=pasted,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    (f,) = json.loads(proc.stdout)["findings"]
    assert f["kind"] == "crash" and f["summary"].startswith("ValueError: batch has 0 tokens") and f["line"] == 5
