"""Result records whose every value is NaN, judged on final text: `name = nan, ...`.

Programs that are not trainers print their numbers as `key=value` pairs on one line: a
gradient-descent example's result `After 10000 iterations b = nan, m = nan, error = nan`
(pasted mattnedrich/GradientDescentExample#2, its run() print), an RL evaluation's summary
`Reward: mean=nan, min=nan, max=nan, std=nan` (pasted akanazawa/fpo#4). The keys name no
loss, so metric_values.py does not read them; the values are what tells: a record of three
or more pairs that are ALL nan is a computation that produced nothing but NaN.

One such record is not yet a failure: an evaluation with no finished episode prints NaN
statistics before the first one finishes, and a live read may see finite ones next. So it is
judged only on final text (line_scan.final_findings), per record (the text before the first
pair, digits masked, names it): the LAST record of its name is all NaN and either an earlier
record of that name was finite (the values diverged: fpo's step 0 reward 3.06, NaN from step
6 on) or that record is the last line of the text (the program's final result). A record
whose NaN came first and finite values after, or an all-NaN record that is neither, stays
quiet. A finite record in an earlier batch than the first NaN one is not seen (a miss, never
a false alarm); every record after a NaN one is. State is bounded: at most MAX_NAMES record names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PAIR = re.compile(r"(?<![\w.])[A-Za-z_]\w{0,30} ?= ?(?P<v>[-+]?(?:nan|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))(?![\w.])",
                   re.I)
_DIGITS = re.compile(r"\d+")
MIN_PAIRS = 3
MAX_NAMES = 32


@dataclass
class _Record:
    had_finite: bool = False
    last_all_nan: bool = False
    line: int = 0
    text: str = ""
    first_nan_after_finite: str = ""


@dataclass
class NanRecords:
    names: dict[str, _Record] = field(default_factory=dict)
    reported: bool = False

    @property
    def pending(self) -> bool:
        """Some record's latest value is all NaN: the caller reads every later record line."""
        return not self.reported and any(r.last_all_nan for r in self.names.values())

    def feed(self, line: str, line_no: int) -> None:
        """A line with MIN_PAIRS or more '=' (the caller's cheap test). The caller feeds every
        such line of a batch once an all-NaN record is in it or pending from an earlier batch
        (the sieve passes only lines with a trigger word, and a finite record holds none)."""
        pairs = list(_PAIR.finditer(line))
        if len(pairs) < MIN_PAIRS:
            return
        name = _DIGITS.sub("#", line[:pairs[0].start()].strip().strip("\"'"))[-40:]
        rec = self.names.get(name)
        if rec is None:
            if len(self.names) >= MAX_NAMES:
                return
            rec = self.names[name] = _Record()
        all_nan = all(p.group("v").lower().lstrip("+-") == "nan" for p in pairs)
        if all_nan and rec.had_finite and not rec.last_all_nan:
            rec.first_nan_after_finite = line.strip()
        rec.last_all_nan, rec.line, rec.text = all_nan, line_no, line.strip()
        if not all_nan:
            rec.had_finite = True

    def at_end(self, last_line_no: int) -> tuple[str, list[str], int] | None:
        """(summary, evidence, line) of an all-NaN final record, or None."""
        if self.reported:
            return None
        for name, rec in self.names.items():
            if rec.last_all_nan and (rec.had_finite or rec.line == last_line_no):
                what = f"`{name}` " if name else ""
                if rec.had_finite:
                    return (f"every value of the last {what}record is NaN after finite ones ({rec.text[:120]}): "
                            "the computation diverged", [rec.first_nan_after_finite or rec.text, rec.text], rec.line)
                return (f"the final result is NaN in every value ({rec.text[:120]}): the computation diverged",
                        [rec.text], rec.line)
        return None
