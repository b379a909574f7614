"""The reference keeps full marks whatever the random cases: no flaky hidden test.

Every comparison of the registry draws its cases from a seed. Here each
assignment's reference solution is checked again with other seeds, through
the path a learner's Check your work takes (:func:`grader.practice.practice`:
the registry's steps on cases from a seed grading never uses), so tolerances
that only held for one lucky draw would show, and so would a check that told a
learner with a right answer otherwise. `make test` tries a few seeds per
assignment; `make stability` tries 100 (``COURSE_STABILITY_SEEDS=100``).
"""

from __future__ import annotations

import os

import pytest

from grader.practice import practice
from grader.registry import assignments as registry
from nbtools import ROOT, assignments, read_cells, solution_namespace

SEEDS = int(os.environ.get("COURSE_STABILITY_SEEDS", "3"))


@pytest.mark.parametrize("assignment", assignments())
def test_the_reference_scores_full_marks_for_every_seed(assignment, one_thread):
    entry = registry()[assignment]
    ns = solution_namespace(read_cells(ROOT / "solutions" / assignment / entry.notebook))
    failures = []
    for seed in range(1, SEEDS + 1):
        _, verdicts = practice(assignment, namespace=ns, seed=1000 * seed + 17)
        assert [v.exercise for v in verdicts] == [ex.name for ex in entry.exercises]
        failures += [f"seed {1000 * seed + 17}, {v.exercise}: {v.message}" for v in verdicts if not v.agrees]
    assert not failures, f"the reference loses points on {len(failures)} draw(s):\n" + "\n".join(failures[:10])
