"""course_lib.seq2seq: the 2017 encoder-decoder, its loss, its schedule, greedy and beam decoding."""

from __future__ import annotations

import time
from functools import lru_cache

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import seq2seq as S

PAD, BOS, EOS = 0, 1, 2
V = 12            # vocabulary of the reversal task: 3 specials + 9 symbols
MAX_SRC = 6       # longest source sequence of the task


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def tiny(seed=0, **overrides) -> S.Seq2SeqTransformer:
    torch.manual_seed(seed)
    return S.Seq2SeqTransformer(S.Seq2SeqConfig.preset("tiny", **overrides)).eval()


def reversal_batch(g: torch.Generator, batch: int = 64, lo: int = 2, hi: int = MAX_SRC):
    """Sources of 2..6 symbols, right-padded; targets: the symbols reversed, then EOS, then padding."""
    n = torch.randint(lo, hi + 1, (batch, 1), generator=g)
    pos = torch.arange(hi)[None]
    src = torch.randint(3, V, (batch, hi), generator=g).masked_fill(pos >= n, PAD)
    rev = src.gather(1, (n - 1 - pos).clamp(min=0)).masked_fill(pos >= n, PAD)
    tgt = torch.cat([rev, torch.full((batch, 1), PAD)], dim=1).scatter(1, n, EOS)
    return src, tgt


def train_reverser(steps: int = 500, seed: int = 0) -> S.Seq2SeqTransformer:
    model = tiny(seed, vocab_size=V, dim=32, n_heads=2, mlp_hidden=64, n_enc_layers=1, n_dec_layers=1).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    peak = S.transformer_lr(50, 32, 50)  # the 2017 schedule, rescaled to peak at lr=1e-2 after 50 steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: S.transformer_lr(s + 1, 32, 50) / peak)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        loss = model.loss(*reversal_batch(g))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()


@pytest.fixture(scope="module")
def reverser():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    start = time.perf_counter()
    model = train_reverser()
    torch.set_num_threads(n)
    return model, time.perf_counter() - start


# ====================================================== loss and schedule
@settings(max_examples=30, deadline=None)
@given(smoothing=st.floats(0.0, 1.0), n=st.integers(1, 12), classes=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_label_smoothed_loss_equals_torch_cross_entropy(smoothing, n, classes, seed):
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(2, n, classes, generator=g)
    target = torch.randint(0, classes, (2, n), generator=g)
    target[0, 0] = -100  # at least one ignored position
    ours = S.label_smoothed_loss(logits, target, smoothing, ignore_index=-100)
    if (target != -100).any():
        ref = F.cross_entropy(logits.transpose(1, 2), target, label_smoothing=smoothing, ignore_index=-100)
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_label_smoothed_loss_reductions_agree_with_torch():
    g = torch.Generator().manual_seed(0)
    logits, target = torch.randn(5, 7, generator=g), torch.tensor([1, 0, 3, 0, 6])
    for reduction in ("sum", "none"):
        ref = F.cross_entropy(logits, target, label_smoothing=0.1, ignore_index=0, reduction=reduction)
        torch.testing.assert_close(S.label_smoothed_loss(logits, target, 0.1, 0, reduction), ref)


def test_lr_schedule_rises_linearly_peaks_at_warmup_then_decays_as_inverse_sqrt():
    d, w = 512, 4000
    lrs = [S.transformer_lr(t, d, w) for t in range(0, 3 * w)]
    assert lrs[0] == 0.0
    assert max(range(len(lrs)), key=lrs.__getitem__) == w
    assert lrs[w] == pytest.approx((d * w) ** -0.5)
    assert lrs[w // 2] == pytest.approx(lrs[w] / 2)                   # linear warmup
    assert lrs[2 * w] == pytest.approx(lrs[w] / 2**0.5)              # then 1 / sqrt(step)


def test_gnmt_length_penalty_is_one_for_one_token_and_grows_with_alpha():
    lengths = torch.tensor([1, 5, 20])
    assert S.gnmt_length_penalty(lengths, 0.6)[0].item() == pytest.approx(1.0)
    torch.testing.assert_close(S.gnmt_length_penalty(lengths, 0.0), torch.ones(3))
    assert torch.all(S.gnmt_length_penalty(lengths, 1.0) == (5 + lengths) / 6)


# ====================================================== the model
def test_presets_have_the_papers_parameter_counts():
    """Table 3 reports 65M (base) and 213M (big) with a shared 37k BPE vocabulary."""
    with torch.device("meta"):
        base = S.Seq2SeqTransformer(S.Seq2SeqConfig.preset("transformer-base"))
        big = S.Seq2SeqTransformer(S.Seq2SeqConfig.preset("transformer-big"))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731 (shared tensors counted once)
    assert 60e6 < count(base) < 66e6 and 205e6 < count(big) < 220e6


def test_shared_embeddings_tie_source_target_and_output_projection():
    model = tiny()
    assert model.src_emb.weight is model.tgt_emb.weight is model.out_proj.weight
    untied = S.Seq2SeqTransformer(S.Seq2SeqConfig.preset("tiny-untied"))
    assert untied.src_emb.weight is not untied.tgt_emb.weight and untied.out_proj.weight.shape == (20, 64)
    src, tgt = torch.randint(3, 16, (2, 5)), torch.randint(3, 20, (2, 4))
    assert untied(src, tgt).shape == (2, 4, 20)


@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_outputs_do_not_depend_on_how_much_padding_follows_the_source(attn_impl):
    model = tiny(attn_impl=attn_impl)
    src = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, PAD, PAD, PAD]])
    tgt = torch.tensor([[BOS, 9, 10]])
    with torch.no_grad():
        torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-5, rtol=0)
        lengths = torch.tensor([4])
        garbage = torch.tensor([[5, 6, 7, 8, 11, 12, 13]])  # non-pad junk after the true length
        mem = model.encode(garbage, src_lengths=lengths)
        torch.testing.assert_close(model.decode(tgt, mem, model.source_mask(garbage, lengths)), model(src, tgt),
                                   atol=1e-5, rtol=0)


def test_eager_and_sdpa_attention_give_the_same_logits():
    eager, sdpa = tiny(attn_impl="eager"), tiny(attn_impl="sdpa")
    src, tgt = torch.tensor([[5, 6, 7, PAD], [8, 9, 10, 11]]), torch.tensor([[BOS, 4, 5], [BOS, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(eager(src, tgt), sdpa(src, tgt), atol=1e-5, rtol=0)


@lru_cache(maxsize=None)
def _shared_tiny() -> S.Seq2SeqTransformer:
    return tiny(seed=3)


@settings(max_examples=15, deadline=None)
@given(t=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_changing_future_target_tokens_does_not_change_earlier_logits(t, seed):
    model = _shared_tiny()
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(3, 16, (2, 6), generator=g), torch.randint(3, 16, (2, 8), generator=g)
    changed = tgt.clone()
    changed[:, t:] = torch.randint(3, 16, (2, 8 - t), generator=g)
    with torch.no_grad():
        torch.testing.assert_close(model(src, changed)[:, :t], model(src, tgt)[:, :t], atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_decoding_with_cache_equals_full_decode(attn_impl):
    model = tiny(attn_impl=attn_impl)
    src, tgt = torch.randint(3, 16, (2, 6)), torch.randint(3, 16, (2, 9))
    with torch.no_grad():
        memory = model.encode(src)
        mask = model.source_mask(src)
        full = model.decode(tgt, memory, mask)
        caches = model.make_caches(2, 9)
        steps = [model.decode(tgt[:, i:i + 1], memory, mask, caches=caches) for i in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


# ====================================================== learning and decoding
def test_tiny_transformer_learns_to_reverse_sequences(reverser):
    model, seconds = reverser
    src, tgt = reversal_batch(torch.Generator().manual_seed(123), batch=200)
    out = S.greedy_decode(model, src, MAX_SRC + 1)
    out = F.pad(out, (0, tgt.shape[1] - out.shape[1]), value=PAD)
    accuracy = (out == tgt).all(dim=1).float().mean().item()
    assert accuracy >= 0.9, f"only {accuracy:.0%} of sequences reversed exactly"
    assert seconds < 20, f"training took {seconds:.1f} s"


@pytest.mark.parametrize("trained", [True, False], ids=["trained", "random"])
def test_greedy_decoding_with_cache_equals_without(reverser, trained):
    model = reverser[0] if trained else tiny(vocab_size=V)
    src, _ = reversal_batch(torch.Generator().manual_seed(5), batch=16)
    cached = S.greedy_decode(model, src, 10, use_cache=True)
    assert torch.equal(cached, S.greedy_decode(model, src, 10, use_cache=False))


@pytest.mark.parametrize("trained", [True, False], ids=["trained", "random"])
def test_beam_search_with_beam_one_equals_greedy(reverser, trained):
    model = reverser[0] if trained else tiny(vocab_size=V)
    src, _ = reversal_batch(torch.Generator().manual_seed(6), batch=16)
    tokens, scores = S.beam_search(model, src, beam_size=1, max_len=10)
    assert tokens.shape[:2] == (16, 1) and scores.shape == (16, 1)
    assert torch.equal(tokens[:, 0], S.greedy_decode(model, src, 10))


@pytest.mark.parametrize("trained", [True, False], ids=["trained", "random"])
def test_beam_search_with_cache_equals_without(reverser, trained):
    model = reverser[0] if trained else tiny(vocab_size=V)
    src, _ = reversal_batch(torch.Generator().manual_seed(7), batch=8)
    a = S.beam_search(model, src, beam_size=3, max_len=8, use_cache=True)
    b = S.beam_search(model, src, beam_size=3, max_len=8, use_cache=False)
    assert torch.equal(a[0], b[0])
    torch.testing.assert_close(a[1], b[1])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_beam_scores_are_sorted_and_equal_length_normalised_log_probabilities(alpha):
    model = tiny(vocab_size=V, seed=1)
    src, _ = reversal_batch(torch.Generator().manual_seed(8), batch=4)
    tokens, scores = S.beam_search(model, src, beam_size=4, max_len=6, alpha=alpha)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])
    # re-score every hypothesis by teacher forcing: sum of log-probs up to and including EOS
    hyp = tokens.flatten(0, 1)
    n = hyp.shape[1]
    ends_with_eos = (hyp == EOS).any(dim=1)
    length = torch.where(ends_with_eos, (hyp == EOS).float().argmax(dim=1) + 1, torch.full_like(hyp[:, 0], n))
    keep = torch.arange(n)[None] < length[:, None]
    with torch.no_grad():
        logp = F.log_softmax(model(src.repeat_interleave(4, 0), S.shift_right(hyp, BOS)), dim=-1)
    total = (logp.gather(-1, hyp[..., None]).squeeze(-1) * keep).sum(dim=1)
    expected = (total / S.gnmt_length_penalty(length, alpha)).view(4, 4)
    torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-4)


def test_beam_search_finds_a_hypothesis_at_least_as_good_as_greedy(reverser):
    model = reverser[0]
    src, _ = reversal_batch(torch.Generator().manual_seed(9), batch=8)
    _, greedy_score = S.beam_search(model, src, beam_size=1, max_len=8, alpha=0.0)
    _, beam_score = S.beam_search(model, src, beam_size=4, max_len=8, alpha=0.0)
    assert torch.all(beam_score[:, 0] >= greedy_score[:, 0] - 1e-5)


def test_decoding_stops_at_eos_and_pads_after_it(reverser):
    model = reverser[0]
    src = torch.tensor([[3, 4, 5, PAD, PAD, PAD], [6, 7, 8, 9, 10, 11]])
    out = S.greedy_decode(model, src, 20)
    beams, _ = S.beam_search(model, src, beam_size=2, max_len=20)
    for tokens in (out, beams[:, 0]):
        assert tokens.shape[1] < 20, "decoding ran to max_len although every row produced EOS"
        assert tokens[0, :4].tolist() == [5, 4, 3, EOS] and torch.all(tokens[0, 4:] == PAD)
        after_eos = (tokens == EOS).long().cumsum(dim=1) - (tokens == EOS).long() > 0
        assert torch.all(tokens[after_eos] == PAD)


# ====================================================== bad input
def test_shared_embeddings_with_two_vocabularies_are_rejected():
    with pytest.raises(ValueError, match=r"share_embeddings needs one vocabulary.*16.*20"):
        S.Seq2SeqConfig.preset("tiny", tgt_vocab_size=20)


def test_d_model_not_divisible_by_heads_is_rejected():
    with pytest.raises(ValueError, match=r"dim=64 must be divisible by n_heads=5"):
        S.Seq2SeqConfig.preset("tiny", n_heads=5)


def test_sequences_longer_than_max_len_are_rejected_naming_both_lengths():
    model = tiny()
    with pytest.raises(ValueError, match=r"source of 65 positions exceeds max_len=64"):
        model.encode(torch.full((1, 65), 5))
    with pytest.raises(ValueError, match=r"max_len=100 exceeds the model's max_len=64"):
        S.greedy_decode(model, torch.full((1, 3), 5), 100)


def test_unknown_preset_is_rejected_with_the_known_names():
    with pytest.raises(ValueError, match=r"unknown preset 'transformer-huge'.*transformer-base"):
        S.Seq2SeqConfig.preset("transformer-huge")
