"""Sphinx extension of the book: stored outputs by default, and an execution cache that knows what a notebook imports.

``make book`` renders the outputs stored in the chapter notebooks (``_config.yml``:
``execute_notebooks: "off"``) and starts no kernel: ``make test`` proves those
outputs are what the code prints. ``make book EXECUTE=1`` sets
:data:`EXECUTE_VARIABLE`, and :func:`execution_mode` switches the build to
Jupyter Book's cache mode, for a maintainer who wants the book from a fresh
run.

In that mode Jupyter Book executes the chapter notebooks once and keeps their outputs in
``_build/.jupyter_cache``, keyed by a hash of the notebook's code cells (and its
``kernelspec``). That key misses the code the notebook runs but does not
contain: a notebook that imports ``course_lib.attention`` shows whatever the
module computed when the notebook was last executed, even after the module
changed.

:func:`read_notebook` is the book's reader for ``.ipynb`` files (configured as
``nb_custom_formats`` in ``_config.yml``). It reads the notebook as usual and
writes into ``metadata.kernelspec`` a digest of every ``course_lib`` module the
notebook imports, followed through the imports of those modules (within
``course_lib``), and of the chapters' data files that its code names
(``corpus.txt``, say). A module counts by its code, not its prose
(:func:`code_of`): docstrings and comments change no output. The cache hashes
``kernelspec``, so:

* editing the code of ``course_lib/swin.py`` re-executes the Swin notebooks,
  and nothing that does not import it (directly or through another module);
* editing a docstring or a comment re-executes nothing;
* editing one page re-executes that page only;
* the kernel ignores the extra key (it starts the kernel by ``kernelspec.name``).

Sphinx itself re-reads a page only when its source, or a file noted as its
dependency, is newer than the last build: :func:`note_dependencies` notes the
same files for every notebook, so the edited module brings the page back to
the reader, and the reader's key decides whether it runs again. The extension
is listed in ``sphinx.config.extensions``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "course_lib"
KEY = "course_lib_sources"


def _module_file(name: str) -> Path | None:
    """``course_lib.a.b`` -> its source file under the repository (None if it is not one)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(source: str, package: str | None = None) -> set[str]:
    """Dotted names of the ``course_lib`` modules that ``source`` imports.

    ``package`` is the dotted package of the file (for relative imports).
    ``from course_lib import swin`` names ``course_lib.swin`` when that is a
    module, and ``course_lib`` itself otherwise. Code that does not parse
    (a cell with IPython magics, say) is read line by line instead.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        lines = [line for line in source.splitlines() if re.match(r"\s*(from|import)\s", line)]
        tree = ast.parse("\n".join(line.strip() for line in lines if _parses(line.strip())))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level and package:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            if module.split(".")[0] != PACKAGE:
                continue
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names if _module_file(f"{module}.{a.name}"))
    return found


def _parses(line: str) -> bool:
    try:
        ast.parse(line)
        return True
    except SyntaxError:
        return False


@lru_cache(maxsize=None)
def _module_closure(name: str) -> frozenset[Path]:
    """Source files of ``name``, its parent packages and everything they import inside course_lib."""
    seen: set[str] = set()
    todo = [name]
    files: set[Path] = set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        path = _module_file(current)
        if path is None:
            continue
        files.add(path)
        parts = current.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # importing a.b runs a/__init__.py
        package = current if path.name == "__init__.py" else ".".join(parts[:-1])
        source = path.read_text()
        todo.extend(imported_modules(source, package))
        if "import_module(" in source:  # imports chosen at run time: count the whole package
            todo.extend(f"{package}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__")
    return frozenset(files)


def data_files() -> list[Path]:
    """Files that ship with the chapters for their notebooks to read (not pages)."""
    return [p for p in (ROOT / "chapters").rglob("*") if p.is_file() and p.suffix not in {".ipynb", ".md"}
            and ".ipynb_checkpoints" not in p.parts]


def dependencies(nb: nbformat.NotebookNode) -> list[Path]:
    """The course_lib files a notebook runs, and the chapters' data files its code names, sorted."""
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    files: set[Path] = set()
    for src in code:
        for name in imported_modules(src):
            files |= _module_closure(name)
    text = "\n".join(code)
    files |= {p for p in data_files() if p.name in text}
    return sorted(files)


def code_of(path: Path) -> bytes:
    """What of a file the outputs of the code that uses it depend on.

    A Python module: its syntax tree without docstrings (comments are not in the tree), so an edit to the
    prose, or a line wrapped differently, leaves it as it was. Any other file: its bytes.
    """
    if path.suffix != ".py":
        return path.read_bytes()
    return tree_text(_without_docstrings(ast.parse(path.read_text()))).encode()


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with every statement that is only a string (docstrings, mostly) removed: such a statement runs
    nothing (course_lib reads no ``__doc__``)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list):
                setattr(node, name, [s for s in body if not _is_docstring(s)])
    return tree


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def tree_text(node) -> str:
    """A syntax tree as text (comments are not in a tree): ``ast.dump`` without line numbers, empty lists and
    Nones, the same on every Python the course supports (3.12 added empty ``type_params`` to every function and
    class, 3.13 dumps without empties)."""
    if isinstance(node, ast.AST):
        fields = ", ".join(f"{k}={tree_text(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ", ".join(tree_text(v) for v in node) + "]"
    return repr(node)


def digest(paths: list[Path]) -> str:
    """One hash of ``paths``: each file's path and :func:`code_of` it."""
    h = hashlib.sha256()
    for path in paths:
        h.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
        h.update(b"\0")
        h.update(code_of(path))
        h.update(b"\0")
    return h.hexdigest()


def read_notebook(text: str) -> nbformat.NotebookNode:
    """Read a notebook and key it by the sources it depends on (see the module docstring)."""
    nb = nbformat.reads(text, as_version=4)
    deps = dependencies(nb)
    if deps:
        nb.metadata.setdefault("kernelspec", {})[KEY] = digest(deps)
    return nb


def note_dependencies(app, docname: str, source: list[str]) -> None:
    """Sphinx re-reads a page only when a file it depends on is newer: tell it what a notebook runs."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    try:
        nb = nbformat.reads(source[0], as_version=4)
    except Exception:  # not a notebook Sphinx can read anyway: myst-nb reports it
        return
    for path in dependencies(nb):
        app.env.note_dependency(str(path))


#: set (to anything but empty or 0) by ``make book EXECUTE=1``: execute the notebooks at build time, cached
EXECUTE_VARIABLE = "COURSE_BOOK_EXECUTE"
#: Jupyter Book's execution mode under :data:`EXECUTE_VARIABLE` (``_config.yml`` says "off")
EXECUTED_MODE = "cache"


def execution_mode(app, config) -> None:
    """``make book EXECUTE=1``: the notebooks executed (cached) instead of their stored outputs rendered."""
    if os.environ.get(EXECUTE_VARIABLE, "").strip() not in ("", "0"):
        config.nb_execution_mode = EXECUTED_MODE


def setup(app):
    app.connect("config-inited", execution_mode)
    app.connect("source-read", note_dependencies)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
