"""What nbgrader grades in a submission is the gradebook's to say, not the learner's: :class:`CanonicalCells`.

A learner hands in a notebook whose cells carry nbgrader's marks (``cell.metadata["nbgrader"]``: the cell's
``grade_id``, whether it is graded, a solution, locked, its points, the format's ``schema_version``). They are
the learner's bytes: a copy-pasted test cell carries its ``grade_id`` twice, an edit can leave a mark of another
format version or of a cell the assignment does not have. nbgrader's own ``DeduplicateIds`` empties a copy's marks
(``{}``), which its ``CheckCellMetadata`` then takes for an old format and raises for the *whole* ``autograde``
command: every classmate graded with it went ungraded, on every later run too.

This preprocessor, first of nbgrader's sanitizing ones after ``ClearOutput`` (``nbgrader_config.py``), makes every
mark the gradebook's own, so that no mark a learner can write decides anything:

- a cell whose ``grade_id`` the assignment has, the last time it appears (nbgrader's own rule for copies: a test
  cell copied higher up to try it leaves the original, below its solution, the graded one): its marks are rebuilt
  from the gradebook's record of the source (graded, solution, locked, points; the format nbgrader reads);
- every other cell with marks (an earlier copy, an unknown ``grade_id``, marks that are not a mapping): its marks
  are removed, so nbgrader runs it as an ordinary cell (a copy of a test cell without its hidden part, which is
  the grader's to run), and what was done is noted for the instructor (:data:`NOTES_KEY`, which
  :class:`grader.autograde.GuardedExecute` hands to ``make grade``'s notes).

nbgrader's ``OverwriteCells`` then puts back a locked cell's source and type, and adds the graded cells a
learner deleted, as before.
"""

from __future__ import annotations

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor

from .failures import printable
from .notebook import without_hidden_tests

#: the notebook metadata key that carries what this preprocessor did to the next stage (always rewritten here, so a
#: learner's own value never reaches the notes)
NOTES_KEY = "course_grading_notes"
#: the nbgrader format version of the marks this preprocessor writes
SCHEMA_VERSION = 3


class CanonicalCells(NbGraderPreprocessor):
    """Every cell's nbgrader marks rebuilt from the gradebook, or removed (see the module's text)."""

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        try:
            with Gradebook(info["db_url"]) as gb:
                marks = source_marks(gb.find_notebook(info["notebook"], info["assignment"]))
        except (KeyError, MissingEntry):
            marks = None
        notes = canonicalise(nb, marks) if marks is not None else []
        nb.metadata[NOTES_KEY] = notes
        for note in notes:
            self.log.warning("%s: %s", info.get("student"), note)
        return nb, resources


def canonicalise(nb, marks: dict[str, dict]) -> list[str]:
    """Make every nbgrader mark of ``nb``'s cells one of ``marks`` (by grade_id, the gradebook's, each with the
    source cell's ``cell_type``), each grade_id on one cell at most, the last it was on, of its source's type; remove
    the others' marks (and a copied test cell's hidden part). Returns what was done, for the instructor."""
    notes: list[str] = []
    seen: set[str] = set()
    for index in reversed(range(len(nb.cells))):  # the last copy of a cell is the graded one
        cell = nb.cells[index]
        if "nbgrader" not in cell.get("metadata", {}):
            continue
        found = cell.metadata["nbgrader"]
        gid = found.get("grade_id") if isinstance(found, dict) else None
        if isinstance(gid, str) and gid in marks and gid not in seen:
            seen.add(gid)
            mark = dict(marks[gid])
            kind = mark.pop("cell_type", cell.cell_type)
            if cell.cell_type != kind:  # a marked cell retyped: its source's type again (OverwriteCells's rule)
                notes.append(f"cell {index + 1} ({printable(gid)[:80]!r}) was made a {cell.cell_type} cell: it is a "
                             f"{kind} cell again")
                _retype(cell, kind)
            cell.metadata["nbgrader"] = mark
            continue
        del cell.metadata["nbgrader"]
        if isinstance(cell.get("source"), str):
            cell.source = without_hidden_tests(cell.source)  # the grader's part, never run in the kernel
        if not isinstance(gid, str):
            notes.append(f"cell {index + 1} carried nbgrader marks without a grade_id: graded as an ordinary cell")
        elif gid in seen:
            notes.append(f"cell {index + 1} is an earlier copy of cell {printable(gid)[:80]!r}: the last copy is the "
                         "graded one, this one ran as an ordinary cell")
        else:
            notes.append(f"cell {index + 1} carried the grade_id {printable(gid)[:80]!r}, which the assignment does "
                         "not have: graded as an ordinary cell")
    notes.reverse()
    return notes


def _retype(cell, kind: str) -> None:
    """``cell`` made a ``kind`` cell ("code" or "markdown"), with the fields nbformat asks of that kind."""
    cell.cell_type = kind
    if kind == "code":
        cell.outputs, cell.execution_count = [], None
        cell.pop("attachments", None)
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def source_marks(notebook) -> dict[str, dict]:
    """The nbgrader marks of every cell of the source notebook, by grade_id, as the gradebook records them (with the
    source cell's ``cell_type``, which :func:`canonicalise` restores and does not write)."""
    graded = {c.name: c for c in notebook.grade_cells}
    solutions = {c.name for c in notebook.solution_cells}
    marks = {}
    for source in notebook.source_cells:
        mark = {"grade": source.name in graded, "solution": source.name in solutions, "locked": bool(source.locked),
                "grade_id": source.name, "schema_version": SCHEMA_VERSION, "task": False,
                "cell_type": source.cell_type}
        if source.name in graded:
            mark["points"] = float(graded[source.name].max_score)
        marks[source.name] = mark
    return marks
