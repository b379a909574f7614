"""Chapter 05's helpers: the functional residual and the parameter and FLOP counts of a layer."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from course_lib import blocks as B
from course_lib import counting as C
from course_lib import mlp as M
from course_lib.multi_head import MultiHeadAttention


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def counted_flops(module, *inputs) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(*inputs)
    return counter.get_total_flops()


# ---------------------------------------------------------------- residual
def sublayer_and_norm(dim=8):
    torch.manual_seed(0)
    f = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.Tanh()).double()
    norm = torch.nn.LayerNorm(dim).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    return f, norm


def test_residual_pre_is_x_plus_sublayer_of_norm():
    f, norm = sublayer_and_norm()
    x = rand(3, 5, 8)
    torch.testing.assert_close(B.residual(x, f, norm, "pre"), x + f(norm(x)))


def test_residual_post_is_norm_of_x_plus_sublayer():
    f, norm = sublayer_and_norm()
    x = rand(3, 5, 8)
    torch.testing.assert_close(B.residual(x, f, norm, "post"), norm(x + f(x)))


def test_residual_res_post_normalizes_the_branch_only():
    f, norm = sublayer_and_norm()
    x = rand(3, 5, 8)
    torch.testing.assert_close(B.residual(x, f, norm, "res_post"), x + norm(f(x)))


def test_residual_defaults_to_pre_and_no_norm_is_the_identity():
    f, _ = sublayer_and_norm()
    x = rand(4, 8)
    torch.testing.assert_close(B.residual(x, f), x + f(x))
    for position in B.NORM_POSITIONS:
        torch.testing.assert_close(B.residual(x, f, None, position), x + f(x))


def test_residual_rejects_an_unknown_position():
    with pytest.raises(ValueError, match="position"):
        B.residual(rand(2, 8), torch.tanh, None, "middle")


@pytest.mark.parametrize("position", B.NORM_POSITIONS)
def test_residual_composes_into_the_encoder_block(position):
    torch.manual_seed(0)
    block = B.Block(B.BlockConfig(16, 4, 32, norm_position=position)).double().eval()
    x = rand(2, 5, 16)
    h = B.residual(x, block.attn, block.attn_res.norm, position)
    torch.testing.assert_close(block(x), B.residual(h, block.mlp, block.mlp_res.norm, position))


def test_residual_jacobian_is_identity_plus_the_sublayers():
    x = rand(6)
    f = torch.nn.Linear(6, 6).double()
    jac = torch.autograd.functional.jacobian(lambda h: B.residual(h, f), x)
    torch.testing.assert_close(jac, torch.eye(6, dtype=torch.float64) + f.weight.detach())


# ---------------------------------------------------------------- counts
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dim, mlp_hidden", [(8, 32), (12, 7), (1, 1)])
def test_mlp_param_count_equals_the_module(dim, mlp_hidden, bias):
    mlp = M.MLP(dim, mlp_hidden, bias=bias)
    assert C.mlp_param_count(dim, mlp_hidden, bias) == sum(p.numel() for p in mlp.parameters())


def test_mlp_param_count_defaults_to_biases():
    assert C.mlp_param_count(512, 2048) == 2 * 512 * 2048 + 2048 + 512


@pytest.mark.parametrize("n_tokens, dim, mlp_hidden", [(10, 32, 128), (7, 12, 5), (1, 8, 8)])
def test_mlp_flops_equal_torch_flop_counter(n_tokens, dim, mlp_hidden):
    counted = counted_flops(M.MLP(dim, mlp_hidden), torch.randn(1, n_tokens, dim))
    assert C.mlp_flops(n_tokens, dim, mlp_hidden) == counted


@pytest.mark.parametrize("n_tokens, dim, heads", [(10, 32, 4), (5, 24, 3), (33, 16, 1)])
def test_attention_flops_equal_torch_flop_counter(n_tokens, dim, heads):
    attn = MultiHeadAttention(dim, heads, attn_impl="eager")
    counts = C.mha_flops(n_tokens, dim)
    assert sum(counts.values()) == counted_flops(attn, torch.randn(1, n_tokens, dim))
    assert counts["projections"] == counted_flops(attn.q_proj, torch.randn(n_tokens, dim)) * 4


def test_attention_flops_do_not_depend_on_the_number_of_heads():
    x = torch.randn(1, 12, 24)
    flops = {h: counted_flops(MultiHeadAttention(24, h, attn_impl="eager"), x) for h in (1, 2, 3, 6)}
    assert len(set(flops.values())) == 1


def test_layer_flops_adds_the_mlp_with_d_ff_four_d_by_default():
    assert C.layer_flops(10, 16) == {"projections": 8 * 10 * 16**2, "attention": 4 * 10**2 * 16,
                                     "ffn": 4 * 10 * 16 * 64}
    assert C.layer_flops(10, 16, 20)["ffn"] == C.mlp_flops(10, 16, 20)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 1024))
def test_the_ffn_is_the_largest_part_exactly_while_n_is_below_4d(n_tokens, dim):
    f = C.layer_flops(n_tokens, dim)
    assert (f["ffn"] > f["attention"]) == (n_tokens < 4 * dim)
    assert f["ffn"] > f["projections"]
    assert (2 * f["ffn"] > sum(f.values())) == (n_tokens < 2 * dim)
