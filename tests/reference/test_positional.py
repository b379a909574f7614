"""course_lib.positional.offset_rotation and the functional BPE helpers of course_lib.tokenizer
(most_frequent_pair, train_merges, apply_merges, vocab_from_merges): the references of chapter 01's exercises."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import positional as P
from course_lib import tokenizer as T


# ---------------------------------------------------------------- offset_rotation
@pytest.mark.parametrize("dim", [2, 4, 16, 64])
@pytest.mark.parametrize("k", [0, 1, 3, 17, -5])
def test_offset_rotation_moves_every_encoding_k_positions_on(dim, k):
    pe = P.sinusoidal_encoding(80, dim, dtype=torch.float64)
    r = P.offset_rotation(k, dim, dtype=torch.float64)
    lo, hi = max(0, -k), min(80, 80 - k)
    assert torch.allclose(pe[lo:hi] @ r, pe[lo + k:hi + k], atol=1e-12)


@given(k=st.integers(-200, 200), start=st.integers(0, 500), dim=st.sampled_from([2, 6, 8, 32]),
       base=st.sampled_from([100.0, 10000.0]))
@settings(max_examples=60, deadline=None)
def test_offset_rotation_does_not_depend_on_the_position(k, start, dim, base):
    pe = P.sinusoidal_encoding(1, dim, base, offset=start, dtype=torch.float64)
    moved = P.sinusoidal_encoding(1, dim, base, offset=start + k, dtype=torch.float64) if start + k >= 0 else None
    r = P.offset_rotation(k, dim, base, dtype=torch.float64)
    if moved is not None:
        assert torch.allclose(pe @ r, moved, atol=1e-9)


def test_offset_rotation_is_orthogonal_block_diagonal_and_composes():
    d = 12
    r3, r4, r7 = (P.offset_rotation(k, d, dtype=torch.float64) for k in (3, 4, 7))
    assert torch.allclose(r3 @ r3.T, torch.eye(d, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(r3 @ r4, r7, atol=1e-12)
    assert torch.allclose(P.offset_rotation(-3, d, dtype=torch.float64), r3.T, atol=1e-12)
    assert torch.equal(P.offset_rotation(0, d, dtype=torch.float64), torch.eye(d, dtype=torch.float64))
    off_blocks = r7.clone()
    for i in range(0, d, 2):
        off_blocks[i:i + 2, i:i + 2] = 0
    assert torch.equal(off_blocks, torch.zeros(d, d, dtype=torch.float64))


def test_offset_rotation_dtype_and_odd_width():
    assert P.offset_rotation(2, 8).dtype == torch.float32
    assert P.offset_rotation(2, 8, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(ValueError, match="dim must be even.*got 7"):
        P.offset_rotation(1, 7)


# ---------------------------------------------------------------- functional BPE
def test_most_frequent_pair_counts_overlaps_and_breaks_ties_by_the_smallest_pair():
    assert T.most_frequent_pair([5, 5, 5]) == (5, 5)
    assert T.most_frequent_pair([3, 1, 2, 1, 2, 3, 1]) == (1, 2)  # (3, 1) and (1, 2) both twice
    assert T.most_frequent_pair([9, 8, 1, 2]) == (1, 2)  # all seen once: the smallest pair wins
    assert T.most_frequent_pair([7]) is None and T.most_frequent_pair([]) is None


@given(text=st.text(alphabet="ab c\nd'é😀", max_size=120), n=st.integers(0, 40))
@settings(max_examples=60, deadline=None)
def test_train_merges_learns_what_the_tokenizer_learns_without_a_pattern(text, n):
    tok = T.Tokenizer(pattern=None)
    tok.train(text, 256 + n)
    assert T.train_merges(list(text.encode("utf-8")), n) == tok.merge_list


@given(train=st.text(alphabet="abc dé", max_size=80), text=st.text(max_size=60))
@settings(max_examples=60, deadline=None)
def test_apply_merges_encodes_like_the_tokenizer_and_round_trips(train, text):
    tok = T.Tokenizer(pattern=None)
    tok.train(train, 280)
    merges = tok.merge_list
    ids = T.apply_merges(list(text.encode("utf-8")), merges)
    assert ids == tok.encode(text, allowed_special="none")
    vocab = T.vocab_from_merges(merges)
    assert vocab == tok.vocab
    assert b"".join(vocab[i] for i in ids).decode("utf-8") == text


def test_train_merges_classic_example_and_first_id():
    ids = list(b"aaabdaaabac")
    assert T.train_merges(ids, 10) == [(97, 97), (97, 98), (256, 257)]
    assert T.train_merges(ids, 2) == [(97, 97), (97, 98)]
    assert T.train_merges([1] * 8, 5, first_id=10) == [(1, 1), (10, 10)]  # then (11, 11) once only
    assert ids == list(b"aaabdaaabac")  # the input is not modified
