"""`make mutants`: mutation testing of the assignments' tests.

    python -m tools.mutants [--assignment SLUG ...] [--exercise NAME ...] [--jobs N]
                            [--max-per-exercise N] [--timeout SECONDS] [--report PATH]

For every exercise of every assignment under ``solutions/`` the tool makes
small changes ("mutants") to the reference code between ``### BEGIN
SOLUTION`` and ``### END SOLUTION`` of the exercise's solution cell: a
swapped operator, a flipped comparison, a changed constant or axis, a
dropped scale, a skipped call, swapped arguments, a swapped reduction, a
deleted statement, an input returned unchanged... Each mutant is run like the
notebook would be (the cells up to and including the exercise's test cells,
the hidden tests included) in a worker process of its own namespace, with a
time limit. A mutant is *killed* when one of the exercise's test cells fails
(or when it runs past the time limit); otherwise it *survives*.

Some mutants cannot be told apart from the reference by any test (they
compute the same thing); they are listed, with the reason, in
``tools/mutants_equivalent.toml`` and excluded from the kill rate::

    kill rate = killed / (mutants - equivalent)

The tool prints a table per assignment, lists every survivor with its line
diff, writes a JSON report (``--report``, by default
``_build/mutants/report.json``) and exits with status 1 when an assignment's
kill rate is below the target (95 %), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import difflib
import importlib
import json
import multiprocessing
import os
import random
import re
import sys
import time
import tomllib
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "tools" / "mutants_equivalent.toml"
DEFAULT_REPORT = ROOT / "_build" / "mutants" / "report.json"
TARGET = 0.95
SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION", re.S | re.M)

# Names that are modules rather than values: `torch.exp(x)` is not a method call on `torch`.
MODULE_NAMES = {"torch", "math", "F", "nn", "np", "numpy", "re", "collections", "itertools", "functools",
                "random", "heapq", "os", "sys", "json", "string", "operator", "typing", "unicodedata"}

# Binary operators and what each one becomes.
BINOP_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.Div, ast.Add),
    ast.Div: (ast.Mult, ast.FloorDiv),
    ast.FloorDiv: (ast.Div, ast.Mult),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.MatMult: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
}
COMPARE_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
# Reductions and other routines with a plausible twin.
NAME_SWAPS = {
    "sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin", "amin": "amax",
    "argmax": "argmin", "argmin": "argmax", "tril": "triu", "triu": "tril", "maximum": "minimum",
    "minimum": "maximum", "clamp_min": "clamp_max", "clamp_max": "clamp_min", "floor": "ceil", "ceil": "floor",
    "any": "all", "all": "any", "cumsum": "cumprod", "prod": "sum", "exp": "log", "log": "exp",
    "sin": "cos", "cos": "sin", "var": "std", "std": "var", "rsqrt": "sqrt", "sqrt": "rsqrt",
    "topk": "kthvalue", "sorted": "reversed", "append": "extend", "extend": "append",
    "unsqueeze": "squeeze", "repeat_interleave": "repeat",
}


# --------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------
@dataclass
class NbCell:
    index: int
    kind: str
    source: str
    grade_id: str | None
    solution: bool
    grade: bool


@dataclass
class Exercise:
    assignment: str
    notebook: Path
    name: str  # the solution cell's grade_id
    solution_index: int
    test_ids: list[str]
    last_index: int  # the last test cell of the exercise


def read_notebook(path: Path) -> list[NbCell]:
    data = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for i, c in enumerate(data["cells"]):
        meta = c.get("metadata", {}).get("nbgrader", {})
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        cells.append(NbCell(i, c["cell_type"], src, meta.get("grade_id"), bool(meta.get("solution")), bool(meta.get("grade"))))
    return cells


def find_exercises(assignment: str, root: Path = ROOT) -> list[Exercise]:
    """The exercises of an assignment: a code solution cell and the graded cells after it, up to the next one."""
    out: list[Exercise] = []
    for nb in sorted((root / "solutions" / assignment).glob("*.ipynb")):
        cells = read_notebook(nb)
        current: Exercise | None = None
        for c in cells:
            if c.kind != "code":
                continue
            if c.solution and not c.grade:
                if current and current.test_ids:
                    out.append(current)
                current = Exercise(assignment, nb, c.grade_id or f"cell{c.index}", c.index, [], c.index) \
                    if SOLUTION_REGION.search(c.source) else None
            elif c.grade and current is not None:
                current.test_ids.append(c.grade_id)
                current.last_index = c.index
        if current and current.test_ids:
            out.append(current)
    return out


# --------------------------------------------------------------------------
# Mutants
# --------------------------------------------------------------------------
@dataclass
class Mutant:
    kind: str
    line: int  # line in the cell
    source: str  # the whole mutated cell
    before: str  # the changed lines of the reference, stripped (with lines above them when ambiguous)
    after: str  # the same lines in the mutant, stripped (with the same lines above them)
    diff: str = ""
    first: int = 0  # index of the first changed line in the cell

    def key(self) -> tuple[str, str]:
        return (self.before, self.after)


def _regions(source: str) -> list[tuple[int, int]]:
    """1-based line ranges (inclusive) of the code between the solution markers."""
    ranges = []
    for m in SOLUTION_REGION.finditer(source):
        first = source.count("\n", 0, m.start(1)) + 1
        last = first + m.group(1).count("\n") - 1
        if last >= first:
            ranges.append((first, last))
    return ranges


def _char_offset(lines: list[str], lineno: int, col_bytes: int) -> int:
    line = lines[lineno - 1]
    col = len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))
    return sum(len(x) for x in lines[: lineno - 1]) + col


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _int_node(v: int) -> ast.expr:
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _float_value(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is float:
        return -node.operand.value
    return None


def _float_node(v: float) -> ast.expr:
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _params(func: ast.AST | None) -> list[str]:
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return []
    a = func.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n not in ("self", "cls")]


def _proposals(node: ast.AST, parent: ast.AST | None, func: ast.AST | None, modules: set[str]):
    """(kind, replacement node) pairs for one node; a replacement of None deletes a statement."""
    c = copy.deepcopy
    # Arithmetic: swapped operator, dropped operand (a dropped scale, term or factor).
    if isinstance(node, ast.BinOp):
        for op in BINOP_SWAPS.get(type(node.op), ()):
            yield "operator", ast.BinOp(c(node.left), op(), c(node.right))
        if isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Add, ast.Sub, ast.Pow)):
            yield "drop-operand", c(node.left)
        if isinstance(node.op, (ast.Mult, ast.Add)):
            yield "drop-operand", c(node.right)
    if isinstance(node, ast.AugAssign):
        for op in BINOP_SWAPS.get(type(node.op), ()):
            yield "operator", ast.AugAssign(c(node.target), op(), c(node.value))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in COMPARE_SWAPS.get(type(op), ()):
                ops = [c(o) for o in node.ops]
                ops[i] = new()
                yield "comparison", ast.Compare(c(node.left), ops, [c(x) for x in node.comparators])
    if isinstance(node, ast.BoolOp):
        yield "boolean", ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), [c(v) for v in node.values])
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            yield "not-removal", c(node.operand)
        elif isinstance(node.op, ast.Invert):
            yield "not-removal", c(node.operand)
        elif isinstance(node.op, ast.USub) and _int_value(node) is None and _float_value(node) is None:
            yield "unary-minus", c(node.operand)
    # A condition negated (if, while, conditional expression, comprehension filter).
    if isinstance(node, ast.expr) and (
            (isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node)
            or (isinstance(parent, ast.comprehension) and node in parent.ifs)):
        if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            yield "negate-condition", ast.UnaryOp(ast.Not(), c(node))
    # Constants.
    if isinstance(node, ast.Constant) and node.value in ("-inf", "inf"):
        yield "constant", ast.Constant("inf" if node.value == "-inf" else "-inf")
    v = _int_value(node)
    if v is not None and not (isinstance(node, ast.Constant) and isinstance(parent, ast.UnaryOp)):
        news = {0: [1], 1: [0]}.get(v, []) + [v + 1, v - 1] + ([-v] if v else [])
        for n in dict.fromkeys(news):
            if n != v:
                yield "constant", _int_node(n)
    f = _float_value(node)
    if f is not None and not (isinstance(node, ast.Constant) and isinstance(parent, ast.UnaryOp)):
        for n in dict.fromkeys([f * 2, f / 2, 0.0] if f else [1.0]):
            if n != f:
                yield "constant", _float_node(n)
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "boolean-constant", ast.Constant(not node.value)
    # Calls.
    if isinstance(node, ast.Call):
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        starred = len(positional) != len(node.args)
        if len(node.args) == 1 and not starred:
            yield "skip-call", c(node.args[0])
        if isinstance(node.func, ast.Attribute) and not (isinstance(node.func.value, ast.Name) and node.func.value.id in modules):
            yield "skip-call", c(node.func.value)
        if len(node.args) == 2 and not starred:
            yield "swap-arguments", ast.Call(c(node.func), [c(node.args[1]), c(node.args[0])], [c(k) for k in node.keywords])
        for i, kw in enumerate(node.keywords):
            if kw.arg is None:
                continue
            rest = [c(k) for j, k in enumerate(node.keywords) if j != i]
            yield "drop-keyword", ast.Call(c(node.func), [c(a) for a in node.args], rest)
            if not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                kws = [c(k) for k in node.keywords]
                kws[i] = ast.keyword(kw.arg, ast.Constant(None))
                yield "none-for-default", ast.Call(c(node.func), [c(a) for a in node.args], kws)
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
        stop = 1 if len(node.args) >= 2 else 0
        if name in ("range", "arange") and node.args and not starred and _int_value(node.args[stop]) is None:
            for op in (ast.Add, ast.Sub):  # the end off by one (a constant end is changed as a constant)
                args = [c(a) for a in node.args]
                args[stop] = ast.BinOp(args[stop], op(), ast.Constant(1))
                yield "off-by-one", ast.Call(c(fn), args, [c(k) for k in node.keywords])
        if name in NAME_SWAPS:
            new_func = ast.Attribute(c(fn.value), NAME_SWAPS[name], ast.Load()) if isinstance(fn, ast.Attribute) \
                else ast.Name(NAME_SWAPS[name], ast.Load())
            yield "swap-routine", ast.Call(new_func, [c(a) for a in node.args], [c(k) for k in node.keywords])
    # Slices.
    if isinstance(node, ast.Slice):
        lo, up, st = node.lower, node.upper, node.step
        if lo is not None and up is None:
            lv = _int_value(lo)
            yield "slice", ast.Slice(None, _int_node(-lv) if lv else c(lo), c(st) if st else None)
        if up is not None and lo is None:
            uv = _int_value(up)
            yield "slice", ast.Slice(_int_node(-uv) if uv and uv < 0 else c(up), None, c(st) if st else None)
        if lo is not None and up is not None:
            yield "slice", ast.Slice(None, c(up), c(st) if st else None)
            yield "slice", ast.Slice(c(lo), None, c(st) if st else None)
        if st is not None:
            yield "slice", ast.Slice(c(lo) if lo else None, c(up) if up else None, None)
    # Statements: deletion, returning an input, negation of a computed value.
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Break, ast.Continue)) or (
            isinstance(node, ast.Expr) and not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))):
        yield "delete-statement", None
    if isinstance(node, ast.Return) and node.value is not None:
        for p in _params(func):
            yield "return-input", ast.Return(ast.Name(p, ast.Load()))
        yield "unary-minus", ast.Return(ast.UnaryOp(ast.USub(), c(node.value)))
    if isinstance(node, ast.Assign):
        yield "unary-minus", ast.Assign([c(t) for t in node.targets], ast.UnaryOp(ast.USub(), c(node.value)))


def _dump_with(tree: ast.AST, parent: ast.AST, target: ast.AST, new: ast.AST | None) -> str:
    """ast.dump of tree with target (a child of parent) replaced by new (None: a statement becomes `pass`)."""
    replacement = ast.Pass() if new is None else new
    for fname, value in ast.iter_fields(parent):
        if value is target:
            setattr(parent, fname, replacement)
            try:
                return ast.dump(tree)
            finally:
                setattr(parent, fname, target)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is target:
                    value[i] = replacement
                    try:
                        return ast.dump(tree)
                    finally:
                        value[i] = target
    raise ValueError("target is not a child of parent")


def generate_mutants(source: str, modules: set[str] | None = None) -> list[Mutant]:
    """Every mutant of the code between the solution markers of one cell (deduplicated)."""
    modules = MODULE_NAMES | (modules or set())
    regions = _regions(source)
    if not regions:
        return []
    tree = ast.parse(source)
    original_dump = ast.dump(tree)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    text = "".join(lines)
    nodes = list(ast.walk(tree))
    parents: dict[int, ast.AST] = {}
    funcs: dict[int, ast.AST] = {}

    def visit(n, parent, func):
        parents[id(n)] = parent
        funcs[id(n)] = func
        inner = n if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else func
        for child in ast.iter_child_nodes(n):
            visit(child, n, inner)

    visit(tree, None, None)
    seen = {original_dump}
    mutants: list[Mutant] = []
    for index, node in enumerate(nodes):
        if not hasattr(node, "lineno") or node.end_lineno is None:
            continue
        if not any(a <= node.lineno and node.end_lineno <= b for a, b in regions):
            continue
        for kind, new in _proposals(node, parents[id(node)], funcs[id(node)], modules):
            if new is not None:
                ast.fix_missing_locations(ast.copy_location(new, node))
            expected = _dump_with(tree, parents[id(node)], node, new)
            if expected in seen:
                continue
            source_out = _render(text, lines, node, new, expected)
            if source_out is None:
                continue
            seen.add(expected)
            mutants.append(_describe(kind, node.lineno, text, source_out))
    _disambiguate(mutants, text)
    return mutants


def _render(text: str, lines: list[str], node: ast.AST, new: ast.AST | None, expected: str) -> str | None:
    """The mutated cell source: the node's text replaced, checked to parse into the expected tree."""
    if isinstance(node, ast.stmt):
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        end_char = _char_offset(lines, node.end_lineno, node.end_col_offset) - sum(len(x) for x in lines[: node.end_lineno - 1])
        if first[: len(indent)] != indent or len(first.encode()) - len(first.lstrip().encode()) != node.col_offset:
            return None
        if last[end_char:].strip() and not last[end_char:].strip().startswith("#"):
            return None  # another statement on the same line
        body = "pass" if new is None else ast.unparse(new)
        replacement = "".join(indent + row + "\n" for row in body.splitlines())
        candidates = [replacement]
        start = sum(len(x) for x in lines[: node.lineno - 1])
        end = sum(len(x) for x in lines[: node.end_lineno])
    else:
        body = ast.unparse(new)
        candidates = [body, f"({body})"]
        start = _char_offset(lines, node.lineno, node.col_offset)
        end = _char_offset(lines, node.end_lineno, node.end_col_offset)
    for cand in candidates:
        out = text[:start] + cand + text[end:]
        try:
            if ast.dump(ast.parse(out)) == expected:
                return out
        except SyntaxError:
            continue
    return None


def _describe(kind: str, line: int, before: str, after: str) -> Mutant:
    a, b = before.splitlines(), after.splitlines()
    removed, added, first = [], [], None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            first = i1 if first is None else first
            removed += a[i1:i2]
            added += b[j1:j2]
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0, lineterm="\n"))
    diff = "\n".join(row for row in diff.splitlines() if not row.startswith(("---", "+++")))
    return Mutant(kind, line, after, "\n".join(r.strip() for r in removed), "\n".join(r.strip() for r in added), diff,
                  first or 0)


def _disambiguate(mutants: list[Mutant], original: str) -> None:
    """Give mutants that would share a key (the same change on two identical lines) the lines above the change."""
    lines = [row.strip() for row in original.splitlines()]
    changed = {id(m): (m.before, m.after) for m in mutants}
    for context in range(1, 6):
        counts: dict[tuple[str, str], int] = {}
        for m in mutants:
            counts[m.key()] = counts.get(m.key(), 0) + 1
        clashing = [m for m in mutants if counts[m.key()] > 1]
        if not clashing:
            return
        for m in clashing:
            above = lines[max(0, m.first - context): m.first]
            before, after = changed[id(m)]
            m.before, m.after = "\n".join(above + [before]), "\n".join(above + [after])


def notebook_modules(cells: list[NbCell]) -> set[str]:
    """Names bound by imports anywhere in the notebook (treated as modules, not values)."""
    names = set()
    for c in cells:
        if c.kind != "code":
            continue
        try:
            tree = ast.parse(c.source)
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.ImportFrom):
                names.update(a.asname or a.name for a in n.names if a.name[:1].islower() and "_" not in a.name)
    return names


# --------------------------------------------------------------------------
# Equivalent mutants
# --------------------------------------------------------------------------
@dataclass
class Equivalent:
    assignment: str
    exercise: str
    before: str
    after: str
    reason: str
    used: bool = False


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, e in enumerate(data.get("equivalent", [])):
        missing = {"assignment", "exercise", "before", "after", "reason"} - set(e)
        if missing:
            raise ValueError(f"{path}: entry {i + 1} lacks {sorted(missing)}")
        if not e["reason"].strip():
            raise ValueError(f"{path}: entry {i + 1} gives no reason")
        out.append(Equivalent(e["assignment"], e["exercise"], e["before"].strip(), e["after"].strip(), e["reason"].strip()))
    return out


def _norm(s: str) -> str:
    return "\n".join(row.strip() for row in s.strip().splitlines())


def find_equivalent(equivalents: list[Equivalent], assignment: str, exercise: str, m: Mutant) -> Equivalent | None:
    for e in equivalents:
        if (e.assignment, e.exercise) == (assignment, exercise) and _norm(e.before) == _norm(m.before) \
                and _norm(e.after) == _norm(m.after):
            return e
    return None


# --------------------------------------------------------------------------
# Running mutants in worker processes
# --------------------------------------------------------------------------
def run_exercise_cells(cells: list[NbCell], exercise_index: int, replacement: str, test_ids: list[str],
                       last_index: int) -> tuple[bool, str]:
    """Run the notebook up to the exercise's last test cell with the solution cell replaced.

    Test cells of other exercises are skipped; errors elsewhere are ignored
    (as nbgrader's allow_errors would). Returns (passed, message of the first failure).
    """
    ns: dict = {"__name__": "__main__"}
    for c in cells:
        if c.index > last_index:
            break
        if c.kind != "code" or (c.grade and c.grade_id not in test_ids):
            continue
        src = replacement if c.index == exercise_index else c.source
        try:
            exec(compile(src, f"<cell {c.index}: {c.grade_id}>", "exec"), ns)
        except BaseException as exc:  # noqa: BLE001 - a mutant may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            if c.grade and c.grade_id in test_ids:
                return False, f"{c.grade_id}: {type(exc).__name__}: {str(exc)[:300]}"
    return True, ""


def notebook_imports(cells: list[NbCell]) -> set[str]:
    """The top-level packages the notebook's code cells import (a worker imports them before its first job)."""
    names = set()
    for c in cells:
        if c.kind != "code":
            continue
        try:
            tree = ast.parse(c.source)
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                names.update(a.name.split(".")[0] for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                names.add(n.module.split(".")[0])
    return names


def _worker(conn, root: str, preload: list[str]) -> None:  # pragma: no cover - runs in a child process
    os.chdir(root)
    sys.path.insert(0, root)
    warnings.simplefilter("ignore")  # thousands of mutants: their deprecation warnings are noise here
    for name in preload:  # the slow imports (torch) happen before the clock of the first mutant starts
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the notebook's own cell will report it
            pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)  # the workers share the cores: one thread each
    cache: dict[str, list[NbCell]] = {}
    conn.send("ready")  # the time limit counts from here, not from the (slow) import of torch
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        job_id, notebook, exercise_index, source, test_ids, last_index = job
        if notebook not in cache:
            cache[notebook] = read_notebook(Path(notebook))
        cells = cache[notebook]
        t0 = time.perf_counter()
        try:
            passed, message = run_exercise_cells(cells, exercise_index, source, test_ids, last_index)
        except BaseException as exc:  # noqa: BLE001
            passed, message = False, f"{type(exc).__name__}: {exc}"
        conn.send((job_id, passed, message, time.perf_counter() - t0))


class Pool:
    """Worker processes that each run one job at a time; a job past the timeout kills its worker."""

    def __init__(self, jobs: int, timeout: float, root: Path = ROOT, preload: Iterable[str] = ()):
        self.ctx = multiprocessing.get_context("spawn")
        self.jobs, self.timeout, self.root = max(1, jobs), timeout, root
        self.preload = sorted(preload)
        self.workers: list[list] = []  # [process, connection, job or None, start time]

    def _start(self):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, str(self.root), self.preload), daemon=True)
        p.start()
        child.close()
        return [p, parent, "starting", 0.0]

    def run(self, jobs: list[tuple], on_result) -> None:
        """jobs: (job_id, notebook, exercise_index, source, test_ids, last_index); on_result(job_id, status, message, seconds)."""
        queue = list(reversed(jobs))
        while len(self.workers) < min(self.jobs, max(1, len(jobs))):
            self.workers.append(self._start())
        busy = 0
        while queue or busy:
            for w in self.workers:
                if w[2] is None and queue:
                    job = queue.pop()
                    w[1].send(job)
                    w[2], w[3] = job, time.monotonic()
                    busy += 1
            conns = [w[1] for w in self.workers if w[2] is not None]
            ready = wait(conns, timeout=0.2)
            now = time.monotonic()
            for i, w in enumerate(self.workers):
                if w[2] is None:
                    continue
                if w[2] == "starting":
                    if w[1] in ready:
                        try:
                            w[1].recv()
                            w[2] = None
                        except (EOFError, OSError):
                            raise RuntimeError("a mutant worker process failed to start") from None
                    continue
                if w[1] in ready:
                    try:
                        job_id, passed, message, seconds = w[1].recv()
                        on_result(job_id, "survived" if passed else "killed", message, seconds)
                    except (EOFError, OSError):  # the worker died (a crash counts as a kill)
                        on_result(w[2][0], "killed", "the worker process died", now - w[3])
                        self._replace(i)
                        busy -= 1
                        continue
                    w[2] = None
                    busy -= 1
                elif now - w[3] > self.timeout:
                    on_result(w[2][0], "timeout", f"ran past {self.timeout:g} s", now - w[3])
                    self._replace(i)
                    busy -= 1

    def _replace(self, i: int) -> None:
        p = self.workers[i][0]
        p.kill()
        p.join(5)
        self.workers[i] = self._start()

    def close(self) -> None:
        for p, conn, _, _ in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for p, conn, _, _ in self.workers:
            p.join(5)
            if p.is_alive():
                p.kill()
        self.workers = []


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------
@dataclass
class ExerciseResult:
    assignment: str
    exercise: str
    baseline: str = "passed"
    mutants: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(m["status"] == status for m in self.mutants)

    @property
    def total(self) -> int:
        return len(self.mutants)

    @property
    def killed(self) -> int:
        return self.count("killed") + self.count("timeout")

    @property
    def equivalent(self) -> int:
        return self.count("equivalent")

    @property
    def survived(self) -> int:
        return self.count("survived")

    @property
    def kill_rate(self) -> float:
        scored = self.total - self.equivalent
        return self.killed / scored if scored else 1.0

    def summary(self) -> dict:
        return {"exercise": self.exercise, "baseline": self.baseline, "mutants": self.total, "killed": self.killed,
                "timeouts": self.count("timeout"), "equivalent": self.equivalent, "survived": self.survived,
                "kill_rate": round(self.kill_rate, 4), "seconds": round(self.seconds, 1),
                "survivors": [m for m in self.mutants if m["status"] == "survived"],
                "equivalents": [m for m in self.mutants if m["status"] == "equivalent"],
                "all": self.mutants}


def run(assignments: list[str], exercises: list[str] | None = None, jobs: int | None = None,
        max_per_exercise: int | None = None, timeout: float = 20.0, root: Path = ROOT,
        equivalents: list[Equivalent] | None = None, log=print) -> dict:
    """Mutate and test; return the report (a dict, as written to JSON)."""
    equivalents = load_equivalents() if equivalents is None else equivalents
    results: dict[str, ExerciseResult] = {}
    all_jobs: list[tuple] = []
    preload: set[str] = set()
    meta: dict[int, tuple[str, dict]] = {}
    for a in assignments:
        for ex in find_exercises(a, root):
            if exercises and ex.name not in exercises:
                continue
            cells = read_notebook(ex.notebook)
            preload |= notebook_imports(cells)
            sol = cells[ex.solution_index].source
            mutants = generate_mutants(sol, notebook_modules(cells))
            if max_per_exercise is not None and len(mutants) > max_per_exercise:
                picked = sorted(random.Random(f"{a}/{ex.name}").sample(range(len(mutants)), max_per_exercise))
                mutants = [mutants[i] for i in picked]
            key = f"{a}/{ex.name}"
            res = results[key] = ExerciseResult(a, ex.name)
            base_id = len(all_jobs)
            all_jobs.append((base_id, str(ex.notebook), ex.solution_index, sol, ex.test_ids, ex.last_index))
            meta[base_id] = (key, {"baseline": True})
            for m in mutants:
                record = {"kind": m.kind, "line": m.line, "before": m.before, "after": m.after, "diff": m.diff}
                eq = find_equivalent(equivalents, a, ex.name, m)
                if eq is not None:
                    eq.used = True
                    record.update(status="equivalent", reason=eq.reason)
                    res.mutants.append(record)
                    continue
                job_id = len(all_jobs)
                all_jobs.append((job_id, str(ex.notebook), ex.solution_index, m.source, ex.test_ids, ex.last_index))
                meta[job_id] = (key, record)
                res.mutants.append(record)
    total = len(all_jobs)
    done = [0]
    t0 = time.monotonic()

    def on_result(job_id, status, message, seconds):
        key, record = meta[job_id]
        res = results[key]
        res.seconds += seconds
        done[0] += 1
        if record.get("baseline"):
            if status != "survived":
                res.baseline = f"FAILED: {message}"
                log(f"  ! the reference fails {key}: {message}")
            return
        record["status"] = status
        record["message"] = message
        if done[0] % 50 == 0 or done[0] == total:
            log(f"  {done[0]}/{total} runs, {time.monotonic() - t0:.0f} s")

    pool = Pool(jobs or os.cpu_count() or 1, timeout, root, preload)
    try:
        pool.run(all_jobs, on_result)
    finally:
        pool.close()
    report: dict = {"target": TARGET, "timeout_s": timeout, "seconds": round(time.monotonic() - t0, 1),
                    "assignments": {}}
    for a in assignments:
        exs = [r for k, r in results.items() if r.assignment == a]
        if not exs:
            continue
        killed = sum(r.killed for r in exs)
        scored = sum(r.total - r.equivalent for r in exs)
        rate = killed / scored if scored else 1.0
        broken = [r.exercise for r in exs if r.baseline != "passed"]
        report["assignments"][a] = {
            "mutants": sum(r.total for r in exs), "killed": killed, "equivalent": sum(r.equivalent for r in exs),
            "survived": sum(r.survived for r in exs), "kill_rate": round(rate, 4),
            "ok": rate >= TARGET and not broken, "reference_fails": broken,
            "exercises": {r.exercise: r.summary() for r in exs},
        }
    stale = [dataclasses.asdict(e) for e in equivalents if not e.used and e.assignment in assignments
             and (not exercises or e.exercise in exercises) and max_per_exercise is None]
    report["stale_equivalents"] = stale
    report["ok"] = all(v["ok"] for v in report["assignments"].values())
    return report


def format_report(report: dict) -> str:
    out = []
    for a, ar in report["assignments"].items():
        out.append(f"\n{a}: kill rate {ar['kill_rate']:.1%} ({ar['killed']} killed of "
                   f"{ar['mutants'] - ar['equivalent']}; {ar['equivalent']} equivalent)"
                   + ("" if ar["ok"] else "  BELOW TARGET" if not ar["reference_fails"] else "  REFERENCE FAILS"))
        out.append(f"  {'exercise':32} {'mutants':>7} {'killed':>7} {'equiv':>6} {'surv':>5} {'rate':>7}")
        for name, e in ar["exercises"].items():
            out.append(f"  {name:32} {e['mutants']:7d} {e['killed']:7d} {e['equivalent']:6d} {e['survived']:5d} "
                       f"{e['kill_rate']:7.1%}" + ("" if e["baseline"] == "passed" else f"  {e['baseline']}"))
        for name, e in ar["exercises"].items():
            for m in e["survivors"]:
                out.append(f"  survivor {name} [{m['kind']}] line {m['line']}:")
                out.extend("      " + row for row in m["diff"].splitlines())
    for e in report.get("stale_equivalents", []):
        out.append(f"\nnote: equivalent entry no longer generated: {e['assignment']} {e['exercise']}: "
                   f"{e['before']!r} -> {e['after']!r}")
    out.append(f"\n{'all assignments reach' if report['ok'] else 'NOT every assignment reaches'} the target of "
               f"{report['target']:.0%} ({report['seconds']:.0f} s)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", action="append", help="an assignment slug (repeatable; default: all)")
    parser.add_argument("--exercise", action="append", help="only this exercise (a solution cell's grade_id; repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: the CPU count)")
    parser.add_argument("--max-per-exercise", type=int, default=None, help="at most this many mutants per exercise")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per mutant before it counts as killed")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="where to write the JSON report")
    args = parser.parse_args(argv)
    known = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    chosen = args.assignment or known
    unknown = [a for a in chosen if a not in known]
    if unknown:
        print(f"unknown assignment(s): {unknown}; known: {known}", file=sys.stderr)
        return 2
    if args.jobs < 1 or (args.max_per_exercise is not None and args.max_per_exercise < 0):
        print("--jobs must be at least 1 and --max-per-exercise not negative", file=sys.stderr)
        return 2
    report = run(chosen, args.exercise, args.jobs, args.max_per_exercise, args.timeout)
    if args.exercise and not report["assignments"]:
        print(f"no exercise named {args.exercise} in {chosen}", file=sys.stderr)
        return 2
    print(format_report(report))
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"report: {args.report}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
