"""The target (a Qwen3-style decoder) and the DFlash drafter, in one file.

Target: RMSNorm, RoPE, grouped-query attention with per-head QK-norm, SwiGLU. Module names
follow Hugging Face's Qwen3 checkpoints (`model.layers.N.self_attn.q_proj.weight`, ...), so a
local Qwen3 safetensors checkpoint loads with no renaming and no `transformers`. It runs
frozen under no_grad and stops after the deepest layer the drafter reads: the last layers
and the final norm of a 64-layer target cost time and memory and feed nothing.

Drafter (DFlash): the K chosen target layers' outputs are concatenated, `fc` maps K*H -> H,
RMSNorm; that is the context. Every draft layer projects the context with its own k/v
projections and prepends it to the block's keys/values; queries come from the block only.
The block is [anchor token, MASK x (B-1)], embedded with the target's frozen embedding;
the output goes through the drafter's norm and the target's frozen lm_head (in the loss).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import dflash_mask
from .config import SLIDING, DrafterConfig, TargetConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            # One fused kernel (float32 math inside, one rounding) instead of ~7 elementwise
            # passes over a float32 copy, forward and backward: the eager drafter's norms
            # were ~3 ms each per 49K-token batch (bench/results/trainer.md, run 6). Outside
            # autocast, which would hand it a float32 copy of x.
            with torch.autocast("cuda", enabled=False):
                return F.rms_norm(x, (x.shape[-1],), self.weight.to(x.dtype), self.eps)
        # Normalise in float32 (bf16 variance loses too much), scale in the input dtype.
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight.to(dtype) * x32.to(dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    """cos, sin of shape [*positions.shape, head_dim] (Hugging Face's rotate_half layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [S, heads, T, D]; cos/sin [S, T, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inner: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Attention(nn.Module):
    """GQA with QK-norm. `forward` is causal self-attention (the target); the drafter uses
    `project_q` / `project_kv` and its own attention call."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, eps: float):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)

    def project_q(self, x, cos, sin):
        s, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(s, t, self.heads, self.head_dim)).transpose(1, 2)
        return apply_rope(q, cos, sin)

    def project_kv(self, x, cos, sin):
        s, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(s, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(s, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        s, _, t, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(s, t, self.heads * self.head_dim))

    def forward(self, x, cos, sin):
        q = self.project_q(x, cos, sin)
        k, v = self.project_kv(x, cos, sin)
        # Right-padded batches: causal attention never lets a real token see the padding.
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.heads != self.kv_heads)
        return self.merge(out)


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, inner, eps):
        super().__init__()
        self.self_attn = Attention(hidden, heads, kv_heads, head_dim, eps)
        self.mlp = SwiGLU(hidden, inner)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class _Backbone(nn.Module):
    """Holds `embed_tokens`, `layers`, `norm` under the name `model`, as HF checkpoints do."""

    def __init__(self, cfg: TargetConfig, num_layers: int):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            DecoderLayer(cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size,
                         cfg.rms_norm_eps) for _ in range(num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TargetModel(nn.Module):
    """The frozen target. `forward(input_ids)` -> concat of the chosen layers' outputs [S, L, K*H]."""

    def __init__(self, cfg: TargetConfig, feature_layers: tuple[int, ...], *, full: bool = False):
        super().__init__()
        self.cfg = cfg
        self.feature_layers = tuple(feature_layers)
        # full: every layer (the decode evaluation needs the target's own logits)
        self.model = _Backbone(cfg, cfg.num_layers if full else max(self.feature_layers) + 1)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.requires_grad_(False)

    def reset_parameters(self, seed: int) -> None:
        """Random init (demo and benchmark targets): normal(0, 0.02) matrices, unit norms.
        Drawn on the parameters' own device (a 1B target drawn on the CPU takes many seconds)."""
        gen = torch.Generator(device=self.lm_head.weight.device).manual_seed(seed)
        # embedding and lm_head first: the same draws whatever the depth built (a full
        # target for the decode evaluation, or one cut after the deepest feature layer)
        params = dict(self.named_parameters())
        order = [n for n in ("model.embed_tokens.weight", "lm_head.weight") if n in params]
        for name, p in [(n, params[n]) for n in order] + [(n, q) for n, q in params.items() if n not in order]:
            with torch.no_grad():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name in ("model.embed_tokens.weight", "lm_head.weight"):
                    p.normal_(0.0, self.cfg.embed_init_std, generator=gen)
                else:
                    p.normal_(0.0, 0.02, generator=gen)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        s, length = input_ids.shape
        x = self.model.embed_tokens(input_ids)
        positions = torch.arange(length, device=input_ids.device).expand(s, length)
        cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        wanted = set(self.feature_layers)
        features = []
        for i, layer in enumerate(self.model.layers[:max(wanted) + 1]):   # a full target: no more than needed
            x = layer(x, cos, sin)
            if i in wanted:
                features.append(x)
        return torch.cat([features[sorted(wanted).index(i)] for i in self.feature_layers], dim=-1)

    @torch.no_grad()
    def logits_and_features(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [S, L, V], features [S, L, K*H]) of a full target (built with full=True)."""
        if len(self.model.layers) != self.cfg.num_layers:
            raise ValueError("logits need every target layer: build TargetModel(..., full=True)")
        s, length = input_ids.shape
        x = self.model.embed_tokens(input_ids)
        positions = torch.arange(length, device=input_ids.device).expand(s, length)
        cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        outputs = []
        for layer in self.model.layers:
            x = layer(x, cos, sin)
            outputs.append(x)
        features = torch.cat([outputs[i] for i in self.feature_layers], dim=-1)
        return self.lm_head(self.model.norm(x)), features

    @property
    def embed_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.lm_head.weight


QWEN3_DEFAULT_ROPE_THETA = 10_000.0   # transformers' Qwen3Config default, when a config names none


def rope_theta_of(config_json: dict) -> float:
    """The RoPE base as transformers reads it: `rope_parameters` (transformers >= 5 writes
    only this), else the older `rope_scaling` dict, else a flat `rope_theta`, else the
    config class's default."""
    for key in ("rope_parameters", "rope_scaling"):
        holder = config_json.get(key)
        if isinstance(holder, dict) and holder.get("rope_theta") is not None:
            return float(holder["rope_theta"])
    if config_json.get("rope_theta") is not None:
        return float(config_json["rope_theta"])
    return QWEN3_DEFAULT_ROPE_THETA


def decoder_config_of(config_json: dict) -> dict:
    """The text decoder's config: multimodal wrappers (Qwen3.5/3.6) nest it under `text_config`."""
    inner = config_json.get("text_config")
    return inner if isinstance(inner, dict) else config_json


def hf_config_to_target(config_json: dict) -> TargetConfig:
    """A Hugging Face Qwen3-style config.json (or a wrapper holding one in `text_config`) as
    TargetConfig. Raises KeyError naming a missing key."""
    c = decoder_config_of(config_json)
    return TargetConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
        num_heads=c["num_attention_heads"], num_kv_heads=c.get("num_key_value_heads") or c["num_attention_heads"],
        head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
        intermediate_size=c["intermediate_size"], rope_theta=rope_theta_of(c),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", config_json.get("tie_word_embeddings", False))))


def load_target(cfg: TargetConfig, feature_layers: tuple[int, ...], *, path: str | None, device: torch.device,
                dtype: torch.dtype, seed: int = 0, full: bool = False) -> TargetModel:
    """Random init (path None), a safetensors file, or a directory of Qwen3 safetensors shards
    (with config.json, which then overrides `cfg`). Weights go to `device` in `dtype`."""
    if path is None:
        with torch.device(device):
            target = TargetModel(cfg, feature_layers, full=full)
        target.reset_parameters(seed)
        return target.to(dtype=dtype).eval()
    from safetensors import safe_open

    p = Path(path)
    if p.is_dir():
        cfg_file = p / "config.json"
        if cfg_file.exists():
            raw = json.loads(cfg_file.read_text())
            if raw.get("model_type") not in (None, "qwen3"):
                raise ValueError(f"{cfg_file}: model_type {raw.get('model_type')!r} is not qwen3; "
                                 "load it through transformers (HuggingFaceTarget)")
            cfg = hf_config_to_target(raw)
        files = sorted(p.glob("*.safetensors"))
    else:
        files = [p]
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors files")
    with torch.device("meta"):
        target = TargetModel(cfg, feature_layers, full=full)
    wanted = dict(target.named_parameters())
    loaded: dict[str, torch.Tensor] = {}
    for f in files:
        with safe_open(str(f), framework="pt", device="cpu") as fh:
            for key in fh.keys():
                if key in wanted:
                    loaded[key] = fh.get_tensor(key).to(device=device, dtype=dtype)
    if cfg.tie_word_embeddings and "lm_head.weight" not in loaded and "model.embed_tokens.weight" in loaded:
        loaded["lm_head.weight"] = loaded["model.embed_tokens.weight"]
    missing = sorted(set(wanted) - set(loaded))
    if missing:
        raise ValueError(f"{path}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    target.load_state_dict(loaded, strict=True, assign=True)
    return target.eval().requires_grad_(False)


class HuggingFaceTarget(nn.Module):
    """A local Hugging Face model directory through `transformers` (optional dependency),
    for targets this file does not implement (e.g. hybrid-attention Qwen3.6)."""

    def __init__(self, path: str, feature_layers: tuple[int, ...], device: torch.device, dtype: torch.dtype):
        super().__init__()
        from transformers import AutoModelForCausalLM  # optional: only for such targets

        self.hf = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype).to(device).eval().requires_grad_(False)
        self.feature_layers = tuple(feature_layers)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.hf.model(input_ids=input_ids, output_hidden_states=True)
        return torch.cat([out.hidden_states[i + 1] for i in self.feature_layers], dim=-1)

    @torch.no_grad()
    def logits_and_features(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.hf(input_ids=input_ids, output_hidden_states=True)
        return out.logits, torch.cat([out.hidden_states[i + 1] for i in self.feature_layers], dim=-1)

    @property
    def embed_weight(self):
        return self.hf.get_input_embeddings().weight

    @property
    def lm_head_weight(self):
        return self.hf.get_output_embeddings().weight


# ---------------------------------------------------------------------------------------
# Drafter

_flex_compiled = None
_flex_lock = threading.Lock()


def _flex_attention(q, k, v, block_mask):
    """flex_attention, compiled once (uncompiled flex materialises the score matrix).
    The lock keeps several drafter threads from tracing it at once (the seed's FX race)."""
    global _flex_compiled
    from torch.nn.attention.flex_attention import flex_attention

    with _flex_lock:
        if _flex_compiled is None:
            _flex_compiled = torch.compile(flex_attention, dynamic=True)
        return _flex_compiled(q, k, v, block_mask=block_mask, enable_gqa=q.shape[1] != k.shape[1])


class DraftLayer(DecoderLayer):
    """A decoder layer whose keys/values are [context ; block] and whose queries are the block."""

    def forward(self, x, ctx, cos_q, sin_q, cos_c, sin_c, mask):
        attn = self.self_attn
        h = self.input_layernorm(x)
        q = attn.project_q(h, cos_q, sin_q)
        k_blk, v_blk = attn.project_kv(h, cos_q, sin_q)
        k_ctx, v_ctx = attn.project_kv(ctx, cos_c, sin_c)
        k = torch.cat([k_ctx, k_blk], dim=2)
        v = torch.cat([v_ctx, v_blk], dim=2)
        if isinstance(mask, torch.Tensor):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=attn.heads != attn.kv_heads)
        elif torch.compiler.is_compiling():      # --compile-drafter: flex is traced into the layer's graph
            from torch.nn.attention.flex_attention import flex_attention

            out = flex_attention(q, k, v, block_mask=mask, enable_gqa=attn.heads != attn.kv_heads)
        else:
            out = _flex_attention(q, k, v, mask)
        x = x + attn.merge(out)
        return x + self.mlp(self.post_attention_layernorm(x))


class Drafter(nn.Module):
    """DFlash drafter. Trainable: fc, hidden_norm, layers, norm. Frozen (copied from the
    target): embed_tokens, lm_head. Layers of type SLIDING see a `sliding_window` of context
    counted by `sliding_mask` (dflash_mask.py: the engines' rule by default) and are causal
    inside the block."""

    def __init__(self, target_cfg: TargetConfig, cfg: DrafterConfig):
        super().__init__()
        h = target_cfg.hidden_size
        cfg = cfg.resolved(target_cfg)
        self.cfg, self.target_cfg = cfg, target_cfg
        self.fc = nn.Linear(len(cfg.target_layers) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, target_cfg.rms_norm_eps)
        self.layers = nn.ModuleList(
            DraftLayer(h, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size,
                       target_cfg.rms_norm_eps) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(h, target_cfg.rms_norm_eps)
        self.embed_tokens = nn.Embedding(target_cfg.vocab_size, h).requires_grad_(False)
        self.lm_head = nn.Linear(h, target_cfg.vocab_size, bias=False).requires_grad_(False)
        self.grad_checkpointing = False

    def init_weights(self, seed: int) -> None:
        gen = torch.Generator(device=self.fc.weight.device).manual_seed(seed)
        for name, p in self.trainable_parameters():
            with torch.no_grad():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02, generator=gen)

    def share_target_weights(self, embed: torch.Tensor, lm_head: torch.Tensor) -> None:
        with torch.no_grad():
            self.embed_tokens.weight.copy_(embed)
            self.lm_head.weight.copy_(lm_head)

    def trainable_parameters(self):
        return [(n, p) for n, p in self.named_parameters() if not n.startswith(("embed_tokens.", "lm_head."))]

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        names = {n for n, _ in self.trainable_parameters()}
        return {k: v for k, v in self.state_dict().items() if k in names}

    def forward(self, ctx_features: torch.Tensor, block_ids: torch.Tensor, anchors: torch.Tensor,
                use_flex: bool) -> torch.Tensor:
        """ctx_features [S, L, K*H]; block_ids, anchors-derived positions -> hidden [S, A, Bk, H]
        (after the final norm, before lm_head)."""
        s, length, _ = ctx_features.shape
        _, a, bk = block_ids.shape
        dtype = self.fc.weight.dtype if not torch.is_autocast_enabled(ctx_features.device.type) else \
            torch.get_autocast_dtype(ctx_features.device.type)
        ctx = self.hidden_norm(self.fc(ctx_features))
        x = self.embed_tokens(block_ids.view(s, a * bk)).to(dtype)
        dev = ctx_features.device
        ctx_pos = torch.arange(length, device=dev).expand(s, length)
        blk_pos = (anchors[:, :, None] + torch.arange(bk, device=dev)).view(s, a * bk)
        cos_c, sin_c = rope_cos_sin(ctx_pos, self.cfg.head_dim, self.cfg.rope_theta, dtype)
        cos_q, sin_q = rope_cos_sin(blk_pos, self.cfg.head_dim, self.cfg.rope_theta, dtype)
        build = dflash_mask.block_mask if use_flex else dflash_mask.dense_mask
        masks = {kind: build(anchors, length, bk, window=self.cfg.sliding_window if kind == SLIDING else None,
                             rule=self.cfg.sliding_mask)
                 for kind in set(self.cfg.layer_types)}
        for layer, kind in zip(self.layers, self.cfg.layer_types):
            mask = masks[kind]
            if self.grad_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(layer, x, ctx, cos_q, sin_q, cos_c, sin_c, mask,
                                                      use_reentrant=False)
            else:
                x = layer(x, ctx, cos_q, sin_q, cos_c, sin_c, mask)
        return self.norm(x).view(s, a, bk, -1)
