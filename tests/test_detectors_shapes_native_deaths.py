"""Crash shapes of issue 22 (the k9crash round): native deaths, notebooks' dead kernels,
launchers' "a rank failed" reports and Windows exit codes, each on a short text from a
training-split pasted log (tests/corpus/pasted/index-n.json), with a healthy text beside it
that must stay quiet."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final


def _crash(lines: list[str]):
    found = [f for f in _final(lines) if f.kind == "crash"]
    assert found, _final(lines)
    return found[0]


STATS = ('json_stats: {"accuracy_cls": 0.959473, "eta": "5:38:36", "iter": 1280, "loss": 0.229320, "lr": 0.002500, '
         '"mem": 3318, "time": 0.228991}')


def test_glibc_error_in_banner_and_its_backtrace_are_a_crash_naming_the_check():
    """facebookresearch/Detectron#380: glibc < 2.26's malloc_printerr banner, then its backtrace."""
    f = _crash([STATS, "*** Error in `python2': munmap_chunk(): invalid pointer: 0x00007f97800e7d10 ***",
                "======= Backtrace: =========",
                "/lib/x86_64-linux-gnu/libc.so.6(+0x777e5)[0x7f994c24c7e5]"])
    assert "glibc" in f.summary and "munmap_chunk(): invalid pointer" in f.summary, f.summary
    # newer glibc: the check's message alone, then the shell's Aborted
    assert _kinds(_final([STATS, "corrupted size vs. prev_size"])) == ["crash"]


def test_corrupt_data_warnings_are_not_glibc_checks():
    healthy = [STATS, "Corrupt JPEG data: 2 extraneous bytes before marker 0xd9",
               "WARNING: skipping corrupted image data/imgs/file70.jpg", STATS]
    assert _kinds(_final(healthy)) == []


def test_mpirun_non_zero_exit_report_is_a_crash_even_with_a_masked_pid():
    """Kay1794/Aware-of-the-history#2: Open MPI's report, the PID masked by the user."""
    found = _final(["Primary job  terminated normally, but 1 process returned",
                    "a non-zero exit code. Per user-direction, the job has been aborted.",
                    "mpirun noticed that process rank 1 with PID xxxxxx on node xxxxxxxx exited on signal 9 (Killed)."])
    assert "crash" in _kinds(found)
    assert any("rank 1" in f.summary and "signal 9" in f.summary for f in found), [f.summary for f in found]
    only = _final(["Primary job  terminated normally, but 1 process returned",
                   "a non-zero exit code. Per user-direction, the job has been aborted."])
    assert [f.summary for f in only if f.kind == "crash"] == [
        "mpirun: a rank exited with a non-zero code (the job was aborted)"]


def test_horovod_runtime_error_under_a_platform_prefix_is_a_crash():
    """determined-ai/determined#3275."""
    f = _crash(["<>        [2021-12-07 10:43:01] 087c0ee7 || RuntimeError: Horovod detected that one or more processes "
                "exited with non-zero status, thus causing the job to be terminated. The first process to do so was:",
                "<>        [2021-12-07 10:43:01] 087c0ee7 || Exit code: 1"])
    assert f.summary.startswith("Horovod: a rank exited"), f.summary


def test_a_healthy_mpirun_log_with_openmpi_warnings_stays_quiet():
    healthy = ["--------------------------------------------------------------------------",
               "WARNING: There was an error initializing an OpenFabrics device.",
               "  Local host:   gpu-node-3",
               "--------------------------------------------------------------------------",
               "[1,0]<stdout>:Epoch 0/100, Batch 16/29316",
               "[1,0]<stdout>:Total loss is  236.61468505859375 ETA is  7:57:00.494483",
               "[1,1]<stdout>:Total loss is  30.246166229248047 ETA is  7:37:42.398659"]
    assert _kinds(_final(healthy)) == []


def test_jupyter_dead_kernel_dialog_and_server_log_are_a_crash():
    """PaddlePaddle/Paddle#11656 (the dialog), googlecolab/colabtools#513 (the server's log)."""
    f = _crash(["The kernel appears to have died. It will restart automatically."])
    assert "Jupyter kernel died" in f.summary
    f = _crash(["May 4, 2020, 5:02:35 PM | WARNING | WARNING:root:kernel 4222e7b2-aca5-4c53-972e-ea8892e41d74 restarted",
                "May 4, 2020, 5:02:29 PM | WARNING | tcmalloc:  large alloc 2400002048 bytes == 0x99a00000 @  0x7fb5f9f8c1e7"])
    assert "Jupyter kernel died" in f.summary


def test_a_kernel_restarted_by_the_user_or_a_resumed_run_is_not_a_dead_kernel():
    healthy = ["[I 10:02:11.120 NotebookApp] Kernel restarted: 4222e7b2-aca5-4c53-972e-ea8892e41d74",
               "Restarting from checkpoint epoch=3, restarting the lr scheduler",
               "epoch 4 loss 0.231 acc 0.912"]
    assert _kinds(_final(healthy)) == []


def test_colab_ran_out_of_ram_dialog_is_an_oom():
    """PV-Lab/FTCP#8 (quoted as the user posted it)."""
    (f,) = [f for f in _final(["> Your session crashed after using all available RAM. If you are interested in access to "
                               "high-RAM runtimes, you may want to check out Colab Pro."]) if f.kind == "oom"]
    assert "Colab" in f.summary


def test_hydra_job_error_tail_is_a_crash_only_when_nothing_better_says_why():
    """apple/ml-inrflow#1: a compose error, then run_and_report's HYDRA_FULL_ERROR line."""
    f = _crash(["In 'experiment/inrflow_imagenet': Could not override 'data@experiment.data'.",
                "Did you mean to override data?", "",
                "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."])
    assert f.summary.startswith("Hydra: the job raised"), f.summary
    tb = ["Error executing job with overrides: ['data=perov']", "Traceback (most recent call last):",
          '  File "run.py", line 88, in main', "    datamodule = hydra.utils.instantiate(cfg.data)",
          "KeyError: 'root_path'", "", "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]
    assert [f.summary.split(" at ")[0] for f in _final(tb) if f.kind == "crash"] == ["KeyError: 'root_path'"]


def test_hydra_launching_lines_are_healthy():
    healthy = ["[2023-01-01 10:00:00,000][HYDRA] Launching 2 jobs locally",
               "[2023-01-01 10:00:00,001][HYDRA] \t#0 : trainer.max_epochs=3 model=resnet",
               "[2023-01-01 10:05:00,000][__main__][INFO] - epoch 3 val_loss 0.41"]
    assert _kinds(_final(healthy)) == []


def test_windows_ntstatus_exit_codes_name_the_native_crash():
    """milesial/Pytorch-UNet#205 (PyCharm); VS Code's Code Runner prints the code unsigned."""
    f = _crash(["Epoch 2/5:   2%|▏         | 1/49 [00:24<09:19, 11.65s/img, loss (batch)=36.3]",
                "Process finished with exit code -1073741819 (0xC0000005)"])
    assert "0xC0000005, Windows: access violation" in f.summary, f.summary
    f = _crash(["[Done] exited with code=3221225477 in 12.3 seconds"])
    assert "access violation" in f.summary and "Code Runner" in f.summary
    assert _kinds(_final(["epoch 5 loss 0.1", "Process finished with exit code 0",
                          "[Done] exited with code=0 in 310.2 seconds"])) == []


def test_faulthandler_windows_codes_and_macos_traps_are_crashes():
    assert "code 0xc0000374" in _crash(["Windows fatal exception: code 0xc0000374"]).summary
    assert "SIGTRAP" in _crash(["step 10 loss 1.2", "Trace/BPT trap: 5"]).summary
    assert "SIGTRAP" in _crash(["step 10 loss 1.2", "zsh: trace trap  python train.py"]).summary
    assert _kinds(_final(["step 10 loss 1.2", "Killed: 9"])) == ["crash", "oom"]


def test_glog_check_failed_with_its_prefix_peeled_is_a_crash_and_a_zh_bash_abort_names_the_command():
    """rbgirshick/py-faster-rcnn#830."""
    found = _final(["Check failed: status == CUDNN_STATUS_SUCCESS (3 vs. 0)  CUDNN_STATUS_BAD_PARAM",
                    "*** Check failure stack trace: ***", "    @     0x7f9e4351e5cd  google::LogMessage::Fail()",
                    "examples/mnist/train_lenet.sh: 行 3: 25020 已放弃               (核心已转储) ./build/tools/caffe train "
                    "--solver=examples/mnist/lenet_solver.prototxt"])
    summaries = [f.summary for f in found if f.kind == "crash"]
    assert any("CHECK failed" in s and "CUDNN_STATUS_BAD_PARAM" in s for s in summaries), summaries
    assert any("process 25020" in s and "SIGABRT" in s for s in summaries), summaries
    assert _kinds(_final(["I1011 13:25:12.462865  7866 net.cpp:406] conv1 <- im_concat",
                          "I1011 13:25:12.462875  7866 solver.cpp:218] Iteration 100, loss = 0.21",
                          "check failed samples: 0"])) == []


def test_a_word_alone_after_an_excerpts_frames_is_not_its_exception():
    """DeepLabCut/DeepLabCut#1047: TF1's op-creation frames, its '(see above for traceback)' line, then the
    program goes on (`EVALUATE`, `Config:`): no crash."""
    healthy = ['  File "/x/tensorflow/python/framework/ops.py", line 1801, in __init__',
               "    self._traceback = tf_stack.extract_stack()", "",
               "CancelledError (see above for traceback): Enqueue operation was cancelled",
               "\t [[node fifo_queue_enqueue (defined at /x/deeplabcut/train.py:77) ]]", "", "",
               "The network is now trained and ready to evaluate.", "EVALUATE", "Config:",
               "{'all_joints': [[0], [1], [2], [3]],", " 'batch_size': 1,"]
    assert _kinds(_final(healthy)) == []
    cut = ['  File "/x/train.py", line 12, in <module>', "    main()", "KeyboardInterrupt"]
    assert "KeyboardInterrupt" in _crash(cut).summary


def test_an_ignored_exception_as_the_last_line_is_not_the_program_dying():
    """ThilinaRajapakse/simpletransformers#763, ultralytics/yolov5#8406: CPython's "Exception ignored in"
    (a destructor's exception, printed and dropped) ends the paste; the same exception line raised
    is still the program's last words."""
    tail = ["Traceback (most recent call last):",
            '  File "/usr/lib/python3.6/multiprocessing/process.py", line 122, in join',
            "    assert self._parent_pid == os.getpid(), 'can only join a child process'",
            "AssertionError: can only join a child process"]
    bars = ["Epochs 5/15. Running Loss: 0.0001: 100%", "1000/1000 [11:51<00:00, 1.41it/s]"]
    ignored = bars + ["Exception ignored in: <bound method _MultiProcessingDataLoaderIter.__del__ of <torch.utils.data."
                      "dataloader._MultiProcessingDataLoaderIter object at 0x7fee7c735240>>"] + tail
    assert _kinds(_final(ignored)) == []
    assert "AssertionError" in _crash(bars + tail).summary
    assert "AssertionError" in _crash(bars + tail[-1:]).summary  # the exception line alone, last


def test_torchs_windows_terminate_handler_is_a_crash():
    """p0p4k/vits2_pytorch#103 (quoted by the user)."""
    f = _crash(["> Loading train data:   0%|▏         | 4/2273 [01:10<11:06:12, 17.62s/it]",
                "> Unhandled exception caught in c10/util/AbortHandler.h",
                "> 00007FFDABDCEE1200007FFDABDCEDF0 ucrtbase.dll!terminate [<unknown file> @ <unknown line number>]"])
    assert "AbortHandler.h" in f.summary
    healthy = ["epoch 3: unhandled exceptions in the data pipeline: 0, skipped samples: 2", "epoch 3 loss 0.52"]
    assert _kinds(_final(healthy)) == []


def test_the_lua_interpreters_uncaught_error_is_a_crash():
    """art-programmer/FloorplanTransformation#40 (Lua torch)."""
    f = _crash(["=> Training epoch # 1\t",
                "/root/torch/install/bin/luajit: /root/torch/install/share/lua/5.1/threads/threads.lua:183: [thread 1 "
                "callback] /root/torch/install/share/lua/5.1/cv/imgproc/init.lua:1837: 'struct TensorPlusInt' has no "
                "member named 'val'", "stack traceback:", "\t[C]: in function 'error'"])
    assert f.summary.startswith("Lua error at threads.lua:183"), f.summary
    healthy = ["lua: 5.1.5 (found at /usr/bin/lua)", "luajit: LuaJIT 2.1.0-beta3", "=> Training epoch # 2\t",
               "epoch 2 loss 0.31"]
    assert _kinds(_final(healthy)) == []


def test_a_windows_crash_handlers_exception_code_is_a_crash():
    """Comfy-Org/comfy-kitchen#32: the thread dump, then the handler's code and native frames."""
    found = _final(['  File "C:\\ComfyUI\\start_comfy_with_asyncio_patch.py", line 8 in <module>',
                    "Exception Code: 0xC0000005",
                    "  #0 0x00007fffa4650000 (C:\\ComfyUI\\venv\\Lib\\site-packages\\torch\\lib\\torch_hip.dll+0x0)",
                    "  #1 0x00007fffa6c8f287 at::cuda::_scaled_mm_v2(class at::Tensor const &)"])
    assert any(f.kind == "crash" and "0xC0000005: access violation" in f.summary for f in found), found
    healthy = ["Exception Code: 0x00000000", "Exception code: 0x0 (none)", "epoch 1 loss 0.2"]
    assert _kinds(_final(healthy)) == []
