"""Hugging Face ``ViTModel`` / ``ViTForImageClassification`` -> :class:`course_lib.vit.ViT`.

    vit = from_hf(hf_model)
    vit.forward_features(x) == hf_model(x, interpolate_pos_encoding=True).last_hidden_state  # ViTModel
    vit(x)                  == hf_model(x, interpolate_pos_encoding=True).logits  # ...ForImageClassification

Not converted, on purpose: ``ViTModel``'s pooler (``pooler.dense`` + tanh, on
by default, ``add_pooling_layer=True``), which no classifier uses
(``ViTForImageClassification`` builds its ViT without it and classifies the
CLS token directly), and the ``mask_token`` of ``use_mask_token=True``
(SimMIM pre-training). Their weights are skipped.
"""

from __future__ import annotations

import re

from torch import Tensor, nn

from course_lib.interop.common import HF_ACTIVATIONS, load_checked, rename, square
from course_lib.vit import ViT, ViTConfig

__all__ = ["config_from_hf", "convert_state_dict", "load_hf_state_dict", "from_hf"]


#: HF keys with no counterpart here (see the module docstring).
_SKIPPED = re.compile(r"^(pooler\.dense\.(weight|bias)|embeddings\.mask_token)$")


def config_from_hf(hf_config, num_classes: int = 0, attn_impl: str = "sdpa") -> ViTConfig:
    """Read sizes, epsilon (HF ViT's default is 1e-12), activation and biases from an HF ``ViTConfig``."""
    act = hf_config.hidden_act
    if not isinstance(act, str) or act not in HF_ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act={act!r}; supported: {sorted(HF_ACTIVATIONS)}")
    head_dim = getattr(hf_config, "head_dim", None)
    if head_dim is not None and head_dim * hf_config.num_attention_heads != hf_config.hidden_size:
        raise ValueError(f"unsupported head_dim={head_dim}: must equal hidden_size / num_attention_heads")
    image_size = hf_config.image_size
    image_size = tuple(image_size) if isinstance(image_size, (list, tuple)) else int(image_size)
    return ViTConfig(
        image_size=image_size, patch_size=square(hf_config.patch_size, "patch_size"),
        in_chans=hf_config.num_channels, dim=hf_config.hidden_size, n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads, mlp_hidden=hf_config.intermediate_size, mlp=HF_ACTIVATIONS[act],
        qkv_bias=hf_config.qkv_bias, norm_eps=hf_config.layer_norm_eps, pool="cls", num_classes=num_classes,
        class_token=True, dropout=hf_config.hidden_dropout_prob, attn_dropout=hf_config.attention_probs_dropout_prob,
        attn_impl=attn_impl, layerscale=None, crop_remainder=True,
    )


# (HF key pattern, course_lib key). Both the current HF names and the older ones
# still found in checkpoint files (``encoder.layer.{i}.attention.attention.query``).
_RULES = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.position_embeddings", "pos_embed"),
    (r"embeddings\.patch_embeddings\.projection\.(weight|bias)", r"patch_embed.proj.\1"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.layernorm_before\.(weight|bias)", r"blocks.\1.attn_res.norm.\2"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.layernorm_after\.(weight|bias)", r"blocks.\1.mlp_res.norm.\2"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.attention\.(?:attention\.)?(q|k|v)_proj\.(weight|bias)",
     r"blocks.\1.attn.\2_proj.\3"),
    (r"encoder\.layer\.(\d+)\.attention\.attention\.query\.(weight|bias)", r"blocks.\1.attn.q_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.attention\.key\.(weight|bias)", r"blocks.\1.attn.k_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.attention\.value\.(weight|bias)", r"blocks.\1.attn.v_proj.\2"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.attention\.(?:o_proj|output\.dense)\.(weight|bias)",
     r"blocks.\1.attn.out_proj.\2"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.(?:mlp\.fc1|intermediate\.dense)\.(weight|bias)", r"blocks.\1.mlp.fc1.\2"),
    (r"(?:layers|encoder\.layer)\.(\d+)\.(?:mlp\.fc2|output\.dense)\.(weight|bias)", r"blocks.\1.mlp.fc2.\2"),
    (r"layernorm\.(weight|bias)", r"norm.\1"),
    (r"classifier\.(weight|bias)", r"head.\1"),
]


def convert_state_dict(hf_state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename an HF ViT state dict's keys to :class:`~course_lib.vit.ViT`'s.

    Accepts the keys of ``ViTModel`` and of ``ViTForImageClassification``
    (whose backbone keys start with ``vit.``). Skips the pooler and the mask
    token; an unknown key raises ValueError.
    """
    out = {}
    for key, value in hf_state_dict.items():
        key = key.removeprefix("vit.")
        if _SKIPPED.match(key):
            continue
        out[rename(key, _RULES, "ViT")] = value
    return out


def load_hf_state_dict(model: ViT, hf_state_dict: dict[str, Tensor]) -> ViT:
    """Convert and load strictly; a missing, extra or misshaped key raises ValueError naming it."""
    return load_checked(model, convert_state_dict(hf_state_dict))


def from_hf(hf_model: nn.Module, attn_impl: str = "sdpa") -> ViT:
    """A :class:`ViT` with ``hf_model``'s weights, in eval mode (a head only for ``ViTForImageClassification``)."""
    name = type(hf_model).__name__
    if name == "ViTModel":
        num_classes = 0
    elif name == "ViTForImageClassification":
        num_classes = hf_model.config.num_labels
    else:
        raise ValueError(f"cannot convert {name}: expected ViTModel or ViTForImageClassification")
    model = ViT(config_from_hf(hf_model.config, num_classes, attn_impl))
    return load_hf_state_dict(model, hf_model.state_dict()).eval()
