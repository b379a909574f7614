"""The built book as a reader gets it: served over http, read in headless Chromium with the network cut.

Every page in _toc.yml (each chapter's index, notebooks and exercise, the root page, the back matter) is
loaded from a local server in Chromium started with background networking off, host resolution disabled
for every host but 127.0.0.1, and every request to another host aborted and recorded. Each page must
then have its math typeset by the MathJax the book serves itself (no TeX left raw, no MathJax error),
the figures of its notebook's stored outputs present, every image loaded, every figure described by an
alt text, no request off the machine, no failed load, no script error, the theme's CSS applied, no
harness text in sight (nbval's markers, COURSE_SEED, the "Running on" line of a set-up cell, which the
book folds, a claim's raw "[measured ...]" check, which a finding folds); a screenshot of what a reader
first sees is saved per page (under pytest's tmp_path; the checks above read the whole page's DOM, and a
full-page image made the test 60% slower). The page also teaches before it checks (issue 43): no code a
reader sees calls the checking helpers (``claim(``, ``check(``, ``quote(``), nothing a reader sees is
cut off (no code block, printed output or finding wider than its column at 1280 px; on the chapters'
pages the code also fits without the stylesheet's wrapping, so no line of it wraps), the first screen
under the title is prose, and every finding reads as a sentence with its number. Sphinx's search must
find chapters from its local index. Without a browser: every relative link, and every #fragment, of
every built page resolves inside the build, no reference is left unresolved, and no page or stylesheet
names a script, style or font on another host.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
import yaml
from playwright.sync_api import sync_playwright

from nbtools import ROOT

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"  # Debian's; playwright must never download a browser
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    # No name resolves but the local server's address: nothing can leave the machine even if a
    # request escaped the route below.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
LOCAL_HOST = "127.0.0.1"
# Schemes that never go to the network.
LOCAL_SCHEMES = {"data", "blob", "about"}
MATHJAX_TIMEOUT_MS = 30_000
IMAGES_TIMEOUT_MS = 15_000


# --- what the book contains, from _toc.yml and the sources ------------------------------------------


def _toc_files(node) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        if "file" in node:
            out.append(node["file"])
        for value in node.values():
            if isinstance(value, (list, dict)):
                out += _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            out += _toc_files(item)
    return out


def toc_pages() -> list[str]:
    """Every page in _toc.yml, root first, as docnames (no suffix)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"], *_toc_files(toc)]


def chapters() -> list[str]:
    """The chapters/<slug> folders that _toc.yml lists."""
    return sorted({"/".join(p.split("/")[:2]) for p in toc_pages() if p.startswith("chapters/")})


def source_of(docname: str) -> Path | None:
    for suffix in (".ipynb", ".md"):
        if (ROOT / f"{docname}{suffix}").exists():
            return ROOT / f"{docname}{suffix}"
    return None


# Display math, an environment, or inline $...$ (dollarmath: no space inside the dollars).
SOURCE_MATH = re.compile(r"\$\$|\\begin\{|(?<![\\$])\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)")
CODE_SPANS = re.compile(r"```.*?```|~~~.*?~~~|`[^`\n]*`", re.S)


def source_has_math(docname: str) -> bool:
    src = source_of(docname)
    if src is None:
        return False
    if src.suffix == ".ipynb":
        nb = nbformat.read(src, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        text = src.read_text()
    return bool(SOURCE_MATH.search(CODE_SPANS.sub("", text)))


#: what keeps the pages true but is not for a reader: nbval's markers, the seed's variable, the device line, a
#: claim's raw check (a claim shows as a finding, its check folded: course_lib.experiment.Claim.html)
HARNESS_TEXT = ("NBVAL", "COURSE_SEED", "Running on:", "[measured")
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
HIDDEN_OUTPUT_TAGS = {"remove-output", "remove-cell", "remove_output", "remove_cell"}


def shown_outputs(docname: str) -> list[dict]:
    """The stored outputs a page shows: every output of its notebook's code cells but those the book hides."""
    src = source_of(docname)
    if src is None or src.suffix != ".ipynb":
        return []
    nb = nbformat.read(src, as_version=4)
    return [out for cell in nb.cells
            if cell.cell_type == "code" and not HIDDEN_OUTPUT_TAGS & set(cell.metadata.get("tags", []))
            for out in cell.get("outputs", [])]


def source_findings(docname: str) -> int:
    """How many claims the stored outputs of a notebook show as findings (course_lib.experiment.Claim.html)."""
    return sum("".join(out.get("data", {}).get("text/html", "")).count('class="course-claim"')
               for out in shown_outputs(docname))


def source_figures(docname: str) -> int:
    """How many figures the stored outputs of a notebook show (chapter notebooks keep theirs)."""
    return sum(any(m in out.get("data", {}) for m in IMAGE_MIMES) for out in shown_outputs(docname))


# Every page in _toc.yml: each chapter's index, notebooks and exercise, the root page, the back matter.
PAGES = toc_pages()


def test_every_chapter_is_read_in_the_browser():
    """The browser test below covers a notebook page of every chapter the toc lists."""
    read = {p for p in PAGES if source_of(p) is not None and source_of(p).suffix == ".ipynb"}
    missing = [c for c in chapters() if not any(p.startswith(c + "/") for p in read)]
    assert chapters(), "_toc.yml lists no chapters/<slug>/ pages"
    assert not missing, f"chapters with no notebook page read in the browser: {missing}"


# --- a local server and one offline Chromium ------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


@pytest.fixture(scope="module")
def site(built):
    """The built book over http on 127.0.0.1, on a free port, for the module."""
    handler = functools.partial(_QuietHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{LOCAL_HOST}:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class Reader:
    """One Chromium context whose requests to any host but 127.0.0.1 are aborted and recorded."""

    def __init__(self, context, base: str):
        self.context = context
        self.base = base
        self.off_host: list[str] = []
        context.route("**/*", self._gate)

    def _gate(self, route):
        url = urlsplit(route.request.url)
        if url.scheme in LOCAL_SCHEMES or url.hostname == LOCAL_HOST:
            route.continue_()
        else:
            self.off_host.append(route.request.url)
            route.abort()

    def open(self, path: str):
        """Load base+path; returns (page, log) with what went wrong while it loaded."""
        self.off_host.clear()
        log = {"console_errors": [], "page_errors": [], "failed": [], "bad_status": [], "off_host": self.off_host}
        page = self.context.new_page()
        page.on("console", lambda m: m.type == "error" and log["console_errors"].append(m.text))
        page.on("pageerror", lambda e: log["page_errors"].append(str(e)))
        page.on("requestfailed", lambda r: log["failed"].append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and log["bad_status"].append(f"{r.url} ({r.status})"))
        page.goto(self.base + path, wait_until="load")
        return page, log


@pytest.fixture(scope="module")
def reader(site):
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        context.set_default_timeout(30_000)
        yield Reader(context, site)
        context.close()
        browser.close()


# --- every page, in the browser ------------------------------------------------------------------

WAIT_FOR_MATHJAX = """async (ms) => {
  const mj = window.MathJax;
  if (!mj || !mj.startup || !mj.startup.promise) return "absent";
  const timeout = new Promise(resolve => setTimeout(() => resolve("timeout"), ms));
  return Promise.race([mj.startup.promise.then(() => "typeset"), timeout]);
}"""

# Lazy images would wait for a scroll: load them all now, and give up after ms.
WAIT_FOR_IMAGES = """async (ms) => {
  const images = [...document.images];
  images.forEach(img => { img.loading = "eager"; });
  const loaded = Promise.all(images.map(img => img.complete ? null :
      new Promise(resolve => { img.addEventListener("load", resolve); img.addEventListener("error", resolve); })));
  await Promise.race([loaded, new Promise(resolve => setTimeout(resolve, ms))]);
}"""

# What the reader sees of the page: visible text outside code, each typeset formula as MATH.
VISIBLE_PROSE = """(placeholder) => {
  const skip = "pre, code, script, style, noscript, textarea, .highlight";
  const parts = [];
  const walk = node => {
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) parts.push(child.nodeValue);
      else if (child.nodeType !== Node.ELEMENT_NODE || child.matches(skip) || !child.checkVisibility()) continue;
      else if (child.localName === "mjx-container") parts.push(placeholder);
      else walk(child);
    }
  };
  walk(document.body);
  return parts.join("");
}"""
MATH = "\u27e8math\u27e9"

PAGE_FACTS = """() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  // The TeX behind a rendered formula, to name it in a failure.
  const doc = window.MathJax && MathJax.startup && MathJax.startup.document;
  const items = doc && doc.math ? Array.from(doc.math) : [];
  const tex = el => {
    const item = items.find(i => i.typesetRoot === el.closest("mjx-container"));
    return item ? item.math : el.textContent;
  };
  return {
    mathjax: document.querySelectorAll("mjx-container").length,
    math_sources: document.querySelectorAll(".math").length,
    errors: [...document.querySelectorAll("mjx-merror")].map(e =>
        `${e.getAttribute("data-mjx-error") || "error"} in ${tex(e)}`),
    // noundefined shows an unknown macro as its name in red rather than as an error node
    undefined_macros: [...document.querySelectorAll('mjx-container [style*="color: red"]')].map(tex),
    images: [...document.images].map(img => ({
      src: img.getAttribute("src"), complete: img.complete, width: img.naturalWidth,
      alt: img.getAttribute("alt"), content: !!(article && article.contains(img)),
    })),
    theme_css: getComputedStyle(document.body).getPropertyValue("--pst-color-primary").trim(),
    // each claim as a reader meets it: a finding whose statement and value show, its check folded
    findings: [...document.querySelectorAll("details.course-claim")].filter(d => article && article.contains(d))
        .map(d => ({shown: d.querySelector("summary").getBoundingClientRect().height > 0 && !d.open,
                    value: !!d.querySelector("summary .course-claim-value")})),
  };
}"""

# What a reader meets before the checking (issue 43): the code they see, blocks wider than the column, the
# first screen, and each finding's sentence.
READING_FACTS = """(screen) => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  const shown = e => e.checkVisibility() && e.getBoundingClientRect().height > 0;
  const code = [...article.querySelectorAll(".cell_input pre, div.highlight pre")].filter(shown);
  const calls = code.map(p => p.innerText).filter(t => /(^|[^\\w.])(claim|check|quote)\\(/.test(t))
      .map(t => t.slice(0, 80));
  const wide = sel => [...article.querySelectorAll(sel)].filter(shown)
      .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right
                   > article.getBoundingClientRect().right + 1)
      .map(e => `${e.scrollWidth}px in ${e.clientWidth}px: ${e.innerText.split("\\n")[0].slice(0, 60)}`);
  const title = article.querySelector("h1");
  const below = title ? title.getBoundingClientRect().bottom : 0;
  const candidates = [...article.querySelectorAll(
      "p, ul, ol, dl, div.cell, figure, table, pre, div.admonition, details, img, section > div")]
      .filter(shown).filter(e => e.getBoundingClientRect().top >= below - 1);
  candidates.sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
  const first = candidates[0];
  // prose: text, not code, a code cell or its output, a figure, an image or a table
  const isProse = e => !!e && !e.closest("div.cell, pre, figure, table") && !["IMG", "PRE"].includes(e.tagName)
      && e.innerText.trim().length > 0;
  const prose = [...article.querySelectorAll("p, li, dd")].filter(shown)
      .filter(e => !e.closest("div.cell, pre, table, details.course-claim"))
      .filter(e => e.getBoundingClientRect().top < screen)
      .map(e => e.innerText).join(" ");
  const findings = [...article.querySelectorAll("details.course-claim > summary")].map(s => ({
      text: s.innerText.trim(),
      values: [...s.querySelectorAll(".course-claim-value")].map(v => v.innerText)}));
  return {calls, wide: [...wide("pre"), ...wide("details.course-claim > summary"), ...wide("table")],
          first: first ? `${first.tagName.toLowerCase()}.${first.className}: ${first.innerText.slice(0, 60)}` : null,
          first_is_prose: isProse(first), prose_chars: prose.length, findings};
}"""
UNWRAP_CODE = "pre { white-space: pre !important; overflow-wrap: normal !important; }"
#: the visible prose a first screen (1280 x 900) holds under the title, at least
FIRST_SCREEN_PROSE = 150
#: a finding: a sentence (a capital or a digit first, a full stop last) with at least one number in it
FINDING = re.compile(r"^[A-Z0-9'\"(].*\.$", re.S)


def reading_problems(docname: str, facts: dict, unwrapped_wide: list[str]) -> list[str]:
    """What keeps a page from teaching first, from its :data:`READING_FACTS` (and, for a chapter's page, the
    blocks that are too wide with the stylesheet's wrapping of code switched off)."""
    problems = []
    if facts["calls"]:
        problems.append(f"code a reader sees calls the checking helpers: {facts['calls'][:3]}")
    if facts["wide"]:
        problems.append(f"blocks wider than the column at 1280 px (cut off): {facts['wide'][:3]}")
    if unwrapped_wide:
        problems.append(f"code or output that only fits because the stylesheet wraps it: {unwrapped_wide[:3]}")
    if not facts["first_is_prose"]:
        problems.append(f"the first thing under the title is not prose: {facts['first']}")
    if facts["prose_chars"] < FIRST_SCREEN_PROSE:
        problems.append(f"the first screen holds {facts['prose_chars']} characters of prose "
                        f"(fewer than {FIRST_SCREEN_PROSE})")
    for f in facts["findings"]:
        if not FINDING.match(f["text"]) or not any(re.search(r"\d", v) for v in f["values"]):
            problems.append(f"a finding that is not a sentence with its number: {f['text'][:80]!r}")
    return problems


# TeX that MathJax should have replaced: display dollars, environments, \( or \[ delimiters, inline
# $...$ that holds TeX (a backslash, ^, _ or braces); or a dollar left beside a typeset formula (a
# $$ block that the Markdown parser read as inline math, e.g. one not indented inside a list item).
RAW_TEX = re.compile(rf"\$\$|\\begin\{{|\\\(|\\\[|\$[^$\n]{{0,80}}?[\\^_{{}}][^$\n]{{0,80}}?\$|\$\s*{MATH}|{MATH}\s*\$")
FILE_NAME = re.compile(r"^\S*\.(png|jpe?g|gif|svg|webp|pdf)$|/_images/|^_images/", re.I)
FAILED_LOAD = re.compile(r"Failed to load|net::ERR_|ERR_NAME_NOT_RESOLVED|404", re.I)


def _excerpts(text: str, pattern: re.Pattern, n: int = 5) -> list[str]:
    return [" ".join(text[max(0, m.start() - 40):m.end() + 40].split()) for m in list(pattern.finditer(text))[:n]]


@pytest.mark.parametrize("docname", PAGES)
def test_page_reads_offline(docname, reader, tmp_path):
    page, log = reader.open(f"{docname}.html")
    try:
        mathjax = page.evaluate(WAIT_FOR_MATHJAX, MATHJAX_TIMEOUT_MS)
        page.evaluate(WAIT_FOR_IMAGES, IMAGES_TIMEOUT_MS)
        facts = page.evaluate(PAGE_FACTS)
        reading = page.evaluate(READING_FACTS, page.viewport_size["height"])
        unwrapped_wide = []
        if docname.startswith("chapters/"):  # the chapters' code is written to fit unwrapped
            style = page.add_style_tag(content=UNWRAP_CODE)
            unwrapped_wide = page.evaluate(READING_FACTS, page.viewport_size["height"])["wide"]
            style.evaluate("e => e.remove()")
        prose = page.evaluate(VISIBLE_PROSE, MATH)
        shown = page.evaluate("() => document.body.innerText")  # what a reader sees, code included, folds shut
        shot = tmp_path / f"{docname.replace('/', '__')}.png"
        page.screenshot(path=str(shot))
    finally:
        page.close()

    problems: list[str] = []
    # (a) math typeset by the book's own MathJax, nothing raw, no error
    expects_math = source_has_math(docname) or facts["math_sources"] > 0
    if expects_math:
        if mathjax != "typeset":
            problems.append(f"MathJax did not finish typesetting ({mathjax})")
        if facts["mathjax"] == 0:
            problems.append("the source has math but the page has no mjx-container")
    raw = _excerpts(prose, RAW_TEX)
    if raw:
        problems.append(f"TeX left untypeset in the visible text: {raw}")
    if facts["errors"]:
        problems.append(f"MathJax errors: {facts['errors'][:5]}")
    if facts["undefined_macros"]:
        problems.append(f"undefined TeX macros: {facts['undefined_macros'][:5]}")
    # (b) every image loaded; every figure in the article described
    figures = sum(i["content"] for i in facts["images"])
    if figures < source_figures(docname):
        problems.append(f"{figures} figure(s) on the page, the notebook's stored outputs have "
                        f"{source_figures(docname)}")
    broken = [i["src"] for i in facts["images"] if not (i["complete"] and i["width"] > 0)]
    if broken:
        problems.append(f"images that did not load: {broken}")
    no_alt = [i["src"] for i in facts["images"]
              if i["content"] and (not (i["alt"] or "").strip() or FILE_NAME.search(i["alt"].strip()))]
    if no_alt:
        problems.append(f"{len(no_alt)} figure(s) without an alt text (empty, or a file name): {no_alt}")
    # (c) nothing left the machine, nothing failed to load, no script broke
    if log["off_host"]:
        problems.append(f"requests to another host: {sorted(set(log['off_host']))}")
    if log["failed"] or log["bad_status"]:
        problems.append(f"failed loads: {log['failed'] + log['bad_status']}")
    load_errors = [m for m in log["console_errors"] if FAILED_LOAD.search(m)]
    if load_errors:
        problems.append(f"console errors about loads: {load_errors}")
    if log["page_errors"]:
        problems.append(f"uncaught script errors: {log['page_errors']}")
    if not facts["theme_css"]:
        problems.append("the theme's stylesheet is not applied (--pst-color-primary unset)")
    # (f) every claim of the stored outputs is a finding on the page: statement and value shown, check folded
    expected = source_findings(docname)
    findings = facts["findings"]
    if len(findings) != expected:
        problems.append(f"{len(findings)} finding(s) on the page, the notebook's stored outputs have {expected}")
    hidden = [i for i, f in enumerate(findings) if not (f["shown"] and f["value"])]
    if hidden:
        problems.append(f"findings not shown as statement and value, check folded: {hidden[:5]}")
    # (e) the teaching, not its apparatus: no harness text in sight (the set-up cells are folded)
    harness = [m for m in HARNESS_TEXT if m in shown]
    if harness:
        problems.append(f"harness text a reader sees: {harness}")
    # (g) the page teaches first: no checking in sight, nothing cut off, prose first, findings as sentences
    problems += reading_problems(docname, reading, unwrapped_wide)
    # (d) a screenshot of the page as it opens, not blank
    if shot.stat().st_size < 20_000:
        problems.append(f"the screenshot is nearly empty ({shot.stat().st_size} bytes)")
    assert not problems, f"{docname}.html (screenshot {shot}):\n  " + "\n  ".join(problems)


# --- search ----------------------------------------------------------------------------------------

SEARCH_DONE = """() => {
  const title = document.querySelector("#search-results h2");
  return !!title && title.textContent.startsWith("Search Results");
}"""


def search(reader, query: str):
    page, log = reader.open(f"search.html?q={query.replace(' ', '+')}")
    try:
        page.wait_for_function(SEARCH_DONE)
        links = page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.href)")
        summary = page.inner_text("#search-results p.search-summary")
    finally:
        page.close()
    assert not log["off_host"], f"search made requests to another host: {log['off_host']}"
    assert not (log["failed"] or log["bad_status"]), f"search failed to load: {log['failed'] + log['bad_status']}"
    paths = [urlsplit(link).path.lstrip("/") for link in links]
    return paths, summary


def test_search_finds_attention_across_chapters(reader):
    paths, summary = search(reader, "attention")
    chapter_pages = {p for p in paths if p.startswith("chapters/")}
    chapter_dirs = {"/".join(p.split("/")[:2]) for p in chapter_pages}
    assert len(chapter_pages) >= 5 and len(chapter_dirs) >= 3, (
        f"'attention' should find pages of several chapters; found {paths} ({summary!r})")


def test_search_finds_the_one_chapter_of_a_specific_term(reader):
    paths, summary = search(reader, "shifted window")
    assert paths, f"'shifted window' found nothing ({summary!r})"
    assert any(p.startswith("chapters/11-swin/") for p in paths[:3]), (
        f"'shifted window' should list the Swin chapter among its first three results; got {paths[:5]}")


def test_search_for_nonsense_says_so(reader):
    paths, summary = search(reader, "qzxwvplorbsnarf")
    assert paths == []
    assert "did not match any documents" in summary, summary


# --- links, references and remote resources, without a browser -----------------------------------

EXTERNAL_SCHEMES = {"http", "https", "mailto", "javascript", "data", "tel", "ftp"}
# rel values of <link> that never make the browser fetch anything
NON_FETCHING_RELS = {"canonical", "alternate", "author", "license", "help", "next", "prev", "search", "index", "me"}
REMOTE = re.compile(r"^\s*(?:https?:)?//", re.I)
# A URL on another host inside an inline script (e.g. a loader naming a CDN).
INLINE_REMOTE = re.compile(r"""["'`]((?:https?:)?//[^"'`\s]+)""")
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
CSS_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?["']?([^"')\s;]+)""", re.I)
CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)""", re.I)


class PageParser(HTMLParser):
    """Ids, links, remote resources and unresolved references of one HTML page."""

    LINK_ATTRS = {"href", "src", "action", "poster", "data"}
    FETCHING_TAGS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "video": "src",
                     "audio": "src", "embed": "src", "object": "data", "track": "src", "input": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.remote: list[str] = []
        self.unresolved: list[str] = []
        self._open_a = 0
        self._xref_text = False  # the next text is an unresolved reference's
        self._in: str | None = None  # "script" or "style" while inside an inline one
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        for attr in self.LINK_ATTRS & a.keys():
            self.links.append((tag, attr, a[attr]))
        if tag == "meta" and a.get("http-equiv", "").lower() == "refresh":
            m = re.search(r"url=(.+)$", a.get("content", ""), re.I)
            if m:
                self.links.append((tag, "content", m.group(1).strip("'\" ")))
        fetched = self.FETCHING_TAGS.get(tag)
        if fetched and REMOTE.match(a.get(fetched, "")):
            self.remote.append(f"<{tag} {fetched}={a[fetched]}>")
        if tag == "link" and REMOTE.match(a.get("href", "")):
            rels = set(a.get("rel", "").lower().split())
            if not rels <= NON_FETCHING_RELS or not rels:
                self.remote.append(f"<link rel={a.get('rel')} href={a['href']}>")
        if "style" in a:
            self.remote += [f"style=url({u})" for u in CSS_URL.findall(a["style"]) if REMOTE.match(u)]
        if tag == "a":
            self._open_a += 1
        # Sphinx marks a cross-reference "xref"; resolved ones sit inside an <a>, unresolved ones do not.
        if "xref" in a.get("class", "").split() and not self._open_a:
            self.unresolved.append(f'<{tag} class="{a["class"]}">')
            self._xref_text = True
        if tag in ("script", "style") and not a.get("src"):
            self._in, self._text = tag, []

    def handle_endtag(self, tag):
        if tag == "a" and self._open_a:
            self._open_a -= 1
        if tag == self._in:
            body = "".join(self._text)
            if tag == "style":
                self.remote += [f"<style> {u}" for u in css_remote_urls(body)]
            else:
                self.remote += [f"<script> naming {u}" for u in INLINE_REMOTE.findall(body)]
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text.append(data)
        elif self._xref_text and data.strip():
            self.unresolved[-1] += f" {data.strip()}"
            self._xref_text = False


def css_remote_urls(css: str) -> list[str]:
    css = CSS_COMMENT.sub("", css)
    return [u for u in CSS_IMPORT.findall(css) + CSS_URL.findall(css) if REMOTE.match(u)]


def built_pages(html: Path) -> list[Path]:
    # _static/ holds the theme's own files; its *.html (webpack-macros.html, sbt-webpack-macros.html)
    # are Jinja macro templates the theme copies there, never pages a reader opens. _sources/ holds
    # the page sources (.ipynb/.md), no HTML. Every other page is checked, genindex and search too.
    return sorted(p for p in html.rglob("*.html") if "_static" not in p.relative_to(html).parts)


@functools.lru_cache(maxsize=None)
def parse(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser


def test_internal_links_and_references_resolve(built):
    root = built.resolve()
    broken: list[str] = []
    pages = built_pages(root)
    assert len(pages) > 20, f"only {len(pages)} pages in {built}"
    for page in pages:
        where = page.relative_to(root)
        parsed = parse(page)
        for ref in parsed.unresolved:
            broken.append(f"{where}: unresolved reference ({ref})")
        for tag, attr, value in parsed.links:
            url = urlsplit(value.strip())
            if url.scheme.lower() in EXTERNAL_SCHEMES or url.netloc or value.strip().startswith("//"):
                continue
            if url.scheme:
                broken.append(f"{where}: <{tag} {attr}={value}> (unknown scheme)")
                continue
            if url.path.startswith("/"):
                broken.append(f"{where}: <{tag} {attr}={value}> (absolute path: breaks when the book is not at /)")
                continue
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(root) or not target.is_file():
                broken.append(f"{where}: <{tag} {attr}={value}> (no such file)")
                continue
            fragment = unquote(url.fragment)
            if fragment and target.suffix == ".html" and fragment not in parse(target).ids:
                broken.append(f"{where}: <{tag} {attr}={value}> (no id {fragment!r} in {target.relative_to(root)})")
    assert not broken, f"{len(broken)} broken internal links or references:\n" + "\n".join(broken)


def test_no_page_or_stylesheet_loads_from_another_host(built):
    remote: list[str] = []
    for page in built_pages(built):
        remote += [f"{page.relative_to(built)}: {r}" for r in parse(page).remote]
    for css in sorted((built / "_static").rglob("*.css")):
        urls = css_remote_urls(css.read_text(encoding="utf-8"))
        remote += [f"{css.relative_to(built)}: @import/url() {u}" for u in urls]
    # One line per distinct finding, with how many files have it.
    counts: dict[str, list[str]] = {}
    for line in remote:
        where, what = line.split(": ", 1)
        counts.setdefault(what, []).append(where)
    summary = [f"{what}  ({len(set(ws))} files, e.g. {ws[0]})" for what, ws in counts.items()]
    assert not remote, "resources on another host:\n" + "\n".join(summary)
