"""What a finding's summary names (issue 14: "a crash finding names the exception"), held
on the real H200 logs in tests/corpus/device/ and on the readers behind it: the kernel
assertion a device-side assert came from (kernel_asserts.py), NCCL's last error below a
NCCL error (nccl_reports.py), the expression CPython marked in the user's frame
(tracebacks.failing_expression), the watchdog taking the process down (rules.py). With
hypothesis: wrapped, prefixed and ANSI-coloured copies keep the same summary."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.judge import scan_lines
from controller.judge.kernel_asserts import RECENT_LINES, KernelAssertions
from controller.judge.nccl_reports import read_report
from controller.judge.repair import repair, repaired
from controller.judge.tracebacks import failing_expression, read_tracebacks
from tests.corpus.corpus import HERE, ansi, scan_bytes, wrapped

DEVICE = HERE / "device"


def _device(name: str) -> list:
    return scan_bytes((DEVICE / f"{name}.log").read_bytes())


# -- the four device logs ---------------------------------------------------------------

def test_device_assert_names_exception_frame_kernel_and_condition_once_with_a_count():
    (f,) = _device("gpu-assert-label")
    assert f.kind == "crash" and f.line == 17
    assert f.summary == ("torch.AcceleratorError: CUDA device-side assert triggered at gpu_train.py:99 in "
                         "assert_label (`loss.item()`): assertion `t >= 0 && t < n_classes` failed in kernel "
                         "nll_loss_forward_reduce_cuda_kernel_2d (Loss.cu:245)")
    assert "thread: [3,0,0] Assertion" in f.evidence[0]
    assert "failed 3 times in all, log lines 6-8" in f.evidence[1]
    assert f.evidence[-1] == "torch.AcceleratorError: CUDA error: device-side assert triggered"
    assert sum("Assertion `" in e for e in f.evidence) == 1  # once, not per thread


def test_gather_assert_counts_its_64_thread_lines():
    (f,) = _device("gpu-assert-index")
    assert f.summary.startswith("torch.AcceleratorError: CUDA device-side assert triggered at gpu_train.py:116")
    assert "kernel vectorized_gather_kernel (IndexKernelUtils.cu:16)" in f.summary
    assert "failed 64 times in all, log lines 6-69" in f.evidence[1]
    assert len(f.evidence) <= 10 and sum("Assertion `" in e for e in f.evidence) == 1


def test_blocking_assert_points_at_the_call_that_failed():
    (f,) = _device("gpu-assert-label-blocking")
    assert "at gpu_train.py:95 in assert_label (`F.cross_entropy(model(x), labels)`)" in f.summary
    assert "`t >= 0 && t < n_classes`" in f.summary


def test_illegal_address_names_exception_and_user_frame_and_library_echoes_stay_one_finding():
    found = _device("gpu-illegal-address")
    # CuPy's module unload fails the same way at exit (twice): that is the same fault, not a new one
    assert [(f.kind, f.summary, f.line) for f in found] == [
        ("crash", "torch.AcceleratorError: CUDA illegal memory access at gpu_train.py:147 in illegal_address "
                  "(`loss.item()`)", 16)]


def test_nccl_error_is_one_finding_that_names_nccls_last_error():
    found = _device("torchrun-nccl-same-gpu")
    nccl = [f for f in found if "NCCL" in f.summary]
    assert len(nccl) == 1, [f.summary for f in found]
    (f,) = nccl
    assert f.summary == ("torch.distributed.DistBackendError: NCCL error: invalid usage at nccl_run.py:55 in main: "
                         "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60")
    assert f.line == 32 and f.evidence[-1] == "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60"
    # the launcher's report of the death stays its own finding
    assert any(x.summary.startswith("torchrun: local rank 0 (pid 902) died") for x in found)


def test_watchdog_abort_says_the_process_was_taken_down_and_a_hang_stays_a_hang():
    abort = {(f.kind, f.summary) for f in _device("nccl-watchdog-abort")}
    hang = {(f.kind, f.summary) for f in _device("nccl-watchdog-hang")}
    timed_out = ("hang", "NCCL collective timed out: ALLREDUCE (SeqNum 8) ran 10 s, timeout 10 s")
    assert timed_out in abort and timed_out in hang
    assert ("crash", "NCCL watchdog took the process down (abort: SIGABRT): ALLREDUCE (SeqNum 8) had timed out") in abort
    assert hang == {timed_out}


# -- the readers as units ---------------------------------------------------------------

ASSERT_LINE = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: "
               "block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.")


def test_kernel_assertions_count_repeats_and_others_and_are_used_up():
    ka = KernelAssertions()
    assert not ka.feed("AssertionError: pytest's, not a kernel's", 1, "")
    for n in range(5):
        assert ka.feed(ASSERT_LINE.format(t=n), 10 + n, ASSERT_LINE.format(t=n))
    other = ASSERT_LINE.replace("Loss.cu:245", "Loss.cu:300")
    assert ka.feed(other.format(t=9), 15, "")
    got = ka.take(20)
    assert got is not None and got.repeats == 5 and got.others == 1
    assert (got.where, got.kernel, got.condition) == ("Loss.cu:245", "nll_loss_forward_reduce_cuda_kernel_2d",
                                                       "t >= 0 && t < n_classes")
    assert got.evidence()[1].endswith("failed 5 times in all, log lines 10-15 (one line per GPU thread)")
    assert ka.take(21) is None  # used up


def test_a_stale_kernel_assertion_is_not_the_cause():
    ka = KernelAssertions()
    ka.feed(ASSERT_LINE.format(t=0), 1, "")
    assert ka.take(2 + RECENT_LINES) is None


def test_device_assert_without_the_kernel_lines_keeps_the_plain_summary():
    (f,) = scan_lines(["RuntimeError: CUDA error: device-side assert triggered"], now_s=0.0)
    assert f.summary == "CUDA device-side assert triggered"


NCCL = ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        "socketStartConnect: Connect to 10.200.0.2<43211> failed : Connection refused"]


def test_nccl_report_reads_interpretation_and_last_error():
    rep = repair(NCCL + ["step 5 loss 2.0"])
    r = read_report(rep, 0)
    assert r.cause == NCCL[3] and r.lines == (1, 2, 3)
    one_line = repair([NCCL[0], NCCL[1], "Last error: Unknown NCCL Error"])
    assert read_report(one_line, 0).cause == "" and read_report(one_line, 0).lines == (1, 2)
    assert read_report(repair([NCCL[0], "step 5 loss 2.0"]), 0).lines == ()


def test_nccl_report_is_read_on_its_own_rank_only():
    rep = repair(["[rank0]:" + NCCL[0], "[rank1]:step 9 loss 2.0", "[rank0]:" + NCCL[2], "[rank0]:" + NCCL[3]])
    assert read_report(rep, 0).cause == NCCL[3]


def test_failing_expression_reads_the_carets():
    lines = ["Traceback (most recent call last):", '  File "/w/train.py", line 9, in step',
             '    print(f"loss {loss.item():.4f}")', "                  ^^^^^^^^^^^", "RuntimeError: boom"]
    rep = repair(lines)
    (tb,) = read_tracebacks(rep)
    assert failing_expression(rep, tb, tb.frames[-1]) == "loss.item()"
    whole = lines[:3] + ["    " + "^" * 40] + lines[4:]
    rep = repair(whole)
    (tb,) = read_tracebacks(rep)
    assert failing_expression(rep, tb, tb.frames[-1]) == ""  # marks outside the code: not aligned
    none = lines[:3] + lines[4:]
    rep = repair(none)
    (tb,) = read_tracebacks(rep)
    assert failing_expression(rep, tb, tb.frames[-1]) == ""


# -- decorated copies keep the same summary (hypothesis) ---------------------------------

PREFIX = st.sampled_from(["", "[rank3]: ", "[default0]:", "(RayTrainWorker pid=3369) [rank7]: ", "[1,0]<stderr>:",
                          "> ", "12345 | ", "2026-12-01T10:00:00.123Z ", "[2026-12-01 10:00:00,123] [INFO] "])


def _assert_log(threads: int, steps: int) -> list[str]:
    return ([f"step {s} loss 2.30{s}" for s in range(1, steps + 1)]
            + [ASSERT_LINE.format(t=t) for t in range(threads)]
            + ["Traceback (most recent call last):",
               '  File "/src/gpu_train.py", line 99, in assert_label',
               '    print(f"step {step} loss {loss.item():.4f}", flush=True)',
               "                              ^^^^^^^^^^^",
               "torch.AcceleratorError: CUDA error: device-side assert triggered",
               "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/ for more information.",
               "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"])


def _summaries(text: str) -> list[str]:
    return [f.summary for f in scan_bytes(text.encode()) if f.kind == "crash"]


def _decorate(lines: list[str], prefix: str, colour: bool, wrap: int | None) -> str:
    """Prefixed, then ANSI-coloured or hard-wrapped (not both: a hard wrap comes from
    copying a terminal's screen, which keeps no colour)."""
    text = "\n".join(prefix + x for x in lines) + "\n"
    if wrap:
        return wrapped(text, wrap)
    return ansi(text) if colour else text


@settings(max_examples=40)
@given(PREFIX, st.booleans(), st.sampled_from([None, 80, 100, 120]), st.integers(1, 40), st.integers(1, 12))
@example("2026-12-01T10:00:00.123Z ", False, None, 3, 4)  # the timestamp peel takes the indentation with it
def test_device_assert_summary_survives_decoration(prefix, colour, wrap, threads, steps):
    if wrap:
        # repair knows a copy is hard-wrapped from two or more lines cut at one terminal
        # width (repair.wrap_width); one cut line is as likely a line that long
        threads = max(threads, 2)
    lines = _assert_log(threads, steps)
    want = _summaries("\n".join(lines) + "\n")
    assert want == ["torch.AcceleratorError: CUDA device-side assert triggered at gpu_train.py:99 in assert_label "
                    "(`loss.item()`): assertion `t >= 0 && t < n_classes` failed in kernel "
                    "nll_loss_forward_reduce_cuda_kernel_2d (Loss.cu:245)"]
    assert _summaries(_decorate(lines, prefix, colour, wrap)) == want


@settings(max_examples=30)
@given(PREFIX, st.booleans(), st.sampled_from([None, 80, 120]), st.integers(1, 8))
def test_nccl_report_summary_survives_decoration_and_ranks_repeat_it(prefix, colour, wrap, ranks):
    tb = ["Traceback (most recent call last):", '  File "/src/nccl_run.py", line 55, in main',
          '    dist.init_process_group("nccl")']
    lines = [f"rank {r} starting" for r in range(ranks)]
    for _ in range(ranks):  # every rank prints the same error: one finding
        lines += tb + NCCL
    want = _summaries("\n".join(lines) + "\n")
    assert want == ["torch.distributed.DistBackendError: NCCL error: unhandled system error at nccl_run.py:55 in "
                    "main: socketStartConnect: Connect to 10.200.0.2<43211> failed : Connection refused"]
    assert _summaries(_decorate(lines, prefix, colour, wrap)) == want


@settings(max_examples=30)
@given(PREFIX, st.booleans(), st.integers(0, 30))
def test_healthy_text_with_assertion_and_watchdog_words_stays_quiet(prefix, colour, n):
    lines = [f"step {s} loss 1.{s:02d}" for s in range(n)] + [
        "tests/test_model.py::test_shapes PASSED (Assertion `x.dim() == 2` checked)",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=3: the watchdog takes the process down on a timeout",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "NCCL INFO Last error: none"]
    text = _decorate(lines, prefix, colour, None)
    assert [f for f in scan_bytes(text.encode()) if f.kind in ("crash", "hang", "oom", "nan")] == []


def test_repaired_lines_are_what_the_readers_see():
    # the lazily repaired path (no wrap) and the joined path give the readers the same text
    lines = _assert_log(3, 10)
    assert [ln.text for ln in repaired(lines)] == [ln.text for ln in repair(lines)]


DEVICE_FAILURES = ("gpu-assert-label", "gpu-assert-index", "gpu-assert-label-blocking", "gpu-illegal-address",
                   "torchrun-nccl-same-gpu", "nccl-watchdog-abort", "nccl-watchdog-hang")


def test_stream_in_small_batches_gives_the_same_summaries():
    """The readers' state (kernel assertions counted, NCCL report lines used, the exception
    named) spans batches: 32-line batches, smaller than the 64-line assertion run, give
    what one read of the whole file gives."""
    from controller.follow.logparse import split_lines
    from controller.judge import TextScanner

    for name in DEVICE_FAILURES:
        data = (DEVICE / f"{name}.log").read_bytes()
        whole = [(f.kind, f.summary, f.line, f.evidence) for f in scan_bytes(data)]
        for step in (1, 5, 13):
            sc = TextScanner(now_s=0.0, batch_lines=32, overlap_lines=16)
            lines, carry = split_lines(data, b"")
            assert carry == b""
            for i in range(0, len(lines), step):
                sc.feed(lines[i:i + step])
            sc.finish()
            assert [(f.kind, f.summary, f.line, f.evidence) for f in sc.all_findings()] == whole, (name, step)


def test_a_real_cpython_traceback_names_the_marked_expression(tmp_path):
    """The caret line as this interpreter prints it (3.11+: `~~~~~^^^^^` under a subscript)."""
    import subprocess
    import sys

    prog = tmp_path / "train_step.py"
    prog.write_text('def step(batch):\n    return len(batch) + batch["input_ids"]\n\n\nstep({})\n')
    out = subprocess.run([sys.executable, str(prog)], capture_output=True, timeout=60)
    assert out.returncode == 1 and b"^^^" in out.stderr
    (f,) = [x for x in scan_bytes(out.stderr) if x.kind == "crash"]
    assert f.summary == "KeyError: 'input_ids' at train_step.py:2 in step (`batch[\"input_ids\"]`)"
