"""Feedback math as MathML (grader/mathml.py): what is math, what is code, and that no TeX becomes markup."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree.ElementTree import fromstring

import pytest

from grader.mathml import markdown_with_mathml, tex_to_mathml
from nbtools import ROOT

MATHML = "{http://www.w3.org/1998/Math/MathML}"


def test_inline_and_display_math_become_mathml_and_the_rest_stays():
    out = markdown_with_mathml("Scale by $1/\\sqrt{d_k}$:\n$$\n\\frac{QK^\\top}{\\sqrt{d_k}}\n$$\nthen the softmax.")
    assert out.startswith("Scale by <math ") and out.endswith("\nthen the softmax.")
    assert out.count('display="inline"') == 1 and out.count('display="block"') == 1
    assert "$" not in out and "\\sqrt" not in out
    inline = out[out.index("<math"):out.index("</math>") + len("</math>")]
    assert fromstring(inline).find(f".//{MATHML}msqrt") is not None


@pytest.mark.parametrize("text", [
    "`q $a$ k` and\n```python\nprice = '$5 $6'\n```\n",  # code spans and fenced blocks are code
    "costs \\$5 and \\$6",  # escaped dollars
    "between $5 and $6 dollars",  # a closing dollar followed by a digit is a price, not math (as pandoc reads it)
    "unreadable $\\frac{$ TeX",  # what the converter cannot read stays as written
])
def test_what_is_not_math_stays_as_written(text):
    assert markdown_with_mathml(text) == text


def test_math_next_to_code_is_still_converted():
    out = markdown_with_mathml("`x$` then $y$")
    assert out.startswith("`x$` then <math ")


@pytest.mark.parametrize("tex", ["\\text{<script>alert(1)</script>}", "\\text{&#x3C;img src=x onerror=alert(1)>}",
                                 "a < b \\text{&} c"])
def test_no_tex_becomes_markup(tex):
    out = tex_to_mathml(tex, display=False)
    tags = {el.tag.replace(MATHML, "") for el in fromstring(out).iter()}  # it parses as XML: the text is escaped
    assert tags <= {"math", "mrow", "mi", "mo", "mn", "mtext", "mspace"}, tags
    assert "<script" not in out and "<img" not in out


def test_markdown_characters_inside_math_are_not_read_as_markdown():
    out = tex_to_mathml("a * b * c_{1} [x]", display=False)
    assert "*" not in out and "_" not in out and "[" not in out


def test_every_math_span_of_the_assignments_converts():
    spans = failed = 0
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                source = "".join(cell["source"])
                spans += source.count("$")
                out = markdown_with_mathml(source)
                failed += out.count("$")
    assert spans > 200 and failed == 0, f"{failed} dollar signs of {spans} left as TeX"


def test_the_course_keeps_nbgraders_template_names():
    """The course's configuration adds its template folder and names no template: nbgrader's own choices stand,
    "feedback" for feedback pages and "formgrade" for the formgrader's grading view (a template named in the
    configuration would replace both)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert "template_name" not in config.HTMLExporter
    basedirs = config.HTMLExporter.extra_template_basedirs
    assert Path(basedirs[0]) == ROOT / "grader" / "templates" and (Path(basedirs[0]) / "feedback").is_dir()
    assert not (Path(basedirs[0]) / "formgrade").exists(), "the formgrader's grading view keeps nbgrader's template"
