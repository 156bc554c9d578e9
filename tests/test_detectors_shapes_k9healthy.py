"""Healthy shapes full of tempting words (issue 22's 0 false alarms): each test names a shape
a healthy run prints that a reader once flagged, with the text of a training-split pasted
log, and beside it the failing shape the reader must still find."""

from __future__ import annotations

from controller.judge import TextScanner


def _final(lines: list[str]) -> list:
    """check-log's path: the whole text, then finish() (the text is final)."""
    sc = TextScanner(now_s=0.0)
    sc.feed(lines)
    sc.finish()
    return sc.all_findings()


def _kinds(findings) -> list[str]:
    return sorted({f.kind for f in findings if f.kind in ("oom", "crash", "hang", "nan")})


# ultralytics/yolov5#8406: printed "at the end of training"
IGNORED_AT_EXIT = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f4972feac10>",
    "Traceback (most recent call last):",
    '  File "/home/wonchul/anaconda3/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1328, in __del__',
    '  File "/home/wonchul/anaconda3/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1262, in '
    "_shutdown_workers",
    "AttributeError: 'NoneType' object has no attribute 'python_exit_status'",
]


def test_an_exception_python_ignored_is_no_crash_even_as_the_last_line_of_the_log():
    """CPython's unraisable hook (`Exception ignored in: ...`, a __del__ at interpreter exit)
    prints a traceback and goes on: its exception line ending the log is not the program
    dying on it."""
    assert _kinds(_final(IGNORED_AT_EXIT)) == []
    assert _kinds(_final(["Epoch 4: 100%|██████████| 100/100 [00:10<00:00, loss=0.11]", *IGNORED_AT_EXIT])) == []


def test_the_same_exception_raised_is_still_a_crash_as_the_last_line():
    """Without the `Exception ignored in` line the traceback was raised: a crash, and the bare
    exception line ending a paste stays one too."""
    raised = IGNORED_AT_EXIT[1:]
    (f,) = [f for f in _final(raised) if f.kind == "crash"]
    assert f.summary.startswith("AttributeError: 'NoneType' object has no attribute 'python_exit_status'"), f.summary
    (g,) = [f for f in _final([raised[-1]]) if f.kind == "crash"]
    assert g.summary.endswith("(the last line of the log)"), g.summary


def test_an_ignored_exception_before_a_raised_one_does_not_hide_the_crash():
    raised = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    main()",
              "RuntimeError: CUDA error: an illegal memory access was encountered"]
    found = _final([*IGNORED_AT_EXIT, *raised])
    assert any(f.kind == "crash" and "illegal memory access" in f.summary
               for f in found), [f.summary for f in found]


# facebookresearch/fairseq#103 (torch < 1.0): THC's own check line, glued to fairseq's bar
THC_OOM = [
    "| epoch 001:   0%|▏          | 315/72115 [01:24<5:21:16,  3.72it/s, loss=11.45 (12.65), oom=0]THCudaCheck FAIL "
    "file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
    "| WARNING: ran out of memory on GPU #2, skipping batch",
    "| epoch 001:   0%|▏          | 318/72115 [01:25<5:21:15,  3.72it/s, loss=12.26 (12.65), oom=0.00943396]",
]


def test_thcudacheck_error_2_is_an_oom_and_a_skipped_batch_marks_it_recovered():
    (f,) = [f for f in _final(THC_OOM) if f.kind == "oom"]
    assert "out of memory" in f.summary and "recovered" in f.summary, f.summary
    assert f.severity == "warning"
    (g,) = [f for f in _final(THC_OOM[:1]) if f.kind == "oom"]  # not followed by a recovery: critical
    assert g.severity == "critical", g


def test_thcudacheck_of_another_error_is_not_an_oom():
    other = ["THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=59 : "
             "device-side assert triggered", "step 12 loss 0.53"]
    assert not [f for f in _final(other) if f.kind == "oom"]
