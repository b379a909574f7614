"""Helpers for tests that read assignment notebooks and run their cells in-process."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def assignments() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def notebooks(assignment: str, where: str = "solutions") -> list[Path]:
    return sorted((ROOT / where / assignment).glob("*.ipynb"))


@dataclass
class Cell:
    kind: str
    source: str
    grade_id: str | None
    solution: bool
    grade: bool
    points: float


def read_cells(path: Path) -> list[Cell]:
    nb = nbformat.read(path, as_version=4)
    out = []
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        out.append(Cell(c.cell_type, c.source, meta.get("grade_id"), bool(meta.get("solution")),
                        bool(meta.get("grade")), float(meta.get("points", 0) or 0)))
    return out


def hidden_part(source: str) -> str:
    """The code between the hidden-test markers of a test cell ('' if none)."""
    return "\n".join(m.group(1) for m in HIDDEN.finditer(source))


@dataclass
class CellResult:
    grade_id: str
    points: float
    error: BaseException | None

    @property
    def passed(self) -> bool:
        return self.error is None


def run_cells(cells: list[Cell], replace: dict[str, str] | None = None, only_hidden: bool = False,
              only_test: str | None = None) -> dict[str, CellResult]:
    """Execute the code cells in order in one namespace, as a kernel would.

    ``replace`` maps a solution cell's grade_id to the source to run instead.
    With ``only_hidden``, test cells run only their hidden part. With
    ``only_test``, the other exercises' test cells are skipped and execution
    stops after that one. Errors are recorded per graded cell and execution
    goes on (nbgrader's allow_errors).
    """
    replace = replace or {}
    ns: dict = {"__name__": "__main__"}
    results: dict[str, CellResult] = {}
    for i, cell in enumerate(cells):
        if cell.kind != "code" or (only_test and cell.grade and cell.grade_id != only_test):
            continue
        src = replace.get(cell.grade_id, cell.source)
        if cell.grade and only_hidden:
            src = hidden_part(src)
        error = None
        try:
            exec(compile(src, f"<cell {i}: {cell.grade_id}>", "exec"), ns)
        except Exception as exc:  # recorded, like an error output in the notebook
            error = exc
        if cell.grade:
            results[cell.grade_id] = CellResult(cell.grade_id, cell.points, error)
            if cell.grade_id == only_test:
                break
    return results


def solution_namespace(cells: list[Cell]) -> dict:
    """The names a notebook defines: every code cell run in order except the test cells."""
    ns: dict = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        if cell.kind == "code" and not (cell.grade and not cell.solution):
            exec(compile(cell.source, f"<cell {i}: {cell.grade_id}>", "exec"), ns)
    return ns
