"""course_lib.tokenizer: byte-level BPE training, encoding, special tokens, save and load."""

from __future__ import annotations

import copy
import functools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import tokenizer as T

REPO = Path(__file__).resolve().parents[2]
PATTERNS = {"gpt4": T.GPT4_SPLIT_PATTERN, "gpt2": T.GPT2_SPLIT_PATTERN, "none": None}


@functools.cache
def corpus() -> str:
    """The course's own prose: the README and every chapter page (nothing downloaded)."""
    paths = [REPO / "README.md", REPO / "intro.md", *sorted((REPO / "chapters").rglob("*.md"))]
    return "\n\n".join(p.read_text(encoding="utf-8") for p in paths if p.exists())


@functools.cache
def trained(pattern_name: str = "gpt4", vocab_size: int = 400) -> T.Tokenizer:
    tok = T.Tokenizer(PATTERNS[pattern_name])
    tok.train(corpus(), vocab_size)
    return tok


def reference_train(text: str, vocab_size: int, pattern: str | None) -> list[tuple[int, int]]:
    """BPE the slow, obvious way: recount every pair of every chunk before each merge."""
    return reference_train_parts([text], vocab_size, pattern)


UNICODE_SAMPLES = [
    "", " ", "\n", "\t\t", "\x00", "a\x00b", "héllo wörld", "e\u0301 n\u0303", "日本語のテキスト",
    "emoji 😀👍🏽 family 👨‍👩‍👧", "Ünïcödé\r\n\r\n  trailing   ", "<|endoftext|>",
    "x = f(a_b, 12345)",
]


# ---------------------------------------------------------------- properties
@pytest.mark.parametrize("pattern_name", ["gpt4", "gpt2", "none"])
@given(text=st.text())
@settings(max_examples=100, deadline=None)
def test_round_trip_is_exact_on_any_text(pattern_name, text):
    tok = trained(pattern_name, 300)
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_round_trip_is_exact_on_hard_cases(text):
    tok = trained()
    assert tok.decode(tok.encode(text, allowed_special="none")) == text


@pytest.mark.parametrize("pattern_name", ["gpt4", "gpt2"])
@given(text=st.text())
def test_split_covers_the_text_exactly(pattern_name, text):
    chunks = T.Tokenizer(PATTERNS[pattern_name]).split(text)
    assert "".join(chunks) == text and all(chunks)


@pytest.mark.parametrize("pattern_name, chunks", [
    ("gpt4", ["I", "'ll", " pay", " ", "123", "45", " dollars", "!!\n"]),
    ("gpt2", ["I", "'ll", " pay", " 12345", " dollars", "!!", "\n"]),
])
def test_split_patterns_cut_words_numbers_and_punctuation_like_gpt(pattern_name, chunks):
    assert T.Tokenizer(PATTERNS[pattern_name]).split("I'll pay 12345 dollars!!\n") == chunks


def test_split_keeps_text_an_incomplete_pattern_skips():
    assert T.Tokenizer(r"[a-z]+").split("ab 12cd!") == ["ab", " 12", "cd", "!"]


@pytest.mark.parametrize("pattern_name", ["gpt4", "none"])
@given(text=st.text(alphabet="ab c\nd'é", max_size=120))
@settings(max_examples=60, deadline=None)
def test_incremental_training_matches_recounting_from_scratch(pattern_name, text):
    tok = T.Tokenizer(PATTERNS[pattern_name])
    tok.train(text, 300)
    assert tok.merge_list == reference_train(text, 300, PATTERNS[pattern_name])


@given(ids=st.lists(st.integers(0, 3), max_size=40), a=st.integers(0, 3), b=st.integers(0, 3))
def test_merge_replaces_exactly_the_non_overlapping_occurrences(ids, a, b):
    out = T.merge(ids, (a, b), 99)
    expanded = [x for t in out for x in ((a, b) if t == 99 else (t,))]
    assert expanded == ids
    assert (a, b) not in zip(out, out[1:]) or a == b  # a run like a a a leaves one (a, a) apart
    assert len(out) == len(ids) - out.count(99)


def test_get_pair_counts_counts_adjacent_pairs_and_accumulates():
    assert T.get_pair_counts([1, 2, 3, 1, 2]) == {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    counts = T.get_pair_counts([1, 2])
    assert T.get_pair_counts([1, 2, 1], counts, weight=3) == {(1, 2): 4, (2, 1): 3}
    assert T.get_pair_counts([7]) == {} and T.get_pair_counts([]) == {}


# ---------------------------------------------------------------- training
def test_classic_example_learns_the_textbook_merges():
    # Wikipedia's "aaabdaaabac": aa -> Z, ab -> Y, ZY -> X, then no pair occurs twice.
    tok = T.Tokenizer(pattern=None)
    history = tok.train("aaabdaaabac", vocab_size=1000)
    assert tok.merge_list == [(97, 97), (97, 98), (256, 257)]
    assert [(s.new_id, s.token, s.count) for s in history] == [(256, b"aa", 4), (257, b"ab", 2), (258, b"aaab", 2)]
    assert tok.encode("aaabdaaabac") == [258, ord("d"), 258, ord("a"), ord("c")]


def test_ties_go_to_the_smallest_pair():
    tok = T.Tokenizer(pattern=None)
    tok.train("abcdabcd", vocab_size=257)  # ab, bc and cd each occur twice
    assert tok.merge_list == [(ord("a"), ord("b"))]


def test_encode_applies_merges_in_training_order():
    tok = T.Tokenizer(pattern=None)
    tok.train("aaabdaaabac", vocab_size=259)
    # Both (a, a) and (a, b) occur in "aab"; (a, a) was learned first, so it wins.
    assert tok.encode("aab") == [256, ord("b")]
    assert tok.encode("aaab") == [258]


def test_encode_prefers_the_earliest_learned_pair_over_the_leftmost():
    tok = T.Tokenizer(pattern=None)
    tok.train("bcbcbcabab", vocab_size=258)
    assert tok.merge_list == [(ord("b"), ord("c")), (ord("a"), ord("b"))]
    # In "abc" the pair (a, b) comes first, but (b, c) was learned first.
    assert tok.encode("abc") == [ord("a"), 256]


def test_training_is_deterministic():
    first, second = T.Tokenizer(), T.Tokenizer()
    first.train(corpus(), 400)
    second.train(corpus(), 400)
    assert first.merge_list == second.merge_list and first.vocab == second.vocab


def test_encoding_compresses_the_training_text():
    tok = trained()
    n_bytes, n_tokens = len(corpus().encode("utf-8")), len(tok.encode(corpus()))
    assert n_tokens < 0.7 * n_bytes, f"{n_tokens} tokens for {n_bytes} bytes"


def test_training_stops_at_vocab_size_and_records_each_step(capsys):
    seen = []
    tok = T.Tokenizer()
    history = tok.train(corpus(), 300, verbose=True, progress=seen.append)
    assert len(tok.merges) == len(history) == len(seen) == 44 and seen == history
    assert len(tok) == len(tok.vocab) == 300
    assert [s.new_id for s in history] == list(range(256, 300))
    assert all(s.token == tok.token_bytes(s.new_id) for s in history)
    assert all(a.count >= b.count for a, b in zip(history, history[1:]))  # counts only fall
    assert capsys.readouterr().out.count("\n") == 44
    assert len(tok.describe_merges(5).splitlines()) == 5


def test_vocab_size_below_256_is_rejected():
    with pytest.raises(ValueError, match="vocab_size must be at least 256.*got 100"):
        T.Tokenizer().train("abc", 100)


def test_an_invalid_pattern_is_rejected():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        T.Tokenizer("(unclosed")


# ---------------------------------------------------------------- decode
def test_decode_replaces_invalid_utf8():
    tok = trained()
    assert tok.decode([0xFF, ord("a")]) == "\ufffda"
    assert tok.decode([0xC3]) == "\ufffd"  # the first byte of "é" alone


def test_decode_of_an_unknown_id_names_the_id_and_the_vocab_size():
    tok = trained()
    with pytest.raises(ValueError, match=r"unknown token id 5000.*size 400"):
        tok.decode([65, 5000])
    with pytest.raises(ValueError, match=r"unknown token id -1"):
        tok.token_bytes(-1)


# ---------------------------------------------------------------- special tokens
@functools.cache
def _special_tokenizer() -> T.Tokenizer:
    tok = T.Tokenizer()
    tok.train(corpus(), 300)
    tok.register_special_tokens({"<|endoftext|>": 300, "<|pad|>": 301})
    return tok


def special_tokenizer() -> T.Tokenizer:
    """A tokenizer with 300 ordinary ids and two special tokens; a fresh copy each call."""
    return copy.deepcopy(_special_tokenizer())


def test_special_tokens_count_in_len_and_decode_to_their_text():
    tok = special_tokenizer()
    assert len(tok) == 302
    assert tok.token_bytes(300) == b"<|endoftext|>"
    assert tok.decode([300, 301]) == "<|endoftext|><|pad|>"


def test_allowed_special_tokens_become_single_ids():
    tok = special_tokenizer()
    text = "one<|endoftext|>two<|pad|>"
    ids = tok.encode(text, allowed_special="all")
    assert ids.count(300) == 1 and ids.count(301) == 1
    assert tok.decode(ids) == text
    assert tok.encode("<|pad|>", allowed_special={"<|pad|>"}) == [301]


@given(parts=st.lists(st.one_of(st.text(max_size=8), st.sampled_from(["<|endoftext|>", "<|pad|>"])), max_size=8))
def test_round_trip_is_exact_with_special_tokens_allowed(parts):
    tok = special_tokenizer()
    text = "".join(parts)
    assert tok.decode(tok.encode(text, allowed_special="all")) == text


def test_special_text_is_ordinary_text_with_allowed_special_none():
    tok = special_tokenizer()
    ids = tok.encode("a<|endoftext|>b", allowed_special="none")
    assert 300 not in ids and tok.decode(ids) == "a<|endoftext|>b"


@pytest.mark.parametrize("allowed", ["none_raise", {"<|pad|>"}])
def test_a_special_token_that_is_not_allowed_raises(allowed):
    tok = special_tokenizer()
    with pytest.raises(ValueError, match=r"special token '<\|endoftext\|>', which is not allowed"):
        tok.encode("a<|endoftext|>b", allowed_special=allowed)
    assert tok.decode(tok.encode("no specials here", allowed_special=allowed)) == "no specials here"


def test_allowed_special_must_name_registered_tokens():
    tok = special_tokenizer()
    with pytest.raises(ValueError, match="not registered"):
        tok.encode("x", allowed_special={"<|nope|>"})
    with pytest.raises(ValueError, match="allowed_special must be"):
        tok.encode("x", allowed_special="some")


@pytest.mark.parametrize("bad_id", [65, 299, -3])
def test_special_ids_must_be_above_the_ordinary_vocabulary(bad_id):
    tok = trained("gpt4", 300)
    with pytest.raises(ValueError, match=rf"id {bad_id}.*>= the ordinary vocabulary size 300"):
        tok.register_special_tokens({"<|x|>": bad_id})


def test_two_special_tokens_cannot_share_an_id():
    tok = special_tokenizer()
    with pytest.raises(ValueError, match="already used by '<\\|endoftext\\|>'"):
        tok.register_special_tokens({"<|other|>": 300})


def test_a_longer_special_token_wins_over_its_prefix():
    tok = T.Tokenizer()
    tok.register_special_tokens({"<|a|>": 256, "<|a|><|b|>": 257})
    assert tok.encode("<|a|><|b|><|a|>", allowed_special="all") == [257, 256]


# ---------------------------------------------------------------- save / load
@pytest.mark.parametrize("pattern_name", ["gpt4", "none"])
def test_save_then_load_gives_identical_encodings(tmp_path, pattern_name):
    tok = T.Tokenizer(PATTERNS[pattern_name])
    tok.train(corpus(), 300)
    tok.register_special_tokens({"<|endoftext|>": 300, 'odd "quoted"\nspecial': 400})
    loaded = T.Tokenizer.load(tok.save(tmp_path / "tok.bpe"))
    assert loaded.pattern == tok.pattern
    assert loaded.merges == tok.merges and loaded.vocab == tok.vocab
    assert loaded.special_tokens == tok.special_tokens
    for text in [corpus()[:2000], *UNICODE_SAMPLES]:
        assert loaded.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


def test_saved_file_is_readable_text(tmp_path):
    path = special_tokenizer().save(tmp_path / "tok.bpe")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "course_lib.tokenizer bpe v1" and lines[1].startswith("pattern ")
    assert lines[2] == 'special 300 "<|endoftext|>"'
    assert lines[4].startswith("merge ") and "# 256 = " in lines[4]


MALFORMED_FILES = {  # file text -> what the error must say
    "": "line 1: expected the version line",
    "some other format\n": "line 1: expected the version line",
    "course_lib.tokenizer bpe v1\n": "line 2: expected 'pattern",
    "course_lib.tokenizer bpe v1\npattern [unclosed\n": "line 2: the pattern is not valid JSON",
    'course_lib.tokenizer bpe v1\npattern "(bad"\n': "line 2: pattern '\\(bad' is not a valid regular expression",
    "course_lib.tokenizer bpe v1\npattern null\nmerge 97\n": "line 3: expected 'merge <id> <id>'",
    "course_lib.tokenizer bpe v1\npattern null\nmerge 97 x\n": "line 3: expected 'merge <id> <id>'",
    "course_lib.tokenizer bpe v1\npattern null\nmerge 97 256\n": "line 3: merge \\(97, 256\\) uses an id that does not",
    "course_lib.tokenizer bpe v1\npattern null\nmerge 97 97\nmerge 97 97\n": "line 4: merge \\(97, 97\\) appears twice",
    "course_lib.tokenizer bpe v1\npattern null\nspecial x \"<|e|>\"\n": "line 3: expected 'special <id> <JSON string>'",
    "course_lib.tokenizer bpe v1\npattern null\nspecial 10 \"<|e|>\"\n": "id 10.*>= the ordinary vocabulary size 256",
    "course_lib.tokenizer bpe v1\npattern null\nmerges 97 97\n": "line 3: expected a 'merge' or 'special' line",
}


@pytest.mark.parametrize("text", list(MALFORMED_FILES))
def test_loading_a_malformed_file_names_the_file_and_the_problem(tmp_path, text):
    path = tmp_path / "broken.bpe"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="broken.bpe.*" + MALFORMED_FILES[text]):
        T.Tokenizer.load(path)


# ---------------------------------------------------------------- the exact GPT-2 pattern
MULTILINGUAL = ("Héllo wörld! x² + ½ = ₂, 日本語 don't  stop\n\n  42apples Ⅻ 😀👍🏽 ٣٤ \t\r\n end  "
                "Ελληνικά κείμενα, русский текст; العربية ١٢٣ — नमस्ते १२ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 e\u0301 ℕ ⅷ 3.14159")


def test_the_gpt2_pattern_splits_exactly_as_gpt2s_own_pre_tokenizer():
    """Hugging Face `tokenizers` ships GPT-2's byte-level pre-tokenizer (its exact regex, in Rust)."""
    from tokenizers import pre_tokenizers

    hf = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for text in [MULTILINGUAL, corpus()[:20000], *UNICODE_SAMPLES]:
        expected = [text[a:b] for _, (a, b) in hf.pre_tokenize_str(text)]
        assert T.Tokenizer(T.GPT2_SPLIT_PATTERN).split(text) == expected


def test_numbers_are_numbers_letters_are_letters():
    assert T.Tokenizer(T.GPT2_SPLIT_PATTERN).split("x²½") == ["x", "²½"]
    assert T.Tokenizer(T.GPT4_SPLIT_PATTERN).split("x²½ 12345") == ["x", "²½", " ", "123", "45"]


# ---------------------------------------------------------------- special tokens in training
EOT = "<|endoftext|>"


def test_training_keeps_special_tokens_whole_and_never_merges_across_them():
    text = "".join(f"story {i % 7} ends here.{EOT}" for i in range(200))
    tok = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
    tok.train(text, 300, special_tokens=[EOT])
    learned = [tok.vocab[i] for i in range(256, len(tok.vocab))]
    assert learned and not any(b"<|" in t or b"|>" in t or b"endoft" in t for t in learned), learned
    assert tok.special_tokens == {EOT: len(tok.vocab)}
    ids = tok.encode(text, allowed_special="all")
    assert ids.count(tok.special_tokens[EOT]) == 200 and tok.decode(ids) == text
    # the same merges as the slow trainer over the pieces between the special tokens, each on its own
    assert tok.merge_list == reference_train_parts(text.split(EOT), 300, T.GPT2_SPLIT_PATTERN)


def reference_train_parts(parts, vocab_size, pattern, tie_break="ids"):
    """The slow trainer over chunks of several texts (no chunk spans two of them)."""
    words = [list(chunk.encode("utf-8")) for part in parts for chunk in T.Tokenizer(pattern).split(part)]
    vocab = {b: bytes([b]) for b in range(256)}
    pairs = []
    for new_id in range(256, vocab_size):
        counts = Counter(p for w in words for p in zip(w, w[1:]))
        if not counts or max(counts.values()) < 2:
            break
        if tie_break == "ids":
            best = min(counts, key=lambda p: (-counts[p], p))
        else:
            top = max(counts.values())
            best = max((vocab[a], vocab[b], (a, b)) for (a, b), c in counts.items() if c == top)[2]
        pairs.append(best)
        vocab[new_id] = vocab[best[0]] + vocab[best[1]]
        words = [T.merge(w, best, new_id) for w in words]
    return pairs


def test_special_tokens_in_training_are_checked():
    tok = T.Tokenizer()
    for bad, message in ((EOT, "list of strings"), ([""], "non-empty"), ([EOT, EOT], "twice")):
        with pytest.raises(ValueError, match=message):
            tok.train("abc abc", 260, special_tokens=bad)


# ---------------------------------------------------------------- tie-breaking
def generated_corpus(seed: int = 0, words: int = 3000) -> str:
    """A corpus with many equally frequent pairs: words drawn from a small random lexicon."""
    import random

    rng = random.Random(seed)
    lexicon = ["".join(rng.choice("abcdeéxyz") for _ in range(rng.randint(2, 6))) for _ in range(60)]
    return " ".join(rng.choice(lexicon) for _ in range(words))


@pytest.mark.parametrize("seed", [0, 1])
def test_byte_order_tie_breaking_reproduces_a_gpt2_style_trainer(seed):
    text = generated_corpus(seed)
    tok = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
    steps = tok.train(text, 400, tie_break="bytes")
    assert tok.merge_list == reference_train_parts([text], 400, T.GPT2_SPLIT_PATTERN, tie_break="bytes")
    by_ids = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
    by_ids.train(text, 400)
    assert by_ids.merge_list != tok.merge_list, "the corpus must have ties that the two rules decide differently"
    counts = [s.count for s in steps]
    assert len(counts) > len(set(counts)), "merges decided among equally frequent pairs"
    assert tok.decode(tok.encode(text)) == text


def test_an_unknown_tie_break_is_named():
    with pytest.raises(ValueError, match="tie_break='alphabetical' is not one of 'ids', 'bytes'"):
        T.Tokenizer().train("abab", 300, tie_break="alphabetical")


# ---------------------------------------------------------------- streaming
@pytest.mark.parametrize("pattern_name", ["gpt4", "gpt2"])
@given(text=st.text(alphabet=st.sampled_from(list("ab \n\t\r.'sé²1")), max_size=80), cuts=st.lists(st.integers(0, 80)))
@settings(max_examples=150, deadline=None)
def test_streaming_encode_equals_encoding_the_whole_text(pattern_name, text, cuts):
    tok = trained(pattern_name, 300)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tok.encode_iterable(pieces)) == tok.encode(text)


def test_streaming_a_file_and_special_tokens(tmp_path):
    tok = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
    tok.train(corpus()[:30000], 350, special_tokens=[EOT])
    text = (corpus()[:5000] + EOT + "\n") * 3
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8") as f:
        assert list(tok.encode_iterable(f, allowed_special="all")) == tok.encode(text, allowed_special="all")
    with pytest.raises(ValueError, match="not allowed"), open(path, encoding="utf-8") as f:
        list(tok.encode_iterable(f))


def test_streaming_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="pattern=None"):
        list(T.Tokenizer(pattern=None).encode_iterable(["abc"]))
    with pytest.raises(ValueError, match="iterable of strings"):
        list(trained().encode_iterable("one string"))
    with pytest.raises(TypeError, match="item 1 is bytes"):
        list(trained().encode_iterable(["ok\n", b"bytes"]))


def test_retraining_forgets_the_encodings_of_the_old_merges():
    tok = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
    for text in ("aaab " * 50, "abbb " * 50, "aaab " * 50):
        tok.train(text, 258)
        fresh = T.Tokenizer(T.GPT2_SPLIT_PATTERN)
        fresh.train(text, 258)
        assert tok.encode(" aaab abbb") == fresh.encode(" aaab abbb")
