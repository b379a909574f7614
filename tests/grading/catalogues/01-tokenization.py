"""Plausible wrong implementations for assignment 01-tokenization, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/01-tokenization/tokenization.ipynb with ``source``; the hidden tests
of that exercise must fail on it (tests/grading/test_catalogues.py). ``mistake`` says
what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ most_frequent_pair
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: ties go to the pair seen first;",
         mistake="Counter.most_common: ties go to the pair seen first", source='''
from collections import Counter
def most_frequent_pair(ids):
    counts = Counter(zip(ids, ids[1:]))
    if not counts:
        return None
    return counts.most_common(1)[0][0]
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: ties go to the largest pair;",
         mistake="max over (count, pair): ties go to the largest pair", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return None
    return max(counts, key=lambda p: (counts[p], p))
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: overlapping occurrences are",
         mistake="counts with str.count-like non-overlapping matches", source='''
def most_frequent_pair(ids):
    pairs = sorted(set(zip(ids, ids[1:])))
    if not pairs:
        return None
    def count(p):
        n, i = 0, 0
        while i < len(ids) - 1:
            if (ids[i], ids[i + 1]) == p:
                n, i = n + 1, i + 2
            else:
                i += 1
        return n
    return max(pairs, key=lambda p: (count(p), [-x for x in p]))
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: only pairs starting at even",
         mistake="steps by two: counts only pairs starting at even positions", source='''
def most_frequent_pair(ids):
    counts = {}
    for i in range(0, len(ids) - 1, 2):
        p = (ids[i], ids[i + 1])
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda p: (-counts[p], p))
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: the count is returned with",
         mistake="returns the pair with its count", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return None
    best = min(counts, key=lambda p: (-counts[p], p))
    return best, counts[best]
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: ties go to the pair seen first;",
         mistake="sorted by count descending, stable on the order of first occurrence", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ranked[0][0] if ranked else None
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: the sequence wraps around:",
         mistake="wraps around from the last id to the first", source='''
def most_frequent_pair(ids):
    if len(ids) < 2:
        return None
    counts = {}
    for i in range(len(ids)):
        p = (ids[i - 1], ids[i])
        counts[p] = counts.get(p, 0) + 1
    return min(counts, key=lambda p: (-counts[p], p))
'''),
    dict(exercise="most_frequent_pair", diagnosis="expected",
         mistake="returns an empty tuple instead of None for short input", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return ()
    return min(counts, key=lambda p: (-counts[p], p))
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: ties go to the pair seen last;",
         mistake="keeps the last pair reaching the best count (>=): ties go to the pair seen last", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    best, best_n = None, 0
    for p, n in counts.items():
        if n >= best_n:
            best, best_n = p, n
    return best
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: the least frequent pair is returned:",
         mistake="min over (count, pair): returns the least frequent pair", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda p: (counts[p], p))
'''),
    dict(exercise="most_frequent_pair", diagnosis="Likely mistake: the count is returned instead of the pair.",
         mistake="returns the highest count, not the pair", source='''
def most_frequent_pair(ids):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    if not counts:
        return None
    return max(counts.values())
'''),
    # ------------------------------------------------------------ merge
    dict(exercise="merge", diagnosis="Likely mistake: occurrences overlap: after",
         mistake="moves on by one after a merge: overlapping replacements", source='''
def merge(ids, pair, new_id):
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        else:
            out.append(ids[i])
    return out
'''),
    dict(exercise="merge", diagnosis="Likely mistake: only the first occurrence",
         mistake="replaces only the first occurrence", source='''
def merge(ids, pair, new_id):
    out = list(ids)
    for i in range(len(out) - 1):
        if (out[i], out[i + 1]) == tuple(pair):
            return out[:i] + [new_id] + out[i + 2:]
    return out
'''),
    dict(exercise="merge", diagnosis="Likely mistake: the last id is lost when it",
         mistake="the loop stops one early and loses the last id", source='''
def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
'''),
    dict(exercise="merge", diagnosis="returned its input list itself",
         mistake="edits the input list in place (pop) and returns it", source='''
def merge(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i] = new_id
            ids.pop(i + 1)
        i += 1
    return ids
'''),
    dict(exercise="merge", diagnosis="Likely mistake: the scan runs right to left;", mistake="scans right to left",
         source='''
def merge(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i - 1 >= 0 and ids[i - 1] == pair[0] and ids[i] == pair[1]:
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]
'''),
    dict(exercise="merge", diagnosis="Likely mistake: the pair is matched in both",
         mistake="matches the pair in either order", source='''
def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (tuple(pair), tuple(pair)[::-1]):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
'''),
    dict(exercise="merge", diagnosis="gives a wrong result",
         mistake="string replace on a space-joined string (breaks on ids that share digits)", source='''
def merge(ids, pair, new_id):
    s = " " + " ".join(map(str, ids)) + " "
    s = s.replace(f" {pair[0]} {pair[1]} ", f" {new_id} ")
    return [int(x) for x in s.split()]
'''),
    # ------------------------------------------------------------ train_bpe
    dict(exercise="train_bpe", diagnosis="Likely mistake: new ids must be 256, 257,",
         mistake="new ids start after the largest id in the input", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    next_id = max(ids, default=255) + 1
    for k in range(n_merges):
        counts = {}
        for p in zip(ids, ids[1:]):
            counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        if counts[pair] < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, next_id + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: training stops at a pair whose occurrences overlap:",
         mistake="counts replacements (non-overlapping) instead of occurrences to stop", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None:
            break
        merged = merge(ids, pair, 256 + k)
        if len(ids) - len(merged) < 2:   # the number of replacements: misses overlapping occurrences
            break
        merges.append(pair)
        ids = merged
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: training goes on with pairs",
         mistake="no early stop: merges pairs that occur once", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None:
            break
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: the pairs are counted only",
         mistake="counts the pairs once, before any merge", source='''
def train_bpe(ids, n_merges):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    ranked = sorted((p for p in counts if counts[p] >= 2), key=lambda p: (-counts[p], p))
    return ranked[:n_merges]
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: the new ids are off by one: the first merge creates id 256,",
         mistake="new id 255 + k", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None or sum(p == pair for p in zip(ids, ids[1:])) < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 255 + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: training stops too early:",
         mistake="stops at a count of 2 (uses <= 2)", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None or sum(p == pair for p in zip(ids, ids[1:])) <= 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: return the pairs (a, b) only,",
         mistake="returns (pair, new_id) tuples", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None or sum(p == pair for p in zip(ids, ids[1:])) < 2:
            break
        merges.append((pair, 256 + k))
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: one merge too few: learn n_merges",
         mistake="range(1, n_merges): one merge too few", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(1, n_merges):
        pair = most_frequent_pair(ids)
        if pair is None or sum(p == pair for p in zip(ids, ids[1:])) < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 255 + k)
    return merges
'''),
    dict(exercise="train_bpe", diagnosis="Likely mistake: ties go to the pair seen first;",
         mistake="Counter.most_common tie rule (first seen) inside training", source='''
from collections import Counter
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        counts = Counter(zip(ids, ids[1:]))
        if not counts:
            break
        pair, n = counts.most_common(1)[0]
        if n < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    dict(exercise="train_bpe",
         diagnosis="Likely mistake: the new ids are off by one: the first merge creates id 256 (256 + k",
         mistake="counts merges from 1: merge k creates id 257 + k", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(1, n_merges + 1):
        pair = most_frequent_pair(ids)
        if pair is None or sum(p == pair for p in zip(ids, ids[1:])) < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    # ------------------------------------------------------------ encode
    dict(exercise="encode", diagnosis="Likely mistake: the leftmost learned pair",
         mistake="merges the leftmost learned pair first", source='''
def encode(text, merges):
    ids = list(text.encode("utf-8"))
    rank = {tuple(p): k for k, p in enumerate(merges)}
    while True:
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) in rank:
                pair = (ids[i], ids[i + 1])
                ids = merge(ids, pair, 256 + rank[pair])
                break
        else:
            return ids
'''),
    dict(exercise="encode", diagnosis="Likely mistake: the merges are applied in",
         mistake="applies the merges in reverse order", source='''
def encode(text, merges):
    ids = list(text.encode("utf-8"))
    for k in reversed(range(len(merges))):
        ids = merge(ids, tuple(merges[k]), 256 + k)
    return ids
'''),
    dict(exercise="encode", diagnosis="Likely mistake: the text is split into characters",
         mistake="characters via ord() instead of UTF-8 bytes", source='''
def encode(text, merges):
    ids = [ord(ch) for ch in text]
    for k, pair in enumerate(merges):
        ids = merge(ids, tuple(pair), 256 + k)
    return ids
'''),
    dict(exercise="encode", diagnosis="Likely mistake: merge k must create id 256 + k (the new ids are off by one).",
         mistake="new ids counted from 255", source='''
def encode(text, merges):
    ids = list(text.encode("utf-8"))
    for k, pair in enumerate(merges, start=255):
        ids = merge(ids, tuple(pair), k)
    return ids
'''),
    dict(exercise="encode", diagnosis="Likely mistake: encoding stops at the first",
         mistake="stops at the first merge that does not apply", source='''
def encode(text, merges):
    ids = list(text.encode("utf-8"))
    for k, pair in enumerate(merges):
        if tuple(pair) not in zip(ids, ids[1:]):
            break
        ids = merge(ids, tuple(pair), 256 + k)
    return ids
'''),
    dict(exercise="encode", diagnosis="expected", mistake="retrains on the text instead of using the given merges",
         source='''
def encode(text, merges):
    ids = list(text.encode("utf-8"))
    for k in range(len(merges)):
        pair = most_frequent_pair(ids)
        if pair is None:
            break
        ids = merge(ids, pair, 256 + k)
    return ids
'''),
    dict(exercise="encode", diagnosis="Likely mistake: the text is not encoded as",
         mistake="latin-1 bytes (wrong for every character above U+00FF, and different for accents)", source='''
def encode(text, merges):
    ids = list(text.encode("latin-1", errors="replace"))
    for k, pair in enumerate(merges):
        ids = merge(ids, tuple(pair), 256 + k)
    return ids
'''),
    # ------------------------------------------------------------ sinusoidal_encoding
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: sin and cos are swapped: even",
         mistake="cos in even columns, sin in odd ones", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (2 * i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.cos(angles)
    pe[:, 1::2] = torch.sin(angles)
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the sines and cosines are",
         mistake="sines then cosines, concatenated", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (2 * i / dim)
    return torch.cat([angles.sin(), angles.cos()], dim=1)
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the exponent uses the column",
         mistake="the column index j in the exponent for every column", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pe = torch.zeros(n_positions, dim)
    for pos in range(n_positions):
        for j in range(dim):
            angle = pos / base ** (j / dim)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the exponent is i/dim; it",
         mistake="exponent i / dim (factor 2 missing)", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: positions start at 1; the",
         mistake="positions 1..n", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(1, n_positions + 1, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (2 * i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the frequencies are inverted:",
         mistake="multiplies by base^(2i/d) instead of dividing", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos * base ** (2 * i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the base argument is ignored",
         mistake="hard-codes 10000", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / 10000 ** (2 * i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: every pair has frequency 1:",
         mistake="integer division makes every exponent 0", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2)
    angles = pos / base ** (2 * i // dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the table is transposed: rows",
         mistake="returns the transposed table (dim, n_positions)", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (2 * i / dim)
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe.T
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="calls the reference", mistake="calls the reference", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    from course_lib.positional import sinusoidal_encoding as ref
    return ref(n_positions, dim, base, dtype=torch.float64)
'''),
    dict(exercise="sinusoidal_encoding", diagnosis="Likely mistake: the exponent divides by dim - 1",
         mistake="exponent 2i / (dim - 1)", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    angles = pos / base ** (2 * i / (dim - 1))
    pe = torch.zeros(n_positions, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe
'''),
    # ------------------------------------------------------------ offset_rotation
    dict(exercise="offset_rotation", diagnosis="Likely mistake: the blocks are transposed",
         mistake="column-vector convention: blocks transposed", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        a = k / base ** (2 * i / dim)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = -math.sin(a), math.cos(a)
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="Likely mistake: every block rotates by the",
         mistake="every block rotates by k radians", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    c, s = math.cos(k), math.sin(k)
    for i in range(dim // 2):
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, -s
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = s, c
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="Likely mistake: a minus sign is missing: each",
         mistake="missing minus sign", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        a = k / base ** (2 * i / dim)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="Likely mistake: the frequencies use i/dim;",
         mistake="frequency exponent i / dim", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        a = k / base ** (i / dim)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="Likely mistake: the rotation pairs columns",
         mistake="pairs columns i and i + d/2 (RoPE half-split layout)", source='''
def offset_rotation(k, dim, base=10000.0):
    h = dim // 2
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(h):
        a = k / base ** (2 * i / dim)
        R[i, i], R[i, i + h] = math.cos(a), -math.sin(a)
        R[i + h, i], R[i + h, i + h] = math.sin(a), math.cos(a)
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="gives wrong values",
         mistake="the blocks placed at [i, i+1] instead of [2i, 2i+1]", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        a = k / base ** (2 * i / dim)
        R[i, i], R[i, i + 1] = math.cos(a), -math.sin(a)
        R[i + 1, i], R[i + 1, i + 1] = math.sin(a), math.cos(a)
    return R
'''),
    dict(exercise="offset_rotation", diagnosis="gives wrong values",
         mistake="solves for R with least squares on a short table (ill-conditioned, wrong)", source='''
def offset_rotation(k, dim, base=10000.0):
    n = 4
    pe = sinusoidal_encoding(n + abs(k) + 1, dim, base).double()
    a, b = (pe[:n], pe[k:k + n]) if k >= 0 else (pe[-k:-k + n], pe[:n])
    return torch.linalg.lstsq(a, b).solution
'''),
    dict(exercise="offset_rotation", diagnosis="Likely mistake: the base argument is ignored",
         mistake="hard-codes base 10000", source='''
def offset_rotation(k, dim, base=10000.0):
    R = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        a = k / 10000.0 ** (2 * i / dim)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
    return R
'''),
]

RIGHT = [
    # ------------------------------------------------------------ most_frequent_pair
    dict(exercise="most_frequent_pair",
         how="collections.Counter, then the smallest pair among those with the top count", source='''
from collections import Counter
def most_frequent_pair(ids):
    counts = Counter(zip(ids, ids[1:]))
    if not counts:
        return None
    top = max(counts.values())
    return min(p for p, c in counts.items() if c == top)
'''),
    dict(exercise="most_frequent_pair",
         how="sorts the pairs and scans runs of equal pairs, keeping a strictly better count", source='''
def most_frequent_pair(ids):
    pairs = sorted((ids[i], ids[i + 1]) for i in range(len(ids) - 1))
    best, best_count = None, 0
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j] == pairs[i]:
            j += 1
        if j - i > best_count:
            best, best_count = pairs[i], j - i
        i = j
    return best
'''),
    # ------------------------------------------------------------ merge
    dict(exercise="merge", how="a for loop over the ids with a flag that skips the second id of a merged pair",
         source='''
def merge(ids, pair, new_id):
    a, b = pair
    out, skip = [], False
    for i, x in enumerate(ids):
        if skip:
            skip = False
            continue
        if x == a and i + 1 < len(ids) and ids[i + 1] == b:
            out.append(new_id)
            skip = True
        else:
            out.append(x)
    return out
'''),
    dict(exercise="merge", how="copies the list and replaces each occurrence by slice assignment in place on the copy",
         source='''
def merge(ids, pair, new_id):
    out = list(ids)
    i = 0
    while i < len(out) - 1:
        if out[i] == pair[0] and out[i + 1] == pair[1]:
            out[i:i + 2] = [new_id]
        i += 1
    return out
'''),
    # ------------------------------------------------------------ train_bpe
    dict(exercise="train_bpe", how="counts with Counter and merges inline, without calling the earlier exercises",
         source='''
from collections import Counter
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    while len(merges) < n_merges:
        counts = Counter(zip(ids, ids[1:]))
        if not counts:
            break
        top = max(counts.values())
        if top < 2:
            break
        pair = min(p for p, c in counts.items() if c == top)
        new_id = 256 + len(merges)
        merges.append(pair)
        out, i = [], 0
        while i < len(ids):
            if ids[i:i + 2] == list(pair):
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return merges
'''),
    dict(exercise="train_bpe", how="checks the count of the chosen pair with a dict of counts, uses merge from earlier",
         source='''
def train_bpe(ids, n_merges):
    ids = ids[:]
    merges = []
    for k in range(max(n_merges, 0)):
        counts = {}
        for p in zip(ids, ids[1:]):
            counts[p] = counts.get(p, 0) + 1
        pair = most_frequent_pair(ids)
        if pair is None or counts[tuple(pair)] < 2:
            return merges
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    # ------------------------------------------------------------ encode
    dict(exercise="encode", how="bytes iterated directly and each merge written inline as a for loop with a flag",
         source='''
def encode(text, merges):
    ids = [b for b in text.encode("utf-8")]
    for k, (a, b) in enumerate(merges):
        out, skip = [], False
        for i in range(len(ids)):
            if skip:
                skip = False
            elif i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
                out.append(256 + k)
                skip = True
            else:
                out.append(ids[i])
        ids = out
    return ids
'''),
    dict(exercise="encode", how="bytearray of the text, the new id counted alongside, merge from earlier", source='''
def encode(text, merges):
    ids = list(bytearray(text, "utf-8"))
    new_id = 256
    for a, b in merges:
        ids = merge(ids, (a, b), new_id)
        new_id += 1
    return ids
'''),
    # ------------------------------------------------------------ sinusoidal_encoding
    dict(exercise="sinusoidal_encoding",
         how="frequencies as exp(-log(base) 2i/dim), sin and cos stacked then flattened", source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    w = torch.exp(-math.log(base) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(n_positions, dtype=torch.float64), w)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n_positions, dim)
'''),
    dict(exercise="sinusoidal_encoding", how="plain Python loops with math.sin and math.cos into a nested list",
         source='''
def sinusoidal_encoding(n_positions, dim, base=10000.0):
    rows = []
    for pos in range(n_positions):
        row = []
        for i in range(dim // 2):
            a = pos / base ** (2 * i / dim)
            row += [math.sin(a), math.cos(a)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(n_positions, dim)
'''),
    # ------------------------------------------------------------ offset_rotation
    dict(exercise="offset_rotation", how="torch.block_diag of 2x2 rotation blocks", source='''
def offset_rotation(k, dim, base=10000.0):
    blocks = []
    for i in range(dim // 2):
        a = torch.tensor(k / base ** (2 * i / dim), dtype=torch.float64)
        blocks.append(torch.stack([torch.stack([a.cos(), -a.sin()]), torch.stack([a.sin(), a.cos()])]))
    return torch.block_diag(*blocks)
'''),
    dict(exercise="offset_rotation", how="vectorised: diagonal of cosines plus sines scattered with index tensors",
         source='''
def offset_rotation(k, dim, base=10000.0):
    even = torch.arange(0, dim, 2)
    angles = k * torch.pow(torch.tensor(base, dtype=torch.float64), -even.double() / dim)
    R = torch.diag(angles.cos().repeat_interleave(2))
    R[even, even + 1] = -angles.sin()
    R[even + 1, even] = angles.sin()
    return R
'''),
]

# The contract's last gaps (issue 27): the element types of returned containers (tuples where the text says tuples,
# plain ints where it says ints).
WRONG += [
    dict(exercise="most_frequent_pair", diagnosis="the result is a list where a tuple is expected",
         mistake="returns the pair as a list [a, b]", source='''
def most_frequent_pair(ids):
    counts = {}
    for i in range(len(ids) - 1):
        key = (ids[i], ids[i + 1])
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    best = min(counts, key=lambda p: (-counts[p], p))
    return [best[0], best[1]]
'''),
    dict(exercise="most_frequent_pair", diagnosis="item 0 of the result is a torch.Tensor where an int is expected",
         mistake="counts with torch.unique(dim=0) and returns a tuple of 0-d tensors", source='''
def most_frequent_pair(ids):
    if len(ids) < 2:
        return None
    t = torch.tensor(ids)
    pairs = torch.stack([t[:-1], t[1:]], dim=1)
    uniq, counts = torch.unique(pairs, dim=0, return_counts=True)  # rows sorted: ties go to the smallest
    best = uniq[counts.argmax()]
    return (best[0], best[1])
'''),
    dict(exercise="train_bpe", diagnosis="item 0 of the result is a list where a tuple is expected",
         mistake="records each merge as a list [a, b]", source='''
def train_bpe(ids, n_merges):
    ids, merges = list(ids), []
    for k in range(n_merges):
        pair = most_frequent_pair(ids)
        if pair is None or sum(1 for p in zip(ids, ids[1:]) if p == pair) < 2:
            break
        merges.append([pair[0], pair[1]])
        ids = merge(ids, pair, 256 + k)
    return merges
'''),
    dict(exercise="encode", diagnosis="item 0 of the result is a torch.Tensor where an int is expected",
         mistake="works on a tensor of ids and returns list(tensor): a list of 0-d tensors", source='''
def encode(text, merges):
    ids = torch.tensor(list(text.encode("utf-8")), dtype=torch.long)
    for k, (a, b) in enumerate(merges):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
                out.append(256 + k)
                i += 2
            else:
                out.append(int(ids[i]))
                i += 1
        ids = torch.tensor(out, dtype=torch.long)
    return list(ids)
'''),
]


# ------------------------------------------------------------ predicted_ids (predict, then run)
WRONG += [
    dict(exercise='predicted_ids', diagnosis='Likely mistake: the longest known piece was matched firs',
         mistake='the longest known piece was matched first', source='''
def predicted_ids():
    return [97, 258]
'''),
    dict(exercise='predicted_ids', diagnosis='Likely mistake: that is the bytes, before any merge',
         mistake='that is the bytes, before any merge', source='''
def predicted_ids():
    return [97, 97, 97, 97, 98]
'''),
    dict(exercise='predicted_ids', diagnosis='Likely mistake: the merge ab was applied before aa',
         mistake='the merge ab was applied before aa', source='''
def predicted_ids():
    return [256, 97, 257]
'''),
    dict(exercise='predicted_ids', diagnosis="should return", mistake="answers in words", source='''
def predicted_ids():
    return "I think it is [256, 256, 98]"
'''),
    dict(exercise='predicted_ids', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_ids():
    print([256, 256, 98])
'''),
]
RIGHT += [
    dict(exercise='predicted_ids', how="a tensor", source='''
def predicted_ids():
    return torch.tensor([256.0, 256.0, 98.0])
'''),
    dict(exercise='predicted_ids', how="a tuple of the exact values", source='''
def predicted_ids():
    return (256, 256, 98)
'''),
]
