"""A whole class through real nbgrader, in a temporary course directory.

generate the release from solutions/ -> students submit -> `make grade`'s
tool autogrades everyone with `nbgrader autograde` -> grades.csv and the
gradebook. One run covers: full marks for the solution, zero for the untouched
release, lost points for a wrong implementation from the catalogue, an endless
loop stopped by the per-cell timeout, and a corrupt submission reported by
student and file while everyone else is graded. A second run proves that a
corrupt resubmission never costs a student their earlier grade.
"""

from __future__ import annotations

import csv
import os
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.notebook import grade_id
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT = "02-attention"
NOTEBOOK = "attention"
CELL_TIMEOUT = 5


def run_grade(course: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        [sys.executable, "-m", "tools.grade", "--root", str(course), "--timeout", str(CELL_TIMEOUT)],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )


def with_solution_cell(nb_path: Path, cell_id: str, source: str) -> nbformat.NotebookNode:
    nb = nbformat.read(nb_path, as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == cell_id]
    cell.source = source
    return nb


def submit(course: Path, student: str, nb) -> Path:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NOTEBOOK}.ipynb"
    if isinstance(nb, (bytes, str)):
        path.write_text(nb if isinstance(nb, str) else nb.decode())
    else:
        nbformat.write(nb, path)
    return path


def cell_scores(course: Path, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {g.name: g.score for g in nb.grades}


def total(course: Path, student: str) -> float:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission(ASSIGNMENT, student).score


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    # The release, as learners get it, generated here by real nbgrader.
    exe = Path(sys.executable).with_name("nbgrader")
    env = dict(os.environ, PATH=f"{exe.parent}:{os.environ['PATH']}")
    res = subprocess.run([str(exe), "generate_assignment", ASSIGNMENT, "--log-level=ERROR"], cwd=course,
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    release = course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"

    wrong = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{ASSIGNMENT}.py"))["WRONG"]
    first_wrong = next(e for e in wrong if e["exercise"] == "causal_mask")
    submit(course, "alice", nbformat.read(solution, as_version=4))
    submit(course, "bob", nbformat.read(release, as_version=4))
    submit(course, "carol", with_solution_cell(solution, "causal_mask", first_wrong["source"]))
    endless = "def causal_mask(n):\n    while True:\n        pass\n"
    submit(course, "dave", with_solution_cell(solution, "causal_mask", endless))
    submit(course, "erin", solution.read_text()[:700])  # cut off mid-file: not JSON
    first = run_grade(course)
    return course, first


def test_solution_scores_full_marks(course):
    course, _ = course
    scores = cell_scores(course, "alice")
    assert scores and all(s > 0 for s in scores.values()), scores
    assert total(course, "alice") == 10


def test_untouched_release_scores_zero(course):
    course, _ = course
    assert total(course, "bob") == 0
    assert set(cell_scores(course, "bob").values()) == {0}


def test_wrong_implementation_loses_the_points_of_its_exercise(course):
    course, _ = course
    scores = cell_scores(course, "carol")
    assert scores["test_causal_mask"] == 0
    assert scores["test_attention_scores"] == 2 and scores["test_masked_softmax"] == 3
    assert total(course, "carol") < 10


def test_endless_loop_is_stopped_and_scores_zero_on_that_cell_only(course):
    course, _ = course
    scores = cell_scores(course, "dave")
    assert scores["test_causal_mask"] == 0
    assert scores["test_attention_scores"] == 2 and scores["test_masked_softmax"] == 3
    autograded = nbformat.read(course / "autograded" / "dave" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    (cell,) = [c for c in autograded.cells if grade_id(c) == "test_causal_mask"]
    assert any(o.get("output_type") == "error" for o in cell.outputs), "the timed-out cell should record an error"


def test_corrupt_submission_is_reported_by_student_and_file_and_the_rest_are_graded(course):
    course, first = course
    assert first.returncode == 1, first.stdout + first.stderr
    assert "student 'erin'" in first.stderr and f"submitted/erin/{ASSIGNMENT}/{NOTEBOOK}.ipynb" in first.stderr
    assert "not valid JSON" in first.stderr
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert set(rows) == {"alice", "bob", "carol", "dave", "erin"}
    assert rows["alice"]["score"] == "10" and rows["alice"]["max_score"] == "10" and rows["alice"]["status"] == "graded"
    assert rows["erin"]["status"].startswith("not graded") and "not valid JSON" in rows["erin"]["message"]
    # the corrupt file is left exactly where the learner put it
    assert (course / "submitted" / "erin" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text().startswith("{")


def test_a_corrupt_resubmission_keeps_the_earlier_grade(course):
    course, _ = course
    before = {s: total(course, s) for s in ("alice", "bob", "carol", "dave")}
    time.sleep(1.1)  # a strictly newer file
    broken = submit(course, "alice", "{ this is not a notebook")
    second = run_grade(course)
    assert second.returncode == 1
    assert "student 'alice'" in second.stderr and "not valid JSON" in second.stderr
    after = {s: total(course, s) for s in before}
    assert after == before, "grading again must not change any earlier grade"
    assert (course / "autograded" / "alice" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").exists()
    assert broken.read_text() == "{ this is not a notebook"
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert rows["alice"]["score"] == "10" and "earlier grade kept" in rows["alice"]["status"]
