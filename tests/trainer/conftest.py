"""Fixtures for the trainer's tests: a small synthetic dataset shared by the module, and an
environment for trainer subprocesses (one intra-op thread: the machine has 2 shared cores)."""

import os
import sys
from pathlib import Path

import pytest

from trainer.synth import write_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data") / "tiny", 600, min_len=48, max_len=160, vocab=256, seed=0)


@pytest.fixture
def trainer_env(tmp_path) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", WANDB_MODE="disabled",
               WANDB_SILENT="true", PYTHONPATH=str(ROOT))
    env.pop("WANDB_API_KEY", None)
    return env


def trainer_cmd(*args: str) -> list[str]:
    return [sys.executable, "-u", "-m", "trainer", *args]
