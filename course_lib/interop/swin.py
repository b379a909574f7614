"""Hugging Face ``SwinModel`` / ``Swinv2Model`` -> :class:`course_lib.swin.Swin`.

    swin = from_hf(hf_model)
    swin.forward_features(x) == hf_model(x).last_hidden_state

The sizes, ``layer_norm_eps``, ``hidden_act``, ``qkv_bias``, ``image_size``
(V2 fits its windows to it) and V2's ``pretrained_window_sizes`` come from
the HF config. Not converted (ValueError): ``use_absolute_embeddings=True``
and the SimMIM ``mask_token`` of ``use_mask_token=True``. The pooler of
``add_pooling_layer=True`` has no weights; its average is ``forward_head``'s.
Buffers that HF derives from the window size (``relative_position_index``,
``relative_coords_table``), found in older checkpoints, are skipped: this
model derives its own.
"""

from __future__ import annotations

import re

from torch import Tensor, nn

from course_lib.interop.common import HF_ACTIVATIONS, load_checked, rename, square
from course_lib.swin import Swin, SwinConfig

__all__ = ["config_from_hf", "convert_state_dict", "load_hf_state_dict", "from_hf"]


_VERSIONS = {"SwinModel": 1, "Swinv2Model": 2}
_DERIVED = re.compile(r".*\.(relative_position_index|relative_coords_table)$")


def config_from_hf(hf_config, version: int, attn_impl: str = "sdpa") -> SwinConfig:
    """A :class:`SwinConfig` from an HF ``SwinConfig`` (``version=1``) or ``Swinv2Config`` (``version=2``)."""
    if getattr(hf_config, "use_absolute_embeddings", False):
        raise ValueError("unsupported use_absolute_embeddings=True: course_lib Swin has only relative position "
                         "biases (the published checkpoints use none)")
    act = hf_config.hidden_act
    if not isinstance(act, str) or act not in HF_ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act={act!r}; supported: {sorted(HF_ACTIVATIONS)}")
    image_size = hf_config.image_size
    image_size = tuple(image_size) if isinstance(image_size, (list, tuple)) else int(image_size)
    n = len(hf_config.depths)
    pretrained = tuple(getattr(hf_config, "pretrained_window_sizes", None) or (0,) * n)[:n]  # HF ignores extras
    if version == 1 and any(pretrained):
        raise ValueError(f"pretrained_window_sizes={pretrained} is a Swin V2 setting")
    return SwinConfig(
        version=version, image_size=image_size, patch_size=square(hf_config.patch_size, "patch_size"),
        in_chans=hf_config.num_channels, dim=hf_config.embed_dim, depths=tuple(hf_config.depths),
        n_heads=tuple(hf_config.num_heads), window_size=square(hf_config.window_size, "window_size"),
        mlp_ratio=hf_config.mlp_ratio, qkv_bias=hf_config.qkv_bias, norm_eps=hf_config.layer_norm_eps,
        act=HF_ACTIVATIONS[act], pretrained_window_sizes=pretrained, num_classes=0,
        drop_path_rate=hf_config.drop_path_rate, attn_impl=attn_impl,
    )


_BLOCK = r"encoder\.layers\.(\d+)\.blocks\.(\d+)\."
_TO_BLOCK = r"stages.\1.blocks.\2."
_COMMON = [
    (r"embeddings\.patch_embeddings\.projection\.(weight|bias)", r"patch_embed.proj.\1"),
    (r"embeddings\.norm\.(weight|bias)", r"patch_embed.norm.\1"),
    (r"encoder\.layers\.(\d+)\.downsample\.(reduction|norm)\.(weight|bias)", r"stages.\1.merge.\2.\3"),
    (_BLOCK + r"layernorm_before\.(weight|bias)", _TO_BLOCK + r"attn_res.norm.\3"),
    (_BLOCK + r"layernorm_after\.(weight|bias)", _TO_BLOCK + r"mlp_res.norm.\3"),
    (r"layernorm\.(weight|bias)", r"norm.\1"),
]
# (HF key pattern, course_lib key) per version; V2 keeps HF's older BERT-style names.
_RULES = {
    1: _COMMON + [
        (_BLOCK + r"attention\.(q|k|v)_proj\.(weight|bias)", _TO_BLOCK + r"attn.mha.\3_proj.\4"),
        (_BLOCK + r"attention\.o_proj\.(weight|bias)", _TO_BLOCK + r"attn.mha.out_proj.\3"),
        (_BLOCK + r"attention\.relative_position_bias\.relative_position_bias_table",
         _TO_BLOCK + "attn.relative_position_bias_table"),
        (_BLOCK + r"mlp\.(fc1|fc2)\.(weight|bias)", _TO_BLOCK + r"mlp.\3.\4"),
    ],
    2: _COMMON + [
        (_BLOCK + r"attention\.self\.query\.(weight|bias)", _TO_BLOCK + r"attn.mha.q_proj.\3"),
        (_BLOCK + r"attention\.self\.key\.(weight|bias)", _TO_BLOCK + r"attn.mha.k_proj.\3"),
        (_BLOCK + r"attention\.self\.value\.(weight|bias)", _TO_BLOCK + r"attn.mha.v_proj.\3"),
        (_BLOCK + r"attention\.output\.dense\.(weight|bias)", _TO_BLOCK + r"attn.mha.out_proj.\3"),
        (_BLOCK + r"attention\.self\.logit_scale", _TO_BLOCK + "attn.logit_scale"),
        (_BLOCK + r"attention\.self\.continuous_position_bias_mlp\.(0|2)\.(weight|bias)",
         _TO_BLOCK + r"attn.cpb_mlp.\3.\4"),
        (_BLOCK + r"intermediate\.dense\.(weight|bias)", _TO_BLOCK + r"mlp.fc1.\3"),
        (_BLOCK + r"output\.dense\.(weight|bias)", _TO_BLOCK + r"mlp.fc2.\3"),
    ],
}


def convert_state_dict(hf_state_dict: dict[str, Tensor], version: int) -> dict[str, Tensor]:
    """Rename the keys of an HF ``SwinModel`` (``version=1``) or ``Swinv2Model`` (2) state dict.

    Skips the derived index buffers; an HF key with no counterpart raises ValueError naming it.
    """
    out = {}
    for key, value in hf_state_dict.items():
        key = key.removeprefix("swin.").removeprefix("swinv2.")
        if _DERIVED.match(key):
            continue
        out[rename(key, _RULES[version], f"Swin V{version}")] = value
    return out


def load_hf_state_dict(model: Swin, hf_state_dict: dict[str, Tensor]) -> Swin:
    """Convert and load strictly; a missing, extra or misshaped key raises ValueError naming it."""
    return load_checked(model, convert_state_dict(hf_state_dict, model.cfg.version))


def from_hf(hf_model: nn.Module, attn_impl: str = "sdpa") -> Swin:
    """A :class:`Swin` with ``hf_model``'s weights, in eval mode (no classification head)."""
    name = type(hf_model).__name__
    if name not in _VERSIONS:
        raise ValueError(f"cannot convert {name}: expected SwinModel or Swinv2Model")
    if getattr(hf_model.embeddings, "mask_token", None) is not None:
        raise ValueError("unsupported use_mask_token=True: the SimMIM mask token has no course_lib counterpart")
    model = Swin(config_from_hf(hf_model.config, _VERSIONS[name], attn_impl))
    return load_hf_state_dict(model, hf_model.state_dict()).eval()
