"""DeiT: a ViT with a distillation token, trained to agree with a teacher (chapter 09).

Touvron et al. (2021), "Training data-efficient image transformers &
distillation through attention", section 4. The model is a
:class:`~course_lib.vit.ViT` with one more learned token beside CLS::

    z_0 = [x_cls; x_dist; x_p^1 E; ...; x_p^N E] + E_pos,     E_pos: (1, 2 + N, D)

Both tokens run through every block. Two linear heads read the final
(normalized) tokens: the CLS head ``psi(Z_cls)`` learns the true label, the
distillation head ``psi(Z_dist)`` learns the teacher's (a CNN, in the paper).
With **hard-label distillation** (the paper's choice, eq. in section 4)::

    L = 1/2 CE(psi(Z_cls), y) + 1/2 CE(psi(Z_dist), y_t),     y_t = argmax_c Z_t[c]

and with **soft distillation** (Hinton et al.'s temperature ``tau``, weight ``lam``)::

    L = (1 - lam) CE(psi(Z_cls), y) + lam tau^2 KL(softmax(Z_t / tau) || softmax(Z_dist / tau)).

At test time the two heads are fused: the paper adds their softmax outputs,
its released code (and timm) averages their logits; :func:`combine_heads`
does either, the model's ``forward`` averages the logits.

Notation: ``B`` batch, ``N`` patches, ``D`` = ``dim``, ``K`` classes (``num_classes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.vit import SIZES, ViT, ViTConfig

__all__ = ["DeiTConfig", "DEIT_PRESETS", "DeiT", "prepend_cls_and_distillation_tokens", "hard_distillation_loss",
           "soft_distillation_loss", "combine_heads", "cutmix"]


@dataclass
class DeiTConfig(ViTConfig):
    """:class:`~course_lib.vit.ViTConfig` for a distilled ViT (defaults: DeiT-B/16 at 224 px, 1000 classes).

    DeiT keeps ViT's architecture: learned 1-D positions (now ``2 + N`` of them),
    CLS pooling, pre-norm blocks. It needs a classifier (``num_classes > 0``):
    the distillation token exists only to feed its own head.
    """

    def __post_init__(self):
        super().__post_init__()
        if self.positions != "learned":
            raise ValueError(f"DeiT uses learned 1-D positions (positions='learned'), got positions={self.positions!r}")
        if self.pool != "cls":
            raise ValueError(f"DeiT reads the CLS and distillation tokens (pool='cls'), got pool={self.pool!r}")
        if self.num_classes < 1:
            raise ValueError(f"DeiT needs num_classes >= 1 (two classifier heads), got num_classes={self.num_classes}")


#: The paper's three sizes (table 1: Ti, S, B at 224 px with 16 x 16 patches) and a tiny CPU one.
DEIT_PRESETS: dict[str, dict] = {
    **{f"deit-{size.lower()}/16": dict(SIZES[size]) for size in ("Ti", "S", "B")},
    "deit-tiny-test": dict(image_size=32, patch_size=8, dim=32, n_layers=2, n_heads=4, num_classes=10),
}
DeiTConfig.presets = DEIT_PRESETS  # DeiTConfig.preset(name) reads them


class DeiT(ViT):
    """A ViT with a distillation token and a second head.

    ``forward_features(images) -> (B, 2 + N, D)`` (token 0: CLS, token 1:
    distillation, then the patches); ``forward_heads(features)`` gives both
    heads' logits, for training; ``forward_head`` / ``forward`` fuse them
    (the average of the logits), for inference.
    """

    def __init__(self, cfg: DeiTConfig):
        if not isinstance(cfg, DeiTConfig):
            raise TypeError(f"DeiT needs a DeiTConfig, got {type(cfg).__name__}")
        super().__init__(cfg)
        n = self.grid[0] * self.grid[1]
        self.dist_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 2 + n, cfg.dim))  # CLS, distillation token, patches
        self.head_dist = nn.Linear(cfg.dim, cfg.num_classes)
        for table in (self.dist_token, self.pos_embed, self.head_dist.weight):  # as DeiT's code: std 0.02
            nn.init.trunc_normal_(table, std=0.02)
        nn.init.zeros_(self.head_dist.bias)

    @property
    def n_prefix(self) -> int:
        """Two tokens before the patches: CLS and the distillation token."""
        return 2

    def embed_patches(self, patches: Tensor, grid: tuple[int, int]) -> Tensor:
        """``(B, N, D)`` patch embeddings -> ``(B, 2 + N, D)``, by :func:`prepend_cls_and_distillation_tokens`
        (``embed(images)`` and ``forward_features`` call it)."""
        return self.pos_drop(prepend_cls_and_distillation_tokens(patches, self.cls_token, self.dist_token,
                                                                 self.pos_embed_for(grid)))

    def forward_heads(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """``(B, T, D) -> ((B, K), (B, K))``: the CLS head on token 0, the distillation head on token 1."""
        cls_logits = self.head(self.head_drop(features[:, 0]))
        dist_logits = self.head_dist(self.head_drop(features[:, 1]))
        return cls_logits, dist_logits

    def forward_head(self, features: Tensor, pre_logits: bool = False) -> Tensor:
        """``(B, T, D) -> (B, K)``: the average of the two heads' logits; ``(B, D)``, the average of the two
        tokens, if ``pre_logits``."""
        if pre_logits:
            return self.head_drop((features[:, 0] + features[:, 1]) / 2)
        return combine_heads(*self.forward_heads(features))

    def distillation_loss(self, images: Tensor, labels: Tensor, teacher_logits: Tensor, kind: str = "hard",
                          tau: float = 3.0, lam: float = 0.1) -> Tensor:
        """One training loss: ``(B, C, H, W)`` images, ``(B,)`` labels, ``(B, K)`` teacher logits -> ``()``.

        ``kind="hard"``: :func:`hard_distillation_loss`; ``"soft"``: :func:`soft_distillation_loss`
        with ``tau`` and ``lam`` (the paper's soft setting: 3.0 and 0.1).
        """
        cls_logits, dist_logits = self.forward_heads(self.forward_features(images))
        if kind == "hard":
            return hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels)
        if kind == "soft":
            return soft_distillation_loss(cls_logits, dist_logits, teacher_logits, labels, tau=tau, lam=lam)
        raise ValueError(f"kind must be 'hard' or 'soft', got {kind!r}")

    @torch.no_grad()
    def token_similarity(self, images: Tensor) -> Tensor:
        """``(n_layers + 1,)``: the cosine similarity of the CLS and distillation tokens, averaged over the
        images, at the encoder's input and after each block (the last entry after the final norm).

        DeiT (section 5.2) reports it rising from 0.06 at the input to 0.93 at the output.
        """
        patches, grid = self.patch_embed.tokens_and_grid(images)
        x = self.embed_patches(patches, grid)
        sims = [F.cosine_similarity(x[:, 0], x[:, 1], dim=-1).mean()]
        for i, block in enumerate(self.blocks):
            x = block(x, **self.attention_bias(i, grid))
            if i < len(self.blocks) - 1:
                sims.append(F.cosine_similarity(x[:, 0], x[:, 1], dim=-1).mean())
        x = self.norm(x)
        sims.append(F.cosine_similarity(x[:, 0], x[:, 1], dim=-1).mean())
        return torch.stack(sims)


# --------------------------------------------------------------------------
# The same model as plain functions (the book's walk-through and exercises)
# --------------------------------------------------------------------------
def prepend_cls_and_distillation_tokens(patches: Tensor, cls_token: Tensor, dist_token: Tensor,
                                        pos_embed: Tensor) -> Tensor:
    """DeiT's input sequence: ``[x_cls; x_dist; x_p^1 E; ...; x_p^N E] + E_pos``.

    Args:
        patches: ``(B, N, D)`` projected patches.
        cls_token: ``(1, 1, D)``, the learned CLS vector.
        dist_token: ``(1, 1, D)``, the learned distillation vector.
        pos_embed: ``(1, 2 + N, D)``; entry 0 is CLS's position, entry 1 the distillation token's.
    Returns:
        ``(B, 2 + N, D)``: token 0 is CLS, token 1 the distillation token, then the patches.
    """
    if patches.ndim != 3:
        raise ValueError(f"patches must be (batch, N, dim), got shape {tuple(patches.shape)}")
    b, n, d = patches.shape
    for name, token in (("cls_token", cls_token), ("dist_token", dist_token)):
        if tuple(token.shape) != (1, 1, d):
            raise ValueError(f"{name} must be (1, 1, dim) = (1, 1, {d}), got {tuple(token.shape)}")
    if tuple(pos_embed.shape) != (1, 2 + n, d):
        raise ValueError(f"pos_embed must be (1, 2 + N, dim) = (1, {2 + n}, {d}), got {tuple(pos_embed.shape)}")
    prefix = torch.cat([cls_token, dist_token], dim=1).expand(b, -1, -1).to(patches.dtype)
    return torch.cat([prefix, patches], dim=1) + pos_embed


def _check_logits(cls_logits: Tensor, dist_logits: Tensor, teacher_logits: Tensor, labels: Tensor) -> None:
    for name, t in (("cls_logits", cls_logits), ("dist_logits", dist_logits), ("teacher_logits", teacher_logits)):
        if t.ndim != 2:
            raise ValueError(f"{name} must be (batch, classes), got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be floating point, got {t.dtype}")
    if cls_logits.shape != dist_logits.shape or cls_logits.shape != teacher_logits.shape:
        raise ValueError("cls_logits, dist_logits and teacher_logits must have the same shape (batch, classes), got "
                         f"{tuple(cls_logits.shape)}, {tuple(dist_logits.shape)} and {tuple(teacher_logits.shape)}")
    b, k = cls_logits.shape
    if labels.ndim == 2 and labels.is_floating_point():  # class probabilities, such as CutMix's mixed labels
        if tuple(labels.shape) != (b, k):
            raise ValueError(f"label probabilities must be (batch, classes) = ({b}, {k}), got shape "
                             f"{tuple(labels.shape)}")
        return
    if labels.ndim != 1 or labels.shape[0] != b:
        raise ValueError(f"labels must be (batch,) = ({b},), got shape {tuple(labels.shape)}")
    if labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"labels must be integer class indices, got {labels.dtype}")
    if b and (int(labels.min()) < 0 or int(labels.max()) >= k):
        raise ValueError(f"labels must lie in [0, {k}) for {k} classes, got values from {int(labels.min())} "
                         f"to {int(labels.max())}")


def hard_distillation_loss(cls_logits: Tensor, dist_logits: Tensor, teacher_logits: Tensor,
                           labels: Tensor) -> Tensor:
    """DeiT's hard-label distillation: ``1/2 CE(cls_logits, y) + 1/2 CE(dist_logits, argmax(teacher_logits))``.

    The teacher's label ``y_t`` is the index of its largest logit; on a tie the
    first such index counts, as ``torch.argmax`` returns it. Its logits get no
    gradient (an argmax has none). Each cross-entropy is averaged over the batch.
    Under CutMix (:func:`cutmix`) the true label is a mix of two classes: ``labels``
    may then be ``(B, K)`` probabilities, and the CLS head's cross-entropy is taken
    against them (as DeiT's code does), while the teacher labels the mixed image itself.

    Args:
        cls_logits: ``(B, K)``, the CLS head's logits.
        dist_logits: ``(B, K)``, the distillation head's logits.
        teacher_logits: ``(B, K)``, the teacher's logits on the same images.
        labels: ``(B,)`` integer true classes in ``[0, K)``, or ``(B, K)`` float class probabilities.
    Returns:
        ``()``, a scalar in the logits' dtype.
    """
    _check_logits(cls_logits, dist_logits, teacher_logits, labels)
    teacher_labels = teacher_logits.detach().argmax(dim=-1)
    return 0.5 * F.cross_entropy(cls_logits, _targets(labels)) + 0.5 * F.cross_entropy(dist_logits, teacher_labels)


def _targets(labels: Tensor) -> Tensor:
    """What ``F.cross_entropy`` takes: class indices as int64, class probabilities as they are."""
    return labels if labels.is_floating_point() else labels.long()


def soft_distillation_loss(cls_logits: Tensor, dist_logits: Tensor, teacher_logits: Tensor, labels: Tensor,
                           tau: float = 3.0, lam: float = 0.1) -> Tensor:
    """Soft distillation through the distillation head:
    ``(1 - lam) CE(cls_logits, y) + lam tau^2 KL(softmax(Z_t / tau) || softmax(Z_dist / tau))``.

    The KL divergence is summed over the classes and averaged over the batch;
    ``tau^2`` keeps its gradients the size of the CE's as ``tau`` grows (Hinton
    et al., 2015). The teacher is a fixed target: ``sg(Z_t)``.

    Args:
        cls_logits, dist_logits, teacher_logits: ``(B, K)``.  labels: ``(B,)`` in ``[0, K)``, or ``(B, K)``
            class probabilities.
        tau: the temperature, ``> 0``.  lam: the weight of the teacher's term, in ``[0, 1]``.
    Returns:
        ``()``.
    """
    _check_logits(cls_logits, dist_logits, teacher_logits, labels)
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got tau={tau}")
    if not 0 <= lam <= 1:
        raise ValueError(f"lam must lie in [0, 1], got lam={lam}")
    log_p_teacher = F.log_softmax(teacher_logits.detach() / tau, dim=-1)
    log_p_student = F.log_softmax(dist_logits / tau, dim=-1)
    kl = (log_p_teacher.exp() * (log_p_teacher - log_p_student)).sum(dim=-1).mean()
    return (1 - lam) * F.cross_entropy(cls_logits, _targets(labels)) + lam * tau ** 2 * kl


def combine_heads(cls_logits: Tensor, dist_logits: Tensor, how: str = "logits") -> Tensor:
    """The test-time fusion of the two heads: ``(B, K), (B, K) -> (B, K)``.

    ``how="logits"``: the average of the logits (DeiT's released code, timm, the model's ``forward``);
    ``"softmax"``: the average of the two softmax outputs (the paper's text, section 4), probabilities.
    """
    if cls_logits.shape != dist_logits.shape:
        raise ValueError(f"the two heads' logits must have the same shape, got {tuple(cls_logits.shape)} and "
                         f"{tuple(dist_logits.shape)}")
    if how == "logits":
        return (cls_logits + dist_logits) / 2
    if how == "softmax":
        return (cls_logits.softmax(dim=-1) + dist_logits.softmax(dim=-1)) / 2
    raise ValueError(f"how must be 'logits' or 'softmax', got {how!r}")


# --------------------------------------------------------------------------
# CutMix: the augmentation under which a teacher's label says more than the true one
# --------------------------------------------------------------------------
def cutmix(images: Tensor, labels: Tensor, num_classes: int,
           generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """CutMix (Yun et al., 2019), one of DeiT's augmentations: a box of another image of the batch pasted
    into each image, and the label mixed in proportion to the area.

    For each image ``i``: a partner ``j`` (a random permutation of the batch), a ratio ``lam`` uniform in
    ``[0, 1]`` (CutMix's ``Beta(1, 1)``, DeiT's setting), and a box of height and width ``sqrt(1 - lam)``
    times the image's, centred on a uniform pixel and clipped to the image; the box's pixels are image
    ``j``'s. The label is ``(1 - a) onehot(y_i) + a onehot(y_j)``, with ``a`` the share of the image the
    clipped box covers (timm's "corrected" lambda). Every image gets its own box (timm's ``mode="elem"``).
    The mixed label says how much of each image is there, not whether an object survived the cut: that
    is what a teacher looking at the mixed image can tell.

    Args:
        images: ``(B, C, H, W)``.
        labels: ``(B,)`` integer classes in ``[0, num_classes)``.
        num_classes: ``K``.
        generator: the random numbers' source (drawn on the CPU), for reproducible batches.
    Returns:
        ``(mixed, targets)``: ``(B, C, H, W)`` images and ``(B, K)`` float label probabilities (rows sum to 1).
    """
    if images.ndim != 4:
        raise ValueError(f"images must be (batch, channels, height, width), got shape {tuple(images.shape)}")
    b, _, h, w = images.shape
    if labels.shape != (b,) or labels.is_floating_point():
        raise ValueError(f"labels must be (batch,) = ({b},) integer classes, got shape {tuple(labels.shape)} "
                         f"and {labels.dtype}")
    lam = torch.rand(b, generator=generator)
    partner = torch.randperm(b, generator=generator)
    cut = (1 - lam).sqrt()
    half_h, half_w = (cut * h).long() // 2, (cut * w).long() // 2
    cy, cx = torch.randint(h, (b,), generator=generator), torch.randint(w, (b,), generator=generator)
    rows, cols = torch.arange(h), torch.arange(w)
    in_rows = (rows >= (cy - half_h).clamp(0, h)[:, None]) & (rows < (cy + half_h).clamp(0, h)[:, None])
    in_cols = (cols >= (cx - half_w).clamp(0, w)[:, None]) & (cols < (cx + half_w).clamp(0, w)[:, None])
    box = in_rows[:, :, None] & in_cols[:, None, :]                       # (B, H, W): pixels from the partner
    area = box.flatten(1).float().mean(1)                                 # (B,): the share the partner gets
    box, partner = box.to(images.device), partner.to(images.device)
    mixed = torch.where(box[:, None], images[partner], images)
    one_hot = F.one_hot(labels.long(), num_classes).float()
    area = area.to(images.device)[:, None]
    return mixed, (1 - area) * one_hot + area * one_hot[partner]
