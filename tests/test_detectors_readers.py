"""Structure readers (line repair, tracebacks, metric records, loss-scale trajectory)
as units, with hypothesis: a failure still classifies the same when wrapped, prefixed or
coloured; healthy text stays quiet however it is decorated."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controller.follow.logparse import clean_text
from controller.judge import scan_lines
from controller.judge.metric_values import non_finite_values
from controller.judge.repair import peel, repair, wrap_width
from controller.judge.tracebacks import read_tracebacks

TB = ["Traceback (most recent call last):",
      '  File "/work/train.py", line 88, in <module>',
      "    main()",
      '  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _call_impl',
      "    return forward_call(*args, **kwargs)",
      "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
      "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x5 and 8x4)"]
HEALTHY = ["step=10 loss=2.3100 grad_norm=0.91 lr=1e-3", "number of nan iterations: 0 | number of skipped "
           "iterations: 0 |", "args: logging_nan_inf_filter=True skip_nan_steps=False",
           "{'loss': '2.31', 'grad_norm': '0.912', 'learning_rate': '0.0009'}",
           "step=4 loss_scale=32768 skipped=2", "best_val_loss=inf (no eval yet)",
           "INFO: retrying download (attempt 1/3)", "Epoch 1: 100%|██| 16/16 [00:00, train_loss=2.31]"]
PREFIXES = st.sampled_from(["", "[rank3]: ", "[default0]:", "(RayTrainWorker pid=3369) [rank7]: ",
                            "[1,0]<stderr>:", "[2026-12-01 10:00:00,123] [INFO] ", "> ", "12 | ",
                            "2026-12-01T10:00:00.123Z ", "W1201 15:45:39.195000 18174 api.py:1002] "])


def _crash_summaries(lines):
    return sorted(f.summary for f in scan_lines(lines, now_s=0.0) if f.kind == "crash")


def _colour(line: str, on: bool) -> str:
    return "\x1b[31m" + line + "\x1b[0m" if on and line else line


@given(prefix=PREFIXES, colour=st.booleans(), headerless=st.booleans())
@example(prefix="[rank3]: ", colour=True, headerless=True)
def test_traceback_reads_the_same_under_any_decoration(prefix, colour, headerless):
    body = TB[1:] if headerless else TB
    lines = [clean_text(_colour(prefix + x, colour)) for x in ["step=1 loss=2.0"] + body]
    (s,) = _crash_summaries(lines)
    assert s.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied") and "train.py:88" in s


@given(width=st.integers(60, 120), prefix=PREFIXES)
def test_hard_wrapped_traceback_reads_the_same(width, prefix):
    text = "\n".join(prefix + x for x in ["x" * (width + 5)] * 3 + TB)
    cut = []
    for line in text.split("\n"):
        while len(line) > width:
            cut.append(line[:width])
            line = line[width:]
        cut.append(line)
    (s,) = _crash_summaries(cut)
    assert s.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")


def test_ipython_shape():
    lines = ["---------------------------------------------------------------------------",
             "ModuleNotFoundError                       Traceback (most recent call last)",
             "File /work/cell.py:6", "      4 import sys", "----> 6 import torch", "",
             "ModuleNotFoundError: No module named 'torch'"]
    (tb,) = read_tracebacks(repair(lines))
    assert tb.name == "ModuleNotFoundError" and tb.message == "No module named 'torch'"


def test_chained_exception_reports_the_last_one():
    lines = TB[:3] + ["FileNotFoundError: [Errno 2] No such file", "",
                      "The above exception was the direct cause of the following exception:", ""] + TB
    assert len(_crash_summaries(lines)) == 1


def test_the_user_frame_is_in_the_evidence():
    (f,) = scan_lines(TB, now_s=0.0)
    assert any("/work/train.py" in e for e in f.evidence) and any("module.py" in e for e in f.evidence)


@given(prefix=PREFIXES, colour=st.booleans(), line=st.sampled_from(HEALTHY))
def test_healthy_lines_stay_quiet(prefix, colour, line):
    assert scan_lines([clean_text(_colour(prefix + line, colour))] * 3, now_s=0.0) == []


@given(key=st.sampled_from(["loss", "train_loss", "lm loss", "Main Loss", "val/loss"]),
       sep=st.sampled_from(["=", ": ", " ", "': '", " [", ": '"]), value=st.sampled_from(["nan", "inf", "NaN", "-inf"]))
def test_metric_reader_finds_a_non_finite_loss_in_any_format(key, sep, value):
    (v,) = non_finite_values(f"step 7 | {key}{sep}{value} | lr 1e-3")
    assert v.is_loss and v.value == value.lower()


@given(line=st.sampled_from(HEALTHY))
def test_metric_reader_ignores_words_about_nan(line):
    assert non_finite_values(line) == []


def test_peel_keeps_rank_prefix_as_key():
    assert peel("(task, pid=3369) [rank7]: RuntimeError: x") == ("(task, pid=3369)[rank7]:", "RuntimeError: x")
    assert peel("[1,0]<stderr>:Killed") == ("[1,0]<stderr>:", "Killed")


def test_wrap_width_ignores_padded_screens():
    padded = ["Trainable params: 161".ljust(80)] * 10 + ["short"] * 5
    assert wrap_width(padded) is None


def test_wrap_width_sees_lines_cut_just_after_a_space():
    """Found by hypothesis (test_detectors_summaries): a device assertion line cut at 120
    columns right after `thread: [0,0,0] ` is a cut, not a padded screen."""
    line = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.")
    lines = []
    for t in range(2):
        full = line.format(t=t)
        lines += [full[:120], full[120:]]
    lines += ["Traceback (most recent call last):", "  File \"/src/x.py\", line 9, in f", "    f()", "RuntimeError: x"]
    assert lines[0].endswith(" ") and wrap_width(lines) == 120
    assert [ln.text for ln in repair(lines, 120)][:2] == [line.format(t=0), line.format(t=1)]


def test_loss_scale_collapse_versus_search():
    search = [f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (32 - i)}, reducing to "
              f"{2 ** (31 - i)}" for i in range(16)]
    assert scan_lines(search, now_s=0.0) == []
    collapse = [f"overflow detected, setting loss scale to: {2.0 ** (6 - i)}" for i in range(8)]
    (f,) = scan_lines(collapse, now_s=0.0)
    assert f.kind == "nan" and "collapsed" in f.summary and f.line == 7


def test_oom_hint_names_flex_attention_only_when_compile_trouble_is_in_the_log():
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB. GPU 0 has a total capacity of "
           "79.1 GiB of which 0.3 GiB is free.")
    (plain,) = scan_lines([oom], now_s=0.0)
    assert "flex_attention" not in plain.hint
    limit = "W1201 torch._dynamo hit config.recompile_limit (8)"
    found = scan_lines([limit, oom], now_s=0.0)
    assert "flex_attention" in next(f for f in found if f.kind == "oom").hint


def test_oom_evidence_keeps_the_users_frame():
    """issue 13.5: the frame in the user's code is what they can change; torch's is not."""
    lines = ["Traceback (most recent call last):",
             '  File "/work/train.py", line 40, in <module>', "    main()",
             '  File "/work/train.py", line 31, in main', "    logits = model(batch)",
             '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1773, in _wrapped_call',
             "    return self._call_impl(*args, **kwargs)",
             '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2140, in softmax',
             "    ret = input.softmax(dim)",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of "
             "79.1 GiB of which 2.1 GiB is free."]
    (f,) = scan_lines(lines, now_s=0.0)
    assert f.kind == "oom" and f.line == 10
    assert any('/work/train.py", line 31, in main' in e for e in f.evidence)
    assert any("logits = model(batch)" in e for e in f.evidence)
    assert any("functional.py" in e for e in f.evidence)
    assert "flex_attention" not in f.hint


def test_the_coarse_line_filter_covers_every_rule_trigger():
    from controller.judge.line_scan import LINE_WORDS
    from controller.judge.rules import TRIGGER_WORDS

    for t in TRIGGER_WORDS + ("nan", "inf", "scale", "overflow", "skipped", "hit config.", "flex_attention"):
        assert any(w in t for w in LINE_WORDS), t


_SIEVE_PIECES = st.sampled_from(["Out of Memory", "NaN", "inf", "time d out", "timed out", "TIMEOUT", "n1an", "n an",
                                  "│", "核心已转储", "核心", 'File "', "file  \"", ".py in ", "py in", "usage:", "usage",
                                  "error_rate=0.02", "step=3", "lr=5e-04", " ", "\t", "İ", "ß", "\x0b", "norm", "no-rm"])


@given(st.lists(st.lists(st.one_of(_SIEVE_PIECES, st.text(max_size=6)), max_size=6).map("".join), max_size=40),
       st.booleans())
def test_the_word_sieve_finds_what_a_plain_search_per_line_finds(texts, norms):
    """word_sieve.py looks in copies without digits, punctuation and blanks first: its
    answer is the plain `word in line.lower()` per line, glued and split words included."""
    from controller.judge.line_scan import LINE_WORDS, STRUCTURE_WORDS, _candidates

    words = LINE_WORDS + ("norm",) if norms else LINE_WORDS
    lows = [t.lower() for t in texts]
    plain = [i for i, low in enumerate(lows) if any(w in low for w in words)]
    assert _candidates(texts, norms) == (plain, {w for w in STRUCTURE_WORDS if any(w in low for low in lows)})


@given(st.lists(st.lists(st.one_of(_SIEVE_PIECES, st.text(max_size=6)), max_size=6).map("".join), max_size=80),
       st.integers(min_value=1, max_value=60))
def test_the_word_sieve_answers_the_same_a_slice_at_a_time(texts, slice_chars):
    """A batch is sieved a slice of SLICE_CHARS at a time (its copies stay small: a whole 8 MiB
    batch of non-Latin text cost check-log ~50 MiB more); line numbers and words found do
    not depend on where the slices end."""
    from controller.judge import word_sieve
    from controller.judge.line_scan import LINE_WORDS, STRUCTURE_WORDS

    line, batch = word_sieve.WordSieve(LINE_WORDS), word_sieve.WordSieve(STRUCTURE_WORDS)
    whole = word_sieve.lines_with_words(texts, line, batch)
    assert word_sieve.lines_with_words(texts, line, batch, slice_chars=slice_chars) == whole
    lows = [t.lower() for t in texts]
    assert whole[0] == [i for i, low in enumerate(lows) if any(w in low for w in LINE_WORDS)]


@given(st.lists(st.lists(st.one_of(_SIEVE_PIECES, st.text(max_size=6)), max_size=6).map("".join), max_size=40),
       st.integers(min_value=1, max_value=12))
def test_the_word_sieve_answers_the_same_a_search_window_at_a_time(texts, window_chars):
    """The automaton searches a sieved slice SEARCH_WINDOW_CHARS at a time (pyahocorasick copies
    its text at 4 bytes a character): with windows shorter than the words, every word that
    straddles a window's end is still found."""
    from controller.judge import word_sieve
    from controller.judge.line_scan import LINE_WORDS, STRUCTURE_WORDS

    line, batch = word_sieve.WordSieve(LINE_WORDS), word_sieve.WordSieve(STRUCTURE_WORDS)
    whole = word_sieve.lines_with_words(texts, line, batch)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(word_sieve, "SEARCH_WINDOW_CHARS", window_chars)
        assert word_sieve.lines_with_words(texts, line, batch) == whole


@given(deco=st.sampled_from(["", "`", "**", "```", "_"]), prefix=PREFIXES)
def test_a_bare_killed_in_markdown_or_a_prefix_is_a_host_oom(deco, prefix):
    (f,) = scan_lines(["step=3 loss=2.0", f"{prefix}{deco}Killed{deco}"], now_s=0.0)
    assert f.kind == "oom" and "SIGKILL" in f.summary and f.line == 2


def test_killed_inside_a_sentence_is_not_an_oom():
    assert scan_lines(["Killed 0 zombie workers", "Killed: 0", "workers killed: none"], now_s=0.0) == []


def test_argparse_refusal_of_a_module_entry_point():
    """issue 13.3: the bundled trainer started as `python -m trainer` with a misspelled flag."""
    lines = ["[2026-12-01 10:00:00] launching", "usage: python -m trainer [-h] [--steps STEPS] [--config CONFIG]",
             "python -m trainer: error: unrecognized arguments: --stepz 300"]
    (f,) = scan_lines(lines, now_s=0.0)
    assert (f.kind, f.severity, f.line) == ("crash", "critical", 3)
    assert f.summary == "command line refused: python -m trainer: error: unrecognized arguments: --stepz 300"


def _nan_kinds(lines, batch: int):
    """The check-log path (TextScanner) fed in batches of `batch` lines: the NaN judgement
    must not depend on where batches are cut."""
    from controller.judge import TextScanner

    sc = TextScanner(now_s=0.0, batch_lines=batch, overlap_lines=4)
    for i in range(0, len(lines), batch):
        sc.feed(lines[i:i + batch])
    sc.finish()
    return [f for f in sc.all_findings() if f.kind == "nan"]


def _record(step: int, norm: str, loss: str = "2.31") -> str:
    return f"{{'loss': {loss}, 'grad_norm': {norm}, 'learning_rate': 0.001, 'epoch': {step / 100:.2f}}}"


@given(st.integers(0, 19), st.integers(1, 60), st.integers(1, 50), st.lists(st.integers(1, 2), max_size=6))
def test_nan_norms_are_judged_as_a_run_in_a_row(search, healthy, batch, blips):
    """An fp16 start-up search (up to 19 NaN/Inf norms before the first finite one) and
    isolated overflow blips (one or two NaN norms between finite ones, anywhere) stay
    quiet; three in a row after a finite norm are a NaN finding."""
    lines = [_record(s, "nan") for s in range(search)]
    lines += [_record(s, "0.91") for s in range(healthy)]
    for n in blips:
        lines += [_record(0, "inf") for _ in range(n)] + [_record(0, "0.88") for _ in range(3)]
    assert _nan_kinds(lines, batch) == []
    lines += [_record(s, "nan") for s in range(3)]
    (f,) = _nan_kinds(lines, batch)
    assert "in a row" in f.summary and "grad_norm" in f.summary


@given(st.integers(1, 50), st.sampled_from(["0.0", "'0'", "0"]))
def test_loss_pinned_at_zero_with_nan_norms_is_named(batch, zero):
    lines = [_record(s, "4.01", "12.7") for s in range(5)] + [_record(s, "nan", zero) for s in range(6)]
    (f,) = _nan_kinds(lines, batch)
    assert "loss pinned at 0.0" in f.summary


@given(st.integers(1, 50))
def test_a_loss_that_reaches_zero_with_finite_norms_stays_quiet(batch):
    """A task the model fits (float32 cross-entropy exactly 0.0), a frozen warm-up
    (grad_norm 0.0): healthy."""
    lines = ([_record(s, "0.0", "12.8") for s in range(10)] + [_record(s, "1.2e-18", "0.0") for s in range(30)]
             + [_record(s, "0", "'0'") for s in range(5)])
    assert _nan_kinds(lines, batch) == []


_ATTEMPT = ["[default0]:step 5/30 | loss 6.78", "[default0]:step 10/30 | loss 5.61",
            "[default1]:[rank1]: Traceback (most recent call last):",
            '[default1]:[rank1]:   File "/work/train.py", line 51, in main',
            "[default1]:[rank1]: ValueError: rank 1: batch 15 has 0 tokens after filtering",
            "W1201 18:51:55.269000 15650 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 15713 "
            "closing signal SIGTERM",
            "E1201 18:51:55.469000 15650 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
            "local_rank: 1 (pid: 15714) of binary: /usr/bin/python"]
_GIVE_UP = ["Traceback (most recent call last):", '  File "/usr/bin/torchrun", line 8, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "Root Cause (first observed failure):"]


@given(st.integers(0, 30), st.sampled_from([1, 5, 10]))
def test_an_elastic_restart_that_trains_on_is_not_a_crash(noise, restart_step):
    """torchrun --max-restarts: a worker's death, then the group's progress again from the
    start or a checkpoint (at or below the step reached) -- recovered; the same death
    followed by the launcher's ChildFailedError report, or by a dying attempt's late
    lines past the step reached, is a crash."""
    loading = [f"[default0]:loading shard {k}" for k in range(noise)]
    restarted = _ATTEMPT + loading + [f"[default0]:step {restart_step}/30 | loss 6.7", "[default0]:step 30/30 | loss 2"]
    assert [f for f in scan_lines(restarted, now_s=0.0) if f.kind == "crash"] == []
    gave_up = _ATTEMPT + loading + _GIVE_UP
    assert any("ValueError" in f.summary for f in scan_lines(gave_up, now_s=0.0) if f.kind == "crash")
    late = _ATTEMPT + ["[default0]:step 15/30 | loss 4.6"]
    assert any(f.kind == "crash" for f in scan_lines(late, now_s=0.0))


def test_a_logging_error_is_printed_not_raised_and_a_later_crash_is_still_found():
    """CPython's `--- Logging error ---` block (a handler that failed to emit: here a record
    whose arguments do not fit its format, as real Python prints it) is the traceback, then
    `Call stack:` frames and `Message: ...`: logging goes on, so no crash -- before
    2026-12-01 its `Message: '...'` line was read as the exception of a crash (seen when the
    SIGTERM of a `dfctl stop` landed in torchrun's agent's log call). A real crash after it
    is still reported."""
    import subprocess
    import sys

    prog = ("import logging\nlogging.basicConfig()\nlog = logging.getLogger('agent')\n"
            "def _close():\n    log.warning('Sending process %s closing signal %s', 4242)\n"
            "_close()\nprint('[progress] step=3 loss=1.5', flush=True)\n")
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    printed = (out.stdout + out.stderr).splitlines()
    assert "--- Logging error ---" in printed and "Call stack:" in printed and out.returncode == 0
    assert any(line.startswith("Message: 'Sending process %s closing signal %s'") for line in printed)
    assert [f.kind for f in scan_lines(printed)] == []
    crash = subprocess.run([sys.executable, "-c", prog + "raise RuntimeError('boom after the logging error')\n"],
                           capture_output=True, text=True, timeout=60)
    found = scan_lines((crash.stdout + crash.stderr).splitlines())
    assert [f.kind for f in found] == ["crash"] and "RuntimeError" in found[0].summary


def test_a_logging_error_whose_traceback_is_a_chain_is_printed_not_raised():
    """The SIGTERM of a `dfctl stop` raised torch's SignalException inside the agent's log call:
    logging printed a *chained* traceback before `Call stack:` (real run of the program below);
    the chain's second traceback is part of the same printing, so only the stop itself is found."""
    import subprocess
    import sys
    from pathlib import Path

    prog = Path(__file__).parent / "corpus" / "programs" / "logging_error_during_sigterm.py"
    out = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=120)
    printed = (out.stdout + out.stderr).splitlines()
    assert out.returncode == 0 and "--- Logging error ---" in printed and any(ln.startswith(TB_CHAIN_HEAD) for ln in printed)
    assert [f.kind for f in scan_lines(printed) if "death signal" not in f.summary] == []


TB_CHAIN_HEAD = "During handling of the above exception"
