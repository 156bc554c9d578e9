"""CLI command `dfctl check-log PATH`: the detectors over a log file, post-mortem.
`dfctl check-log -` reads standard input, so a log pasted from an issue or a chat can be
checked (`pbpaste | dfctl check-log -`, `kubectl logs … | dfctl check-log -`).

Wiring only: stream the file in 1 MiB chunks through logparse.split_lines (so a 2 GB log
or a 100 MB line without newline costs bounded memory), feed detectors.TextScanner, add
the regression verdict against --baseline-tok-s, and render. Exit 0 healthy, 4 a failure
found, 5 a regression only, 2 when the file cannot be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from controller.cli.app import app
from controller.errors import BadInputError
from controller.follow.logparse import flush_carry, split_lines
from controller.playbook import WatchConfig
from controller.records import Finding, to_jsonable

if TYPE_CHECKING:
    from controller.judge import TextScanner

CHUNK_BYTES = 1 << 20


def check_log_file(path: Path, baseline_tok_per_s: float | None = None,
                   progress_pattern: str | None = None, cfg: WatchConfig | None = None) -> dict[str, Any]:
    """Scan one log file; return the report document (findings, wandb, throughput)."""
    from controller.judge import TextScanner  # here, not at the top: every dfctl start paid for numpy

    cfg = cfg or WatchConfig()
    if baseline_tok_per_s is None:
        baseline_tok_per_s = cfg.baseline_tok_per_s
    scanner = TextScanner(progress_pattern=progress_pattern or cfg.progress_pattern, now_s=None)
    if str(path) == "-":
        _feed(scanner, sys.stdin.buffer, "standard input")
        return _report(scanner, "<stdin>", cfg, baseline_tok_per_s)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such log file") from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a directory, not a log file") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with fh:
        _feed(scanner, fh, str(path))
    return _report(scanner, str(path), cfg, baseline_tok_per_s)


def _feed(scanner: TextScanner, fh, where: str) -> None:
    """Stream `fh` through split_lines into the scanner, 1 MiB at a time."""
    carry = b""
    while True:
        try:
            chunk = fh.read(CHUNK_BYTES)
        except OSError as exc:
            raise BadInputError(f"{where}: cannot read: {exc.strerror or exc}") from None
        if not chunk:
            break
        lines, carry = split_lines(chunk, carry)
        scanner.feed(lines)
    scanner.feed(flush_carry(carry))
    scanner.finish()


def _report(scanner: TextScanner, path: str, cfg: WatchConfig, baseline_tok_per_s: float | None) -> dict[str, Any]:
    from controller.judge import detect_regression, throughput_summary

    findings = scanner.all_findings()
    progress = list(scanner.progress)
    # the whole log's warm window: the samples that left the scanner's deque count too
    throughput = throughput_summary(progress, cfg, baseline_tok_per_s, older=scanner.older_throughput) \
        if progress else None
    # The regression windows read the deque: a truncated one (very long log) is long past warm-up.
    regression = detect_regression(progress, cfg if not scanner.progress_truncated else _no_warmup(cfg),
                                   baseline_tok_per_s)
    if regression is not None:
        findings.append(regression)
    wandb = None
    if scanner.wandb is not None and (scanner.wandb.run_id or scanner.wandb.url):
        wandb = {"run_id": scanner.wandb.run_id, "url": scanner.wandb.url, "mode": scanner.wandb.mode,
                 "offline_dir": scanner.wandb.offline_dir}
    return {
        "path": path,
        "lines": scanner.lines_seen,
        "findings": findings,
        "milestones": scanner.milestones,
        "wandb": wandb,
        "throughput": throughput,
    }


def _no_warmup(cfg: WatchConfig) -> WatchConfig:
    import dataclasses

    return dataclasses.replace(cfg, warmup_s=0.0, warmup_steps=0)


def _finding_doc(f: Finding) -> dict[str, Any]:
    return {"kind": f.kind, "severity": f.severity, "line": f.line, "summary": f.summary,
            "evidence": list(f.evidence), "hint": f.hint}


_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _render_human(report: dict[str, Any], code: int) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    findings: list[Finding] = report["findings"]
    for f in findings:
        where = f"line {f.line}: " if f.line else ""
        out.print(f"[{_STYLE.get(f.severity, '')}]{f.severity.upper():8}[/] {f.kind:13} {where}{escape(f.summary)}")
        for ev in f.evidence[:6]:
            out.print(f"    [dim]│[/] {escape(ev)}")
        if f.hint:
            out.print(f"    [dim]→[/] {escape(f.hint)}")
    w = report["wandb"]
    if w:
        out.print(f"wandb: run {escape(str(w['run_id']))} ({w['mode']})"
                  + (f" {escape(w['url'])}" if w.get("url") else "")
                  + (f" {escape(w['offline_dir'])}" if w.get("offline_dir") else ""))
    t = report["throughput"]
    if t and t.get("tok_per_s"):
        from controller.judge.throughput_window import fmt_tok_per_s

        tok = t["tok_per_s"]
        line = (f"throughput: median {fmt_tok_per_s(tok['median'])} tok/s (p10 {fmt_tok_per_s(tok['p10'])}, "
                f"p90 {fmt_tok_per_s(tok['p90'])}) over the {t['window']['label']}"
                f" ({t['samples_used']} samples{'' if t['warm'] else ', no warm-up excluded: short log'})")
        deficit = t.get("deficit_pct")
        if deficit is not None:
            side = "below" if deficit > 0 else "above"
            line += f"; {abs(deficit):.0f}% {side} the {fmt_tok_per_s(t['baseline_tok_per_s'])} baseline"
        out.print(line)
    verdict = {0: "[green]healthy[/]", 4: "[bold red]failure found[/]", 5: "[yellow]throughput regression[/]"}[code]
    out.print(f"{escape(report['path'])}: {report['lines']} lines, {len(findings)} finding(s): {verdict}")


@app.command("check-log")
def check_log(
    path: Path = typer.Argument(..., help="Log file to check (read post-mortem, in bounded memory); - reads "
                                          "standard input (a pasted log)."),
    baseline_tok_s: Optional[float] = typer.Option(
        None, "--baseline-tok-s", help="Reference throughput (target tok/s) for the regression check."),
    progress_pattern: Optional[str] = typer.Option(
        None, "--progress-pattern",
        help="Regex with named groups (step, tok_per_s, loss, ...) for another trainer's progress lines."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout; hints go to stderr."),
) -> None:
    """Run the failure detectors over a log file: OOM, crash, hang, NaN, recompiles, regression.

    Exit 0 healthy, 4 a failure found (OOM, crash, hang, NaN), 5 a throughput regression
    only, 2 when the file cannot be read.

    Examples: dfctl check-log runs/train.log · pbpaste | dfctl check-log - --json
    """
    from controller.judge import verdict_exit_code

    report = check_log_file(path, baseline_tok_s, progress_pattern)
    code = verdict_exit_code(report["findings"])
    if as_json:
        doc = {
            "findings": [_finding_doc(f) for f in report["findings"]],
            "wandb": report["wandb"],
            "throughput": report["throughput"],
        }
        sys.stdout.write(json.dumps(to_jsonable(doc), ensure_ascii=False) + "\n")
        sys.stdout.flush()
        for f in report["findings"]:
            if f.hint:
                print(f"dfctl: hint: {f.kind}: {f.hint}", file=sys.stderr)
    else:
        _render_human(report, code)
    raise typer.Exit(code)
