"""Hugging Face ``LlamaForCausalLM`` -> :class:`course_lib.decoder_lm.DecoderLM`.

    model = from_hf(hf_model)          # model(ids) equals hf_model(ids).logits

:func:`config_from_hf` reads the sizes from the HF config; :func:`convert_state_dict`
renames every weight in one table. Nothing is reshaped: HF's Llama checkpoints
already use the half-split RoPE layout that :mod:`course_lib.positional` uses
(Meta's original interleaved weights are permuted by HF's conversion script;
see :func:`course_lib.positional.interleaved_to_half_split`).
"""

from __future__ import annotations

import re

import torch
from torch import Tensor, nn

from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
from course_lib.interop.common import load_checked

__all__ = ["config_from_hf", "convert_state_dict", "from_hf"]

#: RoPE variants this converter reproduces (HF ``rope_parameters["rope_type"]``).
SUPPORTED_ROPE = ("default",)


def _rope_theta(hf_config) -> float:
    """RoPE base. transformers 5.x keeps it in ``rope_parameters``; 4.x had ``rope_theta`` and ``rope_scaling``."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    legacy = getattr(hf_config, "rope_scaling", None) or {}
    rope_type = params.get("rope_type", legacy.get("rope_type", legacy.get("type", "default")))
    if rope_type not in SUPPORTED_ROPE:
        raise ValueError(f"RoPE type {rope_type!r} is not supported (supported: {SUPPORTED_ROPE}); "
                         f"its frequency scaling is not implemented in course_lib")
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", None))
    return 10000.0 if theta is None else float(theta)


def config_from_hf(hf_config, **overrides) -> DecoderLMConfig:
    """A :class:`DecoderLMConfig` with the sizes of a ``LlamaConfig``; ``overrides`` (e.g. ``attn_impl``) win."""
    act = getattr(hf_config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"hidden_act={act!r} is not supported: the SwiGLU MLP uses 'silu'")
    fields = dict(
        vocab_size=hf_config.vocab_size,
        dim=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads,
        n_kv_heads=getattr(hf_config, "num_key_value_heads", None) or hf_config.num_attention_heads,
        head_dim=getattr(hf_config, "head_dim", None) or hf_config.hidden_size // hf_config.num_attention_heads,
        mlp_hidden=hf_config.intermediate_size,
        norm_eps=hf_config.rms_norm_eps,
        rope_base=_rope_theta(hf_config),
        max_seq_len=hf_config.max_position_embeddings,
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
        attn_bias=bool(getattr(hf_config, "attention_bias", False)),
        mlp_bias=bool(getattr(hf_config, "mlp_bias", False)),
        init_std=getattr(hf_config, "initializer_range", 0.02),
    )
    return DecoderLMConfig(**(fields | overrides))


#: HF key (``{i}`` = layer) -> course_lib key.
_LAYER_KEYS = {
    "self_attn.q_proj": "attn.q_proj",
    "self_attn.k_proj": "attn.k_proj",
    "self_attn.v_proj": "attn.v_proj",
    "self_attn.o_proj": "attn.out_proj",
    "mlp.gate_proj": "mlp.gate_proj",
    "mlp.up_proj": "mlp.up_proj",
    "mlp.down_proj": "mlp.down_proj",
    "input_layernorm": "attn_res.norm",
    "post_attention_layernorm": "mlp_res.norm",
}
_TOP_KEYS = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm.weight",
             "lm_head.weight": "lm_head.weight"}
_LAYER_RE = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")


def convert_state_dict(hf_state: dict[str, Tensor], cfg: DecoderLMConfig) -> dict[str, Tensor]:
    """Rename a ``LlamaForCausalLM`` state dict into :class:`DecoderLM`'s keys.

    Raises ValueError on a key that does not belong to a Llama of ``cfg``
    (an unknown name or a layer index >= ``n_layers``). Missing keys and
    wrong shapes are caught by :func:`load_checked`.
    """
    out: dict[str, Tensor] = {}
    for key, value in hf_state.items():
        if "rotary_emb" in key:  # recomputed buffers, not weights
            continue
        if key in _TOP_KEYS:
            out[_TOP_KEYS[key]] = value
            continue
        m = _LAYER_RE.fullmatch(key)
        if m is None or m.group(2) not in _LAYER_KEYS:
            raise ValueError(f"unexpected key {key!r}: not a LlamaForCausalLM weight")
        layer, name, kind = int(m.group(1)), m.group(2), m.group(3)
        if layer >= cfg.n_layers:
            raise ValueError(f"key {key!r} is for layer {layer}, but the config has n_layers={cfg.n_layers}")
        out[f"blocks.{layer}.{_LAYER_KEYS[name]}.{kind}"] = value
    if cfg.tie_embeddings:
        out.setdefault("lm_head.weight", out.get("tok_emb.weight"))
    return out


def from_hf(hf_model: nn.Module, attn_impl: str = "sdpa") -> DecoderLM:
    """The :class:`DecoderLM` equivalent of a ``LlamaForCausalLM``, same weights and dtype, in eval mode."""
    cfg = config_from_hf(hf_model.config, attn_impl=attn_impl)
    state = convert_state_dict(hf_model.state_dict(), cfg)
    dtype = state["tok_emb.weight"].dtype
    model = DecoderLM(cfg).to(dtype)
    with torch.no_grad():
        load_checked(model, state)
    return model.eval()
