"""DINOv2's backbone: a ViT with LayerScale, a mask token and registers (chapter 10).

The backbone is a :class:`~course_lib.vit.ViT` with four changes (Oquab et
al., 2024; Darcet et al., 2024):

* patches of 14 pixels and LayerScale on every residual branch;
* an optional SwiGLU MLP (ViT-g), hidden width ``2/3`` of the 4x MLP rounded
  up to a multiple of 8 (:meth:`DINOv2Config.mlp_hidden_dim`);
* a learned **mask token** that replaces masked patch embeddings (iBOT's
  masked-image objective);
* optional **register tokens**: extra learned tokens after CLS that carry no
  position. The order matters: positions are added to ``[CLS; patches]``
  *first*, then the registers are inserted after CLS::

      z_0 = [x_cls + p_0; r_1; ...; r_R; x_1 + p_1; ...; x_N + p_N]

:func:`add_registers` is the same token layout as a plain function.

The training recipe (DINO's head, loss, centering, EMA teacher and multi-crop
views) is :mod:`course_lib.dino`, apart from the backbone, as DINOv2 keeps
``layers/`` apart from ``loss/``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from course_lib.mlp import swiglu_hidden_dim
from course_lib.vit import ViT, ViTConfig, prepend_cls_add_pos

__all__ = ["DINOv2Config", "DINOV2_PRESETS", "DINOv2", "add_registers"]


@dataclass
class DINOv2Config(ViTConfig):
    """:class:`~course_lib.vit.ViTConfig` with DINOv2's defaults (ViT-B/14 at 518 px) and three fields.

    Attributes:
        n_registers: register tokens after CLS (0: none; the "-reg" models use 4).
        mask_token: learn a mask token (used by ``forward_features(x, masks)``).
        layerscale: initial LayerScale gain (1e-5 in the official training code; HF configs say 1.0,
            the trained values are loaded anyway).
        pos_antialias: the registers models resample positions with antialiasing.
    """

    image_size: int | tuple[int, int] = 518
    patch_size: int = 14
    num_classes: int = 0
    layerscale: float | None = 1e-5
    norm_eps: float = 1e-6
    n_registers: int = 0
    mask_token: bool = True

    def __post_init__(self):
        super().__post_init__()
        if not self.class_token:
            raise ValueError("DINOv2 always has a CLS token: class_token must be True")
        if self.n_registers < 0:
            raise ValueError(f"n_registers must be >= 0, got {self.n_registers}")

    def mlp_hidden_dim(self) -> int:
        """``mlp_ratio * dim``; for SwiGLU, two thirds of it rounded up to a multiple of 8 (HF ``Dinov2SwiGLUFFN``)."""
        if self.mlp_hidden is not None:
            return self.mlp_hidden
        hidden = int(self.dim * self.mlp_ratio)
        return swiglu_hidden_dim(hidden, expansion=1.0, multiple_of=8) if self.mlp == "swiglu" else hidden


_SIZES = {
    "s": dict(dim=384, n_layers=12, n_heads=6),
    "b": dict(dim=768, n_layers=12, n_heads=12),
    "l": dict(dim=1024, n_layers=24, n_heads=16),
    "g": dict(dim=1536, n_layers=40, n_heads=24, mlp="swiglu"),
}
#: The four published backbones, their "-reg" variants (4 registers) and tiny CPU ones.
DINOV2_PRESETS: dict[str, dict] = {
    **{f"dinov2-{k}/14": v for k, v in _SIZES.items()},
    **{f"dinov2-{k}/14-reg": dict(v, n_registers=4, pos_antialias=True) for k, v in _SIZES.items()},
    "dinov2-tiny-test": dict(image_size=56, dim=32, n_layers=2, n_heads=4),
    "dinov2-tiny-reg-test": dict(image_size=56, dim=32, n_layers=2, n_heads=4, n_registers=4, mlp="swiglu",
                                 pos_antialias=True),
}
DINOv2Config.presets = DINOV2_PRESETS  # DINOv2Config.preset(name) reads them


class DINOv2(ViT):
    """The DINOv2 backbone: ``forward_features(x, masks) -> (B, 1 + R + N, D)`` (HF ``last_hidden_state``).

    Token order: CLS, ``R`` registers, ``N`` patches. ``forward_head`` pools
    CLS or the mean of the patch tokens (registers excluded).
    """

    def __init__(self, cfg: DINOv2Config):
        super().__init__(cfg)
        self.register_tokens = nn.Parameter(torch.zeros(1, cfg.n_registers, cfg.dim)) if cfg.n_registers else None
        if self.register_tokens is not None:
            # as the official code: registers that started equal would stay equal (they carry no position, so
            # attention treats them alike and they get the same gradients): R copies of one register
            nn.init.normal_(self.register_tokens, std=1e-6)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.mask_token else None

    @property
    def n_prefix(self) -> int:
        return 1 + self.cfg.n_registers

    def embed(self, images: Tensor, masks: Tensor | None = None) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + R + N, D)``.

        Args:
            masks: optional boolean ``(B, N)``, True where a patch embedding is
                replaced by the mask token (before positions are added, like
                HF's ``bool_masked_pos``).
        """
        return self.embed_patches(*self.patch_embed.tokens_and_grid(images), masks)

    def embed_patches(self, patches: Tensor, grid: tuple[int, int], masks: Tensor | None = None) -> Tensor:
        """``(B, N, D)`` patch embeddings of a ``(gh, gw)`` grid -> ``(B, 1 + R + N, D)``; ``masks`` as in
        :meth:`embed`."""
        if masks is not None:
            if self.mask_token is None:
                raise ValueError("masks given but the model has no mask token (mask_token=False)")
            if masks.dtype != torch.bool or masks.shape != patches.shape[:2]:
                raise ValueError(f"masks must be boolean of shape (batch, patches) = {tuple(patches.shape[:2])}, "
                                 f"got {masks.dtype} {tuple(masks.shape)}")
            patches = torch.where(masks[..., None], self.mask_token.to(patches.dtype), patches)
        registers = self.register_tokens
        if registers is None:
            registers = patches.new_zeros(1, 0, patches.shape[-1])
        # positions on CLS and patches only; the registers go between them (add_registers)
        return self.pos_drop(add_registers(patches, self.cls_token, registers, self.pos_embed_for(grid)))

    def forward_features(self, images: Tensor, masks: Tensor | None = None) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + R + N, D)``; positions are always resampled to the grid."""
        patches, grid = self.patch_embed.tokens_and_grid(images)
        return self.encode(self.embed_patches(patches, grid, masks), grid)


# --------------------------------------------------------------------------
# Token layout
# --------------------------------------------------------------------------
def add_registers(patches: Tensor, cls_token: Tensor, registers: Tensor, pos_embed: Tensor) -> Tensor:
    """The DINOv2 input sequence as a function: ``[cls + p_0; r_1..r_R; x_1 + p_1; ...; x_N + p_N]``.

    Args:
        patches: ``(B, N, D)`` patch embeddings.
        cls_token: ``(1, 1, D)``.  registers: ``(1, R, D)`` (``R`` may be 0).
        pos_embed: ``(1, 1 + N, D)``, positions of CLS and the patches only.
    Returns:
        ``(B, 1 + R + N, D)``; the registers carry no position (as in the DINOv2-with-registers code).
    """
    b = patches.shape[0]
    x = prepend_cls_add_pos(patches, cls_token, pos_embed)
    return torch.cat([x[:, :1], registers.expand(b, -1, -1).to(x.dtype), x[:, 1:]], dim=1)
