"""A learning-management system's zip, unpacked into submitted/: each entry its own unit of failure.

The invariant: whatever one learner's entries are (a bomb, a name no folder can take, a broken notebook, two copies,
a forged time), every other learner's notebook is imported as it was, with the zip's own time; nothing lands outside
submitted/; what was left out is named with its rule. The hostile zips of issue 49 are cases here, and the fuzzer
(tests/grading/test_fuzz_intake.py) draws more.
"""

from __future__ import annotations

import datetime as dt
import shutil
import struct
import zipfile

import pytest

from classroom import zip_import
from classroom.intake import check_submission, find_submissions
from nbtools import ROOT

GOOD = (ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes()


@pytest.fixture
def course(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    return tmp_path


def _zip(path, files: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _entry(name: str, when: tuple, extended_utc: int | None = None):
    info = zipfile.ZipInfo(name, date_time=when)
    if extended_utc is not None:  # Info-ZIP's extended timestamp: flags (mtime present), then a Unix time
        info.extra = struct.pack("<HHBi", 0x5455, 5, 1, extended_utc)
    return info


def _imported(course) -> dict[str, bytes]:
    return {s: (course / "submitted" / s / "02-attention" / "attention.ipynb").read_bytes()
            for s in find_submissions(course, "02-attention")}


def test_a_zip_export_lands_one_folder_per_student(course, tmp_path):
    archive = _zip(tmp_path / "export.zip", {
        "export/alice/attention.ipynb": GOOD,
        "export/bob/02-attention/attention.ipynb": GOOD,
        "export/carol/Attention (1).ipynb": GOOD,
        "export/dave/attention.ipynb": b"{ broken",
        "export/__MACOSX/._junk": b"",
    })
    problems = zip_import.import_zip(course, archive, ["02-attention", "04-normalization"]).problems
    assert _imported(course) == {"alice": GOOD, "bob": GOOD}
    reasons = {p.student: p.reason for p in problems}
    assert set(reasons) == {"carol", "dave"}
    assert "wrong file name 'Attention (1).ipynb'" in reasons["carol"] and "attention.ipynb" in reasons["carol"]
    assert "not valid JSON" in reasons["dave"]


def test_a_one_learner_export_is_that_learners_not_a_top_folder(course, tmp_path):
    """``solo/02-attention/attention.ipynb``: the second part is an assignment, so the first is the learner."""
    zip_import.import_zip(course, _zip(tmp_path / "solo.zip", {"solo/02-attention/attention.ipynb": GOOD}),
                          ["02-attention"])
    assert _imported(course) == {"solo": GOOD}


def test_a_broken_resubmission_in_a_zip_never_overwrites_the_good_one(course, tmp_path):
    zip_import.import_zip(course, _zip(tmp_path / "a.zip", {"alice/attention.ipynb": GOOD}), ["02-attention"])
    problems = zip_import.import_zip(course, _zip(tmp_path / "b.zip", {"alice/attention.ipynb": b"{"}),
                                     ["02-attention"]).problems
    assert _imported(course) == {"alice": GOOD}
    assert len(problems) == 1 and "earlier submission was kept" in problems[0].reason


def test_unsafe_paths_in_a_zip_are_left_out(course, tmp_path):
    problems = zip_import.import_zip(course, _zip(tmp_path / "evil.zip", {"../../attention.ipynb": GOOD}),
                                     ["02-attention"]).problems
    assert problems and "unsafe path" in problems[0].reason
    assert not (tmp_path.parent / "attention.ipynb").exists()


def test_a_zip_import_dates_each_submission_by_the_zips_own_record(course, tmp_path):
    """Each submission gets nbgrader's timestamp.txt (the late policy reads it) and submission_secret.txt: the zip's
    file time read in the course's zone, or the exact UTC time where the zip records one. A timestamp.txt in the zip
    was written by whoever made the file: it is ignored (2001 is not accepted), and the import says so once. An
    unchanged resubmission keeps both, a changed one gets its new time and keeps its secret."""
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(_entry("export/alice/attention.ipynb", (2026, 12, 4, 23, 30, 0)), GOOD)
        zf.writestr(_entry("export/bob/attention.ipynb", (2026, 12, 4, 23, 30, 0), extended_utc=1_796_000_000),
                    GOOD)
        zf.writestr(_entry("export/carol/02-attention/attention.ipynb", (2026, 12, 4, 23, 30, 0)), GOOD)
        zf.writestr("export/carol/02-attention/timestamp.txt", "2001-01-01 00:00:00 UTC")
        zf.writestr(_entry("export/dave/attention.ipynb", (2026, 12, 4, 23, 30, 0)), GOOD)
        zf.writestr("export/dave/timestamp.txt", "the fourth of December")
    done = zip_import.import_zip(course, archive, ["02-attention"], zone="Europe/Berlin")
    folder = {s: course / "submitted" / s / "02-attention" for s in ("alice", "bob", "carol", "dave")}
    stamp = {s: (f / "timestamp.txt").read_text() for s, f in folder.items()}
    assert stamp["alice"] == stamp["carol"] == stamp["dave"] == "2026-12-04 22:30:00.000000 UTC"  # Berlin, CET
    assert stamp["bob"] == f"{dt.datetime.fromtimestamp(1_796_000_000, dt.timezone.utc):%Y-%m-%d %H:%M:%S}.000000 UTC"
    assert done.problems == []
    assert len(done.notes) == 1 and "2 timestamp.txt file(s) in the zip ignored" in done.notes[0], done.notes
    secret = {s: (f / "submission_secret.txt").read_text() for s, f in folder.items()}
    assert all(len(v) == 128 and int(v, 16) >= 0 for v in secret.values()) and len(set(secret.values())) == 4

    zip_import.import_zip(course, archive, ["02-attention"], zone="UTC")  # the same zip again: nothing changes
    assert {s: (f / "timestamp.txt").read_text() for s, f in folder.items()} == stamp
    changed = GOOD.replace(b"attention", b"attention ", 1)
    with zipfile.ZipFile(tmp_path / "later.zip", "w") as zf:
        zf.writestr(_entry("alice/attention.ipynb", (2026, 12, 5, 8, 0, 0)), changed)
    zip_import.import_zip(course, tmp_path / "later.zip", ["02-attention"], zone="UTC")
    assert (folder["alice"] / "timestamp.txt").read_text() == "2026-12-05 08:00:00.000000 UTC"
    assert (folder["alice"] / "submission_secret.txt").read_text() == secret["alice"]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_two_copies_of_one_learners_notebook_are_named_and_the_newer_taken(course, tmp_path):
    older, newer = GOOD, GOOD.replace(b"attention", b"attention ", 1)
    archive = tmp_path / "dup.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(_entry("ann/attention.ipynb", (2026, 12, 5, 8, 0, 0)), newer)
        zf.writestr(_entry("ann/attention.ipynb", (2026, 12, 4, 8, 0, 0)), older)
        zf.writestr(_entry("ben/attention.ipynb", (2026, 12, 4, 8, 0, 0)), older)
        zf.writestr(_entry("ben/02-attention/attention.ipynb", (2026, 12, 4, 8, 0, 0)), newer)
        zf.writestr(_entry("cy/attention.ipynb", (2026, 12, 4, 8, 0, 0)), GOOD)
    problems = zip_import.import_zip(course, archive, ["02-attention"]).problems
    assert _imported(course) == {"ann": newer, "cy": GOOD}
    reasons = {(p.student, p.reason) for p in problems}
    assert ("ann", "the zip holds another copy of this learner's notebook, newer: that one was imported") in reasons
    assert sum(p.student == "ben" and "same time: neither was imported" in p.reason for p in problems) == 2


@pytest.mark.parametrize("name, rule", [
    ("honest\n/attention.ipynb", "control character"),  # `$` of a re.match would let the line feed through
    ("a" * 300 + "/attention.ipynb", "longer than 255 bytes"),
    ("x" * 65 + "/attention.ipynb", "at most 64 characters"),
    ("=HYPERLINK(1)/attention.ipynb", "letters, digits"),
    ("\x1b[2Jevil/attention.ipynb", "control character"),
    ("évil/attention.ipynb", "letters, digits"),
])
def test_a_folder_name_that_is_no_learners_id_costs_its_entry_alone(course, tmp_path, name, rule):
    archive = _zip(tmp_path / "names.zip", {name: GOOD, "honest/attention.ipynb": GOOD})
    problems = zip_import.import_zip(course, archive, ["02-attention"]).problems
    assert _imported(course) == {"honest": GOOD}
    assert len(problems) == 1 and rule in problems[0].reason, problems
    honest = course / "submitted" / "honest" / "02-attention" / "attention.ipynb"
    assert check_submission(course, "honest", "02-attention", [honest]) == []


def test_a_zip_bomb_costs_its_entry_and_the_import_reads_a_bounded_amount(course, tmp_path):
    """An entry that unpacks to 256 MiB from 0.25 MiB is read as a stream and stopped past the notebook's bound: the
    import's memory stays small (a whole read of a 1 GiB one took 3.2 GiB), the bomb is named, the classmate is
    imported."""
    import resource

    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        bomb = zipfile.ZipInfo("bomber/attention.ipynb")
        bomb.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(bomb, "w", force_zip64=True) as f:
            block = b" " * (1 << 20)
            for _ in range(256):
                f.write(block)
        zf.writestr("honest/attention.ipynb", GOOD)
    assert archive.stat().st_size < 1 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problems = zip_import.import_zip(course, archive, ["02-attention"]).problems
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
    assert _imported(course) == {"honest": GOOD}
    assert [p.student for p in problems] == ["bomber"] and "over the course's limit" in problems[0].reason
    assert grown < 200 * 1024, f"the import grew by {grown} KiB"


def test_a_zip_of_too_many_entries_is_refused_whole_with_nothing_imported(course, tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"l{i}/x.txt": b"" for i in range(30)} | {"honest/attention.ipynb": GOOD})
    with pytest.raises(SystemExit, match="31 entries, over the course's limit of 20"):
        zip_import.import_zip(course, archive, ["02-attention"], bounds=zip_import.ZipBounds(entries=20))
    assert _imported(course) == {}


def test_an_export_past_its_total_size_names_what_it_left_out(course, tmp_path):
    archive = _zip(tmp_path / "big.zip", {f"l{i}/attention.ipynb": GOOD for i in range(4)})
    bounds = zip_import.ZipBounds(total_bytes=len(GOOD) * 2)
    problems = zip_import.import_zip(course, archive, ["02-attention"], bounds=bounds).problems
    assert sorted(_imported(course)) == ["l0", "l1", "l2"]  # the third entry's read passes the total
    assert [p.student for p in problems] == ["l3"] and "more than" in problems[0].reason


def test_a_notebook_nested_deep_or_over_its_bounds_is_named_not_parsed(course, tmp_path):
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    archive = _zip(tmp_path / "deep.zip", {"deep/attention.ipynb": deep, "honest/attention.ipynb": GOOD})
    problems = zip_import.import_zip(course, archive, ["02-attention"]).problems
    assert _imported(course) == {"honest": GOOD}
    assert [p.student for p in problems] == ["deep"] and "nested more than 32 levels" in problems[0].reason


def _raw_zip(path, names: list[str], body: bytes = GOOD):
    """A zip whose entries have exactly these names, as bytes in the zip (a NUL kept: zipfile's writer cuts it)."""
    import struct
    import zlib

    local, central, offset = b"", b"", 0
    for name in names:
        raw = name.encode("utf-8", "surrogatepass")
        crc = zlib.crc32(body)
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x800, 0, 0, 0x5921, crc, len(body), len(body),
                             len(raw), 0) + raw
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0x800, 0, 0, 0x5921, crc, len(body),
                               len(body), len(raw), 0, 0, 0, 0, 0, offset) + raw
        local += header + body
        offset += len(header) + len(body)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(names), len(names), len(central), offset, 0)
    path.write_bytes(local + central + end)
    return path


@pytest.mark.parametrize("names, rule", [
    # what the fuzzer found (tests/grading/test_fuzz_intake.py), kept as cases
    (["export/02-attention/attention.ipynb", "export/honest/attention.ipynb"], None),  # a learner named 02-attention
    (["export/x\x00/attention.ipynb", "export/honest/attention.ipynb"], "control character"),  # cut at the NUL
    (["\x00/attention.ipynb", "honest/attention.ipynb"], "control character"),  # a name that is only a NUL
    (["export/stray", "export/honest/attention.ipynb"], "not inside a student's folder"),  # a file beside the folders
])
def test_what_the_fuzzer_found_costs_its_own_entry_alone(course, tmp_path, names, rule):
    done = zip_import.import_zip(course, _raw_zip(tmp_path / "found.zip", names), ["02-attention"])
    assert _imported(course)["honest"] == GOOD
    if rule is None:
        assert done.problems == [] and sorted(_imported(course)) == ["02-attention", "honest"]
    else:
        assert len(done.problems) == 1 and rule in done.problems[0].reason, done.problems
