"""`make grade`'s command line: bad arguments and empty classes get a clear answer, and nothing is written."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest

from classroom import batch, grade, gradebook, intake
from nbtools import ROOT


@pytest.fixture
def course(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    return tmp_path


def test_an_unknown_assignment_is_named_with_the_known_ones(course, capsys):
    assert grade.main(["--root", str(course), "--assignment", "99-nope"]) == 2
    err = capsys.readouterr().err
    assert "99-nope" in err and "02-attention" in err
    assert not (course / "grades.csv").exists()


def test_a_non_positive_timeout_is_refused(course, capsys):
    assert grade.main(["--root", str(course), "--timeout", "0"]) == 2
    assert "--timeout must be a positive number of seconds, got 0" in capsys.readouterr().err


def test_no_submissions_means_nothing_to_grade(course, capsys):
    assert grade.main(["--root", str(course)]) == 0
    assert "nothing to grade" in capsys.readouterr().out
    assert not (course / "grades.csv").exists() and not (course / "gradebook.db").exists()


def test_a_course_without_solutions_is_refused(tmp_path, capsys):
    assert grade.main(["--root", str(tmp_path)]) == 2
    assert "no assignments" in capsys.readouterr().err


@pytest.mark.parametrize("content, reason", [
    ("{ not json", "not valid JSON"),
    ('{"cells": []}', "not an nbformat 4 notebook"),
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}', "not a valid notebook"),
    ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}', "nbformat 4"),
])
def test_unreadable_notebooks_are_explained(tmp_path, content, reason):
    path = tmp_path / "a.ipynb"
    path.write_text(content)
    assert reason in intake.check_notebook(path)


def test_a_binary_file_is_explained(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "not UTF-8" in intake.check_notebook(path)


# ---------------------------------------------------------------- a learning-management system's zip export
def _zip(path, files: dict[str, bytes]):
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_a_zip_export_lands_one_folder_per_student(course, tmp_path):
    good = (ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes()
    archive = _zip(tmp_path / "export.zip", {
        "export/alice/attention.ipynb": good,
        "export/bob/02-attention/attention.ipynb": good,
        "export/carol/Attention (1).ipynb": good,
        "export/dave/attention.ipynb": b"{ broken",
        "export/__MACOSX/._junk": b"",
    })
    problems = intake.import_zip(course, archive, ["02-attention", "04-normalization"])
    assert (course / "submitted" / "alice" / "02-attention" / "attention.ipynb").read_bytes() == good
    assert (course / "submitted" / "bob" / "02-attention" / "attention.ipynb").read_bytes() == good
    assert not (course / "submitted" / "carol").exists() and not (course / "submitted" / "dave").exists()
    reasons = {p.student: p.reason for p in problems}
    assert set(reasons) == {"carol", "dave"}
    assert "wrong file name 'Attention (1).ipynb'" in reasons["carol"] and "attention.ipynb" in reasons["carol"]
    assert "not valid JSON" in reasons["dave"]


def test_a_broken_resubmission_in_a_zip_never_overwrites_the_good_one(course, tmp_path):
    good = (ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes()
    intake.import_zip(course, _zip(tmp_path / "a.zip", {"alice/attention.ipynb": good}), ["02-attention"])
    problems = intake.import_zip(course, _zip(tmp_path / "b.zip", {"alice/attention.ipynb": b"{"}), ["02-attention"])
    assert (course / "submitted" / "alice" / "02-attention" / "attention.ipynb").read_bytes() == good
    assert len(problems) == 1 and "earlier submission was kept" in problems[0].reason


def test_unsafe_paths_in_a_zip_are_left_out(course, tmp_path):
    good = (ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes()
    problems = intake.import_zip(course, _zip(tmp_path / "evil.zip", {"../../attention.ipynb": good}), ["02-attention"])
    assert problems and "unsafe path" in problems[0].reason
    assert not (tmp_path.parent / "attention.ipynb").exists()


def _entry(name: str, when: tuple, extended_utc: int | None = None):
    import struct
    import zipfile

    info = zipfile.ZipInfo(name, date_time=when)
    if extended_utc is not None:  # Info-ZIP's extended timestamp: flags (mtime present), then a Unix time
        info.extra = struct.pack("<HHBi", 0x5455, 5, 1, extended_utc)
    return info


def test_a_zip_import_dates_each_submission_and_gives_it_a_release_secret(course, tmp_path):
    """Each submission gets nbgrader's timestamp.txt (the late policy reads it) and submission_secret.txt
    (release_feedback names the feedback page by it): the zip's file time read in the course's zone, the
    exact UTC time where the zip records one, or the student's own timestamp.txt; an unchanged
    resubmission keeps both, a changed one gets its new time and keeps its secret."""
    import zipfile

    good = (ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes()
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(_entry("export/alice/attention.ipynb", (2026, 12, 4, 23, 30, 0)), good)
        zf.writestr(_entry("export/bob/attention.ipynb", (2026, 12, 4, 23, 30, 0), extended_utc=1_796_000_000),
                    good)
        zf.writestr(_entry("export/carol/02-attention/attention.ipynb", (2026, 12, 4, 23, 30, 0)), good)
        zf.writestr("export/carol/02-attention/timestamp.txt", "2026-12-03 10:00:00.5 UTC")
        zf.writestr(_entry("export/dave/attention.ipynb", (2026, 12, 4, 23, 30, 0)), good)
        zf.writestr("export/dave/timestamp.txt", "the fourth of December")
    problems = intake.import_zip(course, archive, ["02-attention"], zone="Europe/Berlin")
    folder = {s: course / "submitted" / s / "02-attention" for s in ("alice", "bob", "carol", "dave")}
    stamp = {s: (f / "timestamp.txt").read_text() for s, f in folder.items()}
    assert stamp["alice"] == "2026-12-04 22:30:00.000000 UTC"  # 23:30 in Berlin, CET
    assert stamp["bob"] == f"{dt.datetime.fromtimestamp(1_796_000_000, dt.timezone.utc):%Y-%m-%d %H:%M:%S}.000000 UTC"
    assert stamp["carol"] == "2026-12-03 10:00:00.500000 UTC"
    assert stamp["dave"] == stamp["alice"]  # his own time cannot be read: named, and the file's time used
    assert [(p.student, "the fourth of December" in p.reason and "the file's time in the zip is used" in p.reason)
            for p in problems] == [("dave", True)]
    secret = {s: (f / "submission_secret.txt").read_text() for s, f in folder.items()}
    assert all(len(v) == 128 and int(v, 16) >= 0 for v in secret.values()) and len(set(secret.values())) == 4

    intake.import_zip(course, archive, ["02-attention"], zone="UTC")  # the same zip again: nothing changes
    assert {s: (f / "timestamp.txt").read_text() for s, f in folder.items()} == stamp
    changed = good.replace(b"attention", b"attention ", 1)
    with zipfile.ZipFile(tmp_path / "later.zip", "w") as zf:
        zf.writestr(_entry("alice/attention.ipynb", (2026, 12, 5, 8, 0, 0)), changed)
    intake.import_zip(course, tmp_path / "later.zip", ["02-attention"], zone="UTC")
    assert (folder["alice"] / "timestamp.txt").read_text() == "2026-12-05 08:00:00.000000 UTC"
    assert (folder["alice"] / "submission_secret.txt").read_text() == secret["alice"]


def test_a_missing_zip_is_a_usage_error(course, capsys):
    assert grade.main(["--root", str(course), "--zip", str(course / "nope.zip")]) == 2
    assert "nope.zip does not exist" in capsys.readouterr().err


def test_a_submission_with_a_wrong_file_name_is_named(course):
    folder = course / "submitted" / "erin" / "02-attention"
    folder.mkdir(parents=True)
    (folder / "my attempt.ipynb").write_bytes((ROOT / "solutions" / "02-attention" / "attention.ipynb").read_bytes())
    (problem,) = intake.check_submission(course, "erin", "02-attention", sorted(folder.glob("*.ipynb")))
    assert "wrong file name 'my attempt.ipynb'" in problem.reason and "attention.ipynb" in problem.reason


def test_kernels_graded_at_once_share_the_cores_out(monkeypatch):
    monkeypatch.setattr(batch.os, "cpu_count", lambda: 8)
    assert [batch.kernel_threads(j) for j in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert batch.grading_environment(4)["OMP_NUM_THREADS"] == "4"
    assert "OMP_NUM_THREADS" not in batch.grading_environment()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # an instructor's own setting wins
    assert batch.grading_environment(4)["OMP_NUM_THREADS"] == "3"


def test_the_gradebook_is_synced_again_only_when_its_copy_may_be_out_of_date(course):
    """make grade runs nbgrader's generate_assignment for an assignment only when the gradebook's copy may be
    stale: the first time, after the source changes, and when the gradebook was made afresh."""
    from nbgrader.api import Gradebook

    shutil.copy(ROOT / "nbgrader_config.py", course)
    assignment = "01-tokenization"
    url = f"sqlite:///{course / 'gradebook.db'}"

    def sync() -> float:
        gradebook.sync_gradebook(course, assignment)
        with Gradebook(url) as gb:
            return gb.find_assignment(assignment).max_score

    points = sync()
    record = (course / gradebook.SYNC_RECORD).read_text()
    assert points > 0 and assignment in record
    stamp = (course / gradebook.SYNC_RECORD).stat().st_mtime_ns
    assert sync() == points and (course / gradebook.SYNC_RECORD).stat().st_mtime_ns == stamp  # nothing to do
    (course / "gradebook.db").unlink()  # a gradebook made afresh: its copy is made again
    assert sync() == points and (course / gradebook.SYNC_RECORD).read_text() == record
    # the source changes (a graded cell is worth one point more): the gradebook follows
    import nbformat

    (path,) = sorted((course / "solutions" / assignment).glob("*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("points"))
    cell.metadata["nbgrader"]["points"] += 1
    nbformat.write(nb, path)
    assert sync() == points + 1 and (course / gradebook.SYNC_RECORD).read_text() != record
