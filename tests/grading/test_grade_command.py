"""`make grade`'s command line: bad arguments and empty classes get a clear answer, and nothing is written."""

from __future__ import annotations

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
