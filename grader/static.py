"""What the source of a submission shows, read by the judge before any of it runs.

The guards in the kernel (:mod:`grader.guards`) watch the learner's code while
it runs, in the learner's own process, where code that reaches into Python's
machinery could in principle switch them off. This module is the part of the
check that runs where the learner's code cannot reach: the judge reads the
submission's code cells as text (:mod:`ast`) and finds, per exercise, code that
no exercise needs and that patching needs:

* a module outside :data:`ALLOWED_MODULES` (``sys``, ``gc``, ``inspect``,
  ``ctypes``, ``importlib``, ``threading``, ``operator``, the course's own
  packages...), imported or used in code an exercise runs; at a cell's top
  level, using one of :data:`MACHINERY_MODULES` (``os`` or ``glob`` there is
  the OS fence's business, not a patch);
* the builtins that reach around the language (``setattr``, ``delattr``,
  ``exec``, ``eval``, ``compile``, ``globals``, ``vars``, ``__import__``, and
  ``getattr`` or ``hasattr`` with a name that is not a plain constant);
* dunder attributes (``f.__code__``, ``x.__class__``), private attributes of
  other objects (``torch._C``), and strings that name a dunder or build a
  format template at run time (``"{0.__globals__}".format(f)``);
* torch's escape hatches (``torch.overrides``, ``torch.library``,
  ``torch.ops``, ``torch.jit``, ``torch.load``...);
* assigning to or deleting an attribute of a module (``torch.allclose = ...``);
* the exercise's forbidden routines called by name (``F.softmax``, ``x.softmax(-1)``).

Each finding says where it is and costs the exercises it touches: code inside
a function costs every exercise whose function reaches that function (by the
global names it uses, transitively); code at a cell's top level runs once for
all, so it costs every exercise graded after that cell (there, importing a
module touches nothing by itself; using it does).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterable

#: modules an exercise may import; anything else in code an exercise runs is a finding
ALLOWED_MODULES = frozenset({
    "__future__", "math", "cmath", "numbers", "fractions", "decimal", "random", "statistics", "itertools",
    "functools", "collections", "collections.abc", "heapq", "bisect", "typing", "dataclasses", "enum", "copy",
    "re", "time", "warnings", "pprint", "textwrap", "numpy", "torch", "torch.nn", "torch.nn.functional",
    "torch.nn.init", "einops", "matplotlib", "matplotlib.pyplot",
})
#: modules whose use is a finding even in a scratch cell's top level: they reach Python's machinery
#: (frames, the profiler, threads, other modules' namespaces) or the course's own packages
MACHINERY_MODULES = frozenset({
    "sys", "builtins", "gc", "inspect", "ctypes", "importlib", "imp", "zipimport", "pkgutil", "runpy", "threading",
    "_thread", "concurrent", "multiprocessing", "asyncio", "types", "operator", "weakref", "traceback", "dis",
    "code", "codeop", "pickle", "marshal", "copyreg", "trace", "tracemalloc", "cProfile", "profile", "pdb", "bdb",
    "faulthandler", "site", "sysconfig", "unittest", "IPython", "ipykernel", "jupyter_client", "grader",
    "course_lib", "string",
})
#: builtins that reach around the language: code that needs them patches or hides something
REFLECTIVE_BUILTINS = frozenset({"setattr", "delattr", "exec", "eval", "compile", "globals", "locals", "vars",
                                 "__import__", "__builtins__"})
#: builtins no exercise needs, refused in the code an exercise runs (harmless in a scratch cell)
UNNEEDED_BUILTINS = frozenset({"open", "input", "breakpoint", "memoryview"})
#: torch's escape hatches: its dispatcher, its function modes, its compilers, its own loader, its global settings
TORCH_HATCHES = frozenset({
    "overrides", "library", "ops", "jit", "fx", "export", "compiler", "compile", "utils", "multiprocessing",
    "futures", "hub", "load", "save", "package", "testing", "distributed", "backends", "set_default_dtype",
    "set_default_device", "set_grad_enabled", "use_deterministic_algorithms", "graph",
})
#: the only dunder names code may use: a class calling its parent's constructor, a function's name
ALLOWED_DUNDERS = frozenset({"__init__", "__name__"})
_DUNDER = re.compile(r"__\w+__")


@dataclass
class Finding:
    cell: int
    line: int
    what: str
    everywhere: bool = True  # a finding at a cell's top level too (False: only in code an exercise runs)

    def __str__(self) -> str:
        return f"{self.what} (code cell {self.cell + 1}, line {self.line})"


@dataclass(frozen=True)
class Forbidden:
    """An exercise's forbidden routines by name: module functions (``F.softmax``) and tensor methods (``x.softmax``)."""

    functions: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()

    @classmethod
    def of(cls, routines: Iterable) -> "Forbidden":
        functions, methods = set(), set()
        for r in routines:
            name = getattr(r, "__name__", None)
            if not name:
                continue
            owner = getattr(r, "__objclass__", None) or getattr(r, "__qualname__", "").rpartition(".")[0]
            (methods if owner and owner != "_VariableFunctionsClass" else functions).add(name)
        return cls(frozenset(functions), frozenset(methods))

    def __or__(self, other: "Forbidden") -> "Forbidden":
        return Forbidden(self.functions | other.functions, self.methods | other.methods)

    def names(self) -> frozenset[str]:
        return self.functions | self.methods


@dataclass
class _Part:
    """One top-level statement of a cell: what it defines, what it uses, what it shows."""

    cell: int
    findings: list[Finding] = field(default_factory=list)
    forbidden: list[tuple[Finding, str, str]] = field(default_factory=list)  # (finding, kind, name)
    names: set[str] = field(default_factory=set)
    local: set[str] = field(default_factory=set)  # its own names (parameters, locals), which reach nothing global


class _Reader(ast.NodeVisitor):
    def __init__(self, part: _Part, imports: dict[str, tuple[str, bool]]):
        self.part, self.imports = part, imports
        self.called: set[int] = set()
        self.docstrings: set[int] = set()

    def add(self, node: ast.AST, what: str, everywhere: bool = True) -> None:
        self.part.findings.append(Finding(self.part.cell, getattr(node, "lineno", 0), what, everywhere))

    def forbid(self, node: ast.AST, kind: str, name: str, shown: str) -> None:
        self.part.forbidden.append((Finding(self.part.cell, getattr(node, "lineno", 0), shown), kind, name))

    def _module_of(self, node: ast.AST) -> str | None:
        """The module a ``a.b.c`` chain starts from, if its root is an imported name."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.imports:
            return self.imports[node.id][0]
        return None

    def _root(self, node: ast.AST) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    # -- definitions: docstrings are text, not code
    def _body(self, node) -> None:
        body = getattr(node, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            self.docstrings.add(id(body[0].value))
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _body

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_MODULES:
                self.add(node, f"imports {alias.name}", everywhere=False)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        if module not in ALLOWED_MODULES:
            self.add(node, f"imports from {module}", everywhere=False)
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_") or (module == "torch" and alias.name in TORCH_HATCHES):
                self.add(node, f"imports {module}.{alias.name}", everywhere=False)
            self.forbid(node, "function", alias.name, f"imports {module}.{alias.name}")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.part.names.add(node.id)
            imported = self.imports.get(node.id)
            if imported is not None and not imported[1]:
                root = imported[0].lstrip(".").split(".")[0]
                self.add(node, f"uses {imported[0]}", everywhere=root in MACHINERY_MODULES or not root)
        if node.id in REFLECTIVE_BUILTINS:
            self.add(node, f"uses {node.id}")
        elif node.id in UNNEEDED_BUILTINS:
            self.add(node, f"uses {node.id}", everywhere=False)
        elif node.id in ("getattr", "hasattr") and id(node) not in self.called:
            self.add(node, f"passes {node.id} around")
        elif _DUNDER.fullmatch(node.id) and node.id not in ALLOWED_DUNDERS:
            self.add(node, f"uses {node.id}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, module = node.attr, self._module_of(node)
        if _DUNDER.fullmatch(attr):
            if attr not in ALLOWED_DUNDERS:
                self.add(node, f"uses the attribute {attr}")
        elif attr.startswith("_") and self._root(node) not in ("self", "cls"):
            self.add(node, f"uses the private attribute {attr}")
        if module is not None and module.split(".")[0] == "torch" and attr in TORCH_HATCHES:
            self.add(node, f"uses torch's {attr}")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and module is not None:
            verb = "assigns to" if isinstance(node.ctx, ast.Store) else "deletes"
            self.add(node, f"{verb} an attribute of the module {module} ({attr})")
        if module is not None:
            self.forbid(node, "function", attr, f"uses {ast.unparse(node)}")
        if id(node) in self.called:
            self.forbid(node, "method", attr, f"calls .{attr}()")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.add(node, f"uses {func.id} with a computed name")
            elif name.value.startswith("_"):
                self.add(node, f"uses {func.id}(..., {name.value!r})")
            else:
                self.forbid(node, "method", name.value, f"uses {func.id}(..., {name.value!r})")
                self.forbid(node, "function", name.value, f"uses {func.id}(..., {name.value!r})")
        if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map") and not (
                isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
            self.add(node, f"builds a format template at run time (.{func.attr} of a computed string)")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docstrings and _DUNDER.search(node.value):
            self.add(node, f"names a dunder attribute in a string ({_DUNDER.search(node.value).group(0)})")


def _imports(trees: list[ast.AST]) -> dict[str, tuple[str, bool]]:
    """Every name bound by an import anywhere in the notebook: ``{"F": ("torch.nn.functional", True), ...}``."""
    out: dict[str, tuple[str, bool]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    module = alias.name if alias.asname else alias.name.split(".")[0]
                    out[name] = (module, module in ALLOWED_MODULES)
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    full = f"{module}.{alias.name}"
                    ok = (module in ALLOWED_MODULES and not alias.name.startswith("_")
                          and not (module == "torch" and alias.name in TORCH_HATCHES))
                    out[alias.asname or alias.name] = (full, ok)
    return out


def _aliases(trees: list[ast.AST], imports: dict[str, tuple[str, bool]]) -> dict[str, tuple[str, bool]]:
    """Names bound to a module or to something reached from one without a call (``T = torch.Tensor``)."""
    known = dict(imports)
    changed = True
    while changed:
        changed = False
        for tree in trees:
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if not (isinstance(root, ast.Name) and root.id in known):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in known:
                        known[target.id] = known[root.id]
                        changed = True
    return known


@dataclass
class GradedFunction:
    """What the source reading needs of an exercise: its function's name, the cell it is graded in, its
    forbidden routines."""

    name: str
    test_cell: int
    forbidden: Forbidden = Forbidden()


def findings(cells: list[str | None], exercises: Iterable[GradedFunction]) -> dict[str, list[Finding]]:
    """Per exercise, what in the submission's code touches it (an empty list for a clean exercise).

    ``cells``: the notebook's cells in order, ``None`` for those that are not
    the learner's code (markdown, the locked test cells).

    An exercise's function reaches the global names it uses, and through each
    name every statement and function that can change what the name holds
    (:func:`_flow`): an assignment, and also a mutation (``HOOKS.append(f)``,
    ``TABLE[k] = f``, ``obj.attr = f``), a call that is handed the name
    (``register(HOOKS)``), a decorator that registers the function it is given,
    a function whose body does any of these. So a routine hidden in a list,
    a dict, an object or a closure is found wherever it was put.

    Code the reading cannot follow (nested too deeply for Python's parser, or a
    statement too large to read) counts as a finding for every exercise graded
    after its cell: it is no code an exercise needs.
    """
    exercises = list(exercises)
    trees: dict[int, ast.Module] = {}
    top_level: list[Finding] = []
    for index, source in enumerate(cells):
        if source is not None:
            try:
                trees[index] = ast.parse(source)
            except SyntaxError:
                continue  # it fails when it runs, and costs what it defines
            except (RecursionError, MemoryError, ValueError, OverflowError):
                top_level.append(Finding(index, 0, _UNREADABLE))
    try:
        imports = _aliases(list(trees.values()), _imports(list(trees.values())))
    except (RecursionError, MemoryError):
        return {ex.name: [Finding(0, 0, _UNREADABLE)] for ex in exercises}
    parts: list[tuple[_Part, ast.stmt]] = []
    for index, tree in trees.items():
        for stmt in tree.body:
            part = _Part(index)
            try:
                top_level += _read_statement(stmt, part, imports)
            except (RecursionError, MemoryError):
                top_level.append(Finding(index, getattr(stmt, "lineno", 0), _UNREADABLE))
                continue
            parts.append((part, stmt))
    definitions = _flow(parts, set(imports))
    out: dict[str, list[Finding]] = {}
    for ex in exercises:
        found = [f for f in top_level if f.cell < ex.test_cell]
        seen: set[int] = set()
        todo = [ex.name]
        while todo:
            for part in definitions.get(todo.pop(), []):
                if part.cell >= ex.test_cell or id(part) in seen:
                    continue
                seen.add(id(part))
                found += part.findings
                found += [Finding(f.cell, f.line, f"{f.what}, which does the exercise for you")
                          for f, kind, name in part.forbidden
                          if name in (ex.forbidden.names() if kind == "function" else ex.forbidden.methods)]
                todo += sorted((part.names - part.local) & set(definitions))  # the global names it uses
        unique = {(f.cell, f.line, f.what): f for f in found}
        out[ex.name] = sorted(unique.values(), key=lambda f: (f.cell, f.line, f.what))
    return out


_UNREADABLE = "has code nested too deeply for the grader to read (a very long expression?)"


def _read_statement(stmt: ast.stmt, part: _Part, imports: dict) -> list[Finding]:
    """Read one top-level statement into ``part``; the findings it has at a cell's top level."""
    reader = _Reader(part, imports)
    reader.visit(stmt)
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [f for f in part.findings if f.everywhere]
    # what runs when the definition runs: decorators, default values, base classes
    if isinstance(stmt, ast.ClassDef):
        now = list(stmt.decorator_list) + list(stmt.bases) + [k.value for k in stmt.keywords]
        now += [s for s in stmt.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    else:
        now = list(stmt.decorator_list) + list(stmt.args.defaults) + [d for d in stmt.args.kw_defaults if d]
    at_once = _Part(part.cell)
    for expr in now:
        _Reader(at_once, imports).visit(expr)
    return [f for f in at_once.findings if f.everywhere]


def _root_name(node: ast.AST) -> str | None:
    """The name a target or receiver starts from: ``X`` of ``X``, ``X[0]``, ``X.a.b``, ``*X``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for elt in node.elts for t in _targets(elt)]
    return [node]


def _effects(stmt: ast.stmt) -> tuple[set[str], set[str], set[str]]:
    """What a statement can change, as names: ``(changed, called, local)``.

    ``changed``: every name it assigns, deletes or mutates (the root of a subscript or attribute target, the
    receiver of a method call, a name handed to a call, which may change it); ``called``: the names it calls (a
    function or decorator whose own changes are its changes too); ``local``: within a function or class, the
    names that are its own (parameters, names assigned without ``global``), whose changes stay inside.
    """
    changed, called, local, declared = set(), set(), set(), set()
    definition = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            local.update(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs)
            local.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
            if node is not stmt and not isinstance(node, ast.Lambda):
                local.add(node.name)
        elif isinstance(node, ast.ClassDef) and node is not stmt:
            local.add(node.name)
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _targets(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, ast.comprehension):  # a comprehension's variables are its own
            local.update(n.id for t in _targets(node.target) for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets = _targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [t for item in node.items if item.optional_vars is not None for t in _targets(item.optional_vars)]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                called.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):  # X.append(f), X.a.update(...): X may change
                root = _root_name(node.func.value)
                if root:
                    changed.add(root)
            for arg in list(node.args) + [k.value for k in node.keywords]:  # f(X): f may change X
                root = _root_name(arg)
                if root:
                    changed.add(root)
        for target in targets:
            root = _root_name(target)
            if root:
                changed.add(root)
                if definition and isinstance(target, ast.Name):
                    local.add(root)
        if definition and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            called.update(n for d in node.decorator_list for n in [_root_name(d.func if isinstance(d, ast.Call)
                                                                                else d)] if n)
    local -= declared
    if definition:
        changed -= local
    else:  # at a cell's top level only a comprehension's or a lambda's own names are local
        changed -= {n for n in local if n not in _assigned_names(stmt)}
    return changed, called, local


def _assigned_names(stmt: ast.stmt) -> set[str]:
    """The plain names a top-level statement itself binds (not inside a comprehension or lambda)."""
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With,
                             ast.AsyncWith, ast.NamedExpr, ast.Delete)):
            for field in ("targets", "target"):
                for target in (getattr(node, field, None) or []) if field == "targets" else \
                        [getattr(node, field, None)]:
                    if target is not None:
                        names.update(t.id for t in _targets(target) if isinstance(t, ast.Name))
    return names


def _flow(parts: list[tuple[_Part, ast.stmt]], modules: set[str]) -> dict[str, list[_Part]]:
    """Every global name, and the parts that can change what it holds (its definitions, in the widest sense):
    the statements and functions of :func:`_effects`, and those that call a function that changes it.

    ``modules``: the names imports bind (``torch``, ``F``...): calling a module's function does not change what
    the name holds (an assignment to a module's attribute is a finding of its own)."""
    by_name: dict[str, list[tuple[_Part, ast.stmt]]] = {}
    effects: dict[int, tuple[set[str], set[str]]] = {}
    for part, stmt in parts:
        changed, called, part.local = _effects(stmt)
        changed -= modules
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            by_name.setdefault(stmt.name, []).append((part, stmt))
        effects[id(part)] = (changed, called)
    # a function's changes include those of the functions it calls (a fixed point: calls may go round)
    total = {key: set(changed) for key, (changed, _) in effects.items()}
    grew = True
    while grew:
        grew = False
        for key, (_, called) in effects.items():
            for name in called:
                for callee, _ in by_name.get(name, []):
                    extra = total[id(callee)] - total[key]
                    if extra:
                        total[key] |= extra
                        grew = True
    definitions: dict[str, list[_Part]] = {}
    for part, stmt in parts:
        names = set(total[id(part)])
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        for name in sorted(names):
            definitions.setdefault(name, []).append(part)
    return definitions


def message(exercise: str, found: list[Finding]) -> str:
    """The learner's feedback for an exercise with findings."""
    forbidden = [f for f in found if "does the exercise for you" in f.what]
    first = (forbidden or found)[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    if forbidden:
        return f"{exercise}: your code {first}{more}. Compute it yourself from basic tensor operations."
    return (f"{exercise}: your code {first}{more}. The exercises are graded on code that uses tensors and plain "
            "Python; code that reaches into Python's or torch's machinery, or into the course's own packages, "
            "could switch the grading checks off, so this exercise scores zero.")


def assignment_findings(cells: list[tuple[str | None, str | None]], assignment) -> dict[str, list[Finding]]:
    """:func:`findings` for a notebook of an assignment of the registry.

    ``cells``: per cell, the learner's source (None for markdown and the
    locked test cells) and its nbgrader grade_id; an exercise is graded in the
    cell ``test_<name>``.
    """
    test_cells = {gid: i for i, (_, gid) in enumerate(cells) if gid}
    exercises = [GradedFunction(ex.name, test_cells.get(f"test_{ex.name}", len(cells)), Forbidden.of(ex.forbidden))
                 for ex in assignment.exercises]
    return findings([source for source, _ in cells], exercises)
