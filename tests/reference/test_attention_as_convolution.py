"""Specification of course_lib.attention_as_convolution (chapter 09): attention with K^2 heads is a K x K
convolution."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention_as_convolution import (
    AttentionConv,
    AttentionConvConfig,
    attention_from_conv,
    attention_from_conv2d,
    kernel_offsets,
    offset_sq_distances,
    pixels_to_tokens,
    tokens_to_pixels,
)

CASES = [  # (kernel_size, C_in, C_out, H, W)
    (1, 3, 5, 4, 6),
    (3, 4, 6, 7, 9),
    (3, 6, 2, 5, 5),
    (5, 3, 3, 8, 6),
    (7, 2, 4, 7, 8),
]


def reference_conv(x, weight, bias, border):
    p = weight.shape[-1] // 2
    if border == "circular":
        return F.conv2d(F.pad(x, (p, p, p, p), mode="circular"), weight, bias)
    return F.conv2d(x, weight, bias, padding=p)


def run(layer, x):
    grid = tuple(x.shape[-2:])
    with torch.no_grad():
        return tokens_to_pixels(layer(pixels_to_tokens(x), grid), grid)


@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
@pytest.mark.parametrize("border", ["circular", "zeros"])
@pytest.mark.parametrize("k, c_in, c_out, h, w", CASES)
def test_hard_version_equals_conv2d_to_float64_round_off(k, c_in, c_out, h, w, border, attn_impl):
    g = torch.Generator().manual_seed(k * 100 + c_in * 10 + c_out)
    weight = torch.randn(c_out, c_in, k, k, generator=g, dtype=torch.float64)
    bias = torch.randn(c_out, generator=g, dtype=torch.float64)
    x = torch.randn(3, c_in, h, w, generator=g, dtype=torch.float64)
    layer = attention_from_conv(weight, bias, border=border, attn_impl=attn_impl)
    y = run(layer, x)
    assert y.shape == (3, c_out, h, w)
    assert (y - reference_conv(x, weight, bias, border)).abs().max().item() < 1e-12


@pytest.mark.parametrize("padding_mode", ["circular", "zeros"])
def test_from_conv2d_matches_the_module_itself(padding_mode):
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 3, 3, padding=1, padding_mode=padding_mode).double()
    x = torch.randn(2, 4, 6, 5, dtype=torch.float64)
    with torch.no_grad():
        assert (run(attention_from_conv2d(conv), x) - conv(x)).abs().max().item() < 1e-12


def test_without_bias_and_in_float32():
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(5, 3, 3, 3, generator=g)
    x = torch.randn(2, 3, 6, 6, generator=g)
    layer = attention_from_conv(weight)
    assert layer.mha.out_proj.weight.dtype == torch.float32
    assert (run(layer, x) - reference_conv(x, weight, None, "circular")).abs().max().item() < 1e-5


def test_head_dim_wider_than_needed_changes_nothing():
    g = torch.Generator().manual_seed(2)
    weight = torch.randn(4, 2, 3, 3, generator=g, dtype=torch.float64)
    x = torch.randn(1, 2, 5, 5, generator=g, dtype=torch.float64)
    layer = AttentionConv(AttentionConvConfig(2, 4, 3, head_dim=6)).double().load_conv(weight)
    assert (run(layer, x) - reference_conv(x, weight, None, "circular")).abs().max().item() < 1e-12


@pytest.mark.parametrize("border", ["circular", "zeros"])
def test_attention_weights_are_one_hot_at_the_heads_offset(border):
    weight = torch.randn(2, 2, 3, 3, dtype=torch.float64)
    layer = attention_from_conv(weight, border=border)
    h, w = 4, 5
    x = torch.randn(2, h * w, 2, dtype=torch.float64)
    _, weights = layer(x, (h, w), return_weights=True)
    assert weights.shape == (2, 9, h * w, h * w)
    assert bool(((weights == 0) | (weights == 1)).all())  # exactly one-hot, not approximately
    offsets = kernel_offsets(3)
    for head, (dy, dx) in enumerate(offsets.tolist()):
        for q in range(h * w):
            qy, qx = divmod(q, w)
            ky, kx = qy + dy, qx + dx
            row = weights[0, head, q]
            if border == "circular":
                assert row[(ky % h) * w + kx % w] == 1 and row.sum() == 1
            elif 0 <= ky < h and 0 <= kx < w:
                assert row[ky * w + kx] == 1 and row.sum() == 1
            else:  # the target is in the zero padding: no key, zero weights, zero output
                assert row.sum() == 0


def test_soft_version_error_falls_monotonically_as_alpha_grows():
    g = torch.Generator().manual_seed(3)
    weight = torch.randn(3, 2, 3, 3, generator=g, dtype=torch.float64)
    bias = torch.randn(3, generator=g, dtype=torch.float64)
    x = torch.randn(2, 2, 6, 7, generator=g, dtype=torch.float64)
    ref = reference_conv(x, weight, bias, "circular")
    errors = [(run(attention_from_conv(weight, bias, alpha=a), x) - ref).abs().max().item()
              for a in (0.5, 1, 2, 4, 8, 12, 16, 20)]
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-6
    # error ~ e^(-alpha) for large alpha: the weight off the target falls by e^4 from alpha = 12 to 16
    assert 30 < errors[5] / errors[6] < 100


def test_soft_weights_peak_at_the_target():
    layer = attention_from_conv(torch.randn(1, 1, 3, 3, dtype=torch.float64), alpha=3.0)
    _, weights = layer(torch.randn(1, 16, 1, dtype=torch.float64), (4, 4), return_weights=True)
    hard = offset_sq_distances((4, 4), 3) == 0
    assert torch.equal(weights[0].argmax(-1), hard.to(torch.int64).argmax(-1))
    assert torch.allclose(weights.sum(-1), torch.ones(1, 9, 16, dtype=torch.float64))


def test_offsets_and_distances():
    assert kernel_offsets(3).tolist() == [[-1, -1], [-1, 0], [-1, 1], [0, -1], [0, 0], [0, 1], [1, -1], [1, 0], [1, 1]]
    d = offset_sq_distances((5, 5), 3, "circular")
    assert d.shape == (9, 25, 25)
    assert d[0, 0, 24] == 0  # up-left of pixel (0, 0) wraps round to (4, 4)
    assert offset_sq_distances((5, 5), 3, "zeros")[0, 0, 24] == 25 + 25  # no wrap: (4, 4) - (0, 0) - (-1, -1)
    assert bool(((d == 0).sum(-1) == 1).all())  # on the torus every head has exactly one target per query


def test_tokens_round_trip():
    x = torch.randn(2, 3, 4, 5)
    t = pixels_to_tokens(x)
    assert t.shape == (2, 20, 3)
    assert torch.equal(t[0, 7], x[0, :, 1, 2])  # row-major: token 7 is pixel (1, 2)
    assert torch.equal(tokens_to_pixels(t, (4, 5)), x)


def test_gradients_flow_to_the_kernel_carrying_projections():
    layer = attention_from_conv(torch.randn(2, 2, 3, 3))
    layer(torch.randn(1, 9, 2), (3, 3)).sum().backward()
    assert layer.mha.v_proj.weight.grad.abs().sum() > 0
    assert layer.mha.out_proj.weight.grad.abs().sum() > 0


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
def test_even_kernel_size_is_an_error():
    with pytest.raises(ValueError, match="kernel_size=4 must be a positive odd integer"):
        attention_from_conv(torch.randn(2, 2, 4, 4))
    with pytest.raises(ValueError, match="kernel_size=2"):
        AttentionConvConfig(2, 2, 2)


def test_non_square_kernel_is_an_error():
    with pytest.raises(ValueError, match="square"):
        attention_from_conv(torch.randn(2, 2, 3, 5))


def test_heads_must_be_kernel_size_squared():
    with pytest.raises(ValueError, match=r"n_heads=4: a 3x3 convolution needs exactly kernel_size\*\*2 = 9 heads"):
        AttentionConvConfig(2, 2, 3, n_heads=4)


def test_head_dim_below_the_rank_is_an_error():
    with pytest.raises(ValueError, match="head_dim=1 is below min"):
        AttentionConvConfig(3, 4, 3, head_dim=1)


def test_channel_mismatch_is_an_error():
    layer = attention_from_conv(torch.randn(2, 3, 3, 3))
    with pytest.raises(ValueError, match="x has 4 channels .* in_channels=3"):
        layer(torch.randn(1, 16, 4), (4, 4))
    with pytest.raises(ValueError, match="seq=16"):
        layer(torch.randn(1, 15, 3), (4, 4))
    with pytest.raises(ValueError, match="bias of shape"):
        attention_from_conv(torch.randn(2, 3, 3, 3), torch.randn(3))
    with pytest.raises(ValueError, match="does not fit this layer"):
        AttentionConv(AttentionConvConfig(3, 2, 3)).load_conv(torch.randn(2, 2, 3, 3))


def test_soft_version_needs_circular_border_and_positive_alpha():
    with pytest.raises(ValueError, match="needs border='circular'"):
        AttentionConvConfig(2, 2, 3, border="zeros", alpha=2.0)
    with pytest.raises(ValueError, match="alpha=0 must be positive"):
        AttentionConvConfig(2, 2, 3, alpha=0)
    with pytest.raises(ValueError, match="border must be one of"):
        AttentionConvConfig(2, 2, 3, border="reflect")


def test_circular_kernel_larger_than_the_map_is_an_error():
    layer = attention_from_conv(torch.randn(1, 1, 5, 5))
    with pytest.raises(ValueError, match="kernel_size=5 is larger than the 3x3 map"):
        layer(torch.randn(1, 9, 1), (3, 3))


def test_conv2d_that_changes_the_size_is_refused():
    with pytest.raises(ValueError, match="stride 1"):
        attention_from_conv2d(nn.Conv2d(2, 2, 3, stride=2, padding=1))
    with pytest.raises(ValueError, match="padding"):
        attention_from_conv2d(nn.Conv2d(2, 2, 3, padding=0))
    with pytest.raises(ValueError, match="padding_mode='reflect'"):
        attention_from_conv2d(nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"))
    with pytest.raises(TypeError, match="nn.Conv2d"):
        attention_from_conv2d(nn.Linear(2, 2))
