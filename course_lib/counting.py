"""Counting: parameters, floating-point operations and bytes of the course's layers (chapters 03, 05, 08, 11).

Every formula the book derives about cost lives here, each beside the layer it
counts; the chapters check them against the layers themselves (a parameter
count against ``sum(p.numel())``, a FLOP count against the products a layer
runs). Conventions:

* a multiply-add is 2 FLOPs; biases, scales, softmax, norms and activations
  (each ``O(n d)`` or ``O(n^2)``) are left out of FLOP counts;
* ``dim`` is the model width, ``n_heads`` the query heads, ``mlp_hidden`` the
  MLP's hidden width (the notation page's names);
* bytes are ``entries * dtype_bytes``.

Attention: :func:`mha_param_count`, :func:`mha_flops` (a whole layer:
projections and the two products), :func:`sdpa_flops` (the two products of one
head), :func:`score_matrix_bytes`, :func:`kv_cache_bytes`,
:func:`attention_matrix_entries` (global against windowed, chapter 11).
MLP and block: :func:`mlp_param_count`, :func:`mlp_flops`, :func:`layer_flops`.
Swin (chapter 11), in the paper's unit, multiply-adds: :func:`swin_attention_macs` (its
``Omega(MSA)`` and ``Omega(W-MSA)``), :func:`swin_block_macs`, :func:`patch_merging_macs`.
Measured counts: :func:`count_flops` runs a model under PyTorch's FLOP counter.
"""

from __future__ import annotations

__all__ = ["mha_param_count", "mha_flops", "sdpa_flops", "score_matrix_bytes", "kv_cache_bytes",
           "attention_matrix_entries", "mlp_param_count", "mlp_flops", "layer_flops",
           "swin_attention_macs", "swin_block_macs", "patch_merging_macs", "count_flops",
           "vit_flops", "mae_flops"]


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------
def mha_param_count(dim: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True) -> int:
    """Number of parameters of :class:`~course_lib.multi_head.MultiHeadAttention` with ``head_dim = dim / n_heads``.

    Queries and output: ``dim^2`` weights each; keys and values:
    ``dim * n_kv_heads * head_dim`` each; plus one bias per output feature.
    With ``n_kv_heads == n_heads`` (MHA) this is ``4 dim^2 + 4 dim``,
    whatever the number of heads.
    """
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if dim % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"need n_heads | dim and n_kv_heads | n_heads, got dim={dim}, "
                         f"n_heads={n_heads}, n_kv_heads={n_kv_heads}")
    kv_width = n_kv_heads * (dim // n_heads)
    weights = 2 * dim * dim + 2 * dim * kv_width
    biases = 2 * dim + 2 * kv_width if bias else 0
    return weights + biases


def mha_flops(n_tokens: int, dim: int) -> dict[str, int]:
    """FLOPs of one multi-head self-attention over a sequence of ``n_tokens`` tokens.

    A multiply-add counts as 2 FLOPs; biases, the ``1/sqrt(d_k)`` scale, the
    softmax and masks are left out (each is ``O(N D)`` or ``O(N^2)``), and the
    full ``N x N`` score matrix is counted even under a causal mask. With
    ``N = n_tokens``, ``D = dim`` (the heads together have width ``D``)::

        "projections": Q, K, V and the output projection, 4 maps D -> D:  4 * 2 N D^2 = 8 N D^2
        "attention":   Q K^T (N x N x D) and weights @ V (N x N x D):     2 * 2 N^2 D = 4 N^2 D

    The number of heads does not matter: ``h`` heads of width ``D / h`` do the
    same arithmetic as one of width ``D``.
    """
    return {"projections": 8 * n_tokens * dim * dim, "attention": 4 * n_tokens * n_tokens * dim}


def sdpa_flops(n_q: int, n_k: int, d_k: int, d_v: int | None = None) -> int:
    """Floating-point operations of ``softmax(Q K^T / sqrt(d_k)) V`` for one head.

    Two matrix products, ``Q K^T`` (``n_q * n_k * d_k`` multiply-adds) and
    ``A V`` (``n_q * n_k * d_v``), at 2 FLOPs per multiply-add; the softmax's
    ``O(n_q n_k)`` is left out. With ``n_q = n_k = n`` this is ``O(n^2 d)``.
    """
    d_v = d_k if d_v is None else d_v
    return 2 * n_q * n_k * d_k + 2 * n_q * n_k * d_v


def score_matrix_bytes(batch: int, n_heads: int, n_q: int, n_k: int, dtype_bytes: int = 4) -> int:
    """Bytes of the ``(batch, heads, n_q, n_k)`` score (or weight) tensor that naive attention stores."""
    return batch * n_heads * n_q * n_k * dtype_bytes


def kv_cache_bytes(batch: int, seq_len: int, n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of a KV cache: ``2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes``.

    The 2 counts keys and values; each layer stores, for every cached position
    of every sequence in the batch, one ``head_dim`` vector per *key/value*
    head (``n_heads`` for MHA, ``n_heads / groups`` for GQA, 1 for MQA).
    """
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes


# --------------------------------------------------------------------------
# Decoding with a cache
# --------------------------------------------------------------------------


def attention_matrix_entries(h: int, w: int, ws: int | None = None) -> int:
    """Entries of the attention matrices of one head over an ``h x w`` token map.

    Global attention (``ws=None``): ``(h w)^2``. Windows of side ``ws`` (``h``
    and ``w`` multiples of ``ws``): ``h w / ws^2`` windows of ``ws^4`` entries,
    ``h w ws^2`` in all: linear in the number of tokens.
    """
    n = h * w
    return n * n if ws is None else n * ws * ws


# --------------------------------------------------------------------------
# MLP and the whole block
# --------------------------------------------------------------------------
def mlp_param_count(dim: int, mlp_hidden: int, bias: bool = True) -> int:
    """Parameters of :class:`~course_lib.mlp.MLP` ``(dim -> mlp_hidden -> dim)``.

    Two weight matrices of ``dim * mlp_hidden`` entries each, plus, with
    ``bias``, one bias per hidden unit and one per output::

        2 * dim * mlp_hidden  (+ mlp_hidden + dim)

    With ``mlp_hidden = 4 dim`` that is about ``8 dim^2``, twice the
    ``4 dim^2`` of attention's four projections.
    """
    return 2 * dim * mlp_hidden + ((mlp_hidden + dim) if bias else 0)


def mlp_flops(n_tokens: int, dim: int, mlp_hidden: int) -> int:
    """Floating-point operations of one forward pass of the MLP over ``n_tokens`` tokens.

    A multiply-add counts as 2 FLOPs. Each token goes through two matrix
    products of ``dim * mlp_hidden`` multiply-adds each, so::

        mlp_flops = 2 * (2 * n_tokens * dim * mlp_hidden) = 4 * n_tokens * dim * mlp_hidden

    Biases and the activation (``O(n_tokens * mlp_hidden)``) are left out: they are
    a fraction ``~1/dim`` of the total.
    """
    return 4 * n_tokens * dim * mlp_hidden


def layer_flops(n_tokens: int, dim: int, mlp_hidden: int | None = None) -> dict[str, int]:
    """FLOPs of one encoder layer (self-attention + MLP), by part.

    ``{"projections": 8 N D^2, "attention": 4 N^2 D, "ffn": 4 N D mlp_hidden}`` with the
    conventions of :func:`mha_flops` and :func:`mlp_flops`
    (``mlp_hidden = 4 D`` if None). The projections and the MLP grow like ``N D^2``,
    the score and value products like ``N^2 D``: with ``mlp_hidden = 4 D`` the MLP is
    the largest part while ``N < 4 D``, and more than half the layer while ``N < 2 D``.
    """
    mlp_hidden = 4 * dim if mlp_hidden is None else mlp_hidden
    return {**mha_flops(n_tokens, dim), "ffn": mlp_flops(n_tokens, dim, mlp_hidden)}


# --------------------------------------------------------------------------
# Swin (chapter 11): the paper's cost formulas, in multiply-adds
# --------------------------------------------------------------------------
def _check_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}: a size must be a positive int")


def swin_attention_macs(h: int, w: int, dim: int, window_size: int | None = None) -> dict[str, int]:
    """Multiply-adds of one multi-head self-attention over an ``h x w`` map of ``dim`` channels.

    The Swin paper's eq. (1) and (2) (Liu et al., 2021, sec. 3.2), with ``C = dim``
    and ``M = window_size``::

        Omega(MSA)   = 4 h w C^2 + 2 (h w)^2 C     (window_size=None: global attention)
        Omega(W-MSA) = 4 h w C^2 + 2 M^2 h w C

    returned by part: ``"projections"`` (Q, K, V and the output projection,
    ``4 h w C^2``) and ``"attention"`` (``Q K^T`` and weights times ``V``). As in
    the paper, softmax, biases, the position bias and the mask are left out; a
    multiply-add is one unit here (2 FLOPs in :func:`mha_flops`, which gives
    twice these numbers for the global case). The number of heads does not
    matter. A shifted window (SW-MSA) costs the same as W-MSA: rolling keeps
    the number of windows. ``h`` and ``w`` must be multiples of ``M`` (the
    paper's assumption; a model pads to one first, see
    :class:`~course_lib.swin.WindowAttention`).
    """
    _check_positive(h=h, w=w, dim=dim)
    n = h * w
    if window_size is None:
        return {"projections": 4 * n * dim * dim, "attention": 2 * n * n * dim}
    _check_positive(window_size=window_size)
    if h % window_size or w % window_size:
        raise ValueError(f"an {h}x{w} map does not divide into windows of {window_size}x{window_size}: "
                         f"h and w must be multiples of window_size (pad the map first)")
    return {"projections": 4 * n * dim * dim, "attention": 2 * window_size * window_size * n * dim}


def swin_block_macs(h: int, w: int, dim: int, window_size: int, mlp_hidden: int) -> dict[str, int]:
    """Multiply-adds of one Swin block (:func:`~course_lib.swin.swin_block`) on an ``h x w`` map.

    :func:`swin_attention_macs` with windows, plus the MLP's two matrices,
    ``"mlp": 2 h w C mlp_hidden``. Norms, activations and residual adds are left
    out. ``window_size`` is the window the block runs: on a map no larger than
    the window it is the map itself (:func:`~course_lib.swin.fit_window`).
    """
    _check_positive(mlp_hidden=mlp_hidden)
    return {**swin_attention_macs(h, w, dim, window_size), "mlp": 2 * h * w * dim * mlp_hidden}


def patch_merging_macs(h: int, w: int, dim: int) -> int:
    """Multiply-adds of :class:`~course_lib.swin.PatchMerging` on an ``h x w`` map of ``dim`` channels.

    Each of the ``ceil(h/2) ceil(w/2)`` merged tokens maps ``4C`` channels to
    ``2C``: ``ceil(h/2) ceil(w/2) * 8 C^2``, that is ``2 h w C^2`` for even sides.
    """
    _check_positive(h=h, w=w, dim=dim)
    return -(-h // 2) * -(-w // 2) * 8 * dim * dim


def count_flops(model, *inputs, **kwargs) -> int:
    """FLOPs of ``model(*inputs, **kwargs)`` as PyTorch's ``FlopCounterMode`` counts them (2 per multiply-add).

    The counter sees matrix products and convolutions, not element-wise work.
    On a CPU it does not see inside the fused attention kernel (the
    ``attn_impl="sdpa"`` path), so every submodule with an ``attn_impl`` is
    switched to ``"eager"`` for the count and switched back afterwards; the
    result is then the same on every device. Runs without gradients; inputs on
    the ``meta`` device give the count without computing anything, for models
    whose forward does not read values. ``model`` must be an ``nn.Module``.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"count_flops needs an nn.Module (its attention is switched to the eager path), "
                        f"got {type(model).__name__}")
    switched = [m for m in model.modules() if getattr(m, "attn_impl", None) == "sdpa"]
    for m in switched:
        m.attn_impl = "eager"
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*inputs, **kwargs)
    finally:
        for m in switched:
            m.attn_impl = "sdpa"
    return counter.get_total_flops()


def vit_flops(cfg, image_size: int | tuple[int, int] | None = None) -> dict[str, int]:
    """Floating-point operations of one forward pass of one image, by part (this module's conventions).

    A multiply-add is 2 FLOPs; norms, softmax, GELU, biases and position additions are left out. With
    ``N = HW / P^2`` patches, ``T = n_prefix + N`` tokens (the CLS token, if any), width ``D`` and
    ``L`` blocks::

        "patch_embed": 2 N (C P^2) D              the projection E of every patch
        "projections": L * 8 T D^2                Q, K, V and the output projection
        "attention":   L * 4 T^2 D                Q K^T and A V
        "ffn":         L * 4 T D mlp_hidden       the two MLP matrices
        "head":        2 D K                      the classifier, on one pooled token

    Args:
        cfg: a :class:`course_lib.vit.ViTConfig` (a two-matrix MLP: every ``mlp`` but ``"swiglu"``).
        image_size: ``int`` or ``(H, W)``, multiples of the patch size; the native size if None.
    Returns:
        a dict of the parts above and ``"total"``, each an ``int``.
    """
    if cfg.mlp == "swiglu":
        raise ValueError("vit_flops counts a two-matrix MLP; mlp='swiglu' has three (count it with its own formula)")
    if image_size is None:
        h, w = cfg.image_hw
    else:
        h, w = (image_size, image_size) if isinstance(image_size, int) else (int(image_size[0]), int(image_size[1]))
    p = cfg.patch_size
    if h < p or w < p or h % p or w % p:
        raise ValueError(f"image size {h}x{w} must be a positive multiple of patch_size={p} on both sides")
    n = (h // p) * (w // p)
    t = int(cfg.class_token) + n
    parts = {"patch_embed": 2 * n * cfg.in_chans * p * p * cfg.dim}
    parts.update({k: cfg.n_layers * v for k, v in layer_flops(t, cfg.dim, cfg.mlp_hidden_dim()).items()})
    parts["head"] = 2 * cfg.dim * cfg.num_classes
    parts["total"] = sum(parts.values())
    return parts


def mae_flops(cfg, mask_ratio: float | None = None) -> dict[str, int]:
    """FLOPs of an MAE (:class:`course_lib.masked_image.MAEConfig`)'s blocks on one image, by
    :func:`layer_flops` (patch embedding and heads left out).

    ``"encoder_full"``: the encoder on all ``1 + N`` tokens (what a ViT pays);
    ``"encoder_masked"``: on ``1 + n_keep`` tokens; ``"decoder"``: the decoder on
    ``1 + N`` tokens at ``decoder_dim``.
    """
    n, keep = cfg.n_patches, cfg.n_keep(mask_ratio)

    def stack(tokens: int, dim: int, layers: int) -> int:
        return layers * sum(layer_flops(tokens, dim, int(dim * cfg.mlp_ratio)).values())

    return {"encoder_full": stack(1 + n, cfg.dim, cfg.n_layers),
            "encoder_masked": stack(1 + keep, cfg.dim, cfg.n_layers),
            "decoder": stack(1 + n, cfg.decoder_dim, cfg.decoder_layers)}
