"""DINOv2: self-distillation without labels (chapter 10).

The backbone is a :class:`~course_lib.vit.ViT` with four changes (Oquab et
al., 2023; Darcet et al., 2024):

* patches of 14 pixels and LayerScale on every residual branch;
* an optional SwiGLU MLP (ViT-g), hidden width ``2/3`` of the 4x MLP rounded
  up to a multiple of 8 (:meth:`DINOv2Config.mlp_hidden_dim`);
* a learned **mask token** that replaces masked patch embeddings (iBOT's
  masked-image objective);
* optional **register tokens**: extra learned tokens after CLS that carry no
  position. The order matters: positions are added to ``[CLS; patches]``
  *first*, then the registers are inserted after CLS::

      z_0 = [x_cls + p_0; r_1; ...; r_R; x_1 + p_1; ...; x_N + p_N]

The training side of DINO (Caron et al., 2021): a student and an EMA teacher
see different crops of an image; :class:`DINOHead` maps their CLS features
to ``K`` prototype scores, and :func:`dino_loss` makes the student's
distribution match the teacher's sharpened, centered one on every pair of
different views. :func:`update_center` and :func:`ema_update` are the two
moving averages that keep it from collapsing and keep the teacher stable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.mlp import swiglu_hidden_dim
from course_lib.vit import ViT, ViTConfig

__all__ = ["DINOv2Config", "DINOV2_PRESETS", "DINOv2", "WeightNormLinear", "DINOHead", "dino_loss",
           "update_center", "ema_update"]


@dataclass
class DINOv2Config(ViTConfig):
    """:class:`~course_lib.vit.ViTConfig` with DINOv2's defaults (ViT-B/14 at 518 px) and three fields.

    Attributes:
        n_registers: register tokens after CLS (0: none; the "-reg" models use 4).
        mask_token: learn a mask token (used by ``forward_features(x, masks)``).
        layerscale: initial LayerScale gain (1e-5 in the paper; HF configs say 1.0,
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

    @classmethod
    def preset(cls, name: str, **overrides) -> "DINOv2Config":
        """A named size from :data:`DINOV2_PRESETS`, with optional field overrides."""
        if name not in DINOV2_PRESETS:
            raise ValueError(f"unknown DINOv2 preset {name!r}; known: {sorted(DINOV2_PRESETS)}")
        return replace(cls(**DINOV2_PRESETS[name]), **overrides)


_SIZES = {
    "s": dict(dim=384, depth=12, n_heads=6),
    "b": dict(dim=768, depth=12, n_heads=12),
    "l": dict(dim=1024, depth=24, n_heads=16),
    "g": dict(dim=1536, depth=40, n_heads=24, mlp="swiglu"),
}
#: The four published backbones, their "-reg" variants (4 registers) and tiny CPU ones.
DINOV2_PRESETS: dict[str, dict] = {
    **{f"dinov2-{k}/14": v for k, v in _SIZES.items()},
    **{f"dinov2-{k}/14-reg": dict(v, n_registers=4, pos_antialias=True) for k, v in _SIZES.items()},
    "dinov2-tiny-test": dict(image_size=56, dim=32, depth=2, n_heads=4),
    "dinov2-tiny-reg-test": dict(image_size=56, dim=32, depth=2, n_heads=4, n_registers=4, mlp="swiglu",
                                 pos_antialias=True),
}


class DINOv2(ViT):
    """The DINOv2 backbone: ``forward_features(x, masks) -> (B, 1 + R + N, D)`` (HF ``last_hidden_state``).

    Token order: CLS, ``R`` registers, ``N`` patches. ``forward_head`` pools
    CLS or the mean of the patch tokens (registers excluded).
    """

    def __init__(self, cfg: DINOv2Config):
        super().__init__(cfg)
        self.register_tokens = nn.Parameter(torch.zeros(1, cfg.n_registers, cfg.dim)) if cfg.n_registers else None
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.mask_token else None

    @property
    def num_prefix_tokens(self) -> int:
        return 1 + self.cfg.n_registers

    def embed(self, images: Tensor, masks: Tensor | None = None) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + R + N, D)``.

        Args:
            masks: optional boolean ``(B, N)``, True where a patch embedding is
                replaced by the mask token (before positions are added, like
                HF's ``bool_masked_pos``).
        """
        grid = self.patch_embed.grid_size(images)
        patches = self.patch_embed(images)  # (B, N, D)
        if masks is not None:
            if self.mask_token is None:
                raise ValueError("masks given but the model has no mask token (mask_token=False)")
            if masks.dtype != torch.bool or masks.shape != patches.shape[:2]:
                raise ValueError(f"masks must be boolean of shape (batch, patches) = {tuple(patches.shape[:2])}, "
                                 f"got {masks.dtype} {tuple(masks.shape)}")
            patches = torch.where(masks[..., None], self.mask_token.to(patches.dtype), patches)
        x = self._prepend_cls_add_pos(patches, grid)  # positions on CLS and patches only
        if self.register_tokens is not None:
            regs = self.register_tokens.expand(x.shape[0], -1, -1).to(x.dtype)
            x = torch.cat([x[:, :1], regs, x[:, 1:]], dim=1)
        return self.pos_drop(x)

    def forward_features(self, images: Tensor, masks: Tensor | None = None) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + R + N, D)``; positions are always resampled to the grid."""
        return self.encode(self.embed(images, masks))


# --------------------------------------------------------------------------
# Self-distillation: head, loss, moving averages
# --------------------------------------------------------------------------
class WeightNormLinear(nn.Module):
    """``x @ W^T`` with ``W = g * v / ||v||`` row by row (Salimans & Kingma, 2016), no bias.

    With ``g`` fixed at 1 (``learn_g=False``, DINO's ``norm_last_layer``), every
    row of ``W`` is a unit vector: a prototype, and the output a cosine score.
    """

    def __init__(self, in_dim: int, out_dim: int, *, learn_g: bool = False):
        super().__init__()
        self.weight_v = nn.Parameter(torch.empty(out_dim, in_dim))
        nn.init.trunc_normal_(self.weight_v, std=0.02)
        self.weight_g = nn.Parameter(torch.ones(out_dim, 1), requires_grad=learn_g)

    @property
    def weight(self) -> Tensor:
        return self.weight_g * self.weight_v / self.weight_v.norm(dim=1, keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., in_dim) -> (..., out_dim)``."""
        return F.linear(x, self.weight)


class DINOHead(nn.Module):
    """Projection head: MLP to a bottleneck, L2-normalize, weight-normalized prototypes.

    ``(B, in_dim) -> (B, out_dim)``; with ``n_layers=3``:
    ``Linear-GELU-Linear-GELU-Linear(bottleneck)``, then ``x / ||x||``, then
    :class:`WeightNormLinear` to ``out_dim`` prototype scores (65536 in DINO).
    """

    def __init__(self, in_dim: int, out_dim: int = 65536, hidden_dim: int = 2048, bottleneck_dim: int = 256,
                 n_layers: int = 3, norm_last_layer: bool = True):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        dims = [in_dim] + [hidden_dim] * (n_layers - 1) + [bottleneck_dim]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers.append(nn.Linear(a, b))
            if i < n_layers - 1:
                layers.append(nn.GELU())
        self.mlp = nn.Sequential(*layers)
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        self.last_layer = WeightNormLinear(bottleneck_dim, out_dim, learn_g=not norm_last_layer)

    def forward(self, x: Tensor) -> Tensor:
        x = F.normalize(self.mlp(x), dim=-1, p=2, eps=1e-6 if x.dtype in (torch.float16, torch.bfloat16) else 1e-12)
        return self.last_layer(x)


def _stack_crops(out: Tensor | list[Tensor] | tuple[Tensor, ...], name: str) -> Tensor:
    """A list of ``(B, K)`` crops or a ``(n_crops, B, K)`` tensor -> ``(n_crops, B, K)``."""
    if isinstance(out, (list, tuple)):
        out = torch.stack(list(out))
    if out.ndim != 3:
        raise ValueError(f"{name} must be (n_crops, batch, K) or a list of (batch, K), got shape {tuple(out.shape)}")
    return out


def dino_loss(student_out, teacher_out, center: Tensor, student_temp: float = 0.1,
              teacher_temp: float = 0.04) -> Tensor:
    """DINO's cross-entropy between teacher and student over every pair of different views.

    ``H(t, s) = - sum_k P_t[k] log P_s[k]`` with
    ``P_t = softmax((t - center) / teacher_temp)`` (centered, sharpened, no
    gradient) and ``log P_s = log_softmax(s / student_temp)``; averaged over
    the batch and over the pairs ``(teacher crop i, student crop j)`` with
    ``i != j`` (Caron et al., 2021, eq. 3 and algorithm 1).

    Args:
        student_out: ``(n_s, B, K)`` or a list of ``n_s`` tensors ``(B, K)``:
            all crops, the ``n_t`` global ones first.
        teacher_out: ``(n_t, B, K)`` or a list: the teacher sees the global
            crops only; teacher crop ``i`` is the same view as student crop ``i``.
        center: ``(K,)`` or ``(1, K)``, see :func:`update_center`.
    Returns:
        a scalar.
    """
    s = _stack_crops(student_out, "student_out").float()
    t = _stack_crops(teacher_out, "teacher_out").detach().float()
    n_s, n_t = s.shape[0], t.shape[0]
    if s.shape[1:] != t.shape[1:]:
        raise ValueError(f"student crops {tuple(s.shape[1:])} and teacher crops {tuple(t.shape[1:])} differ in (B, K)")
    if n_t > n_s:
        raise ValueError(f"the teacher's {n_t} crops must be the first of the student's {n_s}")
    log_p_s = F.log_softmax(s / student_temp, dim=-1)
    p_t = F.softmax((t - center.float()) / teacher_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / s.shape[1]  # (n_t, n_s): mean over the batch
    differ = ~torch.eye(n_t, n_s, dtype=torch.bool, device=ce.device)
    if not differ.any():
        raise ValueError("no pair of different views: give at least two crops")
    return ce[differ].mean()


@torch.no_grad()
def update_center(center: Tensor, teacher_out, momentum: float = 0.9) -> Tensor:
    """EMA of the teacher's mean output: ``m * center + (1 - m) * mean(teacher_out)``.

    Subtracting the center before the teacher's softmax keeps one prototype
    from dominating; the low teacher temperature keeps the output from turning
    uniform. Together they prevent collapse.

    Args:
        center: ``(K,)`` or ``(1, K)``.
        teacher_out: ``(..., K)`` or a list of ``(B, K)``; averaged over all but the last axis.
    Returns:
        the new center, shaped like ``center`` (the input is not modified).
    """
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    t = torch.stack(list(teacher_out)) if isinstance(teacher_out, (list, tuple)) else teacher_out
    batch_center = t.reshape(-1, t.shape[-1]).float().mean(dim=0).reshape(center.shape)
    return center * momentum + batch_center.to(center.dtype) * (1 - momentum)


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """In place: ``theta_t <- m * theta_t + (1 - m) * theta_s`` for every parameter (not buffers).

    ``momentum=1`` leaves the teacher as it is, ``momentum=0`` copies the
    student. The two modules must have the same parameter names and shapes.
    """
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    t_params, s_params = dict(teacher.named_parameters()), dict(student.named_parameters())
    if t_params.keys() != s_params.keys():
        only_t, only_s = sorted(t_params.keys() - s_params.keys()), sorted(s_params.keys() - t_params.keys())
        raise ValueError(f"teacher and student differ in structure: only in teacher {only_t[:5]}, "
                         f"only in student {only_s[:5]}")
    for name, pt in t_params.items():
        if pt.shape != s_params[name].shape:
            raise ValueError(f"parameter {name!r}: teacher {tuple(pt.shape)} vs student {tuple(s_params[name].shape)}")
    for name, pt in t_params.items():
        pt.mul_(momentum).add_(s_params[name].detach().to(pt.dtype), alpha=1 - momentum)
