"""Host allocation failures that close a line (issue 22, helper k15oom): perror()'s and Go's
"<what>: " + strerror(ENOMEM) at a line's end (glibc "Cannot allocate memory", Go syscall "cannot
allocate memory"), GMP's default allocator ("GNU MP: Cannot allocate memory (size=%lu)", memory.c, then
abort()), and the kernel's warn_alloc() lines in a pasted dmesg (mm/page_alloc.c "page allocation
failure: order:%u", mm/vmalloc.c "vmalloc: allocation failure: %lu bytes"). Pasted training-split logs
of index-zx (cksystemsgroup/scal#16, akrylysov/pogreb#72, MARIO-Math-Reasoning/Super_MARIO#19,
stec-inc/EnhanceIO#74), each shape with a healthy counter-example."""

from __future__ import annotations

from tests.judge_support import summaries_by_kind as _by_kind


def test_perror_enomem_at_line_end_is_oom():
    found = _by_kind(["posix_memalign: Cannot allocate memory", "", "Aborted (core dumped)"])
    assert "oom" in found, found


def test_go_enomem_error_string_is_oom():
    found = _by_kind(["2025/01/20 13:43:40 opening index: opening overflow index: cannot allocate memory"])
    assert "oom" in found, found


def test_gmp_allocation_failure_is_oom():
    found = _by_kind(["2356it [00:56, 48.63it/s]GNU MP: Cannot allocate memory (size=800296713216048)"])
    assert "oom" in found, found


def test_kernel_warn_alloc_lines_are_oom():
    found = _by_kind(["[ 1008.592076] vmalloc: allocation failure: 62830592 bytes",
                      "[ 1008.592079] eio_cli: page allocation failure: order:0, mode:0xd2"])
    assert "oom" in found, found


def test_the_words_mid_sentence_or_as_advice_are_quiet():
    healthy = ["INFO tip: if you ever see 'Cannot allocate memory' lower --workers (now 4)",
               "config: on_enomem=retry  # 'cannot allocate memory' handling",
               "epoch 3 step 900 loss 1.204 lr 3e-4 mem 10.2 GiB",
               "[ 1008.591342] enhanceio: Setting mode to write through",
               "[ 1008.592033] enhanceio: Allocate 61358KB (8B per) mem for 7853824-entry cache"]
    assert _by_kind(healthy) == {}, _by_kind(healthy)


def test_a_warning_ending_in_enomem_is_quiet():
    healthy = ["warning: mmap: Cannot allocate memory",
               "warning: failed to mlock 827228160-byte buffer (after previously locking 0 bytes): Cannot allocate memory"]
    assert _by_kind(healthy) == {}, _by_kind(healthy)
