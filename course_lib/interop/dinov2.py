"""Hugging Face ``Dinov2Model`` / ``Dinov2WithRegistersModel`` -> :class:`course_lib.dinov2.DINOv2`.

    dino = from_hf(hf_model)
    dino.forward_features(x, masks) == hf_model(x, bool_masked_pos=masks).last_hidden_state

Two details of HF's models are read off the class: the registers model
resamples positions with ``antialias=True`` (plain DINOv2 without), and
always has a mask token (plain DINOv2 only with ``use_mask_token``). Checkpoint
files written before transformers 5 store the SwiGLU's gate and up
projections fused as ``mlp.weights_in`` (gate rows first, then up rows, the
order of ``x1, x2 = x12.chunk(2)`` in the original ``silu(x1) * x2``); they are
split here.
"""

from __future__ import annotations

import re

from torch import Tensor, nn

from course_lib.dinov2 import DINOv2, DINOv2Config
from course_lib.interop.common import HF_ACTIVATIONS, load_checked, rename, square

__all__ = ["config_from_hf", "convert_state_dict", "load_hf_state_dict", "from_hf"]

_CLASSES = ("Dinov2Model", "Dinov2WithRegistersModel")


def config_from_hf(hf_config, *, registers_model: bool, attn_impl: str = "sdpa") -> DINOv2Config:
    """Sizes, epsilon, activation, biases, SwiGLU, LayerScale and registers from an HF DINOv2 config."""
    act = hf_config.hidden_act
    if not hf_config.use_swiglu_ffn and (not isinstance(act, str) or act not in HF_ACTIVATIONS):
        raise ValueError(f"unsupported hidden_act={act!r}; supported: {sorted(HF_ACTIVATIONS)}")
    image_size = hf_config.image_size
    image_size = tuple(image_size) if isinstance(image_size, (list, tuple)) else int(image_size)
    return DINOv2Config(
        image_size=image_size, patch_size=square(hf_config.patch_size, "patch_size"),
        in_chans=hf_config.num_channels, dim=hf_config.hidden_size, n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads, mlp_ratio=hf_config.mlp_ratio,
        mlp="swiglu" if hf_config.use_swiglu_ffn else HF_ACTIVATIONS[act], qkv_bias=hf_config.qkv_bias,
        norm_eps=hf_config.layer_norm_eps, pool="cls", num_classes=0, dropout=hf_config.hidden_dropout_prob,
        attn_dropout=hf_config.attention_probs_dropout_prob, attn_impl=attn_impl,
        layerscale=hf_config.layerscale_value, pos_antialias=registers_model,
        n_registers=hf_config.num_register_tokens if registers_model else 0,
        mask_token=True if registers_model else hf_config.use_mask_token, crop_remainder=True,
    )


_LAYER = r"encoder\.layer\.(\d+)\."
# (HF key pattern, course_lib key); current HF names and the older ones of checkpoint files.
_RULES = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.position_embeddings", "pos_embed"),
    (r"embeddings\.register_tokens", "register_tokens"),
    (r"embeddings\.patch_embeddings\.projection\.(weight|bias)", r"patch_embed.proj.\1"),
    (_LAYER + r"norm1\.(weight|bias)", r"blocks.\1.attn_res.norm.\2"),
    (_LAYER + r"norm2\.(weight|bias)", r"blocks.\1.mlp_res.norm.\2"),
    (_LAYER + r"layer_scale1\.lambda1", r"blocks.\1.attn_res.scale.gamma"),
    (_LAYER + r"layer_scale2\.lambda1", r"blocks.\1.mlp_res.scale.gamma"),
    (_LAYER + r"attention\.(q|k|v)_proj\.(weight|bias)", r"blocks.\1.attn.\2_proj.\3"),
    (_LAYER + r"attention\.attention\.query\.(weight|bias)", r"blocks.\1.attn.q_proj.\2"),
    (_LAYER + r"attention\.attention\.key\.(weight|bias)", r"blocks.\1.attn.k_proj.\2"),
    (_LAYER + r"attention\.attention\.value\.(weight|bias)", r"blocks.\1.attn.v_proj.\2"),
    (_LAYER + r"attention\.(?:o_proj|output\.dense)\.(weight|bias)", r"blocks.\1.attn.out_proj.\2"),
    (_LAYER + r"mlp\.(fc1|fc2|gate_proj|up_proj|down_proj)\.(weight|bias)", r"blocks.\1.mlp.\2.\3"),
    (_LAYER + r"mlp\.weights_out\.(weight|bias)", r"blocks.\1.mlp.down_proj.\2"),
    (r"layernorm\.(weight|bias)", r"norm.\1"),
]
_FUSED_IN = re.compile(_LAYER + r"mlp\.weights_in\.(weight|bias)")


def convert_state_dict(hf_state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename an HF DINOv2 state dict's keys to :class:`~course_lib.dinov2.DINOv2`'s.

    Reshapes the mask token ``(1, D) -> (1, 1, D)`` and splits a fused SwiGLU
    ``weights_in`` ``(2 * hidden, D)`` into ``gate_proj`` (first half) and
    ``up_proj`` (second half). An unknown key raises ValueError.
    """
    out = {}
    for key, value in hf_state_dict.items():
        key = key.removeprefix("dinov2_with_registers.").removeprefix("dinov2.")
        if key == "embeddings.mask_token":
            out["mask_token"] = value.reshape(1, 1, -1)
            continue
        if m := _FUSED_IN.fullmatch(key):
            gate, up = value.chunk(2, dim=0)
            out[f"blocks.{m[1]}.mlp.gate_proj.{m[2]}"], out[f"blocks.{m[1]}.mlp.up_proj.{m[2]}"] = gate, up
            continue
        out[rename(key, _RULES, "DINOv2")] = value
    return out


def load_hf_state_dict(model: DINOv2, hf_state_dict: dict[str, Tensor]) -> DINOv2:
    """Convert and load strictly; a missing, extra or misshaped key raises ValueError naming it."""
    return load_checked(model, convert_state_dict(hf_state_dict))


def from_hf(hf_model: nn.Module, attn_impl: str = "sdpa") -> DINOv2:
    """A :class:`DINOv2` with ``hf_model``'s weights, in eval mode."""
    name = type(hf_model).__name__
    if name not in _CLASSES:
        raise ValueError(f"cannot convert {name}: expected one of {_CLASSES}")
    cfg = config_from_hf(hf_model.config, registers_model=name == "Dinov2WithRegistersModel", attn_impl=attn_impl)
    return load_hf_state_dict(DINOv2(cfg), hf_model.state_dict()).eval()
