"""A learner's round trip through an exercise in a real JupyterLab, driven in headless Chromium.

`make lab` serves a scratch copy of exercises/02-attention/ (LAB_DIR, so the
learner's edits never touch the repository) and Playwright drives Debian's
Chromium (never a downloaded browser) the way a learner would:

1. the released notebook opens with nbgrader's Validate button in its toolbar;
2. Run > Run All Cells on the untouched exercise stops at the first visible
   test, which shows NotImplementedError: not implemented yet; running the
   remaining cells one by one (Ctrl+Enter) shows the same error in every
   visible test; Validate reports failing tests;
3. the learner pastes the reference solution (the code between the markers of
   solutions/02-attention/attention.ipynb) over each `# YOUR CODE HERE` stub,
   restarts the kernel, runs all cells: no visible test shows an error, the last
   cell (Check your work) says every exercise agrees, and Validate says
   "Success! Your notebook passes all the tests.";
4. the learner plants a mistake (the scores left unscaled), runs that cell and
   Check your work: it names the exercise and the likely mistake grading names.

The page may reach nothing but the lab on 127.0.0.1: every other request is
blocked, recorded and reported. Screenshots of the main steps are left in the
test's tmp_path.
"""

from __future__ import annotations

import re
import runpy
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect, sync_playwright

from labtools import running_lab
from nbtools import ROOT, read_cells

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ASSIGNMENT, NOTEBOOK = "02-attention", "attention.ipynb"
LAB_START_S = 180  # `make lab` until the server answers
KERNEL_MS = 120_000  # a kernel to start, or to restart
RUN_MS = 150_000  # Run All Cells (torch's import alone takes seconds on a busy machine)
VALIDATE_MS = 180_000  # nbgrader validate executes the whole notebook again, server side
UI_MS = 60_000  # anything else the page has to render
START_MS = 20_000  # a cell's prompt to show [*] once Run All Cells is clicked
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

STUB = re.compile(r"^[ \t]*# YOUR CODE HERE\n[ \t]*raise NotImplementedError\([^\n]*\)[ \t]*$", re.M)
#: the mistake planted for Check your work: the catalogue's unscaled scores, and the diagnosis grading gives it
PLANTED = next(e for e in runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{ASSIGNMENT}.py"))["WRONG"]
               if e["exercise"] == "attention_scores" and "not scaled" in e["diagnosis"])
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*(?:\n|\Z)", re.S | re.M)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` on a scratch copy of the exercise: yields (port, token, folder, server log lines).

    The whole process group is stopped afterwards.
    """
    scratch = tmp_path_factory.mktemp("lab")
    folder = scratch / "learner"
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, folder)
    env = dict(
        GRADEBOOK_URL=f"sqlite:///{scratch / 'gradebook.db'}",  # never the instructor's gradebook.db
        # A fresh JupyterLab: no workspace or user setting of whoever runs the tests is restored.
        JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(scratch / "user-settings"),
    )
    with running_lab(f"LAB_DIR={folder}", env=env, start_s=LAB_START_S) as lab:
        yield lab.port, lab.token, folder, lab.log


@pytest.fixture
def browser_page(tmp_path):
    """A headless Debian Chromium page that can reach only 127.0.0.1; yields (page, blocked request URLs)."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with tools/system_packages.sh "
                    "(as root) and run the tests again", pytrace=False)
    blocked: list[str] = []

    def is_local(url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        return parts.scheme in ("data", "blob", "about") or parts.hostname in LOCAL_HOSTS

    def guard(route):
        if is_local(route.request.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("blockedbyclient")

    def guard_socket(ws):
        blocked.append(ws.url)
        ws.close()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
            context.route("**/*", guard)
            context.route_web_socket(lambda url: not is_local(url), guard_socket)
            page = context.new_page()
            page.set_default_timeout(UI_MS)
            yield page, blocked
        finally:
            browser.close()


# What the notebook shows, cell by cell: type, prompt, source (from the editor's lines), outputs, and the
# outputs rendered as stderr (tracebacks and stderr streams). Every cell is in the DOM: JupyterLab's default
# windowing mode (contentVisibility) only skips painting the ones out of view.
CELLS = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    if (!panel) return null;
    return Array.from(panel.querySelectorAll('.jp-Notebook .jp-Cell')).map(c => ({
            type: c.classList.contains('jp-CodeCell') ? 'code' : c.classList.contains('jp-MarkdownCell') ? 'markdown'
                : 'raw',
            prompt: (c.querySelector('.jp-InputPrompt') || {textContent: ''}).textContent.trim(),
            source: Array.from(c.querySelectorAll('.jp-InputArea-editor .cm-line')).map(l => l.textContent).join('\\n'),
            outputs: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => o.textContent).join('\\n'),
            errors: Array.from(c.querySelectorAll(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
                .map(o => o.textContent).join('\\n'),
        }));
}"""

KERNEL_STATUS = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const indicator = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
    return indicator ? indicator.getAttribute('data-status') : null;
}"""

# The text of one cell's editor: CodeMirror's own document where the page exposes it, else its rendered lines.
EDITOR_TEXT = """(cell) => {
    const content = cell.querySelector('.jp-InputArea-editor .cm-content');
    const view = content && content.cmView && content.cmView.view;
    if (view && view.state) return view.state.doc.toString();
    return Array.from(cell.querySelectorAll('.jp-InputArea-editor .cm-line')).map(l => l.textContent).join('\\n');
}"""


def executed(prompt: str) -> bool:
    return re.fullmatch(r"\[\d+\]:", prompt) is not None


class Learner:
    """The page, with the few gestures a learner makes and what the notebook shows after each."""

    def __init__(self, page, shots: Path, blocked: list[str], log: list[str]):
        self.page, self.shots, self.n_shots = page, shots, 0
        self.blocked, self.log = blocked, log

    def cells(self) -> list[dict]:
        return self.page.evaluate(CELLS) or []

    def cell(self, i: int):
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(i)

    def describe(self) -> str:
        """The notebook as text, for assertion messages."""
        lines = [f"kernel: {self.page.evaluate(KERNEL_STATUS)}"]
        for i, c in enumerate(self.cells()):
            lines.append(f"--- cell {i} ({c['type']}) {c['prompt']}\n{c['source'][:300]}")
            if c["outputs"]:
                lines.append(f">>> output:\n{c['outputs'][-800:]}")
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count():
            lines.append(f"--- dialog:\n{dialog.first.inner_text()[:2000]}")
        if self.blocked:
            lines.append(f"--- requests blocked (not to the lab): {sorted(set(self.blocked))}")
        lines.append("--- the end of the lab's log:\n" + "".join(self.log[-30:]))
        return "\n".join(lines)

    def shot(self, name: str, show=None) -> None:
        """A screenshot of the page into tmp_path, after bringing the locator `show` into view."""
        if show is not None:
            show.scroll_into_view_if_needed()
            expect(show).to_be_in_viewport()
        # Two animation frames: the notebook paints the cells it skipped while they were out of view.
        self.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        self.n_shots += 1
        self.page.screenshot(path=str(self.shots / f"{self.n_shots:02d}-{name}.png"))

    def wait_until(self, js: str, arg, timeout_ms: int, what: str) -> None:
        try:
            self.page.wait_for_function(js, arg=arg, timeout=timeout_ms, polling=250)
        except PlaywrightTimeout:
            self.shot("timeout")
            pytest.fail(f"timed out after {timeout_ms / 1000:.0f} s waiting for {what}; the notebook:\n"
                        f"{self.describe()}", pytrace=False)

    def wait_kernel_idle(self, timeout_ms: int = KERNEL_MS) -> None:
        self.wait_until(f"() => ({KERNEL_STATUS})() === 'idle'", None, timeout_ms, "an idle kernel")

    def wait_run_finished(self, must_run: list[int], timeout_ms: int = RUN_MS) -> None:
        """Until the kernel is idle, no cell shows [*] and the cells in must_run show an execution count."""
        js = f"""(mustRun) => {{
            const cells = ({CELLS})();
            if (!cells || ({KERNEL_STATUS})() !== 'idle') return false;
            if (cells.some(c => c.prompt === '[*]:')) return false;
            return mustRun.every(i => /^\\[\\d+\\]:$/.test(cells[i].prompt));
        }}"""
        self.wait_until(js, must_run, timeout_ms, f"cells {must_run} to run and the kernel to be idle")

    def menu(self, menu: str, item: str) -> None:
        """Click a main-menu entry: menu bar label, then the item's exact label (an ellipsis may follow it).

        The item must be enabled when it is clicked, and the menu must close after the click (the click
        reached the item); then the page has no menu open.
        """
        self.menus_closed()
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(rf"^{re.escape(menu)}$")).click()
        entry = self.page.locator(".lm-Menu .lm-Menu-item:not(.lm-mod-disabled)",
                                  has=self.page.locator(".lm-Menu-itemLabel",
                                                        has_text=re.compile(rf"^{re.escape(item)}…?$")))
        try:
            entry.first.wait_for(state="visible", timeout=UI_MS)
        except PlaywrightTimeout:
            self.shot("menu-item")
            pytest.fail(f"{menu} > {item} is not an enabled menu entry:\n{self.describe()}", pytrace=False)
        entry.first.click()
        self.menus_closed()

    def menus_closed(self) -> None:
        self.wait_until("() => document.querySelectorAll('.lm-Menu').length === 0", None, UI_MS, "no open menu")

    def run_all(self, must_run: list[int]) -> None:
        """Run > Run All Cells, until the cells in must_run have run and the kernel is idle.

        A run that has started shows [*] or a number on its first cell at once (the page sets the prompt
        when it sends the request). If no cell shows it within START_MS the menu click did not reach
        JupyterLab: it is made once more, and said so in the test's output.
        """
        started = "(i) => /^\\[(\\*|\\d+)\\]:$/.test(((" + CELLS + ")() || [])[i]?.prompt || '')"
        for attempt in (1, 2):
            self.menu("Run", "Run All Cells")
            try:
                self.page.wait_for_function(started, arg=must_run[0], timeout=START_MS, polling=100)
                break
            except PlaywrightTimeout:
                if attempt == 2:
                    self.shot("run-all-not-started")
                    pytest.fail(f"Run All Cells started no cell, twice:\n{self.describe()}", pytrace=False)
                print(f"Run All Cells started no cell within {START_MS / 1000:.0f} s; clicking it again")
        self.wait_run_finished(must_run)

    def validate(self) -> str:
        """Click nbgrader's Validate and return the text of the dialog it opens (closing it)."""
        self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .validate-button").click()
        dialog = self.page.locator(".jp-Dialog")
        try:
            dialog.wait_for(state="visible", timeout=VALIDATE_MS)
            # The dialog opens with its body filled: success, failure, or an error of the command.
            self.page.wait_for_function(
                "() => { const d = document.querySelector('.jp-Dialog'); return d && d.innerText.trim() !== ''; }",
                timeout=UI_MS, polling=250)
        except PlaywrightTimeout:
            self.shot("validate-timeout")
            pytest.fail(f"Validate opened no dialog within {VALIDATE_MS / 1000:.0f} s; the notebook:\n"
                        f"{self.describe()}", pytrace=False)
        text = dialog.first.inner_text()
        self.shot("validate-dialog")
        dialog.locator(".jp-Dialog-button").last.click()  # OK
        dialog.wait_for(state="hidden")
        return text


def pasted_solutions() -> dict[str, tuple[str, str]]:
    """grade_id -> (the released cell's source, that source with the reference code pasted over its stub)."""
    released = {c.grade_id: c for c in read_cells(ROOT / "exercises" / ASSIGNMENT / NOTEBOOK) if c.solution}
    source = {c.grade_id: c for c in read_cells(ROOT / "solutions" / ASSIGNMENT / NOTEBOOK) if c.solution}
    assert list(released) == list(source), "exercise and solution disagree on their solution cells"
    out = {}
    for gid, cell in released.items():
        m = SOLUTION.search(source[gid].source)
        assert m and STUB.search(cell.source), f"{gid}: no solution markers in the source, or no stub in the exercise"
        body = m.group(1).rstrip("\n")
        pasted = STUB.sub(lambda _, body=body: body, cell.source, count=1)
        # What the learner ends up with is the instructor's cell without its markers.
        assert pasted == SOLUTION.sub(lambda mm: mm.group(1), source[gid].source).rstrip("\n"), gid
        out[gid] = (cell.source, pasted)
    return out


def test_a_learner_fails_the_untouched_exercise_then_passes_with_the_reference(lab, browser_page, tmp_path):
    port, token, folder, log = lab
    page, blocked = browser_page
    learner = Learner(page, tmp_path, blocked, log)
    released = read_cells(folder / NOTEBOOK)
    code = [i for i, c in enumerate(released) if c.kind == "code"]
    tests = [i for i, c in enumerate(released) if c.grade and c.kind == "code"]
    stubs = [i for i, c in enumerate(released) if c.solution]
    assert tests and stubs, "the exercise has no visible test or no solution cell"

    # 1. The exercise opens, its kernel starts, and nbgrader's Validate is in the toolbar.
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}", timeout=UI_MS)
    learner.wait_until("(n) => { const c = (" + CELLS + ")(); return c && c.length === n; }", len(released), UI_MS,
                       f"the notebook's {len(released)} cells")
    learner.wait_kernel_idle()
    validate = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar .validate-button")
    try:
        validate.wait_for(state="visible", timeout=UI_MS)
    except PlaywrightTimeout:
        pytest.fail(f"no visible Validate button in the notebook toolbar:\n{learner.describe()}", pytrace=False)
    assert validate.inner_text().strip() == "Validate", validate.inner_text()
    shown = learner.cells()
    assert [c["type"] for c in shown] == [c.kind for c in released], "the page's cells are not the notebook's"
    found = [i for i, c in enumerate(shown) if c["type"] == "code" and "# YOUR CODE HERE" in c["source"]]
    assert found == stubs, f"cells showing '# YOUR CODE HERE': {found}, nbgrader's solution cells: {stubs}"
    learner.shot("opened")
    # ... and a learner's Nbgrader menu offers the Assignments, not the instructor's tools
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Nbgrader$")).click()
    offered = page.eval_on_selector_all(".lm-Menu .lm-Menu-item:not(.lm-mod-hidden) .lm-Menu-itemLabel",
                                        "els => els.map(e => e.textContent.trim())")
    page.keyboard.press("Escape")
    learner.menus_closed()
    assert offered == ["Assignment List"], f"a learner's Nbgrader menu offers {offered}"

    # 2. Run All Cells on the untouched exercise: the run stops at the first visible test, which says why.
    first = tests[0]
    learner.run_all([i for i in code if i <= first])
    learner.shot("run-all-untouched", show=learner.cell(first).locator(".jp-OutputArea-output").last)
    shown = learner.cells()
    assert "NotImplementedError" in shown[first]["errors"] and "not implemented yet" in shown[first]["errors"], \
        f"the first visible test (cell {first}) does not show NotImplementedError: not implemented yet:\n" \
        f"{learner.describe()}"
    assert not any(executed(shown[i]["prompt"]) for i in code if i > first), \
        f"Run All went on after the first failing test:\n{learner.describe()}"

    # The learner runs the remaining cells one at a time: every visible test fails the same clear way.
    for i in (i for i in code if i > first):
        learner.cell(i).locator(".jp-InputPrompt").click()
        page.keyboard.press("Control+Enter")
        learner.wait_run_finished([i])
    learner.shot("every-cell-untouched", show=learner.cell(tests[-1]).locator(".jp-OutputArea-output").last)
    shown = learner.cells()
    for i in tests:
        assert "NotImplementedError" in shown[i]["errors"] and "not implemented yet" in shown[i]["errors"], \
            f"visible test cell {i} does not show NotImplementedError: not implemented yet:\n{learner.describe()}"

    text = learner.validate()
    assert text.count("The following cell failed") == len(tests) and "Success!" not in text, \
        f"Validate did not report the {len(tests)} failing tests of the untouched exercise; dialog:\n{text}"
    assert text.count("NotImplementedError: not implemented yet") == len(tests), \
        f"Validate's failures are not all 'not implemented yet'; dialog:\n{text}"

    # 3. The learner pastes the reference code over every stub.
    solutions = pasted_solutions()
    for i in stubs:
        gid = released[i].grade_id
        before, after = solutions[gid]
        cell = learner.cell(i)
        cell.scroll_into_view_if_needed()
        assert cell.evaluate(EDITOR_TEXT) == before, f"cell {i} is not the released {gid}"
        cell.locator(".jp-InputArea-editor .cm-content").click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(after)
        got = cell.evaluate(EDITOR_TEXT)
        assert got == after, f"cell {i} ({gid}) after pasting:\n{got}\n--- expected:\n{after}"
        page.keyboard.press("Escape")
    learner.shot("pasted")

    # Kernel > Restart Kernel and Clear Outputs of All Cells, then Run > Run All Cells: every cell runs.
    learner.menu("Kernel", "Restart Kernel and Clear Outputs of All Cells")
    page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
    learner.wait_until(f"() => (({CELLS})() || []).every(c => c.prompt === '[ ]:' || c.type !== 'code')", None,
                       KERNEL_MS, "every output and execution count cleared")
    learner.wait_kernel_idle()
    learner.run_all(code)
    learner.shot("run-all-pasted")
    shown = learner.cells()
    assert [shown[i]["prompt"] for i in code] == [f"[{n}]:" for n in range(1, len(code) + 1)], \
        f"the cells did not run once each, in order, in a fresh kernel:\n{learner.describe()}"
    for i in code:
        assert not shown[i]["errors"], f"cell {i} shows an error after the reference was pasted:\n{learner.describe()}"

    check = code[-1]  # the release's last cell: Check your work, which Run All ran
    assert "Check your work" in shown[check]["outputs"] and f"{len(stubs)} of {len(stubs)} agree" in \
        shown[check]["outputs"], f"Check your work does not agree with the pasted reference:\n{learner.describe()}"

    text = learner.validate()
    assert "Success! Your notebook passes all the tests." in text, \
        f"Validate did not pass the pasted reference; dialog:\n{text}\n\nthe notebook:\n{learner.describe()}"

    # 4. A planted mistake, the scores left unscaled: Check your work names it in the grader's words.
    i = next(i for i in stubs if released[i].grade_id == PLANTED["exercise"])
    cell = learner.cell(i)
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(PLANTED["source"].strip())
    page.keyboard.press("Escape")
    for run in (i, check):
        learner.cell(run).locator(".jp-InputPrompt").click()
        page.keyboard.press("Control+Enter")
        learner.wait_run_finished([run])
    learner.shot("check-your-work", show=learner.cell(check).locator(".jp-OutputArea-output").last)
    said = learner.cells()[check]["outputs"]
    assert f"✗ {PLANTED['exercise']}" in said and PLANTED["diagnosis"] in said, \
        f"Check your work does not name the planted mistake ({PLANTED['diagnosis']!r}):\n{learner.describe()}"
    learner.shot("done")

    assert not blocked, f"the page tried to reach other hosts than the lab: {sorted(set(blocked))}"
    # The course works offline: the lab never offers to fetch Jupyter's news (tools/jupyterlab/overrides.json).
    assert page_text_lacks_news(learner), "JupyterLab asked to fetch Jupyter news: the settings override is missing"


def page_text_lacks_news(learner) -> bool:
    return "Jupyter news" not in learner.page.inner_text("body")
