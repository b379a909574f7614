"""Predict, then run (:mod:`grader.predictions`): one graded prediction per chapter assignment.

The invariant: a prediction scores its point exactly when its numbers are the answer (within the question's
rounding), whatever form holds them; a wrong answer a typical misunderstanding gives is named; and whatever else
the learner's function returns or raises, the verdict is a failure that says what was expected, never a crash of
the grader. The catalogues (``tests/grading/catalogues``) hold each prediction's wrong and right answers as
learner code, which test_catalogues and test_judge grade in a kernel; here the registry's own entries and a
generator of hostile returns.
"""

from __future__ import annotations

import contextlib
import io
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.failures import ExerciseFailure
from grader.learner import as_learner
from grader.registry import assignments
from nbtools import ROOT, read_cells, solution_namespace

CHAPTERS = [slug for slug in assignments() if "capstone" not in slug]
PREDICTIONS = [(slug, ex) for slug in CHAPTERS for ex in assignments()[slug].exercises if ex.prediction]


def verdict(ex, value) -> str | None:
    """None when the prediction scores, else the failure's message."""
    def learner():
        if isinstance(value, BaseException):
            raise value
        return value
    learner.__name__ = ex.name
    try:
        ex.run(as_learner(learner, ex.name), ex.name, None)
    except ExerciseFailure as exc:
        return str(exc)
    return None


def answer_of(ex) -> list[float]:
    return [float(v) for v in torch.as_tensor(ex.reference(), dtype=torch.float64).reshape(-1)]


def test_every_chapter_assignment_asks_for_one_prediction_worth_a_point():
    assert sorted(slug for slug, _ in PREDICTIONS) == CHAPTERS
    for slug, ex in PREDICTIONS:
        assert ex.points == 1 and ex.name.startswith("predicted_"), (slug, ex.name)
        cells = {c.grade_id: c for c in read_cells(ROOT / "solutions" / slug / assignments()[slug].notebook)}
        assert f'check("{slug}", "{ex.name}", {ex.name})' in cells[f"test_{ex.name}"].source
        # the visible test never states the answer: the function's own test cell shows it, on the same example
        shown = cells[f"test_{ex.name}"].source.split("### BEGIN HIDDEN TESTS")[0]
        assert not any(f"{v:g}" in shown.replace(" ", "") for v in answer_of(ex) if abs(v) > 1), (slug, shown)


@pytest.mark.parametrize("slug, ex", PREDICTIONS, ids=[slug for slug, _ in PREDICTIONS])
def test_the_answer_is_what_the_reference_prints_on_the_questions_example(slug, ex):
    """The answer is written in the registry as numbers; the function that follows the prediction prints its
    result on the same example in its test cell. Run with the solution's function, that line prints the answer:
    the question, the answer and the reference cannot drift apart."""
    exercises = [e.name for e in assignments()[slug].exercises]
    function = exercises[exercises.index(ex.name) + 1]
    cells = read_cells(ROOT / "solutions" / slug / assignments()[slug].notebook)
    ns = solution_namespace(cells)
    (test,) = [c for c in cells if c.grade_id == f"test_{function}"]
    lines = test.source.splitlines()
    shown = next(i for i, line in enumerate(lines) if line.startswith("print("))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec("\n".join(lines[:shown + 1]), ns)
    printed = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", out.getvalue().split(":", 1)[1])]
    assert len(printed) == len(answer_of(ex)) and all(math.isclose(a, b, abs_tol=1e-4) for a, b in
                                                      zip(printed, answer_of(ex))), (slug, out.getvalue())


@pytest.mark.parametrize("slug, ex", PREDICTIONS, ids=[slug for slug, _ in PREDICTIONS])
def test_the_answer_scores_in_every_form_and_each_listed_mistake_is_named(slug, ex):
    answer = answer_of(ex)
    forms = [answer, tuple(answer), torch.tensor(answer), torch.tensor(answer, dtype=torch.float32),
             np.array(answer), [[v] for v in answer]]
    if all(v == int(v) for v in answer):
        forms += [[int(v) for v in answer], torch.Size(int(v) for v in answer)]
    if len(answer) == 1:
        forms += [answer[0], torch.tensor(answer[0])]
    for form in forms:
        assert verdict(ex, form) is None, (slug, form, verdict(ex, form))
    (comparison,) = ex.comparisons
    for mistake in comparison.mistakes:
        wrong = mistake.variant().tolist()
        said = verdict(ex, wrong)
        assert said is not None and mistake.message in said, (slug, wrong, said)
        # a wrong answer is never within the question's rounding of the right one
        assert len(wrong) != len(answer) or max(abs(a - b) for a, b in zip(wrong, answer)) > 0.01, (slug, wrong)


@pytest.mark.parametrize("slug, ex", PREDICTIONS, ids=[slug for slug, _ in PREDICTIONS])
def test_what_is_not_numbers_is_refused_with_what_was_asked(slug, ex):
    for value, why in [(None, "Did you forget to `return` it?"), ("3", "should return"), ([], "should return"),
                       ([True], "should return"), ([float("nan")] * len(answer_of(ex)), "all finite"),
                       ({"a": 1}, "should return"), (list(range(100)), "should return"),
                       (NotImplementedError("not implemented yet"), "is not implemented yet"),
                       (ZeroDivisionError("x"), "raised ZeroDivisionError")]:
        said = verdict(ex, value)
        assert said is not None and why in said, (slug, value, said)


def hostile_values():
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                       st.text(max_size=30), st.binary(max_size=10), st.complex_numbers(),
                       st.lists(st.floats(-1e6, 1e6), max_size=5).map(torch.tensor),
                       st.just(torch.zeros(0)), st.just(torch.ones(3, dtype=torch.bool)), st.just(object()),
                       st.just(torch.randn(100)), st.just(np.array(["a", "b"])))
    return st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                        st.dictionaries(st.text(max_size=3), inner, max_size=2)),
                        max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whatever_a_prediction_returns_the_verdict_is_a_score_or_a_named_failure(data):
    slug, ex = data.draw(st.sampled_from(PREDICTIONS))
    value = data.draw(hostile_values())
    said = verdict(ex, value)  # anything but ExerciseFailure escapes and fails the test
    if said is None:  # scored: then its numbers are the answer, within the question's rounding
        flat = torch.as_tensor(np.array(value, dtype=np.float64)).reshape(-1).tolist()
        assert len(flat) == len(answer_of(ex)) and all(math.isclose(a, b, abs_tol=0.01) for a, b in
                                                      zip(flat, answer_of(ex))), (slug, value)
    else:
        assert said.isprintable() and len(said) < 600, said
