"""`make feedback` for a class with a hostile learner and a learner whose notebook cannot be rendered (issue 49).

A scratch course with the course's nbgrader_config.py and one assignment, its gradebook made with nbgrader's
API, and autograded notebooks written in place of `make grade`'s (what is tested is the page, not the grading):
alice and bob are honest; mallory's notebook attacks whoever renders it (tests/hostile_pages.py: markdown, raw
cells, outputs, attachments, metadata, a missing attachment); oscar's gradebook record is gone and trudy's
notebook is one nbconvert cannot read. Every other learner gets their page and the LMS zip, the two are named,
and the command exits 1.

Then Debian's Chromium (headless, through playwright) loads mallory's pages from a local server, with a second
local listener as the payloads' beacon: the feedback page, and the formgrader's grading view (nbgrader's
"formgrade" template, rendered as the formgrader renders it from the same configuration). No script of
mallory's runs, no request reaches the beacon, the page makes no request but itself (the feedback) and nothing
of the learner's page loads, navigates or takes input, while the honest part (a heading, math, a table, code,
an attached image) is still shown. The same checks, on the page nbconvert renders without the course's renderer,
see the attack: they are able to fail.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest
from hostile_pages import HONEST_TEXT, MARK, PAGE_STATE, hostile_notebook, unrenderable_notebook, write_notebook
from nbgrader.api import Gradebook
from playwright.sync_api import sync_playwright

from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "pages", "pages"
HONEST = ("alice", "bob")
CHROMIUM = "/usr/bin/chromium"  # Debian's; playwright never downloads a browser
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]  # nothing leaves the machine
SETTLE_MS = 1500  # after the load event: time for an image's handler, a refresh or a late request


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


class _Beacon(http.server.BaseHTTPRequestHandler):
    """Records every request that reaches it: any is a payload that worked."""

    def _answer(self):
        self.server.heard.append(f"{self.command} {self.path}")
        self.send_response(204)
        self.end_headers()

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, format, *args):  # noqa: A002
        pass


def _serve(handler) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.heard = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def beacon():
    server = _serve(_Beacon)
    yield server
    server.shutdown()
    server.server_close()


def beacon_url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/beacon"


@pytest.fixture(scope="module")
def course(tmp_path_factory, beacon):
    """The scratch course after `make feedback`: yields (course, the command's result)."""
    course = tmp_path_factory.mktemp("feedback-course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    source = nbformat.v4.new_notebook()
    source.cells = [nbformat.v4.new_markdown_cell("# Pages\n\nScale by $1/\\sqrt{d}$."),
                    nbformat.v4.new_code_cell("x = 1")]
    (course / "solutions" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(source, course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    work = {"alice": source, "bob": source, "mallory": hostile_notebook(beacon_url(beacon), invalid=True),
            "oscar": source, "trudy": unrenderable_notebook()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # alembic, by name
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            gb.update_or_create_assignment(ASSIGNMENT)
            gb.update_or_create_notebook(NOTEBOOK, ASSIGNMENT)
            for student in work:
                gb.update_or_create_student(student)
                if student != "oscar":  # oscar's record is gone from the gradebook
                    gb.add_submission(ASSIGNMENT, student)
    for student, nb in work.items():
        for part in ("submitted", "autograded"):
            folder = course / part / student / ASSIGNMENT
            folder.mkdir(parents=True)
            write_notebook(nb, folder / f"{NOTEBOOK}.ipynb")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run([sys.executable, "-m", "classroom.feedback", "--root", str(course)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    return course, res


def page_of(course: Path, student: str) -> Path:
    return course / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html"


def test_one_learners_unrenderable_notebook_ends_only_their_feedback_named(course):
    course, res = course
    said = res.stdout + res.stderr
    assert res.returncode == 1, said
    assert "no feedback page for oscar (nbgrader.api.MissingEntry: No such submitted notebook" in res.stderr, said
    assert ("no feedback page for trudy (AttributeError: 'NoneType' object has no attribute 'get')"
            in res.stderr), said
    for student in (*HONEST, "mallory"):
        assert page_of(course, student).is_file(), f"{student} has no page: {said}"
    assert not page_of(course, "oscar").exists() and not page_of(course, "trudy").exists()
    with zipfile.ZipFile(course / "exports" / f"feedback-{ASSIGNMENT}.zip") as zf:
        assert sorted(zf.namelist()) == [f"{s}/{NOTEBOOK}.html" for s in ("alice", "bob", "mallory")]
        assert zf.read(f"mallory/{NOTEBOOK}.html") == page_of(course, "mallory").read_bytes()
    assert f"{ASSIGNMENT}: feedback for 3 notebook(s)" in res.stdout, said


def test_a_page_holds_no_script_and_a_missing_attachment_is_text(course):
    course, _ = course
    for student in (*HONEST, "mallory"):
        page = page_of(course, student).read_text()
        assert "<script" not in page.lower() and "<iframe" not in page.lower() and "<form" not in page.lower()
    alice = page_of(course, "alice").read_text()
    assert "<math" in alice and "\\sqrt" not in alice, "the honest page lost its math"
    assert "no image attached as 'missing.png'" in page_of(course, "mallory").read_text()


# --- in Chromium ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chromium():
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (tools/system_packages.sh installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def pages(course, beacon, tmp_path_factory):
    """mallory's pages over http: the feedback, the formgrader's view, and the control (nbconvert's own
    rendering, without the course's renderer); yields ({name: url}, the server)."""
    course, _ = course
    folder = tmp_path_factory.mktemp("served")
    server = _serve(functools.partial(_Quiet, directory=str(folder)))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    shutil.copy(page_of(course, "mallory"), folder / "feedback.html")
    (folder / "formgrade.html").write_text(formgrade(hostile_notebook(beacon_url(beacon)), base, course=True))
    (folder / "control.html").write_text(formgrade(hostile_notebook(beacon_url(beacon), missing_attachment=False),
                                                   base, course=False))
    yield {name: f"{base}/{name}.html" for name in ("feedback", "formgrade", "control")}, server
    server.shutdown()
    server.server_close()


def formgrade(nb, base_url: str, course: bool) -> str:
    """The formgrader's grading view of ``nb``: an HTMLExporter from nbgrader_config.py with the "formgrade"
    template, as nbgrader's formgrader builds it (``course``: with the course's renderer; else without)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    config.HTMLExporter.template_name = "formgrade"
    if not course:  # what nbconvert and nbgrader do alone: the finding
        for key in ("preprocessors", "filters"):
            config.HTMLExporter.pop(key, None)
    assert Path(config.HTMLExporter.extra_template_basedirs[1]) == (Path(nbgrader.__file__).parent /
                                                                    "server_extensions/formgrader/templates")
    resources = {"assignment_id": ASSIGNMENT, "notebook_id": NOTEBOOK, "submission_id": "s1", "index": 0,
                 "total": 1, "base_url": base_url, "student": "mallory", "last_name": None, "first_name": None,
                 "notebook_path": "autograded/mallory/pages/pages.ipynb"}
    html, _ = HTMLExporter(config=config).from_notebook_node(nb, resources=resources)
    return html


def load(chromium, url: str) -> tuple[dict, list[str]]:
    """The page's state after it settled, and every URL it requested (its frames' too)."""
    context = chromium.new_context(service_workers="block")
    requested: list[str] = []
    context.on("request", lambda r: requested.append(r.url))
    try:
        page = context.new_page()
        page.goto(url, wait_until="load", timeout=30_000)
        page.wait_for_timeout(SETTLE_MS)
        return page.evaluate(PAGE_STATE, "#notebook-container"), requested  # where nbconvert writes the cells
    finally:
        context.close()


def assert_shows_the_honest_part(state: dict) -> None:
    assert HONEST_TEXT in state["text"] and state["math"] >= 1 and state["tables"] >= 1 and state["code"] > 0, state
    assert state["images"] >= 2, "the attached PNG and the PNG output should show"


def test_the_feedback_page_runs_nothing_of_the_learners_and_asks_for_nothing(course, chromium, pages, beacon):
    urls, _ = pages
    beacon.heard.clear()
    state, requested = load(chromium, urls["feedback"])
    assert state["ran"] is None and MARK not in state["title"], f"a script of the learner's ran: {state['title']}"
    assert beacon.heard == [], f"the page asked the beacon for {beacon.heard}"
    others = [u for u in requested if u != urls["feedback"] and not u.endswith("/favicon.ico")]  # the browser's own
    assert others == [], f"the page asked for more than itself: {others}"
    assert state["url"] == urls["feedback"], "the page went elsewhere"
    assert state["bad"] == [], state["bad"]
    assert_shows_the_honest_part(state)
    assert "no image attached as 'missing.png'" in state["text"]


def test_the_formgraders_view_of_the_learner_runs_nothing_and_asks_the_beacon_for_nothing(chromium, pages, beacon):
    """The formgrader's own page loads its scripts and styles (here from the page's server, where they are
    missing) and MathJax from a CDN (refused: no name resolves); none of the learner's payloads asks for anything."""
    urls, _ = pages
    beacon.heard.clear()
    state, requested = load(chromium, urls["formgrade"])
    assert state["ran"] is None and MARK not in state["title"], f"a script of the learner's ran: {state['title']}"
    assert beacon.heard == [], f"the page asked the beacon for {beacon.heard}"
    assert not [u for u in requested if "beacon" in u], requested
    assert state["url"] == urls["formgrade"] and state["bad"] == [], state["bad"]
    assert_shows_the_honest_part(state)


def test_the_checks_see_the_attack_on_the_page_nbconvert_renders_alone(chromium, pages, beacon):
    """The control: nbgrader's formgrade template through nbconvert's own renderer (HTMLExporter.sanitize_html
    on, as the course had it): the learner's markdown runs, asks the beacon and leaves forms and frames."""
    urls, _ = pages
    beacon.heard.clear()
    state, requested = load(chromium, urls["control"])
    assert state["ran"] is not None or MARK in state["title"], state
    assert beacon.heard, "no payload reached the beacon"
    assert any(b.startswith("<script") for b in state["bad"]) and "<form>" in state["bad"], state["bad"]
