"""NaN/Inf VALUES in the shapes training loops print them with no message that says so (helper
k13nanvalue, issue 22 round twelve): a value inside the framework's printed object (torch `tensor(...)`,
NumPy `array(...)` / `np.float32(...)`, JAX `Array(...)`, TensorFlow `tf.Tensor(...)`), JSON's
`Infinity`, YAML's `.nan` / `.inf`, Julia's `NaN32`, loss keys with a digit, a capital or a bracketed
qualifier (`loss1`, `lossG`, `loss[avg]`), `losses` arrays, graph_nets' `Ltr` / `Lge` abbreviations, and
pandas DataFrames (their index column; `NaN` as a missing cell of a metrics.csv frame) -- each beside a
healthy text that must stay quiet. Real output: tests/data/logs/programs/nan_value_formats.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.judge.metric_values import maybe_non_finite, non_finite_values
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final
from tests.judge_support import summaries_by_kind

LOGS = Path(__file__).parent / "data" / "logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


# -- real output (tests/data/logs/programs/make_nan_value_logs.sh) -----------------------------------------

@pytest.mark.parametrize("fmt, key", [
    ("tensor", "loss = inf"),        # `step 9 loss tensor(inf, grad_fn=<AddBackward0>)`
    ("numpy", "loss = inf"),         # `{'step': 9, 'loss': np.float32(inf), ...}` (NumPy 2's scalar repr)
    ("jsonl", "loss = inf"),         # json.dumps: `"loss": Infinity`
    ("yaml", "total_loss = inf"),    # PyYAML: `total_loss: .inf` (RLlib's result dict)
    ("frame", "loss = inf"),         # a Keras history DataFrame, its index column first
])
def test_a_loop_whose_loss_goes_inf_is_read_in_each_printed_shape(fmt, key):
    nan = summaries_by_kind(_read(f"nan_values_{fmt}.log")).get("nan", [])
    assert any(key in s for s in nan), nan


@pytest.mark.parametrize("fmt", ["tensor", "numpy", "jsonl", "yaml", "frame"])
def test_the_same_loop_with_a_sane_step_size_is_healthy(fmt):
    """Beside it: `best_loss: Infinity` (a tracker's start), a class with no samples (`[0.125, nan]`),
    `episode_reward_mean: .nan` before an episode ended, a metrics.csv frame's NaN holes."""
    assert _kinds(_final(_read(f"nan_values_{fmt}_ok.log"))) == []


# -- value spellings ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, value", [
    ("step 10 loss DeviceArray(nan, dtype=float32)", "nan"),
    ("step 10 loss: Array(nan, dtype=float32)", "nan"),
    ("epoch 2 loss = tf.Tensor(nan, shape=(), dtype=float32)", "nan"),
    ("step 10 loss: <tf.Tensor: shape=(), dtype=float32, numpy=nan>", "nan"),
    ("step 10 loss: <tf.Tensor: id=512, shape=(), dtype=float32, numpy=inf>", "inf"),
    ("loss tensor([nan, nan], device='cuda:0')", "nan"),
    ("it 3 loss: array(nan, dtype=float32)", "nan"),
    ("step 5 loss: Infinity", "inf"),
    ('{"step": 3, "loss": -Infinity}', "-inf"),
    ("        vf_loss: -.inf", "-inf"),
    ("        total_loss: .nan", "nan"),
    ("│   loss = NaN32", "nan"),
    ("epoch 4 loss: -Inf32", "-inf"),
])
def test_non_finite_values_inside_printed_objects_and_other_languages_spellings(line, value):
    assert maybe_non_finite(line.lower())
    values = non_finite_values(line)
    assert values and values[0].is_loss and values[0].value == value, values


@pytest.mark.parametrize("line", [
    "step 10 loss DeviceArray(0.25, dtype=float32)",
    "step 10 loss: <tf.Tensor: shape=(), dtype=float32, numpy=0.25>",
    "    episode_reward_mean: .nan",             # RLlib before any episode ended
    '{"best_loss": Infinity, "loss": 0.5}',       # a tracker's start value
    "Epoch 00001: val_loss improved from -Infinity to 0.51",
    "num_nan_losses: 0, skipped: 0",
    "inference time: Infinity ms",
])
def test_healthy_lines_with_the_same_spellings_hold_no_non_finite_loss(line):
    assert [v for v in non_finite_values(line) if v.is_loss] == []


# -- key shapes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, key", [
    ("epoch 3 loss1: nan loss2: nan", "loss1"),
    ("step 100 | lossG nan | lossD nan", "lossG"),
    ("step 100 loss[avg]=nan", "loss"),
    ("step 100 loss(avg)=nan", "loss"),
    ("losses: [nan nan nan]", "losses"),
])
def test_loss_keys_with_a_digit_a_capital_a_qualifier_or_a_plural(line, key):
    values = non_finite_values(line)
    assert values and values[0].key == key and values[0].is_loss, values


@pytest.mark.parametrize("line", ["lossy nan compression ratio", "glosses: nan", "lossless: inf"])
def test_words_that_only_start_like_a_loss_key_are_not_one(line):
    assert [v for v in non_finite_values(line) if v.is_loss] == []


def test_graph_nets_abbreviated_losses_ltr_lge_are_losses():
    """google-deepmind/graph_nets demos: `# 00123, T 12.3, Ltr ..., Lge ...` with the legend `Ltr (training
    loss), Lge (test/generalization loss)`; pasted clatfd/GNN-ART-LABEL#3 (a training-split miss)."""
    text = ["> Model saved in path: ArtLabel1/model21920-nan-0.8798-0.1954.ckpt",
            ">22253, T 14594.9, Ltr nan, Lge nan,", "> Ctr 0.5287, Str 0.0000, Cge 0.5397, Sge 0.0000"]
    assert any("Ltr = nan" in s for s in summaries_by_kind(text).get("nan", []))
    healthy = ["# 00010, T 5.1, Ltr 0.8123, Lge 0.9012, Ctr 0.1, Str nan, Cge nan, Sge 0.0",
               "Ltr (training loss), Lge (test/generalization loss), Ctr (training fraction nodes/edges labeled "
               "correctly), Str (training fraction examples solved correctly)"]
    assert _kinds(_final(healthy)) == []
    assert non_finite_values("ltr nan, lge nan") == []  # the capitalised tokens only


# -- pandas DataFrames -------------------------------------------------------------------------------------

LIGHTNING_FRAME = """\
   epoch  step  train_loss  val_loss  val_acc
0      0    49       0.690       NaN      NaN
1      0    99       0.520       NaN      NaN
2      0    99         NaN      0.48     0.81
3      1   149       0.410       NaN      NaN
4      1   199         NaN      0.45     0.84""".splitlines()


def test_a_metrics_csv_frame_with_its_holes_is_healthy():
    """pd.read_csv(metrics.csv) of Lightning's CSVLogger: the train rows have no val_loss, the val rows no
    train_loss; pandas prints the holes as NaN (a false alarm before this round: the index column shifted
    the cells one to the right of their header)."""
    assert _kinds(_final(LIGHTNING_FRAME)) == []


def test_a_frame_whose_losses_all_go_nan_is_nan():
    frame = ["   loss  accuracy  val_loss", "0   2.3       0.1       2.2", "1   1.9       0.3       1.8",
             "2   NaN       0.1       NaN", "3   NaN       0.1       NaN"]
    assert "nan" in _kinds(_final(frame))
    # the last row of a metrics.csv frame: train_loss a hole beside a finite val_loss
    assert _kinds(_final(LIGHTNING_FRAME[:1] + LIGHTNING_FRAME[-1:])) == []
