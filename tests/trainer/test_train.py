"""The trainer end to end on CPU: the output contract, learning, SIGTERM, replicas, torchrun
with gloo, eager memory, OOM and bad-input exits (resume: test_resume_exact.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer.conftest import ROOT, run_in_process, trainer_cmd
from trainer import step_profile, train
from trainer.config import get_preset
from trainer.data import ArrowDataset, make_host_batch
from trainer.model import Drafter, load_target
from trainer.pipeline import run_target
from trainer.replicas import DrafterReplicas

torch.set_num_threads(1)

PROGRESS = re.compile(
    r"\[progress\] step=(\d+) loss=(\d+\.\d{4}) acc=(\d\.\d{4}) tau=(\d+\.\d{3}) accept_len=(\d+\.\d{3}) "
    r"tok_per_s=(\d+\.\d) "
    r"samples_per_s=(\d+\.\d{2}) step_time_s=(\d+\.\d{3}) data_wait_s=(\d+\.\d{3}) mem_alloc_gib=(\d+\.\d{2}) "
    r"mem_peak_gib=(\d+\.\d{2}) lr=(\d\.\de[-+]\d\d)$")
KEYS = {"step", "loss", "acc", "tau", "accept_len", "tok_per_s", "samples_per_s", "step_time_s", "data_wait_s", "mem_alloc_gib",
        "mem_peak_gib", "lr", "time_s", "acc_pos"}


def test_tiny_cli_trains_and_prints_the_contract(tmp_path, trainer_env):
    """50 steps of the tiny config from a fresh synthetic dataset: loss falls by >= 1.0 nat and
    tau rises by >= 0.3 between the first and last log interval, accept_len (>= 1: the bonus
    token) by as much; every progress line has the documented shape; metrics.jsonl mirrors it;
    milestones come in order; wandb offline files exist; the completed run (--checkpoint-every
    0, the default) leaves its final checkpoint."""
    env = dict(trainer_env, WANDB_MODE="offline")
    data, run_dir = tmp_path / "data", tmp_path / "run"
    proc = subprocess.run(trainer_cmd("--config", "tiny", "--data", str(data), "--synthetic-samples", "800",
                                      "--run-dir", str(run_dir), "--steps", "50", "--log-every", "5"),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[progress]")]
    assert len(progress) == 10 and all(PROGRESS.match(p) for p in progress), progress[:2]
    first, last = (PROGRESS.match(p) for p in (progress[0], progress[-1]))
    assert float(first[2]) - float(last[2]) >= 1.0, (first[0], last[0])
    assert float(last[4]) - float(first[4]) >= 0.3, (first[0], last[0])
    assert float(first[5]) >= 1.0 and float(last[5]) - float(first[5]) >= 0.3, (first[0], last[0])
    assert float(last[5]) >= float(last[4]) + 1.0 - 1e-3       # a per-block prefix + 1 >= the marginal product
    assert "  800 samples loaded (Arrow-backed, lazy access)" in lines
    assert any(re.fullmatch(r"Batches per epoch: \d+ \(min=\d+ max=\d+ avg=\d+\.\d\)", line) for line in lines)
    assert any(re.fullmatch(r"  \d+ samples filtered \(< 16 supervised tokens = 2 x block_size\), \d+ kept", line)
               for line in lines)
    order = [line.split()[1] for line in lines if line.startswith("[milestone]")]
    assert order == ["dataset_loaded", "target_loaded", "first_step", "checkpoint_saved"]
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "step-00000050.pt"
    assert "[milestone] dataset_loaded samples=800" in lines
    assert lines.index("[milestone] first_step") < lines.index(progress[0])
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 10 and all(set(r) == KEYS for r in records)
    assert [r["step"] for r in records] == list(range(5, 51, 5))
    assert records[-1]["loss"] == pytest.approx(float(last[2]), abs=1e-4)
    assert len(records[-1]["acc_pos"]) == 7 and records[-1]["acc_pos"][0] >= records[-1]["acc_pos"][-1]
    assert records[0]["time_s"] <= records[-1]["time_s"] and records[-1]["tok_per_s"] > 0
    assert list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def test_sigterm_saves_a_checkpoint_and_exits_143(tiny_data, tmp_path, trainer_env):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(trainer_cmd("--config", "tiny", "--data", str(tiny_data), "--run-dir", str(run_dir),
                                        "--steps", "100000", "--log-every", "1"),
                            cwd=ROOT, env=trainer_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 180
        for line in proc.stdout:                       # wait on the event: the first progress line
            seen.append(line)
            if line.startswith("[progress]"):
                break
            assert time.monotonic() < deadline, "".join(seen)
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, rest[-2000:]
    saved = re.search(r"\[milestone\] checkpoint_saved step=(\d+) path=(\S+)", rest)
    assert saved and Path(saved[2]).exists(), rest[-2000:]
    assert (run_dir / "checkpoints/latest").read_text().strip() == Path(saved[2]).name


def _batch_parts(cfg, ds, rows):
    dc = cfg.drafter
    return make_host_batch(ds, np.array(rows), seq=0, epoch=0, seed=0, block_size=dc.block_size,
                           max_anchors=dc.max_anchors, max_length=cfg.train.max_length,
                           mask_token_id=cfg.target.vocab_size - 1)


def _replicas(cfg, target, n):
    drafters = []
    for _ in range(n):
        d = Drafter(cfg.target, cfg.drafter)
        d.init_weights(1)
        d.share_target_weights(target.embed_weight, target.lm_head_weight)
        drafters.append(d.train())
    return DrafterReplicas(drafters, [torch.device("cpu")] * n, lr=1e-3, weight_decay=0.0, grad_clip=1e9,
                           total_steps=10, warmup_frac=0.0, min_lr_frac=1.0, gamma=cfg.drafter.loss_gamma,
                           chunk_rows=64, use_flex=False, autocast_dtype=None)


def _device_batch(target, hb):
    host = {"input_ids": torch.from_numpy(hb.input_ids), "block_ids": torch.from_numpy(hb.block_ids),
            "anchors": torch.from_numpy(hb.anchors), "labels": torch.from_numpy(hb.labels)}
    return run_target(target, host, hb, torch.device("cpu"), torch.device("cpu"), None)


def test_two_replicas_step_equals_one_step_on_the_combined_batch(tiny_data):
    cfg = get_preset("tiny")
    ds = ArrowDataset(tiny_data)
    target = load_target(cfg.target, cfg.drafter.target_layers, path=None, device=torch.device("cpu"),
                         dtype=torch.float32, seed=0)
    rows_a, rows_b = [1, 5, 9], [20, 33]                       # different sizes and padded lengths
    two = _replicas(cfg, target, 2)
    m2 = two.step([_device_batch(target, _batch_parts(cfg, ds, rows_a)),
                   _device_batch(target, _batch_parts(cfg, ds, rows_b))])
    one = _replicas(cfg, target, 1)
    m1 = one.step([_device_batch(target, _batch_parts(cfg, ds, rows_a + rows_b))])
    assert torch.allclose(m2, m1, rtol=1e-5)                   # loss sum, weight sum, per-slot hits/counts
    for (name, p2), (_, p1) in zip(two.master.trainable_parameters(), one.master.trainable_parameters()):
        assert torch.allclose(p2.grad, p1.grad, rtol=1e-4, atol=1e-7), name
        # the same update; Adam's first step is ~lr*sign(grad), so rounding-level gradients
        # (|g| ~ 1e-9) may flip sign: compare where the gradient is well above rounding
        big = p1.grad.abs() > 1e-5 * p1.grad.abs().max()
        assert big.float().mean() > 0.5 and torch.allclose(p2[big], p1[big], atol=1e-6), name
    for (_, a), (_, b) in zip(two.drafters[0].trainable_parameters(), two.drafters[1].trainable_parameters()):
        assert torch.equal(a, b)                                # replicas in sync after the step


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_eager_memory_does_not_grow_with_distinct_batch_shapes(tiny_data):
    """The seed's OOM: a per-shape buffer cache in eager mode. Here eager steps keep no
    per-shape state: after warm-up at the largest shapes, 24 more distinct shapes add
    (almost) nothing to the resident set."""
    cfg = get_preset("tiny")
    ds = ArrowDataset(tiny_data)
    target = load_target(cfg.target, cfg.drafter.target_layers, path=None, device=torch.device("cpu"),
                         dtype=torch.float32, seed=0)
    reps = _replicas(cfg, target, 1)
    order = np.argsort(ds.lengths)[::-1]
    longest = [int(r) for r in order[:12]]
    for n in (12, 8, 4):
        reps.step([_device_batch(target, _batch_parts(cfg, ds, longest[:n]))])
    base = _rss()
    shapes = set()
    rng = np.random.default_rng(0)
    for _ in range(24):
        rows = rng.choice(len(ds), size=int(rng.integers(1, 12)), replace=False).tolist()
        db = _device_batch(target, _batch_parts(cfg, ds, rows))
        shapes.add((tuple(db.features.shape), tuple(db.block_ids.shape)))
        reps.step([db])
    assert len(shapes) >= 15
    assert reps._buffers == [{}]                                 # no persistent buffers in eager mode
    assert _rss() - base < 24 * 2 ** 20, (_rss() - base) / 2 ** 20


def test_torchrun_two_gloo_processes_agree_with_two_in_process_replicas(tiny_data, tmp_path, trainer_env):
    common = ["--config", "tiny", "--data", str(tiny_data), "--steps", "6", "--log-every", "1", "--device", "cpu",
              "--prefetch-workers", "1"]
    dist = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "trainer", *common, "--run-dir", str(tmp_path / "dist")],
                          cwd=ROOT, env=trainer_env, capture_output=True, text=True, timeout=400)
    assert dist.returncode == 0, (dist.stdout + dist.stderr)[-3000:]
    assert "params_in_sync=true" in dist.stdout
    # the same run as two replicas in this process (one intra-op thread, as the workers have)
    assert run_in_process([*common, "--run-dir", str(tmp_path / "local"), "--drafter-devices", "0,1"]).exit_code == 0
    d = [json.loads(x) for x in (tmp_path / "dist/metrics.jsonl").read_text().splitlines()]
    s = [json.loads(x) for x in (tmp_path / "local/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in d] == [r["step"] for r in s] == list(range(1, 7))
    np.testing.assert_allclose([r["loss"] for r in d], [r["loss"] for r in s], rtol=1e-5)
    np.testing.assert_allclose([r["acc"] for r in d], [r["acc"] for r in s], rtol=1e-5)
    assert d[-1]["loss"] < d[0]["loss"]


def test_cuda_oom_is_reported_and_exits_1(monkeypatch, capsys):
    """No GPU here: the real torch.OutOfMemoryError type is raised from inside the run (a
    stand-in for the allocator failing) to check that it is printed, not swallowed, and exits 1."""
    def boom(args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB")

    monkeypatch.setattr(train, "run", boom)
    code = train.main(["--data", "x", "--run-dir", "y"])
    err = capsys.readouterr().err
    assert code == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB" in err


def test_bad_input_exits_2_naming_what(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert train.main(["--data", str(tmp_path / "missing"), "--run-dir", str(tmp_path / "r")]) == 2
    assert f"dataset {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    assert train.main(["--config", "nope", "--data", "x", "--run-dir", str(tmp_path / "r")]) == 2
    assert "unknown --config 'nope'" in capsys.readouterr().err
    assert train.main(["--config", "qwen36-27b-dflash", "--data", "x", "--run-dir", str(tmp_path / "r")]) == 2
    assert "needs --target-model" in capsys.readouterr().err


def test_eval_metrics_come_from_held_out_samples(tiny_data, tmp_path):
    """--eval-fraction holds samples out; eval keys join the progress record of the steps
    --eval-every names, and differ from the training numbers of the same step (another set)."""
    result = run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "r"),
                             "--steps", "12", "--log-every", "3", "--eval-fraction", "0.1", "--eval-every", "6",
                             "--eval-batches", "2", "--device", "cpu", "--sequential"])
    assert result.exit_code == 0
    with_eval = [h for h in result.history if "eval_loss" in h]
    assert [h["step"] for h in with_eval] == [6, 12]
    for h in with_eval:
        assert h["eval_loss"] != h["loss"] and h["eval_accept_len"] >= 1.0 and 0 <= h["eval_acc"] <= 1
        # decoded the serving way from 4 held-out prompts' ends (default --eval-decode-prompts)
        assert 1.0 <= h["eval_accept_len_decode"] <= 8.0
    assert with_eval[1]["eval_loss"] < with_eval[0]["eval_loss"]          # the drafter learns what generalises
    records = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert {"eval_loss", "eval_acc", "eval_tau", "eval_accept_len", "eval_accept_len_decode"} <= set(records[1])
    assert "eval_loss" not in records[0]


def test_eval_every_must_be_a_multiple_of_log_every(tiny_data, tmp_path, capsys):
    code = train.main(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "r"),
                       "--eval-fraction", "0.1", "--eval-every", "7", "--log-every", "5", "--device", "cpu"])
    assert code == 2 and "--eval-every 7" in capsys.readouterr().err


def test_target_layers_follow_a_deeper_target_and_are_validated(tmp_path):
    """A 36-layer Qwen3 config with --config tiny-shaped weights is not run here; the config
    step alone: the reference rule picks 1,9,17,25,33, and a layer past the target is refused."""
    from trainer.config import PRESETS, ConfigError, with_overrides
    from trainer.model import hf_config_to_target

    qwen3_8b = {"vocab_size": 151936, "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
                "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000}}
    cfg = with_overrides(PRESETS["bench-1b"], target=hf_config_to_target(qwen3_8b))
    assert cfg.drafter.target_layers == (1, 9, 17, 25, 33) and cfg.drafter.rope_theta == 1e6
    with pytest.raises(ConfigError, match="target_layers"):
        with_overrides(PRESETS["bench-1b"], target=hf_config_to_target(qwen3_8b), target_layers=(1, 36))


def test_mask_token_id_comes_from_the_flag_else_the_tokenizer(tmp_path):
    """tokenizer_config.json as transformers writes it: <|MASK|> added at 151669 (Qwen3's
    first unused id). No tokenizer says nothing (the preset's or vocab-1 then)."""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {
        "151643": {"content": "<|endoftext|>", "special": True}, "151669": {"content": "<|MASK|>", "special": True}}}))
    assert train.tokenizer_mask_id(tmp_path) == 151669
    other = tmp_path / "o"
    other.mkdir()
    (other / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 7, "content": "[M]"}]}))
    (other / "tokenizer_config.json").write_text(json.dumps({"mask_token": "[M]"}))
    assert train.tokenizer_mask_id(other) == 7
    assert train.tokenizer_mask_id(tmp_path / "nothing") is None


def test_profile_steps_traces_exactly_the_window_and_its_summary_reads_streams(tiny_data, tmp_path, capsys):
    """--profile-steps 3:4 writes a trace holding those two steps' annotations (and no
    other step's) and a kernel table; a bad window is refused naming the flag."""
    result = run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(tmp_path / "r"),
                             "--steps", "6", "--log-every", "3", "--device", "cpu", "--sequential",
                             "--profile-steps", "3:4"])
    assert result.exit_code == 0
    trace = tmp_path / "r" / "profile" / "trace-steps-3-4.json.gz"
    import gzip

    events = json.loads(gzip.open(trace, "rt").read())["traceEvents"]
    steps = sorted({e["name"] for e in events if str(e.get("name", "")).startswith("dfctl_step_")})
    assert steps == ["dfctl_step_3", "dfctl_step_4"]
    assert "Self CPU" in (tmp_path / "r" / "profile" / "kernels-steps-3-4.txt").read_text()
    assert step_profile.streams_summary(trace).steps == 2
    with pytest.raises(SystemExit) as exc:
        train.parse_args(["--data", "x", "--run-dir", "y", "--profile-steps", "5:2"])
    assert exc.value.code == 2 and "--profile-steps '5:2'" in capsys.readouterr().err


def test_streams_summary_counts_overlap_and_each_streams_busy_time(tmp_path):
    """The kernel events of a trace as Kineto writes them (ph X, cat kernel, args.stream):
    two streams that overlap for 30 us, one kernel run twice."""
    import gzip

    kernels = [("gemm", 7, 0, 100), ("gemm", 7, 150, 50), ("ce", 13, 70, 60), ("ce", 13, 300, 10)]
    events = [{"ph": "X", "cat": "kernel", "name": n, "ts": t, "dur": d, "args": {"stream": s, "device": 0}}
              for n, s, t, d in kernels]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 400, "args": {}})
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    s = step_profile.streams_summary(path)
    assert s.per_stream_us == {7: 150.0, 13: 70.0}
    assert s.busy_us == 100 + 50 + 10 + 30 - 0          # [0,130) [150,200) [300,310)
    assert s.overlap_us == 30.0                          # [70,100)
    assert s.window_us == 310.0
    assert s.top_kernels[7] == [("gemm", 150.0)]
