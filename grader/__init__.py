"""The course's grader: how one answer is judged, kept apart from the model library learners read.

Three packages, three households: :mod:`course_lib` is what learners learn, this one judges one learner's answer
(the registry, the cases, the judge, the fences, the kernels), and :mod:`classroom` runs a class with it (the hub,
submissions in, the grading run, the gradebook, deadlines, feedback, similarity, exports). Nothing here imports
:mod:`classroom`.

A hidden test names its exercise and nothing else::

    from grader import check; check("02-attention", "attention_scores", attention_scores)

and :func:`grader.registry.check` grades the learner's function against the
reference in :mod:`course_lib` over many random cases. One module per concern:

* :mod:`grader.registry`: exercises as data, the registry of every assignment;
* :mod:`grader.assignments`: one module per assignment, named after its slug (cases, likely mistakes,
  its ``ASSIGNMENT``);
* :mod:`grader.cases`: a case, its conversions, and the building blocks of the case generators;
* :mod:`grader.compare`: comparison and tolerance (derived from the reference's own rounding);
* :mod:`grader.diagnosis`: named mistakes and the first diverging intermediate;
* :mod:`grader.checker`: the checker that runs a learner's function on the cases;
* :mod:`grader.learner`: the learner's function as the checker sees it, one interface wherever it runs;
* :mod:`grader.guards`: forbidden routines, the reference out of bounds, the tamper detector;
* :mod:`grader.failures`: what a hidden test raises;
* :mod:`grader.trained`: what the grader trusts of a model a capstone's recipe returns, read as data;
* :mod:`grader.judge`: the learner's function as a proxy into the grading kernel (the judge's side of ``make grade``);
* :mod:`grader.wire`: what travels between the judge and the kernel, and how it is read back;
* :mod:`grader.runner`: the kernel's side: runs the learner's function on the inputs the judge sends;
* :mod:`grader.sandbox`: the fence around the grading kernel (bubblewrap outside, an audit hook inside);
* :mod:`grader.enclosure`: a kernel's own user, namespaces, /proc, /tmp and limits;
* :mod:`grader.cgroups`: the control groups of a grading run and of each kernel;
* :mod:`grader.kernel`: the fenced kernel as the autograder starts and drives it;
* :mod:`grader.warm`: fenced kernels forked from a warm process, each enclosed in namespaces of its own;
* :mod:`grader.static`: what a submission's source shows, read by the judge before any of it runs;
* :mod:`grader.notebook`: an nbgrader notebook's cells (solution and test cells, hidden tests, points);
* :mod:`grader.autograde`: the nbgrader preprocessors (imports nbgrader; loaded by ``nbgrader_config.py`` only);
* :mod:`grader.nbgrader_processes`: long-lived nbgrader processes, each running one command after another;
* :mod:`grader.secret`: the grading secret each learner's cases are drawn from;
* :mod:`grader.practice`: the learner's Check your work;
* :mod:`grader.mathml`: feedback's math as MathML.

Under ``make grade`` the hidden tests run in the nbgrader process, out of the
learner's reach: the kernel only receives inputs and returns outputs, and
neither :mod:`course_lib` nor :mod:`grader.assignments` is visible in it.

Its own dependencies are declared as the ``grader`` extra of the project
(``pip install -e '.[grader]'``); :mod:`course_lib` never imports it.
"""

from __future__ import annotations

import importlib

#: what ``from grader import X`` offers, and the module each name lives in. They are imported on first use
#: (PEP 562), so a process that needs only a torch-free part (nbgrader's configuration, ``make grade``'s
#: orchestration, the notebook reader) does not pay for importing torch.
_EXPORTS = {
    "Case": "cases", "check_function": "checker", "check_table": "checker", "same_value": "compare",
    "Mistake": "diagnosis", "ExerciseFailure": "failures", "ForbiddenCall": "failures",
    "FUSED_ATTENTION": "guards", "LAYER_NORM": "guards", "SOFTMAX": "guards", "forbid_calls": "guards",
    "Assignment": "registry", "Comparison": "registry", "Exercise": "registry", "check": "registry",
    "exercise": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
