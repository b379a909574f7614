"""`make grade`'s command line: bad arguments and empty classes get a clear answer, and nothing is written."""

from __future__ import annotations

import shutil

import pytest

from nbtools import ROOT
from tools import grade


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
    assert reason in grade.check_notebook(path)


def test_a_binary_file_is_explained(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "not UTF-8" in grade.check_notebook(path)
