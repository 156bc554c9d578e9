"""Shapes of TensorFlow's own failure wordings (issue 22, helper k10tf): the Python-side error
status of errors_impl.py (`UnknownError: 2 root error(s) found.`, the cuDNN 'Failed to get
convolution algorithm' one) and TensorFlow's LOG(FATAL) lines; each beside healthy TF chatter
that must stay quiet (library dlerror warnings, the BFC allocator's 'not a failure', the normal
end of an input pipeline)."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# pasted irdanish11/AnomalyEventDetection#1 (the session's aggregate error, no traceback)
ROOT_ERRORS = [
    "UnknownError: 2 root error(s) found.",
    "  (0) Unknown: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, "
    "so try looking to see if a warning log message was printed above.",
    "\t [[{{node conv3d/Conv3D}}]]",
    "0 successful operations.",
    "0 derived errors ignored.",
]

# pasted mozilla/DeepSpeech#2211 (the exception line alone, hard-wrapped)
ERRORS_IMPL = [
    "tensorflow.python.framework.errors_impl.UnknownError: Failed to get convolution algorithm. ",
    "This is probably because cuDNN failed to initialize, so try looking to see if a warning log ",
    "message was printed above.",
    "\t [[{{node tower_0/conv1d/Conv2D}}]]",
]

# pasted pythonlessons/TensorFlow-2.x-YOLOv3#105 (without its 'Aborted (core dumped)')
TF_FATAL = [
    "2020-12-01 15:51:57.871503: F tensorflow/compiler/tf2tensorrt/stub/nvinfer_stub.cc:49] "
    "getInferLibVersion symbol not found.",
]

# healthy: pasted googlecolab/colabtools#3408, sogou/SogouMRCToolkit#1, and the normal end of
# a tf.data input / a TF1 queue closed at the end of training
HEALTHY_TF = [
    "2023-02-13 19:39:03.670024: W tensorflow/compiler/xla/stream_executor/platform/default/dso_loader.cc:64] "
    "Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open shared object file: "
    "No such file or directory; LD_LIBRARY_PATH: /usr/lib64-nvidia",
    "2023-02-13 19:39:03.670144: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Cannot "
    "dlopen some TensorRT libraries.",
    "2019-04-07 05:23:27.134938: W tensorflow/core/common_runtime/bfc_allocator.cc:211] Allocator (GPU_0_bfc) ran "
    "out of memory trying to allocate 3.96GiB. The caller indicates that this is not a failure, but may mean that "
    "there could be performance gains if more memory were available.",
    "2019-04-07 05:23:28.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1097] Created TensorFlow device",
    "tensorflow.python.framework.errors_impl.OutOfRangeError: End of sequence",
    "tensorflow.python.framework.errors_impl.CancelledError: Enqueue operation was cancelled",
    "InvalidArgumentError: the model's own log line, not TensorFlow's status",
    "Epoch 1/50",
    "100/100 [==============================] - 14s 86ms/step - loss: 0.5805",
]


def test_tf_root_errors_aggregate_is_a_crash_naming_the_error_class():
    (f,) = [f for f in _final(ROOT_ERRORS) if f.kind == "crash"]
    assert "UnknownError" in f.summary and "root error" in f.summary, f.summary


def test_tf_errors_impl_exception_line_alone_is_a_crash_with_its_message():
    (f,) = [f for f in _final(ERRORS_IMPL) if f.kind == "crash"]
    assert f.summary.startswith("TensorFlow UnknownError: Failed to get convolution algorithm"), f.summary


def test_tf_log_fatal_line_is_a_crash_naming_file_and_message():
    (f,) = [f for f in _final(TF_FATAL) if f.kind == "crash"]
    assert "nvinfer_stub.cc" in f.summary and "getInferLibVersion" in f.summary, f.summary


def test_healthy_tf_chatter_and_normal_pipeline_ends_stay_quiet():
    assert _kinds(_final(HEALTHY_TF)) == []


# pasted google-deepmind/mujoco#1484: IPython 8's frames end with the argument list, the linked line
# numbers lost their targets (`[336]`), and the paste stops inside JAX's _check_special under debug_nans
JAX_FPE_CUT = [
    "---------------------------------------------------------------------------",
    "FloatingPointError                        Traceback (most recent call last)",
    "    [... skipping hidden 1 frame]",
    "",
    "File ~/anaconda3/envs/mjx/lib/python3.12/site-packages/jax/_src/profiler.py:336, in "
    "annotate_function.<locals>.wrapper(*args, **kwargs)",
    "    [335] with TraceAnnotation(name, **decorator_kwargs):",
    "--> [336]  return func(*args, **kwargs)",
    "    [337]return wrapper",
    "",
    "File ~/anaconda3/envs/mjx/lib/python3.12/site-packages/jax/_src/dispatch.py:319, in _check_special(name, dtype, buf)",
    "    [318] if config.debug_nans.value and np.any(np.isnan(np.asarray(buf))):",
]


def test_ipython8_frames_with_argument_lists_cut_off_in_a_floatingpointerror_are_crash_and_nan():
    found = _final(JAX_FPE_CUT)
    assert _kinds(found) == ["crash", "nan"]
    (c,) = [f for f in found if f.kind == "crash"]
    assert "dispatch.py:319 in _check_special" in c.summary, c.summary
    (n,) = [f for f in found if f.kind == "nan"]
    assert "FloatingPointError" in n.summary, n.summary


def test_a_cut_off_ipython_traceback_of_another_exception_is_a_crash_only():
    other = [JAX_FPE_CUT[0], "ValueError                                Traceback (most recent call last)"] + JAX_FPE_CUT[2:]
    assert _kinds(_final(other)) == ["crash"]


def test_ipython8_style_lines_in_a_healthy_log_stay_quiet():
    healthy = ["Epoch 1/10", "File ~/data/train.csv:12, in total (3 columns)", "    [12] 0.5 0.25 nan_count=0",
               "100/100 [==============================] - 14s 86ms/step - loss: 0.5805"]
    assert _kinds(_final(healthy)) == []


def test_keras_checkpoint_best_still_at_inf_means_every_monitored_value_was_nan():
    # the title line of pasted yu4u/age-gender-estimation#97 (its thread: the loss became nan)
    (f,) = [f for f in _final(["Epoch 1/10", "Epoch 00001: val_loss did not improve from inf"]) if f.kind == "nan"]
    assert "val_loss did not improve from inf" in f.summary and "NaN" in f.summary, f.summary
    (g,) = [f for f in _final(["Epoch 00002: val_acc did not improve from -inf"]) if f.kind == "nan"]
    assert "val_acc" in g.summary, g.summary


def test_keras_checkpoint_with_a_finite_best_stays_quiet():
    # pasted foamliu/FaceNet#3 (index-o) and lazyprogrammer/machine_learning_examples#59's kind of lines
    healthy = ["Epoch 00001: val_loss improved from inf to 0.20000, saving model to models/model.01-0.2000.hdf5",
               "Epoch 2/15",
               "1539/1539 [==============================] - 3427s 2s/step - loss: 0.1902 - val_loss: 0.2000",
               "Epoch 00002: val_loss did not improve from 0.20000",
               "Epoch 00003: val_accuracy improved from -inf to 0.95089, saving model to w.best.hdf5"]
    assert _kinds(_final(healthy)) == []
