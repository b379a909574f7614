"""A notebook's code at its top level, and what the evaluator asks of its syntax.

:class:`Program` holds every code cell of a learner's notebook as one
program, read top to bottom (the last definition of a name wins, as when the
notebook runs): its functions, its constants, the names its imports bind.
The rest answers questions about a function's syntax: which names a block
assigns, which method changes its receiver, where an in-place change lands.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from classroom.similarity.ir import Node

#: methods that change the object they are called on (the name's value becomes the call's)
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "sort", "reverse", "remove",
                      "pop", "clear"})

#: calls whose only effect is output (never part of a result)
OUTPUT = frozenset({"print", "display", "pprint", "breakpoint"})


@dataclass
class Definition:
    """A function the learner defined at a cell's top level (or a lambda bound to a name there)."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    cell: int
    name: str


@dataclass
class Closure:
    """A function defined inside another (or a lambda), with the values its names had there."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    env: dict
    cell: int
    name: str


@dataclass
class Program:
    """A notebook's top level, every code cell in order: functions, constants and imported names."""

    functions: dict[str, Definition] = field(default_factory=dict)
    constants: dict[str, tuple[ast.expr, int]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)

    def add(self, tree: ast.Module, cell: int) -> None:
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = Definition(stmt, cell, stmt.name)
                self.constants.pop(stmt.name, None)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.modules.update(imported(stmt))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name, value = stmt.targets[0].id, stmt.value
                if isinstance(value, ast.Lambda):
                    self.functions[name] = Definition(value, cell, name)
                elif isinstance(value, ast.Name) and value.id in self.functions:
                    self.functions[name] = self.functions[value.id]
                else:
                    self.functions.pop(name, None)
                    self.constants[name] = (value, cell)


def imported(stmt: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """The names an import statement binds, each to its dotted path (``F`` -> ``torch.nn.functional``)."""
    if isinstance(stmt, ast.Import):
        return {(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0])
                for a in stmt.names}
    if stmt.level or not stmt.module:
        return {}
    return {(a.asname or a.name): f"{stmt.module}.{a.name}" for a in stmt.names if a.name != "*"}


def stored_names(stmts: list[ast.stmt]) -> list[str]:
    """The local names a block assigns or changes in place, in order of first appearance (nested functions
    and comprehensions have their own scopes)."""
    found: list[str] = []

    def root(t: ast.expr) -> None:
        while isinstance(t, (ast.Subscript, ast.Attribute, ast.Starred)):
            t = t.value
        if isinstance(t, ast.Name):
            if t.id not in found:
                found.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                root(e)

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in found:
                found.append(node.name)
            return
        if isinstance(node, ast.Assign):
            for t in node.targets:
                root(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            root(node.target)
        elif isinstance(node, ast.NamedExpr):
            root(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    root(item.optional_vars)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and mutates(node.value.func.attr):
            root(node.value.func.value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return found


#: ops whose result shares its first operand's memory: changing it in place changes the operand
VIEWS = frozenset({"view", "reshape", "transpose", "permute", "expand", "unsqueeze", "squeeze", "flatten", "narrow",
                   "select", "unflatten", "movedim", "diagonal", "t", "detach", "view_as", "as_strided"})


def outside(node: Node) -> bool:
    """A value the function was given (a parameter, an item of something it loops over), or a view of one:
    changing it in place is part of what the function does. A value it made (``torch.zeros_like(x)``) is not."""
    while True:
        if node.op.startswith(("param:", "item")):
            return True
        if node.op in ("carry", "getitem", "setitem") or node.op.startswith(("attr:", "setattr:")):
            node = node.kids[0]
        elif node.op.startswith("call:") and node.op[5:] in VIEWS and node.kids and node.kids[0].op == "arg:self":
            node = node.kids[0].kids[0]
        else:
            return False


def receiver_root(e: ast.expr) -> ast.expr:
    """What an in-place change lands on: ``x`` in ``x[i].mul_(2).add_(1)``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and mutates(e.func.attr):
            e = e.func.value
        elif isinstance(e, (ast.Subscript, ast.Attribute)):
            e = e.value
        else:
            return e


def mutates(method: str) -> bool:
    return method in MUTATORS or (method.endswith("_") and not method.startswith("_"))
