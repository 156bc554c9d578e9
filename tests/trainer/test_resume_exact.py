"""Issue 25's exact resume, on CPU with the tiny preset: a run stopped at step k -- by
--stop-after, or by kill -9 after a checkpoint -- and resumed with --resume (the same run
dir) or --resume-from (a new run dir) continues at the same step and data position, and its
loss curve equals an uninterrupted run's step for step, bitwise (the pipeline reorders
batches, so a run is a function of (seed, step): trainer/pipeline.py). The final weights and
optimizer state are bitwise equal too; --resume-from takes a run dir (its newest complete
checkpoint) or a checkpoint file and writes only into its own run dir. Then the refusals:
exit 2, one line naming the path and the key."""

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from tests.trainer.conftest import ROOT, run_in_process, trainer_cmd
from trainer import checkpoint, train
from trainer.config import ConfigError

torch.set_num_threads(1)        # the subprocess runs with OMP_NUM_THREADS=1: the same reductions
STEPS = 10


def _common(data: Path) -> list[str]:
    return ["--config", "tiny", "--data", str(data), "--log-every", "1", "--device", "cpu",
            "--prefetch-workers", "2", "--steps", str(STEPS)]


def _run(argv: list[str]) -> train.RunResult:
    result = run_in_process(argv)
    assert result.exit_code == 0
    return result


def _curve(run_dir: Path) -> dict[int, float]:
    """step -> loss from metrics.jsonl (a step logged twice -- before a kill and again after
    the resume -- must have the same loss both times)."""
    out: dict[int, float] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert out.setdefault(rec["step"], rec["loss"]) == rec["loss"], rec["step"]
    return out


def _final(run_dir: Path) -> dict:
    return checkpoint.load(checkpoint.newest_complete(run_dir))


def _assert_same_state(a: dict, b: dict) -> None:
    assert (a["step"], a["next_pos"]) == (b["step"], b["next_pos"]) == (STEPS, STEPS)
    assert a["drafter"].keys() == b["drafter"].keys()
    for name in a["drafter"]:
        assert torch.equal(a["drafter"][name], b["drafter"][name]), name
    for pa, pb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert all(torch.equal(pa[k], pb[k]) for k in ("exp_avg", "exp_avg_sq"))
    assert a["scheduler"]["last_epoch"] == b["scheduler"]["last_epoch"]


@pytest.fixture(scope="module")
def straight(tiny_data, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("straight")
    _run(_common(tiny_data) + ["--run-dir", str(run_dir)])
    return run_dir


def test_stop_then_resume_and_resume_from_equal_the_straight_run(tiny_data, straight, tmp_path):
    first, moved, by_file = tmp_path / "first", tmp_path / "moved", tmp_path / "by-file"
    _run(_common(tiny_data) + ["--run-dir", str(first), "--stop-after", "4"])
    ck4 = checkpoint.newest_complete(first)
    assert ck4 is not None and ck4.name == "step-00000004.pt"
    assert (first / "checkpoints" / "latest").read_text().strip() == ck4.name
    assert checkpoint.load(ck4)["next_pos"] == 4                    # one batch position a step, one replica
    stopped_files = sorted(p.name for p in first.rglob("*"))

    # --resume-from the stopped run's dir, into a new run dir; the stopped run is not written to
    other = _run(_common(tiny_data) + ["--run-dir", str(moved), "--resume-from", str(first)])
    assert [h["step"] for h in other.history] == list(range(5, STEPS + 1))
    assert other.history[0]["resumed_from"] == str(ck4) and other.history[0]["resumed_step"] == 4
    assert other.history[0]["resumed_next_batch_pos"] == 4 and "resumed_from" not in other.history[1]
    assert json.loads((moved / "metrics.jsonl").read_text().splitlines()[0])["resumed_from"] == str(ck4)
    assert json.loads((moved / "resumed_from.json").read_text())["checkpoint"] == str(ck4.resolve())
    assert (moved / "checkpoints" / "latest").read_text().strip() == f"step-{STEPS:08d}.pt"
    # --resume-from the checkpoint file itself
    from_file = _run(_common(tiny_data) + ["--run-dir", str(by_file), "--resume-from", str(ck4)])
    assert [h["step"] for h in from_file.history] == list(range(5, STEPS + 1))
    assert sorted(p.name for p in first.rglob("*")) == stopped_files        # the source run is untouched
    assert checkpoint.newest_complete(first) == ck4

    # --resume in the stopped run's own dir
    resumed = _run(_common(tiny_data) + ["--run-dir", str(first), "--resume"])
    assert [h["step"] for h in resumed.history] == list(range(5, STEPS + 1))

    want = _curve(straight)
    assert sorted(want) == list(range(1, STEPS + 1))
    assert _curve(first) == want                                    # bitwise: == on the floats
    assert _curve(moved) == _curve(by_file) == {s: v for s, v in want.items() if s > 4}
    _assert_same_state(_final(straight), _final(first))
    _assert_same_state(_final(straight), _final(moved))
    _assert_same_state(_final(straight), _final(by_file))


def test_kill_9_after_a_checkpoint_then_resume_from_equals_the_straight_run(tiny_data, straight, tmp_path,
                                                                             trainer_env):
    """The real trainer process, SIGKILLed once its step-3 checkpoint is announced (it may
    be steps further by then, or mid-save of the next: a *.tmp is never picked)."""
    killed, after = tmp_path / "killed", tmp_path / "after"
    proc = subprocess.Popen(trainer_cmd(*_common(tiny_data), "--run-dir", str(killed), "--checkpoint-every", "3"),
                            cwd=ROOT, env=trainer_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in proc.stdout:                                     # the event: the checkpoint's milestone
            seen.append(line)
            if line.startswith("[milestone] checkpoint_saved step=3 "):
                proc.send_signal(signal.SIGKILL)
                break
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, "".join(seen)[-2000:]
    ck = checkpoint.newest_complete(killed)
    assert ck is not None
    done = int(ck.name[5:13])
    assert done in (3, 6, 9)
    _run(_common(tiny_data) + ["--run-dir", str(after), "--resume-from", str(killed)])
    want = _curve(straight)
    assert _curve(after) == {s: v for s, v in want.items() if s > done}
    # what the killed process logged before it died is the straight run's too
    assert _curve(killed) == {s: v for s, v in want.items() if s in _curve(killed)}
    _assert_same_state(_final(straight), _final(after))


def test_resume_from_follows_an_attempt_that_died_before_its_first_checkpoint(tiny_data, straight, tmp_path):
    """A relaunch that died at once has no checkpoint of its own; --resume-from its run dir
    takes the checkpoint it had started from (its resumed_from.json)."""
    dead, last = tmp_path / "dead", tmp_path / "last"
    dead.mkdir()
    ck = checkpoint.newest_complete(straight)
    (dead / "resumed_from.json").write_text(json.dumps({"checkpoint": str(ck), "step": STEPS}))
    assert train.resume_source.source_checkpoint(dead) == ck
    result = _run(_common(tiny_data) + ["--run-dir", str(last), "--resume-from", str(dead),
                                        "--steps", str(STEPS + 2)])
    assert [h["step"] for h in result.history] == [STEPS + 1, STEPS + 2]
    assert result.history[0]["resumed_from"] == str(ck)


def _refusal(argv: list[str], capsys) -> str:
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_resume_from_refusals_exit_2_naming_the_path_and_key(tiny_data, straight, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    base = _common(tiny_data) + ["--run-dir", str(tmp_path / "new")]
    missing = tmp_path / "nowhere"
    assert _refusal(base + ["--resume-from", str(missing)], capsys) == f"error: --resume-from {missing}: does not exist"
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    (empty / "checkpoints" / "step-00000004.pt.tmp").write_bytes(b"half a save")
    assert _refusal(base + ["--resume-from", str(empty)], capsys) == \
        f"error: --resume-from {empty}: no complete checkpoint under {empty / 'checkpoints'}"
    partial = empty / "checkpoints" / "step-00000004.pt.tmp"
    assert "a partial save" in _refusal(base + ["--resume-from", str(partial)], capsys)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    assert _refusal(base + ["--resume-from", str(junk)], capsys).startswith(
        f"error: --resume-from {junk}: not a trainer checkpoint")
    ck = checkpoint.newest_complete(straight)
    line = _refusal(base + ["--resume-from", str(straight), "--sliding-mask", "training"], capsys)
    assert line == f"error: --resume-from {ck}: config drafter.sliding_mask is 'inference' there, 'training' here"
    line = _refusal(base + ["--resume-from", str(ck), "--seed", "1"], capsys)
    assert line == f"error: --resume-from {ck}: data.seed is 0 there, 1 here"
    line = _refusal(base + ["--resume-from", str(ck), "--eval-fraction", "0.1"], capsys)
    assert line == f"error: --resume-from {ck}: data.eval_fraction is 0.0 there, 0.1 here"
    # the same checks guard --resume in a run's own dir
    line = _refusal(_common(tiny_data) + ["--run-dir", str(straight), "--resume", "--mask-token-id", "7"], capsys)
    assert line == f"error: --resume {ck}: config drafter.mask_token_id is 255 there, 7 here"
    assert not (tmp_path / "new" / "resumed_from.json").exists()
    bare = tmp_path / "bare"                                          # no checkpoints/ at all: the API raises
    bare.mkdir()
    refused = f"--resume-from {bare}: no complete checkpoint under {bare / 'checkpoints'}"
    with pytest.raises(ConfigError, match=re.escape(refused)):
        run_in_process(base + ["--resume-from", str(bare)])
    with pytest.raises(SystemExit) as both:                          # argparse: one or the other
        train.parse_args(base + ["--resume", "--resume-from", str(straight)])
    assert both.value.code == 2


def test_a_smaller_token_budget_is_the_one_change_allowed_and_says_not_exact(tiny_data, straight, tmp_path,
                                                                            capsys):
    """A relaunch after a CUDA OOM halves the batch: allowed, at the same share of the same
    epoch, and said to be not exact."""
    state = _final(straight)
    before = state["data"]["batches_per_epoch"]
    result = _run(_common(tiny_data) + ["--run-dir", str(tmp_path / "half"), "--resume-from", str(straight),
                                        "--token-budget", "1024", "--steps", str(STEPS + 1)])
    out = capsys.readouterr().out
    assert "changed: train.token_budget 2048 -> 1024; data position mapped by epoch share, not exact" in out
    after = checkpoint.load(checkpoint.newest_complete(tmp_path / "half"))["data"]["batches_per_epoch"]
    assert after > before
    assert result.history[0]["resumed_next_batch_pos"] == STEPS * after // before
