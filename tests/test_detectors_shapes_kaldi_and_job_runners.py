"""Shapes of the "other" frameworks' logs (issue 22, helper k10other): Kaldi's error envelope and its job
runners' reports, each from a training-split paste, each beside healthy text that must stay quiet."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

KALDI_ERR = ["LOG (nnet3-init[5.5.844~1-82fea]:main():nnet3-init.cc:68) Read raw neural net from exp/chain2/tdnn1a_sp/configs/init.raw",
             "ERROR (nnet3-init[5.5.844~1-82fea]:Input():kaldi-io.cc:756) Error opening input stream exp/chain2/tdnn1a_sp/configs/lda.mat",
             "",
             "[ Stack-Trace: ]",
             "/home/linadm/Jamie/kaldi/src/lib/libkaldi-base.so(kaldi::MessageLogger::LogMessage() const+0xb42) [0x7fa15c70e692]"]


def test_kaldi_error_envelope_is_a_crash_naming_program_function_and_message():
    """kaldi-asr/kaldi#4357: KALDI_ERR's `ERROR (prog[version]:func():file:line) message` (a log-level word the
    prefix peeler must not strip here, else WARNING and ERROR would read the same)."""
    (f,) = [f for f in _final(KALDI_ERR) if f.kind == "crash"]
    assert f.summary.startswith("Kaldi nnet3-init error in Input() (kaldi-io.cc): Error opening input stream"), f.summary


def test_kaldi_assertion_failed_envelope_is_a_crash():
    found = _final(["ASSERTION_FAILED (nnet3-chain-train[5.5.844~1-82fea]:Foo():nnet-chain-training.cc:75) "
                    "Assertion failed: (num_frames > 0)"])
    assert any(f.kind == "crash" and "assertion failed" in f.summary for f in found), [f.summary for f in found]


def test_kaldi_log_and_warning_envelopes_and_the_caught_cholesky_error_stay_quiet():
    """kaldi-asr/kaldi#134's LOG lines (no version in the envelope), a WARNING with an empty program name, and
    nnet2's Cholesky ERROR that ReorthogonalizeXt1 catches itself (nnet-precondition-online.cc:221)."""
    healthy = ["LOG (nnet3-train:PrintStatsForThisPhase():nnet-training.cc:121) Average ",
               "objective function for 'output' for minibatches 40-49 is -35.0044 over ",
               "19538 frames.",
               "WARNING (nnet3-chain-train[5.5.844~1-82fea]:Train():nnet-chain-training.cc:90) something odd",
               "WARNING ([5.3.25~2-8cc5c8]:PreconditionDirectionsCpu():natural-gradient-online-test.cc:198) flooring "
               "rho_{t+1} to 4.95628, was 4.83397",
               "ERROR (nnet-train-simple[5.5.243~1-8cafd]:ReorthogonalizeXt1():nnet-precondition-online.cc:222) "
               "Cholesky out of expected range, reorthogonalizing with Gram-Schmidt",
               "run.pl: Warning: failed to detect number of GPUs from nvidia-smi, using 4"]
    assert _kinds(_final(healthy)) == []


def test_kaldi_run_pl_job_failed_is_a_crash_naming_the_job_log():
    """kaldi-asr/kaldi#4718: utils/parallel/run.pl:344's report."""
    found = _final(["run.pl: job failed, log is in exp/chain_cleaned/tdnn_cnn_1a_sp/log/train.1.3.log"])
    assert [f.summary for f in found if f.kind == "crash"] == [
        "Kaldi run.pl: a job failed (its log: exp/chain_cleaned/tdnn_cnn_1a_sp/log/train.1.3.log)"]


def test_kaldi_queue_pl_status_and_counted_failures_are_a_crash():
    """queue.pl:614 and run.pl:351's wordings (kaldi-asr/kaldi#4354 shows the first)."""
    one = _final(["queue.pl: job failed with status 255, log is in exp/egs/log/create_valid_subset.log"])
    assert any("with status 255" in f.summary for f in one if f.kind == "crash"), [f.summary for f in one]
    many = _final(["run.pl: 3 / 16 failed, log is in exp/tri1/log/align.*.log"])
    assert any("3 of 16 jobs failed" in f.summary for f in many if f.kind == "crash"), [f.summary for f in many]


def test_kaldi_job_failed_is_secondary_to_the_jobs_own_error():
    found = _final(KALDI_ERR + ["run.pl: job failed, log is in exp/chain2/tdnn1a_sp/log/add_first_layer.log"])
    crashes = [f.summary for f in found if f.kind == "crash"]
    assert crashes and crashes[0].startswith("Kaldi nnet3-init error"), crashes


def test_paddle_launch_abort_is_a_crash_naming_the_ranks():
    """PaddlePaddle/Paddle#33074: fleet launch_utils.watch_local_trainers' report of a trainer that exited non-zero."""
    found = _final(["INFO 2021-05-24 17:17:14,611 launch_utils.py:307] terminate all the procs",
                    "ERROR 2021-05-24 17:17:14,611 launch_utils.py:545] ABORT!!! Out of all 4 trainers, the trainer process "
                    "with rank=[3] was aborted. Please check its log."])
    assert [f.summary for f in found if f.kind == "crash"] == [
        "Paddle launch: trainer rank [3] of 4 was aborted (its workerlog holds the error)"]


def test_paddle_launch_start_up_stays_quiet():
    healthy = ["WARNING 2021-01-22 09:14:35,019 launch.py:314] Not found distinct arguments and compiled with cuda. "
               "Default use collective mode",
               "launch train in GPU mode",
               "INFO 2021-01-22 09:14:35,020 launch_utils.py:472] Local start 1 processes. First process distributed "
               "environment info (Only For Debug):",
               "INFO 2021-05-24 17:17:14,611 launch_utils.py:307] terminate all the procs"]
    assert _kinds(_final(healthy)) == []


def test_dl4j_score_iteration_nan_is_nan_and_finite_scores_are_quiet():
    """deeplearning4j/deeplearning4j#4441: ScoreIterationListener's `Score at iteration {} is {}`, finite then NaN."""
    finite = ["Epoch 400, number of batches completed 57",
              "Score at iteration 22700 is 0.05135663793453861",
              "Score at iteration 0 is 0.05206126573727092",
              "17/09/04 14:36:58 INFO DeepClassifier: Training score: 0.40788027085363865"]
    assert _kinds(_final(finite)) == []
    found = _final(finite + ["Score at iteration 100 is NaN"])
    assert [f.summary for f in found if f.kind == "nan"] == ["loss is NaN/Inf (DL4J: the iteration score is NaN)"]
    inf = _final(["o.d.o.l.ScoreIterationListener - Score at iteration 7 is Infinity"])
    assert _kinds(inf) == ["nan"]


def test_nolearn_epoch_table_with_a_train_slash_val_column_reads_its_nan_loss():
    """dnouri/nolearn#35: the header's `Train / Val` cell (a ratio, no loss) no longer hides the table."""
    head = [" Epoch  |  Train loss  |  Valid loss  |  Train / Val  |  Valid acc  |  Dur",
            "--------|--------------|--------------|---------------|-------------|-------"]
    found = _final(head + ["     1  |         nan  |         nan  |          nan  |     45.05%  |  0.7s"])
    assert any(f.kind == "nan" and "Train loss" in f.summary for f in found), [f.summary for f in found]
    healthy = _final(head + ["     1  |     0.69312  |     0.68123  |      1.01747  |     55.05%  |  0.7s",
                             "     2  |     0.61002  |     0.60211  |      1.01313  |     61.47%  |  0.6s"])
    assert _kinds(healthy) == []
