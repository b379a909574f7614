"""A whole class through real nbgrader, in a temporary course directory.

generate the release from solutions/ -> students submit -> `make grade`'s
tool autogrades everyone with `nbgrader autograde` -> grades.csv and the
gradebook. One run covers: full marks for the solution, zero for the untouched
release, lost points for a wrong implementation from the catalogue, an endless
loop stopped by the per-cell timeout, and a corrupt submission reported by
student and file while everyone else is graded. A second run proves that a
corrupt resubmission never costs a student their earlier grade.

The class has due dates (deadlines.toml, classroom/late.py) and each submission
the timestamp.txt nbgrader's collect writes: alice on time, bob and carol
2 h 30 min late (a point off per hour begun), dave as late with an extension.
Editing the file and grading again re-applies the policy, grading nothing
again; a broken file stops `make grade` before anything is graded.
"""

from __future__ import annotations

import csv
import datetime as dt
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

from grader.notebook import grade_id, is_check_cell
from grader.registry import assignment as registered_assignment
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT = "02-attention"
#: the assignment's points, its prediction's included
FULL_MARKS = sum(ex.points for ex in registered_assignment(ASSIGNMENT).exercises)
NOTEBOOK = "attention"
CELL_TIMEOUT = 5
DUE = dt.datetime(2026, 12, 4, 22, 59)  # UTC
DEADLINES = f"""timezone = "UTC"
[late]
penalty = "per-hour"
points_per_hour = 1
[due]
{ASSIGNMENT} = {DUE.isoformat()}
[extensions.{ASSIGNMENT}]
dave = {(DUE + dt.timedelta(days=1)).isoformat()}
"""
LATE = dt.timedelta(hours=2, minutes=30)
#: what alice wrote into her (locked) Check your work cell, which nbgrader must undo
EDITED_CHECK = "print('my own check')\n"
SUBMITTED = {"alice": DUE - dt.timedelta(minutes=5), "bob": DUE + LATE, "carol": DUE + LATE, "dave": DUE + LATE}


def run_grade(course: Path, *more: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        [sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", str(CELL_TIMEOUT), *more],
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
    alice = nbformat.read(solution, as_version=4)
    (check,) = [c for c in alice.cells if is_check_cell(c) and c.cell_type == "code"]
    check.source = EDITED_CHECK + check.source  # nbgrader restores a locked cell's source; grading never runs it
    submit(course, "alice", alice)
    submit(course, "bob", nbformat.read(release, as_version=4))
    submit(course, "carol", with_solution_cell(solution, "causal_mask", first_wrong["source"]))
    endless = "def causal_mask(n):\n    while True:\n        pass\n"
    submit(course, "dave", with_solution_cell(solution, "causal_mask", endless))
    submit(course, "erin", solution.read_text()[:700])  # cut off mid-file: not JSON
    for student, when in SUBMITTED.items():  # as nbgrader's collect writes it
        (course / "submitted" / student / ASSIGNMENT / "timestamp.txt").write_text(f"{when.isoformat()} UTC")
    (course / "deadlines.toml").write_text(DEADLINES)
    first = run_grade(course)
    return course, first


def test_solution_scores_full_marks(course):
    course, _ = course
    scores = cell_scores(course, "alice")
    assert scores and all(s > 0 for s in scores.values()), scores
    assert total(course, "alice") == FULL_MARKS


def test_check_your_work_is_restored_and_neither_run_nor_read_as_the_learners_code(course):
    """Alice edited her Check your work cell (which imports the grader, a finding in a learner's cell): the
    autograded notebook holds the release's source, without outputs, and she kept full marks above."""
    course, _ = course
    autograded = nbformat.read(course / "autograded" / "alice" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    release = nbformat.read(course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    (graded,) = [c for c in autograded.cells if is_check_cell(c) and c.cell_type == "code"]
    (released,) = [c for c in release.cells if is_check_cell(c) and c.cell_type == "code"]
    assert graded.source == released.source and EDITED_CHECK not in graded.source, graded.source
    assert graded.outputs == [], graded.outputs


def test_untouched_release_scores_zero(course):
    course, _ = course
    assert total(course, "bob") == 0
    assert set(cell_scores(course, "bob").values()) == {0}


def test_wrong_implementation_loses_the_points_of_its_exercise(course):
    course, _ = course
    scores = cell_scores(course, "carol")
    assert scores["test_causal_mask"] == 0
    assert scores["test_attention_scores"] == 2 and scores["test_masked_softmax"] == 3
    assert total(course, "carol") < FULL_MARKS


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
    assert rows["alice"]["score"] == rows["alice"]["max_score"] == f"{FULL_MARKS:g}"
    assert rows["alice"]["status"] == "graded"
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
    assert rows["alice"]["score"] == f"{FULL_MARKS:g}" and "earlier grade kept" in rows["alice"]["status"]


def csv_rows(course: Path) -> dict[str, dict]:
    return {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}


def test_late_work_is_flagged_and_penalised_as_it_is_graded_and_an_extension_honoured(course):
    course, first = course
    rows = csv_rows(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(ASSIGNMENT).duedate == DUE
        assert gb.find_submission(ASSIGNMENT, "dave").extension == dt.timedelta(days=1)
        # nbgrader's autograde assigned the penalty (CourseLatePolicy): three hours begun, a point each
        penalties = {s: gb.find_submission(ASSIGNMENT, s).late_submission_penalty for s in SUBMITTED}
    carol = total(course, "carol")
    assert penalties == {"alice": 0, "bob": 0, "carol": 3, "dave": 0}, penalties  # bob has no points to lose
    assert rows["carol"]["score"] == f"{carol - 3:g}" and rows["carol"]["late_penalty"] == "3", rows["carol"]
    assert rows["carol"]["status"] == rows["bob"]["status"] == "graded, late by 2 h 30 min", first.stdout
    assert rows["bob"]["hours_late"] == "2.50" and rows["bob"]["score"] == "0"
    assert rows["dave"]["status"] == "graded" and rows["dave"]["late_penalty"] == "0"  # his own due date is later


def test_a_changed_policy_applies_at_the_next_run_without_grading_again(course):
    course, _ = course
    autograded = {s: (course / "autograded" / s / ASSIGNMENT / f"{NOTEBOOK}.ipynb").stat().st_mtime_ns
                  for s in ("bob", "carol", "dave")}
    # carol gets an extension, late work now scores zero, and dave's extension is withdrawn
    (course / "deadlines.toml").write_text(
        DEADLINES.replace('penalty = "per-hour"\npoints_per_hour = 1', 'penalty = "zero"')
        .replace("dave = ", "carol = "))
    res = run_grade(course)
    rows = csv_rows(course)
    assert (rows["carol"]["score"], rows["carol"]["status"]) == (f"{total(course, 'carol'):g}", "graded"), res.stdout
    assert (rows["dave"]["score"], rows["dave"]["late_penalty"]) == ("0", f"{total(course, 'dave'):g}"), res.stdout
    assert rows["dave"]["status"] == "graded, late by 2 h 30 min"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(ASSIGNMENT, "dave").extension is None
    assert {s: (course / "autograded" / s / ASSIGNMENT / f"{NOTEBOOK}.ipynb").stat().st_mtime_ns
            for s in autograded} == autograded, "a changed policy graded a submission again"

    # A broken file: refused by name before anything is graded; grades.csv stays as it was.
    before = (course / "grades.csv").read_bytes()
    (course / "deadlines.toml").write_text(DEADLINES.replace("points_per_hour = 1", "points_per_hour = 0"))
    res = run_grade(course)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "points_per_hour = 0 must be a positive number" in res.stderr and "nothing was graded" in res.stderr
    assert (course / "grades.csv").read_bytes() == before


def _graded_copy(course: Path, student: str) -> Path:
    return course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"


def _diagnosis(course: Path, student: str, test: str) -> str:
    nb = nbformat.read(_graded_copy(course, student), as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == test]
    return " ".join(str(o.get("evalue")) for o in cell.get("outputs", []) if o.get("output_type") == "error")


def test_one_learners_regrade_draws_the_same_cases_and_touches_nobody_else(course):
    """make grade STUDENT=frank: frank's submission, right on small inputs and unscaled on larger ones, is graded,
    then graded again though unchanged: on the same cases, so the same first failing case is named; nobody
    else's submission is graded. (This course grades on the registry's seeds; with a grading secret the same
    holds while the secret is kept: test_secret.py.)"""
    course, _ = course
    (course / "deadlines.toml").write_text(DEADLINES)  # the test above left a broken one
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    submit(course, "frank", with_solution_cell(solution, "attention_scores", (
        "import math\ndef attention_scores(q, k):\n    s = q @ k.transpose(-2, -1)\n"
        "    return s / math.sqrt(q.shape[-1]) if q.numel() <= 8 else s\n")))
    others = {s: _graded_copy(course, s).stat().st_mtime_ns for s in ("alice", "bob", "carol", "dave")}
    diagnoses, scores, stamps = [], [], []
    for _ in range(2):
        res = run_grade(course, "--student", "frank")
        assert res.returncode == 0 and "regrading frank (1 of" in res.stdout, res.stdout + res.stderr
        diagnoses.append(_diagnosis(course, "frank", "test_attention_scores"))
        scores.append(cell_scores(course, "frank"))
        stamps.append(_graded_copy(course, "frank").stat().st_mtime_ns)
    assert "gives wrong values" in diagnoses[0] and "not scaled" in diagnoses[0], diagnoses[0]  # a hidden case
    assert diagnoses[1] == diagnoses[0], "the regrade drew other cases"
    assert scores[1] == scores[0] and scores[0]["test_attention_scores"] == 0 and stamps[1] > stamps[0]
    assert {s: _graded_copy(course, s).stat().st_mtime_ns for s in others} == others
    # a learner without a submission: named, with those who have one, and nothing graded
    res = run_grade(course, "--student", "zoe")
    assert res.returncode == 2 and "STUDENT=zoe has no submission" in res.stderr and "alice" in res.stderr
    assert _graded_copy(course, "frank").stat().st_mtime_ns == stamps[1]


def test_feedback_is_released_for_a_class_whose_work_came_by_zip_and_by_hand(course, tmp_path):
    """gina's work comes in an LMS zip, dated 2 h 30 min after the due date by the zip: the import writes her
    timestamp.txt and submission secret, so the late policy takes 3 points, and `make feedback` then
    `nbgrader release_feedback` release every learner's page to the exchange under the name each learner's
    fetch_feedback looks for, the learners copied in by hand included (their secret is written then);
    exports/feedback-02-attention.zip holds one folder per learner for the LMS."""
    import zipfile

    from nbgrader.utils import notebook_hash

    course, _ = course
    (course / "deadlines.toml").write_text(DEADLINES)  # the test above left a broken one
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    archive = tmp_path / "canvas.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo(f"export/gina/{NOTEBOOK}.ipynb", date_time=(DUE + LATE).timetuple()[:6]),
                    solution.read_bytes())
    res = run_grade(course, "--zip", str(archive), "--student", "gina")
    assert res.returncode == 0, res.stdout + res.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(ASSIGNMENT, "gina").late_submission_penalty == 3
    assert csv_rows(course)["gina"]["status"] == "graded, late by 2 h 30 min"

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run([sys.executable, "-m", "classroom.feedback", "--root", str(course)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    learners = sorted(p.parent.name for p in course.glob(f"feedback/*/{ASSIGNMENT}"))
    assert {"alice", "bob", "carol", "dave", "frank", "gina"} <= set(learners), learners
    by_hand = res.stdout.split("no secret or time from the exchange or a zip (")[1].split(")")[0].split(", ")
    assert "gina" not in by_hand and "alice" in by_hand, res.stdout
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    res = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "release_feedback", ASSIGNMENT,
                          f"--Exchange.root={exchange}", "--CourseDirectory.course_id=course101",
                          f"--CourseDirectory.root={course}"], cwd=course, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    for student in learners:
        secret = (course / "feedback" / student / ASSIGNMENT / "submission_secret.txt").read_text()
        assert secret == (course / "submitted" / student / ASSIGNMENT / "submission_secret.txt").read_text()
        released = exchange / "course101" / "feedback" / f"{notebook_hash(secret=secret, notebook_id=NOTEBOOK)}.html"
        page = course / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html"
        assert released.read_bytes() == page.read_bytes(), student
    with zipfile.ZipFile(course / "exports" / f"feedback-{ASSIGNMENT}.zip") as zf:
        assert sorted(zf.namelist()) == [f"{s}/{NOTEBOOK}.html" for s in learners]
        assert zf.read(f"gina/{NOTEBOOK}.html") == (course / "feedback" / "gina" / ASSIGNMENT / f"{NOTEBOOK}.html"
                                                   ).read_bytes()
