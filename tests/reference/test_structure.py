"""course_lib reads like the book: lower chapters never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nbtools import ROOT

#: module -> the chapter that teaches it
CHAPTER = {
    "tokenizer": 1, "positional": 1, "attention": 2, "multi_head": 3, "norms": 4, "mlp": 5, "blocks": 5,
    "seq2seq": 6, "decoder_lm": 7, "efficient": 8, "vit": 9, "cnn": 9, "dinov2": 10, "dino": 10, "probes": 10,
    "swin": 11, "attention_as_convolution": 9, "hybrid": 9, "augment": 9, "deit": 9, "masked_image": 10,
}
#: tools around the book, free to import any chapter's module
UTILITIES = {"__init__", "training", "data", "datasets", "interop", "experiment", "counting", "zoo", "summary",
             "lm_recipe", "vit_recipe"}  # the capstones' references: chapters 2-8 (2-9) and training put together


def course_lib_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_lib"):
            parts = node.module.split(".")
            found.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("course_lib."):
                    found.add(alias.name.split(".")[1])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names = [a.name for a in node.names] + module
            for n in names:
                assert n.split(".")[0] not in {"chapters", "exercises", "solutions", "tests", "nbtools"}, (
                    f"{path.name} imports {n}: course_lib never imports the book, the exercises or the tests"
                )
    return found


MODULES = sorted(p for p in (ROOT / "course_lib").glob("*.py"))
PACKAGES = sorted(p for p in (ROOT / "course_lib").iterdir() if (p / "__init__.py").is_file())


def test_the_tables_list_exactly_course_libs_modules():
    """Every module and package of course_lib has a chapter or is a utility, and nothing else is listed."""
    present = {p.stem for p in MODULES} | {p.name for p in PACKAGES}
    listed = set(CHAPTER) | UTILITIES
    assert not present - listed, f"modules with no chapter in tests/reference/test_structure.py: {present - listed}"
    assert not listed - present, f"listed here but absent from course_lib: {listed - present}"
    assert not set(CHAPTER) & UTILITIES, f"both a chapter's module and a utility: {set(CHAPTER) & UTILITIES}"


def test_the_package_docstring_indexes_every_module():
    import course_lib

    names = ({p.stem for p in MODULES} | {p.name for p in PACKAGES}) - {"__init__"}
    missing = sorted(n for n in names if f":mod:`~course_lib.{n}`" not in course_lib.__doc__)
    assert not missing, f"course_lib/__init__.py's module index does not name {missing}"


@pytest.mark.parametrize("path", [p for p in MODULES if p.stem in CHAPTER], ids=lambda p: p.stem)
def test_a_module_imports_only_its_own_or_earlier_chapters(path):
    mine = CHAPTER[path.stem]
    for dep in course_lib_imports(path):
        assert dep not in UTILITIES or dep == "__init__", f"{path.stem} imports the utility {dep}"
        assert CHAPTER.get(dep, 0) <= mine, f"{path.stem} (chapter {mine}) imports {dep} (chapter {CHAPTER[dep]})"


@pytest.mark.parametrize("path", MODULES + sorted((ROOT / "course_lib" / "interop").glob("*.py")), ids=lambda p: p.stem)
def test_course_lib_never_imports_the_book_or_the_tests(path):
    course_lib_imports(path)


def test_course_lib_declares_every_package_it_imports():
    """A package course_lib imports is a dependency in pyproject.toml, or an optional one for its extra."""
    import re
    import sys
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = lambda req: re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower().replace("-", "_")  # noqa: E731
    declared = {name(r) for r in project["dependencies"]}
    for reqs in project.get("optional-dependencies", {}).values():
        declared |= {name(r) for r in reqs}
    imported = set()
    for path in (ROOT / "course_lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    distribution = {"pil": "pillow"}  # where a distribution's import name is not its own
    third_party = {distribution.get(m.lower(), m.lower()) for m in imported  # case-insensitive: IPython is ipython
                   if m not in sys.stdlib_module_names and m not in {"course_lib", "__future__"}}
    assert third_party - declared == set(), f"imported by course_lib but not declared: {third_party - declared}"
