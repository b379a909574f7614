"""A GPT as a function of its parameters, and the recipe that trains it (the GPT capstone, after chapter 08).

The capstone asks a learner to put chapters 02-08 together: a decoder-only
model written as one function of a dictionary of tensors, and the loop that
trains it. This module is the reference for both. The model is chapter 07's
:class:`~course_lib.decoder_lm.DecoderLM` with tied embeddings, written out as
its math path, and ``params`` uses the DecoderLM's own state-dict names, so a
learner's trained parameters load into the module unchanged::

    h_0 = E[ids]                                   E = params["tok_emb.weight"]   (V, dim)
    h   = h + Attn_l(RMSNorm(h))                   causal, RoPE on q and k, n_kv_heads shared key/value heads
    h   = h + SwiGLU_l(RMSNorm(h))
    logits = RMSNorm(h_L) E^T                      the head is the embedding (tied)

The configuration is a plain dict with the names of
:class:`~course_lib.decoder_lm.DecoderLMConfig` (``vocab_size``, ``dim``,
``n_layers``, ``n_heads``, ``n_kv_heads``, ``mlp_hidden``, ``rope_base``,
``norm_eps``), because it travels where the course's package does not (the
grading kernel). The training recipe is nanoGPT's, on chapter 07's pieces:
random windows of the token stream with their targets shifted by one, AdamW,
a linear warm-up and a cosine decay (:func:`~course_lib.training.warmup_cosine`),
the gradients clipped to a global norm before each step.

Shapes: ``ids`` ``(batch, seq)`` integers; logits ``(batch, seq, vocab_size)``.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.attention import scaled_dot_product_attention
from course_lib.decoder_lm import DecoderLMConfig, next_token_loss
from course_lib.mlp import swiglu
from course_lib.multi_head import merge_heads, split_heads
from course_lib.norms import rms_norm
from course_lib.positional import rotate_half
from course_lib.training import warmup_cosine

__all__ = ["CONFIG_KEYS", "HP_KEYS", "BETAS", "param_shapes", "param_count", "params_of_block", "init_params",
           "gpt_logits", "get_batch", "lr_at", "clip_global_norm", "update", "train_loop", "evaluate", "decoder_config",
           "train_gpt", "generate"]

#: the configuration's keys, named as DecoderLMConfig's fields
CONFIG_KEYS = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "mlp_hidden", "rope_base", "norm_eps")
#: the training loop's hyperparameters
HP_KEYS = ("steps", "batch_size", "block_size", "max_lr", "min_lr", "warmup_steps", "weight_decay", "max_norm")
#: AdamW's betas in the recipe (GPT-3's and Llama's)
BETAS = (0.9, 0.95)


def param_shapes(cfg: Mapping) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in DecoderLM's state-dict order (the tied head left out)."""
    d, hd = cfg["dim"], cfg["dim"] // cfg["n_heads"]
    kv = cfg["n_kv_heads"] * hd
    shapes = {"tok_emb.weight": (cfg["vocab_size"], d)}
    for i in range(cfg["n_layers"]):
        b = f"blocks.{i}."
        shapes |= {b + "attn.q_proj.weight": (d, d), b + "attn.k_proj.weight": (kv, d),
                   b + "attn.v_proj.weight": (kv, d), b + "attn.out_proj.weight": (d, d),
                   b + "mlp.gate_proj.weight": (cfg["mlp_hidden"], d), b + "mlp.up_proj.weight": (cfg["mlp_hidden"], d),
                   b + "mlp.down_proj.weight": (d, cfg["mlp_hidden"]),
                   b + "attn_res.norm.weight": (d,), b + "mlp_res.norm.weight": (d,)}
    return shapes | {"norm.weight": (d,)}


def param_count(cfg: Mapping) -> int:
    """How many numbers the model learns: ``V d + L (2 d^2 + 2 d k + 3 d h + 2 d) + d``,
    with ``k = n_kv_heads * dim / n_heads`` and ``h = mlp_hidden`` (the head is the embedding)."""
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def init_params(cfg: Mapping, generator: torch.Generator, std: float = 0.02,
                dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """DecoderLM's initialisation: every matrix ``N(0, std^2)``, every RMSNorm gain 1; leaf tensors with grad."""
    params = {}
    for name, shape in param_shapes(cfg).items():
        if len(shape) == 1:
            p = torch.ones(shape, dtype=dtype)
        else:
            p = torch.randn(shape, generator=generator, dtype=dtype) * std
        params[name] = p.requires_grad_(True)
    return params


def _rope(x: Tensor, base: float) -> Tensor:
    """RoPE in the half-split layout on ``x`` ``(batch, heads, seq, head_dim)``, angles in the dtype of ``x``."""
    n, hd = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, hd, 2, dtype=x.dtype, device=x.device) / hd)
    angles = torch.arange(n, dtype=x.dtype, device=x.device)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return x * angles.cos() + rotate_half(x) * angles.sin()


def params_of_block(params: Mapping[str, Tensor], i: int):
    """``p(name)``: block ``i``'s parameter ``blocks.{i}.{name}``."""
    return lambda name: params[f"blocks.{i}.{name}"]


def gpt_logits(params: Mapping[str, Tensor], ids: Tensor, cfg: Mapping) -> Tensor:
    """Next-token logits ``(batch, seq, vocab_size)`` of ``ids`` ``(batch, seq)``, in the parameters' dtype."""
    eps, base = cfg["norm_eps"], cfg["rope_base"]
    n_heads, n_kv = cfg["n_heads"], cfg["n_kv_heads"]
    emb = params["tok_emb.weight"]
    h = emb[ids]
    for i in range(cfg["n_layers"]):
        p = params_of_block(params, i)
        x = rms_norm(h, p("attn_res.norm.weight"), eps)
        q = _rope(split_heads(F.linear(x, p("attn.q_proj.weight")), n_heads), base)
        k = _rope(split_heads(F.linear(x, p("attn.k_proj.weight")), n_kv), base)
        v = split_heads(F.linear(x, p("attn.v_proj.weight")), n_kv)
        k, v = k.repeat_interleave(n_heads // n_kv, dim=1), v.repeat_interleave(n_heads // n_kv, dim=1)
        h = h + F.linear(merge_heads(scaled_dot_product_attention(q, k, v, is_causal=True)), p("attn.out_proj.weight"))
        x = rms_norm(h, p("mlp_res.norm.weight"), eps)
        h = h + swiglu(x, p("mlp.gate_proj.weight"), p("mlp.up_proj.weight"), p("mlp.down_proj.weight"))
    return F.linear(rms_norm(h, params["norm.weight"], eps), emb)


def get_batch(ids: Tensor, batch_size: int, block_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``batch_size`` random windows of ``ids`` ``(n,)``: inputs ``x`` and targets ``y``, both ``(batch, block)``.

    The starts are one draw, ``torch.randint(n - block_size, (batch_size,), generator=generator)``, so every
    window and its target shifted by one (``y[b, t] = x[b, t + 1]`` where both exist) lie inside ``ids``;
    both are int64.
    """
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    x = torch.stack([ids[s:s + block_size] for s in starts.tolist()]).long()
    y = torch.stack([ids[s + 1:s + 1 + block_size] for s in starts.tolist()]).long()
    return x, y


def lr_at(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float) -> float:
    """The learning rate of update ``step``: linear warm-up, then a half cosine to ``min_lr`` (chapter 07)."""
    return warmup_cosine(step, max_lr, warmup_steps, max_steps, min_lr)


def clip_global_norm(params, max_norm: float, eps: float = 1e-6) -> Tensor:
    """Scale every gradient by ``max_norm / (||g|| + eps)`` when their global norm ``||g||`` exceeds ``max_norm``.

    Chapter 7's :func:`~course_lib.training.clip_grad_norm` as the capstone writes it: the norm in the
    gradients' own precision (float64 cases stay float64). Returns the norm before clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    with torch.no_grad():
        total = torch.sqrt(sum((g * g).sum() for g in grads))
        if total > max_norm:
            for g in grads:
                g.mul_(max_norm / (total + eps))
    return total


def _loss(params: Mapping[str, Tensor], x: Tensor, y: Tensor, cfg: Mapping) -> Tensor:
    logits = gpt_logits(params, x, cfg)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def train_loop(params: dict[str, Tensor], ids: Tensor, cfg: Mapping, hp: Mapping,
               generator: torch.Generator) -> list[float]:
    """Train ``params`` in place for ``hp["steps"]`` updates; the training loss of each update, before it.

    Update ``s`` (``s = 1 .. steps``): a batch from :func:`get_batch`, the mean cross-entropy of its
    targets, the gradients clipped to a global norm of ``max_norm``, then one AdamW step (betas
    :data:`BETAS`, ``weight_decay`` on every parameter) at the rate ``lr_at(s, max_lr, warmup_steps,
    steps, min_lr)``.
    """
    opt = torch.optim.AdamW(list(params.values()), lr=hp["max_lr"], betas=BETAS, weight_decay=hp["weight_decay"])
    losses = []
    with torch.enable_grad():
        for step in range(1, hp["steps"] + 1):
            x, y = get_batch(ids, hp["batch_size"], hp["block_size"], generator)
            losses.append(update(opt, _loss(params, x, y, cfg), params, hp, step))
    return losses


def update(opt: torch.optim.Optimizer, loss: Tensor, params: Mapping[str, Tensor], hp: Mapping, step: int) -> float:
    """One update of the capstones' loops, after the batch's ``loss``: zero the gradients, backward, clip them
    to a global norm of ``hp["max_norm"]``, set the rate ``lr_at(step, ...)`` on every group, step. Returns
    the loss as a Python float."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    clip_global_norm(params.values(), hp["max_norm"])
    for group in opt.param_groups:
        group["lr"] = lr_at(step, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])
    opt.step()
    return loss.item()


@torch.no_grad()
def evaluate(params: Mapping[str, Tensor], ids: Tensor, cfg: Mapping, block_size: int) -> float:
    """Mean next-token loss over ``ids`` ``(n,)``, every target counted once.

    The stream is cut into windows of ``block_size + 1`` tokens that overlap by one (window ``w`` starts at
    ``w * block_size``), so each window predicts its last ``block_size`` tokens; the tail that fills no whole
    window is left out. Returns a Python float.
    """
    n_windows = (len(ids) - 1) // block_size
    if n_windows < 1:
        raise ValueError(f"need at least block_size + 1 = {block_size + 1} tokens, got {len(ids)}")
    windows = torch.stack([ids[w * block_size: w * block_size + block_size + 1] for w in range(n_windows)]).long()
    total = 0.0
    for chunk in windows.split(64):
        total += next_token_loss(gpt_logits(params, chunk, cfg), chunk).item() * len(chunk)
    return total / n_windows


def decoder_config(cfg: Mapping, **overrides) -> DecoderLMConfig:
    """The :class:`DecoderLMConfig` of a capstone configuration (tied embeddings, no biases), to load a
    learner's parameters into a :class:`~course_lib.decoder_lm.DecoderLM`."""
    return DecoderLMConfig(**{k: cfg[k] for k in CONFIG_KEYS}, tie_embeddings=True, **overrides)


#: the reference recipe's model and schedule, sized so that it trains in a few CPU seconds per 100 updates
RECIPE_CONFIG = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=172, rope_base=10000.0, norm_eps=1e-5)
RECIPE_HP = dict(batch_size=8, block_size=32, max_lr=3e-3, min_lr=1e-3, warmup_steps=20, weight_decay=0.1,
                 max_norm=1.0)


def train_gpt(train_ids: Tensor, vocab_size: int, steps: int, seed: int) -> tuple[dict, dict[str, Tensor]]:
    """The reference recipe: ``(cfg, params)`` of a GPT trained for ``steps`` updates on ``train_ids`` ``(n,)``."""
    g = torch.Generator().manual_seed(seed)
    cfg = dict(vocab_size=vocab_size, **RECIPE_CONFIG)
    params = init_params(cfg, g)
    train_loop(params, train_ids, cfg, dict(RECIPE_HP, steps=steps), g)
    return cfg, {k: v.detach() for k, v in params.items()}


@torch.no_grad()
def generate(params: Mapping[str, Tensor], cfg: Mapping, prompt: Tensor, n_new: int, temperature: float,
             generator: torch.Generator, block_size: int) -> Tensor:
    """Extend ``prompt`` ``(n,)`` by ``n_new`` tokens, each drawn from ``softmax(logits / temperature)`` of the
    last ``block_size`` tokens."""
    ids = prompt.long()
    for _ in range(n_new):
        logits = gpt_logits(params, ids[None, -block_size:], cfg)[0, -1]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)
        ids = torch.cat([ids, nxt])
    return ids
