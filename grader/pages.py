"""One renderer for everything a learner wrote that reaches a page: feedback, the LMS zip, the formgrader.

A submission is hostile until it is shown. Its markdown, raw cells, outputs, attachments and metadata are the
learner's to write, and the pages that show them run in someone's browser: ``make feedback``'s pages (which also
go into ``exports/feedback-<assignment>.zip`` for an LMS) in the learner's, and nbgrader's formgrader, which renders
a graded notebook inside the instructor's logged-in JupyterLab, in the instructor's.

**The invariant.** Whatever a notebook holds, what a page shows of it

- runs nothing: no ``<script>``, no event handler (``on*``), no ``javascript:`` or other active URL, no SVG inline;
- fetches nothing and goes nowhere: its only URLs are same-page fragments (``href="#..."``: a link to elsewhere
  keeps its text and loses its target) and images as ``data:image/{png,jpeg,gif,webp,svg+xml};base64`` (an SVG
  drawn by an ``<img>`` runs no script and loads nothing); no ``<base>``, ``<meta>``, ``<link>``, ``<iframe>``,
  ``<object>``, ``<embed>``, ``<form>`` or input, no ``<style>`` and no ``style`` but a table cell's
  ``text-align`` (CSS's ``url()`` and ``@import`` fetch);
- cannot pose as the page around it: ids are prefixed (:data:`ID_PREFIX`, as a fragment link's target is), classes
  are pygments' and markdown's own, cell tags and nbgrader grade ids are plain names, and a number the templates
  write unquoted (an image's width, an execution count) is a number.

**How every template path reaches it** (``nbgrader_config.py`` configures ``HTMLExporter``, which both
nbgrader's ``GenerateFeedback`` and its formgrader build from that file): :func:`clean`, the one sanitizer (nh3,
Rust's ammonia, with the allowlist below), replaces nbconvert's ``clean_html`` filter, which the templates apply to
HTML outputs, markdown outputs, raw cells and highlighted code; :func:`markdown2html` replaces nbconvert's filter
of that name (nbgrader's feedback and formgrade templates render a markdown cell with it and nothing else) and
cleans what it renders, an attachment that is missing or no image shown as text; :class:`ShownSafely`, a
preprocessor of the exporter itself, hands the templates only what they write safely.
"""

from __future__ import annotations

import html
import re
from typing import Any

import nh3
from jinja2 import pass_context
from mistune import HTMLRenderer
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from nbformat import from_dict
from nbformat.v4.nbbase import random_cell_id
from pygments.token import STANDARD_TYPES

#: what every id a learner wrote starts with, so that none is an id of the page's own (the formgrader's inputs)
ID_PREFIX = "user-content-"
#: the images a page shows, as data: URLs only
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")
#: an output's mimetypes that the templates write safely (text escaped, HTML through clean, images as <img>)
OUTPUT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml")

_MATHML = {"math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
           "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mstyle", "mpadded", "mphantom",
           "menclose", "merror", "semantics"}
_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
         "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
         "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary",
         "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var", "wbr"} | _MATHML
#: dropped with everything inside them (the rest of what is not allowed is dropped, its text kept)
_GONE_WITH_CONTENT = {"script", "style", "template", "svg", "iframe", "object", "noscript", "noembed", "noframes",
                      "textarea", "title", "xmp", "select"}
_MATH_ATTRIBUTES = {"display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence",
                    "separator", "form", "lspace", "rspace", "largeop", "movablelimits", "symmetric", "accent",
                    "accentunder", "minsize", "maxsize", "width", "height", "depth", "voffset", "linethickness",
                    "columnalign", "rowalign", "columnlines", "rowlines", "columnspacing", "rowspacing",
                    "displaystyle", "scriptlevel", "notation"}
_ATTRIBUTES = {
    "*": {"id", "title"}, "a": {"href", "class"}, "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "style"}, "th": {"colspan", "rowspan", "style"}, "ol": {"start", "reversed"},
    "li": {"value"}, "details": {"open"}, "span": {"class"}, "div": {"class"}, "pre": {"class"}, "code": {"class"},
    **{tag: set(_MATH_ATTRIBUTES) for tag in _MATHML}, "math": _MATH_ATTRIBUTES | {"xmlns"},
}
#: class names a page may carry: pygments' (highlighted code), markdown's (heading anchors, fenced code's language)
_CLASSES = set(STANDARD_TYPES.values()) - {""} | {"highlight", "hll", "anchor-link"}
_LANGUAGE_CLASS = re.compile(r"(language|hl)-[\w+#.-]{1,40}")
_IMAGE_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/\s]*={0,2}\s*")
_BASE64 = re.compile(r"[A-Za-z0-9+/\s]*={0,2}\s*")
_PLAIN_NUMBER = re.compile(r"\d{1,5}%?")
_TEXT_ALIGN = re.compile(r"\s*text-align\s*:\s*(left|right|center|justify)\s*;?\s*")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # a grade id, a cell tag
_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat's


def _prefixed(name: str) -> str:
    return name if name.startswith(ID_PREFIX) else ID_PREFIX + name


def _attribute(tag: str, name: str, value: str) -> str | None:
    """nh3's per-attribute check: the attribute's value as it may stand, or None to drop it."""
    if name == "id":
        return _prefixed(value)
    if name == "href":  # a same-page fragment, to an id as prefixed above; nothing that leaves the page
        return "#" + _prefixed(value[1:]) if value.startswith("#") else None
    if name == "src":
        return value if _IMAGE_URL.fullmatch(value) else None
    if (tag == "img" and name in ("width", "height")) or name in ("colspan", "rowspan", "start", "value"):
        return value if _PLAIN_NUMBER.fullmatch(value.strip()) else None
    if name == "class":
        kept = [c for c in value.split() if c in _CLASSES or _LANGUAGE_CLASS.fullmatch(c)]
        return " ".join(kept) or None
    if name == "style":
        return value if _TEXT_ALIGN.fullmatch(value) else None
    return value


_CLEANER = nh3.Cleaner(tags=_TAGS, clean_content_tags=_GONE_WITH_CONTENT, attributes=_ATTRIBUTES,
                       attribute_filter=_attribute, url_schemes={"data"},
                       url_relative=lambda url: url if url.startswith("#") else None, strip_comments=True)


def clean(markup: Any) -> str:
    """``markup`` (HTML a learner wrote, or made from what they wrote) with only what the allowlist keeps.

    The one sanitizer of every page; it also stands as nbconvert's ``clean_html`` filter. Its output cleaned again
    shows the same (HTML may drop a newline that opens a ``<pre>``)."""
    text = markup.decode(errors="replace") if isinstance(markup, bytes) else str(markup)
    return _CLEANER.clean(text)


def image_data_url(bundle: Any) -> str | None:
    """A ``data:`` URL for a mime bundle's first image ({mimetype: base64}), None if it holds no image."""
    if not isinstance(bundle, dict):
        return None
    for mimetype in IMAGE_TYPES:
        data = bundle.get(mimetype)
        if isinstance(data, str) and _BASE64.fullmatch(data):
            return f"data:{mimetype};base64,{''.join(data.split())}"
    return None


class _Renderer(IPythonRenderer):
    """nbconvert's markdown renderer, but an attachment that is missing or no image is shown as text."""

    def image(self, text: str, url: str, title: str | None = None) -> str:
        if url.startswith("attachment:"):
            name = url[len("attachment:"):]
            found = image_data_url(self.attachments.get(name))
            if found is None:
                return html.escape(f"[{text or 'image'}: no image attached as {name!r}]")
            url = found
        return HTMLRenderer.image(self, text, url, title)


@pass_context
def markdown2html(context, source: Any) -> str:
    """Markdown as HTML, cleaned; ``![...](attachment:name)`` reads the rendered cell's attachments.

    Replaces nbconvert's filter of the same name (``HTMLExporter.markdown2html``, which raises on a missing
    attachment and leaves the HTML a learner wrote as it is)."""
    cell = context.get("cell")
    attachments = cell.get("attachments") if isinstance(cell, dict) else None
    renderer = _Renderer(escape=False, attachments=attachments if isinstance(attachments, dict) else {})
    return clean(MarkdownWithMath(renderer=renderer).render(str(source or "")))


def _number(value: Any) -> int | float | None:
    """A width or height a template may write unquoted: a positive number, else None."""
    if isinstance(value, str) and _PLAIN_NUMBER.fullmatch(value.strip()) and not value.strip().endswith("%"):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100_000:
        return None
    return int(value) if value == int(value) else value


def _image_metadata(meta: Any) -> dict:
    """Of an image's display metadata, what the templates read, each as they may write it."""
    meta = meta if isinstance(meta, dict) else {}
    out = {k: n for k in ("width", "height") if (n := _number(meta.get(k))) is not None}
    if meta.get("unconfined") is True:
        out["unconfined"] = True
    if meta.get("needs_background") in ("light", "dark"):
        out["needs_background"] = meta["needs_background"]
    if isinstance(meta.get("alt"), str):
        out["alt"] = meta["alt"]
    return out


def _output(out: Any) -> dict | None:
    """An output as the templates may write it, or None to leave it out."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        if out.get("name") not in ("stdout", "stderr"):
            return None
        return {"output_type": kind, "name": out["name"], "text": str(out.get("text", ""))}
    if kind == "error":
        trace = out.get("traceback")
        return {"output_type": kind, "ename": str(out.get("ename", "")), "evalue": str(out.get("evalue", "")),
                "traceback": [str(line) for line in trace] if isinstance(trace, list) else [str(trace or "")]}
    if kind not in ("display_data", "execute_result"):
        return None
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    kept = {}
    for mimetype in OUTPUT_TYPES:
        value = data.get(mimetype)
        if not isinstance(value, str) or mimetype in ("image/png", "image/jpeg") and not _BASE64.fullmatch(value):
            continue
        kept[mimetype] = clean(value) if mimetype == "text/html" else value
    if not kept:
        return None
    meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    metadata = {m: _image_metadata(meta.get(m)) for m in kept if m.startswith("image/")} | _image_metadata(meta)
    safe = {"output_type": kind, "data": kept, "metadata": metadata}
    if kind == "execute_result":
        safe["execution_count"] = _count(out.get("execution_count"))
    return safe


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _attachments(found: Any) -> dict:
    """A markdown cell's attachments that are images, each as the renderer reads it back: {name: {mimetype: base64}}."""
    out = {}
    for name, bundle in found.items() if isinstance(found, dict) else ():
        if url := image_data_url(bundle):
            mimetype, data = url[len("data:"):].split(";base64,", 1)
            out[str(name)] = {mimetype: data}
    return out


def _cell(cell: Any) -> dict | None:
    """A cell as the templates may write it, or None to leave it out (a cell of no known type)."""
    if not isinstance(cell, dict) or cell.get("cell_type") not in ("markdown", "code", "raw"):
        return None
    kind, meta = cell["cell_type"], cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    metadata = {k: meta[k] for k in ("raw_mimetype", "alt") if isinstance(meta.get(k), str)}
    nbgrader = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
    if isinstance(nbgrader.get("grade_id"), str) and _NAME.fullmatch(nbgrader["grade_id"]):
        metadata["nbgrader"] = nbgrader  # the templates write a grade id as it is: a plain name, or no nbgrader cell
    if isinstance(meta.get("tags"), list):
        metadata["tags"] = list(dict.fromkeys(t for t in meta["tags"] if isinstance(t, str) and _NAME.fullmatch(t)))
    source = cell.get("source", "")
    source = "".join(map(str, source)) if isinstance(source, list) else str(source)
    cell_id = cell.get("id")
    safe = {"cell_type": kind, "metadata": metadata, "source": clean(source) if kind == "raw" else source,
            "id": cell_id if isinstance(cell_id, str) and _CELL_ID.fullmatch(cell_id) else random_cell_id()}
    if kind == "markdown":
        safe["attachments"] = _attachments(cell.get("attachments"))
    if kind == "code":
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        safe["outputs"] = [o for o in map(_output, outputs) if o is not None]
        safe["execution_count"] = _count(cell.get("execution_count"))
    return safe


def _notebook_metadata(meta: Any) -> dict:
    """What a page reads of a notebook's own metadata: its kernel's and language's names (highlighting)."""
    meta = meta if isinstance(meta, dict) else {}
    kernel, language = (meta.get(k) if isinstance(meta.get(k), dict) else {} for k in ("kernelspec", "language_info"))
    kernel = {k: kernel[k] for k in ("name", "display_name", "language") if isinstance(kernel.get(k), str)}
    language = {k: language[k] for k in ("name", "pygments_lexer", "file_extension", "mimetype", "version")
                if isinstance(language.get(k), str)}
    return ({"kernelspec": kernel} if {"name", "display_name"} <= set(kernel) else {}) | (
        {"language_info": language} if "name" in language else {})


class ShownSafely(Preprocessor):
    """The notebook as the page templates may show it (see the module's invariant), and valid nbformat whatever
    it was (nbconvert validates the notebook after each preprocessor: an invalid one would raise).

    Registered on ``HTMLExporter`` (``c.HTMLExporter.preprocessors``), it runs in the feedback and in the formgrader.
    In the feedback (nbgrader's converters register no default preprocessor) it is the first to read the notebook,
    before ``GenerateFeedback``'s own; the formgrader's exporter keeps nbconvert's defaults, which are off but
    validate the notebook first, so an invalid one is refused there, not shown."""

    def preprocess(self, nb, resources):
        nb.metadata = from_dict(_notebook_metadata(nb.get("metadata")))
        nb.cells = [from_dict(c) for c in map(_cell, nb.get("cells") or []) if c is not None]
        return nb, resources
