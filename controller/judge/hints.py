"""The next step to take, per failure: one sentence each, shared by the rules and the
state detectors so one failure always gets the same advice."""

HINT_CUDA_OOM = ("lower the batch/token budget or sequence length, enable activation checkpointing, "
                 "or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if much memory is "
                 "reserved but unallocated")
HINT_OOM_AFTER_COMPILE = ("; after a dynamo recompile limit, flex_attention runs eager and materializes "
                          "the full score matrix")
"""Appended to an OOM's hint only when the same log shows a recompile limit or an unfused
flex_attention: otherwise that clause is noise (issue 13.5)."""
HINT_ACCEL_OOM = ("the accelerator ran out of memory: lower the batch size, sequence length or the "
                  "engine's memory share (vLLM gpu_memory_utilization / max_num_seqs)")
HINT_HOST_OOM = ("host/container RAM ran out: check the container's memory limit (pct config "
                 "<vmid> memory) and dmesg, lower DataLoader num_workers / prefetch, avoid "
                 "copying the dataset per worker")
HINT_NCCL_TIMEOUT = ("a rank stopped joining collectives (dead/slow rank, deadlock, or uneven "
                     "work per rank): find the first rank that failed; NCCL_DEBUG=INFO and "
                     "TORCH_NCCL_TRACE_BUFFER_SIZE help; py-spy dump --pid on each rank")
HINT_STOPPED_WAIT = ("the program was blocked in that wait when it was stopped: the rank, DataLoader worker or "
                     "task it waited for never answered; py-spy dump --pid on every rank/worker shows who is missing")
HINT_STALL = ("the run stopped making progress long before it was stopped: next time dump its stacks while it stands "
              "still (py-spy dump --pid, faulthandler.dump_traceback_later) to see where it waits -- a data loader, "
              "a collective, a task that cannot be scheduled")
HINT_CRASH = "read the exception and the last frame; fix, then relaunch (dfctl deploy)"
HINT_LAUNCHER = ("the launcher only reports the death: the dead rank's own last lines (above) say why; "
                 "a signal means native code or the kernel ended it")
HINT_SEGV = "a C/CUDA extension crashed: run under python -X faulthandler (or gdb) to get the stack"
HINT_ABORT = ("native code called abort() (a failed C++ check, a double free): the lines just above "
              "name the check; python -X faulthandler shows the Python stack")
HINT_CUDA_FATAL = ("a CUDA kernel fault poisons the context: rerun with CUDA_LAUNCH_BLOCKING=1 "
                   "to find the kernel; check dmesg for Xid errors")
HINT_NAN = ("lower the learning rate or raise warm-up, check grad clipping and the data "
            "for empty/garbage batches; resume from the last good checkpoint")
HINT_RECOMPILE = ("shapes change per batch: compile with dynamic=True, pad to a few fixed "
                  "shapes (buckets), or raise torch._dynamo.config.recompile_limit; "
                  "TORCH_LOGS=recompiles shows why")
HINT_FLEX = ("wrap flex_attention in torch.compile (and keep it compiled: a recompile limit "
             "hit sends it back to eager); the eager path OOMs at long context")
HINT_STALE = "stdout is probably block-buffered: relaunch with PYTHONUNBUFFERED=1 (dfctl deploy does this)"
HINT_USAGE = "the program refused its command line: fix the argument in the playbook's args, then redeploy"
HINT_GPU_UNREADABLE = ("nvidia-smi could not read the GPUs: a lost GPU (Xid 79), a driver reload or a "
                       "crashed persistence daemon; check dmesg and nvidia-smi -q on the host")
