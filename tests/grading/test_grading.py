"""The grader: the comparison, the diagnoses and the guard that hidden tests use."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F

import grader as G
from course_lib import attention as ref
from grader.assignments import attention as C


def scores_reordered(q, k):
    # Mathematically the reference, computed in another order: must pass.
    return (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)


def test_a_correct_implementation_in_another_order_passes():
    assert G.check_function(scores_reordered, ref.attention_scores, C.score_cases(seed=3), check_grad=True) is None


def test_check_function_returns_none_so_nbgrader_sees_no_partial_credit():
    # nbgrader reads a number left as a test cell's value as partial credit.
    assert G.check_function(scores_reordered, ref.attention_scores, C.score_cases(n=2)) is None


def learner_softmax(s, mask=None):
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e))


def learner_attention(q, k, v, mask=None):
    return learner_softmax(scores_reordered(q, k), mask) @ v


@pytest.mark.parametrize("seed", range(5))
def test_a_correct_learner_passes_for_any_seed(seed):
    G.check_function(learner_softmax, ref.masked_softmax, C.softmax_cases(seed=seed), check_grad=True)
    G.check_function(learner_attention, ref.scaled_dot_product_attention, C.attention_cases(seed=seed), check_grad=True)


def test_a_small_error_is_caught_even_when_a_loose_tolerance_would_pass_it():
    with pytest.raises(G.ExerciseFailure, match="wrong values"):
        G.check_function(lambda q, k: scores_reordered(q, k) * (1 + 1e-4), ref.attention_scores, C.score_cases())


def test_the_message_names_the_mistake_without_printing_the_answer():
    with pytest.raises(G.ExerciseFailure) as info:
        G.check_function(lambda q, k: q @ k.transpose(-2, -1), ref.attention_scores, C.score_cases(),
                         diagnoses=C.SCORE_MISTAKES)
    msg = str(info.value)
    assert "not scaled" in msg and "sqrt(d_k)" in msg
    assert "tensor(" not in msg and "[[" not in msg


def test_wrong_shape_is_reported_with_both_shapes():
    with pytest.raises(G.ExerciseFailure, match=r"shape \(5, 5\), expected \(5, 3\)"):
        G.check_function(lambda q, k: q @ q.transpose(-2, -1), ref.attention_scores,
                         [G.Case((torch.randn(5, 4), torch.randn(3, 4)), label="x")])


def test_missing_return_is_explained():
    with pytest.raises(G.ExerciseFailure, match="forget to `return`"):
        G.check_function(lambda q, k: None, ref.attention_scores, C.score_cases(n=1))


def test_an_untouched_stub_is_reported_as_not_implemented():
    def stub(q, k):
        raise NotImplementedError()

    with pytest.raises(G.ExerciseFailure, match="not implemented yet"):
        G.check_function(stub, ref.attention_scores, C.score_cases(n=1))


def test_modifying_an_input_in_place_is_caught():
    def in_place(s, mask=None):
        s.data.mul_(1.0001)
        e = torch.exp(s - s.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    with pytest.raises(G.ExerciseFailure, match="in place|wrong values"):
        G.check_function(in_place, ref.masked_softmax, [G.Case((torch.randn(3, 4), None), label="x")])


# ---------------------------------------------------------------- the guard
def test_guard_catches_the_fused_routine_through_an_alias():
    sdpa = F.scaled_dot_product_attention

    def cheat(q, k, v, mask=None):
        return sdpa(q, k, v, attn_mask=mask)

    # caught as soon as torch's function modes are off, before the routine is reached (or at the routine)
    with pytest.raises(G.ForbiddenCall, match="DisableTorchFunction|scaled_dot_product_attention"):
        G.check_function(cheat, ref.scaled_dot_product_attention, C.attention_cases(n=1), forbidden=G.FUSED_ATTENTION)


def test_guard_catches_a_tensor_method():
    def cheat(s, mask=None):
        return s.softmax(-1)

    with pytest.raises(G.ForbiddenCall, match=r"Tensor\.softmax"):
        G.check_function(cheat, ref.masked_softmax, C.softmax_cases(n=1), forbidden=G.SOFTMAX)


def test_guard_catches_an_nn_module_wrapping_the_forbidden_routine():
    def cheat(s, mask=None):
        return torch.nn.Softmax(dim=-1)(s)

    with pytest.raises(G.ForbiddenCall):
        G.check_function(cheat, ref.masked_softmax, C.softmax_cases(n=1), forbidden=G.SOFTMAX)


def test_guard_catches_the_reference_however_it_is_reached():
    from course_lib.attention import attention_weights as renamed

    def cheat(q, k, v, mask=None):
        return renamed(q, k, mask) @ v

    with pytest.raises(G.ForbiddenCall, match="course_lib.attention.attention_weights"):
        G.check_function(cheat, ref.scaled_dot_product_attention, C.attention_cases(n=1))


def test_guard_sees_the_reference_even_if_the_learner_swallows_the_error():
    def cheat(q, k):
        try:
            ref.attention_scores(q, k)
        except Exception:
            pass
        return scores_reordered(q, k)

    with pytest.raises(G.ForbiddenCall):
        G.check_function(cheat, ref.attention_scores, C.score_cases(n=1))


def test_guard_allows_basic_operations_and_restores_the_profiler():
    before = sys.getprofile()
    with G.forbid_calls(G.SOFTMAX + G.FUSED_ATTENTION):
        x = torch.randn(3, 4)
        torch.exp(x - x.amax(-1, keepdim=True)).sum(-1)
    assert sys.getprofile() is before


def test_guard_lets_the_learner_call_the_blocks_an_exercise_hands_out():
    from course_lib.blocks import Block, BlockConfig

    torch.manual_seed(0)
    block = Block(BlockConfig(dim=8, n_heads=2, mlp_hidden=16)).eval()
    x = torch.randn(2, 3, 8)

    def stack(x, block):  # the block's forward calls course_lib attention, norms and mlp in turn
        return block(block(x))

    with torch.no_grad():
        expected = block(block(x))
    G.check_function(stack, lambda x, block: block(block(x)), [G.Case((x, block))], allowed=[Block])
    with pytest.raises(G.ForbiddenCall, match="course_lib.blocks"):  # without the allowance it is the reference
        G.check_function(stack, lambda x, block: block(block(x)), [G.Case((x, block))])

    def cheat(x, block):  # allowed blocks do not open the door to the rest of course_lib
        block(x)
        return ref.scaled_dot_product_attention(x, x, x) * 0 + expected

    with pytest.raises(G.ForbiddenCall, match="course_lib.attention"):
        G.check_function(cheat, lambda x, block: block(block(x)), [G.Case((x, block))], allowed=[Block])


def test_allowing_a_course_lib_class_does_not_allow_every_module_call():
    from course_lib.blocks import Block
    from course_lib.multi_head import MultiHeadAttention

    mha = MultiHeadAttention(8, 2).eval()

    def cheat(x):
        return mha(x)

    with pytest.raises(G.ForbiddenCall, match="course_lib.multi_head"):
        G.check_function(cheat, lambda x: x, [G.Case((torch.randn(1, 2, 8),))], allowed=[Block])


def test_guard_is_off_outside_the_learners_call():
    torch.softmax(torch.randn(2, 2), -1)  # the hidden test itself may use anything
    ref.masked_softmax(torch.randn(2, 2))


# ---------------------------------------------------------------- results that are not a tensor
def test_numbers_lists_and_dicts_are_compared_by_value():
    assert G.same_value([1, (2.0, "a")], (1, [2.0 + 1e-9, "a"]))
    assert not G.same_value([1, 2], [1, 2, 3])
    assert not G.same_value({"a": 1}, {"a": 2})
    assert not G.same_value(True, 1), "a bool is not a count"
    assert G.same_value(torch.tensor(7), 7)


def test_a_wrong_count_is_caught_with_its_likely_mistake():
    def params(d):  # reference: weights and biases of a d x d linear layer
        return d * d + d

    with pytest.raises(G.ExerciseFailure, match="forgot the bias"):
        G.check_function(lambda d: d * d, params, [G.Case((d,), label=f"d={d}") for d in (1, 4, 9)],
                         diagnoses=[G.Mistake("forgot the bias", lambda d: d * d)])


def test_a_list_input_changed_in_place_is_caught():
    def drop_zeros(ids):
        return [i for i in ids if i]

    def in_place(ids):
        ids[:] = [i for i in ids if i]
        return ids

    with pytest.raises(G.ExerciseFailure, match="in place"):
        G.check_function(in_place, drop_zeros, [G.Case(([1, 0, 2],), label="x")])


# ---------------------------------------------------------------- learners who try to blind the guard
def test_switching_off_the_profiler_is_caught():
    def cheat(q, k):
        sys.setprofile(None)
        return ref.attention_scores(q, k)

    with pytest.raises(G.ForbiddenCall, match="sys.setprofile"):
        G.check_function(cheat, ref.attention_scores, C.score_cases(n=1))


def test_switching_off_the_profiler_and_putting_it_back_is_caught():
    def cheat(q, k):
        mine = sys.getprofile()
        sys.setprofile(None)
        out = ref.attention_scores(q, k)
        sys.setprofile(mine)
        return out

    with pytest.raises(G.ForbiddenCall, match="sys.setprofile"):
        G.check_function(cheat, ref.attention_scores, C.score_cases(n=1))


def test_a_fused_routine_under_disable_torch_function_is_caught():
    def cheat(q, k, v, mask=None):
        with torch._C.DisableTorchFunction():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    # caught as soon as torch's function modes are off, before the routine is reached (or at the routine)
    with pytest.raises(G.ForbiddenCall, match="DisableTorchFunction|scaled_dot_product_attention"):
        G.check_function(cheat, ref.scaled_dot_product_attention, C.attention_cases(n=1), forbidden=G.FUSED_ATTENTION)


def test_a_tensor_method_under_disable_torch_function_subclass_is_caught():
    def cheat(scores, mask=None):
        with torch._C.DisableTorchFunctionSubclass():
            return scores.masked_fill(~mask, float("-inf")).softmax(-1) if mask is not None else scores.softmax(-1)

    with pytest.raises(G.ForbiddenCall, match="softmax"):
        G.check_function(cheat, ref.masked_softmax, C.softmax_cases(n=1), forbidden=G.SOFTMAX)


def test_a_python_level_forbidden_function_is_caught_even_without_torch_function():
    def cheat(x, weight, bias, eps=1e-5):
        with torch._C.DisableTorchFunction():
            return F.layer_norm(x, x.shape[-1:], weight, bias, eps)

    from course_lib import norms
    x, w, b = torch.randn(2, 3, 8), torch.rand(8) + 0.5, torch.randn(8)
    with pytest.raises(G.ForbiddenCall, match="layer_norm"):
        G.check_function(cheat, lambda x, weight, bias, eps=1e-5: norms.layer_norm(x, weight, bias, eps),
                         [G.Case((x, w, b))], forbidden=G.LAYER_NORM)


def test_the_reference_in_a_thread_is_caught():
    import threading

    def cheat(q, k):
        box = []
        t = threading.Thread(target=lambda: box.append(ref.attention_scores(q, k)))
        t.start()
        t.join()
        return box[0]

    with pytest.raises(G.ForbiddenCall, match="thread"):
        G.check_function(cheat, ref.attention_scores, C.score_cases(n=1))


@pytest.mark.parametrize("target", ["torch.allclose", "torch.equal", "grader.compare.close", "numpy.allclose",
                                    "torch.testing.assert_close", "builtins.abs"])
def test_patching_the_checks_while_being_checked_is_caught(target):
    import importlib

    modname, _, attr = target.rpartition(".")
    module = importlib.import_module(modname)
    original = getattr(module, attr)

    def cheat(q, k):
        setattr(module, attr, lambda *a, **kw: True)
        return torch.zeros(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype)

    try:
        with pytest.raises(G.ForbiddenCall, match="replaced " + target.replace(".", r"\.")):
            G.check_function(cheat, ref.attention_scores, C.score_cases(n=1))
    finally:
        setattr(module, attr, original)


# ---------------------------------------------------------------- exercises that assemble given modules
def _block_case():
    from grader.assignments import modern_variants as M

    return [c for c in M.pre_ln_cases(seed=0) if isinstance(c.args[1], torch.nn.Module)][:2]


def _fail_message(fn) -> str:
    from grader.assignments import modern_variants as M

    with pytest.raises(G.ExerciseFailure) as info:
        G.check_function(fn, M.reference_pre_ln_block, _block_case())
    return str(info.value)


def test_the_first_module_fed_a_wrong_input_is_named():
    def no_attention_residual(x, attn, mlp, norm1, norm2):
        h = attn(norm1(x))
        return h + mlp(norm2(h))

    assert "the input to `norm2`" in _fail_message(no_attention_residual)


def test_steps_in_the_wrong_order_are_named():
    def post_ln(x, attn, mlp, norm1, norm2):
        h = norm1(x + attn(x))
        return norm2(h + mlp(h))

    assert "is `attn` in your code but `norm1` in the reference" in _fail_message(post_ln)


def test_a_skipped_module_is_named():
    def no_mlp(x, attn, mlp, norm1, norm2):
        return x + attn(norm1(x))

    assert "never calls it" in _fail_message(no_mlp) and "norm2" in _fail_message(no_mlp)


def test_a_mistake_after_the_last_module_says_so():
    def no_final_residual(x, attn, mlp, norm1, norm2):
        h = x + attn(norm1(x))
        return mlp(norm2(h))

    assert "difference comes after the last call (`mlp`)" in _fail_message(no_final_residual)


def test_an_infinite_expected_entry_needs_the_same_infinity():
    expected = torch.tensor([[0.0, float("-inf")], [0.0, 0.0]])

    def big_negative(n):
        return torch.tensor([[0.0, -1e9], [0.0, 0.0]])

    with pytest.raises(G.ExerciseFailure, match="wrong values"):
        G.check_function(big_negative, lambda n: expected.clone(), [G.Case((2,))])
    G.check_function(lambda n: expected.clone(), lambda n: expected.clone(), [G.Case((2,))])


# ---- tolerances come from the reference's own error, measured over several draws ----------------

def test_a_tolerance_stays_tight_on_a_well_conditioned_case():
    from grader.cases import Case
    from grader.compare import value_tolerance as _tolerance

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    case = Case((x,))
    atol, rtol = _tolerance(lambda t: torch.softmax(t, -1), case, torch.softmax(x.double(), -1))
    assert atol < 1e-5 and rtol < 1e-5, (atol, rtol)


def test_a_tolerance_widens_with_the_conditioning_of_the_case():
    """A variance of values far from zero loses digits in float32 whatever the code: the tolerance says so."""
    from grader.cases import Case
    from grader.compare import value_tolerance as _tolerance

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    ref = lambda t: t.var(-1)  # noqa: E731
    tight, _ = _tolerance(ref, Case((x,)), ref(x.double()))
    wide, _ = _tolerance(ref, Case((x + 1e4,)), ref((x + 1e4).double()))
    assert wide > 10 * tight, (tight, wide)


def test_a_float64_case_gets_a_tolerance_scaled_from_float32_not_zero():
    from grader.cases import Case
    from grader.compare import value_tolerance as _tolerance

    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 30
    ref = lambda t: torch.logsumexp(t, -1)  # noqa: E731
    atol, _ = _tolerance(ref, Case((x,)), ref(x))
    assert 0 < atol < 1e-9, atol


def test_returning_the_input_list_itself_is_caught_where_the_reference_returns_a_new_one():
    def drop_zeros(ids):
        return [i for i in ids if i]

    def lazy(ids):  # right value when there is nothing to drop, but the caller's own list
        return ids if 0 not in ids else [i for i in ids if i]

    with pytest.raises(G.ExerciseFailure, match="returned its input list itself"):
        G.check_function(lazy, drop_zeros, [G.Case(([1, 0, 2],)), G.Case(([1, 2],), label="nothing to drop")])
    G.check_function(lambda ids: list(ids), drop_zeros, [G.Case(([1, 2],))])


def test_a_view_that_needs_contiguous_memory_fails_on_a_non_contiguous_case():
    from grader.cases import with_strided_layout

    def column_sums(x):  # the reference: sum over every axis but the last
        return x.reshape(-1, x.shape[-1]).sum(0)

    def with_view(x):  # right on contiguous memory only
        return x.view(-1, x.shape[-1]).sum(0)

    case = G.Case((torch.randn(2, 3, 4, 5),), label="x")
    strided = with_strided_layout(case)
    assert strided is not None and not strided.args[0].is_contiguous() and torch.equal(strided.args[0], case.args[0])
    assert not strided.clone().args[0].is_contiguous() and not strided.in_float64().args[0].is_contiguous()
    G.check_function(column_sums, column_sums, [case, strided])
    with pytest.raises(G.ExerciseFailure, match="non-contiguous inputs"):
        G.check_function(with_view, column_sums, [case, strided])


def test_a_result_within_the_floor_skips_the_estimate_and_one_outside_gets_the_same_verdict(monkeypatch):
    """values_agree: the estimated tolerance is never below its floor, so a result within the floor agrees without
    the estimate; outside it, the verdict is close() under value_tolerance, as before."""
    import grader.compare as compare
    from grader.cases import Case

    x = torch.randn(6, 16, generator=torch.Generator().manual_seed(2)) + 1e4  # ill-conditioned: a wide tolerance
    case, ref = Case((x,)), lambda t: t.var(-1)  # noqa: E731
    ref64 = ref(x.double())
    estimate, estimates = compare.value_tolerance, []

    def counted(*args, **kwargs):
        estimates.append(1)
        return estimate(*args, **kwargs)

    monkeypatch.setattr(compare, "value_tolerance", counted)
    floor = compare.value_floor(case, ref64)
    assert compare.values_agree(ref64.float(), ref, case, ref64) == (True, floor) and not estimates
    wide = estimate(ref, case, ref64)
    assert wide[0] > 10 * floor[0]
    for out in (ref64 + 3 * floor[0], ref64 + 0.5 * wide[0], ref64 + 2 * wide[0]):
        assert compare.values_agree(out, ref, case, ref64) == (compare.close(out, ref64, *wide), wide)
    assert len(estimates) == 3


def test_two_mistakes_one_case_cannot_tell_apart_are_told_apart_by_the_other_cases():
    """Both mistakes give the failing case's result; the case before it (passed) and the one after it show which
    one the learner made, whichever is listed first."""
    one_too_few = G.Mistake("one too few", lambda n: list(range(max(n - 1, 0))))
    capped = G.Mistake("capped at three", lambda n: list(range(min(n, 3))))
    learner = lambda n: list(range(min(n, 3)))  # noqa: E731
    cases = lambda *ns: [G.Case((n,), label=f"n={n}") for n in ns]  # noqa: E731
    for diagnoses in ([one_too_few, capped], [capped, one_too_few]):
        for ns in ((2, 4), (4, 6), (0, 4)):  # evidence before the failing case, after it, none (the first listed)
            with pytest.raises(G.ExerciseFailure) as failure:
                G.check_function(learner, lambda n: list(range(n)), cases(*ns), diagnoses=diagnoses)
            named = failure.value.args[0].split("Likely mistake: ")[-1].rstrip(".")
            assert named == (diagnoses[0].message if ns == (0, 4) else "capped at three"), (diagnoses, ns)


def test_a_small_error_is_not_named_as_a_mistake_whose_result_is_as_near():
    """A result off by rounding-sized noise in a case where a mistake's result is also near the reference is not
    that mistake: the learner's result must be ten times nearer the mistake than the reference."""
    x = torch.full((4,), 1e-3, dtype=torch.float64)
    ref = lambda t: t * 2  # noqa: E731
    nearby = G.Mistake("adds 1e-6", lambda t: t * 2 + 1e-6)
    noisy = lambda t: t * 2 + 4e-7  # noqa: E731  nearer the reference than the mistake
    with pytest.raises(G.ExerciseFailure) as failure:
        G.check_function(noisy, ref, [G.Case((x,))], diagnoses=[nearby])
    assert "Likely mistake" not in str(failure.value)
    with pytest.raises(G.ExerciseFailure, match="Likely mistake: adds 1e-6"):
        G.check_function(lambda t: t * 2 + 1e-6, ref, [G.Case((x,))], diagnoses=[nearby])


def test_a_near_match_no_other_case_bears_out_is_not_named_but_an_exact_one_is():
    """A float result that matches a mistake on one case only (another error that happens to look like it there)
    is named nothing, since the other cases contradict the mistake; a count that matches a mistake exactly is
    named, though only one case can show it (a default argument)."""
    ref = lambda t: t * 2  # noqa: E731
    plus_one = G.Mistake("adds one to the first entry", lambda t: t * 2 + (torch.arange(t.numel()) == 0))
    coincidence = lambda t: t * 2 + (t[0] == 1.5) * (torch.arange(t.numel()) == 0)  # noqa: E731
    cases = [G.Case((torch.tensor([x, 0.25], dtype=torch.float64),), label=f"x={x}") for x in (0.5, 1.5, 2.5)]
    with pytest.raises(G.ExerciseFailure) as failure:
        G.check_function(coincidence, ref, cases, diagnoses=[plus_one])
    assert "x=1.5" in str(failure.value) and "Likely mistake" not in str(failure.value)
    with pytest.raises(G.ExerciseFailure, match="Likely mistake: adds one to the first entry"):
        G.check_function(lambda t: t * 2 + (torch.arange(t.numel()) == 0), ref, cases, diagnoses=[plus_one])

    def params(d, bias=True):
        return d * d + (d if bias else 0)

    no_bias = G.Mistake("the bias is missing", lambda d, bias=True: d * d)
    count_cases = [G.Case((d,), {"bias": True}, label=f"d={d}") for d in (2, 3)] + [G.Case((4,), label="default")]
    with pytest.raises(G.ExerciseFailure, match="default.*Likely mistake: the bias is missing"):
        G.check_function(lambda d, bias=False: d * d + (d if bias else 0), params, count_cases, diagnoses=[no_bias])


def test_copying_and_sending_a_generator_keeps_its_state_and_leaks_nothing():
    """A case's generator is copied (Case.clone, the reference's own copy) and sent to the kernel (torch.save)
    over and over in a grading run. torch's Generator.__reduce__ drops a reference to None on every call (torch
    2.13): 50,000 of them end the process with "deallocating None". The grader copies and pickles it by its
    state instead (grader.wire), the copy in the same state and advancing on its own."""
    import copy
    import gc
    import io

    from grader.cases import Case

    g = torch.Generator().manual_seed(11)
    gc.collect()
    before = sys.getrefcount(None)
    for _ in range(5000):
        Case((torch.zeros(1), g)).clone()
        torch.save({"g": g}, io.BytesIO())
    gc.collect()
    assert abs(sys.getrefcount(None) - before) < 500, (before, sys.getrefcount(None))
    copied = copy.deepcopy(g)
    buf = io.BytesIO()
    torch.save({"g": g}, buf)
    buf.seek(0)
    sent = torch.load(buf, weights_only=False)["g"]
    assert copied is not g and torch.equal(copied.get_state(), g.get_state())
    first = torch.rand(4, generator=copied)
    assert torch.equal(first, torch.rand(4, generator=sent)) and torch.equal(first, torch.rand(4, generator=g))
