"""Detectors: observations -> findings. Pure functions, no I/O, no clock of their own.

Two families:

- Text: `scan_lines` (one batch) and `TextScanner` (a stream, bounded memory) read log
  text through line repair (repair.py: launcher prefixes, timestamps, markdown quotes,
  hard wraps), a rule table (rules.py), and structure readers -- tracebacks with or
  without their header in CPython and IPython shapes (tracebacks.py), metric records in
  every common format so NaN/Inf is judged on the value (metrics.py), the fp16 loss-scale
  trajectory (loss_scale.py), command-line refusals (usage_errors.py), the kernel
  assertion behind a device-side assert (kernel_asserts.py), NCCL's multi-line error
  report (nccl_reports.py); launcher exit codes and signals are mapped once
  (exit_codes.py). line_scan.py composes them, after a word sieve (word_sieve.py) has
  picked the lines a reader may care about.
- State: `evaluate` reads the accumulated RunState (the watch loop fills it each tick):
  a stale (block-buffered) log, a hang, a throughput regression, idle or unreadable GPUs,
  start-up stalls, and how the process ended (state.py, regression.py).

Every finding carries the evidence behind it (clean lines or numbers, bounded, with the
line number of its first evidence line) and the next step to take (hints.py). Summaries
of lasting conditions avoid ever-changing numbers where they can (the registry
de-duplicates on kind + summary); the changing numbers go in evidence. The corpus these
rules are measured on is tests/corpus/ (bench/detectors.py).
"""

from controller.judge.evidence import EVIDENCE_LINE_CHARS, EVIDENCE_LINES, FAILURE_KINDS
from controller.judge.line_scan import MATCH_CHARS, MAX_FINDINGS_PER_SCAN, ScanState, final_findings, scan_lines
from controller.judge.regression import REGRESSION_WINDOW_SAMPLES, detect_regression, verdict_exit_code
from controller.judge.state import IDLE_UTIL_PCT, evaluate, last_error_line
from controller.judge.stream import TextScanner
from controller.judge.throughput_window import throughput_summary

__all__ = [
    "scan_lines", "final_findings", "evaluate", "throughput_summary", "verdict_exit_code", "detect_regression", "IDLE_UTIL_PCT",
    "TextScanner", "ScanState", "EVIDENCE_LINE_CHARS", "EVIDENCE_LINES", "FAILURE_KINDS", "MATCH_CHARS",
    "MAX_FINDINGS_PER_SCAN", "REGRESSION_WINDOW_SAMPLES", "last_error_line",
]
