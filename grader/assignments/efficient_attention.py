"""Random cases and likely mistakes for the efficient-attention exercises (chapter 08).

Exercises: ``kv_cache_bytes`` (an int), ``repeat_kv`` (grouped-query
attention's shared heads), ``decode_step_with_cache`` (one decoding step,
returning ``(out, k_cache, v_cache)``) and ``online_softmax_attention`` (tiled
attention with a running maximum and sum). :func:`check_never_materialises`
fails a tiled attention that builds the ``(n_q, n_k)`` score matrix anyway.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib import counting as _counting
from course_lib import efficient as _reference
from course_lib import multi_head as _multi_head
from grader.cases import Case, LargeInputs, dtype_name, randint, randn
from grader.checker import call_learner
from grader.diagnosis import Mistake
from grader.failures import ExerciseFailure
from grader.guards import FUSED_ATTENTION, SOFTMAX, ShapeWatch
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

_DTYPES = [torch.float32, torch.float64]


# --------------------------------------------------------------------------
# kv_cache_bytes
# --------------------------------------------------------------------------
def kv_bytes_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """Integer configs, from tiny to a 70B-class model, with dtype sizes 1, 2 and 4."""
    g = torch.Generator().manual_seed(seed)
    label = "batch={}, seq_len={}, n_layers={}, n_kv_heads={}, head_dim={}, dtype_bytes={}"
    fixed = [(3, 100, 5, 2, 64, 4), (1, 4096, 32, 32, 128, 2), (8, 8192, 80, 8, 128, 2), (1, 1, 1, 1, 1, 4),
             (3, 100, 2, 1, 64, 1)]
    cases = [Case(c, label=label.format(*c)) for c in fixed]
    for _ in range(n):
        c = tuple(randint(g, lo, hi) for lo, hi in [(1, 9), (1, 5000), (1, 49), (1, 17), (16, 257), (1, 5)])
        cases.append(Case(c, label=label.format(*c)))
    return cases


def _kvb(b, s, layers, h, d, nbytes):
    return 2 * b * s * layers * h * d * nbytes


KV_BYTES_MISTAKES = [
    Mistake("the factor 2 is missing: the cache stores keys *and* values.",
            lambda b, s, L, h, d, x: _kvb(b, s, L, h, d, x) // 2),
    Mistake("the result is in bits: multiply by dtype_bytes, not 8 * dtype_bytes.",
            lambda b, s, L, h, d, x: _kvb(b, s, L, h, d, x) * 8),
    Mistake("the number of layers is missing: every layer has its own cache.",
            lambda b, s, L, h, d, x: _kvb(b, s, 1, h, d, x)),
    Mistake("the batch size is missing: every sequence in the batch has its own cache.",
            lambda b, s, L, h, d, x: _kvb(1, s, L, h, d, x)),
    Mistake("the dtype size is missing: multiply the number of stored values by dtype_bytes.",
            lambda b, s, L, h, d, x: _kvb(b, s, L, h, d, 1)),
    Mistake("return an int (a count of bytes), not a float: avoid `/` and math.pow.",
            lambda b, s, L, h, d, x: float(_kvb(b, s, L, h, d, x))),
]


# --------------------------------------------------------------------------
# repeat_kv
# --------------------------------------------------------------------------
def repeat_kv_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(x, n_rep)`` with ``x`` ``(batch, n_kv_heads, seq, head_dim)``, ``n_rep`` from 1 to 5."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, h, s, d = (randint(g, lo, hi) for lo, hi in [(1, 4), (1, 5), (1, 7), (1, 9)])
        if i % 4 == 1:
            h = 2  # several KV heads, so the order of the copies matters
        n_rep = [2, 3, 1, 4, 5][i % 5]
        dtype = _DTYPES[i % 2]
        x = randn(g, (b, h, s, d), dtype)
        cases.append(Case((x, n_rep), label=f"x {tuple(x.shape)}, n_rep={n_rep}, {dtype_name(dtype)}"))
    return cases


REPEAT_KV_MISTAKES = [
    Mistake(
        "the KV heads are tiled (0, 1, 0, 1, ...) instead of repeated (0, 0, 1, 1, ...): query heads "
        "[g * n_rep, (g + 1) * n_rep) share KV head g, so each head's copies must be next to each other.",
        lambda x, r: x.repeat(1, r, 1, 1),
    ),
    Mistake("the copies are made along the sequence axis (dim 2); repeat along the heads axis (dim 1).",
            lambda x, r: x.repeat_interleave(r, dim=2)),
    Mistake("the copies are made along the batch axis (dim 0); repeat along the heads axis (dim 1).",
            lambda x, r: x.repeat_interleave(r, dim=0)),
    Mistake("the copies are made along the last axis (head_dim); repeat along the heads axis (dim 1).",
            lambda x, r: x.repeat_interleave(r, dim=-1)),
]


# --------------------------------------------------------------------------
# decode_step_with_cache
# --------------------------------------------------------------------------
def decode_cases(seed: int = 0, n: int = 18) -> list[Case]:
    """``(q_new, k_new, v_new, k_cache, v_cache)``: empty and full caches, one or several new tokens."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, h = randint(g, 1, 3), randint(g, 1, 4)
        n_past = [0, 3, 1, 6, 9, 2][i % 6]
        n_new = [1, 1, 3, 2, 1, 4][(i // 2) % 6]
        d, d_v = [4, 8, 16][i % 3], [4, 3, 8][(i // 3) % 3]
        dtype = _DTYPES[i % 2]
        args = tuple(randn(g, shape, dtype) for shape in [(b, h, n_new, d), (b, h, n_new, d), (b, h, n_new, d_v),
                                                           (b, h, n_past, d), (b, h, n_past, d_v)])
        cases.append(Case(args, label=f"batch={b}, heads={h}, n_past={n_past}, n_new={n_new}, head_dim={d}, "
                                      f"d_v={d_v}, {dtype_name(dtype)}"))
    return cases


def _sdpa(q, k, v, mask=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, -1), nan=0.0) @ v


def _decode(q, kn, vn, kc, vc, *, order="past_first", offset=True, causal=True, scale=None, use_cache=True):
    k = torch.cat([kc, kn] if order == "past_first" else [kn, kc], dim=-2)
    v = torch.cat([vc, vn] if order == "past_first" else [vn, vc], dim=-2)
    n_new, n_all = q.shape[-2], k.shape[-2]
    if use_cache:
        mask = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new if offset else 0) if causal else None
        out = _sdpa(q, k, v, mask, scale)
    else:
        out = _sdpa(q, kn, vn, torch.ones(n_new, n_new, dtype=torch.bool).tril(), scale)
    return out, k, v


DECODE_MISTAKES = [
    Mistake("the new tokens attend only to each other: the cached keys and values must be used too.",
            lambda *a: _decode(*a, use_cache=False)),
    Mistake("the new tokens are not masked causally among themselves: new token i may see only positions <= n_past + "
            "i.",
            lambda *a: _decode(*a, causal=False)),
    Mistake("the causal mask is aligned to the top-left: new token i sits at position n_past + i, so shift the "
            "triangle by n_past (tril(diagonal=n_past)).", lambda *a: _decode(*a, offset=False)),
    Mistake("the new keys/values are put in front of the cache: append them after the cached positions.",
            lambda *a: _decode(*a, order="new_first")),
    Mistake("the scores are not scaled by 1/sqrt(head_dim).", lambda *a: _decode(*a, scale=1.0)),
    Mistake("the old caches are returned: return the caches with the new positions appended.",
            lambda q, kn, vn, kc, vc: (_decode(q, kn, vn, kc, vc)[0], kc, vc)),
]


# --------------------------------------------------------------------------
# online_softmax_attention
# --------------------------------------------------------------------------
_BATCH_SHAPES = [(), (2,), (2, 3), (1,)]


def online_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(q, k, v, block_size)``: batch shapes, ``n_k`` a multiple of the block or not, blocks of 1 key
    and blocks larger than ``n_k``, float32/float64, and score spreads that overflow ``exp`` without
    the running maximum."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        n_q, n_k = randint(g, 1, 10), randint(g, 2, 21)
        block = [3, 1, 4, n_k, n_k + 5, 2, 7, 5][i % 8]
        d_k, d_v = [4, 8, 16, 2][i % 4], [3, 5, 8][i % 3]
        dtype = _DTYPES[(i // 4) % 2]
        spread = [1.0, 1.0, 12.0, 3.0, 1.0, 1.0, 40.0, 3.0][i % 8]
        q = randn(g, batch + (n_q, d_k), dtype, spread)
        k = randn(g, batch + (n_k, d_k), dtype, spread)
        v = randn(g, batch + (n_k, d_v), dtype)
        cases.append(Case((q, k, v, block), label=f"batch {batch}, n_q={n_q}, n_k={n_k}, d_k={d_k}, d_v={d_v}, "
                                                  f"block_size={block}, score spread {spread:g}, {dtype_name(dtype)}"))
    # Half precision: the running statistics must stay in the inputs' dtype (a float32 buffer
    # promotes the result to float32), with the tolerance derived from the reference's own error.
    h = torch.Generator().manual_seed(seed + 1)
    for j, dtype in enumerate([torch.bfloat16, torch.float16, torch.bfloat16]):
        batch = _BATCH_SHAPES[j + 1]
        n_q, n_k = randint(h, 1, 8), randint(h, 4, 17)
        block, d_k, d_v = [3, 5, 2][j], [8, 4, 16][j], [5, 3, 8][j]
        q, k, v = (randn(h, batch + shape, dtype) for shape in [(n_q, d_k), (n_k, d_k), (n_k, d_v)])
        cases.append(Case((q, k, v, block), label=f"batch {batch}, n_q={n_q}, n_k={n_k}, d_k={d_k}, d_v={d_v}, "
                                                  f"block_size={block}, {dtype_name(dtype)}"))
    # Third in the list: a float64 case whose scores overflow exp even in float64 without the running
    # maximum, and whose block maxima differ by more than float64's exp range in some rows. The two
    # stability mistakes (no maximum subtracted; the block's own maximum) give the right values wherever
    # exp does not overflow, and mistakes are matched in float64: without this case the first failure
    # would be a float32 case that overflows in the learner's dtype only, and neither would be named.
    f = torch.Generator().manual_seed(seed + 2)
    q, k, v = randn(f, (2, 6, 4), scale=20.0), randn(f, (2, 13, 4), scale=20.0), randn(f, (2, 13, 3))
    cases.insert(min(2, len(cases)), Case((q, k, v, 3), label="batch (2,), n_q=6, n_k=13, d_k=4, d_v=3, block_size=3, "
                                                              "score spread 20, float64"))
    return cases


def _tiled(q, k, v, block, *, rescale_o=True, rescale_l=True, running_max=True, scale=None, last=True, subtract=True):
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(torch.broadcast_shapes(q.shape[:-1], v.shape[:-2] + (1,)) + (v.shape[-1],), dtype=q.dtype)
    stop_at = n_k if last else (n_k // block) * block
    for start in range(0, stop_at, block):
        s = (q @ k[..., start:start + block, :].transpose(-2, -1)) * scale
        m_b = s.amax(-1, keepdim=True)
        m_new = torch.maximum(m, m_b) if running_max else m_b
        if not subtract:
            m_new = torch.zeros_like(m_new)
        p = torch.exp(s - m_new)
        c = torch.exp(m - m_new) if subtract else torch.ones_like(m_new)
        l = (l * c if rescale_l else l) + p.sum(-1, keepdim=True)
        o = (o * c if rescale_o else o) + p @ v[..., start:start + block, :]
        m = m_new
    return o / l


ONLINE_MISTAKES = [
    Mistake("the running output is not rescaled: when the maximum grows from m to m', multiply the output "
            "accumulated so far by exp(m - m') as well as the running sum.",
            lambda q, k, v, b: _tiled(q, k, v, b, rescale_o=False)),
    Mistake("the running sum is not rescaled: when the maximum grows from m to m', multiply the sum "
            "accumulated so far by exp(m - m').", lambda q, k, v, b: _tiled(q, k, v, b, rescale_l=False)),
    Mistake("the scores are exponentiated without subtracting the running maximum, so exp overflows for large "
            "scores: subtract m' (the running maximum) before exp, and rescale the old sums by exp(m - m').",
            lambda q, k, v, b: _tiled(q, k, v, b, subtract=False), native=True),
    Mistake("the maximum is the block's own, not the running one: use m' = max(m, max of the block).",
            lambda q, k, v, b: _tiled(q, k, v, b, running_max=False)),
    Mistake("the scores are not scaled by 1/sqrt(d_k).", lambda q, k, v, b: _tiled(q, k, v, b, scale=1.0)),
    Mistake("the last, shorter block is skipped: when n_k is not a multiple of block_size the final block has fewer "
            "keys.",
            lambda q, k, v, b: _tiled(q, k, v, b, last=False)),
]


def check_never_materialises(learner, name: str, seed: int | None = None) -> None:
    """Fail if ``learner(q, k, v, block_size)`` creates any tensor ending in ``(n_q, n_k)``
    (the full score matrix) when ``block_size < n_k``."""
    g = torch.Generator().manual_seed(84 if seed is None else seed)
    for n_q, n_k, d_k, d_v, block in [(5, 24, 4, 3, 6), (7, 30, 8, 6, 4), (16, 16, 3, 5, 5)]:
        q, k, v = (randn(g, s) for s in [(2, n_q, d_k), (2, n_k, d_k), (2, n_k, d_v)])
        watch = ShapeWatch((n_q, n_k))
        call_learner(learner, Case((q, k, v, block), label=f"n_q={n_q}, n_k={n_k}, block_size={block}"), name,
                     watch=watch)
        if watch.hit:
            raise ExerciseFailure(
                f"{name} builds a tensor of shape (..., n_q, n_k) = (..., {n_q}, {n_k}) with block_size={block}: "
                "that is the full score matrix the exercise avoids. Compute the scores one block of keys at a "
                "time, (n_q, block_size), and keep only running statistics of shape (n_q, 1) and (n_q, d_v).")


def attention_through_running_logsumexp(q: Tensor, k: Tensor, v: Tensor, block_size: int) -> Tensor:
    """Attention over blocks of keys keeping one running log-sum-exp instead of a maximum and a sum: correct,
    but it rounds a quantity the size of the scores before each exp, which the tolerance must allow."""
    scale = q.shape[-1] ** -0.5
    lse = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    out = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        new = torch.logaddexp(lse, torch.logsumexp(s, dim=-1, keepdim=True))
        out = out * torch.exp(lse - new) + torch.exp(s - new) @ v[..., start:start + block_size, :]
        lse = new
    return out


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 08-efficient-attention run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("08-efficient-attention", "efficient_attention.ipynb", (
    prediction("predicted_cache_gib", 1, 0.75,
               form='one number, the cache in GiB to two decimals, like 1.25', tolerance=0.005, wrong={
        'only the keys (or only the values) were counted; the cache holds both': 0.375,
        '4 bytes per entry were counted; bf16 takes 2': 1.5,
        'the 32 query heads were counted; the cache holds the 8 key-value heads (grouped-query attention)': 3.0,
        'that is GB (10^9 bytes); a GiB is 2^30 bytes': 0.805306368,
    }),
    Exercise("kv_cache_bytes", 2, (
        Comparison(_counting.kv_cache_bytes, kv_bytes_cases, seed=81, mistakes=KV_BYTES_MISTAKES),
    )),
    Exercise("repeat_kv", 2, (
        Comparison(_multi_head.repeat_kv, repeat_kv_cases, seed=82, mistakes=REPEAT_KV_MISTAKES, check_grad=True),
    )),
    Exercise("decode_step_with_cache", 3, (
        Comparison(_reference.decode_step_with_cache, decode_cases, seed=83, mistakes=DECODE_MISTAKES,
                   forbidden=FUSED_ATTENTION, hard=(LargeInputs(1000.0, (0,)),)),
    )),
    Exercise("online_softmax_attention", 5, (
        Comparison(_reference.tiled_attention, online_cases, seed=84, mistakes=ONLINE_MISTAKES,
                   forbidden=FUSED_ATTENTION + SOFTMAX, formulations=(attention_through_running_logsumexp,)),
        check_never_materialises,
    )),
))
