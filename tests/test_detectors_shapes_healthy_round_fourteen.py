"""False-alarm hunt of issue 22 (helper k15healthy) against round fourteen's readers: healthy pasted logs of
training-split repositories (index-zy) full of tempting words -- TF BFC 'not a failure' chatter, vLLM memory
profiling, per-class AP nan of empty classes, DataLoader 'might ... freeze' warnings, 'deprecated' warnings,
DeepSpeed memory reports -- and hand-made healthy texts that stress the newest readers (store barriers that
complete, TCPStore retries that succeed, a rendezvous that joins, stack dumps asked for by the user, RETURNN's
excepthook on a user's own Ctrl-C, 'Killed'/'timeout'/'error' inside option names, NaN cells of a pandas
table). Each must give no failure finding. No false alarm was found in index-zy, so no reader changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

PASTED = Path(__file__).parent / "corpus" / "pasted" / "logs"


def _pasted(name: str) -> list[str]:
    return (PASTED / f"{name}.log").read_text().splitlines()


@pytest.mark.parametrize("name", [
    "NVlabs_Deep_Object_Pose-220",
    "liuslnlp_CoupletAI-2",
    "RVC-Project_Retrieval-based-Voice-Conversion-WebUI-2656",  # 'This is not an error'
    "vllm-project_vllm-11550",                                  # memory profiling
    "vllm-project_vllm-10511",                                  # memory profiling results table
    "anhvth_opensloth-16",
    "SayaSS_vits-finetuning-21",                                # 'running slow or even freeze'
    "acids-ircam_RAVE-56",                                      # 'deprecated', kernel cache warning
    "facebookresearch_metaseq-446",
    "SayaSS_vits-finetuning-38",
    "ShuLiu1993_PANet-33",                                      # per-class AP nan
    "facebookresearch_Detectron-854",
    "talmolab_sleap-2089",                                      # TF BFC 'ran out of memory ... not a failure'
    "ildoonet_tf-pose-estimation-225",
    "understanding-search_maze-transformer-35",
    "fabienfrfr_tptt-4",                                        # DeepSpeed see_memory_usage
])
def test_healthy_pastes_of_index_zy_give_no_finding(name):
    assert _kinds(_final(_pasted(name))) == []


HAND_MADE = {
    "store_barrier_completes": """\
[rank0]:[W1204 10:00:01] Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=8, worker_count=3, timeout=0:30:00)
[rank0]:[I1204 10:00:05] Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes.
Epoch 0 step 10 loss 2.314
Epoch 0 step 20 loss 2.101
""",
    "tcpstore_retry_then_train": """\
[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).
[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).
Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2
Epoch 0: 100%|##########| 50/50 [00:12<00:00, 4.1it/s, loss=0.52]
""",
    "killed_and_timeout_in_options": """\
usage: train.py [--kill-on-bad-exit] [--nccl-timeout SECONDS] [--oom-retry] [--nan-check]
  --kill-on-bad-exit   kill all ranks if one exits non-zero (default: off)
  --nccl-timeout       collective timeout in seconds (default 1800)
Namespace(kill_on_bad_exit=False, nccl_timeout=1800, oom_retry=True, nan_check=True)
step 1 loss 0.93
""",
    "error_metric_names": """\
epoch 1 | train mean_absolute_error 0.412 | val error_rate 0.081 | val_mean_squared_error 0.227
epoch 2 | train mean_absolute_error 0.377 | val error_rate 0.074 | val_mean_squared_error 0.201
saved checkpoint to runs/error_analysis/ckpt_2.pt
""",
    "pandas_nan_cells": """\
   epoch  train_loss  val_loss  val_auc
0      0      0.6931       NaN      NaN
1      1      0.5120    0.5402   0.7810
2      2      0.4475    0.5013   0.8120
""",
    "best_so_far_inf": """\
Epoch 1: val_loss improved from inf to 0.48213, saving model to best.h5
Epoch 2: val_loss improved from 0.48213 to 0.45127, saving model to best.h5
""",
    "amp_scaler_skips_at_start": """\
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0
iter 100 | loss 3.214 | lr 1.0e-04 | loss scale 16384.0
iter 200 | loss 2.987 | lr 1.0e-04 | loss scale 32768.0
""",
    "autobatch_recovered": """\
AutoBatch: Computing optimal batch size for imgsz=640
AutoBatch: CUDA:0 (NVIDIA A100-SXM4-80GB) 79.21G total, 0.37G reserved, 0.36G allocated, 78.48G free
AutoBatch: Using batch-size 96 for CUDA:0 55.10G/79.21G (70%)
      1/100      41.2G      1.214      2.301      1.187        152        640: 100%|##########| 120/120
""",
    "user_ctrl_c_after_finish": """\
Epoch 10/10: 100%|##########| 500/500 [01:02<00:00, loss=0.101]
Training finished. Saved final model to out/final.pt
^C
""",
    "slow_eval_silence": """\
2026-12-04 10:00:00 INFO step 5000 loss 1.223
2026-12-04 10:00:01 INFO Running evaluation on 50000 samples ...
2026-12-04 10:47:30 INFO eval accuracy 0.7612 (took 2849.2 s)
2026-12-04 10:47:31 INFO step 5010 loss 1.219
""",
    "nccl_warn_chatter": """\
node1:1234:1290 [0] NCCL INFO NET/IB : No device found.
node1:1234:1290 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
node1:1234:1290 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file
node1:1234:1290 [0] NCCL INFO Channel 00/02 :    0   1
node1:1234:1290 [0] NCCL INFO Connected all rings
step 1 loss 4.1
""",
    "logged_traceback_recovered": """\
WARNING:hub: download failed, retrying (1/3)
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/urllib3/connectionpool.py", line 467, in _make_request
    six.raise_from(e, None)
ConnectionResetError: [Errno 104] Connection reset by peer
INFO:hub: download succeeded on retry 2
Epoch 1 loss 0.88
""",
}


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_healthy_texts_give_no_finding(name):
    assert _kinds(_final(HAND_MADE[name].splitlines())) == []
