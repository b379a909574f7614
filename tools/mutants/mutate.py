"""Mutants of a solution cell: each change of :mod:`tools.mutants.operators`, applied to the code between the
solution markers, kept when it parses into the tree the change meant and differs from every other mutant."""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from grader.notebook import Cell, import_statements

from .operators import MODULE_NAMES, proposals

SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION", re.S | re.M)


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
    for node in nodes:
        if not hasattr(node, "lineno") or node.end_lineno is None:
            continue
        if not any(a <= node.lineno and node.end_lineno <= b for a, b in regions):
            continue
        for kind, new in proposals(node, parents[id(node)], funcs[id(node)], modules):
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
        end_char = (_char_offset(lines, node.end_lineno, node.end_col_offset)
                    - sum(len(x) for x in lines[: node.end_lineno - 1]))
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


def notebook_modules(cells: list[Cell]) -> set[str]:
    """Names bound by imports anywhere in the notebook (treated as modules, not values)."""
    names = set()
    for n in import_statements(cells):
        if isinstance(n, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        else:
            names.update(a.asname or a.name for a in n.names if a.name[:1].islower() and "_" not in a.name)
    return names
