"""A stop inside a blocking wait (controller/judge/stopped_wait.py): a KeyboardInterrupt whose
innermost frames are a wait is a hang naming the wait and its caller; a Ctrl-C in ordinary
computation stays the user's stop (a crash warning, no hang). Texts from training-split pastes."""

from __future__ import annotations

from tests.judge_support import failure_kinds as _kinds
from tests.judge_support import final_read as _final

# ultralytics/ultralytics#1662 (Windows DDP): Ctrl-C lands in DDP's buffer broadcast
DDP_SYNC = [
    "Traceback (most recent call last):",
    r'  File "C:\Users\Administrator\AppData\Roaming\Ultralytics\DDP\_temp_m7cet2gz2525071434128.py", line 6, in <module>',
    "    trainer.train()",
    r'  File "C:\Users\Administrator\anaconda3\envs\pytorch_wf\lib\site-packages\ultralytics\yolo\engine\trainer.py", line 317, in _do_train',
    "    preds = self.model(batch['img'])",
    r'  File "C:\Users\Administrator\anaconda3\envs\pytorch_wf\lib\site-packages\torch\nn\parallel\distributed.py", line 1034, in forward',
    "    self._sync_buffers()",
    r'  File "C:\Users\Administrator\anaconda3\envs\pytorch_wf\lib\site-packages\torch\nn\parallel\distributed.py", line 1621, in _sync_buffers',
    "    self._sync_module_buffers(authoritative_rank)",
    "KeyboardInterrupt",
]

# nagadomi/nunif#26: Ctrl-C in GradScaler's v.item() -- computation, not a wait
ITEM = [
    "Traceback (most recent call last):",
    r'  File "C:\nunif\nunif\training\env.py", line 52, in optimizer_step',
    "    grad_scaler.step(optimizer)",
    r'  File "F:\1\envs\nunif\lib\site-packages\torch\cuda\amp\grad_scaler.py", line 287, in _maybe_opt_step',
    '    if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):',
    r'  File "F:\1\envs\nunif\lib\site-packages\torch\cuda\amp\grad_scaler.py", line 287, in <genexpr>',
    '    if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):',
    "KeyboardInterrupt",
]

# pytorch/examples#148: a DataLoader worker idle on its index queue when Ctrl-C'd
WORKER_IDLE = [
    "Traceback (most recent call last):",
    '  File "/home/u/miniconda2/envs/p/lib/python3.5/site-packages/torch/utils/data/dataloader.py", line 28, in _worker_loop',
    "    r = index_queue.get()",
    '  File "/home/u/miniconda2/envs/p/lib/python3.5/multiprocessing/queues.py", line 342, in get',
    "    with self._rlock:",
    '  File "/home/u/miniconda2/envs/p/lib/python3.5/multiprocessing/synchronize.py", line 96, in __enter__',
    "    return self._semlock.__enter__()",
    "KeyboardInterrupt",
]


def _barrier(inner: list[str]) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "train.py", line 60, in main',
            "    dist.barrier()",
            '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier',
            "    work.wait()", *inner, "KeyboardInterrupt"]


def test_a_ctrl_c_inside_ddps_buffer_broadcast_is_a_hang_naming_the_wait_and_its_caller():
    found = _final(DDP_SYNC)
    (h,) = [f for f in found if f.kind == "hang"]
    assert "DDP's buffer broadcast (_sync_buffers, distributed.py:1621)" in h.summary, h.summary
    assert "called from _temp_m7cet2gz2525071434128.py:6 in <module>" in h.summary, h.summary
    assert "crash" in _kinds(found)  # the user's stop is still reported as before


def test_a_ctrl_c_inside_a_c10d_barrier_is_a_hang():
    (h,) = [f for f in _final(_barrier([])) if f.kind == "hang"]
    assert "torch.distributed's barrier (distributed_c10d.py:3328), called from train.py:60 in main" in h.summary


def test_a_ctrl_c_in_ordinary_computation_stays_a_users_stop():
    found = _final(ITEM)
    assert _kinds(found) == ["crash"]
    assert any("stopped by KeyboardInterrupt" in f.summary for f in found)


def test_an_idle_dataloader_worker_on_its_index_queue_is_not_a_hang():
    assert "hang" not in _kinds(_final(WORKER_IDLE))


def test_a_collective_that_returned_and_computation_after_it_is_not_a_hang():
    # the barrier frame is there, but the innermost frame is the user's computation after it
    text = _barrier(['  File "/work/model.py", line 12, in forward', "    x = self.fc(x)"])
    assert "hang" not in _kinds(_final(text))


def test_a_launcher_sleeping_in_its_monitor_loop_is_not_a_hang():
    text = ["Traceback (most recent call last):",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/agent/server/api.py", line 864, in _invoke_run',
            "    time.sleep(monitor_interval)",
            "KeyboardInterrupt"]
    assert "hang" not in _kinds(_final(text))


def test_a_launcher_waiting_on_its_workers_subprocess_is_not_a_hang():
    # IntelLabs/academic-budget-bert#8: the deepspeed launcher's ^C lands in result.wait()
    text = ["Traceback (most recent call last):",
            '  File "/home/u/miniconda3/envs/b/lib/python3.9/site-packages/deepspeed/launcher/runner.py", line 362, in main',
            "    result.wait()",
            '  File "/home/u/miniconda3/envs/b/lib/python3.9/subprocess.py", line 1189, in wait',
            "    return self._wait(timeout=timeout)",
            '  File "/home/u/miniconda3/envs/b/lib/python3.9/subprocess.py", line 1875, in _try_wait',
            "    (pid, sts) = os.waitpid(self.pid, wait_flags)",
            "KeyboardInterrupt"]
    assert _kinds(_final(text)) == ["crash"]


def test_the_dataloader_main_process_on_its_data_queue_is_a_hang():
    # the shape of pytorch/examples#148's main process (`idx, batch = self.data_queue.get()` ->
    # queue.py get), in the frame names of torch/utils/data/dataloader.py (_get_data ->
    # _try_get_data -> self._data_queue.get); paths and line numbers made up for the test
    text = ["Traceback (most recent call last):",
            '  File "/work/fit.py", line 57, in run_epoch',
            "    for x, y in loader:",
            '  File "/opt/venv/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1400, in _get_data',
            "    success, data = self._try_get_data()",
            '  File "/opt/venv/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1250, in _try_get_data',
            "    data = self._data_queue.get(timeout=timeout)",
            '  File "/usr/lib/python3.10/queue.py", line 180, in get',
            "    self.not_empty.wait(remaining)",
            '  File "/usr/lib/python3.10/threading.py", line 324, in wait',
            "    gotit = waiter.acquire(True, timeout)",
            "KeyboardInterrupt"]
    (h,) = [f for f in _final(text) if f.kind == "hang"]
    assert "the DataLoader's data queue (_try_get_data, dataloader.py:1250), called from fit.py:57 in run_epoch" in h.summary


# pytorch/examples#148 (another comment): the main process's frame line lost among the workers'
ORPHAN = [
    "    return self._semlock.__enter__()",
    "KeyboardInterrupt",
    "KeyboardInterrupt",
    "    idx, batch = self.data_queue.get()",
    '  File "/home/yimengzh_everyday/miniconda2/envs/pytorch_openblas/lib/python3.5/queue.py", line 164, in get',
    "KeyboardInterrupt",
]


def test_the_dataloaders_code_line_left_above_a_queue_get_excerpt_is_a_hang():
    (h,) = [f for f in _final(ORPHAN) if f.kind == "hang"]
    assert "the DataLoader's data queue (`idx, batch = self.data_queue.get()` -> queue.py:164 get)" in h.summary


def test_a_queue_get_excerpt_without_the_dataloaders_line_is_not_a_hang():
    text = [ln for ln in ORPHAN if "data_queue" not in ln]
    assert "hang" not in _kinds(_final(text))
