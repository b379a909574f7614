"""Random cases and likely mistakes for the exercises of chapter 01 (tokens, embeddings and positions).

Two families:

* BPE on lists of ids (``most_frequent_pair``, ``merge``, ``train_bpe``,
  ``encode``): results are ids, pairs and lists, compared by value with
  :func:`grader.assignments.check_function`. Cases cover empty and one-id
  inputs, runs like ``[5, 5, 5]`` where occurrences overlap, ties between
  pairs, ids above 255, and text in any script (accents, CJK, emoji).
* Position tables (``sinusoidal_encoding``, ``offset_rotation``): the inputs
  are integers, so :func:`check_table` compares the learner's tensor with the
  float64 reference within a tolerance that grows with the largest angle
  (``n_positions`` or ``|k|``) and with the precision of the learner's dtype:
  float32 or float64 results both pass when computed carefully.

Each :class:`~grader.assignments.Mistake` is a plausible wrong implementation
written as a variant of the reference; the grader names the one a learner's
result matches.
"""

from __future__ import annotations

import functools
import random

import torch
from torch import Tensor

from course_lib import positional as _P
from course_lib import tokenizer as _T
from grader.cases import Case
from grader.diagnosis import Mistake
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

# --------------------------------------------------------------------------
# References with the exercises' signatures
# --------------------------------------------------------------------------
most_frequent_pair = _T.most_frequent_pair
merge = _T.merge


def train_bpe(ids: list[int], n_merges: int) -> list[tuple[int, int]]:
    """Reference of exercise 3: merge ``k`` becomes id ``256 + k``."""
    return _T.train_merges(ids, n_merges)


def encode(text: str, merges: list[tuple[int, int]]) -> list[int]:
    """Reference of exercise 4: UTF-8 bytes, then the merges in training order."""
    return _T.apply_merges(list(text.encode("utf-8")), merges)


def sinusoidal_encoding(n_positions: int, dim: int, base: float = 10000.0) -> Tensor:
    """Reference of exercise 5, in float64."""
    return _P.sinusoidal_encoding(n_positions, dim, base, dtype=torch.float64)


def offset_rotation(k: int, dim: int, base: float = 10000.0) -> Tensor:
    """Reference of exercise 6, in float64."""
    return _P.offset_rotation(k, dim, base, dtype=torch.float64)


# --------------------------------------------------------------------------
# Cases: BPE
# --------------------------------------------------------------------------
_TEXTS = [
    "low lower lowest newer wider",
    "the cat sat on the mat; the mat sat on the cat",
    "aaabdaaabac",
    "héllo wörld, naïve café déjà vu",
    "日本語のテキストと日本語の単語",
    "emoji 😀😀👍🏽 family 👨‍👩‍👧 😀",
    "x = f(a_b, 12345) + f(a_b, 678)\n\tx += 1\n",
    "banana bandana ananas",
    "ab" * 9 + "ba" * 3,
    "Ünïcödé\r\n\r\n  trailing   ",
]


def _random_ids(rng: random.Random, n: int, alphabet: int, high: int = 0) -> list[int]:
    symbols = rng.sample(range(high, high + max(alphabet, 1) * 3), alphabet)
    return [rng.choice(symbols) for _ in range(n)]


def pair_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """``(ids,)`` for ``most_frequent_pair``: short, empty, overlapping runs, ties, ids above 255, real text."""
    rng = random.Random(seed)
    fixed = [
        ([], "empty list"), ([7], "a single id"), ([3, 4], "two ids"), ([4, 3], "two ids, larger first"),
        ([1, 9, 2, 3], "every pair once, the pair seen last neither the smallest nor the largest"),
        ([1, 2, 1, 2, 3], "one pair twice, two pairs once"),
        ([1, 2, 1], "two pairs, once each"),
        ([5, 5, 5], "a run of three equal ids (overlapping pairs)"),
        ([9, 8, 1, 2], "every pair once (a tie)"),
        ([3, 1, 2, 1, 2, 3, 1], "two pairs tied at two"),
        ([2, 2, 2, 2, 1, 3, 1, 3, 1, 3], "a run against a repeated pair"),
        ([300, 7, 300, 7, 256, 256, 256], "ids above 255, overlapping run tied"),
    ]
    cases = [Case((ids,), label=f"ids {ids} ({what})") for ids, what in fixed]
    for i in range(n):
        if i % 3 == 0:
            text = rng.choice(_TEXTS)
            ids = list(text.encode("utf-8"))
            label = f"the UTF-8 bytes of {text!r}"
        elif i % 3 == 1:
            length = rng.randint(2, 7)
            ids = _random_ids(rng, length, rng.randint(2, 4))
            label = f"random ids of length {length}: {ids}"
        else:
            length = rng.randint(2, 40)
            ids = _random_ids(rng, length, rng.randint(1, 5), high=rng.choice([0, 0, 250]))
            label = f"random ids of length {length}: {ids}"
        cases.append(Case((ids,), label=label))
    return cases


def merge_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """``(ids, pair, new_id)`` for ``merge``: runs, pairs at both ends, absent pairs, reversed pairs."""
    rng = random.Random(seed)
    fixed = [
        ([], (1, 2), 256, "empty list"),
        ([1], (1, 2), 256, "a single id"),
        ([1, 2], (1, 2), 256, "the whole list is the pair"),
        ([5, 5, 5], (5, 5), 9, "a run of three"),
        ([5, 5, 5, 5, 5], (5, 5), 9, "a run of five"),
        ([2, 1, 1, 2, 2, 1], (1, 2), 300, "the reversed pair occurs too"),
        ([1, 2, 3, 1, 2], (1, 2), 256, "the pair at both ends"),
        ([4, 3, 4, 3, 9], (3, 4), 260, "an overlapping pair at the start and the end"),
        ([7, 8, 9], (8, 7), 256, "the pair is absent"),
    ]
    cases = [Case((ids, pair, new), label=f"merge({ids}, {pair}, {new}) ({what})") for ids, pair, new, what in fixed]
    for _ in range(n):
        length = rng.randint(2, 40)
        ids = _random_ids(rng, length, rng.randint(1, 4))
        j = rng.randrange(length - 1)
        pair = (ids[j], ids[j + 1]) if rng.random() < 0.85 else (ids[-1], ids[0])
        new = rng.choice([256, 257, 300, 1000])
        cases.append(Case((ids, pair, new), label=f"merge({ids}, {pair}, {new})"))
    return cases


def train_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(ids, n_merges)`` for ``train_bpe``: texts and random bytes, with and without an early stop."""
    rng = random.Random(seed)
    cases = [
        Case(([], 3), label="empty list, 3 merges"),
        Case(([97], 2), label="one byte, 2 merges"),
        Case((list(b"aaabdaaabac"), 10), label="'aaabdaaabac', 10 merges (stops after 3)"),
        Case((list(b"aaabdaaabac"), 0), label="'aaabdaaabac', 0 merges"),
        Case((list(b"abcdabcd"), 1), label="'abcdabcd', 1 merge (a three-way tie)"),
        Case(([1] * 8, 4), label="eight equal ids, 4 merges"),
    ]
    for i in range(n):
        if i % 2 == 0:
            text = rng.choice(_TEXTS)
            ids, label = list(text.encode("utf-8")), f"the bytes of {text!r}"
        else:
            length = rng.randint(10, 80)
            ids = _random_ids(rng, length, rng.randint(2, 5))
            label = f"random bytes of length {length}"
        k = rng.choice([1, 2, 5, 10, 30])
        cases.append(Case((ids, k), label=f"{label}, {k} merges"))
    # last, whatever the seed: a pair seen twice that one merge replaces once (its occurrences overlap)
    cases.append(Case(([7, 7, 7], 2), label="three equal ids, 2 merges: the pair (7, 7) occurs twice (overlapping), "
                                            "though merging it replaces it once"))
    return cases


def encode_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(text, merges)`` for ``encode``: merges learned on one text, applied to it and to others (any script)."""
    rng = random.Random(seed)
    bcab = _T.train_merges(list(b"bcbcbcabab"), 2)  # [(b, c), (a, b)]
    cases = [
        Case(("", bcab), label="empty text"),
        Case(("aaab", _T.train_merges(list(b"aaabdaaabac"), 10)), label="'aaab' with the merges of 'aaabdaaabac'"),
        Case(("abc", bcab), label="'abc' with merges [(b, c), (a, b)] (the pair learned first wins)"),
        Case(("anything", []), label="no merges"),
        Case(("naïve 日本", []), label="'naïve 日本', no merges (accents, and characters above U+00FF)"),
    ]
    for _ in range(n):
        train = rng.choice(_TEXTS)
        k = rng.choice([3, 10, 25, 60])
        merges = _T.train_merges(list(train.encode("utf-8")), k)
        text = train if rng.random() < 0.4 else rng.choice(_TEXTS)
        if rng.random() < 0.3:
            text = text[::-1]
        cases.append(Case((text, merges), label=f"{text!r} with {len(merges)} merges learned on {train!r}"))
    # last, whatever the seed: a merge that does not apply, then one that does
    cases.append(Case(("abab", [(120, 120), (97, 98)]), label="'abab' with merges [(x, x), (a, b)]: the first "
                                                             "does not occur in the text, the second does"))
    return cases


# --------------------------------------------------------------------------
# Cases: position tables
# --------------------------------------------------------------------------
def sinusoidal_cases(seed: int = 0, n: int = 14) -> list[Case]:
    """``(n_positions, dim[, base])``: one position, width 2, long and wide tables, other bases."""
    rng = random.Random(seed)
    cases = [Case((1, 4), label="n_positions=1, dim=4"), Case((6, 2), label="n_positions=6, dim=2"),
             Case((50, 8), label="n_positions=50, dim=8"), Case((128, 64), label="n_positions=128, dim=64")]
    for i in range(n):
        n_pos, d = rng.randint(1, 100), 2 * rng.randint(1, 32)
        if i % 3 == 2:
            base = rng.choice([100.0, 1000.0, 500000.0])
            cases.append(Case((n_pos, d), {"base": base}, label=f"n_positions={n_pos}, dim={d}, base={base:g}"))
        else:
            cases.append(Case((n_pos, d), label=f"n_positions={n_pos}, dim={d}"))
    return cases


def rotation_cases(seed: int = 0, n: int = 14) -> list[Case]:
    """``(k, dim[, base])``: k = 0, 1, negative and large offsets, width 2 to 64, other bases."""
    rng = random.Random(seed)
    cases = [Case((1, 2), label="k=1, dim=2"), Case((0, 6), label="k=0, dim=6"),
             Case((3, 4), label="k=3, dim=4"), Case((-5, 8), label="k=-5, dim=8")]
    for i in range(n):
        k, d = rng.randint(-40, 120), 2 * rng.randint(1, 32)
        if i % 3 == 2:
            base = rng.choice([100.0, 1000.0])
            cases.append(Case((k, d), {"base": base}, label=f"k={k}, dim={d}, base={base:g}"))
        else:
            cases.append(Case((k, d), label=f"k={k}, dim={d}"))
    return cases


# --------------------------------------------------------------------------
# Likely mistakes: BPE
# --------------------------------------------------------------------------
def _counts(ids):
    return _T.get_pair_counts(ids)


def _pair_first_seen(ids):
    c = _counts(ids)
    return max(c, key=c.get) if c else None


def _pair_last_seen(ids):
    c = _counts(ids)
    return max(reversed(list(c)), key=c.get) if c else None


def _pair_largest(ids):
    c = _counts(ids)
    return max(c, key=lambda p: (c[p], p)) if c else None


def _pair_non_overlapping(ids):
    c = _counts(ids)
    if not c:
        return None
    n = {p: (len(ids) - len(_T.merge(list(ids), p, -1))) for p in c}
    return min(n, key=lambda p: (-n[p], p))


def _pair_even_positions(ids):
    ids = list(ids)
    c = {}
    for i in range(0, len(ids) - 1, 2):
        c[(ids[i], ids[i + 1])] = c.get((ids[i], ids[i + 1]), 0) + 1
    return min(c, key=lambda p: (-c[p], p)) if c else None


def _pair_wrapping(ids):
    ids = list(ids)
    if len(ids) < 2:
        return None
    c = _T.get_pair_counts(ids + ids[:1])
    return min(c, key=lambda p: (-c[p], p))


PAIR_MISTAKES = [
    Mistake("overlapping occurrences are not counted: in [5, 5, 5] the pair (5, 5) occurs twice "
            "(count every adjacent position, zip(ids, ids[1:])).", _pair_non_overlapping),
    Mistake("ties go to the pair seen first; among equally frequent pairs return the smallest (a, b) "
            "(compare (count, pair) keys, e.g. min over (-count, pair)).", _pair_first_seen),
    Mistake("ties go to the largest pair; among equally frequent pairs return the *smallest* (a, b).", _pair_largest),
    Mistake("ties go to the pair seen last; among equally frequent pairs return the smallest (a, b).", _pair_last_seen),
    Mistake("the count is returned with the pair; return only the pair (a, b).",
            lambda ids: (lambda p: None if p is None else (p, _counts(ids)[p]))(_T.most_frequent_pair(ids))),
    Mistake("only pairs starting at even positions are counted; every adjacent position starts a pair (step 1, not 2).",
            _pair_even_positions),
    Mistake("the least frequent pair is returned: pick the *largest* count.",
            lambda ids: (lambda c: min(c, key=lambda p: (c[p], p)) if c else None)(_counts(ids))),
    Mistake("the sequence wraps around: (last id, first id) is not a pair; only neighbours count.", _pair_wrapping),
    Mistake("the count is returned instead of the pair.",
            lambda ids: (lambda p: None if p is None else _counts(ids)[p])(_T.most_frequent_pair(ids))),
]


def _merge_scan(ids, pair, new_id, *, step=2, stop_before_last=False, either_order=False):
    """``merge`` as a left-to-right scan, with one of its likely slips: ``step=1`` after a match (occurrences
    overlap), ``stop_before_last`` (the loop ends one id early), ``either_order`` (the reversed pair matches)."""
    pairs = (tuple(pair), tuple(pair)[::-1]) if either_order else (tuple(pair),)
    end = len(ids) - 1 if stop_before_last else len(ids)
    out, i = [], 0
    while i < end:
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in pairs:
            out.append(new_id)
            i += step
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return list(ids[:i]) + [new_id] + list(ids[i + 2:])
    return list(ids)


def _merge_right_to_left(ids, pair, new_id):
    flipped = _T.merge(list(ids)[::-1], (pair[1], pair[0]), new_id)
    return flipped[::-1]


MERGE_MISTAKES = [
    Mistake("occurrences overlap: after replacing a pair, skip *both* of its ids (i += 2), "
            "so merge([5, 5, 5], (5, 5), 9) is [9, 5].", functools.partial(_merge_scan, step=1)),
    Mistake("only the first occurrence is replaced; replace every occurrence, scanning left to right.",
            _merge_first_only),
    Mistake("the scan runs right to left; scan from the left, so merge([5, 5, 5], (5, 5), 9) is [9, 5], not [5, 9].",
            _merge_right_to_left),
    Mistake("the last id is lost when it is not part of a pair: the loop must run to the very end of the list.",
            functools.partial(_merge_scan, stop_before_last=True)),
    Mistake("the pair is matched in both orders; (a, b) and (b, a) are different pairs.",
            functools.partial(_merge_scan, either_order=True)),
]


def _train(ids, n, *, first_id=256, threshold=2, tie=None, count_replacements=False):
    """Training with one thing changed; ``count_replacements``: the stop reads how many times merging the pair
    replaces it (``len(ids) - len(merged)``), which is fewer than its occurrences where they overlap."""
    ids, pairs = list(ids), []
    for k in range(n):
        c = _T.get_pair_counts(ids)
        if not c:
            break
        pair = tie(c) if tie else min(c, key=lambda p: (-c[p], p))
        merged = _T.merge(ids, pair, first_id + k)
        if (len(ids) - len(merged) if count_replacements else c[pair]) < threshold:
            break
        pairs.append(pair)
        ids = merged
    return pairs


def _train_count_once(ids, n):
    c = _T.get_pair_counts(list(ids))
    ranked = sorted((p for p in c if c[p] >= 2), key=lambda p: (-c[p], p))
    return ranked[:n]


TRAIN_MISTAKES = [
    Mistake("new ids must be 256, 257, ...: merge k creates id 256 + k, whatever ids the input holds.",
            lambda ids, n: _train(ids, n, first_id=max(ids, default=255) + 1)),
    Mistake("the new ids are off by one: the first merge creates id 256 (256 + k for merge k).",
            lambda ids, n: _train(ids, n, first_id=257)),
    Mistake("the new ids are off by one: the first merge creates id 256, not 255.",
            lambda ids, n: _train(ids, n, first_id=255)),
    Mistake("training goes on with pairs seen only once; stop as soon as the most frequent pair occurs fewer than 2 "
            "times.",
            lambda ids, n: _train(ids, n, threshold=1)),
    Mistake("one merge too few: learn n_merges merges (range(n_merges)).", lambda ids, n: _train(ids, max(n - 1, 0))),
    Mistake("training stops too early: a pair seen exactly twice is still merged (stop only below 2).",
            lambda ids, n: _train(ids, n, threshold=3)),
    Mistake("training stops at a pair whose occurrences overlap: the stop counts the pair's replacements (one "
            "merge replaces (7, 7) once in [7, 7, 7], where it occurs twice); count occurrences, as "
            "most_frequent_pair does.",
            lambda ids, n: _train(ids, n, count_replacements=True)),
    Mistake("the pairs are counted only once; recount after every merge (merged ids form new pairs).",
            _train_count_once),
    Mistake("ties go to the pair seen first; use the same rule as most_frequent_pair (the smallest pair).",
            lambda ids, n: _train(ids, n, tie=lambda c: max(c, key=c.get))),
    Mistake("return the pairs (a, b) only, in order; the new id of pair k is implied (256 + k).",
            lambda ids, n: [(p, 256 + k) for k, p in enumerate(_T.train_merges(ids, n))]),
]


def _encode_leftmost(text, merges):
    ids = list(text.encode("utf-8"))
    rank = {tuple(p): k for k, p in enumerate(merges)}
    while True:
        hit = next(((ids[i], ids[i + 1]) for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) in rank), None)
        if hit is None:
            return ids
        ids = _T.merge(ids, hit, 256 + rank[hit])


def _encode_stop_at_absent(text, merges):
    ids = list(text.encode("utf-8"))
    for k, pair in enumerate(merges):
        if tuple(pair) not in set(zip(ids, ids[1:])):
            break
        ids = _T.merge(ids, tuple(pair), 256 + k)
    return ids


ENCODE_MISTAKES = [
    Mistake("the leftmost learned pair is merged first; merges must be applied in the order they were learned "
            "(with merges [(b, c), (a, b)], 'abc' is [a, bc]).", _encode_leftmost),
    Mistake("the merges are applied in reverse order; apply them in the order they were learned.",
            lambda text, merges: _encode_reversed(text, merges)),
    Mistake("merge k must create id 256 + k (the new ids are off by one).",
            lambda text, merges: _T.apply_merges(list(text.encode("utf-8")), merges, first_id=255)),
    Mistake("merge k must create id 256 + k (the new ids are off by one).",
            lambda text, merges: _T.apply_merges(list(text.encode("utf-8")), merges, first_id=257)),
    Mistake("the text is split into characters with ord(); encode it to UTF-8 bytes first (text.encode('utf-8')).",
            lambda text, merges: _T.apply_merges([ord(c) for c in text], merges)),
    Mistake("the text is not encoded as UTF-8 (latin-1, ascii, ...): use text.encode('utf-8'), which handles every "
            "character.",
            lambda text, merges: _T.apply_merges(list(text.encode("latin-1", errors="replace")), merges)),
    Mistake("encoding stops at the first merge whose pair is absent; a later merge may still apply, so try every "
            "merge.",
            _encode_stop_at_absent),
]


def _encode_reversed(text, merges):
    ids = list(text.encode("utf-8"))
    for k in reversed(range(len(merges))):
        ids = _T.merge(ids, tuple(merges[k]), 256 + k)
    return ids


# --------------------------------------------------------------------------
# Likely mistakes: position tables
# --------------------------------------------------------------------------
def _angles(n, d, base, *, start=0, exponent=lambda i, d: 2 * i / d):
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    return pos * base ** (-exponent(i, d))


def _interleave(a, b):
    return torch.stack([a, b], dim=-1).flatten(-2)


def _sin_cos(n, d, base, **angles):
    """The sinusoidal table, interleaved, from the angles :func:`_angles` computes with ``angles``."""
    a = _angles(n, d, base, **angles)
    return _interleave(a.sin(), a.cos())


def _pe_per_column(n, d, base=10000.0):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    j = torch.arange(d, dtype=torch.float64)
    ang = pos * base ** (-j / d)
    out = ang.sin()
    out[:, 1::2] = ang[:, 1::2].cos()
    return out


SINUSOIDAL_MISTAKES = [
    Mistake("sin and cos are swapped: even columns 2i hold sin, odd columns 2i+1 hold cos.",
            lambda n, d, base=10000.0: _interleave(_angles(n, d, base).cos(), _angles(n, d, base).sin())),
    Mistake("the sines and cosines are concatenated ([sin..., cos...]); interleave them: column 2i sin, column 2i+1 "
            "cos.",
            lambda n, d, base=10000.0: torch.cat([_angles(n, d, base).sin(), _angles(n, d, base).cos()], dim=-1)),
    Mistake("the exponent uses the column index j for every column; columns 2i and 2i+1 share the frequency "
            "base^(-2i/d).",
            _pe_per_column),
    Mistake("the exponent is i/dim; it is 2i/dim, with i = 0 .. dim/2 - 1 the index of the (sin, cos) pair.",
            lambda n, d, base=10000.0: _sin_cos(n, d, base, exponent=lambda i, d: i / d)),
    Mistake("the frequencies are inverted: divide the position by base^(2i/dim), do not multiply.",
            lambda n, d, base=10000.0: _sin_cos(n, d, base, exponent=lambda i, d: -2 * i / d)),
    Mistake("positions start at 1; the first row is position 0 (sin 0 = 0, cos 0 = 1).",
            lambda n, d, base=10000.0: _sin_cos(n, d, base, start=1)),
    Mistake("every pair has frequency 1: 2 * i // dim is integer division (always 0); use / .",
            lambda n, d, base=10000.0: _sin_cos(n, d, base, exponent=lambda i, d: 0 * i)),
    Mistake("the base argument is ignored (10000 is hard-coded); use `base`.",
            lambda n, d, base=10000.0: _sin_cos(n, d, 10000.0)),
    Mistake("the exponent divides by dim - 1 (or similar); it is 2i / dim.",
            lambda n, d, base=10000.0: _sin_cos(n, d, base, exponent=lambda i, d: 2 * i / max(d - 1, 1))),
    Mistake("the table is transposed: rows are positions, columns are features, shape (n_positions, dim).",
            lambda n, d, base=10000.0: sinusoidal_encoding(n, d, base).T),
]


def _blocks(k, d, base, *, block, exponent=lambda i, d: 2 * i / d):
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = k * base ** (-exponent(i, d))
    r = torch.zeros(d, d, dtype=torch.float64)
    for j in range(d // 2):
        r[2 * j:2 * j + 2, 2 * j:2 * j + 2] = block(ang[j])
    return r


def _rot(a):
    return torch.stack([torch.stack([a.cos(), -a.sin()]), torch.stack([a.sin(), a.cos()])])


def _half_split(k, d, base=10000.0):
    h = d // 2
    ang = k * base ** (-torch.arange(h, dtype=torch.float64) * 2 / d)
    r = torch.zeros(d, d, dtype=torch.float64)
    idx = torch.arange(h)
    r[idx, idx], r[idx, idx + h] = ang.cos(), -ang.sin()
    r[idx + h, idx], r[idx + h, idx + h] = ang.sin(), ang.cos()
    return r


ROTATION_MISTAKES = [
    Mistake("the blocks are transposed (that matrix acts on column vectors, R PE^T); with rows, PE[pos] @ R_k, "
            "each block is [[cos, -sin], [sin, cos]].", lambda k, d, base=10000.0: offset_rotation(k, d, base).T),
    Mistake("a minus sign is missing: each block is [[cos, -sin], [sin, cos]], a rotation.",
            lambda k, d, base=10000.0: _blocks(k, d, base, block=lambda a: torch.stack(
                [torch.stack([a.cos(), a.sin()]), torch.stack([a.sin(), a.cos()])]))),
    Mistake("every block rotates by the angle k; block i rotates by k times the frequency w_i = base^(-2i/dim).",
            lambda k, d, base=10000.0: _blocks(k, d, base, block=_rot, exponent=lambda i, d: 0 * i)),
    Mistake("the frequencies use i/dim; pair i has frequency base^(-2i/dim).",
            lambda k, d, base=10000.0: _blocks(k, d, base, block=_rot, exponent=lambda i, d: i / d)),
    Mistake("the rotation pairs columns i and i + dim/2 (the RoPE half-split layout); the encoding pairs "
            "columns 2i and 2i+1.", _half_split),
    Mistake("the base argument is ignored (10000 is hard-coded); use `base`.",
            lambda k, d, base=10000.0: offset_rotation(k, d, 10000.0)),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 01-tokenization run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("01-tokenization", "tokenization.ipynb", (
    Exercise("most_frequent_pair", 2, (
        Comparison(most_frequent_pair, pair_cases, seed=11, mistakes=PAIR_MISTAKES),
    )),
    Exercise("merge", 2, (
        Comparison(merge, merge_cases, seed=12, mistakes=MERGE_MISTAKES),
    )),
    Exercise("train_bpe", 2, (
        Comparison(train_bpe, train_cases, seed=13, mistakes=TRAIN_MISTAKES),
    )),
    prediction("predicted_ids", 1, [256, 256, 98], form='the list of ids, like [97, 98]', tolerance=0, wrong={
        'the longest known piece was matched first; BPE applies the merges in the order they were learned': [97, 258],
        'that is the bytes, before any merge': [97, 97, 97, 97, 98],
        'the merge ab was applied before aa; aa was learned first, so it goes first': [256, 97, 257],
    }),
    Exercise("encode", 3, (
        Comparison(encode, encode_cases, seed=14, mistakes=ENCODE_MISTAKES),
    )),
    Exercise("sinusoidal_encoding", 2, (
        Comparison(sinusoidal_encoding, sinusoidal_cases, seed=15, mistakes=SINUSOIDAL_MISTAKES, table=True),
    )),
    Exercise("offset_rotation", 3, (
        Comparison(offset_rotation, rotation_cases, seed=16, mistakes=ROTATION_MISTAKES, table=True),
    )),
))
