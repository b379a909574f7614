"""course_lib.norms beyond the layers: BatchNorm written out, with a padding mask, and LayerNorm's gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import norms as N


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def lengths_mask(lengths, seq):
    return torch.arange(seq)[None, :] < torch.as_tensor(lengths)[:, None]


# ---------------------------------------------------------------- batch_norm
@pytest.mark.parametrize("shape", [(8, 5), (3, 7, 5), (2, 3, 4, 5)])
def test_batch_norm_equals_torch_training_mode_on_the_flattened_tokens(shape):
    x, w, b = rand(*shape), rand(shape[-1], seed=1), rand(shape[-1], seed=2)
    expected = F.batch_norm(x.reshape(-1, shape[-1]), None, None, w, b, training=True, eps=1e-5).reshape(shape)
    torch.testing.assert_close(N.batch_norm(x, w, b, 1e-5), expected)


def test_batch_norm_with_a_full_mask_equals_no_mask():
    x = rand(3, 6, 4)
    full = torch.ones(3, 6, dtype=torch.bool)
    torch.testing.assert_close(N.batch_norm(x, mask=full), N.batch_norm(x))


def test_batch_norm_statistics_come_from_the_real_tokens_only():
    x, w, b = rand(3, 6, 4), rand(4, seed=1), rand(4, seed=2)
    mask = lengths_mask([6, 2, 4], 6)
    real = x[mask]  # (n_real, features)
    expected = (x - real.mean(0)) / torch.sqrt(real.var(0, unbiased=False) + 1e-5) * w + b
    torch.testing.assert_close(N.batch_norm(x, w, b, 1e-5, mask=mask), expected)


def test_batch_norm_ignores_what_sits_in_the_padding():
    x = rand(3, 6, 4)
    mask = lengths_mask([6, 2, 4], 6)
    junk = torch.where(mask[..., None], x, 1e3 * rand(3, 6, 4, seed=5))
    out, out_junk = N.batch_norm(x, mask=mask), N.batch_norm(junk, mask=mask)
    torch.testing.assert_close(out[mask], out_junk[mask])


def test_unmasked_batch_norm_of_a_token_depends_on_the_padding():
    x = rand(2, 4, 8)
    short = torch.cat([x, torch.zeros(2, 3, 8, dtype=x.dtype)], dim=1)  # three padded slots each
    assert not torch.allclose(N.batch_norm(x), N.batch_norm(short)[:, :4])
    mask = lengths_mask([4, 4], 7)
    torch.testing.assert_close(N.batch_norm(x), N.batch_norm(short, mask=mask)[:, :4])


def test_batch_norm_gives_each_feature_mean_zero_and_variance_one_over_real_tokens():
    x = 5 * rand(4, 9, 6) + 3
    mask = lengths_mask([9, 1, 5, 7], 9)
    y = N.batch_norm(x, mask=mask, eps=0.0)[mask]
    torch.testing.assert_close(y.mean(0), torch.zeros(6, dtype=x.dtype))
    torch.testing.assert_close(y.var(0, unbiased=False), torch.ones(6, dtype=x.dtype))


def test_batch_norm_computes_half_precision_statistics_in_float32():
    x = (rand(4, 16, 32, dtype=torch.float32) + 100).bfloat16()
    out = N.batch_norm(x)
    assert out.dtype == torch.bfloat16
    expected = N.batch_norm(x.double())
    assert (out.double() - expected).abs().max() < 0.05


def test_batch_norm_rejects_a_mask_of_the_wrong_shape():
    with pytest.raises(ValueError, match="mask has shape"):
        N.batch_norm(rand(3, 6, 4), mask=torch.ones(3, 6, 4, dtype=torch.bool))


def test_batch_norm_gradients_match_torch():
    x = rand(5, 3).requires_grad_(True)
    x2 = x.detach().clone().requires_grad_(True)
    up = rand(5, 3, seed=9)
    (N.batch_norm(x) * up).sum().backward()
    (F.batch_norm(x2, None, None, training=True) * up).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


# ---------------------------------------------------------------- layer_norm_backward
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.sampled_from([1, 2, 5, 16]), eps=st.sampled_from([0.0, 1e-5, 0.1]))
def test_layer_norm_backward_equals_autograd(seed, d, eps):
    x = (rand(3, 4, d, seed=seed) * 3 + 2).requires_grad_(True)
    w = rand(d, seed=seed + 1)
    up = rand(3, 4, d, seed=seed + 2)
    if d == 1 and eps == 0.0:
        return  # 0 / 0: no gradient to compare
    (N.layer_norm(x, w, None, eps) * up).sum().backward()
    torch.testing.assert_close(N.layer_norm_backward(up, x.detach(), w, eps), x.grad)


def test_layer_norm_backward_without_a_gain_uses_ones():
    x, up = rand(2, 8), rand(2, 8, seed=1)
    torch.testing.assert_close(N.layer_norm_backward(up, x), N.layer_norm_backward(up, x, torch.ones(8, dtype=x.dtype)))


def test_layer_norm_gradient_is_orthogonal_to_shifts_and_to_the_input_direction():
    # LayerNorm's output does not change when x is shifted or scaled, so the
    # gradient has no component along (1, ..., 1) or along x - mean(x).
    x, up = rand(4, 10), rand(4, 10, seed=1)
    dx = N.layer_norm_backward(up, x, eps=0.0)
    torch.testing.assert_close(dx.sum(-1), torch.zeros(4, dtype=x.dtype))
    torch.testing.assert_close((dx * (x - x.mean(-1, keepdim=True))).sum(-1), torch.zeros(4, dtype=x.dtype))
