"""The reference keeps full marks whatever the random cases: no flaky hidden test.

Under grading every exercise draws its cases from a seed of the learner's own,
derived from the course's grading secret (:mod:`grader.secret`). Here each
assignment's reference solution is checked again under other secrets, each
exercise on the seed a learner would get, through the path a learner's Check
your work takes (:func:`grader.practice.practice`: the registry's steps on the
given cases), so tolerances that only held for one lucky draw would show, and
so would a check that told a learner with a right answer otherwise. `make
test` tries a few secrets per assignment; `make stability` tries 100
(``COURSE_STABILITY_SEEDS=100``). A capstone's recipe, judged by training for seconds, is tried on one
secret here: its spread over seeds, secrets and CPU kernels is what ``tools/capstone_calibration.py``
measured to set its bar, and ``test_capstones.py`` grades it for real; ``make stability`` tries it on all.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from grader.practice import practice
from grader.registry import assignments as registry
from grader.secret import learner_seed
from nbtools import ROOT, assignments, read_cells, solution_namespace

SEEDS = int(os.environ.get("COURSE_STABILITY_SEEDS", "3"))
RECIPE_SEEDS = int(os.environ.get("COURSE_STABILITY_SEEDS", "1"))


@pytest.mark.parametrize("assignment", assignments())
def test_the_reference_scores_full_marks_under_every_secret(assignment, one_thread):
    entry = registry()[assignment]
    ns = solution_namespace(read_cells(ROOT / "solutions" / assignment / entry.notebook))
    failures = []
    for k in range(1, SEEDS + 1):
        secret = hashlib.sha256(f"stability {k}".encode()).digest()  # a course's secret, as make grade draws one
        for ex in entry.exercises:
            if k > RECIPE_SEEDS and not ex.comparisons:  # a recipe (see the module's text)
                continue
            seed = learner_seed(secret, "a-learner", assignment, ex.name)
            _, (verdict,) = practice(assignment, [ex.name], namespace=ns, seed=seed)
            assert verdict.exercise == ex.name
            if not verdict.agrees:
                failures.append(f"secret {k} (seed {seed}), {ex.name}: {verdict.message}")
    assert not failures, f"the reference loses points on {len(failures)} draw(s):\n" + "\n".join(failures[:10])
