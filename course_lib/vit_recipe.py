"""A ViT as a function of its parameters, and the recipe that trains it (the ViT capstone, after chapter 11).

The capstone asks a learner to put chapters 02-09 together for images: a
Vision Transformer written as one function of a dictionary of tensors, the
augmentation that stretches a small set of digits, and the loop that trains
it. This module is the reference for all three. The model is chapter 09's
:class:`~course_lib.vit.ViT` (learned 1-D positions, a class token, pre-LN
blocks with GELU MLPs and biases), written out as its math path, and
``params`` uses the ViT's own state-dict names, so a learner's trained
parameters load into the module unchanged (:func:`vit_config`)::

    z_0 = [x_class; patchify(x) E^T + b] + E_pos        E = params["patch_embed.proj.weight"]  (D, C, P, P)
    z   = z + MSA_l(LN(z))                              every head sees every patch (no mask)
    z   = z + MLP_l(LN(z))                              fc2(GELU(fc1(.)))
    logits = LN(z_L)[:, 0] W_head^T + b_head            the class token's output, classified

The configuration is a plain dict with the names of
:class:`~course_lib.vit.ViTConfig` (:data:`CONFIG_KEYS`), because it travels
where the course's package does not (the grading kernel). The training recipe
is DeiT's on a small scale: random images of the training set, each shifted by
a few pixels (:func:`augment`), AdamW with decay on the matrices only
(:func:`~course_lib.training.param_groups`' rule), a linear warm-up and a
cosine decay, the gradients clipped to a global norm before each step.

Shapes: ``images`` ``(batch, in_chans, image_size, image_size)``; logits ``(batch, num_classes)``.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.lm_recipe import clip_global_norm, lr_at, update
from course_lib.multi_head import merge_heads, split_heads
from course_lib.norms import layer_norm
from course_lib.vit import ViTConfig, patchify, prepend_cls_add_pos

__all__ = ["CONFIG_KEYS", "HP_KEYS", "BETAS", "BACKGROUND", "param_shapes", "param_count", "init_params",
           "vit_logits", "augment", "decay_groups", "lr_at", "clip_global_norm", "train_loop", "evaluate",
           "vit_config", "train_vit", "RECIPE_CONFIG", "RECIPE_HP"]

#: the configuration's keys, named as ViTConfig's fields
CONFIG_KEYS = ("image_size", "patch_size", "in_chans", "num_classes", "dim", "n_layers", "n_heads", "mlp_hidden",
               "norm_eps")
#: the training loop's hyperparameters
HP_KEYS = ("steps", "batch_size", "max_lr", "min_lr", "warmup_steps", "weight_decay", "max_norm", "max_shift")
#: AdamW's betas in the recipe (PyTorch's defaults, DeiT's)
BETAS = (0.9, 0.999)
#: the value of an empty pixel in the course's images (``[-1, 1]``, background -1): what a shift brings in
BACKGROUND = -1.0


def param_shapes(cfg: Mapping) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the ViT's state-dict order."""
    d, h, p, c = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["in_chans"]
    n = (cfg["image_size"] // p) ** 2
    shapes = {"cls_token": (1, 1, d), "pos_embed": (1, 1 + n, d), "patch_embed.proj.weight": (d, c, p, p),
              "patch_embed.proj.bias": (d,)}
    for i in range(cfg["n_layers"]):
        b = f"blocks.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes |= {b + f"attn.{proj}.weight": (d, d), b + f"attn.{proj}.bias": (d,)}
        shapes |= {b + "mlp.fc1.weight": (h, d), b + "mlp.fc1.bias": (h,), b + "mlp.fc2.weight": (d, h),
                   b + "mlp.fc2.bias": (d,), b + "attn_res.norm.weight": (d,), b + "attn_res.norm.bias": (d,),
                   b + "mlp_res.norm.weight": (d,), b + "mlp_res.norm.bias": (d,)}
    return shapes | {"norm.weight": (d,), "norm.bias": (d,), "head.weight": (cfg["num_classes"], d),
                     "head.bias": (cfg["num_classes"],)}


def param_count(cfg: Mapping) -> int:
    """How many numbers the model learns: ``(C P^2 + 1) D + (N + 2) D + L (4 D^2 + 2 D h + 9 D + h) + 2 D + K (D + 1)``,
    with ``N = (image_size / P)^2`` patches, ``h = mlp_hidden`` and ``K = num_classes``."""
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def init_params(cfg: Mapping, generator: torch.Generator, std: float = 0.02,
                dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """The ViT's initialisation, simplified: every matrix, the class token and the positions ``N(0, std^2)``,
    every bias 0, every LayerNorm gain 1; leaf tensors with grad."""
    params = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("norm.weight"):
            p = torch.ones(shape, dtype=dtype)
        elif name.endswith("bias"):
            p = torch.zeros(shape, dtype=dtype)
        else:
            p = torch.randn(shape, generator=generator, dtype=dtype) * std
        params[name] = p.requires_grad_(True)
    return params


def vit_logits(params: Mapping[str, Tensor], images: Tensor, cfg: Mapping) -> Tensor:
    """Class logits ``(batch, num_classes)`` of ``images`` ``(batch, in_chans, H, W)``, in the parameters' dtype."""
    eps, heads = cfg["norm_eps"], cfg["n_heads"]
    w = params["patch_embed.proj.weight"]
    patches = F.linear(patchify(images.to(w.dtype), cfg["patch_size"]), w.flatten(1), params["patch_embed.proj.bias"])
    z = prepend_cls_add_pos(patches, params["cls_token"], params["pos_embed"])
    for i in range(cfg["n_layers"]):
        def p(name, i=i):
            return params[f"blocks.{i}.{name}"]

        def lin(x, name):
            return F.linear(x, p(name + ".weight"), p(name + ".bias"))

        x = layer_norm(z, p("attn_res.norm.weight"), p("attn_res.norm.bias"), eps)
        q, k, v = (split_heads(lin(x, f"attn.{n}"), heads) for n in ("q_proj", "k_proj", "v_proj"))
        z = z + lin(merge_heads(F.scaled_dot_product_attention(q, k, v)), "attn.out_proj")
        x = layer_norm(z, p("mlp_res.norm.weight"), p("mlp_res.norm.bias"), eps)
        z = z + lin(F.gelu(lin(x, "mlp.fc1")), "mlp.fc2")
    cls = layer_norm(z[:, 0], params["norm.weight"], params["norm.bias"], eps)
    return F.linear(cls, params["head.weight"], params["head.bias"])


def augment(images: Tensor, max_shift: int, generator: torch.Generator) -> Tensor:
    """Each image moved by a random whole number of pixels, the pixels it uncovers set to :data:`BACKGROUND`.

    The shifts are one draw, ``torch.randint(-max_shift, max_shift + 1, (batch, 2), generator=generator)``:
    image ``b`` moves down by ``dy = shifts[b, 0]`` and right by ``dx = shifts[b, 1]``, so
    ``out[b, :, i, j] = images[b, :, i - dy, j - dx]`` where that pixel exists. ``(B, C, H, W) -> (B, C, H, W)``.
    """
    b, _, height, width = images.shape
    shifts = torch.randint(-max_shift, max_shift + 1, (b, 2), generator=generator)
    m = max_shift
    padded = F.pad(images, (m, m, m, m), value=BACKGROUND)
    return torch.stack([padded[i, :, m - dy: m - dy + height, m - dx: m - dx + width]
                        for i, (dy, dx) in enumerate(shifts.tolist())])


def decay_groups(params: Mapping[str, Tensor], weight_decay: float) -> list[dict]:
    """AdamW's two groups by the course's rule: decay iff ``ndim >= 2`` (the matrices, the class token, the
    positions); the biases and the LayerNorm gains and shifts undecayed."""
    return [{"params": [p for p in params.values() if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params.values() if p.ndim < 2], "weight_decay": 0.0}]


def train_loop(params: dict[str, Tensor], images: Tensor, labels: Tensor, cfg: Mapping, hp: Mapping,
               generator: torch.Generator) -> list[float]:
    """Train ``params`` in place for ``hp["steps"]`` updates; the training loss of each update, before it.

    Update ``s`` (``s = 1 .. steps``): ``batch_size`` images drawn with replacement,
    ``torch.randint(n, (batch_size,), generator=generator)``, each shifted by :func:`augment` (the second
    draw), the mean cross-entropy of their labels, the gradients clipped to a global norm of ``max_norm``,
    then one AdamW step (betas :data:`BETAS`, :func:`decay_groups`) at the rate ``lr_at(s, max_lr,
    warmup_steps, steps, min_lr)``.
    """
    opt = torch.optim.AdamW(decay_groups(params, hp["weight_decay"]), lr=hp["max_lr"], betas=BETAS)
    losses = []
    with torch.enable_grad():
        for step in range(1, hp["steps"] + 1):
            idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)
            x = augment(images[idx], hp["max_shift"], generator)
            losses.append(update(opt, F.cross_entropy(vit_logits(params, x, cfg), labels[idx]), params, hp, step))
    return losses


@torch.no_grad()
def evaluate(params: Mapping[str, Tensor], images: Tensor, labels: Tensor, cfg: Mapping,
             batch_size: int = 256) -> tuple[float, float]:
    """``(mean loss, accuracy)`` over every image once, as the images are (no augmentation), in chunks of
    ``batch_size``: the loss averaged over the images, the accuracy the share whose largest logit is their
    label. Python floats."""
    loss, correct = 0.0, 0
    for x, y in zip(images.split(batch_size), labels.split(batch_size)):
        logits = vit_logits(params, x, cfg)
        loss += F.cross_entropy(logits, y, reduction="sum").item()
        correct += int((logits.argmax(dim=-1) == y).sum())
    return loss / len(images), correct / len(images)


def vit_config(cfg: Mapping, **overrides) -> ViTConfig:
    """The :class:`ViTConfig` of a capstone configuration, to load a learner's parameters into a
    :class:`~course_lib.vit.ViT`."""
    return ViTConfig(**{k: cfg[k] for k in CONFIG_KEYS}, **overrides)


#: the reference recipe's model and schedule, sized so that it trains in a few CPU seconds per 100 updates
RECIPE_CONFIG = dict(image_size=28, patch_size=7, in_chans=1, num_classes=10, dim=64, n_layers=2, n_heads=4,
                     mlp_hidden=128, norm_eps=1e-6)
RECIPE_HP = dict(batch_size=64, max_lr=2e-3, min_lr=2e-4, warmup_steps=20, weight_decay=0.05, max_norm=1.0,
                 max_shift=1)


def train_vit(images: Tensor, labels: Tensor, num_classes: int, steps: int,
              seed: int) -> tuple[dict, dict[str, Tensor]]:
    """The reference recipe: ``(cfg, params)`` of a ViT trained for ``steps`` updates on ``images``
    ``(n, 1, 28, 28)`` and their ``labels`` ``(n,)`` in ``0 .. num_classes - 1``."""
    g = torch.Generator().manual_seed(seed)
    cfg = dict(RECIPE_CONFIG, num_classes=num_classes)
    params = init_params(cfg, g)
    train_loop(params, images, labels, cfg, dict(RECIPE_HP, steps=steps), g)
    return cfg, {k: v.detach() for k, v in params.items()}
