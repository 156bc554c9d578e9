"""Real output of XGBoost, LightGBM and CatBoost on CPU (helper k13other, 2026-12-03): NaN eval metrics,
an impossible allocation, a bad parameter's fatal error, healthy runs. Run one case at a time:
`python gbdt_logs.py CASE > ../CASE.log 2>&1` (see make_gbdt_logs.sh)."""
import sys

import numpy as np

rng = np.random.default_rng(0)
X = rng.normal(size=(400, 5))
y = X[:, 0] * 2 + rng.normal(size=400) * 0.1
yb = (y > 0).astype(float)
case = sys.argv[1]

if case.startswith("xgb"):
    import xgboost as xgb
    print("xgboost", xgb.__version__, flush=True)
    if case == "xgb_nan":          # a custom objective whose gradients are NaN: the metrics go nan
        d = xgb.DMatrix(X[:300], label=y[:300]); dv = xgb.DMatrix(X[300:], label=y[300:])
        d.set_base_margin(np.full(300, np.nan))
        xgb.train({"objective": "reg:squarederror"}, d, 5, evals=[(d, "train"), (dv, "eval")])
    elif case == "xgb_inflabel":   # an infinite label: XGBoost refuses it
        yy = y.copy(); yy[3] = np.inf
        xgb.DMatrix(X, label=yy)
    elif case == "xgb_healthy":
        d = xgb.DMatrix(X[:300], label=y[:300]); dv = xgb.DMatrix(X[300:], label=y[300:])
        bst = xgb.train({"objective": "reg:squarederror", "eval_metric": "rmse"}, d, 200, evals=[(d, "train"), (dv, "eval")],
                        early_stopping_rounds=5, verbose_eval=10)
        print("best iteration", bst.best_iteration, "best score", bst.best_score)
    elif case == "xgb_badparam":
        d = xgb.DMatrix(X, label=y)
        xgb.train({"objective": "reg:nosuch"}, d, 2)
    elif case == "xgb_oom":        # under `ulimit -v`: the C++ allocation fails
        big = np.random.default_rng(0).normal(size=(300_000, 100)).astype(np.float32)
        d = xgb.QuantileDMatrix(big, label=big[:, 0], max_bin=4096)
        xgb.train({"tree_method": "hist", "max_depth": 16, "max_bin": 4096}, d, 2)
elif case.startswith("lgb"):
    import lightgbm as lgb
    print("lightgbm", lgb.__version__, flush=True)
    if case == "lgb_nan":          # a custom objective whose gradients are NaN: the metrics go nan
        # LightGBM drops NaN scores itself; a user metric that returns NaN shows how it prints one
        tr = lgb.Dataset(X[:300], y[:300]); va = lgb.Dataset(X[300:], y[300:], reference=tr)
        lgb.train({"objective": "regression", "verbose": 1}, tr, 5, valid_sets=[tr, va], callbacks=[lgb.log_evaluation(1)],
                  feval=lambda p, ds: ("rmse_user", float("nan"), False))
    elif case == "lgb_healthy":
        tr = lgb.Dataset(X[:300], y[:300]); va = lgb.Dataset(X[300:], y[300:], reference=tr)
        lgb.train({"objective": "regression", "verbose": 1, "min_data_in_leaf": 100}, tr, 300, valid_sets=[tr, va],
                  callbacks=[lgb.log_evaluation(20), lgb.early_stopping(10)])
    elif case == "lgb_badparam":
        tr = lgb.Dataset(X, y)
        lgb.train({"objective": "nosuch"}, tr, 2)
    elif case == "lgb_checkfail":  # a parameter out of range: LightGBM's CHECK
        tr = lgb.Dataset(X, y)
        lgb.train({"objective": "regression", "num_leaves": 2**31 - 1}, tr, 2)
    elif case == "lgb_oom":        # under `ulimit -v`: the C++ allocation fails
        big = np.random.default_rng(0).normal(size=(300_000, 100))
        tr = lgb.Dataset(big, big[:, 0], params={"max_bin": 10000})
        lgb.train({"objective": "regression", "num_leaves": 4096, "max_bin": 10000, "verbose": 1}, tr, 2)
elif case.startswith("cb"):
    import catboost as cb
    print("catboost", cb.__version__, flush=True)
    if case == "cb_degenerate":  # a NaN baseline           # a learning rate that overflows the model: the metrics go nan
        m = cb.CatBoostRegressor(iterations=5, verbose=1, allow_writing_files=False, bootstrap_type="No")
        m.fit(cb.Pool(X[:300], y[:300], baseline=np.full(300, np.nan)), eval_set=cb.Pool(X[300:], y[300:], baseline=np.full(100, np.nan)))
    elif case == "cb_healthy":
        m = cb.CatBoostRegressor(iterations=300, verbose=50, allow_writing_files=False, od_type="Iter", od_wait=20)
        m.fit(X[:300], y[:300], eval_set=(X[300:], y[300:]))
    elif case == "cb_badparam":
        m = cb.CatBoostRegressor(iterations=5, loss_function="NoSuch", allow_writing_files=False)
        m.fit(X, y)
    elif case == "cb_ramlimit":    # a RAM limit below what it needs: CatBoost warns and goes on
        m = cb.CatBoostRegressor(iterations=5, depth=16, border_count=65535, allow_writing_files=False, used_ram_limit="1mb")
        m.fit(X, y)
    elif case == "cb_oom":         # under `ulimit -v`: the C++ allocation fails
        big = np.random.default_rng(0).normal(size=(300_000, 100)).astype(np.float32)
        m = cb.CatBoostRegressor(iterations=5, depth=16, border_count=1024, allow_writing_files=False, verbose=1)
        m.fit(big, big[:, 0])
