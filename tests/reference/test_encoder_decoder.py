"""Specifications of the chapter 06 additions to course_lib.seq2seq."""

import torch
import torch.nn.functional as F

from course_lib.multi_head import MultiHeadAttention
from course_lib.seq2seq import cross_attention, decoder_self_attention_mask, label_smoothed_loss


def test_decoder_mask_is_causal_when_nothing_is_padded():
    m = decoder_self_attention_mask(torch.tensor([5, 5]), 5)
    assert m.shape == (2, 5, 5) and m.dtype == torch.bool
    assert torch.equal(m[0], torch.ones(5, 5, dtype=torch.bool).tril())


def test_decoder_mask_hides_padded_keys_only():
    m = decoder_self_attention_mask(torch.tensor([2, 0, 4]), 4)
    assert not m[0, :, 2:].any() and torch.equal(m[0, :, :2], torch.ones(4, 2, dtype=torch.bool).tril())
    assert not m[1].any()
    assert torch.equal(m[2], torch.ones(4, 4, dtype=torch.bool).tril())


def test_cross_attention_matches_the_module():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, kv_dim=16, bias=False)
    x, mem = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])[:, None, :]
    ours = cross_attention(x, mem, mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight, mha.out_proj.weight, 4,
                           mask)
    with torch.no_grad():
        theirs = mha(x, mem, mask=mask)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_cross_attention_ignores_masked_memory():
    torch.manual_seed(1)
    w = [torch.randn(8, 8) for _ in range(4)]
    x, mem = torch.randn(1, 2, 8), torch.randn(1, 4, 8)
    mask = torch.tensor([[True, True, False, False]])
    changed = mem.clone()
    changed[:, 2:] = 100.0
    a = cross_attention(x, mem, *w, 2, mask)
    b = cross_attention(x, changed, *w, 2, mask)
    assert torch.allclose(a, b)


def test_label_smoothed_loss_keeps_float64_and_matches_torch():
    logits = torch.randn(3, 4, 7, dtype=torch.float64)
    target = torch.randint(1, 7, (3, 4))
    target[0, 2:] = 0
    ours = label_smoothed_loss(logits, target, 0.1, ignore_index=0)
    assert ours.dtype == torch.float64
    ref = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=0.1)
    assert torch.allclose(ours, ref)


def test_label_smoothed_loss_upcasts_half_precision():
    logits = torch.randn(2, 5, dtype=torch.bfloat16)
    assert label_smoothed_loss(logits, torch.tensor([1, 2])).dtype == torch.float32
