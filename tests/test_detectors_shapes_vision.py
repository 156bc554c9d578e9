"""Shapes from the vision family's pasted logs (index-u, helper k11vision), as units: each
shape with the text a real program printed (a training-split log) and beside it a healthy
counter-example that must stay quiet."""

from __future__ import annotations

from tests.judge_support import final_read as _final

# pasted MIC-DKFZ/nnUNet#1437 (training split): batchgenerators' results_loop thread dies
NNUNET_WORKERS_DEAD = [
    "Exception in thread Thread-4 (results_loop):",
    "Traceback (most recent call last):",
    '  File "/Users/yagis/opt/anaconda3/envs/nn_UNet/lib/python3.11/threading.py", line 1038, in _bootstrap_inner',
    "    self.run()",
    '  File "/Users/yagis/opt/anaconda3/envs/nn_UNet/lib/python3.11/threading.py", line 975, in run',
    "    self._target(*self._args, **self._kwargs)",
    '  File "/Users/yagis/opt/anaconda3/envs/nn_UNet/lib/python3.11/site-packages/batchgenerators/dataloading/'
    'nondet_multi_threaded_augmenter.py", line 125, in results_loop',
    "    raise e",
    '  File "/Users/yagis/opt/anaconda3/envs/nn_UNet/lib/python3.11/site-packages/batchgenerators/dataloading/'
    'nondet_multi_threaded_augmenter.py", line 103, in results_loop',
    '    raise RuntimeError("One or more background workers are no longer alive. Exiting. Please check the "',
    "RuntimeError: One or more background workers are no longer alive. Exiting. Please check the print "
    "statements above for the actual error message",
]


def test_batchgenerators_results_loop_death_ends_the_run_critical_crash():
    (f,) = [f for f in _final(NNUNET_WORKERS_DEAD) if f.kind == "crash"]
    assert f.severity == "critical", f
    assert "background workers are no longer alive" in f.summary and "the run ends" in f.summary, f.summary


def test_another_thread_death_stays_a_warning_the_process_lives_on():
    # constructed: a thread of another library dies with another message
    other = [
        "Exception in thread Thread-3 (_run):",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner',
        "    self.run()",
        '  File "/usr/lib/python3.10/site-packages/tensorboardX/event_file_writer.py", line 202, in _run',
        "    self._record_writer.write(data)",
        "RuntimeError: background writer queue is closed",
    ]
    (f,) = [f for f in _final(other) if f.kind == "crash"]
    assert f.severity == "warning", f
    assert "the run ends" not in f.summary


def test_healthy_nnunet_start_with_pin_memory_and_workers_is_quiet():
    # pasted MIC-DKFZ/nnUNet#2162's start-up (training split), then MIC-DKFZ/nnUNet#2290's first epoch
    healthy = [
        "2024-05-06 14:02:06.808884: The split file contains 5 splits.",
        "2024-05-06 14:02:06.809508: Desired fold for training: 4",
        "2024-05-06 14:02:06.810055: This split has 160 training and 40 validation cases.",
        "using pin_memory on device 0",
        "using pin_memory on device 0",
        "2024-06-12 18:20:21.625154: Epoch 0 ",
        "2024-06-12 18:20:21.630196: Current learning rate: 0.01 ",
        "2024-06-12 18:26:16.488273: train_loss 0.3602 ",
        "2024-06-12 18:26:16.493741: val_loss 0.3339 ",
        "2024-06-12 18:26:16.497657: Pseudo dice [0.0, 0.0, 0.0] ",
        "2024-06-12 18:26:16.502149: Epoch time: 354.87 s ",
    ]
    assert [f for f in _final(healthy) if f.kind in ("crash", "oom", "nan", "hang")] == []


# pasted PaddlePaddle/PaddleDetection#5879 (training split): Paddle's enforce error, bare, with its hint line
PADDLE_FATAL = [
    "SystemError: (Fatal) Blocking queue is killed because the data reader raises an exception.",
    "  [Hint: Expected killed_ != true, but received killed_:1 == true:1.] "
    "(at /paddle/paddle/fluid/operators/reader/blocking_queue.h:166)",
]


def test_bare_paddle_enforce_error_is_a_crash_naming_type_and_message():
    (f,) = [f for f in _final(PADDLE_FATAL) if f.kind == "crash"]
    assert f.severity == "critical", f
    assert "SystemError: (Fatal) Blocking queue is killed" in f.summary, f.summary


def test_paddle_error_words_quoted_in_prose_or_a_healthy_record_are_quiet():
    # constructed: the error quoted mid-line (a FAQ's question), and a healthy PaddleClas-style record
    healthy = [
        "Q1.3 When training in docker it keeps reporting `SystemError: (Fatal) Blocking queue is killed`, why?",
        "2021-08-15 16:31:27 [INFO]\t[TRAIN] Epoch=15/200, Step=202/454, loss=2.664855, acc1=0.25, lr=1e-05",
        "W0505 10:00:00.000000  1234 gpu_resources.cc:61] Please NOTE: device: 0, GPU Compute Capability: 8.0",
    ]
    assert [f for f in _final(healthy) if f.kind in ("crash", "oom", "nan", "hang")] == []
