"""What the report reads: every code cell a learner wrote or changed, the release's and the reference's code.

A learner's notebook (``submitted/<student>/<assignment>/<notebook>``) is read
as hostile input: a link is never followed (the notebook, the student's and
the assignment's folder must be what they say, not links to another learner's
work or to the instructor's files), a file that is not a regular file or is
larger than :data:`MAX_NOTEBOOK_BYTES` is not opened, and nothing in it runs.

Every code cell counts except the test cells and "Check your work" (the
course's own, locked): the solution cells, and any cell the learner added,
where a function may have been moved or a helper defined. The cells are one
program (:class:`~classroom.similarity.normalise.Program`), read in order: the
last definition of a name wins, as when the notebook runs top to bottom.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from classroom.similarity.ir import Node
from classroom.similarity.normalise import ExerciseGraph, TooLarge, exercise_graph
from classroom.similarity.program import Program
from grader.notebook import cells_of, learner_code

#: a notebook larger than this is not read (the course's largest submitted notebook is far below 1 MB)
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
#: an IPython line the Python parser does not read (a magic, a shell escape, a help request)
IPYTHON_LINE = re.compile(r"^\s*(%|!|\?)|\?\s*$")


class NotebookError(ValueError):
    """A submission that cannot be read: its message says why (the file is named by the caller)."""


def read_notebook(path: Path) -> dict:
    """A notebook file's JSON, read without following a link and only if it is a regular file of sane size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        reason = "a link (links are never followed)" if os.path.islink(path) else exc.strerror
        raise NotebookError(f"not read: {reason}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError("not read: not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"not read: {info.st_size} bytes, more than the {MAX_NOTEBOOK_BYTES} a notebook "
                                "may have")
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
            raise TypeError("no list of cells")
        return raw
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError, RecursionError) as exc:
        raise NotebookError(f"not a readable notebook ({type(exc).__name__}: {exc})") from None


def is_real_folder(path: Path) -> bool:
    """A folder that is not a link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def parse_cell(source: str) -> ast.Module | None:
    """A code cell as Python (IPython's own lines blanked, so line numbers hold); None if it does not parse."""
    lines = ["" if IPYTHON_LINE.search(line) else line for line in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@dataclass
class Code:
    """One side's code of one exercise: its graph (None if absent or too large), the source shown on the page
    (the exercise's function and the helpers it reaches, each with its cell), and why it has no graph."""

    graph: ExerciseGraph | None
    shown: list[tuple[int, int, str]] = field(default_factory=list)  # (cell, first line, source)
    problem: str = ""
    origin: str = ""  # for the reference: where this code comes from

    @property
    def roots(self) -> list[Node]:
        return self.graph.roots if self.graph else []

    @property
    def names(self) -> frozenset[str]:
        return self.graph.names if self.graph else frozenset()


@dataclass
class Notebook:
    """A notebook's code cells as one program, with each cell's source (by index) and the cells that do not
    parse."""

    program: Program
    sources: dict[int, str]
    unparsed: list[int]

    def code(self, exercise: str, exercises: frozenset[str], origin: str = "") -> Code:
        if exercise not in self.program.functions:
            return Code(None, problem="not defined", origin=origin)
        try:
            graph = exercise_graph(self.program, exercise, exercises)
        except (TooLarge, RecursionError) as exc:
            return Code(None, problem=f"too large to compare ({exc or 'nested too deeply'})", origin=origin)
        shown = []
        for d in graph.helpers:
            fn = d.fn
            lines = self.sources.get(d.cell, "").split("\n")
            first = fn.lineno - len(getattr(fn, "decorator_list", []) or [])
            shown.append((d.cell, fn.lineno, "\n".join(lines[first - 1:fn.end_lineno])))
        return Code(graph, shown, origin=origin)


def notebook_program(raw: dict, skip: set[str] = frozenset()) -> Notebook:
    """Every code cell of a notebook that is not a test cell or "Check your work", as one program.

    ``skip``: sources (stripped) that are the release's own cells, left unread: a learner who left a given
    cell as it was wrote nothing in it (its imports are still read, as the notebook runs them).
    """
    program = Program()
    sources: dict[int, str] = {}
    unparsed = []
    for index, (source, _) in enumerate(learner_code(cells_of(raw))):
        if not isinstance(source, str):
            continue
        tree = parse_cell(source)
        if tree is None:
            unparsed.append(index)
            continue
        if source.strip() in skip:
            for stmt in tree.body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    program.add(ast.Module([stmt], []), index)
            continue
        sources[index] = source
        program.add(tree, index)
    return Notebook(program, sources, unparsed)


def given_cells(raw: dict) -> set[str]:
    """The release's code cells that are not solution cells (imports, set-up), stripped: a learner did not
    write them."""
    return {c.source.strip() for c in cells_of(raw) if c.kind == "code" and not c.solution}


def reference_functions(exercise) -> list:
    """The course_lib functions the hidden tests compare an exercise against; a grader wrapper is followed to
    the course_lib functions it calls."""
    found = []
    for comparison in exercise.comparisons:
        ref = inspect.unwrap(comparison.reference)
        called = [ref.__globals__.get(name) for name in ref.__code__.co_names]
        called = [f for f in called if inspect.isfunction(f) and f.__module__.startswith("course_lib")]
        for f in ([ref] if ref.__module__.startswith("course_lib") else []) + called:
            if f not in found:
                found.append(f)
    return found


def module_program(module_name: str) -> Notebook:
    """A course_lib module's source as one program (one "cell")."""
    import importlib

    source = inspect.getsource(importlib.import_module(module_name))
    program = Program()
    program.add(ast.parse(source), 0)
    return Notebook(program, {0: source}, [])


class SimilarityError(Exception):
    """A usage error: its message names the value and the rule."""


@dataclass
class ClassCode:
    """One assignment's class: every readable submission's notebook, each exercise's reference sources and
    release, and the submissions skipped (each with why)."""

    slug: str
    exercises: list[str]
    learners: dict[str, Notebook]
    reference: dict[str, list[Code]]
    release: dict[str, Code]
    skipped: list[str] = field(default_factory=list)

    def code(self, learner: str, exercise: str) -> Code:
        return self.learners[learner].code(exercise, frozenset(self.exercises))


def read_class(root: Path, slug: str) -> ClassCode:
    """Read an assignment's submissions, its release and its reference (raises :class:`SimilarityError`)."""
    from grader.registry import assignments

    table = assignments()
    if slug not in table:
        raise SimilarityError(f"unknown assignment {slug!r}: it must be one of {', '.join(sorted(table))}")
    assignment = table[slug]
    names = [e.name for e in assignment.written]  # predictions are values, the same for everyone who is right
    exercises = frozenset(names)
    release_path = root / "exercises" / slug / assignment.notebook
    solution_path = root / "solutions" / slug / assignment.notebook
    try:
        release_raw, solution_raw = read_notebook(release_path), read_notebook(solution_path)
    except NotebookError as exc:
        raise SimilarityError(f"the release {release_path} or its source {solution_path} is unreadable: {exc}; "
                              "`make exercises` writes the release") from None
    release, solution = notebook_program(release_raw), notebook_program(solution_raw)
    given = given_cells(release_raw)
    reference: dict[str, list[Code]] = {}
    for ex in assignment.written:
        sources = [module_program(f.__module__).code(f.__name__, exercises, f"{f.__module__}.{f.__qualname__}")
                   for f in reference_functions(ex)]
        sources.append(solution.code(ex.name, exercises, f"solutions/{slug}/{assignment.notebook}"))
        reference[ex.name] = [s for s in sources if s.graph is not None]

    folder = root / "submitted"
    students = sorted(p.name for p in folder.iterdir() if is_real_folder(p) and is_real_folder(p / slug)) \
        if is_real_folder(folder) else []
    linked = sorted(p.name for p in folder.iterdir() if (p / slug).exists() and p.name not in students) \
        if is_real_folder(folder) else []
    skipped = [f"student {s!r}, submitted/{s}/{slug}: a link (links are never followed)" for s in linked]
    if not students and not skipped:
        raise SimilarityError(f"no submissions of {slug!r}: a submission is {folder}/<student>/{slug}/"
                              f"{assignment.notebook}")
    learners: dict[str, Notebook] = {}
    for student in students:
        path = folder / student / slug / assignment.notebook
        shown = path.relative_to(root)
        if not os.path.lexists(path):
            skipped.append(f"student {student!r}, {shown}: missing (the assignment's notebook is "
                           f"{assignment.notebook})")
            continue
        try:
            learners[student] = notebook_program(read_notebook(path), given)
        except NotebookError as exc:
            skipped.append(f"student {student!r}, {shown}: {exc}")
    return ClassCode(slug, names, learners, reference,
                     {name: release.code(name, exercises) for name in names}, skipped)
