"""Exercises as data: one registry entry per exercise, and the one call every hidden test makes.

Each assignment module under :mod:`grader.assignments` ends with an
:class:`Assignment`: its exercises, each with its points and the steps that
grade it. A step is either a :class:`Comparison` (a family of random cases
compared with the reference, with the likely mistakes that name what went
wrong and the routines the learner may not call) or a contract check, a
function ``step(learner, name, seed)`` for what a comparison cannot see (the
full score matrix never built, a Python float returned).

A hidden test is then one line naming its exercise::

    from grader import check; check("02-attention", "attention_scores", attention_scores)

and the tools that vary seeds, run catalogues of wrong code or time the
grading iterate :func:`assignments` instead of editing notebook cells.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .cases import Case, with_strided_layout
from .checker import check_function, check_table
from .diagnosis import Mistake
from .failures import ExerciseFailure
from .learner import Learner, as_learner

#: how many cases of each comparison are repeated with their tensors in a non-contiguous layout
STRIDED_CASES = 3
#: how many cases of each comparison are repeated with each of its numerically hard transformations
HARD_CASES = 4


@dataclass(frozen=True)
class Comparison:
    """One family of random cases on which the learner's function must agree with the reference.

    Attributes:
        reference: the reference function (the learner's signature).
        cases: ``cases(seed=...)`` draws the cases.
        seed: the seed the hidden test uses.
        mistakes: likely mistakes, tried in order when a result is wrong.
        forbidden: torch routines that would do the exercise for the learner.
        check_grad: also compare the gradients with respect to every floating input.
        allowed: course_lib building blocks the cases hand to the learner, who may call them.
        table: compare as a table computed from integers (float32 or float64 results both pass).
        hard: numerically hard repeats of the first cases (:class:`~grader.cases.LargeInputs`),
            for the inputs the chapter warns about.
        layouts: repeat the first cases with non-contiguous tensors. Off only where the result
            depends on the memory layout by design: ``torch.multinomial`` draws other tokens from
            the same probabilities stored with other strides.
        formulations: other correct ways to compute the result whose rounding differs in kind
            from the reference's (a softmax through ``logsumexp``); the tolerance allows the
            largest rounding error among them.
    """

    reference: Callable
    cases: Callable[..., list[Case]]
    seed: int
    mistakes: Sequence[Mistake] = ()
    forbidden: tuple = ()
    check_grad: bool = False
    allowed: tuple = ()
    table: bool = False
    hard: tuple = ()
    layouts: bool = True
    formulations: tuple = ()

    def run(self, learner: Learner | Callable, name: str, seed: int | None) -> None:
        cases = list(self.cases(seed=self.seed if seed is None else seed))
        if self.table:
            check_table(learner, self.reference, cases, name=name, diagnoses=self.mistakes)
            return
        strided = [c for c in map(with_strided_layout, cases) if c is not None][:STRIDED_CASES] if self.layouts else []
        hard = [make(c) for make in self.hard for c in cases[:HARD_CASES]]
        common = dict(name=name, diagnoses=self.mistakes, forbidden=self.forbidden, allowed=self.allowed,
                      formulations=self.formulations)
        check_function(learner, self.reference, cases + strided, check_grad=self.check_grad, **common)
        if hard:  # their values: a saturated softmax's gradients are below what float64 rounding can resolve
            check_function(learner, self.reference, hard, check_grad=False, **common)


#: a contract check: ``step(learner, name, seed)`` raises ExerciseFailure (seed None: its own default);
#: ``learner`` is a :class:`~grader.learner.Learner`, called through :func:`grader.checker.call_learner`
Contract = Callable[[Learner, str, "int | None"], None]


@dataclass(frozen=True)
class Exercise:
    """One graded function of an assignment.

    Attributes:
        name: the function the learner writes, also the solution cell's grade_id.
        points: what its test cell is worth (the notebook's metadata must agree).
        steps: comparisons and contract checks, run in order; the first failure is the feedback.
        adapt: turns the learner's function into the one the comparisons call (for a function
            that works by side effect, such as an in-place update); the adapter is grader code
            the guards let through, while everything it calls is still checked
            (:meth:`grader.learner.Learner.adapted`).
        function: for an adapted exercise, the reference as the learner's function is written
            (what a caller of it calls: Check your work puts it in place of a learner's wrong one);
            the comparisons' reference is the adapted one.
        prediction: the answer is a value the learner works out by hand (:mod:`grader.predictions`),
            returned by a function of no arguments, not code to compare between learners.
    """

    name: str
    points: float
    steps: tuple
    adapt: Callable[[Callable], Callable] | None = None
    function: Callable | None = None
    prediction: bool = False

    @property
    def comparisons(self) -> list[Comparison]:
        return [s for s in self.steps if isinstance(s, Comparison)]

    @property
    def mistakes(self) -> list[Mistake]:
        """Every named mistake of the exercise, each once."""
        out: list[Mistake] = []
        for comp in self.comparisons:
            out += [m for m in comp.mistakes if all(m is not o for o in out)]
        return out

    @property
    def forbidden(self) -> tuple:
        return tuple(f for comp in self.comparisons for f in comp.forbidden)

    @property
    def reference(self) -> Callable:
        """The reference function, as the learner's is called (its comparisons share it, adapted where the
        exercise adapts the learner's: then ``function``)."""
        return self.function or self.comparisons[0].reference

    def run(self, learner: Learner, name: str, seed: int | None) -> None:
        """Every step, in order, on the learner's function (adapted, where the exercise adapts it)."""
        if self.adapt:
            learner = learner.adapted(self.adapt)
        for step in self.steps:
            if isinstance(step, Comparison):
                step.run(learner, name, seed)
            else:
                step(learner, name, seed)


@dataclass(frozen=True)
class Assignment:
    """An nbgrader assignment: its folder under ``solutions/``, its notebook, its exercises."""

    slug: str
    notebook: str
    exercises: tuple[Exercise, ...]
    chapter: str = field(default="")

    @property
    def written(self) -> tuple[Exercise, ...]:
        """The exercises whose answer is code the learner writes: all but the predictions (whose code, a
        ``return`` of a few numbers, is the same for every learner who got them right)."""
        return tuple(ex for ex in self.exercises if not ex.prediction)

    def exercise(self, name: str) -> Exercise:
        for ex in self.exercises:
            if ex.name == name:
                return ex
        raise KeyError(f"assignment {self.slug!r} has no exercise {name!r}; "
                       f"its exercises are {[e.name for e in self.exercises]}")


def assignments() -> dict[str, Assignment]:
    """Every assignment, by slug, from the modules of :mod:`grader.assignments`."""
    package = importlib.import_module(f"{__package__}.assignments")
    found: dict[str, Assignment] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        assignment = getattr(module, "ASSIGNMENT", None)
        if assignment is None:
            raise RuntimeError(f"grader.assignments.{info.name} defines no ASSIGNMENT")
        if assignment.slug in found:
            raise RuntimeError(f"two modules register the assignment {assignment.slug!r}")
        found[assignment.slug] = assignment
    return dict(sorted(found.items()))


def assignment(slug: str) -> Assignment:
    """One assignment, by slug; a clear KeyError names what exists.

    Its module is named after the slug without its number (``02-attention``:
    :mod:`grader.assignments.attention`), so that module alone is imported:
    a learner's kernel that checks one assignment does not import the reference
    of every chapter. A slug whose module is named otherwise is found among them all.
    """
    module_name = f"{__package__}.assignments.{slug.partition('-')[2].replace('-', '_')}"
    if module_name.rpartition(".")[2].isidentifier():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
        else:
            found = getattr(module, "ASSIGNMENT", None)
            if found is not None and found.slug == slug:
                return found
    table = assignments()
    if slug not in table:
        raise KeyError(f"no assignment {slug!r}; the assignments are {sorted(table)}")
    return table[slug]


def exercise(slug: str, name: str) -> Exercise:
    """The registry entry of one exercise; a clear KeyError names what exists."""
    return assignment(slug).exercise(name)


def check(slug: str, name: str, learner: Any, *, seed: int | None = None) -> None:
    """Grade the learner's function for one exercise: every step of its registry entry, in order.

    Args:
        slug: the assignment, as its folder is named (``"02-attention"``).
        name: the exercise, as its function is named.
        learner: the learner's function, or a :class:`~grader.learner.Learner` (the judge
            hands over its proxy for the function in the grading kernel).
        seed: draw every comparison's cases from this seed instead of the registry's
            (the stability test varies it; a hidden test leaves it alone).

    Raises :class:`~grader.failures.ExerciseFailure` (or its subclass
    ``ForbiddenCall``) with the diagnosis; returns None, which nbgrader reads
    as full marks for the test cell.
    """
    ex = exercise(slug, name)
    learner = as_learner(learner, name)
    if not learner.is_callable:
        raise ExerciseFailure(f"{name} is not a function (got {learner.type_name}).")
    ex.run(learner, name, seed)
    return None
