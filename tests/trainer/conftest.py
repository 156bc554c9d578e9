"""Fixtures for the trainer's tests: a small synthetic dataset shared by the session, an
environment for trainer subprocesses (one intra-op thread: the machine has 2 shared cores),
the clients' servers (tests/trainer/clients_driver.py) and the Qwen3 target transformers
writes for the export and decode tests."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trainer.clients_driver import ROOT, ClientServer, client_env
from trainer import train
from trainer.synth import write_dataset

CLIENTS = ROOT / "tests" / "trainer" / "clients"
TARGET_ROPE_THETA = 500_000.0      # not the 1e6 the old reader fell back to, nor transformers' default


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


def run_in_process(argv: list[str]) -> train.RunResult:
    """The trainer's CLI in this process (argv as `python -m trainer` takes it), wandb off:
    test.sh sets WANDB_MODE=offline, and an offline wandb run costs its service's start-up
    and teardown (~0.5-1 s a run here) in tests that do not look at wandb."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "disabled")
        return train.run(train.parse_args(argv))


@pytest.fixture(scope="session")
def speculators_client(tmp_path_factory) -> Iterator[ClientServer]:
    """clients/speculators_check.py's commands (transformers, speculators, SpecForge)."""
    server = ClientServer(CLIENTS / "speculators_check.py", tmp_path_factory.mktemp("clients"), client_env())
    yield server
    server.close()


@pytest.fixture(scope="session")
def dflash_client(tmp_path_factory) -> Iterator[ClientServer]:
    """clients/dflash_check.py's commands; HF_HOME of its own (trust_remote_code copies the
    export's modeling file into its modules cache)."""
    work = tmp_path_factory.mktemp("clients")
    server = ClientServer(CLIENTS / "dflash_check.py", work, client_env(HF_HOME=str(work / "hf")))
    yield server
    server.close()


@pytest.fixture(scope="session")
def hf_target(tmp_path_factory, speculators_client) -> Path:
    """A 4-layer Qwen3ForCausalLM with random weights (seed 0), saved by transformers."""
    path = tmp_path_factory.mktemp("qwen3") / "target"
    speculators_client("make-target", str(path), str(TARGET_ROPE_THETA))
    return path
