"""`make export-grades`: the gradebook as the CSV files Canvas and Moodle import, and nbgrader's own export.

The gradebook is a real nbgrader gradebook in a scratch course, filled through nbgrader's API with two
assignments and four learners: alice graded in both, bob graded with a late penalty, carol on the roster
without a submission, dave graded but missing from the roster.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from classroom.export_grades import RosterError, read_learners
from nbtools import ROOT

CELLS = {"01-tokenization": {"test_a": 4, "test_b": 6}, "02-attention": {"test_c": 3, "test_d": 7}}
POINTS = {("alice", "01-tokenization"): (4, 6), ("alice", "02-attention"): (3, 5),
          ("bob", "02-attention"): (3, 7), ("dave", "01-tokenization"): (0, 6)}
ROSTER = "id,name,email\nalice,Alice Doe,alice@uni.example\nbob,Bob Roe,bob@uni.example\ncarol,Carol Poe,\n"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("export")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "solutions").mkdir()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="transformers-course") as gb:
        for assignment, cells in CELLS.items():
            gb.add_assignment(assignment)
            gb.add_notebook("nb", assignment)
            for name, points in cells.items():
                gb.add_grade_cell(name, "nb", assignment, max_score=points, cell_type="code")
        for student in ("alice", "bob", "dave"):
            gb.add_student(student)
        for (student, assignment), points in POINTS.items():
            sub = gb.add_submission(assignment, student)
            (nb,) = sub.notebooks
            for grade in nb.grades:
                grade.auto_score = dict(zip(CELLS[assignment], points))[grade.name]
            if student == "bob":
                nb.late_submission_penalty = 2.0
        gb.db.commit()
    (course / "roster.csv").write_text(ROSTER)
    return course


def export(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("GRADEBOOK_URL", None)
    return subprocess.run([sys.executable, "-m", "classroom.export_grades", "--root", str(course), *args],
                          cwd=ROOT, capture_output=True, text=True, env=env)


def rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open(newline="", encoding="utf-8")))


def test_canvas_moodle_and_nbgraders_layouts_with_the_roster(course):
    res = export(course, "--roster", str(course / "roster.csv"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "graded but not on the roster (exported without a name): dave" in res.stdout
    assert rows(course / "exports" / "canvas.csv") == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01-tokenization", "02-attention"],
        ["Points Possible", "", "", "", "", "10", "10"],
        ["Alice Doe", "", "", "alice", "", "10", "8"],
        ["Bob Roe", "", "", "bob", "", "", "8"],   # 10 points, 2 off for lateness
        ["Carol Poe", "", "", "carol", "", "", ""],
        ["dave", "", "", "dave", "", "6", ""],
    ]
    assert rows(course / "exports" / "moodle.csv") == [
        ["Username", "Full name", "Email address", "01-tokenization", "02-attention"],
        ["alice", "Alice Doe", "alice@uni.example", "10", "8"],
        ["bob", "Bob Roe", "bob@uni.example", "", "8"],
        ["carol", "Carol Poe", "", "", ""],
        ["dave", "", "", "6", ""],
    ]
    exported = list(csv.DictReader((course / "exports" / "nbgrader.csv").open()))
    got = {(r["student_id"], r["assignment"]): float(r["raw_score"]) for r in exported}
    # nbgrader's layout: every learner in the gradebook for every assignment, 0 where nothing was submitted
    assert got == {(s, a): float(sum(POINTS.get((s, a), ()))) for s in ("alice", "bob", "dave") for a in CELLS}, \
        exported


def test_zero_for_no_submission_when_asked(course, tmp_path):
    res = export(course, "--missing", "zero", "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    moodle = rows(tmp_path / "moodle.csv")
    assert moodle[1:] == [["alice", "", "", "10", "8"], ["bob", "", "", "0", "8"], ["dave", "", "", "6", "0"]]


@pytest.mark.parametrize("text, named", [
    ("id,name\nalice,Alice\n", "lacks the column(s) ['email']"),
    ("id,name,email\nalice,A,\n,B,\n", "line 3: the id is empty"),
    ("id,name,email\nalice,A,\nbob,B,\nalice,C,\n", "line 4: the id 'alice' is already on line 2"),
])
def test_a_broken_roster_is_refused_by_row_and_nothing_is_written(course, tmp_path, text, named):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    with pytest.raises(RosterError, match="roster.csv"):
        read_learners(roster)
    res = export(course, "--roster", str(roster), "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and named in res.stderr and "nothing was written" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_names_and_emails_a_roster_holds_are_text_in_every_export(course, tmp_path):
    """A roster's names, emails and ids written like spreadsheet formulas (OWASP's CSV injection): each cell of
    canvas.csv, moodle.csv and nbgrader.csv is shown as text by a spreadsheet, never run."""
    from classroom.text_out import is_inert

    roster = tmp_path / "roster.csv"
    roster.write_text('id,name,email\nalice,"=HYPERLINK(""http://x.invalid"",""y"")",@SUM(1+1)\n'
                      "bob,+cmd|' /C calc'!A0,-2+3\ncarol,\tTab,\rcr\n")
    res = export(course, "--roster", str(roster), "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("canvas.csv", "moodle.csv", "nbgrader.csv"):
        cells = [c for row in rows(tmp_path / "out" / name) for c in row]
        assert all(is_inert(c) for c in cells), (name, [c for c in cells if not is_inert(c)])
    moodle = rows(tmp_path / "out" / "moodle.csv")
    assert moodle[1][1] == "'=HYPERLINK(\"http://x.invalid\",\"y\")" and moodle[1][2] == "'@SUM(1+1)", moodle
    assert moodle[1][3:] == ["10", "8"]  # the scores stay numbers
