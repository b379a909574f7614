"""The one renderer of what a learner wrote (grader/pages.py): nothing active survives, whatever the input.

The invariant is checked on the output as an HTML parser reads it (and again after BeautifulSoup's round trip,
which nbconvert applies to every page): no element that runs, loads, frames, navigates or takes input; no event
handler; no URL but a same-page fragment on a link and a base64 image on an image; no CSS but a cell's
text-align; ids under the learner's prefix; an image's size a plain number. Hypothesis searches a grammar of HTML,
markdown, CSS, URL and notebook tricks for an input that breaks it: FUZZ_EXAMPLES=<n> sets how many inputs each
property tries (default 150: seconds), e.g. ``FUZZ_EXAMPLES=20000`` for a long run; a whole page renders per
example in the notebook property, which tries a tenth as many. Whatever a long run finds goes into
:data:`KNOWN` as a regression case.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import Environment

from grader.mathml import markdown_with_mathml
from grader.pages import ID_PREFIX, ShownSafely, clean, markdown2html
from nbtools import ROOT

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAGE_FUZZ = settings(max_examples=max(EXAMPLES // 10, 10), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BEACON = "http://127.0.0.1:9/beacon"

# --- the invariant, stated apart from the module's allowlist ----------------------------------------------------

#: elements that run, load, frame, navigate, take input or restyle the page, in any namespace
FORBIDDEN = {"script", "style", "iframe", "frame", "frameset", "object", "embed", "applet", "param", "link", "meta",
             "base", "form", "input", "button", "textarea", "select", "option", "keygen", "isindex", "svg", "image",
             "use", "animate", "set", "foreignobject", "annotation-xml", "mglyph", "template", "noscript",
             "noembed", "noframes", "xmp", "plaintext", "listing", "title", "video", "audio", "source", "track",
             "picture", "area", "map", "portal", "marquee", "html", "head", "body", "dialog"}
#: attributes whose value a browser reads as a URL (and loads, follows or submits to)
URL_ATTRIBUTES = {"href", "src", "srcset", "srcdoc", "action", "formaction", "poster", "data", "background", "cite",
                  "ping", "xlink:href", "codebase", "longdesc", "lowsrc", "dynsrc", "manifest", "icon", "usemap",
                  "archive", "classid", "profile", "content", "http-equiv"}
IMAGE_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/\s]*=*\s*")


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.other: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, attrs))

    handle_startendtag = handle_starttag

    def handle_comment(self, data):
        self.other.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.other.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.other.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.other.append(f"<![{data}]>")


def problems(markup: str, learner_ids: bool = True) -> list[str]:
    """What in ``markup`` breaks the invariant (``learner_ids``: every id is the learner's, hence prefixed)."""
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    found = [f"markup that is not an element: {o[:80]}" for o in parser.other]
    for tag, attrs in parser.elements:
        if tag in FORBIDDEN:
            found.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                found.append(f"<{tag} {name}>: an event handler")
            elif name in URL_ATTRIBUTES and not (name == "href" and value.startswith("#")
                                                 or name == "src" and IMAGE_URL.fullmatch(value)):
                found.append(f"<{tag} {name}={value[:80]!r}>: a URL that leaves the page")
            elif name == "style" and not re.fullmatch(r"\s*text-align\s*:\s*[a-z]+\s*;?\s*", value):
                found.append(f"<{tag} style={value[:80]!r}>")
            elif name == "id" and learner_ids and not value.startswith(ID_PREFIX):
                found.append(f"<{tag} id={value[:80]!r}>: an id of the page's own")
            elif tag == "img" and name in ("width", "height") and not re.fullmatch(r"\d+%?", value):
                found.append(f"<img {name}={value[:80]!r}>: not a number")
    return found


def assert_inert(markup: str, learner_ids: bool = True) -> None:
    assert problems(markup, learner_ids) == [], markup[:3000]
    reparsed = str(BeautifulSoup(markup, features="html.parser"))  # as nbconvert writes every page
    assert problems(reparsed, learner_ids) == [], reparsed[:3000]


# --- a grammar of tricks ------------------------------------------------------------------------------------------

TAGS = sorted(FORBIDDEN | {"a", "img", "p", "div", "span", "b", "table", "tr", "td", "th", "math", "mi", "mtext",
                           "mrow", "details", "summary", "h1", "pre", "code", "ol", "li", "desc", "bdo", "q"})
ATTRIBUTES = ["onerror", "onload", "OnClick", "onmouseover", "ontoggle", "onfocus", "onbegin", "href", "src",
              "srcset", "srcdoc", "style", "xlink:href", "formaction", "action", "background", "poster", "data",
              "ping", "id", "class", "width", "height", "title", "open", "http-equiv", "content", "rel", "target",
              "is", "name", "autofocus", "attributeName", "to", "values", "encoding", "xmlns", "colspan", "start"]
URLS = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", " javascript:alert(1)",
        "&#106;avascript:alert(1)", "jav&#x09;ascript:alert(1)", "javascript&colon;alert(1)", "vbscript:msgbox(1)",
        "data:text/html,<script>alert(1)</script>", "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=", "data:image/png;base64,iVBORw0KGgo=",
        "data:image/png;base64,x\" onerror=\"alert(1)", "data:image/svg+xml,<svg onload=alert(1)>",
        f"{BEACON}/x.png", "//127.0.0.1:9/x", "\\\\127.0.0.1\\x", "/relative", "relative.png", "#frag", "#",
        "https:x", "mailto:a@b.c", "file:///etc/passwd", "blob:x", "about:blank", "  #frag", "#\" onclick=\"x"]
CSS = ["url(x)", f"background:url({BEACON}/css)", "@import 'x'", "expression(alert(1))", "\\75 rl(x)",
       "text-align:left", "text-align: center; background:url(x)", "behavior:url(x.htc)", "-moz-binding:url(x)",
       "color:red", "text-align:left/**/url(x)"]
VALUES = URLS + CSS + ["1 onload=alert(1)", "100", "50%", "alert(1)", "x\" onerror=\"alert(1)", "0;url=" + BEACON,
                       "refresh", "'", '"', "<script>alert(1)</script>", "", "user-content-x", "highlight k modal"]
TEXTS = ["x", "<", ">", "&", "&lt;script&gt;", "</", "<!--", "-->", "]]>", "<![CDATA[", "\"", "'", "`", " ", "\n",
         "<!-- <script>alert(1)</script> -->", "<!--><img src=x onerror=alert(1)>-->",
         "<![CDATA[<img src=x onerror=alert(1)>]]>", "</p>", "</script>", "</style>", "</noscript>", "</title>",
         "<?xml version='1.0'?>", "<!DOCTYPE html>", "&#60;script&#62;", "<img src=x onerror=alert(1)//"]


def _case(name: str, upper: list[bool]) -> str:
    return "".join(c.upper() if u else c for c, u in zip(name, upper + [False] * len(name)))


@st.composite
def attribute(draw) -> str:
    name, value = draw(st.sampled_from(ATTRIBUTES)), draw(st.sampled_from(VALUES))
    quote = draw(st.sampled_from(['"', "'", ""]))
    value = value.replace(quote, "&quot;" if quote == '"' else "&#39;") if quote else value.replace(" ", "")
    return draw(st.sampled_from([" ", "/", "\n", " \t"])) + f"{name}={quote}{value}{quote}"


@st.composite
def element(draw, children) -> str:
    tag = draw(st.sampled_from(TAGS))
    tag = _case(tag, draw(st.lists(st.booleans(), max_size=len(tag))))
    attrs = "".join(draw(st.lists(attribute(), max_size=3)))
    inner = "".join(draw(st.lists(children, max_size=3)))
    return f"<{tag}{attrs}>{inner}" + (f"</{tag}>" if draw(st.booleans()) else "")


HTML = st.recursive(st.sampled_from(TEXTS), lambda children: element(children), max_leaves=12)


@st.composite
def markdown_piece(draw) -> str:
    url, html, text = draw(st.sampled_from(URLS)), draw(HTML), draw(st.sampled_from(["x", "a b", "<b>x</b>"]))
    name = draw(st.sampled_from(["dot.png", "missing.png", "page.html", "bad.png", "drawing.svg", "../x"]))
    return draw(st.sampled_from([
        html, f"[{text}]({url})", f"![{text}]({url})", f"<{url}>", f"[{text}][r]\n\n[r]: {url}",
        f"![{text}](attachment:{name})", f"`{html}`", f"```\n{html}\n```", f"$\\href{{{url}}}{{x}}$",
        f"$\\text{{{html}}}$", f"$${html}$$", f"# {html}", f"> {html}", f"| a |\n|:--|\n| {html} |", f"- {html}",
        f"<details><summary>{text}</summary>\n\n{html}\n</details>",
    ]))


MARKDOWN = st.lists(markdown_piece(), min_size=1, max_size=5).map("\n\n".join)
ATTACHMENTS = {"dot.png": {"image/png": "iVBORw0KGgo="}, "page.html": {"text/html": "PHNjcmlwdD4="},
               "bad.png": {"image/png": "x\" onerror=\"alert(1)"}, "drawing.svg": {"image/svg+xml": "PHN2Zz4="}}
_FILTERS = Environment()
_FILTERS.filters["markdown2html"] = markdown2html
_CELL_TEMPLATE = _FILTERS.from_string("{{ cell.source | markdown2html }}")  # as nbgrader's templates call it

#: the classic mutation-XSS inputs, and (appended) whatever a long run finds, kept as regression cases
KNOWN = [
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\"></noscript>",
    "<svg><style><img src=x onerror=alert(1)></style></svg>",
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>",
    "<math><annotation-xml encoding=\"text/html\"><style><img src=x onerror=alert(1)></style></annotation-xml></math>",
    "<a href=\"&#x6A;avascript:alert(1)\">x</a><a href=\"#\" style=\"position:fixed;inset:0\">cover</a>",
    # found by FUZZ_EXAMPLES=2000: clean's output "<pre>\n</pre>" loses its newline when cleaned again (HTML drops
    # a newline that opens a <pre>), so cleaning is stable from the second pass, not the first
    "<pre></script>\n",
]


# --- the sanitizer and the markdown filter --------------------------------------------------------------------------

@FUZZ
@given(HTML)
def test_clean_leaves_nothing_that_runs_loads_or_navigates(markup):
    out = clean(markup)
    assert_inert(out)
    again = clean(out)  # a page cleans an HTML output twice (the preprocessor, then the template's clean_html)
    assert clean(again) == again, "cleaning again keeps changing the output"


@pytest.mark.parametrize("markup", KNOWN)
def test_known_tricks_and_what_long_runs_found_stay_inert(markup):
    out = clean(markup)
    assert_inert(out)
    assert clean(clean(out)) == clean(out)


@FUZZ
@given(MARKDOWN, st.booleans())
def test_markdown_renders_nothing_that_runs_loads_or_navigates(source, with_math):
    source = markdown_with_mathml(source) if with_math else source  # the feedback's math comes first
    out = _CELL_TEMPLATE.render(cell={"source": source, "attachments": ATTACHMENTS})
    assert_inert(out)


def test_a_missing_or_unusable_attachment_is_text_and_an_image_attachment_an_image():
    source = "![gone](attachment:missing.png) ![page](attachment:page.html) ![dot](attachment:dot.png)"
    out = _CELL_TEMPLATE.render(cell={"source": source, "attachments": ATTACHMENTS})
    assert "[gone: no image attached as 'missing.png']" in out
    assert "[page: no image attached as 'page.html']" in out
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' in out


def test_links_keep_their_text_and_only_same_page_targets():
    out = clean('<h2 id="part">Part</h2><a href="#part">up</a> <a href="https://example.org/">out</a>')
    assert out == (f'<h2 id="{ID_PREFIX}part">Part</h2><a href="#{ID_PREFIX}part" rel="noopener noreferrer">up</a> '
                   '<a rel="noopener noreferrer">out</a>')


def test_the_course_markdown_loses_nothing_it_shows():
    """Every markdown cell of the assignments, rendered with its math as the feedback renders it: the same text
    as nbconvert's own renderer gives, every <math> and <details> kept, and nothing the invariant forbids."""
    from nbconvert.exporters import HTMLExporter

    theirs = Environment()
    theirs.filters["markdown2html"] = HTMLExporter().markdown2html
    their_template = theirs.from_string("{{ cell.source | markdown2html }}")
    cells = 0
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            cell = {"source": markdown_with_mathml("".join(cell["source"])), "attachments": {}}
            ours, before = _CELL_TEMPLATE.render(cell=cell), their_template.render(cell=cell)
            assert_inert(ours)
            text = [BeautifulSoup(h, "html.parser").get_text() for h in (ours, before)]
            assert text[0] == text[1], f"{path.name}: the text shown changed"
            for tag in ("<math", "<details", "<table", "<code", "<h"):
                assert ours.count(tag) == before.count(tag), f"{path.name}: a {tag}> was lost"
            cells += 1
    assert cells > 50


# --- whole pages: every template path, from any notebook -----------------------------------------------------------

OUTPUT_TYPES = ["text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml",
                "image/gif", "application/javascript", "application/vnd.jupyter.widget-view+json",
                "text/vnd.mermaid", "application/pdf", "application/json"]
ANYTHING = st.one_of(st.sampled_from(VALUES + TEXTS), HTML, st.integers(-2, 10**6), st.none(), st.booleans(),
                     st.floats(allow_nan=False), st.lists(st.sampled_from(VALUES), max_size=2),
                     st.dictionaries(st.sampled_from(["a", "width", "name"]), st.sampled_from(VALUES), max_size=2))


def _metadata_keys(keys: list[str]):
    return st.dictionaries(st.sampled_from(keys), ANYTHING, max_size=4)


IMAGE_METADATA = _metadata_keys(["width", "height", "unconfined", "needs_background", "alt", "filenames", "isolated"])
OUTPUT = st.fixed_dictionaries(
    {"output_type": st.sampled_from(["stream", "display_data", "execute_result", "error", "weird"])},
    optional={"name": st.sampled_from(["stdout", "stderr", "stdin", "<b>"]), "text": ANYTHING,
              "data": st.dictionaries(st.sampled_from(OUTPUT_TYPES), st.one_of(HTML, st.sampled_from(VALUES),
                                                                                ANYTHING), max_size=4),
              "metadata": st.one_of(IMAGE_METADATA, st.dictionaries(st.sampled_from(OUTPUT_TYPES), IMAGE_METADATA,
                                                                    max_size=2)),
              "execution_count": ANYTHING, "ename": ANYTHING, "evalue": ANYTHING, "traceback": ANYTHING,
              "svg_filename": st.sampled_from(URLS)})
CELL = st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["markdown", "code", "raw", "heading"]), "source": st.one_of(MARKDOWN, HTML)},
    optional={"metadata": _metadata_keys(["tags", "nbgrader", "raw_mimetype", "alt", "transient", "jupyter"]),
              "attachments": st.one_of(st.just(ATTACHMENTS), ANYTHING), "outputs": st.lists(OUTPUT, max_size=4),
              "execution_count": ANYTHING, "id": st.sampled_from(["abc", "x y", "<b>", "", "ok-1"])})
#: a notebook's own metadata; language_info is an object of texts or absent: nbconvert reads its lexer's name
#: before any preprocessor (a notebook whose language_info is not that raises there, and make feedback names
#: that learner: test_feedback_pages.py)
NOTEBOOK_METADATA = st.fixed_dictionaries({}, optional={
    "kernelspec": ANYTHING, "widgets": ANYTHING, "title": ANYTHING,
    "language_info": st.dictionaries(st.sampled_from(["name", "pygments_lexer", "codemirror_mode"]),
                                     st.sampled_from(VALUES + ["python", "ipython3"]))})
NOTEBOOK = st.fixed_dictionaries({
    "cells": st.lists(CELL, min_size=1, max_size=4), "metadata": NOTEBOOK_METADATA,
    "nbformat": st.just(4), "nbformat_minor": st.sampled_from([4, 5])})


@pytest.fixture(scope="module")
def feedback_exporter():
    """An HTMLExporter as nbgrader's GenerateFeedback builds it from the course's nbgrader_config.py, with the
    course's feedback preprocessors but GetGrades (the scores come in the resources instead)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    from grader.autograde import HideHiddenTests
    from grader.mathml import MathAsMathML

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    config.Exporter.default_preprocessors = []  # as nbgrader's converters set it
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.extra_template_paths = [str(Path(nbgrader.__file__).parent / "server_extensions" /
                                                    "formgrader" / "static" / "node_modules" / "bootstrap" / "dist" /
                                                    "css")]
    exporter = HTMLExporter(config=config)
    assert any(isinstance(p, ShownSafely) for p in exporter._preprocessors), "the course's preprocessor is not on"
    for preprocessor in (HideHiddenTests, MathAsMathML):
        exporter.register_preprocessor(preprocessor, enabled=True)
    return exporter


def learner_part(page: str) -> str:
    """The page from where the notebook's cells start (nbgrader's feedback template holds nbconvert's page, whose
    container comes last): what is not the templates' head, scores and wrappers."""
    return page[page.rindex('id="notebook-container"'):]


@PAGE_FUZZ
@given(NOTEBOOK)
def test_any_notebook_renders_and_its_page_holds_nothing_that_runs_loads_or_navigates(feedback_exporter, nb):
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    resources = {"nbgrader": {"notebook": "n", "score": 0, "max_score": 1, "late_penalty": 0}}
    page, _ = feedback_exporter.from_notebook_node(nb, resources=resources)  # never raises
    assert_inert(learner_part(page), learner_ids=False)  # the template's own ids (cell-id=...) are not prefixed
    assert "<script" not in learner_part(page).lower()
