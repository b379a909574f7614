"""An nbgrader notebook's cells, as the grader and its tools read them.

nbgrader marks a cell in ``cell.metadata["nbgrader"]``: a *solution* cell
(``solution: true``) holds the learner's code and is named by its
``grade_id``, the function it defines; a *test* cell (``grade: true``,
``solution: false``, worth ``points``) checks it, named ``test_<function>``.
A test cell's visible asserts run in the learner's kernel; its hidden part,
between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``, is one line::

    from grader import check; check("02-attention", "attention_scores", attention_scores)

This module is the one place that reads that metadata and those markers:
from a raw cell (a dict or an ``nbformat`` node: :func:`metadata`,
:func:`grade_id`, :func:`is_test_cell`) or as a :class:`Cell`
(:func:`read_cells`, :func:`cells_of`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

#: the grade_id of a release notebook's "Check your work" cell (:mod:`grader.practice`): the course's own locked
#: code, which grading neither runs nor reads as the learner's, and feedback leaves out with its heading
CHECK_CELL = "check_your_work"
CHECK_HEADING = "check_your_work_intro"
#: the hidden part of a test cell (group 1: its code)
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS\n?", re.S)


def metadata(cell: Any) -> dict:
    """A raw cell's nbgrader metadata (empty for a cell nbgrader does not grade)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def grade_id(cell: Any) -> str | None:
    return metadata(cell).get("grade_id")


def is_test_cell(cell: Any) -> bool:
    """A graded code cell that is not a solution: the checks of an exercise."""
    meta = metadata(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def is_check_cell(cell: Any) -> bool:
    """A raw cell that is the notebook's "Check your work", its call or its heading (by nbgrader grade_id)."""
    meta = metadata(cell)
    return meta.get("grade_id") in (CHECK_CELL, CHECK_HEADING) and not meta.get("grade") and not meta.get("solution")


#: the tag of a cell that nbval, and the suite's in-process runs of a notebook, leave out
LONG_TAG = "nbval-skip"


@dataclass(frozen=True)
class Cell:
    """One cell of an nbgrader notebook: its place, its kind and source, and what nbgrader marks it as."""

    index: int
    kind: str  # "code", "markdown", "raw"
    source: str
    grade_id: str | None = None
    solution: bool = False
    grade: bool = False
    points: float = 0.0
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, cell: Any, index: int) -> Cell:
        meta, source = metadata(cell), cell.get("source", "")
        return cls(index, cell["cell_type"], "".join(source) if isinstance(source, list) else source,
                   meta.get("grade_id"), bool(meta.get("solution")), bool(meta.get("grade")),
                   float(meta.get("points", 0) or 0), tuple(cell.get("metadata", {}).get("tags", ()) or ()))

    @property
    def is_test(self) -> bool:
        """A graded code cell that is not a solution: the checks of an exercise."""
        return self.kind == "code" and self.grade and not self.solution

    @property
    def is_check(self) -> bool:
        """The notebook's "Check your work" cell: the course's code, not the learner's."""
        return self.grade_id == CHECK_CELL and not self.grade and not self.solution

    @property
    def is_long(self) -> bool:
        """A cell the suite leaves out, as nbval does (tagged ``nbval-skip``): a run of minutes the learner
        starts, such as a capstone's training on the whole sample."""
        return LONG_TAG in self.tags

    @property
    def hidden(self) -> str:
        """The code of its hidden tests ('' if none)."""
        return hidden_part(self.source)


def cells_of(notebook: Any) -> list[Cell]:
    """The cells of a notebook already read (an ``nbformat`` node or its dict)."""
    return [Cell.of(c, i) for i, c in enumerate(notebook["cells"])]


def read_cells(path: Path | str) -> list[Cell]:
    """The cells of the notebook at ``path``."""
    import nbformat

    return cells_of(nbformat.read(path, as_version=4))


def learner_code(cells: list[Cell], replace: dict[str, str] | None = None) -> list[tuple[str | None, str | None]]:
    """Per cell, the learner's code (None for markdown, the test cells and Check your work) and its grade_id.

    ``replace`` maps a solution cell's grade_id to the source to read instead.
    """
    replace = replace or {}
    return [(replace.get(c.grade_id, c.source) if c.kind == "code" and not (c.is_test or c.is_check) else None,
             c.grade_id) for c in cells]


def import_statements(cells: list[Cell]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of the notebook's code cells (a cell that does not parse has none)."""
    for c in cells:
        if c.kind != "code":
            continue
        try:
            tree = ast.parse(c.source)
        except SyntaxError:
            continue
        yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


# --------------------------------------------------------------------------
# The hidden part of a test cell
# --------------------------------------------------------------------------
def hidden_part(source: str) -> str:
    """The code between the hidden-test markers of a test cell ('' if none)."""
    return "\n".join(m.group(1) for m in HIDDEN.finditer(source))


def without_hidden_tests(source: str) -> str:
    """A test cell's source without its hidden part (the visible asserts)."""
    return HIDDEN.sub("", source)


def hidden_check(source: str) -> tuple[str, str, str] | None:
    """``(assignment, exercise, learner's name)`` of a test cell's hidden line, or None if it has none.

    A hidden block is exactly ``from grader import check; check("slug", "name", function)``
    (``tests/grading/test_registry.py`` holds every notebook to it).
    """
    block = HIDDEN.search(source)
    if not block:
        return None
    try:
        tree = ast.parse(block.group(1))
    except SyntaxError:
        return None
    if len(tree.body) != 2 or not isinstance(tree.body[0], ast.ImportFrom) or not isinstance(tree.body[1], ast.Expr):
        return None
    call = tree.body[1].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check"
            and len(call.args) == 3 and not call.keywords and isinstance(call.args[2], ast.Name)
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args[:2])):
        return None
    return call.args[0].value, call.args[1].value, call.args[2].id
