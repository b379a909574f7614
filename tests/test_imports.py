"""Imports run one way: no module of the course imports another that imports it back, directly or through others.

Every import statement counts, at the top of a module or inside a function (a function-level import still ties
the two modules together), and ``from package import name`` counts as an import of ``package.name`` where that is a
module. Packages are read from the repository's tree, so a new module is checked without being listed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nbtools import ROOT

#: the course's own packages: what learners learn, how an answer is judged, how a class runs, and the maintainers'
PACKAGES = ("course_lib", "grader", "classroom", "tools")


def modules() -> dict[str, Path]:
    """Every module of :data:`PACKAGES` by its dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The course's modules that ``name`` imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            wanted |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            wanted.add(base)
            wanted |= {f"{base}.{alias.name}" for alias in node.names}
    found = set()
    for target in wanted:
        while target and target not in known:  # an imported name, not a module: the module that holds it
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_no_two_modules_import_each_other():
    graph = import_graph()
    found = cycles(graph)
    described = ["; ".join(f"{a} imports {', '.join(sorted(graph[a] & set(c)))}" for a in c) for c in found]
    assert not found, "modules that import each other, directly or through others:\n" + "\n".join(described)


def test_the_households_import_downwards():
    """course_lib imports none of the others; grader imports neither classroom nor tools; classroom not tools."""
    below = {"course_lib": {"grader", "classroom", "tools"}, "grader": {"classroom", "tools"}, "classroom": {"tools"}}
    wrong = sorted(f"{name} imports {target}" for name, targets in import_graph().items() for target in targets
                   if target.split(".")[0] in below.get(name.split(".")[0], set()))
    assert not wrong, wrong


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles_through_others(edges, expected):
    assert cycles(edges) == expected


def test_the_graph_sees_function_level_and_from_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from pkg import b\n    return b\n")
    (tmp_path / "pkg" / "b.py").write_text("from .a import f\n")
    known = {"pkg": tmp_path / "pkg" / "__init__.py", "pkg.a": tmp_path / "pkg" / "a.py",
             "pkg.b": tmp_path / "pkg" / "b.py"}
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert graph["pkg.a"] == {"pkg.b", "pkg"} and graph["pkg.b"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
