"""Programs run here (CPU, torch 2.13.0+cpu, gloo, Python 3.11.7) for dfctl tests, round k14hangtorch: a
rank parked in a collective, seen by faulthandler's timer and by py-spy 0.4.3. Each log is the program's
stdout+stderr as produced (PYTHONUNBUFFERED=1), the checkout path of the scratch copy left as it was:

  faulthandler_barrier_k14.log         torchrun --nproc_per_node 2 PROG faulthandler_barrier
                                       (dump_traceback_later(6, exit=True); rank 1 sleeps 30 s before the
                                       barrier: rank 0's dump is inside dist.barrier, then _exit(1))
  faulthandler_barrier_slow_k14.log    torchrun --nproc_per_node 2 PROG faulthandler_barrier_slow
                                       (exit=False: rank 0 dumps inside the barrier after 3 s, rank 1
                                       arrives at 6 s, both go on to train and finish; healthy)
  pyspy_native_barrier_k14.log         torchrun --nproc_per_node 2 PROG barrier_wait, then after 12 s
                                       `py-spy dump --pid P` and `py-spy dump --native --pid P` of each rank
                                       (rank 0 in dist.barrier, rank 1 in time.sleep), concatenated in
                                       that order behind the run's own output
  pyspy_native_healthy_k14.log         the same dumps of rank 1 only (a rank sleeping, not waiting)
"""
import datetime, faulthandler, os, sys, time  # noqa: I001  (added after the runs; no line moved)
import torch
import torch.distributed as dist

mode = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))


def log(msg):
    print(f"rank {rank}: {msg}", flush=True)


if mode == "faulthandler_barrier":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    faulthandler.dump_traceback_later(6, exit=True)
    if rank == 1:
        log("loading a large shard before the barrier")
        time.sleep(30)
    log("entering barrier")
    dist.barrier()
    log("after barrier")
elif mode == "faulthandler_barrier_slow":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    faulthandler.dump_traceback_later(3, exit=False)
    if rank == 1:
        log("loading a large shard before the barrier")
        time.sleep(6)
    log("entering barrier")
    dist.barrier()
    faulthandler.cancel_dump_traceback_later()
    log("after barrier")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 4):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        log(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()
    log("finished")
elif mode == "barrier_wait":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    if rank == 1:
        log("evaluating on rank 1 only (never reaches the barrier)")
        time.sleep(40)
    else:
        log("entering barrier")
        dist.barrier()
    log("after barrier")
elif mode == "init_only":
    # started alone with WORLD_SIZE=2 (its peer never comes): init_process_group waits in the store
    log("init_process_group")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    log("initialised")

# (Appended after the runs above, so their line numbers stay as the logs show them.)
#   torchrun_rdzv_join_ctrl_c_k14.log  timeout -s INT 10 torchrun --nnodes 2 --nproc_per_node 1 --rdzv-backend c10d
#                                      --rdzv-endpoint 127.0.0.1:29663 --rdzv-id k14 PROG init_only
#                                      (one node of two: the agent waits in the rendezvous join; SIGINT at 10 s)
# init_only started alone with RANK=0 WORLD_SIZE=2 prints the DistStoreError `... 1/2 clients joined` the
# readers already read, and with RANK=1 (no master) one `TCP client failed to connect/validate ... retrying`
# warning and ignores SIGINT: the first log is not kept, the second is (below).
#   tcpstore_client_retry_interrupted_k14.log  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29662
#                                      timeout -s INT 8 python PROG init_only, no master started: SIGINT interrupts
#                                      the client's retry delay (its one `TCP client failed to connect/validate ...
#                                      - retrying` warning, with the socket error's C++ frames); it ignores the
#                                      SIGINT and was ended with SIGTERM at about 16 s, printing nothing more
