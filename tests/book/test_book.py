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
    assert re.search(r'<script[^>]+src="(\.\./)*_static/mathjax/tex-chtml\.js(\?v=[0-9a-f]+)?"', page)


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


def chapter_slugs() -> list[str]:
    return sorted(p.name for p in (ROOT / "chapters").iterdir() if p.is_dir() and (p / "index.md").exists())


def test_each_chapter_leads_to_its_exercises_shown_as_released(built):
    for slug in chapter_slugs():
        [notebook] = sorted((ROOT / "exercises" / slug).glob("*.ipynb"))
        target = f"exercises/{slug}/{notebook.stem}.html"
        index = (built / "chapters" / slug / "index.html").read_text()
        assert f'href="../../{target}"' in index, f"chapter {slug} does not link to its assignment"
        assert 'href="../../working-on-exercises.html"' in index, f"chapter {slug} does not say how to open it"
        page = (built / target).read_text()
        assert "YOUR CODE HERE" in page and "not implemented yet" in page, f"{target} is not the released exercise"
        assert "BEGIN HIDDEN TESTS" not in page and "BEGIN SOLUTION" not in page, f"{target} gives the answers away"
        assert "cell_output" not in page, f"{target} was executed: the book must show the exercise unrun"


def test_notation_glossary_and_exercise_guide_are_pages_of_the_book(built):
    glossary = (built / "glossary.html").read_text()
    assert len(re.findall(r'<dt id="term-', glossary)) >= 30, "the glossary lost its terms"
    notation = (built / "notation.html").read_text()
    for symbol in ("d_\\text{model}", "n_q", "head_dim", "patch_size", "window_size"):
        assert symbol in notation, f"the notation page does not define {symbol}"
    intro = (built / "intro.html").read_text()
    for page in ("notation.html", "glossary.html", "working-on-exercises.html", "bibliography.html"):
        assert page in intro, f"the front page does not lead to {page}"


def test_the_front_page_is_the_learners_and_leads_to_the_guides(built):
    intro = (built / "intro.html").read_text()
    assert "A learning path" in intro and "<table" in intro, "the front page lost its learning path"
    for term in ("make grade", "nbval", "grades.csv"):
        text = re.sub(r"<nav.*?</nav>", "", intro, flags=re.S)  # the sidebar names every page of the book
        assert term not in text, f"the learner's front page shows {term!r}"
    for guide in sorted((ROOT / "guides").glob("*.md")):
        page = f"guides/{guide.stem}.html"
        assert (built / page).exists(), f"{page} was not built"
        assert f'href="{page}"' in intro, f"the front page's navigation does not lead to {page}"
