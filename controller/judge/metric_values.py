"""The metric-record reader: loss and gradient-norm values wherever a trainer prints
them, so NaN/Inf is judged on the value, never on the word "nan". (Lightning's tqdm postfix
prints a NaN as `train_loss=nan.0`: its float formatting, seen in the corpus.)

Training code prints its numbers in a handful of shapes: Python dicts (transformers'
Trainer: `{'loss': 'nan', 'grad_norm': 'nan', ...}`, older versions without the quotes),
key=value (`loss=nan`, tqdm postfixes `[..., loss=nan]`), colon pairs (Lightning's rich
bar and Keras `loss: nan`), pipe tables (Megatron `| lm loss: NaN | grad norm: nan |`),
bracketed values (`loss [nan]`), bare pairs (`Loss nan Main Loss nan`), and wandb's
closing summary (`wandb:     loss nan`). One pattern reads them all: a key that names a
loss or a gradient norm, a separator, a value. A loss goes by other names where the
objective is a cross-entropy: its perplexity (`ppl:   nan; xent:  nan;` -- OpenNMT-py;
`PPL nan ;`, `Validation perplexity: nan`), `cross-entropy=nan` (MXNet's metric), Marian's
`Cost nan` -- read as losses; a timing `batch_cost` / `reader_cost` is not one. Words that merely mention NaN --
`number of nan iterations: 0`, `logging_nan_inf_filter=True`, `skip_nan_steps` -- have no
loss/norm key in front of a non-finite value, so they never count. Keys such as
`best_loss` / `min_val_loss` start at +inf by convention and are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.judge.gbdt_eval import gbdt_non_finite

WRAPPER = (r"(?:(?:tensor|(?:Device)?Array|array|np\.float(?:16|32|64)|tf\.Tensor)\(\[*"
           r"|<tf\.Tensor: (?:id=\d+, )?shape=\([\d, ]*\), dtype=\w+, numpy=(?:array\()?\[*)?")
"""What a printed value may sit inside when the loop prints the framework's object, not a float: torch's
`tensor(nan, grad_fn=<AddBackward0>)` / `tensor([nan, nan])` (torch/_tensor_str.py _str_intern: `tensor(` +
the data + its suffixes), NumPy's `array(nan, dtype=float32)` and NumPy 2's scalar repr `np.float32(nan)`
(numpy/_core/arrayprint.py _array_repr_implementation; NEP 51), JAX's `Array(nan, dtype=float32)` (older
`DeviceArray(nan, dtype=float32)`), TensorFlow's eager tensor printed with print(), `tf.Tensor(nan,
shape=(), dtype=float32)`, and as repr, `<tf.Tensor: shape=(), dtype=float32, numpy=nan>` (tensorflow
python/framework/ops.py, later python/framework/tensor.py, _EagerTensorBase.__str__ / __repr__; TF 2.0's repr
has an `id=N, ` first). The first member of a printed array is the one read (`[[nan` as `nan`)."""
NON_FINITE = r"[-+]?\.?(?:nan|inf(?:inity)?)(?:16|32)?|[-+]?1\.#(?:QNAN|SNAN|IND|INF)\d*"
"""A non-finite value as printed: C/Python/numpy `nan`, `-nan`, `inf`; Java's and JavaScript's (and
Python json.dumps') `NaN`, `Infinity`, `-Infinity`; YAML's `.nan`, `.inf`, `-.inf` (PyYAML's representer
for floats, yaml/representer.py represent_float: `.nan`, `.inf`, `-.inf` -- what RLlib's pretty_print of a
result dict writes); Julia's `NaN32` / `Inf32` (a Float32 shows its type's suffix: JuliaLang/julia test/numbers.jl,
`@test repr(NaN32) == "NaN32"`, `repr(-Inf32) == "-Inf32"`); the old MSVC runtime's `1.#QNAN0` (below)."""
_RECORD = re.compile(
    r"(?<![\w.])(?P<key>(?:[A-Za-z][A-Za-z0-9]*[ _/.])?(?:[A-Za-z]+[ _])?(?:loss|cost|xent|cross[-_ ]?entropy|ppl|perplexity"
    r"|grad[ _]?norm|gradient[ _]norm|total[ _]norm))(?P<sfx>[_/]\w+|(?<=ss)es|\d{1,2}(?![\w.])|(?-i:[A-Z])(?![\w.]))?"
    r"(?:\[\w{1,12}\]|\(\w{1,12}\))?['\"\]]?\s*(?:[:=：]\s*|\s+|\s*[|│┃]\s*)\[?['\"]?" + WRAPPER +
    r"(?P<val>" + NON_FINITE + r")(?:\.0*)?(?![\w.])",
    re.I)
"""The suffix takes a path part too: TRL's PPO trainer logs `loss/policy_avg` and `loss/value_avg`
(huggingface/trl trl/experimental/ppo/ppo_trainer.py:898-899 at f2cd577, `metrics["loss/policy_avg"] =
...`; its older PPOTrainer `ppo/loss/policy`, `ppo/loss/value`, `ppo/loss/total`, named in trl's
issue #1098), so `'loss/policy_avg': nan` is a NaN loss like `'loss_policy': nan`. The value takes
the old Microsoft C runtime's spellings too: before the Universal CRT (VS 2015) printf wrote a NaN
as `1.#QNAN0` / `1.#SNAN0`, the indeterminate 0/0 as `-1.#IND00` and infinity as `1.#INF00` (the
representations boost.math's nonfinite_num facets read back on MSVC, boost libs/math/example/
nonfinite_signaling_NaN.cpp), so a Windows build of a C/C++ trainer prints `loss = -1.#IND00`."""
_IGNORED_KEY = re.compile(r"^(?:best|min|lowest|prev|previous|init|initial|max|target|expected)[ _]"
                          r"|^\w+_cost$|time[ _]cost$", re.I)
_LOSS_NAMES = ("loss", "cost", "xent", "entropy", "ppl", "perplexity")
_INF_WORD = re.compile(r"\binf(?:inity|32|16)?\b", re.I)


@dataclass(frozen=True)
class NonFinite:
    key: str       # the metric's name as printed ("loss", "grad_norm", "lm loss")
    value: str     # "nan", "inf", "-inf"
    is_loss: bool


_NUMBER = r"['\"]?\s*(?:[:=]\s*|\s+|\s*\|\s*)\[?['\"]?" + WRAPPER
_FINITE_NORM = re.compile(r"(?<![\w.])(?:grad[ _]?norm|gradient[ _]norm|total[ _]norm)" + _NUMBER + r"[-+]?\.?\d", re.I)
_ZERO_LOSS = re.compile(r"(?<![\w.])(?:[A-Za-z]+[ _])?loss" + _NUMBER + r"[-+]?0(?:\.0*)?(?:[eE][-+]?\d+)?(?![\w.])",
                        re.I)


def finite_norm(line: str) -> bool:
    """The line holds a gradient norm with a finite value (the end of a run of NaN norms)."""
    return _FINITE_NORM.search(line) is not None


def zero_loss(line: str) -> bool:
    """The line's loss reads exactly 0 (`'loss': 0.0`, `loss=0.0000`, `'loss': '0'`)."""
    return _ZERO_LOSS.search(line) is not None


def maybe_non_finite(low: str) -> bool:
    """Cheap test before the reader runs: the lower-cased line holds nan or the word inf
    (or an old MSVC runtime's `1.#IND` / `1.#INF00`, whose `inf` is glued to its digits)."""
    return "nan" in low or ("inf" in low and _INF_WORD.search(low) is not None) or "1.#" in low


def _value(v: str) -> str:
    """A printed non-finite value, lower-cased, MSVC's `1.#QNAN0` / `-1.#IND00` read as nan, `1.#INF00` as inf."""
    low = v.lower().replace(".", "").rstrip("0123456789") if "#" not in v else v.lower()
    if "#" not in low:
        return "inf" if low == "infinity" else "-inf" if low == "-infinity" else "+inf" if low == "+infinity" else low
    return ("-" if low.startswith("-") else "") + ("inf" if "#inf" in low else "nan")


_RUNNING_AVG = re.compile(r"(?<![\w.])(?P<key>(?:[A-Za-z]+[ _])?loss)['\"]?\s*[:=]?\s*[-+]?\d[\d.]*(?:[eE][-+]?\d+)?\s*"
                          r"\((?P<val>[-+]?(?:nan|inf))\)", re.I)
"""timm/fairseq-style `Loss: 2.3412 (nan)`: the value, then its running average in parentheses."""


_VALUE = r"[-+]?(?:nan|inf|1\.#(?:QNAN|SNAN|IND|INF)\d*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_DARKNET_PROGRESS = re.compile(r"(?:^|[\s|\]])(?:\d+(?:, \d+\.\d+)?: )?(?P<loss>" + _VALUE + r"), (?P<avg>" + _VALUE
                               + r") avg(?: loss)?, " + _VALUE + r" rate\b", re.I)
"""Darknet's progress line names its values AFTER them: `<batch>: <loss>, <avg> avg, <rate> rate,
<s> seconds, <n> images` (pjreddie/darknet examples/detector.c:136 at 56d69e7, `printf("%ld: %f, %f
avg, %f rate, %lf seconds, %d images\\n", ...)`; the classifier's `%d, %.3f: %f, %f avg, ...` with the
epoch; later forks print `avg loss` and `hours left`; the batch number is optional: a line-number
prefix remover (repair.py) may take `1234: ` for one). glibc prints a NaN float as `nan`/`-nan`. The
`Region 82 Avg IOU: -nan ... count: 0` lines beside it are a yolo layer without objects in the batch
-- they name no loss, so they never count."""


_POLICY_OUTPUT = re.compile(r"(?<![\w.])(?P<key>(?:[A-Za-z]+[_/])?(?:logps|logits)/(?:ref_)?(?:chosen|rejected))"
                            r"['\"]?\s*[:=]\s*['\"]?(?P<val>[-+]?(?:nan|inf))(?![\w.])", re.I)
"""Preference trainers' record of the policy's own outputs: TRL's DPOTrainer (and LLaMA-Factory's
copy of it) logs `logps/chosen`, `logps/rejected`, `logits/chosen`, `logits/rejected`
(trl/trainer/dpo_trainer.py get_batch_loss_metrics, `metrics[f"{prefix}logps/chosen"] =
policy_chosen_logps.detach().mean()...`). A NaN there is the forward pass itself gone NaN -- the
loss beside it may still print 0.0 (hiyouga/LlamaFactory#2078: `'loss': 0.0, ... 'logps/chosen':
nan`) -- so it counts as a NaN loss. Rewards and margins are not read: they derive from these."""


_SKIPPED_NORM = re.compile(r"The grad norm is (?P<val>[-+]?(?:nan|inf))\. Skipping updating the model", re.I)
"""ESPnet's trainer, and the toolkits that copied it (FunASR, SenseVoice's fine-tuning, wenet-style
loops), print no norm in their records; they say so when the norm is not finite and skip the step:
`logging.warning(f"The grad norm is {grad_norm}. Skipping updating the model.")` under
`if not torch.isfinite(grad_norm)` (espnet2/train/trainer.py train_one_epoch). Read as a NaN/Inf
gradient-norm record, so the runs-in-a-row rules decide (an AMP scaler's first skip is normal; one
skip after another with no finite norm between is a model not being updated --
QwenAudio/SenseVoice#264)."""


_CJK_LOSS = re.compile(r"(?P<key>(?:总|训练|验证|平均)?损失(?:值|函数)?)\s*[:=：]?\s*(?P<val>[-+]?(?:nan|inf))(?![\w.])",
                       re.I)
"""A loss printed under its Chinese name, `损失` (`训练损失：nan`, `epoch 2, 损失: nan`), often with
the full-width colon `：` (U+FF1A) that a Chinese input method types; the ASCII keys take it too.
(CJK characters are word characters to `re`, so the ASCII pattern's look-behind cannot hold here.)"""


_LOSS_AT_STEP = re.compile(r"(?<![\w.])(?P<key>(?:[A-Za-z]+[ _])?loss)(?:\s?\([^()]{1,30}\))?\s(?:at|after|for|in|of)\s"
                           r"(?:global\s)?(?:step|iter(?:ation)?|epoch|batch|round)\s?#?\d+(?:/\d+)?\s?[:=]\s*"
                           r"(?P<val>[-+]?(?:nan|inf|1\.#(?:QNAN|SNAN|IND|INF)\d*))(?![\w.])", re.I)
"""A loss named, then WHEN, then its value: Keras' custom-loop guide prints `Training loss (for one batch)
at step %d: %.4f` (keras-team/keras-io guides/writing_a_training_loop_from_scratch.py at 02743a2a; Keras 3's
`(for 1 batch)`), copied into countless scripts, and hand-written loops print `Loss at step 100: nan`,
`loss after epoch 3: nan`. The step between the key and the value hides it from the record pattern."""


_QUALIFIER_BEFORE = re.compile(r"(?<![\w.])(?:best|min|minimum|lowest|prev|previous|init|initial|max|target|expected)[ _]$",
                               re.I)
"""The word just before a `loss at step` key that makes it a running record, not the step's loss: the key takes one
word (`val loss`), so in `Best val loss at epoch 0: inf` -- an early-stopping tracker's starting value, printed
before any loss was measured -- `Best` stays outside it, and _IGNORED_KEY alone does not see it."""


_TRACKER_SUFFIXES = ("_best", "_min", "_max", "_lowest", "_prev")
"""A best-so-far tracker named after the loss (`val/loss_best`, the torchmetrics MinMetric a Lightning
template logs; `loss/min`, `loss_best`): its +/-inf is the value it starts from before any loss was
measured, not a loss. Only inf is skipped: a NaN best means a NaN loss reached it."""


_GRAPH_NETS_LOSS = re.compile(r"(?<![\w.])(?P<key>Ltr|Lge\d{0,2})\s+(?P<val>[-+]?(?:nan|inf))(?![\w.])")
"""The graph_nets demos' training report names its losses by abbreviation: `# 00123, T 12.3, Ltr 0.1234, Lge
0.2345, Ctr ..., Str ..., Cge ..., Sge ...`, with the legend `Ltr (training loss), Lge (test/generalization
loss)` printed above it (google-deepmind/graph_nets graph_nets/demos/shortest_path.ipynb cells at adf2516,
`print("# {:05d}, T {:.1f}, Ltr {:.4f}, Lge {:.4f}, ...` and its legend; sort.ipynb the same; physics.ipynb
`Lge4`, `Lge9`), a format copied into many graph-network projects (pasted clatfd/GNN-ART-LABEL#3: `T
14594.9, Ltr nan, Lge nan,`). Case-sensitive: the two capitalised tokens, not any word that starts so."""


def non_finite_values(line: str) -> list[NonFinite]:
    """Every loss / gradient-norm value in the line that is NaN or Inf."""
    out = [NonFinite(key=k + " (boosting eval)", value=v, is_loss=True) for k, v in gbdt_non_finite(line)]
    if out:
        return out  # a boosting library's eval row (gbdt_eval.py): its cells are its losses
    if "Ltr" in line or "Lge" in line:
        out += [NonFinite(key=m.group("key"), value=m.group("val").lower(), is_loss=True)
                for m in _GRAPH_NETS_LOSS.finditer(line)]
    if "损失" in line:
        out += [NonFinite(key=m.group("key"), value=m.group("val").lower(), is_loss=True)
                for m in _CJK_LOSS.finditer(line)]
    if "Skipping updating" in line:
        m = _SKIPPED_NORM.search(line)
        if m is not None:
            return [NonFinite(key="grad norm", value=m.group("val").lower(), is_loss=False)]
    if "/chosen" in line or "/rejected" in line:
        for m in _POLICY_OUTPUT.finditer(line):
            out.append(NonFinite(key=m.group("key"), value=m.group("val").lower(), is_loss=True))
    for m in _DARKNET_PROGRESS.finditer(line):
        for key, group in (("avg loss", "avg"), ("loss", "loss")):
            v = _value(m.group(group))
            if v.lstrip("+-") in ("nan", "inf"):
                out.append(NonFinite(key=key, value=v, is_loss=True))
                break
    if " at " in line or " after " in line or " for " in line or " in " in line or " of " in line:
        out += [NonFinite(key=m.group("key"), value=_value(m.group("val")), is_loss=True)
                for m in _LOSS_AT_STEP.finditer(line)
                if not _IGNORED_KEY.match(m.group("key")) and not _QUALIFIER_BEFORE.search(line, 0, m.start())]
    for m in _RUNNING_AVG.finditer(line):
        if not _IGNORED_KEY.match(m.group("key")):
            out.append(NonFinite(key=m.group("key") + " (average)", value=m.group("val").lower(), is_loss=True))
    for m in _RECORD.finditer(line):
        key = m.group("key")
        sfx = (m.group("sfx") or "").lower().replace("/", "_")
        if _IGNORED_KEY.match(key) or sfx in ("_scale", "_count", "_filter", "_steps") \
                or (sfx in _TRACKER_SUFFIXES and "inf" in m.group("val").lower()):
            continue
        low = key.lower()
        out.append(NonFinite(key=key + (m.group("sfx") or ""), value=_value(m.group("val")),
                             is_loss="norm" not in low and any(w in low for w in _LOSS_NAMES)))
    return out
