"""--resume-from PATH: a NEW run continues from ANOTHER run's checkpoint (dfctl's resume,
controller/ship/relaunch.py) -- a run dir (its newest complete checkpoint) or a file --
and writes only into its own run dir; its losses are the uninterrupted run's, step for step."""

import numpy as np
import pytest
import torch

from trainer import train
from trainer.config import ConfigError

torch.set_num_threads(1)


def _run(argv):
    return train.run(train.parse_args(argv))


def _losses(result):
    return [(h["step"], h["loss"]) for h in result.history]


def test_resume_from_another_run_continues_its_curve(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    common = ["--config", "tiny", "--data", str(tiny_data), "--log-every", "1", "--device", "cpu",
              "--prefetch-workers", "2", "--checkpoint-every", "3"]
    straight = _run(common + ["--run-dir", str(tmp_path / "a"), "--steps", "6"])
    _run(common + ["--run-dir", str(tmp_path / "b"), "--steps", "6", "--stop-after", "3"])
    before = sorted(p.name for p in (tmp_path / "b").rglob("*"))
    by_dir = _run(common + ["--run-dir", str(tmp_path / "c"), "--steps", "6", "--resume-from", str(tmp_path / "b")])
    by_file = _run(common + ["--run-dir", str(tmp_path / "d"), "--steps", "6", "--resume-from",
                             str(tmp_path / "b" / "checkpoints" / "step-00000003.pt")])
    for resumed in (by_dir, by_file):
        assert [s for s, _ in _losses(resumed)] == [4, 5, 6]
        np.testing.assert_allclose([v for _, v in _losses(resumed)], [v for _, v in _losses(straight)[3:]], rtol=1e-6)
    assert sorted(p.name for p in (tmp_path / "b").rglob("*")) == before       # the source run is untouched
    assert (tmp_path / "c" / "checkpoints" / "latest").read_text().strip() == "step-00000006.pt"


def test_resume_from_a_dir_without_checkpoint_is_refused(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="--resume-from .*empty: no complete checkpoint under "):
        _run(["--config", "tiny", "--data", str(tiny_data), "--device", "cpu", "--run-dir", str(tmp_path / "x"),
              "--steps", "2", "--resume-from", str(tmp_path / "empty")])
