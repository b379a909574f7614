"""The shared layers: norms, MLPs, positions, grouped-query attention, the KV cache, blocks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import attention as A
from course_lib import blocks as B
from course_lib import mlp as M
from course_lib import multi_head as MH
from course_lib import norms as N
from course_lib import positional as P


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------- norms
def test_layer_norm_written_out_equals_torch():
    x, w, b = rand(4, 7, 16), rand(16, seed=1), rand(16, seed=2)
    torch.testing.assert_close(N.layer_norm(x, w, b, 1e-5), F.layer_norm(x, (16,), w, b, 1e-5))


@pytest.mark.parametrize("cls", [N.LayerNorm, N.RMSNorm])
def test_explicit_and_fused_paths_agree(cls):
    eager, fused = cls(16), cls(16)
    with torch.no_grad():
        for m in (eager, fused):
            m.weight.copy_(rand(16, seed=3, dtype=torch.float32))
    eager.impl = "eager"
    x = rand(3, 5, 16, dtype=torch.float32)
    torch.testing.assert_close(eager(x), fused(x))


def test_rms_norm_matches_its_formula():
    x, w = rand(3, 8), rand(8, seed=1)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(N.rms_norm(x, w, 1e-6), expected)


@settings(max_examples=30, deadline=None)
@given(c=st.floats(0.01, 100.0), seed=st.integers(0, 1000))
def test_rms_norm_is_scale_invariant(c, seed):
    x = rand(4, 32, seed=seed) + 0.1
    torch.testing.assert_close(N.rms_norm(c * x, eps=0.0), N.rms_norm(x, eps=0.0), rtol=1e-9, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(shift=st.floats(-100, 100), c=st.floats(0.01, 100.0), seed=st.integers(0, 1000))
def test_layer_norm_is_shift_and_scale_invariant(shift, c, seed):
    x = rand(4, 32, seed=seed)
    torch.testing.assert_close(N.layer_norm(c * x + shift, eps=0.0), N.layer_norm(x, eps=0.0), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("cls", [N.LayerNorm, N.RMSNorm])
@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_bf16_statistics_are_taken_in_float32(cls, impl):
    norm = cls(256, impl=impl)
    x = (rand(8, 256, seed=4) * 30 + 50).float()
    ref = norm(x)
    out = norm(x.bfloat16())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=0.05, rtol=0.02)


def test_norms_reject_the_wrong_width():
    with pytest.raises(ValueError, match="LayerNorm\\(8\\).*6"):
        N.LayerNorm(8)(torch.zeros(2, 6))
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        N.make_norm("batchnorm", 8, 1e-5)


# ---------------------------------------------------------------- MLPs
def test_mlp_and_swiglu_act_per_token():
    for mlp in (M.MLP(8, 32, act="relu"), M.MLP(8, 32, act="gelu_tanh"), M.SwiGLU(8, 21)):
        x = torch.randn(2, 5, 8)
        out = mlp(x)
        assert out.shape == (2, 5, 8)
        torch.testing.assert_close(mlp(x[:, 2:3]), out[:, 2:3])  # token 2 alone: same result


def test_swiglu_is_silu_gate_times_up():
    m = M.SwiGLU(6, 10).double()
    x = rand(3, 6)
    expected = m.down_proj(F.silu(m.gate_proj(x)) * m.up_proj(x))
    torch.testing.assert_close(m(x), expected)


def test_two_thirds_rule_matches_the_parameter_count_of_a_4x_mlp():
    d = 768
    mlp = sum(p.numel() for p in M.MLP(d, 4 * d, bias=False).parameters())
    glu = sum(p.numel() for p in M.SwiGLU(d, M.swiglu_hidden_dim(d)).parameters())
    assert abs(glu - mlp) / mlp < 0.01
    assert M.swiglu_hidden_dim(4096, multiple_of=256) == 11008  # Llama-7B


def test_unknown_activation_is_named():
    with pytest.raises(ValueError, match="'swish2'"):
        M.MLP(4, 8, act="swish2")


# ---------------------------------------------------------------- positions
def test_sinusoidal_encoding_matches_the_paper():
    pe = P.sinusoidal_encoding(50, 16, dtype=torch.float64)
    pos, i = 37, 3
    assert pe[pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)))
    assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)))


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 40))
def test_an_offset_is_one_linear_map_for_every_position(k):
    d = 16
    pe = P.sinusoidal_encoding(100, d, dtype=torch.float64)
    # PE[pos + k] = PE[pos] @ R_k, R_k block-diagonal: a 2x2 rotation by k * omega_i per (sin, cos) pair
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        theta = k * 10000.0 ** (-2 * i / d)
        c, s = math.cos(theta), math.sin(theta)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    torch.testing.assert_close(pe[: 100 - k] @ R, pe[k:], atol=1e-10, rtol=1e-10)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    emb = P.TokenEmbedding(10, 16)
    ids = torch.tensor([[1, 2]])
    torch.testing.assert_close(emb(ids), emb.weight[ids] * 4.0)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 60), n=st.integers(0, 60), shift=st.integers(1, 30))
def test_rope_scores_depend_only_on_the_relative_position(m, n, shift):
    q, k = rand(1, 1, 1, 16, seed=1), rand(1, 1, 1, 16, seed=2)
    rope = P.RotaryEmbedding(16, 128)

    def score(a, b):
        return (P.apply_rope(q, *rope(torch.tensor([a]))) * P.apply_rope(k, *rope(torch.tensor([b])))).sum()

    torch.testing.assert_close(score(m, n), score(m + shift, n + shift), rtol=1e-5, atol=1e-5)


def test_interleaved_rope_weights_convert_to_half_split():
    n_heads, head_dim, d = 2, 8, 16
    w = rand(n_heads * head_dim, d)
    x = rand(3, d, seed=1)
    pos = torch.arange(3)

    def rope_interleaved(t):  # rotate adjacent pairs (t0, t1), (t2, t3), ...
        t = t.view(3, n_heads, head_dim // 2, 2)
        inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        ang = pos[:, None, None].double() * inv
        a, b = t[..., 0], t[..., 1]
        rotated = torch.stack([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)
        return rotated.view(3, n_heads, head_dim)

    cos, sin = P.rope_cos_sin(pos, head_dim, dtype=torch.float64)
    q_half = (x @ P.interleaved_to_half_split(w, n_heads).T).view(3, n_heads, head_dim).transpose(0, 1)
    half = P.apply_rope(q_half, cos, sin)
    inter = rope_interleaved(x @ w.T).transpose(0, 1)
    # same scores: the two layouts differ by a permutation of features within each head
    torch.testing.assert_close(half @ half.transpose(-1, -2), inter @ inter.transpose(-1, -2))


def test_sincos_2d_has_one_vector_per_patch():
    pe = P.sincos_2d(3, 5, 32)
    assert pe.shape == (15, 32)
    assert not torch.allclose(pe[0], pe[1]) and not torch.allclose(pe[0], pe[5])


def test_resampling_to_the_same_grid_is_the_identity_and_keeps_prefix_tokens():
    pe = rand(1, 1 + 16, 8).float()
    assert P.resample_pos_embed(pe, (4, 4)) is pe
    out = P.resample_pos_embed(pe, (6, 3))
    assert out.shape == (1, 1 + 18, 8)
    torch.testing.assert_close(out[:, :1], pe[:, :1])
    grid = pe[:, 1:].reshape(1, 4, 4, 8).permute(0, 3, 1, 2)
    expected = F.interpolate(grid, size=(6, 3), mode="bicubic", align_corners=False)
    expected = expected.permute(0, 2, 3, 1).reshape(1, 18, 8)
    torch.testing.assert_close(out[:, 1:], expected)


def test_positions_reject_sequences_that_are_too_long():
    with pytest.raises(ValueError, match="length 9.*8"):
        P.LearnedPositionalEmbedding(8, 4)(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match="max_len=8"):
        P.SinusoidalPositionalEncoding(4, max_len=8)(torch.zeros(1, 9, 4))


# ---------------------------------------------------------------- grouped-query attention, cache, bias
def gqa_as_mha(gqa: MH.MultiHeadAttention) -> MH.MultiHeadAttention:
    """An MHA whose key/value heads are the GQA ones repeated for each query head of the group."""
    rep = gqa.n_heads // gqa.n_kv_heads
    mha = MH.MultiHeadAttention(gqa.dim, gqa.n_heads).to(gqa.q_proj.weight.dtype)
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
        for src, dst in ((gqa.k_proj, mha.k_proj), (gqa.v_proj, mha.v_proj)):
            w = src.weight.view(gqa.n_kv_heads, gqa.head_dim, -1).repeat_interleave(rep, 0)
            dst.weight.copy_(w.reshape(-1, gqa.dim))
            dst.bias.copy_(src.bias.view(gqa.n_kv_heads, gqa.head_dim).repeat_interleave(rep, 0).flatten())
    return mha


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4, 8])
def test_grouped_query_attention_is_mha_with_shared_kv_heads(n_kv_heads):
    torch.manual_seed(n_kv_heads)
    gqa = MH.MultiHeadAttention(32, 8, n_kv_heads=n_kv_heads).double()
    x = rand(2, 5, 32)
    torch.testing.assert_close(gqa(x, is_causal=True), gqa_as_mha(gqa)(x, is_causal=True))


def test_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=8"):
        MH.MultiHeadAttention(32, 8, n_kv_heads=3)
    with pytest.raises(ValueError, match="attn_impl"):
        MH.MultiHeadAttention(32, 8, attn_impl="flash")


@settings(max_examples=15, deadline=None)
@given(n_kv=st.sampled_from([1, 2, 4]), prompt=st.integers(1, 6), steps=st.integers(1, 5),
       impl=st.sampled_from(["eager", "sdpa"]))
def test_incremental_decoding_with_the_cache_equals_the_full_pass(n_kv, prompt, steps, impl):
    torch.manual_seed(0)
    attn = MH.MultiHeadAttention(16, 4, n_kv_heads=n_kv, attn_impl=impl).double().eval()
    rope = P.RotaryEmbedding(4, 64)
    x = rand(2, prompt + steps, 16)
    full = attn(x, is_causal=True, rope=rope(torch.arange(prompt + steps)))
    cache = MH.KVCache(2, n_kv, 32, 4, dtype=torch.float64)
    outs = [attn(x[:, :prompt], is_causal=True, rope=rope(torch.arange(prompt)), cache=cache)]
    for t in range(prompt, prompt + steps):
        outs.append(attn(x[:, t:t + 1], is_causal=True, rope=rope(torch.tensor([t])), cache=cache))
    torch.testing.assert_close(torch.cat(outs, 1), full)
    assert cache.length == prompt + steps


def test_the_cache_refuses_to_overflow():
    cache = MH.KVCache(1, 1, 4, 2)
    cache.update(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    with pytest.raises(ValueError, match="3 \\+ 2 positions exceed max_len=4"):
        cache.update(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_q=st.integers(1, 6), n_k=st.integers(1, 6), causal=st.booleans())
def test_eager_and_sdpa_paths_agree_with_mask_and_bias(seed, n_q, n_k, causal):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g, dtype=torch.float64) for n in (n_q, n_k, n_k))
    mask = torch.rand(2, 1, n_q, n_k, generator=g) < 0.7
    bias = torch.randn(3, n_q, n_k, generator=g, dtype=torch.float64)
    kw = dict(is_causal=causal, bias=bias)
    torch.testing.assert_close(
        A.scaled_dot_product_attention(q, k, v, mask, attn_impl="eager", **kw),
        A.scaled_dot_product_attention(q, k, v, mask, attn_impl="sdpa", **kw),
    )


def test_a_bias_of_minus_infinity_is_a_mask():
    q, k, v = rand(1, 4, 8), rand(1, 6, 8, seed=1), rand(1, 6, 3, seed=2)
    mask = torch.rand(4, 6, generator=torch.Generator().manual_seed(0)) < 0.5
    mask[:, 0] = True
    bias = torch.zeros(4, 6, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, bias=bias),
                               A.scaled_dot_product_attention(q, k, v, mask))


def test_repeat_kv_gives_each_kv_head_a_contiguous_block_of_query_heads():
    kv = torch.arange(2.0).view(1, 2, 1, 1)
    assert MH.repeat_kv(kv, 3).flatten().tolist() == [0, 0, 0, 1, 1, 1]


def test_cross_attention_reads_keys_and_values_from_the_other_sequence():
    torch.manual_seed(0)
    attn = MH.MultiHeadAttention(16, 4, kv_dim=24).double()
    x, mem = rand(2, 3, 16), rand(2, 7, 24, seed=1)
    out = attn(x, mem)
    assert out.shape == (2, 3, 16)
    mem2 = mem.clone()
    mem2[:, 3] += 1
    assert not torch.allclose(attn(x, mem2), out)


# ---------------------------------------------------------------- blocks
def block(pos, **kw):
    torch.manual_seed(0)
    return B.Block(B.BlockConfig(16, 4, 32, norm_position=pos, **kw)).double().eval()


def test_pre_ln_block_is_x_plus_sublayer_of_norm():
    b = block("pre")
    x = rand(2, 5, 16)
    h = x + b.attn(b.attn_res.norm(x))
    torch.testing.assert_close(b(x), h + b.mlp(b.mlp_res.norm(h)))


def test_post_ln_block_is_norm_of_x_plus_sublayer():
    b = block("post")
    x = rand(2, 5, 16)
    h = b.attn_res.norm(x + b.attn(x))
    torch.testing.assert_close(b(x), b.mlp_res.norm(h + b.mlp(h)))


def test_res_post_norm_block_normalizes_the_branch():
    b = block("res_post")
    x = rand(2, 5, 16)
    h = x + b.attn_res.norm(b.attn(x))
    torch.testing.assert_close(b(x), h + b.mlp_res.norm(b.mlp(h)))


def test_layerscale_starts_the_block_near_the_identity():
    b = block("pre", layerscale=1e-6)
    x = rand(2, 5, 16)
    assert (b(x) - x).abs().max() < 1e-4


def test_drop_path_is_identity_in_eval_and_unbiased_in_training():
    dp = B.DropPath(0.3)
    x = torch.ones(20000, 4)
    dp.eval()
    assert torch.equal(dp(x), x)
    dp.train()
    y = dp(x)
    assert ((y == 0).all(1) | (y == 1 / 0.7).all(1)).all(), "a whole sample is kept or dropped"
    assert abs(y.mean().item() - 1.0) < 0.03


def test_block_config_rejects_unknown_norm_position():
    with pytest.raises(ValueError, match="norm_position.*'middle'"):
        B.BlockConfig(16, 4, 32, norm_position="middle")


def test_decoder_block_is_causal_in_its_own_sequence():
    torch.manual_seed(0)
    d = B.DecoderBlock(B.BlockConfig(16, 4, 32, norm_position="post")).double().eval()
    x, mem = rand(1, 6, 16), rand(1, 4, 16, seed=1)
    x2 = x.clone()
    x2[:, 4:] += 3.0
    torch.testing.assert_close(d(x, mem)[:, :4], d(x2, mem)[:, :4])
