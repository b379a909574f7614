"""DINO's training recipe: self-distillation without labels (chapter 10).

A student and an EMA teacher see different crops of an image (Caron et al.,
2021; Oquab et al., 2024):

* :class:`DINOHead` maps their CLS features to ``K`` prototype scores
  (an MLP, an L2-normalised bottleneck, a weight-normalised last layer);
* :func:`dino_loss` makes the student's distribution match the teacher's
  sharpened, centered one on every pair of different views;
* :func:`sinkhorn_knopp` is DINOv2's replacement for the center: it makes
  the teacher's targets use every prototype equally within a batch;
* :func:`update_center` and :func:`ema_update` are the two moving averages:
  the center keeps the teacher from collapsing onto one prototype, the EMA
  keeps the teacher a slow, stable copy of the student;
* :func:`multi_crop` cuts the global and local views from given boxes
  (:func:`sample_crop_boxes` draws them from a generator);
* :func:`colour_jitter` changes the colours of each view, so that views
  cannot be matched by colour alone;
* :func:`softmax_entropy` measures how spread a distribution is (collapse);
* :func:`dino_train_step` is one step of the whole loop;
* :class:`DINOPair` holds the whole state (student, teacher, center) as one
  module whose :meth:`DINOPair.loss` a generic trainer can drive, with
  :func:`teacher_momentum`, DINO's schedule of the EMA momentum.

The backbone the recipe trains is :mod:`course_lib.dinov2` (or any module
mapping images to features).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["WeightNormLinear", "DINOHead", "dino_loss", "update_center", "ema_update", "sample_crop_boxes",
           "multi_crop", "random_multi_crop", "colour_jitter", "softmax_entropy", "dino_train_step", "teacher_momentum",
           "DINOPair", "sinkhorn_knopp"]


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
    ``use_bn`` puts a BatchNorm after each hidden Linear (DINO's option, used
    with ResNets): it takes the part all images share out of the features, for
    a backbone whose features start out nearly alike for every image.
    """

    def __init__(self, in_dim: int, out_dim: int = 65536, hidden_dim: int = 2048, bottleneck_dim: int = 256,
                 n_layers: int = 3, norm_last_layer: bool = True, use_bn: bool = False):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        dims = [in_dim] + [hidden_dim] * (n_layers - 1) + [bottleneck_dim]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers.append(nn.Linear(a, b))
            if i < n_layers - 1:
                if use_bn:
                    layers.append(nn.BatchNorm1d(b))
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


def _upcast(x: Tensor) -> Tensor:
    """Half precision to float32; float32 and float64 stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


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
        center: ``(K,)`` or ``(1, K)``, see :func:`update_center`. The teacher
            side (``teacher_out`` and ``center``) sends no gradient.
    Returns:
        a scalar (float32 for half-precision inputs, else their dtype).
    """
    s = _upcast(_stack_crops(student_out, "student_out"))
    t = _upcast(_stack_crops(teacher_out, "teacher_out").detach())
    n_s, n_t = s.shape[0], t.shape[0]
    if s.shape[1:] != t.shape[1:]:
        raise ValueError(f"student crops {tuple(s.shape[1:])} and teacher crops {tuple(t.shape[1:])} differ in (B, K)")
    if n_t > n_s:
        raise ValueError(f"the teacher's {n_t} crops must be the first of the student's {n_s}")
    log_p_s = F.log_softmax(s / student_temp, dim=-1)
    p_t = F.softmax((t - center.detach().to(t.dtype)) / teacher_temp, dim=-1)
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
    batch_center = _upcast(t.reshape(-1, t.shape[-1])).mean(dim=0).reshape(center.shape)
    return center * momentum + batch_center.to(center.dtype) * (1 - momentum)


@torch.no_grad()
def sinkhorn_knopp(teacher_out: Tensor, temperature: float, n_iterations: int = 3) -> Tensor:
    """DINOv2's teacher targets: ``softmax(t / temperature)`` rebalanced so that every prototype gets the same mass.

    DINOv2 replaces DINO's centering by the Sinkhorn-Knopp batch normalisation of SwAV (Caron et al., 2020;
    Oquab et al., 2024, section 4). The scores ``Q = exp(t / temperature)``, a ``(K, B)`` matrix of prototypes by
    images, are scaled alternately along its two axes: each prototype's row to a total of ``1 / K``, then each
    image's column to ``1 / B``. Each pass brings both marginals closer to uniform (Sinkhorn's theorem); DINOv2
    stops after 3. The result, times ``B``, gives each image a distribution over the prototypes (its row sums to
    1) in which, over the batch, no prototype is used more than another: collapse onto one prototype is ruled
    out within every batch, with no moving average.

    Args:
        teacher_out: ``(B, K)`` teacher scores for one crop of each image (or ``(n_crops * B, K)``).
        temperature: the teacher's (low) temperature, as in :func:`dino_loss`.
        n_iterations: passes over the two axes.

    Returns:
        ``(B, K)`` float32 targets, each row summing to 1.
    """
    if teacher_out.ndim != 2:
        raise ValueError(f"teacher_out must be (batch, K), got shape {tuple(teacher_out.shape)}")
    # in logarithms, log Q = scores up to constants: with a low temperature exp(scores) under- or overflows
    log_q = (teacher_out.float() / temperature).t()  # (K, B)
    k, b = log_q.shape
    log_q = log_q - torch.logsumexp(log_q.flatten(), 0)
    for _ in range(n_iterations):
        log_q = log_q - torch.logsumexp(log_q, dim=1, keepdim=True) - math.log(k)  # every prototype: 1 / K
        log_q = log_q - torch.logsumexp(log_q, dim=0, keepdim=True) - math.log(b)  # every image: 1 / B
    return (log_q + math.log(b)).exp().t()


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


# --------------------------------------------------------------------------
# Multi-crop views and the training step
# --------------------------------------------------------------------------
def sample_crop_boxes(n_crops: int, batch: int, image_hw: tuple[int, int], scale: tuple[float, float],
                      generator: torch.Generator | None = None,
                      ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> Tensor:
    """Random boxes ``(n_crops, batch, 4)`` of integers ``(top, left, height, width)``, as RandomResizedCrop draws them.

    Each box covers a fraction of the image area drawn uniformly from ``scale``
    with an aspect ratio (width / height) log-uniform in ``ratio``; sides are
    clipped to the image and at least one pixel, and the corner is uniform
    among the positions that keep the box inside. The same generator state
    gives the same boxes.
    """
    h, w = image_hw
    shape = (n_crops, batch)
    area = h * w * (scale[0] + (scale[1] - scale[0]) * torch.rand(shape, generator=generator))
    log_r = torch.empty(shape).uniform_(math.log(ratio[0]), math.log(ratio[1]), generator=generator)
    r = log_r.exp()
    bw = (area * r).sqrt().round().clamp(1, w).long()
    bh = (area / r).sqrt().round().clamp(1, h).long()
    top = (torch.rand(shape, generator=generator) * (h - bh + 1)).floor().long().clamp(max=h - bh)
    left = (torch.rand(shape, generator=generator) * (w - bw + 1)).floor().long().clamp(max=w - bw)
    return torch.stack([top, left, bh, bw], dim=-1)


def _crop_resize(images: Tensor, boxes: Tensor, size: int) -> Tensor:
    out = []
    for img, (top, left, bh, bw) in zip(images, boxes.tolist()):
        crop = img[:, top:top + bh, left:left + bw]
        out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
    return torch.stack(out)


def multi_crop(images: Tensor, global_boxes: Tensor, local_boxes: Tensor, global_size: int,
               local_size: int) -> list[Tensor]:
    """DINO's multi-crop views from given boxes: the global crops first, then the local ones.

    Args:
        images: ``(B, C, H, W)``.
        global_boxes, local_boxes: integer ``(n_global, B, 4)`` and ``(n_local, B, 4)``,
            rows ``(top, left, height, width)`` in pixels: crop ``k`` of image ``b``
            is ``images[b, :, top:top + height, left:left + width]``.
        global_size, local_size: side of the square each crop is resized to
            (bilinear, ``align_corners=False``, no antialiasing).
    Returns:
        a list of ``n_global`` tensors ``(B, C, global_size, global_size)``
        followed by ``n_local`` tensors ``(B, C, local_size, local_size)``.
    """
    if images.ndim != 4:
        raise ValueError(f"images must be (batch, channels, height, width), got {tuple(images.shape)}")
    for name, boxes in (("global_boxes", global_boxes), ("local_boxes", local_boxes)):
        if boxes.ndim != 3 or boxes.shape[1:] != (images.shape[0], 4):
            raise ValueError(f"{name} must be (n_crops, batch={images.shape[0]}, 4), got {tuple(boxes.shape)}")
    return ([_crop_resize(images, b, global_size) for b in global_boxes]
            + [_crop_resize(images, b, local_size) for b in local_boxes])


def random_multi_crop(images: Tensor, generator: torch.Generator | None = None, *, n_global: int = 2,
                      n_local: int = 4, global_size: int | None = None, local_size: int | None = None,
                      global_scale: tuple[float, float] = (0.4, 1.0),
                      local_scale: tuple[float, float] = (0.05, 0.4), flip: bool = True) -> list[Tensor]:
    """:func:`multi_crop` with boxes from :func:`sample_crop_boxes` and, optionally, random horizontal flips.

    Defaults follow DINO (Caron et al., 2021): 2 global crops covering 40-100 %
    of the image, 4 local crops covering 5-40 %; sizes default to the image
    side and to ``3/7`` of it (224 and 96 px at 224 px).
    """
    b, _, h, w = images.shape
    global_size = global_size or h
    local_size = local_size or max(1, round(h * 3 / 7))
    gb = sample_crop_boxes(n_global, b, (h, w), global_scale, generator)
    lb = sample_crop_boxes(n_local, b, (h, w), local_scale, generator)
    crops = multi_crop(images, gb, lb, global_size, local_size)
    if flip:
        for i, c in enumerate(crops):
            f = torch.rand(b, generator=generator) < 0.5
            crops[i] = torch.where(f[:, None, None, None], c.flip(-1), c)
    return crops


def colour_jitter(images: Tensor, generator: torch.Generator | None = None, *, brightness: float = 0.4,
                  contrast: float = 0.4, saturation: float = 0.4, p: float = 0.8, shuffle_p: float = 0.5,
                  grayscale_p: float = 0.2) -> Tensor:
    """DINO's photometric augmentation, per image, on images in ``[-1, 1]``: ``(B, C, H, W) -> (B, C, H, W)``.

    With probability ``p`` an image gets a random brightness, contrast and
    saturation factor (each uniform in ``[1 - a, 1 + a]``); with probability
    ``shuffle_p`` its colour channels are permuted (a coarse hue change);
    with probability ``grayscale_p`` it turns gray. Two views of one image then
    rarely share their colours, so the student cannot match the teacher by
    colour statistics alone: it has to use shape. Returns a new tensor,
    clamped to ``[-1, 1]``.
    """
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be (batch, 3, height, width), got {tuple(images.shape)}")
    b = images.shape[0]

    def factor(a: float) -> Tensor:
        f = 1 + a * (2 * torch.rand(b, generator=generator) - 1)
        return torch.where(apply, f, torch.ones_like(f)).view(b, 1, 1, 1).to(images)

    apply = torch.rand(b, generator=generator) < p
    fb, fc, fs = factor(brightness), factor(contrast), factor(saturation)
    perms = torch.stack([torch.randperm(3, generator=generator) for _ in range(b)])
    shuffle = (torch.rand(b, generator=generator) < shuffle_p).view(b, 1, 1, 1).to(images.device)
    gray_now = (torch.rand(b, generator=generator) < grayscale_p).view(b, 1, 1, 1).to(images.device)
    u = (images + 1) / 2                                                    # [0, 1]
    u = u * fb
    mean = u.mean(dim=(1, 2, 3), keepdim=True)
    u = (u - mean) * fc + mean
    gray = (0.299 * u[:, 0:1] + 0.587 * u[:, 1:2] + 0.114 * u[:, 2:3])
    u = (u - gray) * fs + gray
    shuffled = torch.gather(u, 1, perms.to(images.device).view(b, 3, 1, 1).expand_as(u))
    u = torch.where(shuffle, shuffled, u)
    u = torch.where(gray_now, gray.expand_as(u), u)
    return (u.clamp(0, 1) * 2 - 1)


def softmax_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Mean entropy (nats) of ``softmax(logits / temperature)`` over the last axis: ``(..., K) -> ()``.

    ``log K`` for a uniform distribution, 0 for a one-hot one: both ends are
    DINO's collapse modes.
    """
    log_p = F.log_softmax(logits / temperature, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean()


def dino_train_step(student: nn.Module, teacher: nn.Module, crops: list[Tensor], center: Tensor,
                    optimizer: torch.optim.Optimizer, *, n_global: int = 2, student_temp: float = 0.1,
                    teacher_temp: float = 0.04, center_momentum: float = 0.9, ema_momentum: float = 0.996,
                    centering: bool = True) -> tuple[float, Tensor, Tensor]:
    """One DINO step (Caron et al., 2021, algorithm 1): loss, student update, EMA teacher, new center.

    ``student`` and ``teacher`` map images ``(B, C, H, W)`` to prototype scores
    ``(B, K)`` (e.g. ``nn.Sequential(DINOv2(cfg), DINOHead(...))``; crops of
    different sizes work because positions are resampled). The teacher sees the
    first ``n_global`` crops, the student all of them. With ``centering=False``
    the center is neither subtracted nor updated (the ablation that collapses).

    Returns:
        ``(loss, teacher_out (n_global, B, K), new center)``.
    """
    with torch.no_grad():
        teacher_out = torch.stack([teacher(c) for c in crops[:n_global]])
    student_out = torch.stack([student(c) for c in crops[:n_global]])
    student_out = [*student_out] + [student(c) for c in crops[n_global:]]
    used_center = center if centering else torch.zeros_like(center)
    loss = dino_loss(student_out, teacher_out, used_center, student_temp, teacher_temp)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    ema_update(teacher, student, ema_momentum)
    new_center = update_center(center, teacher_out, center_momentum) if centering else center
    return float(loss.detach()), teacher_out, new_center


def teacher_momentum(step: int, max_steps: int, base: float = 0.996, final: float = 1.0) -> float:
    """DINO's EMA momentum at ``step`` (0-based) of ``max_steps``: from ``base`` to ``final`` along a half cosine."""
    if max_steps < 1 or not 0 <= step <= max_steps:
        raise ValueError(f"need 0 <= step <= max_steps and max_steps >= 1, got step={step}, max_steps={max_steps}")
    return final - (final - base) * (math.cos(math.pi * step / max_steps) + 1) / 2


class DINOPair(nn.Module):
    """The whole DINO state as one module: student and teacher (each ``backbone -> DINOHead``) and the center.

    :meth:`loss` is :func:`dino_train_step` without its optimiser step, so any
    trainer (the course's :class:`~course_lib.training.Trainer`) can run DINO:
    it first moves the teacher towards the student's latest update (the EMA
    step that :func:`dino_train_step` takes after its update, taken here at the
    start of the next step: the same sequence of teachers), then computes the
    loss on the crops and updates the center. The teacher's parameters never
    receive gradients (``requires_grad=False``), so an optimiser over
    ``parameters()`` trains the student alone.

    Args:
        backbone: images ``(B, C, H, W)`` -> features ``(B, feature_dim)``.
        feature_dim: the backbone's output width.  out_dim, hidden_dim, bottleneck_dim, use_bn: of the
            :class:`DINOHead`.
    """

    def __init__(self, backbone: nn.Module, feature_dim: int, out_dim: int = 65536, hidden_dim: int = 2048,
                 bottleneck_dim: int = 256, *, n_global: int = 2, student_temp: float = 0.1,
                 teacher_temp: float = 0.04, center_momentum: float = 0.9, use_bn: bool = False):
        super().__init__()
        self.student = nn.Sequential(backbone, DINOHead(feature_dim, out_dim, hidden_dim, bottleneck_dim,
                                                        use_bn=use_bn))
        self.teacher = copy.deepcopy(self.student).requires_grad_(False)
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.n_global, self.student_temp, self.teacher_temp = n_global, student_temp, teacher_temp
        self.center_momentum = center_momentum

    @property
    def teacher_backbone(self) -> nn.Module:
        """The teacher's backbone: the network DINO keeps (and evaluates) after training."""
        return self.teacher[0]

    def loss(self, crops: list[Tensor], ema_momentum: float) -> Tensor:
        """EMA step of the teacher, then the DINO loss of the student on ``crops`` (global crops first)."""
        if len(crops) <= self.n_global:
            raise ValueError(f"need the {self.n_global} global crops and at least one more, got {len(crops)} crops")
        ema_update(self.teacher, self.student, ema_momentum)
        with torch.no_grad():
            teacher_out = torch.stack([self.teacher(c) for c in crops[:self.n_global]])  # (n_global, B, K)
        student_out = [self.student(c) for c in crops]
        loss = dino_loss(student_out, teacher_out, self.center, self.student_temp, self.teacher_temp)
        with torch.no_grad():
            self.center.copy_(update_center(self.center, teacher_out, self.center_momentum))
        return loss
