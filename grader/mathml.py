"""Feedback pages whose math reads offline: the markdown's TeX turned into MathML as the page is written.

nbgrader's feedback page loads MathJax from a CDN to typeset ``$...$``, so a
learner without a network (or JupyterLab, which shows an HTML file with its
scripts off) sees raw TeX, and the page fetches from another host. The
course's feedback writes the math as MathML instead (:class:`MathAsMathML`,
one preprocessor of ``GenerateFeedback``): every current browser draws it,
no script and no download involved; the page's template loads no MathJax
(``grader/templates/feedback/mathjax.html.j2``).

What is math is what Jupyter's markdown treats as math: ``$$...$$`` (display)
and ``$...$`` (inline), outside code (fenced blocks and backtick spans), a
``\\$`` being a dollar sign. TeX the converter cannot read stays as it was
written. The learner's own markdown goes through the same conversion: the
MathML is built as an XML tree and written with every text escaped, so no
TeX (``\\text{<script>}``) becomes markup.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import tostring

from latex2mathml.converter import convert_to_element
from nbgrader.preprocessors import NbGraderPreprocessor

#: fenced code blocks, code spans (a run of backticks to the same run), then the two kinds of math
_CODE = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?(?:^(?P=fence)[ \t]*$|\Z)|(?P<ticks>`+).+?(?P=ticks)",
                   re.M | re.S)
_MATH = re.compile(r"(?<![\\$])\$\$(?P<display>.+?)\$\$|(?<![\\$])\$(?P<inline>[^$\n]+?)(?<!\\)\$(?!\d)", re.S)
_ENTITY = re.compile(r"&#x([0-9a-fA-F]+);")
#: characters markdown would read inside the MathML's texts (emphasis, code, links, escapes, math)
_MARKDOWN_SPECIAL = {c: f"&#{ord(c)};" for c in "*_`\\[]$~|"}


def tex_to_mathml(tex: str, display: bool) -> str | None:
    """``tex`` as one ``<math>`` element (one line, every text escaped), None where the converter cannot read it."""
    try:
        root = convert_to_element(tex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - the converter raises many kinds; the TeX then stays as written
        return None
    for node in root.iter():
        # the converter writes its symbols as character references in the text: make them the characters,
        # and let the serialiser escape everything (a learner's "<" or "&#x3C;" stays text)
        node.text = _ENTITY.sub(lambda m: chr(int(m.group(1), 16)), node.text) if node.text else node.text
        node.tail = _ENTITY.sub(lambda m: chr(int(m.group(1), 16)), node.tail) if node.tail else node.tail
    markup = tostring(root, encoding="unicode", short_empty_elements=False)
    return re.sub(r">([^<]+)<", lambda m: ">" + "".join(_MARKDOWN_SPECIAL.get(c, c) for c in m.group(1)) + "<",
                  markup)


def _math_in(text: str) -> str:
    def replace(m: re.Match) -> str:
        display = m.group("display") is not None
        mathml = tex_to_mathml(m.group("display") if display else m.group("inline"), display)
        return m.group(0) if mathml is None else mathml

    return _MATH.sub(replace, text)


def markdown_with_mathml(markdown: str) -> str:
    """``markdown`` with its math as MathML, its code untouched."""
    out, last = [], 0
    for code in _CODE.finditer(markdown):
        out += [_math_in(markdown[last:code.start()]), code.group(0)]
        last = code.end()
    out.append(_math_in(markdown[last:]))
    return "".join(out)


class MathAsMathML(NbGraderPreprocessor):
    """The feedback's markdown cells with their math as MathML (the page then needs no MathJax)."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = markdown_with_mathml(cell.source)
        return nb, resources
