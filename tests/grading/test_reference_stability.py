"""The reference keeps full marks whatever the random cases: no flaky hidden test.

Every comparison of the registry draws its cases from a seed. Here each
assignment's reference solution is graded again through the registry with
other seeds, so tolerances that only held for one lucky draw would show.
`make test` tries a few seeds per assignment; `make stability` tries 100
(``COURSE_STABILITY_SEEDS=100``).
"""

from __future__ import annotations

import os

import pytest

import grader
from grader.registry import assignments as registry
from nbtools import ROOT, assignments, read_cells, solution_namespace

SEEDS = int(os.environ.get("COURSE_STABILITY_SEEDS", "3"))


@pytest.mark.parametrize("assignment", assignments())
def test_the_reference_scores_full_marks_for_every_seed(assignment, one_thread):
    entry = registry()[assignment]
    ns = solution_namespace(read_cells(ROOT / "solutions" / assignment / entry.notebook))
    failures = []
    for seed in range(1, SEEDS + 1):
        for exercise in entry.exercises:
            try:
                grader.check(assignment, exercise.name, ns[exercise.name], seed=1000 * seed + 17)
            except grader.ExerciseFailure as exc:
                failures.append(f"seed {1000 * seed + 17}, {exercise.name}: {exc}")
    assert not failures, f"the reference loses points on {len(failures)} draw(s):\n" + "\n".join(failures[:10])
