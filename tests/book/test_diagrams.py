"""The architecture diagrams: drawn from code, vector, the same bytes on every run, each placed and described.

The book build renders them (``tools/diagrams``); ``test_book_browser.py``
checks in a browser that every image of the built book loads and has an alt
text. Here: the drawings themselves, and the pages that place them.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from nbtools import ROOT
from tools.diagrams import MIN_ALT, render
from tools.diagrams.figures import DIAGRAMS

DIRECTIVE = re.compile(r"^```\{diagram\}\s+(\S+)\s*\n((?::\w+:.*\n)*)", re.M)


def book_pages() -> list:
    """The pages ``_toc.yml`` puts in the book (a README's example of the directive is not one)."""
    files = re.findall(r"^\s*(?:root|-\s*file):\s*(\S+)", (ROOT / "_toc.yml").read_text(), re.M)
    pages = []
    for name in files:
        found = [ROOT / f"{name}{suffix}" for suffix in (".ipynb", ".md") if (ROOT / f"{name}{suffix}").exists()]
        assert found, f"_toc.yml names {name}, which is neither a notebook nor a markdown page"
        pages.append(found[0])
    return pages


def placed() -> list[tuple[str, str, dict[str, str]]]:
    """(page, diagram name, options) for every ``{diagram}`` directive of the book's pages."""
    out = []
    for page in book_pages():
        if page.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.read(page, as_version=4).cells if c.cell_type == "markdown")
        else:
            text = page.read_text()
        for m in DIRECTIVE.finditer(text + "\n"):
            options = dict(re.findall(r":(\w+):\s*(.*)", m.group(2)))
            out.append((str(page.relative_to(ROOT)), m.group(1), options))
    return out


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_a_diagram_is_vector_and_the_same_on_every_run(name, tmp_path):
    first = render(name, tmp_path / "a").read_bytes()
    second = render(name, tmp_path / "b").read_bytes()
    assert first == second, f"{name}: two renders differ"
    text = first.decode()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "<path" in text
    assert "<image" not in text, f"{name}: a raster image inside the SVG"
    assert "<text" not in text, f"{name}: text left as text needs the fonts; it is drawn as paths"


def test_every_diagram_is_placed_in_the_book_with_an_alt_text_that_describes_it():
    uses = placed()
    unknown = [(page, name) for page, name, _ in uses if name not in DIAGRAMS]
    assert not unknown, f"pages place diagrams that do not exist: {unknown}"
    unused = sorted(set(DIAGRAMS) - {name for _, name, _ in uses})
    assert not unused, f"diagrams no page places: {unused}"
    short = [(page, name) for page, name, opts in uses if len(opts.get("alt", "").strip()) < MIN_ALT]
    assert not short, f"diagrams without an alt text of {MIN_ALT} characters or more: {short}"


def test_an_unknown_diagram_is_named_with_the_ones_that_exist(tmp_path):
    with pytest.raises(KeyError, match="no diagram named 'nope'.*attention-lookup"):
        render("nope", tmp_path)
