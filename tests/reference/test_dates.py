"""course_lib.data's date translation task: formats, encoding, and a held-out split that never leaks."""

from __future__ import annotations

import datetime as dt

import pytest
import torch

from course_lib.data import (
    BOS,
    DATE_CHARS,
    DATE_FORMATS,
    DATE_HOLDOUT,
    EOS,
    N_SPECIAL,
    PAD,
    date_pairs,
    decode_dates,
    encode_dates,
    format_date,
)

FIRST = dt.date(1900, 1, 1).toordinal()

#: how each format reads back (strptime patterns; the ordinal suffix is removed first)
PARSE = {
    "day_month_year": "%d %B %Y", "month_day_year": "%B %d, %Y", "weekday_day_month_year": "%A, %d %B %Y",
    "short_weekday_day_month_year": "%a %d %b %Y", "day_short_month_year": "%d %b %Y",
    "short_month_day_year": "%b %d %Y", "dotted": "%d.%m.%Y", "slashed_iso": "%Y/%m/%d", "ordinal": "the %d of %B %Y",
}


def _parse(text: str, fmt: str) -> dt.date:
    if fmt == "ordinal":
        words = text.split()
        words[1] = words[1][:-2]  # 24th -> 24
        text = " ".join(words)
    return dt.datetime.strptime(text, PARSE[fmt]).date()


def test_one_date_in_every_format():
    day = dt.date(2026, 11, 24)
    assert [format_date(day, f) for f in DATE_FORMATS] == [
        "24 November 2026", "November 24, 2026", "Tuesday, 24 November 2026", "Tue 24 Nov 2026", "24 Nov 2026",
        "Nov 24 2026", "24.11.2026", "2026/11/24", "the 24th of November 2026"]


@pytest.mark.parametrize("day, suffix", [(1, "st"), (2, "nd"), (3, "rd"), (4, "th"), (11, "th"), (12, "th"),
                                         (13, "th"), (21, "st"), (22, "nd"), (23, "rd"), (31, "st")])
def test_ordinal_suffixes(day, suffix):
    assert format_date(dt.date(2001, 1, day), "ordinal") == f"the {day}{suffix} of January 2001"


def test_every_source_means_its_target_weekdays_included():
    src, tgt, sources, targets = date_pairs(3000, torch.Generator().manual_seed(0))
    seen = set()
    for text, iso in zip(sources, targets):
        fmt = next(f for f in DATE_FORMATS if format_date(dt.date.fromisoformat(iso), f) == text)
        assert _parse(text, fmt) == dt.date.fromisoformat(iso)
        seen.add(fmt)
    assert seen == set(DATE_FORMATS)
    assert decode_dates(src) == sources and decode_dates(tgt) == targets


def test_encoding_follows_the_sequence_task_conventions():
    src = encode_dates(["1 May 1999", "2000/01/02"])
    tgt = encode_dates(["1999-05-01"], bos=True)
    assert src.shape == (2, 11) and tgt.shape == (1, 12)
    assert src[0, 10] == EOS and src[1, 10] == EOS and (src[0, :10] >= N_SPECIAL).all()
    assert tgt[0, 0] == BOS and tgt[0, -1] == EOS
    short = encode_dates(["1 May", "2000/01/02"])
    assert short[0, 5] == EOS and (short[0, 6:] == PAD).all()
    assert DATE_CHARS[int(src[0, 0]) - N_SPECIAL] == "1"
    with pytest.raises(ValueError, match=r"\['é'\] are not in DATE_CHARS"):
        encode_dates(["1 Mé 1999"])


def test_the_test_split_holds_only_days_the_train_split_never_draws():
    g = torch.Generator().manual_seed(1)
    train = date_pairs(20000, g, split="train")[3]
    test = date_pairs(5000, g, split="test")[3]
    offset = lambda iso: dt.date.fromisoformat(iso).toordinal() - FIRST
    assert all(offset(d) % DATE_HOLDOUT for d in train)
    assert all(offset(d) % DATE_HOLDOUT == 0 for d in test)
    for split in (train, test):  # both span the two centuries
        years = sorted(int(d[:4]) for d in split)
        assert years[0] < 1905 and years[-1] > 2094
    assert len(set(train)) > 15000  # many distinct days, not a few repeated


def test_the_same_generator_state_gives_the_same_pairs():
    a = date_pairs(50, torch.Generator().manual_seed(3), split="train")
    b = date_pairs(50, torch.Generator().manual_seed(3), split="train")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert date_pairs(50, torch.Generator().manual_seed(4))[2] != a[2]


def test_a_selection_of_formats_is_respected():
    _, _, sources, _ = date_pairs(200, torch.Generator().manual_seed(5), formats=("dotted",))
    assert all(len(s) == 10 and s[2] == s[5] == "." for s in sources)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(n=0), r"n must be >= 1, got 0"),
    (dict(n=3, split="val"), r"split must be one of \('train', 'test', 'all'\), got 'val'"),
    (dict(n=3, formats=("iso8601",)), r"formats must be a non-empty selection of .*got \('iso8601',\)"),
    (dict(n=3, formats=()), r"formats must be a non-empty selection"),
])
def test_bad_arguments_are_named(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        date_pairs(**kwargs)
    with pytest.raises(ValueError, match=r"fmt must be one of .*got 'nope'"):
        format_date(dt.date(2000, 1, 1), "nope")
