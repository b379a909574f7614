"""The course's grader: instructor tooling, kept apart from the model library learners read.

A hidden test names its exercise and nothing else::

    from grader import check; check("02-attention", "attention_scores", attention_scores)

and :func:`grader.registry.check` grades the learner's function against the
reference in :mod:`course_lib` over many random cases. One module each for:

* :mod:`grader.registry`: exercises as data, the registry of every assignment;
* :mod:`grader.assignments`: one module per assignment (cases, likely mistakes, its ``ASSIGNMENT``);
* :mod:`grader.cases`: a case, and the conversions between dtypes;
* :mod:`grader.compare`: comparison and tolerance (derived from the reference's own rounding);
* :mod:`grader.diagnosis`: named mistakes and the first diverging intermediate;
* :mod:`grader.checker`: the checker that runs a learner's function on the cases;
* :mod:`grader.guards`: forbidden routines, the reference out of bounds, the tamper detector;
* :mod:`grader.sandbox`: the fence around the grading kernel;
* :mod:`grader.judge`: the learner's function as a proxy in another process (the judge's side of ``make grade``);
* :mod:`grader.runner`: the kernel's side: runs the learner's function on the inputs the judge sends;
* :mod:`grader.static`: what a submission's source shows, read by the judge before any of it runs;
* :mod:`grader.autograde`: the nbgrader integration (imports nbgrader; loaded by ``nbgrader_config.py`` only).

Under ``make grade`` the hidden tests run in the nbgrader process, out of the
learner's reach: the kernel only receives inputs and returns outputs, and
neither :mod:`course_lib` nor :mod:`grader.assignments` is visible in it.

Its own dependencies are declared as the ``grader`` extra of the project
(``pip install -e '.[grader]'``); :mod:`course_lib` never imports it.
"""

from __future__ import annotations

from .cases import Case
from .checker import check_function, check_table
from .diagnosis import Mistake
from .failures import ExerciseFailure, ForbiddenCall
from .guards import FUSED_ATTENTION, LAYER_NORM, SOFTMAX, forbid_calls
from .compare import same_value
from .registry import Assignment, Comparison, Exercise, check, exercise

__all__ = [
    "Assignment", "Case", "Comparison", "Exercise", "ExerciseFailure", "ForbiddenCall", "FUSED_ATTENTION",
    "LAYER_NORM", "Mistake", "SOFTMAX", "check", "check_function", "check_table", "exercise",
    "forbid_calls", "same_value",
]
