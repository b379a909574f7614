"""How long a learner waits for Check your work: the first time in a fresh kernel, and again.

    python benchmarks/check_your_work.py [--assignment 02-attention ...] [--learner solved|release|unscaled]

For each assignment a fresh Jupyter kernel runs the release notebook from the top, as a learner does
after writing it: the set-up cell, each exercise with its code (``solved``: the solution's; ``release``:
the untouched stub; ``unscaled``: 02-attention's catalogued attention_scores without its scale, the
others solved), each visible test cell, then the Check your work cell, twice. The first check pays for
what the kernel has not loaded yet (the grader, the assignment's cases and reference); the second is
what a learner waits for after editing one function. Prints both times per assignment and the
machine's load average (1 minute) after each: on a shared machine, quote the times with their load.
"""

from __future__ import annotations

import argparse
import os
import runpy
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from grader.notebook import CHECK_CELL, grade_id, metadata

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
LEARNERS = ("solved", "release", "unscaled")


def learner_notebook(assignment: str, learner: str) -> tuple[nbformat.NotebookNode, int]:
    """The release notebook as the learner ran it, with the check cell repeated; the first check's index."""
    (release,) = sorted((ROOT / "exercises" / assignment).glob("*.ipynb"))
    nb = nbformat.read(release, as_version=4)
    solution = nbformat.read(ROOT / "solutions" / assignment / release.name, as_version=4)
    code = {grade_id(c): c.source for c in solution.cells if metadata(c).get("solution")}
    if learner == "unscaled" and assignment == "02-attention":
        wrong = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{assignment}.py"))["WRONG"]
        code["attention_scores"] = next(e["source"] for e in wrong if "not scaled:" in e["diagnosis"])
    for cell in nb.cells:
        if metadata(cell).get("solution") and learner != "release":
            cell.source = code[grade_id(cell)]
    check = next(i for i, c in enumerate(nb.cells) if grade_id(c) == CHECK_CELL and c.cell_type == "code")
    nb.cells.insert(check + 1, nbformat.v4.new_code_cell(nb.cells[check].source))
    return nb, check


def time_checks(assignment: str, learner: str) -> tuple[float, float, str]:
    """(first check, second check) in seconds, in a fresh kernel; and the first check's output."""
    nb, check = learner_notebook(assignment, learner)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT)}})
    times = {}
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells[:check + 2]):
            if cell.cell_type == "code":
                start = time.perf_counter()
                client.execute_cell(cell, i)
                times[i] = time.perf_counter() - start
    shown = "".join(o.get("text", "") for o in nb.cells[check].outputs)
    errors = [o for o in nb.cells[check].outputs if o.get("output_type") == "error"]
    if errors or "Check your work" not in shown:
        raise SystemExit(f"{assignment}: the check cell did not report: {errors or shown!r}")
    return times[check], times[check + 1], shown


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", action="append", choices=ASSIGNMENTS,
                        help="an assignment's slug (repeatable; default: all)")
    parser.add_argument("--learner", choices=LEARNERS, default="solved", help="what the exercise cells hold")
    parser.add_argument("--show", action="store_true", help="print each first check's output")
    args = parser.parse_args(argv)
    print(f"Check your work in a fresh kernel, {args.learner} exercises, {os.cpu_count()} CPUs")
    print(f"{'assignment':<26}{'first':>8}{'again':>8}{'load':>7}")
    for assignment in args.assignment or ASSIGNMENTS:
        first, again, shown = time_checks(assignment, args.learner)
        load = os.getloadavg()[0]
        print(f"{assignment:<26}{first:>7.2f}s{again:>7.2f}s{load:>7.2f}")
        if args.show:
            print(shown)


if __name__ == "__main__":
    main()
