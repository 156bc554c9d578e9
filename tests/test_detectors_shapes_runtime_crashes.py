"""Crashes printed by runtimes other than CPython (issue 22, helper k13crashlang): Rust's panic
hook, Go's panic / fatal error and goroutine traces, the JVM's uncaught-exception report, .NET's,
Node's (and V8's heap limit), Julia's and R's -- controller/judge/runtime_crashes.py and the
rules.py `v8-heap-oom` rule. Real output made here by rustc 1.95.0, go1.19.8, OpenJDK 17.0.15,
Node v20.20.2 and g++ 12.2 (tests/data/logs/crashlang_*.log, programs and their script in
tests/data/logs/programs/crashlang/), training-split pastes (tests/corpus/pasted/index-zl.json),
and each beside healthy text full of the same words that must stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge_support import summaries_by_kind as _by_kind

DATA = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _real(name: str) -> list[str]:
    return (DATA / f"crashlang_{name}.log").read_text(encoding="utf-8").splitlines()


def _pasted(name: str) -> list[str]:
    return (PASTED / f"{name}.log").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name,words", [
    ("rust_unwrap", ("Rust panic in thread 'main'", "train_panic.rs:22:61", "Result::unwrap()")),
    ("rust_unwrap_backtrace", ("Rust panic", "model.safetensors.missing")),
    ("rust_index", ("Rust panic", "index out of bounds")),
    ("rust_thread", ("Rust panic in thread 'loader-0'", "tokenizer.json not loaded")),
    ("go_nil", ("Go panic: runtime error: invalid memory address",)),
    ("go_index", ("Go panic: runtime error: index out of range",)),
    ("go_panic", ("Go panic: llama runner process has terminated",)),
    ("go_deadlock", ("Go runtime fatal error: all goroutines are asleep",)),
    ("java_main", ('thread "main"', "java.io.FileNotFoundException")),  # the root cause, not the wrapper
    ("java_thread", ('thread "loader-0"', "ArrayIndexOutOfBoundsException")),
    ("node_throw", ("Node.js died", "Error: ENOENT")),
    ("node_reject", ("Node.js died", "TypeError: Cannot read properties of undefined")),
    ("cxx_throw", ("std::runtime_error",)),
])
def test_real_runtime_crash_is_read_with_its_message(name, words):
    found = _by_kind(_real(name))
    assert list(found) == ["crash"], found
    assert all(any(w in s for s in found["crash"]) for w in words), found


@pytest.mark.parametrize("name", ["rust_healthy", "go_healthy", "java_healthy", "node_healthy", "cxx_healthy"])
def test_real_healthy_runs_full_of_panic_error_exception_words_stay_quiet(name):
    """catch_unwind + `warning:`/`panic` words (Rust), slog-style level=WARN/ERROR and a recovered panic
    (Go), java.util.logging WARNING and a caught exception's message with `Caused by:` (JVM),
    console.warn/error (Node), a caught exception's what() (C++)."""
    assert _by_kind(_real(name)) == {}


def test_v8_heap_limit_is_memory_not_a_crash():
    """Real: node --max-old-space-size=32 heap_oom.js (`FATAL ERROR: Reached heap limit Allocation failed -
    JavaScript heap out of memory`, then abort)."""
    found = _by_kind(_real("node_heap_oom"))
    assert list(found) == ["oom"], found
    assert _by_kind(["node --max-old-space-size=8192 train.js  # avoids JavaScript heap out of memory"]) == {}


@pytest.mark.parametrize("name,word", [
    ("keyvank_femtogpt-23", "src/tokenizer/simple.rs:43:47"),              # Rust >= 1.73 shape
    ("huggingface_tokenizers-888", "esaxx-rs-0.1.7/src/lib.rs:78:26"),     # Rust < 1.73: message inline
    ("mlc-ai_tokenizers-cpp-53", "panic in a function that cannot unwind"),
    ("sammcj_gollama-4", "nil pointer dereference"),
    ("ollama_ollama-11721", "runtime.throw"),                              # headerless, Go 1.24 header
    ("deeplearning4j_deeplearning4j-27", "IllegalStateException: Hidden unit type"),
    ("deeplearning4j_deeplearning4j-examples-715", "AMDSI prefetch thread"),
    ("skeydan_deep-learning-and-scientific-computing-with-r-torch-2", "unused argument (target)"),
])
def test_pasted_runtime_crashes_are_read(name, word):
    found = _by_kind(_pasted(name))
    assert list(found) == ["crash"], found
    assert any(word in s for s in found["crash"]), found


@pytest.mark.parametrize("name", ["ollama_ollama-1049", "ollama_ollama-12128", "deeplearning4j_deeplearning4j-879",
                                  "johnsnowlabs_spark-nlp-13592", "yahoo_caffeonspark-46",
                                  "graphprotocol_graph-node-1949", "openai_codex-2063"])
def test_pasted_healthy_logs_with_the_same_words_stay_quiet(name):
    """gin's `panic recovered:` (the server lived on), Spark/DL4J INFO/WARN lines, rustc `warning:` diagnostics."""
    assert _by_kind(_pasted(name)) == {}


def test_go_panic_word_without_a_goroutine_trace_stays_quiet_but_a_runtime_error_cut_off_is_a_crash():
    assert _by_kind(["step 10 loss 0.5", "panic: false", "retries: 3", "done"]) == {}
    assert _by_kind(["level=error msg=\"request failed\" error=\"panic: boom\"", "served 3"]) == {}
    found = _by_kind(["step 10 loss 0.5", "panic: runtime error: slice bounds out of range [:5] with capacity 3"])
    assert list(found) == ["crash"], found


def test_go_runtime_out_of_memory_is_memory():
    """go1.19.8 src/runtime/malloc.go's throw("out of memory") path prints `fatal error: runtime: out of memory`."""
    found = _by_kind(["fatal error: runtime: out of memory", "", "runtime stack:",
                      "goroutine 1 [running]:", "main.main()"])
    assert list(found) == ["oom"], found


def test_a_goroutine_dump_of_running_goroutines_stays_quiet():
    """A SIGQUIT-less `debug.Stack()`-style listing: goroutines in ordinary frames, no crash-path frame."""
    dump = ["goroutine 7 [running]:", "main.worker(0xc000012345)", "\t/app/main.go:40 +0x65",
            "goroutine 8 [chan receive]:", "main.serve()", "\t/app/main.go:55 +0x21"]
    assert _by_kind(dump) == {}


def test_jvm_out_of_memory_error_is_memory_and_the_root_cause_names_a_crash():
    found = _by_kind(['Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
                      "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3512)"])
    assert list(found) == ["oom"], found
    found = _by_kind(['Exception in thread "main" java.lang.RuntimeException: wrapped',
                      "\tat a.B.c(B.java:1)", "Caused by: java.lang.IllegalArgumentException: bad shape [0, 1]",
                      "\t... 1 more"])
    assert "IllegalArgumentException: bad shape" in found["crash"][0]


def test_jvm_logged_exceptions_and_python_thread_header_stay_out():
    healthy = ["16/03/30 15:38:53 INFO Executor: Finished task 0.0 in stage 145.0",
               "16/03/30 15:38:53 WARN TaskSetManager: Lost task 1.0 (java.io.IOException: retry 1 of 4)",
               "INFO skipped: Exception in thread pool handled (count 0)"]
    assert _by_kind(healthy) == {}


def test_dotnet_unhandled_exception_is_a_crash_and_its_inner_exception_named():
    found = _by_kind(["epoch 1 loss 0.7",
                      "Unhandled exception. System.InvalidOperationException: Schema mismatch for feature column"
                      " 'Features': expected Vector<Single>, got Vector<Double>",
                      "   at Microsoft.ML.Data.SchemaBindableBinaryPredictorWrapper.Bind(...)"])
    assert list(found) == ["crash"], found
    assert "InvalidOperationException" in found["crash"][0]
    old = _by_kind(["Unhandled Exception: System.AggregateException: One or more errors occurred. ---> "
                    "System.IO.FileNotFoundException: model.zip"])
    assert "FileNotFoundException" in old["crash"][0]
    assert _by_kind(["Unhandled exceptions: 0", "Unhandled exception handler installed"]) == {}


def test_julia_load_error_is_a_crash_and_out_of_memory_is_memory():
    found = _by_kind(["Epoch 1: loss 0.52", "ERROR: LoadError: DimensionMismatch: matrix A has dimensions (10,4)",
                      "Stacktrace:", " [1] gemm_wrapper!(...)"])
    assert list(found) == ["crash"], found
    assert list(_by_kind(["ERROR: LoadError: OutOfMemoryError()", "Stacktrace:"])) == ["oom"]


def test_rscript_error_then_execution_halted_is_a_crash_and_a_console_free_error_word_stays_quiet():
    found = _by_kind(["Epoch 1/10 loss: 0.69", "Error in (function (self, target) :", "  shape mismatch for target",
                      "Calls: fit -> luz_fit -> <Anonymous>", "Execution halted"])
    assert list(found) == ["crash"], found
    assert list(_by_kind(["Error: cannot allocate vector of size 7.5 Gb", "Execution halted"])) == ["oom"]
    assert _by_kind(["Epoch 3 done", "Error in batch 4 ignored: 0 rows", "Epoch 4 done"]) == {}


def test_rust_panic_wording_inside_a_line_or_a_note_stays_quiet():
    healthy = ["warning: unused variable: `panicked`", "note: set panic = \"abort\" in Cargo.toml",
               "INFO test harness: 0 tests panicked at setup", "   Compiling candle-core v0.8.0"]
    assert _by_kind(healthy) == {}
