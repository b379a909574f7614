"""Helpers for tests that read assignment notebooks and run their cells in-process, and for those that build the
book (a kernel tripwire).

Reading a notebook's cells is :mod:`grader.notebook`'s (re-exported here for the tests).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.notebook import HIDDEN, Cell, hidden_part, read_cells

__all__ = ["HIDDEN", "ROOT", "Cell", "CellResult", "assignments", "hidden_part", "kernel_tripwire",
           "make_book_environment", "notebooks", "read_cells", "run_cells", "solution_namespace"]

ROOT = Path(__file__).resolve().parents[1]


def assignments() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def notebooks(assignment: str, where: str = "solutions") -> list[Path]:
    return sorted((ROOT / where / assignment).glob("*.ipynb"))


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
    """Execute the code cells in order in one namespace, as a kernel would (Check your work and the long
    cells, tagged as nbval leaves them out, aside).

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
        if cell.kind != "code" or cell.is_check or cell.is_long or (only_test and cell.grade and
                                                                    cell.grade_id != only_test):
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
    """The names a notebook defines: every code cell run in order except the test cells and Check your work."""
    ns: dict = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        if cell.kind == "code" and not (cell.is_test or cell.is_check or cell.is_long):
            exec(compile(cell.source, f"<cell {i}: {cell.grade_id}>", "exec"), ns)
    return ns


# --------------------------------------------------------------------------
# Building the book
# --------------------------------------------------------------------------
#: the kernel a notebook names when it names none (jupyter_client's default), and what the tripwire answers to
DEFAULT_KERNEL = "python3"
#: what a tripwire kernel runs: it appends its name to the log and exits with a failure
TRIPWIRE = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10)); sys.exit(1)"


def kernel_tripwire(folder: Path, log: Path) -> str:
    """A ``JUPYTER_PATH`` entry (returned) under which every kernel the book's notebooks name is a tripwire.

    Jupyter finds a kernel by its name in the folders of ``JUPYTER_PATH`` first; there, each name a chapter or
    exercise notebook gives (and ``python3``) starts a process that appends the name to ``log`` and exits 1,
    so a build that executes a notebook fails, and the log says which kernels it started.
    """
    names = {DEFAULT_KERNEL}
    for nb in [*ROOT.glob("chapters/*/*.ipynb"), *ROOT.glob("exercises/*/*.ipynb")]:
        names.add(json.loads(nb.read_text(encoding="utf-8"))["metadata"].get("kernelspec", {}).get("name")
                  or DEFAULT_KERNEL)
    for name in sorted(names):
        spec = folder / "kernels" / name
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-S", "-c", TRIPWIRE, str(log), name, "{connection_file}"],
            "display_name": f"tripwire ({name})", "language": "python"}), encoding="utf-8")
    return str(folder)


def make_book_environment(tripwire: str) -> dict[str, str]:
    """The environment `make book` runs in for the suite: a reader's (no EXECUTE, no outer make's flags), with
    the kernel tripwire first on ``JUPYTER_PATH``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("EXECUTE", "COURSE_BOOK_EXECUTE", "BOOK_OUT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (tripwire, os.environ.get("JUPYTER_PATH")) if p)
    return env


#: the number of examples each fuzzer draws: small in `make test`, as many as `make fuzz FUZZ_EXAMPLES=N` asks
FUZZ_EXAMPLES = "FUZZ_EXAMPLES"


def fuzz_settings(in_the_suite: int):
    """hypothesis's settings for a fuzzer: ``in_the_suite`` examples in `make test`, ``FUZZ_EXAMPLES`` under
    `make fuzz`; no deadline (a grading run takes seconds); a failure prints the blob that replays it
    (``@reproduce_failure``), and `make fuzz FUZZ_SEED=N` replays a whole run."""
    from hypothesis import HealthCheck, settings

    examples = int(os.environ.get(FUZZ_EXAMPLES, "").strip() or in_the_suite)
    return settings(max_examples=examples, deadline=None, print_blob=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
