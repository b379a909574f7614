"""The planted classes of the similarity report: learners as data, written into a course as notebooks.

A planted learner is a :class:`Submission`: the code of each solution cell (by grade_id) and the cells they
added, each after the solution cell it follows. :func:`write_class` writes every learner's notebook, the
release notebook with their cells in it, into ``submitted/<learner>/<assignment>/``.

Each class is a module beside this one (``class_a.py`` to ``class_d.py``) with ``LEARNERS``
(assignment -> learner -> Submission) and ``COPIES`` (the planted pairs: assignment, the copier, the learner or
``(reference)`` copied, the disguise). Every other pair of learners is independent. rings.py makes classes with
rings from a class's independent learners.

    python -m tests.grading.similarity.planted check [a|b|c|d] [learner ...]

runs every planted learner's functions through the hidden checks (``grader.check``), as the notebook would
define them, top to bottom; it prints one line per learner and fails if any check fails.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = {"02-attention": "attention.ipynb", "09-vision-transformer": "vision_transformer.ipynb"}
REFERENCE = "(reference)"


@dataclass
class Submission:
    """One learner's code: solution cells by grade_id, and added cells as (the solution cell they follow, code)."""

    cells: dict[str, str]
    added: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Copy:
    """A planted copy: ``copier`` handed in ``source``'s code (a learner, or the reference) under ``disguise``."""

    slug: str
    copier: str
    source: str
    disguise: str

    @property
    def pair(self) -> tuple[str, str]:
        return (self.copier, self.source) if self.source == REFERENCE else tuple(sorted((self.copier, self.source)))


def planted_pairs(copies: list[Copy], slug: str) -> dict[tuple[str, str], str]:
    """Every pair that shares copied code, with how: a copier and their source, and two copiers of one source
    (sorted learner names; a pair with the reference is (learner, REFERENCE))."""
    pairs: dict[tuple[str, str], str] = {}
    groups: dict[str, list[Copy]] = {}
    for c in copies:
        if c.slug == slug:
            pairs[c.pair] = c.disguise
            groups.setdefault(c.source, []).append(c)
    for source, members in groups.items():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                pair = (a.copier, b.copier) if source == REFERENCE else tuple(sorted((a.copier, b.copier)))
                pairs.setdefault(pair, f"two copies of {source}'s code ({a.disguise}; {b.disguise})")
    return pairs


def release(slug: str) -> dict:
    return json.loads((ROOT / "exercises" / slug / NOTEBOOKS[slug]).read_text(encoding="utf-8"))


def notebook(slug: str, sub: Submission, base: dict | None = None) -> dict:
    """The release notebook with the learner's solution cells and added cells in it."""
    nb = copy.deepcopy(base or release(slug))
    cells = []
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        name = meta.get("grade_id")
        if meta.get("solution") and name in sub.cells:
            cell["source"] = sub.cells[name].strip("\n")
        cells.append(cell)
        for after, code in sub.added:
            if after == name:
                cells.append({"cell_type": "code", "execution_count": None, "id": f"added-{len(cells)}",
                              "metadata": {}, "outputs": [], "source": code.strip("\n")})
    nb["cells"] = cells
    return nb


def write_class(root: Path, slug: str, learners: dict[str, Submission]) -> None:
    base = release(slug)
    for learner, sub in learners.items():
        path = root / "submitted" / learner / slug / NOTEBOOKS[slug]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notebook(slug, sub, base)), encoding="utf-8")


def load(name: str):
    """A planted class module (``"a"`` to ``"d"``)."""
    return importlib.import_module(f"tests.grading.similarity.class_{name}")


def run_notebook(slug: str, sub: Submission) -> dict:
    """The namespace the learner's notebook leaves: every code cell but the tests and Check your work, in order."""
    from grader.notebook import cells_of, learner_code

    namespace: dict = {}
    for source, _ in learner_code(cells_of(notebook(slug, sub))):
        if source is not None:
            exec(compile(source, f"<{slug}>", "exec"), namespace)  # the planted code, written for these tests
    return namespace


def check(name: str, only: list[str] = ()) -> int:
    from grader.registry import assignments
    from grader.registry import check as hidden_check

    failed = 0
    module = load(name)
    for slug, learners in module.LEARNERS.items():
        for learner, sub in learners.items():
            if only and learner not in only:
                continue
            namespace = run_notebook(slug, sub)
            problems = []
            for ex in assignments()[slug].exercises:
                try:
                    hidden_check(slug, ex.name, namespace[ex.name])
                except Exception as exc:  # noqa: BLE001 - every failure is reported, with its exercise
                    problems.append(f"{ex.name}: {type(exc).__name__}: {str(exc)[:300]}")
            failed += bool(problems)
            print(f"{slug} {learner}: {'passes' if not problems else 'FAILS'}", *problems, sep="\n    ", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "check":
        sys.exit(__doc__)
    sys.exit(max(check(n, sys.argv[3:]) for n in (sys.argv[2:3] or ["a", "b", "c", "d"])))
