"""Byte-level byte-pair encoding (BPE), the tokenizer of GPT-2 and its successors (chapter 01).

Notation, used in every docstring of this module:

* A **token id** is an ``int``. Ids ``0..255`` are the 256 byte values (id ``b``
  stands for the single byte ``b``); ids ``256, 257, ...`` are created by
  training, one per **merge**; **special tokens** (``"<|endoftext|>"``) get ids
  chosen by the user, above every ordinary id.
* A **pair** is a tuple ``(a, b)`` of two token ids that stand next to each
  other in a sequence ``ids: list[int]``.
* A **chunk** is a piece of text the pre-split pattern cut out (a word with its
  leading space, a run of digits, a run of punctuation, whitespace). Pairs are
  counted and merged inside chunks only, so no token ever spans two chunks.

Training (Sennrich et al., 2016, section 3.2, applied to bytes as in GPT-2)::

    ids <- UTF-8 bytes of every chunk
    repeat until the vocabulary has vocab_size ids, or no pair occurs twice:
        (a, b) <- the most frequent adjacent pair   (ties: the smallest pair)
        new id n <- len(vocab);  vocab[n] = vocab[a] + vocab[b]
        replace every (a, b) in ids by n

Encoding replays the merges on new text: in each chunk, merge the present pair
that was learned *first* (lowest id), until no learned pair is present.
Because the base vocabulary holds every byte, any string encodes and the round
trip ``decode(encode(text)) == text`` is exact. A sequence of ids chosen by
hand can spell invalid UTF-8; :meth:`Tokenizer.decode` then puts U+FFFD in
place of the bad bytes (``errors="replace"``) rather than raising.

The pre-split patterns of GPT-2 and GPT-4 use the Unicode classes ``\\p{L}``
(letter) and ``\\p{N}`` (number), which Python's standard ``re`` lacks; this
module compiles every pattern with the ``regex`` package, so the two patterns
are exactly the published ones (a superscript two, ``²``, is a number, not a
letter). Text the pattern does not match is kept as chunks of its own, so the
round trip stays exact for any pattern.

Training takes a list of **special tokens** (``"<|endoftext|>"``): the text is
split at them, no pair is ever counted across or inside one, and each gets an
id of its own after the merges. Pairs that are equally frequent are broken by
one of two rules (``tie_break``): ``"ids"``, the smallest pair of ids, the
course's default because a learner can check it by hand and the exercises use
it; or ``"bytes"``, the lexicographically greatest pair of byte strings, the
rule of GPT-2-style trainers, to reproduce their merges. :meth:`Tokenizer.encode_iterable`
encodes a stream of text (the lines of a large file) in bounded memory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

import regex

__all__ = [
    "GPT2_SPLIT_PATTERN",
    "GPT4_SPLIT_PATTERN",
    "get_pair_counts",
    "merge",
    "most_frequent_pair",
    "train_merges",
    "apply_merges",
    "vocab_from_merges",
    "MergeStep",
    "Tokenizer",
]

GPT2_SPLIT_PATTERN = "|".join([
    r"'(?:[sdmt]|ll|ve|re)",          # English contractions: 's 't 'll ...
    r" ?\p{L}+",                      # a word, with its leading space
    r" ?\p{N}+",                      # a number
    r" ?[^\s\p{L}\p{N}]+",            # punctuation and symbols
    r"\s+(?!\S)",                     # whitespace, leaving the last space to the next word
    r"\s+",
])
GPT4_SPLIT_PATTERN = "|".join([
    r"'(?i:[sdmt]|ll|ve|re)",                 # contractions, any case
    r"[^\r\n\p{L}\p{N}]?+\p{L}+",            # a word, with one leading non-letter
    r"\p{N}{1,3}",                            # numbers in groups of at most three digits
    r" ?[^\s\p{L}\p{N}]++[\r\n]*",            # punctuation, with the line breaks after it
    r"\s*[\r\n]",                             # line breaks, with the indentation before them
    r"\s+(?!\S)",
    r"\s+",
])
TIE_BREAKS = ("ids", "bytes")
_CACHE_SIZE = 1 << 16
# A point where the GPT-2 and GPT-4 patterns cut the same way in the whole text and in its two halves:
# a line break with a non-space character on each side ("a\nb"). With a space before the break, GPT-2's
# "\s+(?!\S)" would take "  \n" whole at the end of a half but only "  " in the whole text.
_SAFE_CUT = re.compile(r"(?<=\S\n)(?=\S)")
_VERSION_LINE = "course_lib.tokenizer bpe v1"


# --------------------------------------------------------------------------
# The two operations of BPE, on a plain list of ids
# --------------------------------------------------------------------------
def get_pair_counts(ids: Iterable[int], counts: dict | None = None, *, weight: int = 1) -> dict:
    """Count adjacent pairs: ``[1, 2, 3, 1, 2] -> {(1, 2): 2, (2, 3): 1, (3, 1): 1}``.

    Args:
        ids: a sequence of token ids.
        counts: a ``dict[tuple[int, int], int]`` to add to in place (to count
            over many chunks); a new dict when ``None``.
        weight: what each occurrence adds (a chunk seen 5 times counts 5;
            ``-5`` takes its pairs away again).

    Returns:
        ``counts``, ``dict[tuple[int, int], int]``, pairs in order of first occurrence.
    """
    counts = {} if counts is None else counts
    ids = list(ids)
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id``, left to right.

    ``merge([5, 5, 5], (5, 5), 9) == [9, 5]``: occurrences do not overlap.

    Returns:
        a new list, shorter by the number of replacements.
    """
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def most_frequent_pair(ids: Iterable[int]) -> tuple[int, int] | None:
    """The adjacent pair seen most often in ``ids``; among equals the smallest ``(a, b)``.

    Overlapping occurrences count: ``[5, 5, 5]`` holds ``(5, 5)`` twice. The
    tie rule is the one :meth:`Tokenizer.train` uses, so training is
    deterministic. ``None`` when ``ids`` has fewer than two ids.
    """
    counts = get_pair_counts(ids)
    if not counts:
        return None
    return min(counts, key=lambda p: (-counts[p], p))


def train_merges(ids: Iterable[int], n_merges: int, first_id: int = 256) -> list[tuple[int, int]]:
    """BPE training on one sequence of ids, the slow and obvious way: recount before every merge.

    Merge ``k`` replaces the most frequent pair (:func:`most_frequent_pair`)
    by the new id ``first_id + k``. Training stops after ``n_merges`` merges,
    or earlier when no pair occurs at least twice. On the UTF-8 bytes of a
    text this learns the merges of ``Tokenizer(pattern=None).train``.

    Returns:
        the learned pairs in order, ``list[tuple[int, int]]``; pair ``k`` became id ``first_id + k``.
    """
    ids, pairs = list(ids), []
    for k in range(n_merges):
        counts = get_pair_counts(ids)
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        if counts[pair] < 2:
            break
        pairs.append(pair)
        ids = merge(ids, pair, first_id + k)
    return pairs


def apply_merges(ids: Iterable[int], merges: list[tuple[int, int]], first_id: int = 256) -> list[int]:
    """Encode with a list of learned pairs: merge ``k`` (id ``first_id + k``) is applied before merge ``k + 1``.

    Replaying the merges in training order, each over the whole sequence,
    gives the same result as repeatedly merging the present pair learned
    first (what :meth:`Tokenizer.encode` does): a merge never creates a pair
    that an earlier merge could have used.
    """
    ids = list(ids)
    for k, pair in enumerate(merges):
        if len(ids) < 2:
            break
        ids = merge(ids, tuple(pair), first_id + k)
    return ids


def vocab_from_merges(merges: list[tuple[int, int]], first_id: int = 256) -> dict[int, bytes]:
    """The bytes each id spells: ids ``0..255`` the bytes, id ``first_id + k`` the two halves of merge ``k``."""
    vocab = {b: bytes([b]) for b in range(256)}
    for k, (a, b) in enumerate(merges):
        vocab[first_id + k] = vocab[a] + vocab[b]
    return vocab


class MergeStep(NamedTuple):
    """One step of training: ``pair`` became ``new_id``, spelling ``token``; seen ``count`` times."""

    pair: tuple[int, int]
    new_id: int
    token: bytes
    count: int


def _show(token: bytes) -> str:
    """A token's bytes as a quoted string where they are valid UTF-8, else as ``b'...'``."""
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)


# --------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------
class Tokenizer:
    """A byte-level BPE tokenizer: train on text, encode, decode, save, load.

    Args:
        pattern: the pre-split regular expression (``regex`` syntax, a superset of ``re``'s); ``None``
            treats the whole text as one chunk: tokens may then span words and
            spaces, and since every merge rescans that one chunk, training and
            encoding long texts become tens of times slower.

    Attributes:
        merges: ``dict[tuple[int, int], int]``, pair -> new id, in training order.
        vocab: ``dict[int, bytes]``, id -> the bytes it spells (ordinary ids only).
        special_tokens: ``dict[str, int]``, special string -> id.
        history: ``list[MergeStep]`` of the last :meth:`train` (empty after :meth:`load`).
    """

    def __init__(self, pattern: str | None = GPT4_SPLIT_PATTERN):
        try:
            self._regex = None if pattern is None else regex.compile(pattern)
        except regex.error as e:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {e}") from None
        self.pattern = pattern
        self.merges: dict[tuple[int, int], int] = {}
        self.vocab: dict[int, bytes] = {b: bytes([b]) for b in range(256)}
        self.special_tokens: dict[str, int] = {}
        self.history: list[MergeStep] = []
        self._cache: dict[str, list[int]] = {}  # chunk -> its ids, for the merges it was filled with
        self._cache_key: tuple[int, int] = (id(self.merges), 0)

    # ---------------------------------------------------------------- inspect
    def __len__(self) -> int:
        """Vocabulary size: bytes, merges and special tokens."""
        return len(self.vocab) + len(self.special_tokens)

    @property
    def merge_list(self) -> list[tuple[int, int]]:
        """The learned pairs in training order; pair ``k`` became id ``256 + k``."""
        return list(self.merges)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` spells (a special token: its UTF-8 string)."""
        if token_id in self.vocab:
            return self.vocab[token_id]
        for text, i in self.special_tokens.items():
            if i == token_id:
                return text.encode("utf-8")
        raise ValueError(
            f"unknown token id {token_id!r}: the vocabulary (size {len(self)}) has ids "
            f"0..{len(self.vocab) - 1} and the special ids {sorted(self.special_tokens.values())}"
        )

    def describe_merges(self, n: int | None = None) -> str:
        """The first ``n`` merges (all when ``None``), one per line: ``id: left + right -> token``."""
        lines = []
        counts = {step.new_id: step.count for step in self.history}
        for (a, b), new_id in list(self.merges.items())[:n]:
            seen = f"  ({counts[new_id]} times)" if new_id in counts else ""
            parts = f"{_show(self.vocab[a])} + {_show(self.vocab[b])}"
            lines.append(f"{new_id:>6}: {parts} -> {_show(self.vocab[new_id])}{seen}")
        return "\n".join(lines)

    def split(self, text: str) -> list[str]:
        """Cut ``text`` into the chunks the pre-split pattern finds; ``"".join`` gives ``text`` back."""
        if self._regex is None:
            return [text] if text else []
        chunks, end = [], 0
        for m in self._regex.finditer(text):
            if m.start() > end:  # text the pattern skipped is a chunk of its own
                chunks.append(text[end:m.start()])
            if m.end() > m.start():
                chunks.append(m.group())
            end = m.end()
        if end < len(text):
            chunks.append(text[end:])
        return chunks

    # ---------------------------------------------------------------- train
    def train(
        self,
        text: str,
        vocab_size: int,
        *,
        special_tokens: Iterable[str] = (),
        tie_break: str = "ids",
        verbose: bool = False,
        progress: Callable[[MergeStep], None] | None = None,
    ) -> list[MergeStep]:
        """Learn ``vocab_size - 256`` merges from ``text`` (fewer if no pair occurs twice).

        Starts from the 256 bytes, discarding earlier merges and special tokens.
        ``text`` is first split at every special token: a special token is
        never learned as text, and no pair is counted across one. After the
        merges, the special tokens get the next ids, in the order given
        (``len(self.vocab)``, ``len(self.vocab) + 1``, ...).

        Each chunk is counted once with its frequency, and after a merge only
        the chunks that contain the merged pair are recounted: the pair counts
        are kept up to date rather than computed afresh at every step.

        Args:
            text: the training corpus.
            vocab_size: the number of ordinary ids wanted, at least 256 (special
                tokens come on top).
            special_tokens: strings kept whole, e.g. ``["<|endoftext|>"]``.
            tie_break: among equally frequent pairs, ``"ids"`` takes the smallest
                pair of ids (the course's rule: easy to follow by hand, the one
                the exercises and :func:`most_frequent_pair` use); ``"bytes"``
                takes the lexicographically greatest pair of byte strings
                ``(vocab[a], vocab[b])``, as GPT-2-style trainers do.
            verbose: print each merge.
            progress: called with the :class:`MergeStep` of each merge (for a
                notebook that shows training as it happens).

        Returns:
            ``self.history``: one :class:`MergeStep` per merge, in order.
        """
        if not isinstance(vocab_size, int) or vocab_size < 256:
            raise ValueError(f"vocab_size must be at least 256 (one id per byte, an int), got {vocab_size!r}")
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break={tie_break!r} is not one of {', '.join(map(repr, TIE_BREAKS))}")
        specials = list(special_tokens)
        if isinstance(special_tokens, str):
            raise ValueError(f"special_tokens must be a list of strings, got the string {special_tokens!r}")
        for sp in specials:
            if not isinstance(sp, str) or not sp:
                raise ValueError(f"a special token must be a non-empty string, got {sp!r}")
        if len(set(specials)) != len(specials):
            raise ValueError(f"special_tokens lists a token twice: {specials}")
        self.merges, self.history, self.special_tokens = {}, [], {}
        self.vocab = {b: bytes([b]) for b in range(256)}
        self._cache.clear()

        chunk_freq: dict[str, int] = {}
        for part in self._split_at_specials(text, specials):
            for chunk in self.split(part):
                chunk_freq[chunk] = chunk_freq.get(chunk, 0) + 1
        words = [list(chunk.encode("utf-8")) for chunk in chunk_freq]
        freqs = list(chunk_freq.values())
        counts: dict[tuple[int, int], int] = {}
        where: dict[tuple[int, int], set[int]] = {}  # pair -> indices of the words that contain it
        for i, word in enumerate(words):
            get_pair_counts(word, counts, weight=freqs[i])
            for pair in zip(word, word[1:]):
                where.setdefault(pair, set()).add(i)

        vocab = self.vocab
        if tie_break == "ids":  # most frequent; among equals the smallest (a, b)
            def best() -> tuple[int, int]:
                return min(counts, key=lambda p: (-counts[p], p))
        else:  # most frequent; among equals the greatest (bytes of a, bytes of b)
            def best() -> tuple[int, int]:
                return max(counts, key=lambda p: (counts[p], vocab[p[0]], vocab[p[1]]))
        for new_id in range(256, vocab_size):
            if not counts:
                break
            pair = best()
            if counts[pair] < 2:
                break
            step = MergeStep(pair, new_id, self.vocab[pair[0]] + self.vocab[pair[1]], counts[pair])
            for i in where.pop(pair):
                old, new = words[i], merge(words[i], pair, new_id)
                get_pair_counts(old, counts, weight=-freqs[i])
                get_pair_counts(new, counts, weight=freqs[i])
                for p in zip(new, new[1:]):
                    where.setdefault(p, set()).add(i)
                for p in zip(old, old[1:]):
                    if counts.get(p) == 0:
                        del counts[p]
                words[i] = new
            self.merges[pair], self.vocab[new_id] = new_id, step.token
            self.history.append(step)
            if verbose:
                print(f"merge {new_id - 255}/{vocab_size - 256}: {pair} -> {new_id} "
                      f"{_show(step.token)} ({step.count} times)")
            if progress is not None:
                progress(step)
        self.register_special_tokens({sp: len(self.vocab) + k for k, sp in enumerate(specials)})
        return self.history

    @staticmethod
    def _split_at_specials(text: str, specials: list[str]) -> list[str]:
        """``text`` cut at every special token, the tokens themselves dropped (longest first wins)."""
        if not specials:
            return [text]
        alternatives = "|".join(re.escape(sp) for sp in sorted(specials, key=len, reverse=True))
        return [part for part in re.split(alternatives, text) if part]

    # ---------------------------------------------------------------- special tokens
    def register_special_tokens(self, tokens: dict[str, int]) -> None:
        """Add special tokens, e.g. ``{"<|endoftext|>": 512}``; ids must be >= ``len(self.vocab)``."""
        taken = {i: s for s, i in self.special_tokens.items()}
        for text, token_id in tokens.items():
            if not isinstance(text, str) or not text:
                raise ValueError(f"a special token must be a non-empty string, got {text!r}")
            if not isinstance(token_id, int) or token_id < len(self.vocab):
                raise ValueError(
                    f"special token {text!r} has id {token_id!r}, but special ids must be integers "
                    f">= the ordinary vocabulary size {len(self.vocab)} (ids 0..{len(self.vocab) - 1} are taken)"
                )
            if taken.get(token_id, text) != text:
                raise ValueError(f"special token {text!r} has id {token_id}, already used by {taken[token_id]!r}")
            taken[token_id] = text
        self.special_tokens.update(tokens)

    # ---------------------------------------------------------------- encode / decode
    def _encode_chunk(self, data: bytes) -> list[int]:
        """Apply the merges to one chunk: always the present pair learned first (lowest id)."""
        ids = list(data)
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.merges.get(p, float("inf")))
            if pair not in self.merges:
                break  # no learned pair left in the chunk
            ids = merge(ids, pair, self.merges[pair])
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` ignoring special tokens (their strings become ordinary bytes).

        A chunk seen before is not merged again: the ids of up to 65,536 chunks
        are remembered (natural text repeats its words), and forgotten when the
        merges change.
        """
        key = (id(self.merges), len(self.merges))
        if key != self._cache_key:
            self._cache, self._cache_key = {}, key
        cache, ids = self._cache, []
        for chunk in self.split(text):
            chunk_ids = cache.get(chunk)
            if chunk_ids is None:
                chunk_ids = self._encode_chunk(chunk.encode("utf-8"))
                if len(cache) >= _CACHE_SIZE:
                    cache.clear()
                cache[chunk] = chunk_ids
            ids.extend(chunk_ids)
        return ids

    def encode(self, text: str, allowed_special: str | set[str] = "none_raise") -> list[int]:
        """Encode ``text`` into token ids.

        Args:
            text: any string UTF-8 can encode (lone surrogates cannot be).
            allowed_special: which special token strings become their special id:
                ``"all"``; a set of them; ``"none"`` (every special string is
                ordinary text); ``"none_raise"`` (the default, as in tiktoken:
                no special is allowed). A registered special token that appears
                in ``text`` but is not allowed raises ``ValueError``, except
                with ``"none"``, so a special string pasted into user text cannot
                silently become a control token.

        Returns:
            ``list[int]`` of token ids.
        """
        if allowed_special == "none":
            return self.encode_ordinary(text)
        if allowed_special == "all":
            allowed = set(self.special_tokens)
        elif allowed_special == "none_raise":
            allowed = set()
        elif isinstance(allowed_special, (set, frozenset)):
            allowed = set(allowed_special)
            unknown = sorted(allowed - set(self.special_tokens))
            if unknown:
                raise ValueError(
                    f"allowed_special names {unknown}, which are not registered special tokens "
                    f"{sorted(self.special_tokens)}"
                )
        else:
            raise ValueError(
                "allowed_special must be 'all', 'none', 'none_raise' or a set of special tokens, "
                f"got {allowed_special!r}"
            )
        for special in self.special_tokens:
            if special not in allowed and special in text:
                raise ValueError(
                    f"text contains the special token {special!r}, which is not allowed; pass "
                    f"allowed_special={{{special!r}}} or 'all' to encode it as a special token, "
                    "or 'none' to encode it as text"
                )
        if not allowed:
            return self.encode_ordinary(text)
        # Longest first, so that a special token wins over a special token that is its prefix.
        alternatives = "|".join(re.escape(s) for s in sorted(allowed, key=len, reverse=True))
        ids = []
        for k, part in enumerate(re.split(f"({alternatives})", text)):
            ids.extend([self.special_tokens[part]] if k % 2 else self.encode_ordinary(part))
        return ids

    def encode_iterable(self, texts: Iterable[str], allowed_special: str | set[str] = "none_raise") -> Iterator[int]:
        """Encode a stream of text lazily: ``texts`` (the lines of a file, say) in, token ids out.

        Gives exactly ``encode("".join(texts), allowed_special)``, while holding
        only the text since the last safe cut: a line break between two
        characters that are not whitespace, where the GPT-2 and GPT-4 patterns
        cut the text in two exactly as they cut the whole. Memory stays bounded by the longest stretch of
        text without such a point (for a text file, a line or a blank run).

            with open("big.txt") as f:
                for token_id in tok.encode_iterable(f):
                    ...

        A special token containing a line break is refused here (a cut could
        fall inside it); ``pattern=None`` has no safe cut, so it is refused too.
        """
        if self._regex is None:
            raise ValueError("encode_iterable needs a pre-split pattern: with pattern=None the whole text is one "
                             "chunk, which cannot be encoded in pieces")
        if isinstance(texts, str):
            raise ValueError("encode_iterable takes an iterable of strings (a file, a list of lines); "
                             "for one string use encode()")
        broken = [sp for sp in self.special_tokens if "\n" in sp]
        if broken:
            raise ValueError(f"special tokens {broken} contain a line break; encode_iterable cuts at line breaks")
        buffer = ""
        for k, piece in enumerate(texts):
            if not isinstance(piece, str):
                raise TypeError(f"encode_iterable: item {k} is {type(piece).__name__}, not str "
                                "(open files in text mode)")
            buffer += piece
            cut = None
            for m in _SAFE_CUT.finditer(buffer, max(0, len(buffer) - len(piece) - 2)):
                cut = m.end()
            if cut is not None:
                yield from self.encode(buffer[:cut], allowed_special)
                buffer = buffer[cut:]
        if buffer:
            yield from self.encode(buffer, allowed_special)

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids back to text; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    # ---------------------------------------------------------------- save / load
    def save(self, path: str | Path) -> Path:
        """Write a text file: a version line, the pattern, one line per special token and per merge.

        Strings are written as JSON (so any pattern or special token fits on one
        line); each merge line ends with a comment that shows the new token::

            course_lib.tokenizer bpe v1
            pattern "'(?i:[sdmt]|ll|ve|re)|..."
            special 512 "<|endoftext|>"
            merge 101 32  # 256 = 'e '

        Returns:
            the path written.
        """
        path = Path(path)
        lines = [_VERSION_LINE, f"pattern {json.dumps(self.pattern)}"]
        lines += [f"special {i} {json.dumps(s)}" for s, i in self.special_tokens.items()]
        lines += [f"merge {a} {b}  # {n} = {_show(self.vocab[n])}" for (a, b), n in self.merges.items()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        """Read a file written by :meth:`save`; a malformed file raises ``ValueError``."""
        path = Path(path)
        lines = path.read_text(encoding="utf-8").splitlines()

        def bad(lineno: int, problem: str) -> ValueError:
            return ValueError(f"{path}: line {lineno}: {problem}")

        if not lines or lines[0] != _VERSION_LINE:
            raise bad(1, f"expected the version line {_VERSION_LINE!r}, got {lines[0] if lines else ''!r}")
        if len(lines) < 2 or not lines[1].startswith("pattern "):
            raise bad(2, "expected 'pattern <JSON string or null>'")
        try:
            pattern = json.loads(lines[1][len("pattern "):])
        except json.JSONDecodeError as e:
            raise bad(2, f"the pattern is not valid JSON ({e})") from None
        if pattern is not None and not isinstance(pattern, str):
            raise bad(2, f"the pattern must be a string or null, got {pattern!r}")
        try:
            tok = cls(pattern)
        except ValueError as e:
            raise bad(2, str(e)) from None

        specials: dict[str, int] = {}
        for lineno, line in enumerate(lines[2:], start=3):
            kind, _, rest = line.partition(" ")
            if kind == "merge":
                fields = rest.split("#", 1)[0].split()
                if len(fields) != 2 or not all(f.isdigit() for f in fields):
                    raise bad(lineno, f"expected 'merge <id> <id>', got {line!r}")
                pair, new_id = (int(fields[0]), int(fields[1])), len(tok.vocab)
                if max(pair) >= new_id:
                    raise bad(lineno, f"merge {pair} uses an id that does not exist yet (ids so far: 0..{new_id - 1})")
                if pair in tok.merges:
                    raise bad(lineno, f"merge {pair} appears twice")
                tok.merges[pair], tok.vocab[new_id] = new_id, tok.vocab[pair[0]] + tok.vocab[pair[1]]
            elif kind == "special":
                id_text, _, string = rest.partition(" ")
                try:
                    specials[json.loads(string)] = int(id_text)
                except (ValueError, TypeError):
                    raise bad(lineno, f"expected 'special <id> <JSON string>', got {line!r}") from None
            elif line.strip():
                raise bad(lineno, f"expected a 'merge' or 'special' line, got {line!r}")
        try:
            tok.register_special_tokens(specials)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        return tok
