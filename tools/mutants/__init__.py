"""`make mutants`: mutation testing of the assignments' tests.

    python -m tools.mutants [--assignment SLUG ...] [--exercise NAME ...] [--jobs N]
                            [--max-per-exercise N] [--timeout SECONDS] [--report PATH]

For every exercise of every assignment of the registry (:mod:`grader.registry`)
the tool makes small changes ("mutants") to the reference code between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` of the exercise's solution
cell in ``solutions/``: a swapped operator, a flipped comparison, a changed
constant or axis, a dropped scale, a skipped call, swapped arguments, a
swapped reduction, a deleted statement, an input returned unchanged... Each
mutant is run like the notebook would be (the cells up to and including the
exercise's test cell, the hidden tests included) in a worker process of its
own namespace, with a time limit. A mutant is *killed* when the exercise's
test cell fails (or when it runs past the time limit); otherwise it
*survives*.

Some mutants cannot be told apart from the reference by any test (they
compute the same thing); they are listed, with the reason, in
``tools/mutants_equivalent.toml`` and excluded from the kill rate::

    kill rate = killed / (mutants - equivalent)

One module per concern:

* :mod:`tools.mutants.operators`: the small changes, node by node;
* :mod:`tools.mutants.mutate`: a solution cell's mutants;
* :mod:`tools.mutants.equivalents`: the mutants listed as equivalent;
* :mod:`tools.mutants.workers`: running a mutant in a worker process, with a time limit;
* :mod:`tools.mutants.run`: the registry's exercises in their notebooks, and a run over them;
* :mod:`tools.mutants.report`: the scores, as JSON and as a table;
* :mod:`tools.mutants.cli`: the command line.
"""

from __future__ import annotations

from .cli import DEFAULT_REPORT, main
from .equivalents import EQUIVALENT_FILE, Equivalent, find_equivalent, load_equivalents, same_lines
from .mutate import SOLUTION_REGION, Mutant, generate_mutants, notebook_modules
from .report import TARGET, ExerciseResult, build_report, format_report
from .run import ROOT, ExerciseCells, exercise_cells, mutants_of, run

__all__ = [
    "DEFAULT_REPORT", "EQUIVALENT_FILE", "ROOT", "SOLUTION_REGION", "TARGET", "Equivalent", "ExerciseCells",
    "ExerciseResult", "Mutant", "build_report", "exercise_cells", "find_equivalent", "format_report",
    "generate_mutants", "load_equivalents", "main", "mutants_of", "notebook_modules", "run", "same_lines",
]
