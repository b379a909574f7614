"""The book builds with warnings as errors, offline, with its math served locally."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nbtools import ROOT

pytestmark = pytest.mark.slow


def pages(html: Path) -> list[Path]:
    return [p for p in html.rglob("*.html") if "_static" not in p.parts]


def test_every_toc_entry_is_a_page(built):
    toc = (ROOT / "_toc.yml").read_text()
    for entry in re.findall(r"file:\s*(\S+)", toc) + [re.search(r"root:\s*(\S+)", toc).group(1)]:
        assert (built / f"{entry}.html").exists(), f"{entry} is in _toc.yml but was not built"


def test_mathjax_is_served_from_the_site(built):
    assert (built / "_static" / "mathjax" / "tex-chtml.js").exists()
    page = (built / "chapters" / "02-attention" / "scaling-and-masks.html").read_text()
    assert re.search(r'<script[^>]+src="(\.\./)*_static/mathjax/tex-chtml\.js"', page)


def test_no_page_loads_scripts_styles_or_fonts_from_another_host(built):
    for page in pages(built):
        text = page.read_text()
        remote = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="((?:https?:)?//[^"]+)"', text)
        assert not remote, f"{page.relative_to(built)} loads {remote}"


def test_citations_resolve_to_the_bibliography(built):
    bib = (built / "bibliography.html").read_text()
    assert "attention is all you need" in bib.lower()
    chapter = (built / "chapters" / "02-attention" / "index.html").read_text()
    assert "bibliography.html#" in chapter


def test_chapter_notebooks_were_executed_with_their_figures(built):
    page = (built / "chapters" / "02-attention" / "scaling-and-masks.html").read_text()
    assert page.count("<img") >= 2, "the figures of the chapter are missing"
