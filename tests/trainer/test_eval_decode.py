"""The decode-measured accept_len (trainer/eval_decode.py) held to z-lab's own inference loop.

A transformers-written Qwen3 target; data it generated itself (greedy continuations of random
prompts, so a drafter can learn to predict it and blocks accept more than the bonus token);
a tiny drafter trained on it with a sliding layer of window 12 (prompts of 24 tokens: past
the window) and a full one; the export loaded by `dflash` 0.1.0 the trust_remote_code way
(its auto_map) and decoded by `dflash.model.dflash_generate` on the same prompts. The
acceptance lengths must be equal block by block, and the generated ids too. The draft
model's logits at anchors past the window must equal ours under the inference rule (<= 1e-5)
and differ under speculators' training rule.
"""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from tests.trainer.conftest import run_in_process
from trainer import eval_decode
from trainer.config import FULL, SLIDING
from trainer.export import load_export
from trainer.export import main as export_main
from trainer.model import hf_config_to_target, load_target
from trainer.synth import DATA_FILE, SCHEMA

torch.set_num_threads(1)
WINDOW, PROMPT_LEN = 12, 24


def _target(hf_dir: Path):
    cfg = hf_config_to_target(json.loads((hf_dir / "config.json").read_text()))
    return load_target(cfg, (0, 1, 2), path=str(hf_dir), device=torch.device("cpu"), dtype=torch.float32,
                       full=True)


def _prompts(n: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 200, (n, PROMPT_LEN), generator=g).tolist()


def _greedy(target, prompts: list[list[int]], new: int) -> list[list[int]]:
    ids = torch.tensor(prompts)
    for _ in range(new):
        logits, _ = target.logits_and_features(ids)
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids.tolist()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, hf_target):
    """(target dir, export dir, our full target): the drafter trained on the target's own text."""
    base = tmp_path_factory.mktemp("decode")
    hf_dir = hf_target
    target = _target(hf_dir)
    seqs = _greedy(target, _prompts(96, seed=5), 40)
    data = base / "data"
    data.mkdir()
    ids = pa.array([s for s in seqs], type=pa.list_(pa.int32()))
    mask = pa.array([[0] * PROMPT_LEN + [1] * (len(s) - PROMPT_LEN) for s in seqs], type=pa.list_(pa.int8()))
    with pa.OSFile(str(data / DATA_FILE), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays([ids, mask], schema=SCHEMA))
    run_dir = base / "run"
    result = run_in_process([
        "--config", "tiny", "--data", str(data), "--run-dir", str(run_dir), "--steps", "30", "--log-every", "10",
        "--target-model", str(hf_dir), "--device", "cpu", "--sequential", "--target-layers", "0,1,2",
        "--draft-layer-types", "sliding,full", "--sliding-window", str(WINDOW)])
    assert result.exit_code == 0
    export_dir = base / "export"
    assert export_main([str(run_dir), str(export_dir), "--dtype", "float32"]) == 0
    return hf_dir, export_dir, target


def test_decode_equals_dflash_reference_loop_per_block(trained, tmp_path, dflash_client):
    hf_dir, export_dir, target = trained
    config = json.loads((export_dir / "config.json").read_text())
    assert config["auto_map"] == {"AutoModel": "dflash_model.DFlashDraftModel"}
    assert config["layer_types"] == [SLIDING, FULL] and config["sliding_window"] == WINDOW
    drafter = load_export(export_dir, target.cfg).float().eval()
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    prompts = _prompts(4, seed=11)                      # not in the training data
    ours = eval_decode.decode(target, drafter, prompts, max_new_tokens=30)
    torch.save({"prompts": prompts, "max_new_tokens": 30}, tmp_path / "io.pt")
    dflash_client("decode", str(hf_dir), str(export_dir), str(tmp_path / "io.pt"), str(tmp_path / "out.pt"))
    theirs = torch.load(tmp_path / "out.pt")
    assert theirs["class"].endswith("DFlashDraftModel") and theirs["mask_token_id"] == drafter.cfg.mask_token_id
    assert ours.per_prompt == theirs["acceptance_lengths"]
    assert ours.output_ids == theirs["output_ids"]
    blocks = [n for p in ours.per_prompt for n in p]
    assert max(blocks) > 1                               # the trained drafter gets tokens accepted
    assert ours.accept_len == pytest.approx(float(np.mean(blocks)))


def test_inference_mask_matches_dflash_past_the_window(trained, tmp_path, dflash_client):
    hf_dir, export_dir, target = trained
    drafter = load_export(export_dir, target.cfg).float().eval()
    assert drafter.cfg.sliding_mask == "inference"
    drafter.share_target_weights(target.embed_weight, target.lm_head_weight)
    ids = torch.tensor(_greedy(target, _prompts(1, seed=21), 16))
    _, feats = target.logits_and_features(ids)
    # slot k of anchor p sees context > p + k - W (engines) or >= p - W (speculators' training):
    # the same for p <= W - B (anchor 3), not past it
    anchors = [3, WINDOW + 3, 2 * WINDOW + 5, ids.shape[1] - 9]
    torch.save({"features": feats, "input_ids": ids, "anchors": anchors}, tmp_path / "io.pt")
    dflash_client("draft", str(hf_dir), str(export_dir), str(tmp_path / "io.pt"), str(tmp_path / "out.pt"))
    theirs = torch.load(tmp_path / "out.pt")
    assert theirs["sliding_window"] == WINDOW and theirs["layer_types"] == [SLIDING, FULL]

    def ours(model):
        out = []
        with torch.no_grad():
            for p in anchors:
                block = torch.full((1, 1, model.cfg.block_size), model.cfg.mask_token_id)
                block[0, 0, 0] = ids[0, p]
                hidden = model(feats[:, :p], block, torch.tensor([[p]]), use_flex=False)
                out.append(hidden[0, 0, 1:] @ model.lm_head.weight.t())
        return torch.stack(out)

    assert (ours(drafter) - theirs["logits"]).abs().max().item() <= 1e-5
    # speculators' training rule differs from the engines' only past the window
    training = load_export(export_dir, target.cfg).float().eval()
    training.cfg = replace(training.cfg, sliding_mask="training")
    training.share_target_weights(target.embed_weight, target.lm_head_weight)
    diff = (ours(training) - theirs["logits"]).abs().amax(dim=(1, 2))
    assert diff[0].item() <= 1e-5 and diff[2:].min().item() > 1e-3


def test_the_tools_figures_are_the_runs_own_on_its_checkpoint(tiny_data, tmp_path, capsys):
    """`python -m trainer.eval_decode RUN_DIR` with no split flags: the held-out split, the
    seed and the batching come from the checkpoint, so the training-time estimate is the
    run's eval_accept_len (the same samples, the same anchors), and with the run's decode
    settings the decoded figure is the run's eval_accept_len_decode. Before, it scored the
    first 16 rows of the whole dataset with 512 anchors each: another number (on the GPU a
    bench run's 4.583 read 1.000)."""
    run_dir = tmp_path / "run"
    result = run_in_process(["--config", "tiny", "--data", str(tiny_data), "--run-dir", str(run_dir),
                             "--steps", "20", "--log-every", "10", "--eval-fraction", "0.1", "--eval-every", "20",
                             "--seed", "3", "--device", "cpu", "--sequential"])
    assert result.exit_code == 0
    recorded = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    run_eval = [r for r in recorded if "eval_accept_len" in r][-1]
    capsys.readouterr()
    assert eval_decode.main([str(run_dir), "--prompts", str(tiny_data), "--device", "cpu", "--json",
                             "--num-prompts", "4", "--max-new-tokens", "32", "--max-prompt-tokens", "224"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["eval_fraction"], doc["seed"]) == (0.1, 3)
    assert doc["estimate_rows"] > doc["prompts"] == 4
    assert doc["eval_accept_len"] == pytest.approx(run_eval["eval_accept_len"], abs=1e-9)
    assert doc["eval_accept_len_decode"] == pytest.approx(run_eval["eval_accept_len_decode"], abs=1e-9)
    # another seed is another split and other anchors: the figure is not a constant
    assert eval_decode.main([str(run_dir), "--prompts", str(tiny_data), "--device", "cpu", "--json",
                             "--seed", "4", "--num-prompts", "1", "--max-new-tokens", "8"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["seed"] == 4 and other["eval_accept_len"] != doc["eval_accept_len"]
