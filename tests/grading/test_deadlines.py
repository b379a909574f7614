"""Due dates, extensions and late penalties: deadlines.toml as `make grade` and nbgrader apply it.

These tests read policies (each broken rule is refused, naming the value and the rule) and compute
penalties. `make grade` applying a policy with real nbgrader, to on-time, late and extended submissions,
is in test_nbgrader_roundtrip.py, on the class it grades anyway.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from classroom.late import CourseLatePolicy, DeadlineError, Deadlines, read_deadlines
from classroom.report import late_text
from nbtools import ROOT

COURSE = ["01-tokenization", "02-attention"]


def policy(tmp_path: Path, text: str, assignments=COURSE) -> Deadlines:
    path = tmp_path / "deadlines.toml"
    path.write_text(text)
    return read_deadlines(path, assignments)


def test_no_file_means_no_due_dates(tmp_path):
    d = read_deadlines(tmp_path / "deadlines.toml", COURSE)
    assert d == Deadlines() and d.penalty_for(10, 10_000) == 0


def test_dates_without_an_offset_are_in_the_course_timezone_and_stored_as_utc(tmp_path):
    d = policy(tmp_path, 'timezone = "Europe/Berlin"\n[due]\n02-attention = 2026-12-04T23:59:00\n'
                         '01-tokenization = 2026-07-01T12:00:00+00:00\n'
                         '[extensions.02-attention]\nalice = 2026-12-06T23:59:00\n"bob.k@uni" = 2026-12-05T00:59:00\n')
    assert d.due["02-attention"] == dt.datetime(2026, 12, 4, 22, 59)  # CET is UTC+1 in December
    assert d.due["01-tokenization"] == dt.datetime(2026, 7, 1, 12, 0)  # an explicit offset wins
    assert d.extension("02-attention", "alice") == dt.timedelta(days=2)
    assert d.extension("02-attention", "bob.k@uni") == dt.timedelta(hours=1)
    assert d.extension("02-attention", "carol") is None and d.extension("01-tokenization", "alice") is None


@pytest.mark.parametrize("penalty, points, late_s, score, taken", [
    ("none", None, 3600 * 50, 10, 0),
    ("zero", None, 1, 7, 7),
    ("zero", None, 0, 7, 0),
    ("per-hour", 1, 1, 10, 1),              # an hour begun counts
    ("per-hour", 1, 3600, 10, 1),
    ("per-hour", 1, 3601, 10, 2),
    ("per-hour", 2.5, 9000, 10, 7.5),       # 2 h 30 min: three hours begun
    ("per-hour", 1, 3600 * 30, 4, 4),       # never more than the score
    ("per-hour", 1, 0, 10, 0),
])
def test_penalties(tmp_path, penalty, points, late_s, score, taken):
    text = f'[late]\npenalty = "{penalty}"\n' + (f"points_per_hour = {points}\n" if points is not None else "")
    assert policy(tmp_path, text).penalty_for(score, late_s) == taken


def test_nbgraders_plugin_takes_the_same_points(tmp_path):
    plugin = CourseLatePolicy(penalty="per-hour", points_per_hour=1.0)
    assert plugin.late_submission_penalty("alice", 10.0, 9000) == 3
    assert CourseLatePolicy(penalty="zero").late_submission_penalty("alice", 6.0, 5) == 6
    assert CourseLatePolicy(penalty="none").late_submission_penalty("alice", 6.0, 5) is None


@pytest.mark.parametrize("text, named", [
    ("[due\n", "not a TOML file"),
    ('timezone = "Mars/Olympus"\n', "'Mars/Olympus' is not a time zone"),
    ("[late]\npenalty = \"half\"\n", "penalty = 'half' is not one of ['none', 'zero', 'per-hour']"),
    ("[late]\npenalty = \"per-hour\"\n", "points_per_hour = 0 must be a positive number"),
    ("[late]\npenalty = \"per-hour\"\npoints_per_hour = -1\n", "points_per_hour = -1 must be a positive number"),
    ("[late]\npenalty = \"per-hour\"\npoints_per_hour = true\n", "points_per_hour = True must be a positive"),
    ("[late]\npenalty = \"zero\"\npoints_per_hour = 2\n", "applies only with penalty = 'per-hour'"),
    ("[late]\npenalty = \"zero\"\ngrace = 5\n", "unknown key(s) ['grace'] in [late]"),
    ("[dues]\n02-attention = 2026-12-04T23:59:00\n", "unknown section(s) ['dues']"),
    ("[due]\n02-atention = 2026-12-04T23:59:00\n", "[due] 02-atention is not an assignment of the course"),
    ("[due]\n02-attention = \"next friday\"\n", "[due] 02-attention = 'next friday' is not a date and time"),
    ("[due]\n02-attention = 2026-12-04\n", "is not a date and time"),
    ("[extensions.02-attention]\nalice = 2026-12-06T23:59:00\n", "[extensions.02-attention] has no due date"),
    ("[due]\n02-attention = 2026-12-04T23:59:00\n[extensions.02-attention]\nalice = 2026-12-04T23:00:00\n",
     "alice = 2026-12-04 23:00:00 is not after the assignment's due date"),
    ("[due]\n02-attention = 2026-12-04T23:59:00\n[extensions.02-attention]\n\"../x\" = 2026-12-06T23:59:00\n",
     "'../x' is not a learner id"),
])
def test_a_broken_file_is_refused_naming_the_value_and_the_rule(tmp_path, text, named):
    with pytest.raises(DeadlineError) as err:
        policy(tmp_path, text)
    assert named in str(err.value) and "deadlines.toml" in str(err.value), str(err.value)


def test_times_late_read_as_an_instructor_reads_them():
    assert late_text(1) == "1 min" and late_text(9000) == "2 h 30 min" and late_text(3600) == "1 h"
    assert late_text(86400 * 2 + 61) == "2 d 2 min"


def test_the_example_file_is_a_valid_policy():
    example = ROOT / "deadlines.example.toml"
    d = read_deadlines(example, sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()))
    assert d.due and d.extensions and d.penalty in ("none", "zero", "per-hour")
