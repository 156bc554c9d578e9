"""A free-form progress line -> its figures, by pairing each number with the word that
names it, never by position.

Trainers print `key value` (`tok/s 6020`, `loss: 1.42`, `tokens_per_sec=6020`) and
`value unit` (`6020 tok/s`, `5.38it/s`, `729.8 examples/sec`), often both on one line.
Reading "the number before `tok/s`" takes the loss out of `step 65 loss 1.4292 tok/s 6020`
(issue 26.1). So the line is cut into words and numbers, and each number is given to at
most one neighbour: the word before it (a key) or, for a rate word such as `tok/s`, the
word after it (a unit). Every such pairing is an edge; the reading is the set of edges
that pairs the most (a `:`/`=` key binds hardest, then known words, then unknown ones),
each word and number used once. Where two readings pair equally well (`6020 tok/s 1.42`:
is `tok/s` the unit of 6020 or the key of 1.42?) the contested edges are read as nothing:
a missing figure costs a tick, a wrong one a wrong verdict. Pure, no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Multi-word keys, spelled as one word before the line is cut (case-insensitive).
_PHRASE_WORDS = (
    (r"elapsed[ _]time[ _]per[ _]iteration[ _]?\(ms\)", "step_time_ms"),
    (r"time per (?:step|iteration)", "step_time"),
    (r"\biter(?:ation)? time\b", "iter_time"),
    (r"\bper-step time\b", "step_time"),
    (r"\btrain_step_timing in s\b", "step_time_s"),
    (r"\blearning[ _]rate\b", "lr"),
    (r"\btokens? per sec(?:ond)?\b", "tok/s"),
    (r"\bsamples? per sec(?:ond)?\b", "samples/s"),
    (r"\bloss train(?: \(curr\))?", "loss"),
    (r"\b(?:val(?:id(?:ation)?)?|eval|test)[ _]loss\b", "eval_loss"),
    (r"\b(?:train(?:ing)?|lm) loss\b", "loss"),
    (r"\bglobal[ _]step\b", "global_step"),
)
_PHRASE_RE = re.compile("|".join(f"({p})" for p, _ in _PHRASE_WORDS), re.I)


def _phrase_word(m: re.Match[str]) -> str:
    return _PHRASE_WORDS[(m.lastindex or 1) - 1][1]


_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+"
_TOKEN_RE = re.compile(
    r"(?P<num>(?<![\w.])(?:" + _NUM + r"|nan|NaN|inf|Inf)(?P<suffix>[KkMGB](?![A-Za-z]))?"
    r"(?P<total>\s*/\s*\d+(?![\d.\w]))?"
    r"(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)*(?![\w/])|/[A-Za-z]+(?![\w/]))?)"
    r"|(?P<word>[A-Za-z_][\w]*(?:[./][A-Za-z_][\w]*)*)")
# Between a key and its value: spaces, quotes, one `:` or `=`, a parenthesised unit.
_KEY_GAP_RE = re.compile(r"^['\"]?\s*(?:\((?P<unit>[A-Za-z]{1,3})\))?\s*(?P<sep>[:=])?\s*['\"]?\s*$")

# word -> field, for words that name a figure only when a number follows them
_KEYS: dict[str, str] = {
    **dict.fromkeys(("step", "steps"), "step"),
    **dict.fromkeys(("iter", "iteration"), "iter"),
    **dict.fromkeys(("global_step", "num_updates"), "global_step"),
    **dict.fromkeys(("loss", "train_loss", "lm_loss", "total_loss", "step_loss", "reduced_train_loss"), "loss"),
    **dict.fromkeys(("eval_loss", "val_loss", "valid_loss", "validation_loss"), "eval_loss"),
    **dict.fromkeys(("lr",), "lr"),
    **dict.fromkeys(("step_time", "step_time_s", "iter_time", "iter_time_s", "dt"), "step_time_s"),
    **dict.fromkeys(("step_time_ms", "elapsed_time_per_iteration_ms", "iter_time_ms"), "step_time_ms"),
    "time": "time",   # a step time only with a time unit (`time 561.94ms`)
    **dict.fromkeys(("tps", "tok_per_s", "tok_s", "tokens_per_s", "tokens_per_sec", "tokens_per_second",
                     "tok_per_sec", "wps"), "tok_per_s"),
    **dict.fromkeys(("tokens_per_sec_per_gpu", "tokens_per_second_per_gpu", "tokens_per_second_per_device",
                     "tgs", "tps_per_gpu"), "tok_per_s_device"),
    **dict.fromkeys(("samples_per_s", "samples_per_sec", "samples_per_second", "samplespersec",
                     "currsamplespersec"), "samples_per_s"),
    "throughput": "throughput",
}
# rate words: a key before a number or a unit after one; (field, factor to the field's unit)
_RATES: dict[str, tuple[str, float]] = {
    **dict.fromkeys(("tok/s", "toks/s", "tokens/s", "token/s", "tok/sec", "tokens/sec", "token/sec",
                     "tokens/second"), ("tok_per_s", 1.0)),
    **dict.fromkeys(("tokens/s/device", "tokens/s/gpu", "tok/s/gpu", "tok/s/device"), ("tok_per_s_device", 1.0)),
    **dict.fromkeys(("samples/s", "samples/sec", "sample/s", "samples/second", "examples/sec", "examples/s",
                     "images/s"), ("samples_per_s", 1.0)),
    **dict.fromkeys(("it/s", "steps/s", "step/s", "steps/sec"), ("per_s", 1.0)),
    **dict.fromkeys(("s/it", "s/step", "sec/step", "sec/batch", "s/batch", "sec/it"), ("step_time_s", 1.0)),
    **dict.fromkeys(("ms/step", "ms/it", "ms/batch"), ("step_time_s", 1e-3)),
}
_TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0}
_STEP_PRIORITY = {"global_step": 3, "step": 2, "iter": 1}

STRONG, KNOWN, UNKNOWN = 100, 2, 1
"""Edge weights: a `key: value` / `key=value` or attached-unit pairing, a known word with
only spaces between, any other word followed by a number."""


@dataclass
class _Tok:
    kind: str                     # "num" | "word"
    text: str                     # the word, lowercased; the number's text
    start: int
    end: int
    value: float | None = None
    unit: str | None = None       # attached unit (`ms`, `it/s`, `GiB`, `%`)
    has_total: bool = False       # `100/500000`: a count of a total


def _tokens(line: str) -> list[_Tok]:
    from controller.follow.logparse import parse_number  # logparse reads lines through this module

    out = []
    for m in _TOKEN_RE.finditer(line):
        if m.group("word"):
            out.append(_Tok("word", m.group("word").lower(), m.start(), m.end()))
            continue
        text = m.group("num")
        core = text[: len(text) - len(m.group("unit") or "") - len(m.group("total") or "")]
        out.append(_Tok("num", core, m.start(), m.end(), parse_number(core),
                        m.group("unit").lower() if m.group("unit") else None, bool(m.group("total"))))
    return out


@dataclass
class _Edge:
    word: int                     # token index of the word
    num: int                      # token index of the number
    weight: int
    field: str
    factor: float = 1.0
    gap_unit: str | None = None   # `iter time (s): 0.5`


def _key_edge(word: _Tok, num: _Tok, gap: str, wi: int, ni: int) -> _Edge | None:
    g = _KEY_GAP_RE.match(gap)
    if not g:
        return None
    strong = g.group("sep") is not None
    if word.text in _RATES:
        field, factor = _RATES[word.text]
        return _Edge(wi, ni, STRONG if strong else KNOWN, field, factor)
    field = _KEYS.get(word.text, "")
    weight = STRONG if strong and field else KNOWN if field else UNKNOWN
    return _Edge(wi, ni, weight, field, gap_unit=g.group("unit"))


def _settled(edges: list[_Edge]) -> list[_Edge]:
    """The edges in every heaviest pairing (no token used twice); an edge in only some of
    them is contested and dropped. Edges only join neighbouring tokens, so sorted along the
    line an edge can clash only with the one before it: a forward and a backward pass give,
    for each edge, the best total with it and without it."""
    edges.sort(key=lambda e: min(e.word, e.num))
    n = len(edges)
    if n == 0:
        return []
    clash = [k > 0 and bool({edges[k - 1].word, edges[k - 1].num} & {edges[k].word, edges[k].num})
             for k in range(n)]
    f_take, f_skip = [0] * n, [0] * n     # best over edges[:k+1], edge k taken / not
    for k, e in enumerate(edges):
        before = max(f_take[k - 1], f_skip[k - 1]) if k else 0
        f_skip[k] = before
        f_take[k] = (f_skip[k - 1] if clash[k] else before) + e.weight
    b_take, b_skip = [0] * n, [0] * n     # best over edges[k:], edge k taken / not
    for k in range(n - 1, -1, -1):
        after = max(b_take[k + 1], b_skip[k + 1]) if k + 1 < n else 0
        b_skip[k] = after
        b_take[k] = (b_skip[k + 1] if k + 1 < n and clash[k + 1] else after) + edges[k].weight
    top = max(f_take[-1], f_skip[-1])
    return [e for k, e in enumerate(edges)
            if f_take[k] + b_take[k] - e.weight == top and f_skip[k] + b_skip[k] < top]


def read_pairs(line: str) -> dict[str, float]:
    """The figures a free-form line names, keyed by ProgressSample field ('step' an int as
    float); a figure named twice with two values, or contested, is left out."""
    line = _PHRASE_RE.sub(_phrase_word, line)
    toks = _tokens(line)
    edges: list[_Edge] = []
    figures: list[tuple[str, float, int]] = []    # (field, value, priority)
    for i, t in enumerate(toks):
        if t.kind != "num" or t.value is None:
            continue
        if t.unit in _RATES and not t.has_total:   # `5.38it/s`: the unit is its key
            field, factor = _RATES[t.unit]
            figures.append((field, t.value * factor, 0))
            continue
        if i > 0 and toks[i - 1].kind == "word":
            e = _key_edge(toks[i - 1], t, line[toks[i - 1].end:t.start], i - 1, i)
            if e is not None:
                edges.append(e)
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if (nxt is not None and nxt.kind == "word" and nxt.text in _RATES and t.unit is None
                and line[t.end:nxt.start].isspace()):
            field, factor = _RATES[nxt.text]
            # `5092/261 tok/s` (two rates, one unit) names no single figure
            edges.append(_Edge(i + 1, i, UNKNOWN if t.has_total else KNOWN, "" if t.has_total else field, factor))
    for e in _settled(edges):
        value = _value(e, toks)
        if value is not None and e.field:
            figures.append((e.field, value, _STEP_PRIORITY.get(e.field, 0)))
    return _fold(figures)


def _value(e: _Edge, toks: list[_Tok]) -> float | None:
    """The edge's figure in its field's unit; None when the number's unit does not fit."""
    num = toks[e.num]
    value = num.value
    assert value is not None
    unit = num.unit
    if unit is None and e.num + 1 < len(toks) and toks[e.num + 1].kind == "word" \
            and toks[e.num + 1].text in _TIME_UNITS and e.word < e.num:
        unit = toks[e.num + 1].text          # `iter time: 45.73 ms`
    unit = unit or (e.gap_unit.lower() if e.gap_unit else None)
    if e.field in ("step_time_s", "step_time_ms", "time"):
        if unit in _TIME_UNITS:
            return value * _TIME_UNITS[unit]
        if unit is not None or e.field == "time":
            return None
        return value / 1000.0 if e.field == "step_time_ms" else value
    if unit is not None and e.word < e.num:
        return None                          # `loss 5GiB`, `tps 3%`: not this figure
    return value * e.factor


def _fold(figures: list[tuple[str, float, int]]) -> dict[str, float]:
    out: dict[str, float] = {}
    seen: dict[str, set[float]] = {}
    step: tuple[int, float] | None = None
    steps_at: dict[int, set[float]] = {}
    for field, value, prio in figures:
        if field in ("step", "iter", "global_step"):
            if not math.isfinite(value) or value < 0 or value != int(value):
                continue
            steps_at.setdefault(prio, set()).add(value)
            continue
        if field in ("step_time_ms", "time"):
            field = "step_time_s"
        if field == "per_s":
            if not (math.isfinite(value) and value > 0):
                continue
            field, value = "step_time_s", 1.0 / value
        seen.setdefault(field, set()).add(value)
    if steps_at:
        prio = max(steps_at)
        if len(steps_at[prio]) == 1:
            step = (prio, next(iter(steps_at[prio])))
    for field, values in seen.items():
        if len(values) == 1:
            out[field] = next(iter(values))
    if "tok_per_s" not in out and "tok_per_s_device" in out:
        out["tok_per_s"] = out["tok_per_s_device"]
    out.pop("tok_per_s_device", None)
    if "throughput" in out:
        out.setdefault("tok_per_s", out["throughput"])
        del out["throughput"]
    if step is not None:
        out["step"] = step[1]
    return out
