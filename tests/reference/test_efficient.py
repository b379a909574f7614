"""course_lib.efficient: tiled (online-softmax) attention, the KV cache and its cost."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import attention as A
from course_lib import counting as C
from course_lib import efficient as E


def rand(*shape, dtype=torch.float64, seed=0, spread=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * spread


# ---------------------------------------------------------------- parity
@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 12), n_k=st.integers(1, 12), block=st.integers(1, 14), seed=st.integers(0, 10_000))
def test_tiled_attention_equals_sdpa_for_any_block_size(n_q, n_k, block, seed):
    q, k, v = rand(2, n_q, 8, seed=seed), rand(2, n_k, 8, seed=seed + 1), rand(2, n_k, 5, seed=seed + 2)
    torch.testing.assert_close(E.tiled_attention(q, k, v, block), A.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("mask_kind", ["causal", "padding", "random"])
def test_tiled_attention_equals_sdpa_with_masks_and_fully_masked_rows(mask_kind):
    q, k, v = rand(2, 3, 6, 8, seed=1), rand(2, 3, 9, 8, seed=2), rand(2, 3, 9, 4, seed=3)
    mask = {
        "causal": A.causal_mask(6, 9),
        "padding": A.padding_mask(torch.tensor([9, 0]), 9)[:, None],  # second sequence has no keys at all
        "random": torch.rand(2, 3, 6, 9, generator=torch.Generator().manual_seed(4)) < 0.4,
    }[mask_kind]
    if mask_kind == "random":
        mask[:, :, 0] = False
    expected = A.scaled_dot_product_attention(q, k, v, mask)
    out = E.tiled_attention(q, k, v, 4, mask)
    torch.testing.assert_close(out, expected)
    assert torch.isfinite(out).all()


def test_tiled_attention_is_causal_flag_matches_the_causal_mask():
    q, k, v = rand(5, 4, seed=1), rand(7, 4, seed=2), rand(7, 3, seed=3)
    torch.testing.assert_close(E.tiled_attention(q, k, v, 3, is_causal=True),
                               A.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_tiled_attention_is_stable_for_huge_scores_in_float32():
    q = rand(4, 8, dtype=torch.float32, seed=1, spread=40.0)
    k = rand(10, 8, dtype=torch.float32, seed=2, spread=40.0)
    v = rand(10, 3, dtype=torch.float32, seed=3)
    out = E.tiled_attention(q, k, v, 3)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), A.scaled_dot_product_attention(q.double(), k.double(), v.double()),
                               atol=1e-4, rtol=1e-4)


def test_tiled_attention_gradients_match_sdpa():
    q, k, v = (rand(3, 5, 4, seed=s).requires_grad_() for s in range(3))
    g_tiled = torch.autograd.grad(E.tiled_attention(q, k, v, 2).square().sum(), (q, k, v))
    g_ref = torch.autograd.grad(A.scaled_dot_product_attention(q, k, v).square().sum(), (q, k, v))
    for a, b in zip(g_tiled, g_ref):
        torch.testing.assert_close(a, b)


def test_tiled_attention_never_builds_the_full_score_matrix():
    from torch.overrides import TorchFunctionMode
    seen = []

    class Shapes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                seen.append(tuple(out.shape))
            return out

    q, k, v = rand(6, 4), rand(20, 4, seed=1), rand(20, 3, seed=2)
    with Shapes():
        E.tiled_attention(q, k, v, 5)
    assert (6, 20) not in seen and (6, 5) in seen


def test_tiled_attention_rejects_a_bad_block_size():
    with pytest.raises(ValueError):
        E.tiled_attention(rand(2, 2), rand(2, 2), rand(2, 2), 0)


# ---------------------------------------------------------------- decoding
def test_decoding_token_by_token_with_the_cache_equals_causal_attention():
    q, k, v = rand(2, 3, 7, 4, seed=1), rand(2, 3, 7, 4, seed=2), rand(2, 3, 7, 5, seed=3)
    full = A.scaled_dot_product_attention(q, k, v, is_causal=True)
    k_cache, v_cache = k[..., :0, :], v[..., :0, :]
    outs = []
    for t in range(7):
        out, k_cache, v_cache = E.decode_step_with_cache(q[..., t:t + 1, :], k[..., t:t + 1, :], v[..., t:t + 1, :],
                                                         k_cache, v_cache)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, dim=-2), full)
    torch.testing.assert_close(k_cache, k)
    torch.testing.assert_close(v_cache, v)


def test_a_prompt_of_several_tokens_after_a_cache_is_causal_among_itself():
    q, k, v = rand(1, 2, 6, 4, seed=1), rand(1, 2, 6, 4, seed=2), rand(1, 2, 6, 4, seed=3)
    full = A.scaled_dot_product_attention(q, k, v, is_causal=True)
    out, kc, vc = E.decode_step_with_cache(q[..., 2:, :], k[..., 2:, :], v[..., 2:, :], k[..., :2, :], v[..., :2, :])
    torch.testing.assert_close(out, full[..., 2:, :])
    assert kc.shape == (1, 2, 6, 4) and vc.shape == (1, 2, 6, 4)


# ---------------------------------------------------------------- cost
def test_kv_cache_bytes_of_a_7b_class_model():
    # 32 layers, 32 KV heads of width 128, 4096 positions, fp16: 2 GiB per sequence
    assert C.kv_cache_bytes(1, 4096, 32, 32, 128, 2) == 2 * 1024 ** 3
    assert C.kv_cache_bytes(1, 4096, 32, 8, 128, 2) == 2 * 1024 ** 3 // 4  # GQA with 8 KV heads
    assert isinstance(C.kv_cache_bytes(2, 10, 1, 1, 4, 4), int)


def test_kv_cache_bytes_matches_the_buffers_of_the_decoder_lm():
    from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
    cfg = DecoderLMConfig.preset("tiny")
    caches = DecoderLM(cfg).make_caches(batch=3, max_len=50)
    stored = sum(c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in caches)
    assert stored == C.kv_cache_bytes(3, 50, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 4)


def test_attention_flops_and_score_bytes_grow_quadratically():
    assert C.sdpa_flops(2 * 64, 2 * 64, 32) == 4 * C.sdpa_flops(64, 64, 32)
    assert C.sdpa_flops(10, 10, 8) == 4 * 10 * 10 * 8
    assert C.score_matrix_bytes(2, 4, 100, 100, 2) == 2 * 4 * 100 * 100 * 2


def test_sliding_window_mask_is_banded():
    m = E.sliding_window_mask(6, 2)
    assert m.sum(-1).tolist() == [2, 3, 3, 3, 3, 2]
    c = E.sliding_window_mask(6, 3, causal=True)
    assert torch.equal(c, A.causal_mask(6) & m.new_ones(6, 6).triu(-2))
    assert torch.equal(E.sliding_window_mask(5, 5, causal=True), A.causal_mask(5))
