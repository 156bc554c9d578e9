"""Runs inside the clients' venv (.venv-clients, where scripts/setup.sh installs z-lab's
`dflash` 0.1.0 beside transformers 5), driven by tests/trainer/test_eval_decode.py:

    decode TARGET EXPORT IO.pt OUT.pt
        the export loaded the trust_remote_code way (AutoModel, its auto_map), the target
        by transformers, and dflash's own inference loop (`dflash.model.dflash_generate`,
        greedy) over IO's prompts: each prompt's acceptance_lengths and output ids.
    draft TARGET EXPORT IO.pt OUT.pt
        dflash's DFlashDraftModel forward at each of IO's anchors, the way its loop calls it
        (context = the features before the anchor, block = [anchor token, MASK...]):
        the logits of slots 1..B-1.

One stand-in: dflash_generate(return_stats=True) times itself with torch.cuda.synchronize,
which fails on a CPU-only torch; `_cuda_time` is replaced by time.perf_counter (timing only:
the acceptance lengths it returns do not depend on it). No code of dflash is copied here.
"""

import time

import command_server
import torch


def _load(target_dir: str, export_dir: str):
    from transformers import AutoModel, Qwen3ForCausalLM

    target = Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = AutoModel.from_pretrained(export_dir, trust_remote_code=True, dtype=torch.float32).eval()
    return target, draft


def decode(target_dir: str, export_dir: str, io_path: str, out_path: str) -> None:
    import dflash.model as dm

    dm._cuda_time = time.perf_counter       # the CPU stand-in named in the module doc
    io = torch.load(io_path)
    target, draft = _load(target_dir, export_dir)
    out = {"class": f"{type(draft).__module__}.{type(draft).__name__}", "mask_token_id": draft.mask_token_id,
           "acceptance_lengths": [], "output_ids": []}
    for prompt in io["prompts"]:
        res = dm.dflash_generate(draft, target, torch.tensor([prompt]), io["max_new_tokens"], None,
                                 temperature=0.0, return_stats=True)
        out["acceptance_lengths"].append([int(x) for x in res.acceptance_lengths])
        out["output_ids"].append(res.output_ids[0].tolist())
    torch.save(out, out_path)


def draft(target_dir: str, export_dir: str, io_path: str, out_path: str) -> None:
    io = torch.load(io_path)
    target, model = _load(target_dir, export_dir)
    feats, ids = io["features"], io["input_ids"]
    bk = model.block_size
    logits = []
    with torch.no_grad():
        for p in io["anchors"]:
            block = torch.full((1, bk), model.mask_token_id)
            block[0, 0] = ids[0, p]
            hidden = model(target_hidden=feats[:, :p], noise_embedding=target.get_input_embeddings()(block),
                           position_ids=torch.arange(p + bk)[None])
            logits.append(model.compute_logits(hidden[:, 1:], target.lm_head)[0])
    torch.save({"logits": torch.stack(logits), "sliding_window": model.config.sliding_window,
                "layer_types": list(model.config.layer_types)}, out_path)


if __name__ == "__main__":
    command_server.main({"decode": decode, "draft": draft})
