"""Where the compiled bench-1b step spends its time (issue 23): one GPU, CUDA events.

    python3 bench/trainer_mfu_probe.py --out DIR [--profile]

Times, on the same 4 batches as bench/trainer.py's micro phase (the compiled mode's shapes):
the target prefill eager and with its layers compiled, the compiled drafter fwd+bwd+AdamW
at several loss chunk sizes, and (--profile) a torch.profiler kernel table of the compiled
drafter step. Prints one JSON line per figure; raw tables go to DIR.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.trainer import _events_time_s, drafter_flops_host, target_flops  # noqa: E402
from trainer.config import get_preset  # noqa: E402
from trainer.data import ArrowDataset, BucketPlan  # noqa: E402
from trainer.model import Drafter, load_target  # noqa: E402
from trainer.pipeline import BatchingSpec, BatchPositions, host_batch_for, host_tensors, run_target  # noqa: E402
from trainer.replicas import DrafterReplicas  # noqa: E402
from trainer.synth import write_dataset  # noqa: E402

PEAK = 989.0


def say(**kv) -> None:
    print(json.dumps(kv, default=str), flush=True)


def flex_probe(hbs, dc, dev, option_sets) -> int:
    """One draft layer's attention, fwd+bwd, on the real batches' shapes and block masks,
    compiled flex with each kernel_options set (the first: {} = the defaults)."""
    from torch.nn.attention.flex_attention import flex_attention

    from trainer import dflash_mask

    cases = []
    for hb in hbs[:2]:
        s, length = hb.input_ids.shape
        a = hb.anchors.shape[1]
        q_len = a * dc.block_size
        anchors = torch.from_numpy(hb.anchors).to(dev)
        bm = dflash_mask.block_mask(anchors, length, dc.block_size)
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(s, dc.num_heads, q_len, dc.head_dim, device=dev, dtype=torch.bfloat16, generator=g)
        k = torch.randn(s, dc.num_kv_heads, length + q_len, dc.head_dim, device=dev, dtype=torch.bfloat16,
                        generator=g)
        v = torch.randn_like(k)
        cases.append((q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), bm))
    for opts in option_sets:
        torch._dynamo.reset()
        fn = torch.compile(flex_attention, dynamic=False)

        def one(i, fn=fn, opts=opts):
            q, k, v, bm = cases[i % len(cases)]
            out = fn(q, k, v, block_mask=bm, enable_gqa=True, kernel_options=opts or None)
            out.sum().backward()
        try:
            _events_time_s(one, 4, True)
            t_all = _events_time_s(one, 8, True) / 8

            def fwd(i, fn=fn, opts=opts):
                q, k, v, bm = cases[i % len(cases)]
                with torch.no_grad():
                    fn(q, k, v, block_mask=bm, enable_gqa=True, kernel_options=opts or None)
            _events_time_s(fwd, 4, True)
            t_fwd = _events_time_s(fwd, 8, True) / 8
            say(name="flex", options=opts, fwd_bwd_ms=t_all * 1e3, fwd_ms=t_fwd * 1e3)
        except Exception as exc:  # noqa: BLE001 -- a config that does not compile is a result too
            say(name="flex", options=opts, error=repr(exc)[:300])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--chunks", default="8192,16384")
    ap.add_argument("--flex", default="", help="';'-separated JSON kernel_options to time flex fwd+bwd with")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = get_preset("bench-1b")
    tc, dc = cfg.train, cfg.drafter
    data = out / "data-probe"
    if not data.exists():
        write_dataset(data, 300, min_len=cfg.synth_min_len, max_len=cfg.synth_max_len, vocab=cfg.synth_vocab,
                      cycle=cfg.synth_cycle)
    ds = ArrowDataset(data)
    plan = BucketPlan(ds, block_size=dc.block_size, token_budget=tc.token_budget, max_length=tc.max_length,
                      num_buckets=tc.num_buckets, max_batch_samples=tc.max_batch_samples)
    am = 128 // dc.block_size
    common = dict(block_size=dc.block_size, max_anchors=dc.max_anchors, max_length=tc.max_length,
                  mask_token_id=dc.mask_token_id, seed=0, len_multiple=128, anchor_multiple=am)
    steps = tuple(sorted({-(-min(b.hi - 1, tc.max_length) // 128) * 128 for b in plan.buckets}))
    spec_e = BatchingSpec(**common)
    spec_c = BatchingSpec(**common, length_steps=steps, fixed_anchors=-(-dc.max_anchors // am) * am)
    pos = BatchPositions(plan, start_pos=0, world=1, rank=0, replicas=1)
    hbs_e = [host_batch_for(ds, pos, spec_e, i) for i in range(4)]
    hbs_c = [host_batch_for(ds, pos, spec_c, i) for i in range(4)]
    dev = torch.device("cuda", 0)
    if args.flex:
        return flex_probe(hbs_c, dc, dev, [json.loads(x) for x in args.flex.split(";")])
    target = load_target(cfg.target, dc.target_layers, path=None, device=dev, dtype=torch.bfloat16)
    host_e = [host_tensors(hb, True) for hb in hbs_e]
    host_c = [host_tensors(hb, True) for hb in hbs_c]
    tflop = sum(target_flops(cfg, hb.lengths, hb.input_ids.shape[1]) for hb in hbs_e)
    tokens = sum(hb.num_tokens for hb in hbs_e)
    for name, host in (("target_eager_eagershapes", host_e), ("target_eager_compiledshapes", host_c)):
        _events_time_s(lambda i, h=host: target(h[i % 4]["input_ids"].to(dev)), 2, True)
        t = _events_time_s(lambda i, h=host: target(h[i % 4]["input_ids"].to(dev)), 8, True) / 2
        say(name=name, s_per_4=t, tok_per_s=tokens / t, mfu=tflop / t / 1e12 / PEAK)
    for layer in target.model.layers:
        layer.compile(dynamic=None)
    t0 = time.time()
    _events_time_s(lambda i: target(host_c[i % 4]["input_ids"].to(dev)), 8, True)
    warm = time.time() - t0
    t = _events_time_s(lambda i: target(host_c[i % 4]["input_ids"].to(dev)), 8, True) / 2
    say(name="target_compiled_layers_compiledshapes", s_per_4=t, tok_per_s=tokens / t, mfu=tflop / t / 1e12 / PEAK,
        warm_s=warm)
    feats = [run_target(target, h, hb, dev, dev, None) for h, hb in zip(host_c, hbs_c)]
    dflop = sum(drafter_flops_host(cfg, hb) for hb in hbs_e)
    import importlib

    importlib.import_module("torch._dynamo").config.recompile_limit = 16
    for chunk in [int(x) for x in args.chunks.split(",")]:
        with torch.device(dev):
            drafter = Drafter(cfg.target, dc)
        drafter.init_weights(1)
        drafter.embed_tokens.to(torch.bfloat16)
        drafter.lm_head.to(torch.bfloat16)
        drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
        for layer in drafter.layers:
            layer.compile(dynamic=None)
        drafter.train()
        reps = DrafterReplicas([drafter], [dev], lr=tc.lr, weight_decay=0.0, grad_clip=1.0, total_steps=1000,
                               warmup_frac=0.04, min_lr_frac=0.1, gamma=dc.loss_gamma, chunk_rows=chunk,
                               use_flex=True, autocast_dtype=torch.bfloat16, compiled=True)
        _events_time_s(lambda i, r=reps: r.step([feats[i % 4]]), 8, True)
        t = _events_time_s(lambda i, r=reps: r.step([feats[i % 4]]), 8, True) / 2
        say(name=f"drafter_compiled_chunk{chunk}", s_per_4=t, mfu=dflop / t / 1e12 / PEAK,
            peak_gib=torch.cuda.max_memory_allocated(dev) / 2 ** 30)
        if args.profile and chunk == int(args.chunks.split(",")[0]):
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i in range(4):
                    reps.step([feats[i]])
                torch.cuda.synchronize()
            (out / "probe-profile-drafter.txt").write_text(prof.key_averages().table(
                sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=110))
            print((out / "probe-profile-drafter.txt").read_text()[:9000])
        del reps, drafter
        torch.cuda.empty_cache()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(4):
                target(host_c[i]["input_ids"].to(dev))
            torch.cuda.synchronize()
        (out / "probe-profile-target.txt").write_text(prof.key_averages().table(
            sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=110))
        print((out / "probe-profile-target.txt").read_text()[:5000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
