"""Gradient-boosting libraries' evaluation rows: a NaN/Inf there is a model whose predictions went
non-finite, told in the libraries' own table shapes, which name their metrics where a loss reader
looks for the word "loss" and so never saw them.

A boosting library prints one row per boosting round, one cell per (data set, metric):

- XGBoost: `[12]\\ttrain-rmse:nan\\teval-rmse:nan` -- the C++ learner's EvalOneIter (dmlc/xgboost
  src/learner.cc:1118 @379b29f0, `'\\t' << data_names[i] << '-' << ev->Name() << ':' << value`) and the
  Python EvaluationMonitor (python-package/xgboost/callback.py:549-559 @379b29f0, `f"[{epoch}]"` then
  `f"\\t{data + '-' + metric}:{score:.5f}"`, `+{std}` after it in xgb.cv). Produced here:
  tests/data/logs/gbdt_xgb_nan.log (a NaN base margin: `train-rmse:nan`).
- LightGBM's Python callback: `[5]\\ttraining's l2: nan\\tvalid_1's l2: nan` (microsoft/LightGBM
  python-package/lightgbm/callback.py:85 and :106 @bae0b7ba, `f"{dataset_name}'s {metric_name}:
  {metric_value:g}"` joined by tabs after `[{iteration + 1}]`, ` + {stdv}` in lgb.cv); its CLI's
  `Iteration:5, valid_1 l2 : nan` (src/boosting/gbdt.cpp:573 and :591 @bae0b7ba). Produced here:
  tests/data/logs/gbdt_lgb_nan.log (a metric returning NaN, printed through the callback).
- CatBoost: `12:\\tlearn: nan\\ttest: nan\\tbest: nan (0)\\ttotal: 47ms\\tremaining: 14.1s` -- the shape of
  tests/data/logs/gbdt_cb_healthy.log (catboost 1.2.10's own output here); its first value is the
  loss function being optimised.

C++ streams print NaN as `nan` / `-nan`, Python's `%g` and f-strings `nan`, infinity `inf`.

What stays quiet: metrics that are undefined rather than broken when a set holds one class or a
group has no relevant item -- AUC, AUC-PR, average precision, NDCG, MAP, precision@k -- (XGBoost
and LightGBM print them as nan then, with finite losses beside them); an Inf in a percentage
error (MAPE divides by the label: zero labels give inf on a healthy run); LightGBM's `No further
splits with positive gain, best gain: -inf` (a warning, no eval row: gbdt_lgb_healthy.log) and
CatBoost's closing `bestTest = ...` (not read).
"""

from __future__ import annotations

import re

_VAL = r"[-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:e[-+]?\d+)?)"
_NONFINITE = re.compile(r"^[-+]?(?:nan|inf(?:inity)?)$", re.I)

_XGB_CELL = re.compile(r"\s+(?P<key>[A-Za-z_][\w.@]*-[\w.@:-]*?):(?P<val>" + _VAL + r")(?:\+" + _VAL + r")?(?=\s|$)", re.I)
_XGB_ROW = re.compile(r"(?:^|\s)\[\d+\](?=\s+[A-Za-z_][\w.@]*-[\w.@:-]*?:" + _VAL + r"(?:\+" + _VAL + r")?(?:\s|$))",
                      re.I)
"""`[N]` then tab-separated `data-metric:value` cells (whitespace taken too: a paste may turn tabs to spaces)."""

_LGB_CELL = re.compile(r"(?P<key>[\w.-]+'s [\w.@:/ -]+?): (?P<val>" + _VAL + r")(?: \+ " + _VAL + r")?(?=\s|$)", re.I)
_LGB_ROW = re.compile(r"(?:^|\s)\[\d+\]\s+[\w.-]+'s ")
_LGB_CLI = re.compile(r"Iteration:\d+, (?P<key>(?:training|valid_\d+) \S+) : (?P<val>" + _VAL + r")(?=\s|$)", re.I)

_CB_ROW = re.compile(r"(?:^|\s)\d+:\s+learn: (?P<learn>" + _VAL + r")(?:\s+test: (?P<test>" + _VAL + r"))?"
                     r"(?:\s+best: " + _VAL + r" \(\d+\))?\s+total: ", re.I)

_UNDEFINED_METRIC = re.compile(r"auc|ndcg|\bmap\b|-map\b|'s map\b|map@|pre@|precision|average_precision|\bap\b", re.I)
"""Metrics that are NaN when undefined (one class in the set, no relevant item in a group): not a broken model."""
_PERCENT_ERROR = re.compile(r"mape|percentage", re.I)


def _keep(key: str, val: str) -> bool:
    if _NONFINITE.match(val) is None or _UNDEFINED_METRIC.search(key):
        return False
    return "nan" in val.lower() or not _PERCENT_ERROR.search(key)


def gbdt_non_finite(line: str) -> list[tuple[str, str]]:
    """The (metric, value) cells of a boosting library's evaluation row that read NaN/Inf
    (keys like `train-rmse`, `valid_1's l2`, `learn`), in the order printed; [] for any other line."""
    out: list[tuple[str, str]] = []
    if "[" in line:
        m = _XGB_ROW.search(line)
        if m is not None:
            out += [(c.group("key"), c.group("val").lower()) for c in _XGB_CELL.finditer(line, m.end())]
        elif "'s " in line and _LGB_ROW.search(line):
            out += [(c.group("key"), c.group("val").lower()) for c in _LGB_CELL.finditer(line)]
    if "Iteration:" in line:
        out += [(c.group("key"), c.group("val").lower()) for c in _LGB_CLI.finditer(line)]
    if "learn: " in line:
        c = _CB_ROW.search(line)
        if c is not None:
            out += [(k, c.group(k).lower()) for k in ("learn", "test") if c.group(k)]
    return [(k, v) for k, v in out if _keep(k, v)]
