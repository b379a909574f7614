"""course_lib.attention, chapter 03: multi-head attention from given weights, the
output projection as a sum over heads, and the parameter count."""

from __future__ import annotations

import pytest
import torch

from course_lib import attention as A
from course_lib import counting as C
from course_lib import multi_head as MH
from grader.assignments import multi_head_attention as cases


def rand(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def weights_of(mha: MH.MultiHeadAttention) -> dict:
    return dict(
        w_q=mha.q_proj.weight, w_k=mha.k_proj.weight, w_v=mha.v_proj.weight, w_o=mha.out_proj.weight,
        b_q=mha.q_proj.bias, b_k=mha.k_proj.bias, b_v=mha.v_proj.bias, b_o=mha.out_proj.bias,
    )


# ---------------------------------------------------------------- parity with the module
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dim, n_heads, n_kv_heads", [(16, 4, 4), (12, 3, 3), (16, 4, 2), (16, 4, 1), (8, 1, 1)])
def test_functional_mha_equals_the_module_with_the_same_weights(dim, n_heads, n_kv_heads, bias):
    torch.manual_seed(0)
    mha = MH.MultiHeadAttention(dim, n_heads, n_kv_heads=n_kv_heads, bias=bias).double().eval()
    x = rand(2, 5, dim)
    with torch.no_grad():
        expected = mha(x)
        got = MH.multi_head_attention(x, n_heads=n_heads, **weights_of(mha))
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mask_kind", ["causal", "padding"])
def test_functional_mha_applies_masks_like_the_module(mask_kind):
    torch.manual_seed(1)
    mha = MH.MultiHeadAttention(16, 4).double().eval()
    x = rand(3, 6, 16, seed=2)
    with torch.no_grad():
        if mask_kind == "causal":
            expected = mha(x, is_causal=True)
            got = MH.multi_head_attention(x, n_heads=4, is_causal=True, **weights_of(mha))
        else:
            pad = A.padding_mask(torch.tensor([6, 3, 1]), 6)
            expected, got = mha(x, mask=pad), MH.multi_head_attention(x, n_heads=4, mask=pad, **weights_of(mha))
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_functional_mha_matches_torch_multihead_attention():
    torch.manual_seed(2)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).double().eval()
    w_q, w_k, w_v = ref.in_proj_weight.chunk(3)
    b_q, b_k, b_v = ref.in_proj_bias.chunk(3)
    x = rand(2, 7, 16, seed=3)
    with torch.no_grad():
        expected, _ = ref(x, x, x, need_weights=False)
        got = MH.multi_head_attention(x, w_q, w_k, w_v, ref.out_proj.weight, 4, b_q, b_k, b_v, ref.out_proj.bias)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_one_head_is_plain_attention_with_projections():
    x = rand(2, 5, 8)
    w_q, w_k, w_v, w_o = rand(8, 8, seed=1), rand(8, 8, seed=2), rand(8, 8, seed=3), rand(8, 8, seed=4)
    plain = A.scaled_dot_product_attention(x @ w_q.T, x @ w_k.T, x @ w_v.T) @ w_o.T
    torch.testing.assert_close(MH.multi_head_attention(x, w_q, w_k, w_v, w_o, 1), plain, rtol=1e-12, atol=1e-12)


def test_functional_mha_rejects_indivisible_heads():
    x, w = rand(1, 3, 10), rand(10, 10)
    with pytest.raises(ValueError, match="n_heads=3"):
        MH.multi_head_attention(x, w, w, w, w, 3)


# ---------------------------------------------------------------- the output projection, head by head
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_sum_of_per_head_projections_equals_concat_then_project(batch):
    heads, w_o, b_o = rand(*batch, 4, 5, 3), rand(10, 12, seed=1), rand(10, seed=2)
    concat = heads.movedim(-3, -2).reshape(*batch, 5, 12)
    torch.testing.assert_close(MH.mha_output_as_head_sum(heads, w_o, b_o), concat @ w_o.T + b_o, rtol=1e-12, atol=1e-12)
    if len(batch) == 1:
        torch.testing.assert_close(MH.mha_output_as_head_sum(heads, w_o), MH.merge_heads(heads) @ w_o.T)


def test_head_sum_rejects_a_mismatched_output_weight():
    with pytest.raises(ValueError, match="n_heads \\* head_dim = 12"):
        MH.mha_output_as_head_sum(rand(1, 4, 5, 3), rand(10, 8))


# ---------------------------------------------------------------- parameter count
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dim, n_heads, n_kv_heads",
                         [(16, 4, None), (64, 8, 2), (64, 8, 1), (12, 12, 3), (10, 1, None)])
def test_param_count_equals_the_module(dim, n_heads, n_kv_heads, bias):
    mha = MH.MultiHeadAttention(dim, n_heads, n_kv_heads=n_kv_heads, bias=bias)
    assert C.mha_param_count(dim, n_heads, n_kv_heads, bias=bias) == sum(p.numel() for p in mha.parameters())


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16])
def test_mha_param_count_is_four_d_squared_whatever_the_heads(n_heads):
    assert C.mha_param_count(512, n_heads, bias=False) == 4 * 512**2
    assert C.mha_param_count(512, n_heads) == 4 * 512**2 + 4 * 512


def test_param_count_rejects_indivisible_widths():
    with pytest.raises(ValueError):
        C.mha_param_count(10, 3)
    with pytest.raises(ValueError):
        C.mha_param_count(16, 4, n_kv_heads=3)


# ---------------------------------------------------------------- the grading module (chapter 03's exercises)
MISTAKE_LISTS = {
    "split": (cases.split_cases, MH.split_heads, cases.SPLIT_MISTAKES),
    "merge": (cases.merge_cases, MH.merge_heads, cases.MERGE_MISTAKES),
    "mha": (cases.mha_cases, cases.mha_reference, cases.MHA_MISTAKES),
    "head_sum": (cases.head_sum_cases, MH.mha_output_as_head_sum, cases.HEAD_SUM_MISTAKES),
    "param_count": (cases.param_count_cases, cases.param_count_reference, cases.PARAM_COUNT_MISTAKES),
}


@pytest.mark.parametrize("exercise", MISTAKE_LISTS)
def test_every_listed_mistake_is_wrong_on_some_case(exercise):
    make_cases, reference, mistakes = MISTAKE_LISTS[exercise]
    from grader import same_value

    for mistake in mistakes:
        differs = False
        for case in make_cases(seed=0):
            c = case.in_float64()
            expected = reference(*c.args, **c.kwargs)
            wrong = mistake.variant(*c.clone().args, **c.clone().kwargs)
            differs = differs or not same_value(wrong, expected)
        assert differs, f"{exercise}: the mistake {mistake.message!r} is never distinguishable from the reference"


def test_split_heads_cases_run_and_merge_inverts_them():
    for case in cases.split_cases(seed=0):
        x, h = case.args
        assert torch.equal(MH.merge_heads(MH.split_heads(x, h)), x)


def test_reshape_without_transpose_is_diagnosed():
    import grader as grading

    def wrong(x, n_heads):
        b, n, d = x.shape
        return x.reshape(b, n_heads, n, d // n_heads)

    with pytest.raises(grading.ExerciseFailure, match="transpose the seq and head axes"):
        grading.check_function(wrong, MH.split_heads, cases.split_cases(seed=0), diagnoses=cases.SPLIT_MISTAKES)


def test_the_right_param_count_passes_and_a_float_is_diagnosed():
    import grader as grading

    def right(dim, n_heads, bias=True):
        return 4 * dim * dim + (4 * dim if bias else 0)

    grading.check_function(right, cases.param_count_reference, cases.param_count_cases(seed=0))
    with pytest.raises(grading.ExerciseFailure, match="integer arithmetic"):
        grading.check_function(lambda d, h, bias=True: float(right(d, h, bias)), cases.param_count_reference,
                               cases.param_count_cases(seed=0), diagnoses=cases.PARAM_COUNT_MISTAKES)
