"""Shapes of Ray-orchestrated training (RL trainers with vLLM engines, Ray jobs): the raylet
memory monitor's kill summary, the OOM advice that ends every memory-monitor kill message,
and `ray job submit`'s failed-entrypoint status (issue 22, helper k11serve). Each with a
healthy counter-example that must stay quiet; texts from training-split pastes."""

from __future__ import annotations

from tests.judge_support import summaries_by_kind as _by_kind

# flwrlabs/flower#2157
RAYLET_OOM = [
    "(raylet) [2023-07-23 15:21:29,851 E 9751 9751] (raylet) node_manager.cc:3084: 4 Workers (tasks / actors) "
    "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: b287aac2de42bef55d13e"
    "884c4bdb6cffb2d81d1dc96aa08c4633a43, IP: 172.28.0.12) over the last time period. To see more information about "
    "the Workers killed on this node, use `ray logs raylet.out -ip 172.28.0.12`",
    "(raylet) ",
]


def test_raylet_memory_monitor_kill_summary_is_oom_naming_the_count():
    found = _by_kind(RAYLET_OOM)
    assert list(found) == ["oom"], found
    assert "killed 4 worker(s)" in found["oom"][0]


def test_raylet_summary_with_no_oom_kill_is_quiet():
    healthy = [RAYLET_OOM[0].replace("4 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers",
                                     "0 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers")]
    assert _by_kind(healthy) == {}


# OpenRLHF/OpenRLHF#911: only the kill message's tail survived the 20,000-char truncation
RAY_JOB_TAIL = [
    "2025-03-24 14:49:45,286\tERR cli.py:70 -- ---------------------------------------",
    "2025-03-24 14:49:45,286\tINFO cli.py:83 -- Status message: Job entrypoint command failed with exit code 1, last "
    "available logs (truncated to 20,000 chars):",
    "(ActorModelRayActor pid=8249) 8798\t1.17\tray::ReferenceModelRayActor",
    "(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on "
    "this node or reducing task parallelism by requesting more CPUs per task.",
]


def test_ray_oom_advice_tail_and_failed_job_entrypoint_are_oom_and_crash():
    found = _by_kind(RAY_JOB_TAIL)
    assert sorted(found) == ["crash", "oom"], found
    assert any("exited with code 1" in s for s in found["crash"])
    assert any("memory monitor" in s for s in found["oom"])


def test_a_ray_job_that_succeeded_is_quiet():
    # ray-project/ray#40536 (Ray Train's start) and the job CLI's success line
    healthy = [
        "(TorchTrainer pid=7236) Started distributed worker processes: ",
        "(TorchTrainer pid=7236) - (ip=10.0.59.242, pid=7410) rank=0, local_rank=0, node_rank=0",
        "(TorchTrainer pid=7236) - (ip=10.0.12.174, pid=3381) rank=4, local_rank=0, node_rank=1",
        "Job 'raysubmit_73nQ2jgcpZATWrNN' succeeded",
        "Status message: Job finished successfully.",
        "To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.",
    ]
    assert _by_kind(healthy) == {}


# kubeflow/trainer#2008 (the training operator's relay) and kubeflow/trainer#2034 (kubelet's event)
K8S_BACKOFF = [
    "1.708507919323319e+09\tDEBUG\tevents\tError pod pytorch-simple-worker-0 container pytorch waiting message: "
    "back-off 40s restarting failed container=pytorch pod=pytorch-simple-worker-0_kubeflow(2e06a4e3-bceb-42b4-b0fd-"
    'a32cb53d0d00)      {"type": "Warning", "reason": "CrashLoopBackOff"}',
]
K8S_EVENT = [
    "  Warning  BackOff         2m49s                  kubelet            Back-off restarting failed container "
    "init-pytorch in pod random-exp-jw6qxmrm-worker-0_sampler(8d6860a7-204d-45c8-bb57-8d84a6cf8e66)",
]
# kubeflow/katib#1112
K8S_TABLE = [
    "NAME                                         READY   STATUS             RESTARTS   AGE",
    "pytorchjob-example-82cjcqdz-master-0         0/2     CrashLoopBackOff   8          2m32s",
    "pytorchjob-example-82cjcqdz-worker-0         0/1     Init:1/2           0          2m31s",
]


def test_kubernetes_back_off_restarting_a_failed_container_is_a_crash_naming_it():
    for text, name in ((K8S_BACKOFF, "pytorch"), (K8S_EVENT, "init-pytorch")):
        found = _by_kind(text)
        assert list(found) == ["crash"], found
        assert f"failed container {name} " in found["crash"][0]


def test_kubectl_pod_table_in_crashloopbackoff_is_a_crash():
    found = _by_kind(K8S_TABLE)
    assert list(found) == ["crash"], found
    assert "CrashLoopBackOff" in found["crash"][0]


def test_pods_running_after_restarts_and_normal_events_are_quiet():
    healthy = [
        "NAME                                 READY   STATUS    RESTARTS   AGE",
        "pytorch-simple-master-0              1/1     Running   2          14m",
        "pytorch-simple-worker-0              1/1     Running   0          14m",
        "  Normal   Pulled          9m32s                  kubelet            Successfully pulled image "
        '"quay.io/bharathappali/alpine:3.10" in 1.065165424s (1.065174057s including waiting)',
        "  Normal   Created         2m34s (x3 over 9m31s)  kubelet            Created container init-pytorch",
        'time="2024-02-21T09:31:59Z" level=info msg="PyTorchJob=pytorch-simple, ReplicaType=Worker expected=1, '
        'running=1, succeeded=0, failed=0, Replicas=1"',
    ]
    assert _by_kind(healthy) == {}


# FederatedAI/KubeFATE#64
K8S_EVICTED = [
    "4m11s       Warning   Evicted               pod/egg-<id here>    The node was low on resource: memory. "
    "Container egg was using 5053216Ki, which exceeds its request of 0.",
    "4m11s       Normal    Killing               pod/egg-<id here>    Stopping container egg",
]


def test_kubernetes_eviction_for_node_memory_is_oom():
    found = _by_kind(K8S_EVICTED)
    assert list(found) == ["oom"], found
    assert "evicted" in found["oom"][0] and "memory" in found["oom"][0]
    assert list(_by_kind(["4m7s        Warning   Evicted               pod/egg-2    The node had condition: "
                          "[MemoryPressure]."])) == ["oom"]


def test_vllm_memory_profiling_and_pod_resources_are_quiet():
    # ray-project/ray#65486 and a pod description's resources
    healthy = [
        "(RayWorkerProc pid=29271) (Worker pid=29271) INFO 08-19 18:00:26 [gpu_worker.py:857] Free memory on device "
        "(78.66/79.18 GiB) on startup. Desired GPU memory utilization is (0.9, 71.26 GiB). Actual usage is 15.31 GiB "
        "for weight, 1.29 GiB for peak activation, 0.22 GiB for non-torch memory, and 1.0 GiB for CUDAGraph memory.",
        "    Limits:",
        "      memory:  1048576k",
        "  MemoryPressure   False   Tue, 01 Dec 2026 10:00:00 +0000   KubeletHasSufficientMemory   kubelet has "
        "sufficient memory available",
    ]
    assert _by_kind(healthy) == {}


# open-edge-platform/geti_v2#532
K8S_PENDING = [
    "NAME                                     READY   STATUS    RESTARTS   AGE",
    "ex-685ab5fbdee5d4889cdef111-n0-0-dn0-0   0/3     Pending   0          16h",
    "",
    "Node:                <none>",
]


def test_a_pod_still_pending_after_hours_is_a_hang():
    found = _by_kind(K8S_PENDING)
    assert list(found) == ["hang"], found
    assert "Pending after 16h" in found["hang"][0]


def test_a_pod_pending_for_seconds_or_running_is_quiet():
    healthy = [
        "NAME                                 READY   STATUS              RESTARTS   AGE",
        "pytorch-simple-master-0              0/1     Pending             0          40s",
        "pytorch-simple-worker-0              0/1     ContainerCreating   0          3m",
        "pytorch-simple-worker-1              1/1     Running             0          16h",
        "| train_cifar_2a0d4_00003 | PENDING  |       |  0.01  |",
    ]
    assert _by_kind(healthy) == {}
