"""Check your work: the hidden tests' comparisons, on fresh random cases, while a learner works.

In a release notebook (``make lab`` or the class hub), the last cell checks
every exercise of the assignment, and any cell can check one::

    from grader.practice import check_my_work
    check_my_work("02-attention")                        # every exercise of the assignment
    check_my_work("02-attention", "attention_scores")    # one

Each exercise is run through the same steps as its hidden test
(:meth:`grader.registry.Exercise.run`: values, gradients, dtypes, layouts,
forbidden routines, the named likely mistakes), on cases drawn from a fresh
seed, never one of the registry's seeds (the cases the repository's tests
draw; under ``make grade`` each learner's cases come from the course's secret
instead, :mod:`grader.secret`). Each exercise prints that it agrees, or the
grader's own message: the first disagreement (which case, shapes and dtypes,
by how much) and the likely mistake where one matches. The reference's code
is never shown, and neither is what only the grader needs (the seed, the time
taken, an empty batch shape).

A failure can be inherited: ``scaled_dot_product_attention`` that calls the
learner's own ``attention_scores`` is wrong wherever ``attention_scores`` is.
When an exercise fails and calls another exercise of the assignment that fails
its own check (wrong, not written yet, or not defined), it is checked again on
the same cases with the reference in place of that function: if it then
agrees, the verdict says the fault is in the function it calls; if not, it
shows its own mistake and names the other.

The check runs on one torch thread, and gives the notebook back its own count:
its cases are small, and on a machine shared by a class (the hub) or busy with
other work, OpenMP's threads spin waiting for each other. On a busy 2-core
machine, 09-vision-transformer's check took 13.6 s on two threads and 0.7 s on
one (``benchmarks/check_your_work.py`` times it in a fresh kernel).

Under ``make grade`` the cell (``grade_id`` :data:`grader.notebook.CHECK_CELL`)
is neither run nor read as the learner's code (:mod:`grader.autograde`,
:func:`grader.notebook.learner_code`): it is the course's, locked, and nbgrader
restores its source before grading. An instructor switches it off for an
assignment (an exam) in ``course.toml``; the cell then says so and checks
nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import re
import secrets
import sys
import tomllib
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from .failures import ExerciseFailure, ForbiddenCall, NotWritten
from .learner import LocalLearner
from .registry import Assignment, Comparison, Exercise, assignment, assignments

#: the course's configuration: ``[check_your_work] off = [<assignment>, ...]``
COURSE_TOML = Path(__file__).resolve().parent.parent / "course.toml"

#: a verdict's mark in the report: "inherited" fails, but because of another function it calls
MARKS = {"agrees": "✓", "wrong": "✗", "inherited": "✗", "not written": "·", "missing": "·"}


@dataclass(frozen=True)
class Verdict:
    """What the check found for one exercise.

    ``status``: "agrees", "wrong" (a mistake of its own), "inherited" (it agrees once the exercises in
    ``because``, which it calls and which fail their own checks, are right), "not written" or "missing".
    """

    exercise: str
    status: str
    message: str
    because: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return self.status == "agrees"


def switched_off(slug: str, config: Path | None = None) -> bool:
    """Whether the course's configuration switches the check off for assignment ``slug``."""
    path = COURSE_TOML if config is None else config
    if not path.is_file():
        return False
    with path.open("rb") as f:
        table = tomllib.load(f).get("check_your_work", {})
    off = table.get("off", [])
    if not isinstance(off, list) or not all(isinstance(s, str) for s in off):
        raise ValueError(f"{path}: [check_your_work] off must be a list of assignment names, got {off!r}")
    if off:  # every assignment is imported only to name the unknown ones
        unknown = sorted(set(off) - set(assignments()))
        if unknown:
            raise ValueError(f"{path}: [check_your_work] off names {unknown}, which are not assignments; "
                             f"the assignments are {sorted(assignments())}")
    return slug in off


def _assignment(slug: str) -> Assignment:
    try:
        return assignment(slug)
    except KeyError:
        raise ValueError(f"no assignment {slug!r}; the assignments are {sorted(assignments())}") from None


def grading_seeds(slug: str) -> set[int]:
    """The registry's seeds of assignment ``slug``: what its hidden tests draw from without a course secret."""
    return {step.seed for ex in _assignment(slug).exercises for step in ex.steps if isinstance(step, Comparison)}


def fresh_seed(slug: str) -> int:
    """A random seed that is none of the grading seeds of ``slug``."""
    taken = grading_seeds(slug)
    while (seed := secrets.randbelow(2**31)) in taken:
        pass
    return seed


def _namespace() -> dict:
    """The notebook's names: IPython's user namespace in a kernel, else ``__main__``'s."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell.user_ns if shell is not None else vars(sys.modules["__main__"])


@contextlib.contextmanager
def _quietly_on_one_thread() -> Iterator[None]:
    """One torch thread and no warnings while the check runs (a learner needs neither), as they were after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.set_num_threads(threads)


def practice(slug: str, exercises: list[str] | None = None, namespace: dict | None = None,
             seed: int | None = None) -> tuple[int, list[Verdict]]:
    """Check the learner's functions of ``slug`` (all, or ``exercises``) on cases drawn from ``seed``.

    ``namespace``: where the functions are defined (the notebook's, by default). ``seed`` defaults to a
    fresh one; one that grading uses is refused. Returns the seed and one :class:`Verdict` per exercise.
    """
    entry = _assignment(slug)
    names = [ex.name for ex in entry.exercises]
    if exercises is not None:
        unknown = [e for e in exercises if e not in names]
        if unknown:
            raise ValueError(f"assignment {slug!r} has no exercise {unknown[0]!r}; its exercises are {names}")
        names = [n for n in names if n in exercises]
    if seed is None:
        seed = fresh_seed(slug)
    elif seed in grading_seeds(slug):
        raise ValueError(f"seed {seed} is one that grading uses: pick another (or none, for a fresh one)")
    ns = _namespace() if namespace is None else namespace
    with _quietly_on_one_thread():
        check = _Check(entry, ns, seed)
        return seed, [check.verdict(name) for name in names]


class _Check:
    """The verdicts of one check, each exercise judged once, an inherited failure traced to the function it calls."""

    def __init__(self, entry: Assignment, ns: dict, seed: int):
        self.entry, self.ns, self.seed = entry, ns, seed
        self.own: dict[str, Verdict] = {}

    def own_verdict(self, name: str) -> Verdict:
        """The exercise's verdict as grading would give it, the functions it calls as they are."""
        if name not in self.own:
            if name not in self.ns:
                self.own[name] = Verdict(name, "missing", f"{name} is not defined: run its cell first.")
            else:
                self.own[name] = self._run(self.entry.exercise(name), self.ns[name])
        return self.own[name]

    def _run(self, ex: Exercise, function) -> Verdict:
        return Verdict(ex.name, *self._outcome(ex, function)[::2])

    def _outcome(self, ex: Exercise, function, allowed: tuple = ()) -> tuple[str, bool, str]:
        """The exercise's steps on ``function``: its status, whether a guard stopped it, and the message.
        ``allowed``: course functions its calls let through (the right callees put in place of wrong ones)."""
        learner = LocalLearner(function, ex.name, allowed=allowed)
        try:
            if not learner.is_callable:
                raise ExerciseFailure(f"{ex.name} is not a function (got {learner.type_name}).")
            ex.run(learner, ex.name, self.seed)
        except NotWritten as exc:
            return "not written", False, for_learner(str(exc))
        except ExerciseFailure as exc:
            return "wrong", isinstance(exc, ForbiddenCall), for_learner(str(exc))
        return "agrees", False, "agrees with the reference"

    def verdict(self, name: str) -> Verdict:
        """The verdict the learner reads: the exercise's own, or where the fault lies when it is inherited."""
        own = self.own_verdict(name)
        function = self.ns.get(name)
        if own.status in ("agrees", "missing") or not isinstance(function, types.FunctionType):
            return own
        lookups = exercises_called(function, [e.name for e in self.entry.exercises if e.name != name])
        failing = [other for other in lookups if not self.own_verdict(other).agrees]
        if not failing:
            return own
        return self._traced(own, function, failing, lookups)

    def _traced(self, own: Verdict, function, failing: list[str], lookups: dict[str, list[dict]]) -> Verdict:
        """``own`` checked again on the same cases with the reference in place of each function in ``failing``."""
        named = " and ".join(failing)
        which = self._which(failing)
        unknown = dataclasses.replace(own, message=f"{own.message} It calls {named}, {which}: fix that first.")
        # an adapted exercise's comparisons take other arguments: its reference as the learner writes it, if known
        if any(self.entry.exercise(other).adapt and not self.entry.exercise(other).function for other in failing):
            return unknown
        references = {other: self.entry.exercise(other).reference for other in failing}
        ex = self.entry.exercise(own.exercise)
        with _in_place_of({other: (references[other], lookups[other]) for other in failing}):
            status, stopped, message = self._outcome(ex, function, tuple(references.values()))
        if status == "agrees":
            return Verdict(own.exercise, "inherited",
                           f"the fault is in {named}, {which}: with a right {named} in {_its(failing)} place, "
                           f"{own.exercise} agrees with the reference.", tuple(failing))
        if status == "not written":
            return Verdict(own.exercise, status, message)
        if stopped:  # a guard stopped the reference itself (a routine this exercise forbids): no verdict on it
            return unknown
        return Verdict(own.exercise, "wrong", f"{message} (That is with a right {named} in place of yours, "
                                              f"{which}.)")

    def _which(self, failing: list[str]) -> str:
        """"which it calls and which is wrong", or for several, each one's state."""
        states = {"not written": "is not written yet", "missing": "is not defined"}
        state = [states.get(self.own_verdict(other).status, "is wrong") for other in failing]
        if len(failing) == 1:
            return f"which it calls and which {state[0]}"
        return "which it calls (" + ", ".join(f"{o} {s}" for o, s in zip(failing, state)) + ")"


def _its(names: list[str]) -> str:
    return "its" if len(names) == 1 else "their"


def exercises_called(function: types.FunctionType, exercises: list[str]) -> dict[str, list[dict]]:
    """Which of ``exercises`` the learner's ``function`` calls, directly or through helpers of the learner's own.

    Returns, for each exercise whose name the code reads as a global, the namespaces (functions' globals) it
    is read from. A helper is a function defined in the same module as ``function`` (the notebook) whose name
    the code reads; an exercise is not followed further, since its own verdict says where its faults lie.
    """
    found: dict[str, list[dict]] = {}
    seen: set[int] = set()
    todo = [function]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        scope = f.__globals__
        for name in _globals_read(f.__code__):
            if name in exercises:
                if not any(scope is s for s in found.setdefault(name, [])):
                    found[name].append(scope)
            elif isinstance(helper := scope.get(name), types.FunctionType) and \
                    helper.__module__ == function.__module__:
                todo.append(helper)
    return {name: found[name] for name in exercises if name in found}


def _globals_read(code: types.CodeType) -> Iterator[str]:
    """The global names a code object and the code nested in it (lambdas, comprehensions, inner functions) read."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield instruction.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _globals_read(const)


@contextlib.contextmanager
def _in_place_of(replacements: dict[str, tuple[Callable, list[dict]]]) -> Iterator[None]:
    """Each name bound to its reference in the namespaces it is looked up in, for the time of one check."""
    saved = []
    try:
        for name, (reference, scopes) in replacements.items():
            for scope in scopes:
                saved.append((scope, name, scope.get(name, _UNBOUND)))
                scope[name] = reference
        yield
    finally:
        for scope, name, value in reversed(saved):
            if value is _UNBOUND:
                scope.pop(name, None)
            else:
                scope[name] = value


_UNBOUND = object()


def for_learner(message: str) -> str:
    """The grader's message without what only the grader needs: an empty batch shape (``batch ()``)."""
    return re.sub(r"batch \(\), |, batch \(\)(?=[,)])", "", message)


def report(slug: str, verdicts: list[Verdict]) -> str:
    """The check's verdicts as the learner reads them."""
    width = max(len(v.exercise) for v in verdicts)
    lines = [f"Check your work, {slug}: each exercise on fresh random cases, through the checks that grade it"]
    for v in verdicts:  # one line each, however long: the message is the grader's, word for word
        lines.append(f"{MARKS[v.status]} {v.exercise:<{width}}  {v.message}")
    agree = sum(v.agrees for v in verdicts)
    lines.append(f"{agree} of {len(verdicts)} agree. Grading draws other random cases of the same kinds.")
    return "\n".join(lines)


def check_my_work(slug: str, *exercises: str, seed: int | None = None, namespace: dict | None = None) -> None:
    """Check the notebook's functions for assignment ``slug`` (every exercise, or those named) and print how."""
    if switched_off(slug):
        print(f"Check your work is switched off for {slug} by the course's configuration (an exam, say): "
              "your functions are checked when your instructor grades them.")
        return
    _, verdicts = practice(slug, list(exercises) or None, namespace, seed)
    print(report(slug, verdicts))
