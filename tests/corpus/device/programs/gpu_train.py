"""A small training loop on one CUDA GPU, made to end the ways real GPU runs end
(device corpus program, run on the lent H200 by tests/corpus/device/programs/make_device_logs.sh).

    python gpu_train.py MODE [--record]

healthy          60 steps of an MLP, then torch.cuda.memory_summary() and the allocator's
                 counters ("CUDA OOMs: 0", "cudaMalloc retries: 0", num_ooms 0): the
                 words a grep for OOM trips on, in a run that is fine
oom              a batch-size ramp (the batch doubles each epoch) that runs past the GPU's
                 memory: the caching allocator's torch.OutOfMemoryError in forward
assert-label     a classifier whose labels are shifted by one at step 5 (label == n_classes):
                 cross_entropy's device-side assert, reported at a later CUDA call
assert-index     a token embedding fed an id one past the vocabulary at step 5
illegal-address  a custom CUDA kernel (a CuPy RawKernel on torch's stream) scattering rows
                 by an index that is garbage at step 5: an illegal memory access

--record wraps main in torch.distributed.elastic's @record, as scripts started by
torchrun do to get the error into the ChildFailedError summary.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F


def mlp(d_in: int, d: int, d_out: int, layers: int) -> torch.nn.Module:
    mods: list[torch.nn.Module] = [torch.nn.Linear(d_in, d), torch.nn.GELU()]
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(d, d), torch.nn.GELU()]
    mods.append(torch.nn.Linear(d, d_out))
    return torch.nn.Sequential(*mods).cuda()


def healthy() -> None:
    model = mlp(1024, 1024, 1, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    t0 = time.time()
    for step in range(1, 61):
        x = torch.randn(512, 1024, device="cuda")
        y = x[:, :8].sum(-1, keepdim=True)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0:
            print(f"step {step:3d} | loss {loss.item():.4f} | grad_norm {gn.item():.3f} | "
                  f"{(time.time() - t0) / step * 1000:.1f} ms/step", flush=True)
    print(torch.cuda.memory_summary(), flush=True)
    stats = torch.cuda.memory_stats()
    keep = ("num_ooms", "num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams",
            "allocated_bytes.all.peak", "reserved_bytes.all.peak")
    print("allocator counters:", {k: stats.get(k) for k in keep}, flush=True)
    print(f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
          f"reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB", flush=True)
    print("done", flush=True)


def oom() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    d = 8192
    model = mlp(d, d, 1, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    print(f"GPU 0: {torch.cuda.get_device_name(0)}, {total_gib:.1f} GiB; batch-size ramp from 8192", flush=True)
    step = 0
    for epoch in range(12):
        batch = 8192 * 2 ** epoch
        for _ in range(2):
            step += 1
            x = torch.randn(batch, d, device="cuda")
            y = x[:, :8].sum(-1, keepdim=True)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print(f"epoch {epoch} step {step} batch {batch} loss {loss.item():.4f} "
                  f"allocated {torch.cuda.memory_allocated() / 2**30:.1f} GiB "
                  f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)


def assert_label() -> None:
    n_classes = 10
    model = mlp(256, 512, n_classes, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 21):
        x = torch.randn(128, 256, device="cuda")
        labels = torch.randint(0, n_classes, (128,), device="cuda")
        if step == 5:
            labels = labels + 1  # the data loader's 1-based labels: class 10 of 10
        loss = F.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


def assert_index() -> None:
    vocab = 32000
    emb = torch.nn.Embedding(vocab, 256).cuda()
    head = torch.nn.Linear(256, vocab).cuda()
    opt = torch.optim.AdamW([*emb.parameters(), *head.parameters()], lr=1e-3)
    for step in range(1, 21):
        tokens = torch.randint(0, vocab, (8, 128), device="cuda")
        if step == 5:
            tokens[3, 17] = vocab  # an added special token the embedding was never resized for
        logits = head(emb(tokens[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


SCATTER_SRC = r"""
extern "C" __global__ void scatter_rows(float* out, const float* src, const long long* rows, int n, int d) {
    int i = blockIdx.x;
    for (int j = threadIdx.x; j < d; j += blockDim.x) out[rows[i] * d + j] = src[(long long)i * d + j];
}
"""


def illegal_address() -> None:
    import cupy

    kernel = cupy.RawKernel(SCATTER_SRC, "scatter_rows")
    d, n = 1024, 256
    model = mlp(d, d, d, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 21):
        x = torch.randn(n, d, device="cuda")
        rows = torch.randperm(n, device="cuda")
        if step == 5:
            rows[7] = 1 << 40  # an uninitialised index buffer
        out = torch.empty_like(x)
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with stream:
            kernel((n,), (256,), (out.data_ptr(), x.data_ptr(), rows.data_ptr(), cupy.int32(n), cupy.int32(d)))
        loss = F.mse_loss(model(out), x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


MODES = {"healthy": healthy, "oom": oom, "assert-label": assert_label, "assert-index": assert_index,
         "illegal-address": illegal_address}


def main() -> None:
    mode = sys.argv[1]
    torch.manual_seed(0)
    print(f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name(0)}; mode {mode}",
          flush=True)
    MODES[mode]()


if __name__ == "__main__":
    if "--record" in sys.argv:
        from torch.distributed.elastic.multiprocessing.errors import record
        main = record(main)
    main()
