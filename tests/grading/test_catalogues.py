"""Every assignment's hidden tests catch its catalogue of wrong implementations.

For each entry of tests/catalogues/<assignment>.py the solution cell is
replaced by the wrong code and the notebook's cells are run in-process (the
same cells nbgrader runs, hidden tests included, much faster than a kernel).
The untouched release must fail every test cell, and each wrong
implementation must fail the hidden tests of its exercise, with the
diagnosis the entry states: a likely mistake of the
registry ("Likely mistake: " and the start of its message), or the kind of
failure the checker reports (a forbidden call, a dtype, an in-place edit...).
That the reference passes every test cell, hidden tests included, is
test_solutions_nbval.py's: it runs the solution notebooks in a real kernel.
"""

from __future__ import annotations

import runpy

import pytest

from grader.registry import assignments as registry
from nbtools import ROOT, assignments, hidden_part, notebooks, read_cells, run_cells

MIN_ENTRIES_PER_EXERCISE = 5


def catalogue(assignment: str) -> list[dict]:
    path = ROOT / "tests" / "grading" / "catalogues" / f"{assignment}.py"
    assert path.exists(), f"assignment {assignment} has no catalogue of wrong implementations at {path}"
    return runpy.run_path(str(path))["WRONG"]


def right_catalogue(assignment: str) -> list[dict]:
    return runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{assignment}.py")).get("RIGHT", [])


def solution_cells(assignment: str):
    (nb,) = notebooks(assignment)  # one notebook per assignment for now
    return read_cells(nb)


def entries():
    for a in assignments():
        for i, entry in enumerate(catalogue(a)):
            yield pytest.param(a, entry, id=f"{a}:{entry['exercise']}:{i}")


@pytest.mark.parametrize("assignment", assignments())
def test_untouched_release_fails_every_test_cell(assignment):
    (release,) = notebooks(assignment, "exercises")
    results = run_cells(read_cells(release))
    passed = [gid for gid, r in results.items() if r.passed]
    assert not passed, f"test cells that pass on the untouched stub: {passed}"
    for r in results.values():
        assert isinstance(r.error, NotImplementedError) or "not implemented" in str(r.error), r.error


@pytest.mark.parametrize("assignment", assignments())
def test_every_exercise_has_a_catalogue_of_at_least_five(assignment):
    cells = solution_cells(assignment)
    exercises = [c.grade_id for c in cells if c.solution]
    counts = {ex: sum(e["exercise"] == ex for e in catalogue(assignment)) for ex in exercises}
    short = {ex: n for ex, n in counts.items() if n < MIN_ENTRIES_PER_EXERCISE}
    assert not short, f"exercises with fewer than {MIN_ENTRIES_PER_EXERCISE} wrong implementations: {short}"
    unknown = {e["exercise"] for e in catalogue(assignment)} - set(exercises)
    assert not unknown, f"catalogue entries for exercises that do not exist: {unknown}"


@pytest.mark.parametrize("assignment, entry", list(entries()))
def test_wrong_implementation_fails_the_hidden_tests(assignment, entry):
    cells = solution_cells(assignment)
    test_id = f"test_{entry['exercise']}"
    assert any(c.grade_id == test_id and hidden_part(c.source) for c in cells), f"{test_id} has no hidden tests"
    # The hidden part alone must catch it (a full test cell fails whenever its hidden part does).
    hidden = run_cells(cells, replace={entry["exercise"]: entry["source"]}, only_hidden=True, only_test=test_id)
    assert not hidden[test_id].passed, f"hidden tests of {entry['exercise']} accept: {entry['mistake']}"
    message = str(hidden[test_id].error)
    assert entry["diagnosis"] in message, (
        f"{entry['mistake']}: expected the diagnosis {entry['diagnosis']!r}, the learner was told: {message}")


@pytest.mark.parametrize("assignment", assignments())
def test_every_entry_states_a_diagnosis_that_names_one_mistake_or_a_kind_of_failure(assignment):
    exercises = {ex.name: ex for ex in registry()[assignment].exercises}
    for entry in catalogue(assignment):
        diagnosis = entry.get("diagnosis")
        assert isinstance(diagnosis, str) and diagnosis, f"{entry['mistake']}: no diagnosis stated"
        if diagnosis.startswith("Likely mistake: "):
            start = diagnosis.removeprefix("Likely mistake: ")
            named = {m.message for m in exercises[entry["exercise"]].mistakes if m.message.startswith(start)}
            assert len(named) == 1, f"{entry['mistake']}: {diagnosis!r} names {len(named)} mistakes of the registry"


@pytest.mark.parametrize("assignment", assignments())
def test_every_named_mistake_is_the_diagnosis_of_a_catalogue_entry(assignment):
    """A likely mistake no wrong implementation ever receives is feedback nobody checked: it must have an entry."""
    stated: dict[str, list[str]] = {}
    for entry in catalogue(assignment):
        stated.setdefault(entry["exercise"], []).append(entry["diagnosis"].removeprefix("Likely mistake: "))
    unfired = [f"{ex.name}: {m.message}" for ex in registry()[assignment].exercises for m in ex.mistakes
               if not any(m.message.startswith(s) for s in stated.get(ex.name, []))]
    assert not unfired, f"{len(unfired)} named mistake(s) that no catalogue entry expects:\n" + "\n".join(unfired)



def right_entries():
    for a in assignments():
        for i, entry in enumerate(right_catalogue(a)):
            yield pytest.param(a, entry, id=f"{a}:{entry['exercise']}:right{i}")


@pytest.mark.parametrize("assignment", assignments())
def test_every_exercise_has_a_right_implementation_written_differently(assignment):
    right = {e["exercise"] for e in right_catalogue(assignment)}
    missing = [ex.name for ex in registry()[assignment].exercises if ex.name not in right]
    assert not missing, f"exercises without a differently written right implementation in RIGHT: {missing}"


@pytest.mark.parametrize("assignment, entry", list(right_entries()))
def test_a_right_implementation_written_differently_keeps_full_marks(assignment, entry):
    cells = solution_cells(assignment)
    test_id = f"test_{entry['exercise']}"
    result = run_cells(cells, replace={entry["exercise"]: entry["source"]}, only_hidden=True, only_test=test_id)
    assert result[test_id].passed, f"{entry['how']}: the hidden tests reject it: {result[test_id].error}"
