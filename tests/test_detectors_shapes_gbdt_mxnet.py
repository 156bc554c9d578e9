"""Shapes of the "other" framework family (issue 22, helper k13other): gradient-boosting libraries' eval rows
(controller/judge/gbdt_eval.py), MXNet / XGBoost / LightGBM / CatBoost out-of-memory wordings, LightGBM's fatal
line and its connect-retry wait. Each is read on real output produced here (tests/data/logs/gbdt_*.log, made by
tests/data/logs/programs/gbdt_logs.py), a training-split paste or a cited source line, beside healthy text that
must stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.judge.gbdt_eval import gbdt_non_finite
from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final
from tests.judge_support import summaries_by_kind as _by_kind

LOGS = Path(__file__).parent / "data" / "logs"
PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _log(name: str, root: Path = LOGS) -> list[str]:
    return (root / name).read_text().splitlines()


# -- boosting eval rows -----------------------------------------------------------------------------------------

def test_xgboost_eval_row_with_a_nan_train_metric_is_nan_on_real_output():
    """xgboost 3.2.0 here, a NaN base margin: `[0]\\ttrain-rmse:nan\\teval-rmse:2.19159`."""
    by = _by_kind(_log("gbdt_xgb_nan.log"))
    assert list(by) == ["nan"], by
    assert "train-rmse" in by["nan"][0], by


def test_lightgbm_eval_row_with_a_nan_metric_is_nan_on_real_output():
    """lightgbm 4.7.0 here: `[1]\\ttraining's l2: 2.9\\ttraining's rmse_user: nan\\t...` (a metric returning NaN)."""
    by = _by_kind(_log("gbdt_lgb_nan.log"))
    assert list(by) == ["nan"], by
    assert "rmse_user" in by["nan"][0], by


@pytest.mark.parametrize("name", ["gbdt_xgb_healthy.log", "gbdt_lgb_healthy.log", "gbdt_cb_healthy.log",
                                  "gbdt_cb_ramlimit.log"])
def test_healthy_boosting_runs_stay_quiet_on_real_output(name):
    """Eval tables, `best iteration`, LightGBM's `No further splits with positive gain, best gain: -inf` warnings
    and `Early stopping, best iteration is:`, CatBoost's `bestTest = ...` / `Shrink model` and its RAM-limit
    warnings `CatBoost is using more CPU RAM (101MiB) than the limit (1MiB)` on a run that trains on."""
    assert _kinds(_final(_log(name))) == [], name


def test_gbdt_cells_read_each_library_and_leave_undefined_metrics_alone():
    assert gbdt_non_finite("[3]\tvalidation_0-logloss:nan\tvalidation_1-logloss:nan") == [
        ("validation_0-logloss", "nan"), ("validation_1-logloss", "nan")]
    assert gbdt_non_finite("[0]\ttrain-rmse:nan+nan\ttest-rmse:nan+nan")[0] == ("train-rmse", "nan")  # xgb.cv
    assert gbdt_non_finite("[5]\tcv_agg's valid l2: nan + nan") == [("cv_agg's valid l2", "nan")]      # lgb.cv
    assert gbdt_non_finite("[LightGBM] [Info] Iteration:12, valid_1 l2 : nan") == [("valid_1 l2", "nan")]
    assert gbdt_non_finite("7:\tlearn: nan\ttest: nan\tbest: nan (0)\ttotal: 1.2s\tremaining: 3s") == [
        ("learn", "nan"), ("test", "nan")]
    # undefined, not broken: one class in the set / no relevant item; MAPE's inf on zero labels
    assert gbdt_non_finite("[3]\ttrain-logloss:0.12\teval-auc:nan") == []
    assert gbdt_non_finite("[3]\tvalid_0's auc: nan\tvalid_0's binary_logloss: 0.3") == []
    assert gbdt_non_finite("[4]\teval-ndcg@5:nan\teval-map:nan") == []
    assert gbdt_non_finite("[9]\ttrain-mape:inf\teval-mape:inf") == []
    # not eval rows
    assert gbdt_non_finite("[LightGBM] [Warning] No further splits with positive gain, best gain: -inf") == []
    assert gbdt_non_finite("bestTest = inf") == []
    assert gbdt_non_finite("[1]\ttrain-rmse:0.5\teval-rmse:0.6") == []


def test_catboost_nan_rows_are_nan_and_finite_rows_quiet():
    """The shape of catboost 1.2.10's rows here (gbdt_cb_healthy.log) with NaN values."""
    assert _kinds(_final(["0:\tlearn: nan\ttest: nan\tbest: nan (0)\ttotal: 47ms\tremaining: 14.1s"])) == ["nan"]
    assert _kinds(_final(_log("catboost_catboost-1028.log", PASTED))) == []


# -- out of memory ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "words"), [
    # MXNet CUDA_CALL (src/common/cuda/utils.h:110) and the pooled manager (pooled_storage_manager.h:212)
    ("mxnet.base.MXNetError: [12:00:00] src/storage/storage.cc:119: Check failed: e == cudaSuccess || "
     "e == cudaErrorCudartUnloading CUDA: out of memory", "dmlc's CUDA_CALL check -- MXNet"),
    ("[12:00:00] ../src/storage/./pooled_storage_manager.h:212: Memory allocation failed out of memory", "MXNet's storage"),
    ("mxnet.base.MXNetError: [12:00:00] src/storage/./cpu_device_storage.h:65: Failed to allocate CPU Memory",
     "MXNet's CPU storage"),
    # XGBoost dh::detail::ThrowOOMError (src/common/device_vector.cu:22), with its caching allocator's words
    ("xgboost.core.XGBoostError: [12:00:00] ../src/common/device_helpers.cuh:400: Memory allocation error on "
     "worker 0: Caching allocator", "worker 0"),
    # LightGBM gpuAssert (include/LightGBM/cuda/cuda_utils.hu:35)
    ("[LightGBM] [Fatal] [CUDA] out of memory /LightGBM/src/io/cuda/cuda_column_data.cpp 82", "LightGBM's CUDA"),
])
def test_framework_oom_wordings_are_oom(line, words):
    by = _by_kind([line])
    assert "oom" in by and any(words in s for s in by["oom"]), by


@pytest.mark.parametrize("name", ["catboost_catboost-2750.log", "catboost_catboost-405.log",
                                  "catboost_catboost-1414.log", "catboost_catboost-302.log"])
def test_catboost_gpu_pool_oom_pastes_are_oom(name):
    """catboost/catboost#2750, #405, #1414, #302: NCudaLib::TOutOfMemoryError `Error: Out of memory. Requested N;
    Free M` (stack_like_memory_pool.h, TStackLikeMemoryPool::Create)."""
    by = _by_kind(_log(name, PASTED))
    assert any("requested" in s and "free" in s for s in by.get("oom", [])), by


def test_xgboost_host_bad_alloc_is_oom_on_real_output():
    """Under `ulimit -v` here: `xgboost.core.XGBoostError: std::bad_alloc`."""
    assert _kinds(_final(_log("gbdt_xgb_oom.log"))) == ["oom"]


def test_memory_words_without_a_failure_stay_quiet():
    """dask/dask-xgboost#73's worker memory warnings; MXNet's failsafe comment wording; XGBoost's free-memory line."""
    assert _kinds(_final(_log("dask_dask-xgboost-73.log", PASTED))) == []
    assert _kinds(_final(["INFO: Memory allocation for the pool: 4 GB reserved",
                          "- Free memory: 12.5GB",
                          "CatBoost is using more CPU RAM (101MiB) than the limit (1MiB)"])) == []


# -- LightGBM fatal and its connect wait ---------------------------------------------------------------------------

def test_lightgbm_fatal_line_is_a_crash_naming_its_message_on_real_output():
    by = _by_kind(_log("gbdt_lgb_badparam.log"))
    assert any(s.startswith("LightGBM fatal error: Unknown objective type name: nosuch") for s in by["crash"]), by
    assert _kinds(_final(["[LightGBM] [Fatal] Socket recv error, Connection reset by peer (code: 104)"])) == ["crash"]


def test_lightgbm_info_and_warning_lines_stay_quiet():
    assert _kinds(_final(["[LightGBM] [Info] Total Bins 505",
                          "[LightGBM] [Warning] Stopped training because there are no more leaves that meet the split "
                          "requirements",
                          "[LightGBM] [Warning] No further splits with positive gain, best gain: -inf"])) == []


def _retries(n: int) -> list[str]:
    ms, out = 200.0, []
    for _ in range(n):
        out.append(f"[LightGBM] [Warning] Connecting to rank 1 failed, waiting for {int(ms)} milliseconds")
        ms *= 1.3  # src/network/linkers_socket.cpp:193-194: 200 ms first, 1.3 times longer each retry
    return out


def test_lightgbm_connect_retries_for_minutes_are_a_hang():
    by = _by_kind(_retries(20))
    assert "hang" in by and "rank 1" in by["hang"][0], by


def test_lightgbm_few_connect_retries_then_connected_stay_quiet():
    lines = ["[LightGBM] [Info] Trying to bind port 12400...", *_retries(6),
             "[LightGBM] [Info] Connected to rank 1", "[LightGBM] [Info] Local rank: 0, total number of machines: 2"]
    assert _kinds(_final(lines)) == []


# -- MXNet and Caffe records ----------------------------------------------------------------------------------------

def test_mxnet_speedometer_lines_stay_quiet_even_with_an_undefined_accuracy():
    """aws-samples/machine-learning-using-k8s#1's healthy Speedometer lines; `Speed: inf samples/sec` (callback.py's
    ZeroDivisionError branch) and `accuracy=nan` (gluon/metric.py:163: a metric with no instances yet reads NaN)
    name no loss."""
    assert _kinds(_final(_log("aws-samples_machine-learning-using-k8s-1.log", PASTED))) == []
    assert _kinds(_final(["INFO:root:Epoch[0] Batch [100]\tSpeed: inf samples/sec\taccuracy=0.52",
                          "INFO:root:Epoch[0] Batch [200]\tSpeed: 1234.56 samples/sec\taccuracy=nan"])) == []


def test_mxnet_loss_metrics_and_caffe_losses_read_nan_beside_healthy_ones():
    assert _kinds(_final(["INFO:root:Epoch[0] Batch [100-200]\tSpeed: 1234.56 samples/sec\tcross-entropy=nan"])) == ["nan"]
    assert _kinds(_final(["I1203 12:00:00.000000  1234 solver.cpp:218] Iteration 100, loss = nan"])) == ["nan"]
    assert _kinds(_final(["I1203 12:00:00.000000  1234 solver.cpp:218] Iteration 100, loss = 0.69",
                          "I1203 12:00:00.000000  1234 solver.cpp:237]     Train net output #0: loss = 0.69 (* 1 = "
                          "0.69 loss)"])) == []
