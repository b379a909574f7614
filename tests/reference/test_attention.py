"""course_lib.attention: the math path, the fused path, masks and multi-head attention."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import attention as A
from course_lib import multi_head as MH


def rand(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "random"])
def test_math_and_fused_paths_agree(dtype, mask_kind):
    q, k = rand(2, 3, 5, 8, dtype=dtype, seed=1), rand(2, 3, 7, 8, dtype=dtype, seed=2)
    v = rand(2, 3, 7, 4, dtype=dtype, seed=3)
    mask = {
        "none": None,
        "causal": A.causal_mask(5, 7),
        "padding": A.padding_mask(torch.tensor([7, 3]), 7)[:, None],  # (batch, 1, 1, n_k)
        "random": torch.rand(2, 3, 5, 7, generator=torch.Generator().manual_seed(4)) < 0.5,
    }[mask_kind]
    math_out = A.scaled_dot_product_attention(q, k, v, mask, attn_impl="eager")
    fused_out = A.scaled_dot_product_attention(q, k, v, mask, attn_impl="sdpa")
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(math_out, fused_out, atol=tol, rtol=tol)


def test_math_path_matches_the_textbook_formula_in_float64():
    q, k, v = rand(4, 6), rand(9, 6, seed=1), rand(9, 3, seed=2)
    expected = torch.softmax(q @ k.T / math.sqrt(6), dim=-1) @ v
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v), expected, rtol=1e-12, atol=1e-12)


def test_is_causal_equals_an_explicit_causal_mask():
    q, k, v = rand(2, 6, 8), rand(2, 6, 8, seed=1), rand(2, 6, 8, seed=2)
    for attn_impl in ("eager", "sdpa"):
        torch.testing.assert_close(
            A.scaled_dot_product_attention(q, k, v, is_causal=True, attn_impl=attn_impl),
            A.scaled_dot_product_attention(q, k, v, A.causal_mask(6), attn_impl=attn_impl),
        )


# ---------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 7), n_k=st.integers(1, 7), d=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_weights_are_distributions_over_allowed_keys(n_q, n_k, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(n_q, d, generator=g, dtype=torch.float64), torch.randn(n_k, d, generator=g, dtype=torch.float64)
    mask = torch.rand(n_q, n_k, generator=g) < 0.5
    w = A.attention_weights(q, k, mask)
    assert (w >= 0).all()
    assert (w[~mask] == 0).all(), "a masked key must get exactly zero weight"
    rows = mask.any(-1)
    torch.testing.assert_close(w[rows].sum(-1), torch.ones(int(rows.sum()), dtype=torch.float64))
    assert (w[~rows] == 0).all()


def test_causal_attention_does_not_see_the_future():
    q, k, v = rand(1, 6, 4), rand(1, 6, 4, seed=1), rand(1, 6, 4, seed=2)
    out = A.scaled_dot_product_attention(q, k, v, is_causal=True)
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:], v2[:, 4:] = 100.0, -100.0  # change only the last two positions
    out2 = A.scaled_dot_product_attention(q, k2, v2, is_causal=True)
    torch.testing.assert_close(out[:, :4], out2[:, :4])
    assert not torch.allclose(out[:, 4:], out2[:, 4:])


def test_self_attention_is_permutation_equivariant():
    mha = MH.MultiHeadAttention(16, 4).double().eval()
    x = rand(2, 7, 16)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(mha(x)[:, perm], mha(x[:, perm]))


def test_scale_keeps_score_variance_near_one():
    d = 512
    q, k = rand(4000, d), rand(4000, d, seed=1)
    raw = (q * k).sum(-1)
    scaled = A.attention_scores(q[:, None], k[:, None]).flatten()
    assert 0.9 * d < raw.var() < 1.1 * d
    assert 0.9 < scaled.var() < 1.1


# ---------------------------------------------------------------- the fully masked row
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_fully_masked_query_gives_zero_output_and_finite_gradients(attn_impl):
    q, k, v = (t.requires_grad_() for t in (rand(1, 3, 4), rand(1, 5, 4, seed=1), rand(1, 5, 2, seed=2)))
    mask = torch.ones(1, 3, 5, dtype=torch.bool)
    mask[0, 1] = False  # query 1 may attend to nothing
    out = A.scaled_dot_product_attention(q, k, v, mask, attn_impl=attn_impl)
    assert torch.equal(out[0, 1], torch.zeros(2, dtype=out.dtype))
    assert torch.isfinite(out).all()
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[0, 1], torch.zeros(4, dtype=q.dtype)), "a query that sees nothing gets no gradient"


def test_masked_softmax_of_huge_scores_does_not_overflow():
    w = A.masked_softmax(torch.tensor([[1e4, 1e4, -1e4]]))
    torch.testing.assert_close(w, torch.tensor([[0.5, 0.5, 0.0]]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_statistics_are_taken_in_float32(dtype):
    s = rand(3, 50, seed=5) * 5
    w = A.masked_softmax(s.to(dtype))
    assert w.dtype == dtype
    torch.testing.assert_close(w.double(), torch.softmax(s, -1), atol=4 * torch.finfo(dtype).eps, rtol=0)


# ---------------------------------------------------------------- masks
def test_causal_mask_is_lower_triangular_with_diagonal():
    assert A.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_causal_mask_with_a_cache_aligns_queries_to_the_end():
    # 2 new queries attending to 5 keys: they are positions 3 and 4.
    assert A.causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_padding_mask_marks_real_tokens():
    m = A.padding_mask(torch.tensor([2, 4, 0]), 4)
    assert m.shape == (3, 1, 4)
    assert m[:, 0].tolist() == [[True, True, False, False], [True, True, True, True], [False] * 4]


@pytest.mark.parametrize("lengths", [[5], [-1], [[1, 2]]])
def test_padding_mask_rejects_bad_lengths(lengths):
    with pytest.raises(ValueError, match="length"):
        A.padding_mask(torch.tensor(lengths), 4)


def test_padded_keys_do_not_change_real_outputs():
    q, k, v = rand(1, 3, 8), rand(1, 3, 8, seed=1), rand(1, 3, 8, seed=2)
    pad = rand(1, 2, 8, seed=3)
    out = A.scaled_dot_product_attention(q, k, v)
    out_padded = A.scaled_dot_product_attention(
        q, torch.cat([k, pad], 1), torch.cat([v, pad], 1), A.padding_mask(torch.tensor([3]), 5)
    )
    torch.testing.assert_close(out, out_padded)


def test_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"d_k.*\(2, 4\).*\(3, 5\)"):
        A.attention_scores(torch.zeros(2, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError, match="n_k"):
        A.scaled_dot_product_attention(torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(4, 4))
    with pytest.raises(TypeError, match="boolean"):
        A.masked_softmax(torch.zeros(2, 2), torch.ones(2, 2))


# ---------------------------------------------------------------- heads
def test_split_then_merge_heads_is_the_identity_and_splits_features():
    x = rand(2, 5, 12)
    h = MH.split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    torch.testing.assert_close(h[:, 1], x[..., 4:8])  # head 1 owns features 4..7 of every token
    torch.testing.assert_close(MH.merge_heads(h), x)


def test_split_heads_rejects_indivisible_width():
    with pytest.raises(ValueError, match="12.*5"):
        MH.split_heads(rand(1, 2, 12), 5)


@pytest.mark.parametrize("fused", [False, True])
def test_multi_head_attention_matches_torch_multihead_attention(fused):
    torch.manual_seed(0)
    d, h = 32, 4
    ours = MH.MultiHeadAttention(d, h, attn_impl="sdpa" if fused else "eager").double().eval()
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True).double().eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    x, mem = rand(2, 5, d), rand(2, 7, d, seed=1)
    # torch's attn_mask is True where attention is *not* allowed: the opposite convention.
    keep = A.padding_mask(torch.tensor([7, 4]), 7)
    expected, expected_w = theirs(x, mem, mem, key_padding_mask=~keep[:, 0], average_attn_weights=False)
    got, w = ours(x, mem, keep, return_weights=True)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(ours(x, mem, keep), expected)


def test_multi_head_attention_causal_self_attention_matches_torch():
    torch.manual_seed(1)
    ours = MH.MultiHeadAttention(16, 2).double().eval()
    theirs = torch.nn.MultiheadAttention(16, 2, batch_first=True).double().eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
    x = rand(3, 6, 16)
    expected, _ = theirs(x, x, x, attn_mask=~A.causal_mask(6))
    torch.testing.assert_close(ours(x, is_causal=True), expected)


def test_multi_head_attention_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="dim=10.*n_heads=3"):
        MH.MultiHeadAttention(10, 3)


def test_dropout_only_in_training():
    mha = MH.MultiHeadAttention(16, 2, dropout=0.5).double()
    x = rand(1, 6, 16)
    mha.eval()
    torch.testing.assert_close(mha(x), mha(x))
    mha.train()
    torch.manual_seed(0)
    a = mha(x)
    torch.manual_seed(1)
    assert not torch.allclose(a, mha(x))
