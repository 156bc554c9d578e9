"""Runs inside the clients' venv (.venv-clients: transformers 5 + vLLM speculators, their
own torch), driven by tests/trainer/test_export.py through one server process (command_server.py:
`--serve`, or one command from argv by hand). Real clients only:

    make-target DIR THETA      a Qwen3ForCausalLM with random weights, saved by transformers
    make-shaped-target DIR JSON  the same of given sizes (Qwen3Config keyword arguments)
    convert DIR EXPORT OUT.json  speculators' DFlashConverter on the export (validated)
    qwen35-config DIR          a Qwen3.5/3.6-style config.json, written by transformers
    hidden DIR IO.pt OUT.pt    that model's hidden states at the given layers
    draft DIR EXPORT IO.pt OUT.pt
        speculators' DFlashConverter turns our export into its format (base model DIR),
        DFlashDraftModel loads it (eager attention), and its forward on our target
        features gives the logits and the anchors it drew.
    specforge EXPORT IO.pt OUT.pt
        SpecForge's DFlashDraftModel loads the export itself and runs on given inputs.

No code of either library is copied here: only their public classes are called.
"""

import tempfile

import command_server
import torch


def make_target(path: str, theta: float) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=256, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32, intermediate_size=256, tie_word_embeddings=True,
                      rope_parameters={"rope_type": "default", "rope_theta": theta}, max_position_embeddings=4096)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).eval()
    model.save_pretrained(path)


def make_shaped_target(path: str, shape_json: str) -> None:
    """A Qwen3ForCausalLM of the given sizes (a preset's depth and vocabulary at a tiny width)."""
    import json

    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    Qwen3ForCausalLM(Qwen3Config(**json.loads(shape_json))).eval().save_pretrained(path)


def convert(target_dir: str, export_dir: str, out_path: str) -> None:
    """speculators' DFlashConverter on the export (validate=True loads the result back)."""
    import json

    from speculators.convert.dflash import DFlashConverter

    with tempfile.TemporaryDirectory() as converted:
        DFlashConverter().convert(export_dir, converted, base_model=target_dir, validate=True)
        config = json.loads(open(f"{converted}/config.json").read())
    with open(out_path, "w") as fh:
        json.dump({"aux_hidden_state_layer_ids": config.get("aux_hidden_state_layer_ids"),
                   "mask_token_id": config.get("mask_token_id")}, fh)


def qwen35_config(path: str) -> None:
    """A Qwen3.5/3.6-style wrapper config (the text decoder under text_config, RoPE nested
    in rope_parameters), the Qwen3.6-27B text shape, written by transformers' Qwen3_5Config."""
    from transformers import Qwen3_5Config

    Qwen3_5Config(text_config=dict(
        vocab_size=248320, hidden_size=5120, num_hidden_layers=64, num_attention_heads=24, num_key_value_heads=4,
        head_dim=256, intermediate_size=17408,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000, "partial_rotary_factor": 0.25},
    )).save_pretrained(path)


def hidden(path: str, io_path: str, out_path: str) -> None:
    from transformers import Qwen3ForCausalLM

    io = torch.load(io_path)
    model = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        hs = model.model(input_ids=io["input_ids"], output_hidden_states=True).hidden_states
    torch.save({"features": torch.cat([hs[i + 1] for i in io["layers"]], dim=-1)}, out_path)


def draft(target_dir: str, export_dir: str, io_path: str, out_path: str) -> None:
    from speculators.convert.dflash import DFlashConverter
    from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig

    io = torch.load(io_path)
    with tempfile.TemporaryDirectory() as converted:
        DFlashConverter().convert(export_dir, converted, base_model=target_dir, validate=True)
        config = DFlashSpeculatorConfig.from_pretrained(converted)
        config.transformer_layer_config._attn_implementation = "eager"      # exact fp32 on the CPU
        model = DFlashDraftModel.from_pretrained(converted, config=config, dtype=torch.float32).eval()
    features = io["features"]
    length = features.shape[1]
    torch.manual_seed(0)                                                   # its anchors are drawn at random
    with torch.no_grad():
        _, logits, _, _, block_idx = model._backbone_forward(
            features, io["input_ids"], io["loss_mask"], torch.zeros(1, length, features.shape[-1] // io["k"]),
            torch.zeros(1, length, dtype=torch.long), max_anchors=io["max_anchors"])
    torch.save({"logits": logits[0], "anchors": block_idx.view(-1, model.block_size)[:, 0],
                "sliding_window": model.sliding_window, "sliding_layers": model.sliding_window_indices,
                "mask_token_id": model.mask_token_id, "rope_theta": model.rotary_emb.inv_freq[1].item()}, out_path)


def specforge(export_dir: str, io_path: str, out_path: str) -> None:
    """SpecForge's DFlashDraftModel (the `specforge` wheel, installed without its serving
    dependencies: its DFlash module imports only torch and transformers) loads the export;
    its forward on the given block embeddings, features and masks gives the hidden states."""
    from specforge.modeling.draft.dflash import DFlashDraftModel

    io = torch.load(io_path)
    model = DFlashDraftModel.from_pretrained(export_dir, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        hidden = model(position_ids=io["position_ids"], attention_mask=io["masks"],
                       noise_embedding=io["noise_embedding"], target_hidden=io["features"])
    torch.save({"hidden": hidden, "layer_types": list(model.layer_types), "sliding_window": model.sliding_window,
                "mask_token_id": model.mask_token_id, "target_layer_ids": list(model.target_layer_ids)}, out_path)


if __name__ == "__main__":
    command_server.main({"make-target": lambda path, theta: make_target(path, float(theta)),
                         "make-shaped-target": make_shaped_target, "convert": convert, "qwen35-config": qwen35_config,
                         "hidden": hidden, "draft": draft, "specforge": specforge})
