"""Check your work: the hidden tests' comparisons, on fresh random cases, while a learner works.

In a release notebook (``make lab`` or the class hub), the last cell checks
every exercise of the assignment, and any cell can check one::

    from grader.practice import check_my_work
    check_my_work("02-attention")                        # every exercise of the assignment
    check_my_work("02-attention", "attention_scores")    # one

Each exercise is run through the same steps as its hidden test
(:func:`grader.registry.check`: values, gradients, dtypes, layouts, forbidden
routines, the named likely mistakes), on cases drawn from a fresh seed, never
one of the registry's seeds (the cases the repository's tests draw; under
``make grade`` each learner's cases come from the course's secret instead,
:mod:`grader.secret`). Each exercise prints that it agrees,
or the grader's own message: the first disagreement (which case, shapes and
dtypes, which entry, by how much) and the likely mistake where one matches.
The reference's code is never shown.

Under ``make grade`` the cell (``grade_id`` :data:`grader.notebook.CHECK_CELL`)
is neither run nor read as the learner's code (:mod:`grader.autograde`,
:func:`grader.notebook.learner_code`): it is the course's, locked, and nbgrader
restores its source before grading. An
instructor switches it off for an assignment (an exam) in ``course.toml``;
the cell then says so and checks nothing.
"""

from __future__ import annotations

import secrets
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .failures import ExerciseFailure
from .registry import Comparison, assignments, check

#: the course's configuration: ``[check_your_work] off = [<assignment>, ...]``
COURSE_TOML = Path(__file__).resolve().parent.parent / "course.toml"


@dataclass(frozen=True)
class Verdict:
    """What the check found for one exercise: ``status`` is "agrees", "wrong", "not written" or "missing"."""

    exercise: str
    status: str
    message: str
    seconds: float

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
    unknown = sorted(set(off) - set(assignments()))
    if unknown:
        raise ValueError(f"{path}: [check_your_work] off names {unknown}, which are not assignments; "
                         f"the assignments are {sorted(assignments())}")
    return slug in off


def grading_seeds(slug: str) -> set[int]:
    """The registry's seeds of assignment ``slug``: what its hidden tests draw from without a course secret."""
    return {step.seed for ex in assignments()[slug].exercises for step in ex.steps if isinstance(step, Comparison)}


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


def practice(slug: str, exercises: list[str] | None = None, namespace: dict | None = None,
             seed: int | None = None) -> tuple[int, list[Verdict]]:
    """Check the learner's functions of ``slug`` (all, or ``exercises``) on cases drawn from ``seed``.

    ``namespace``: where the functions are defined (the notebook's, by default). ``seed`` defaults to a
    fresh one; one that grading uses is refused. Returns the seed and one :class:`Verdict` per exercise.
    """
    table = assignments()
    if slug not in table:
        raise ValueError(f"no assignment {slug!r}; the assignments are {sorted(table)}")
    assignment = table[slug]
    names = [ex.name for ex in assignment.exercises]
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
    verdicts = []
    for name in names:
        t = time.perf_counter()
        if name not in ns:
            verdicts.append(Verdict(name, "missing", f"{name} is not defined: run its cell first.", 0.0))
            continue
        try:
            check(slug, name, ns[name], seed=seed)
            status, message = "agrees", "agrees with the reference"
        except ExerciseFailure as exc:
            message = str(exc)
            status = "not written" if "is not implemented yet" in message else "wrong"
        verdicts.append(Verdict(name, status, message, time.perf_counter() - t))
    return seed, verdicts


MARKS = {"agrees": "✓", "wrong": "✗", "not written": "·", "missing": "·"}


def report(slug: str, seed: int, verdicts: list[Verdict]) -> str:
    """The check's verdicts as the learner reads them."""
    width = max(len(v.exercise) for v in verdicts)
    lines = [f"Check your work, {slug}: fresh random cases (seed {seed}), never the ones grading draws"]
    for v in verdicts:  # one line each, however long: the message is the grader's, word for word
        timing = f" ({v.seconds:.1f} s)" if v.status in ("agrees", "wrong") else ""
        lines.append(f"{MARKS[v.status]} {v.exercise:<{width}}  {v.message}{timing}")
    agree = sum(v.agrees for v in verdicts)
    lines.append(f"{agree} of {len(verdicts)} agree. Grading draws other cases from the same kinds; "
                 f"check_my_work({slug!r}, seed={seed}) draws these again.")
    return "\n".join(lines)


def check_my_work(slug: str, *exercises: str, seed: int | None = None, namespace: dict | None = None) -> None:
    """Check the notebook's functions for assignment ``slug`` (every exercise, or those named) and print how."""
    if switched_off(slug):
        print(f"Check your work is switched off for {slug} by the course's configuration (an exam, say): "
              "your functions are checked when your instructor grades them.")
        return
    seed, verdicts = practice(slug, list(exercises) or None, namespace, seed)
    print(report(slug, seed, verdicts))

