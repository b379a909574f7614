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
"""

from __future__ import annotations

__all__ = ["mha_param_count", "mha_flops", "sdpa_flops", "score_matrix_bytes", "kv_cache_bytes",
           "attention_matrix_entries", "mlp_param_count", "mlp_flops", "layer_flops"]


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
