"""The chapter 07 additions: functional swiglu / next_token_loss and the grading references."""

import torch
import torch.nn.functional as F

import grader as grading
from course_lib.decoder_lm import DecoderLM, DecoderLMConfig, next_token_loss, sample_next_token, swiglu
from course_lib.mlp import SwiGLU
from course_lib.positional import apply_rope, rope_cos_sin
from grader.assignments import modern_variants as modern


def test_swiglu_matches_module():
    torch.manual_seed(0)
    m = SwiGLU(8, 21)
    x = torch.randn(2, 5, 8)
    got = swiglu(x, m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight)
    torch.testing.assert_close(got, m(x))


def test_next_token_loss_matches_model_loss():
    torch.manual_seed(0)
    model = DecoderLM(DecoderLMConfig.preset("tiny", vocab_size=11))
    ids = torch.randint(0, 11, (3, 9))
    logits = model(ids)
    # the model's loss runs the model on ids[:, :-1]; causal masking makes the rows identical
    torch.testing.assert_close(next_token_loss(logits, ids), model.loss(ids), rtol=1e-5, atol=1e-5)


def test_next_token_loss_ignore_index_and_shift():
    logits = torch.randn(2, 4, 5, dtype=torch.float64)
    ids = torch.tensor([[1, 2, 3, 4], [0, 0, 1, 0]])
    full = next_token_loss(logits, ids)
    manual = -torch.stack([logits[b, t].log_softmax(-1)[ids[b, t + 1]] for b in range(2) for t in range(3)]).mean()
    torch.testing.assert_close(full, manual)
    ign = next_token_loss(logits, ids, ignore_index=0)
    kept = [(0, 0), (0, 1), (0, 2), (1, 1)]
    manual = -torch.stack([logits[b, t].log_softmax(-1)[ids[b, t + 1]] for b, t in kept]).mean()
    torch.testing.assert_close(ign, manual)
    assert ign.dtype == torch.float64


def test_grading_references_agree_with_course_lib():
    x = torch.randn(2, 3, 6, 8)
    pos = torch.tensor([4, 0, 9, 2, 2, 7])
    torch.testing.assert_close(modern.reference_apply_rope(x, pos, 100.0),
                               apply_rope(x, *rope_cos_sin(pos, 8, 100.0)), rtol=1e-5, atol=1e-5)
    logits = torch.randn(4, 9)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(modern.reference_sample_next_token(logits, 0.7, 3, g1),
                       sample_next_token(logits, 0.7, 3, False, g2))


def _pre(x, a, m, n1, n2):
    h = x + a(n1(x))
    return h + m(n2(h))


def _sample(logits, t, k, gen):
    logits = logits / t
    if k is not None:
        kth = logits.topk(min(k, logits.shape[-1]), -1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)


def test_independent_implementations_pass_the_hidden_checks():
    grading.check_function(_pre, modern.reference_pre_ln_block, modern.pre_ln_cases(3),
                           diagnoses=modern.PRE_LN_MISTAKES, check_grad=True)
    grading.check_function(lambda x, g, u, d: ((x @ g.T) * torch.sigmoid(x @ g.T) * (x @ u.T)) @ d.T,
                           modern.reference_swiglu, modern.swiglu_cases(3), forbidden=modern.SILU, check_grad=True)
    grading.check_function(_sample, modern.reference_sample_next_token, modern.sample_cases(3))


def test_forbidden_silu_is_caught():
    try:
        grading.check_function(lambda x, g, u, d: (F.silu(x @ g.T) * (x @ u.T)) @ d.T,
                               modern.reference_swiglu, modern.swiglu_cases(0), forbidden=modern.SILU)
    except grading.ForbiddenCall:
        return
    raise AssertionError("F.silu was not caught")
