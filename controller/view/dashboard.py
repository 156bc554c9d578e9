"""The live terminal dashboard: `render(states, selected)` -> one Rich renderable.

It draws only `RunState`s (controller/records.py), the same objects `dfctl watch --json`
prints, so the screen and the machine output cannot disagree. The Live loop (refresh rate,
keys, restoring the terminal) lives in the watch command; this module has no I/O.

Layout, top to bottom: the fleet (a compact row per run, only with several runs), then the
selected run in full -- header, GPUs, throughput (+ training beside it on wide terminals),
findings, log tail. The terminal's rows are budgeted at render time: every section first
gets its minimum (one line each, so nothing important vanishes at 80x24), then the rest is
handed out in priority order -- findings, fleet, GPUs, chart, header -- and the log tail
takes what is left. Every line is cut to the width, so nothing ever wraps or overflows.

`python -m controller.view.dashboard [--width W --height H] [--selected N]` renders sample state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text

from controller.records import JobState, RunState
from controller.view.findings import finding_lines
from controller.view.fleet import fleet_lines
from controller.view.gpus import gpu_lines, gpu_lines_wanted, run_gpus
from controller.view.header import header_lines
from controller.view.job_block import job_lines, job_lines_wanted
from controller.view.logtail import log_lines
from controller.view.throughput_panel import throughput_lines
from controller.view.training import training_lines

WIDE_COLS = 120
"""From this width on, training figures sit beside the throughput chart."""


def rule(title: str, width: int) -> Text:
    """A section title: `── findings (3) ─────────`."""
    t = Text(no_wrap=True, overflow="crop")
    t.append("── ", style="bright_black")
    t.append(title, style="bold")
    t.append(" " + "─" * max(0, width - len(title) - 4), style="bright_black")
    return t


def side_by_side(left: list[Text], right: list[Text], left_w: int) -> list[Text]:
    """Two columns of lines joined row by row; the left is padded/cut to `left_w` cells."""
    out = []
    for i in range(max(len(left), len(right))):
        line = left[i].copy() if i < len(left) else Text()
        line.truncate(left_w, overflow="ellipsis", pad=True)
        line.no_wrap, line.overflow = True, "ellipsis"
        if i < len(right):
            line.append(" │ ", style="bright_black")
            line.append_text(right[i])
        out.append(line)
    return out


@dataclass
class Section:
    """One block of the screen: how many lines it needs at least, and how to draw n lines."""

    name: str
    minimum: int
    draw: Callable[[int], list[Text]]
    lines: int = 0


@dataclass
class Dashboard:
    """The renderable: lays itself out when Rich tells it the console's width and height."""

    states: list[RunState]
    selected: int = 0
    now_s: float | None = None
    sections: list[Section] = field(default_factory=list)
    jobs: list[JobState] = field(default_factory=list)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = options.height or options.size.height or 24
        yield from self.lines(width, height)

    def lines(self, width: int, height: int) -> list[Text]:
        """The screen as at most `height` lines of at most `width` cells."""
        now_s = time.time() if self.now_s is None else self.now_s
        if not self.states:
            return [Text("no runs to show", style="dim")]
        sel = min(max(self.selected, 0), len(self.states) - 1)
        run = self.states[sel]
        n_runs = len(self.states)
        gpus, _ = run_gpus(run)
        wide = width >= WIDE_COLS

        def fleet(n: int) -> list[Text]:
            if n <= 0:
                return []
            return [rule(f"runs ({n_runs})", width)] + fleet_lines(self.states, sel, width, n - 1, now_s)

        def findings(n: int) -> list[Text]:
            if n <= 0:
                return []
            return [rule(f"findings ({len(run.findings)})", width)] + finding_lines(run.findings, width, n - 1, now_s)

        def log(n: int) -> list[Text]:
            if n <= 1:
                return []
            return [rule("log", width)] + log_lines(run.log_tail, width, n - 1, now_s)

        left_w = int(width * 0.62) if wide else width
        right_w = width - left_w - 3

        def speed(n: int) -> list[Text]:
            if not wide:
                return throughput_lines(run, width, n, now_s)
            return side_by_side(throughput_lines(run, left_w, n, now_s),
                                training_lines(run, right_w, n, now_s), left_w)

        training_need = len(training_lines(run, width, 9, now_s))
        jobs = self.jobs

        def job_block(n: int) -> list[Text]:
            out: list[Text] = []
            for j in jobs:
                if n - len(out) <= 0:
                    break
                out += job_lines(j, width, n - len(out), now_s)
            return out

        job_min = sum(min(job_lines_wanted(j), 1 + len(j.nodes) + (1 if j.first_failure else 0)) for j in jobs)
        sections = {
            "job": Section("job", job_min, job_block),
            "fleet": Section("fleet", 0 if n_runs == 1 else 1 + min(n_runs, 2), fleet),
            "header": Section("header", 1, lambda n: header_lines(run, width, n, now_s)),
            "gpus": Section("gpus", 1, lambda n: gpu_lines(run, width, n, now_s)),
            "speed": Section("speed", 1, speed),
            "training": Section("training", 0 if wide else 1,
                                lambda n: [] if wide else training_lines(run, width, n, now_s)),
            "findings": Section("findings", 2, findings),
            "log": Section("log", 0, log),
        }
        n_find = len(run.findings)
        plan = [  # (section, total lines it may grow to), handed out in this order
            ("job", job_min),
            ("header", 1), ("speed", 1), ("training", 0 if wide else 1), ("findings", 2),
            ("fleet", 0 if n_runs == 1 else 1 + min(n_runs, 2)), ("gpus", 1),
            ("findings", 1 + min(n_find, 1) * 3 + max(0, min(n_find, 3) - 1)),
            ("fleet", 0 if n_runs == 1 else 1 + min(n_runs, 4)),
            ("gpus", min(1 + min(len(gpus), 4), gpu_lines_wanted(width, len(gpus)))),
            ("speed", 3 if not wide else max(3, training_need)),
            ("training", 0 if wide else training_need),
            ("log", 3),
            ("header", 2),
            ("gpus", gpu_lines_wanted(width, len(gpus))),
            ("findings", 1 + 3 * n_find),
            ("fleet", 0 if n_runs == 1 else 1 + n_runs),
            ("speed", 5),
            ("job", sum(job_lines_wanted(j) for j in jobs)),
            ("log", 10 ** 6),
        ]
        left = height
        for name, target in plan:
            sec = sections[name]
            grow = max(0, min(target - sec.lines, left))
            sec.lines += grow
            left -= grow
        order = ["job", "fleet", "header", "gpus", "speed", "training", "findings", "log"]
        out: list[Text] = []
        for name in order:
            sec = sections[name]
            if sec.lines > 0:
                out += sec.draw(sec.lines)[: sec.lines]
        for line in out:
            line.no_wrap = True
            if line.overflow not in ("ellipsis", "crop"):
                line.overflow = "ellipsis"
        return out[:height]


def render(states: list[RunState], selected: int = 0, *, now_s: float | None = None,
           jobs: list[JobState] | None = None) -> RenderableType:
    """The whole screen for these runs; `selected` picks the run shown in full. A job's
    block (controller/view/job_block.py) comes first; its nodes are runs of `states`.

    The returned renderable measures the console when it is printed (Live or print), so
    one object fits 80x24 and uses a 200-column terminal. `now_s` pins the clock (tests).
    """
    return Dashboard(states=list(states), selected=selected, now_s=now_s, jobs=list(jobs or []))


def main(argv: list[str] | None = None) -> None:
    """Render sample state once: `python -m controller.view.dashboard [--width W] [--height H]`."""
    import argparse

    from controller.view.demo import sample_states

    ap = argparse.ArgumentParser(prog="python -m controller.view.dashboard", description=main.__doc__)
    ap.add_argument("--width", type=int, default=None, help="columns (default: the terminal's)")
    ap.add_argument("--height", type=int, default=None, help="rows (default: the terminal's)")
    ap.add_argument("--selected", type=int, default=2, help="which sample run to show in full")
    ap.add_argument("--runs", type=int, default=3, help="how many sample runs (1-8)")
    ap.add_argument("--job", action="store_true", help="a sample 2-node job instead (rank 11 out of memory)")
    args = ap.parse_args(argv)
    console = Console(width=args.width, height=args.height)
    now_s = time.time()
    if args.job:
        from controller.view.demo import sample_job

        states, job = sample_job(now_s)
        console.print(render(states, 0, now_s=now_s, jobs=[job]))
        return
    console.print(render(sample_states(now_s, n_runs=args.runs), args.selected, now_s=now_s))


if __name__ == "__main__":
    main()
