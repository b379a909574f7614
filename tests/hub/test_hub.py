"""A class on the course's hub, end to end: real accounts, a real JupyterHub on loopback, nbgrader's exchange.

`make hub`'s own code (tools/hub.py) sets up a hub under a scratch prefix: the course environment made from
the system's Python, the proxy from the committed npm lockfile, and an instructor and two learners as Unix
accounts (throw-away names and groups). JupyterHub starts on random loopback ports with PAM log-in, and a
term runs as it would:

1. the instructor releases 02-attention (nbgrader, as the instructor's account, in their ~/course);
2. learner A logs in with the password `make hub-users` gave and, in Chromium, fetches the assignment in the
   Assignments tab, writes one exercise correctly, validates, and submits in the Assignments tab; learner B
   submits the untouched release, then, after the due date, a notebook whose code tries to read A's home
   and the exchange;
3. the instructor collects, grades (`make grade`'s tool, with deadlines.toml), writes feedback
   (`make feedback`'s tool) and releases it;
4. A fetches feedback in the Assignments tab and reads it in Chromium: the points and the diagnosis, no
   hidden test code; B's shows zero, late;
5. B can list neither the exchange's submissions nor A's home; a learner's server has no formgrader;
   in Chromium (Debian's, headless, loopback only), B's Nbgrader menu offers the Assignment List alone,
   and the instructor's Nbgrader > Formgrader panel shows the formgrader's page in its frame (JupyterHub
   forbids frames by default, and the panel is then blank);
6. the hub stops and starts again: the accounts, the log-in, the work, the grades and the feedback remain;
7. started with the demo log-in, the learners' shared password lets a learner in but not as the
   instructor, who has a password of their own, and no account outside the course gets in;
8. with a short idle limit (IDLE_S), the idle culler stops a learner's server nobody uses, and the learner's
   files stay.

Afterwards the machine is as before: the accounts, their groups and homes, the processes and the prefix
are removed. HUB_TEST_DUMP=<file> writes what each step showed to that file (JSON), for a failure's
post-mortem: the hub itself is gone by then.
"""

from __future__ import annotations

import csv
import datetime as dt
import grp
import json
import os
import pwd
import random
import re
import shutil
import string
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import requests
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from grader.notebook import grade_id
from nbtools import ROOT
from tools import hub

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK, EXERCISE = "02-attention", "attention.ipynb", "attention_scores"
COURSE_ID = hub.COURSE_ID


class Hub:
    """The running hub, its accounts and the few gestures the test makes through it."""

    def __init__(self, layout: hub.Layout, groups: hub.Groups, instructor: str, a: str, b: str):
        self.layout, self.groups = layout, groups
        self.instructor, self.a, self.b = instructor, a, b
        self.port = hub.free_port()
        self.ports = dict(api_port=hub.free_port(), proxy_api_port=hub.free_port())
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self, auth: str = "pam", idle_s: int = 3600) -> None:
        hub.start(self.layout, self.port, auth=auth, groups=self.groups, idle_s=idle_s, **self.ports)

    def logs_in(self, user: str, password: str) -> bool:
        """Whether the hub's form accepts this user and password (the user's server is not started)."""
        s = requests.Session()
        s.get(f"{self.base}/hub/login", timeout=30)
        r = s.post(f"{self.base}/hub/login?next=/hub/home", timeout=120, allow_redirects=False,
                   data={"username": user, "password": password, "_xsrf": s.cookies.get("_xsrf", path="/hub/")})
        return r.status_code == 302

    def passwords(self) -> dict[str, str]:
        return {r["id"]: r["password"] for r in csv.DictReader((self.layout.state / "passwords.csv").open())}

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"token {(self.layout.state / 'course-admin-token').read_text().strip()}"}

    def login(self, user: str, password: str | None = None) -> requests.Session:
        """Log in through the hub's form (PAM) and open the user's server; a session that carries the cookies."""
        s = requests.Session()
        s.get(f"{self.base}/hub/login", timeout=30)
        r = s.post(f"{self.base}/hub/login?next=", timeout=120, allow_redirects=False,
                   data={"username": user, "password": password or self.passwords()[user],
                         "_xsrf": s.cookies.get("_xsrf", path="/hub/")})
        assert r.status_code == 302, f"{user} could not log in ({r.status_code}):\n{hub.tail(self.log)}"
        s.get(f"{self.base}/hub/spawn", timeout=120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            server = requests.get(f"{self.base}/hub/api/users/{user}", headers=self.admin(), timeout=30).json()
            if server.get("servers", {}).get("", {}).get("ready"):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"{user}'s server did not start within 120 s:\n{hub.tail(self.log)}", pytrace=False)
        r = s.get(f"{self.base}/user/{user}/lab", timeout=60)
        assert r.status_code == 200, f"{user}'s lab: {r.status_code}\n{hub.tail(self.log)}"
        return s

    def call(self, s: requests.Session, user: str, method: str, path: str, **kw) -> requests.Response:
        """A request to the user's own server, as its pages make it (the server's XSRF token in a header)."""
        headers = {"X-XSRFToken": s.cookies.get("_xsrf", path=f"/user/{user}/") or ""}
        return s.request(method, f"{self.base}/user/{user}/{path}", headers=headers, timeout=300, **kw)

    def assignments(self, s: requests.Session, user: str, action: str | None = None) -> list[dict]:
        """The Assignments tab's list, or its fetch / submit / fetch_feedback button."""
        if action is None:
            r = self.call(s, user, "GET", "assignments", params={"course_id": COURSE_ID})
        else:
            r = self.call(s, user, "POST", f"assignments/{action}",
                          data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
        body = r.json()
        assert r.status_code == 200 and body.get("success"), f"{user}: {action or 'list'}: {r.status_code} {body}"
        return body["value"]

    def notebook(self, s: requests.Session, user: str, path: str) -> nbformat.NotebookNode:
        r = self.call(s, user, "GET", f"api/contents/{path}", params={"content": 1})
        assert r.status_code == 200, f"{user} cannot open {path}: {r.status_code}"
        return nbformat.from_dict(r.json()["content"])

    def save(self, s: requests.Session, user: str, path: str, nb) -> None:
        r = self.call(s, user, "PUT", f"api/contents/{path}",
                      data=json.dumps({"type": "notebook", "format": "json", "content": nb}))
        assert r.status_code in (200, 201), f"{user} could not save {path}: {r.status_code} {r.text[:300]}"

    def as_instructor(self, *cmd: str) -> subprocess.CompletedProcess:
        """A command in the instructor's terminal: their account, their ~/course, the hub's environment."""
        home = Path(pwd.getpwnam(self.instructor).pw_dir)
        env = {"HOME": str(home), "USER": self.instructor, "LANG": "C.UTF-8",
               "PATH": f"{self.layout.env / 'bin'}:/usr/bin:/bin",
               "JUPYTER_CONFIG_PATH": str(self.layout.etc / "instructor")}
        return subprocess.run(["runuser", "-u", self.instructor, "--", "env", "-i",
                               *(f"{k}={v}" for k, v in env.items()), *cmd],
                              cwd=home / "course", capture_output=True, text=True, timeout=600)

    def as_user(self, user: str, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, timeout=60)

    @property
    def log(self) -> Path:
        return self.layout.state / "jupyterhub.log"


def remove_accounts(users: list[str], groups: list[str]) -> None:
    for user in users:
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
    time.sleep(0.5)
    for user in users:
        subprocess.run(["userdel", "--remove", "--force", user], capture_output=True)
    for group in groups:
        subprocess.run(["groupdel", group], capture_output=True)


def solution_source(exercise: str) -> str:
    nb = nbformat.read(ROOT / "solutions" / ASSIGNMENT / NOTEBOOK, as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == exercise]
    return re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|\Z)", "", cell.source, flags=re.M)


def with_source(nb, exercise: str, source: str):
    (cell,) = [c for c in nb.cells if grade_id(c) == exercise]
    cell.source = source
    return nb


@pytest.fixture(scope="module")
def term():
    """The hub set up, its accounts made, and a whole term run through it; yields (Hub, what happened)."""
    if os.geteuid() != 0:
        pytest.fail("the hub test runs as root (it creates Unix accounts and starts servers as them): run "
                    "`make test` as root", pytrace=False)
    tag = "".join(random.choices(string.ascii_lowercase, k=5))
    instructor, a, b = f"hi{tag}", f"ha{tag}", f"hb{tag}"
    groups = hub.Groups(f"hl{tag}", f"hi{tag}g")
    prefix = Path(tempfile.mkdtemp(prefix="course-hub-", dir="/tmp"))
    prefix.chmod(0o755)  # the learners' servers run the environment inside it
    layout = hub.Layout(prefix / "hub")
    h = Hub(layout, groups, instructor, a, b)
    seen: dict = {}
    try:
        t = time.monotonic()
        hub.setup(layout)
        seen["setup_s"] = time.monotonic() - t
        roster = prefix / "roster.csv"
        roster.write_text(f"id,name,email\n{a},Ada A,ada@example.org\n{b},Bo B,bo@example.org\n{a},Again,\n")
        seen["users"] = hub.add_users(layout, roster, instructor, groups)
        h.start()
        run_term(h, seen)
        if os.environ.get("HUB_TEST_DUMP"):
            Path(os.environ["HUB_TEST_DUMP"]).write_text(json.dumps(seen, default=str, indent=1))
        yield h, seen
    finally:
        hub.stop(layout)
        remove_accounts([instructor, a, b], [groups.learners, groups.instructors])
        shutil.rmtree(prefix, ignore_errors=True)


def _processes_of(user: str, within_s: float) -> list[int]:
    """The processes ``user`` still runs after waiting up to ``within_s`` seconds for them to end."""
    deadline = time.monotonic() + within_s
    while True:
        listed = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True).stdout
        found = [int(pid) for pid in listed.split()]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def run_term(h: Hub, seen: dict) -> None:
    """Steps 1-8 of the module's story, with one Chromium open throughout; what each showed goes into ``seen``."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with tools/system_packages.sh (as root)",
                    pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            run_term_in(h, seen, browser)
        finally:
            browser.close()


def run_term_in(h: Hub, seen: dict, browser) -> None:
    # 1. release
    res = h.as_instructor("nbgrader", "release_assignment", ASSIGNMENT)
    assert res.returncode == 0, res.stdout + res.stderr

    # 2. learner A, in Chromium: the Assignments tab lists the release, Fetch brings it home; one exercise
    # written (saved through the server's contents API), Validate, then Submit in the Assignments tab
    sa = h.login(h.a)
    seen["a_listed"] = h.assignments(sa, h.a)
    page_a = lab_page(browser, h, h.a, seen)
    tab = assignment_list(page_a)
    tab.locator("#released_assignments_list button", has_text=re.compile(r"^Fetch$")).click()
    tab.locator("#fetched_assignments_list", has_text=ASSIGNMENT).wait_for()
    path = f"{ASSIGNMENT}/{NOTEBOOK}"
    nb = with_source(h.notebook(sa, h.a, path), EXERCISE, solution_source(EXERCISE))
    h.save(sa, h.a, path, nb)
    r = h.call(sa, h.a, "POST", "assignments/validate", data={"path": path})
    seen["a_validate"] = r.json()
    tab.locator("#fetched_assignments_list button", has_text=re.compile(r"^Submit$")).click()
    tab.locator("#submitted_assignments_list", has_text=ASSIGNMENT).wait_for()
    seen["a_submitted"] = h.assignments(sa, h.a)

    # learner B: the untouched release, then (after the due date) a notebook that pries
    sb = h.login(h.b)
    h.assignments(sb, h.b, "fetch")
    h.assignments(sb, h.b, "submit")
    time.sleep(1.5)
    seen["due"] = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    time.sleep(1.5)
    inbound = h.layout.exchange / COURSE_ID / "inbound"
    pry = (f"def {EXERCISE}(q, k):\n"
           f"    import os\n"
           f"    seen = []\n"
           f"    for place in ({str(Path(pwd.getpwnam(h.a).pw_dir))!r}, {str(inbound)!r}):\n"
           f"        try:\n"
           f"            seen.append(os.listdir(place))\n"
           f"        except Exception as exc:\n"
           f"            seen.append(type(exc).__name__)\n"
           f"    raise RuntimeError(f'what the kernel saw: {{seen}}')\n")
    h.save(sb, h.b, path, with_source(h.notebook(sb, h.b, path), EXERCISE, pry))
    h.assignments(sb, h.b, "submit")

    # 3. the instructor collects, grades with a due date, writes and releases feedback
    home = Path(pwd.getpwnam(h.instructor).pw_dir)
    (home / "course" / "deadlines.toml").write_text(f'[late]\npenalty = "none"\n[due]\n{ASSIGNMENT} = '
                                                    f'{seen["due"].isoformat()}\n')
    for cmd in (("nbgrader", "collect", ASSIGNMENT), ("python", "-m", "tools.grade", "--jobs", "1"),
                ("python", "-m", "tools.feedback"), ("nbgrader", "release_feedback", ASSIGNMENT)):
        res = h.as_instructor(*cmd)
        seen[cmd[-1] if cmd[0] == "nbgrader" else cmd[2]] = res
        assert res.returncode == 0, f"{' '.join(cmd)}:\n{res.stdout}{res.stderr}"
    seen["grades"] = {r["student_id"]: r for r in csv.DictReader((home / "course" / "grades.csv").open())}

    # 4. the learners fetch their feedback: A in Chromium (Fetch Feedback in the Assignments tab, then the page
    # itself as the browser renders it), B through the same endpoint
    page_a.reload()
    tab = assignment_list(page_a)
    tab.locator("#submitted_assignments_list", has_text="feedback available to fetch").wait_for()
    tab.locator("#submitted_assignments_list button", has_text=re.compile(r"^Fetch Feedback$")).click()
    tab.locator("#submitted_assignments_list", has_text="view feedback").wait_for()
    for user, s in ((h.a, sa), (h.b, sb)):
        if user == h.b:
            h.assignments(s, user, "fetch_feedback")
        folder = h.call(s, user, "GET", f"api/contents/{ASSIGNMENT}/feedback").json()
        (stamp,) = [c["name"] for c in folder["content"]]
        page = h.call(s, user, "GET", f"files/{ASSIGNMENT}/feedback/{stamp}/attention.html")
        assert page.status_code == 200, page.status_code
        seen[f"feedback_{user}"] = page.text
        if user == h.a:
            # nbgrader's feedback page asks a CDN for MathJax: that request is blocked like every request off
            # the hub, and recorded apart (the page must read without it; its math then stays as TeX)
            before = len(seen.get("blocked", []))
            page_a.goto(f"{h.base}/user/{user}/files/{ASSIGNMENT}/feedback/{stamp}/attention.html")
            seen["feedback_a_shown"] = page_a.locator("body").inner_text()
            seen["blocked_by_feedback"] = seen.get("blocked", [])[before:]
            del seen.get("blocked", [])[before:]

    # 5. what a learner can and cannot reach
    seen["b_lists_inbound"] = h.as_user(h.b, "ls", str(inbound))
    seen["b_reads_a"] = h.as_user(h.b, "cat", f"{pwd.getpwnam(h.a).pw_dir}/{path}")
    seen["b_formgrader"] = h.call(sb, h.b, "GET", "formgrader").status_code
    si = h.login(h.instructor)
    r = h.call(si, h.instructor, "GET", "formgrader")
    seen["instructor_formgrader"] = (r.status_code, r.headers.get("Content-Security-Policy"))
    r = h.call(sb, h.b, "GET", "lab")
    seen["b_csp"] = r.headers.get("Content-Security-Policy")

    seen["browser"] = in_the_browser(h, browser, seen)

    # 6. a restart: the hub stops (and the servers, the culler and the proxy with it), starts again
    hub.stop(h.layout)
    seen["running_after_stop"] = list(hub.processes_under(h.layout.prefix).values())
    h.start()
    sa = h.login(h.a)
    seen["after_restart"] = {
        "listed": h.assignments(sa, h.a),
        "feedback": h.call(sa, h.a, "GET", f"api/contents/{ASSIGNMENT}/feedback").status_code,
        "grades": {r["student_id"]: r["score"]
                   for r in csv.DictReader((home / "course" / "grades.csv").open())},
    }

    # 7. the demo log-in: one password for the learners, another for the instructor (8: a short idle limit)
    hub.stop(h.layout)
    h.start(auth="shared", idle_s=IDLE_S)
    learners, instructors = ((h.layout.state / f).read_text().strip()
                             for f in ("shared-password", "shared-admin-password"))
    seen["shared"] = {
        "learner": h.logs_in(h.b, learners),
        "learner's password, instructor's name": h.logs_in(h.instructor, learners),
        "instructor": h.logs_in(h.instructor, instructors),
        "learner's own Unix password": h.logs_in(h.a, h.passwords()[h.a]),
        "not a course account": h.logs_in("root", learners),
    }

    # 8. the idle culler: B's server, started and then left alone, is stopped; B's files stay
    home_b = Path(pwd.getpwnam(h.b).pw_dir)
    def work_of_b() -> dict[str, bytes]:  # B's notebooks and course files, with their contents
        return {str(p.relative_to(home_b)): p.read_bytes() for p in home_b.rglob("*.ipynb") if p.is_file()}

    work_before = work_of_b()
    h.login(h.b, learners)
    started = time.monotonic()
    while time.monotonic() - started < IDLE_S + 150:
        user = requests.get(f"{h.base}/hub/api/users/{h.b}", headers=h.admin(), timeout=30).json()
        if "" not in user.get("servers", {}):
            break
        time.sleep(2)
    seen["culled"] = {
        "after_s": time.monotonic() - started if "" not in user.get("servers", {}) else None,
        "running": _processes_of(h.b, within_s=10),
        "files_kept": bool(work_before) and work_of_b() == work_before,
        "culler_said": [line for line in hub.tail(h.log, 400).splitlines() if "Culling server" in line and h.b in line],
    }


#: the idle limit of step 8 (the culler then looks every 10 s): short, so that the test waits under a minute
IDLE_S = 20
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
UI_MS = 90_000


def lab_page(browser, h: Hub, user: str, seen: dict):
    """A new Chromium page logged in as ``user`` through the hub's form, on the user's JupyterLab; requests to
    anything but the hub are blocked and recorded in seen["blocked"]."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")

    def guard(route):
        if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:", "about:")):
            route.continue_()
        else:
            seen.setdefault("blocked", []).append(route.request.url)
            route.abort("blockedbyclient")

    context.route("**/*", guard)
    page = context.new_page()
    page.set_default_timeout(UI_MS)
    page.goto(f"{h.base}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", h.passwords()[user])
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"**/user/{user}/lab**")
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").wait_for()
    return page


def nbgrader_menu(page) -> list[str]:
    """Open the Nbgrader menu; its entries' labels."""
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    items = page.locator(".lm-Menu .lm-Menu-item:not(.lm-mod-hidden) .lm-Menu-itemLabel")
    items.first.wait_for()
    return [t.strip() for t in items.all_inner_texts()]


def assignment_list(page):
    """Nbgrader > Assignment List: the learner's Assignments panel, once its lists are loaded."""
    nbgrader_menu(page)
    page.locator(".lm-Menu .lm-Menu-itemLabel", has_text=re.compile(r"^Assignment List$")).click()
    page.locator("#released_assignments_list").wait_for()
    page.wait_for_function("() => !Array.from(document.querySelectorAll('[id$=_assignments_list_loading]'))"
                           ".some(e => e.offsetParent !== null)")  # no list is still showing its spinner
    return page


def in_the_browser(h: Hub, browser, seen: dict) -> dict:
    """What a learner's and the instructor's JupyterLab offer, and whether the instructor's formgrader renders."""
    shown: dict = {}
    for user in (h.b, h.instructor):
        page = lab_page(browser, h, user, seen)
        shown[f"menu_{user}"] = nbgrader_menu(page)
        if user == h.instructor:
            page.locator(".lm-Menu .lm-Menu-itemLabel", has_text=re.compile(r"^Formgrader$")).click()
            frame = page.frame_locator("iframe").first
            try:
                frame.locator("text=Manage Assignments").first.wait_for(timeout=UI_MS)
                frame.locator(f"text={ASSIGNMENT}").first.wait_for(timeout=UI_MS)  # the table is filled
                shown["formgrader_frame"] = frame.locator("body").inner_text()
            except PlaywrightTimeout:
                shown["formgrader_frame"] = ""
        else:
            page.keyboard.press("Escape")
        page.context.close()
    return shown


def test_accounts_are_private_and_a_bad_row_is_named(term):
    h, seen = term
    assert any(f"line 4: id '{h.a}' is already on line 2: skipped" in line for line in seen["users"]), seen["users"]
    for user in (h.instructor, h.a, h.b):
        home = Path(pwd.getpwnam(user).pw_dir)
        assert home.stat().st_mode & 0o777 == 0o700, f"{user}'s home is {oct(home.stat().st_mode)}"
    assert set(grp.getgrnam(h.groups.learners).gr_mem) == {h.a, h.b}
    assert grp.getgrnam(h.groups.instructors).gr_mem == [h.instructor]
    env = h.layout.env / "bin" / "python"
    res = h.as_user(h.a, str(env), "-c", "import torch, nbgrader, course_lib, grader; print(torch.__version__)")
    assert res.returncode == 0 and res.stdout.startswith("2.13.0"), res.stdout + res.stderr


def test_a_learner_fetches_validates_and_submits(term):
    h, seen = term
    assert [x["assignment_id"] for x in seen["a_listed"]] == [ASSIGNMENT]
    assert seen["a_listed"][0]["status"] == "released"
    assert {x["status"] for x in seen["a_submitted"]} == {"fetched", "submitted"}, seen["a_submitted"]
    validated = json.dumps(seen["a_validate"])
    assert "NotImplementedError" in validated, "Validate should report the exercises A left undone"


def test_grades_follow_the_work_and_the_due_date(term):
    h, seen = term
    grades = seen["grades"]
    assert grades[h.a]["status"] == "graded" and float(grades[h.a]["score"]) == 2, grades[h.a]  # one exercise
    assert grades[h.b]["score"] == "0" and grades[h.b]["status"].startswith("graded, late by"), grades[h.b]


def test_feedback_shows_points_and_diagnosis_never_the_hidden_tests(term):
    h, seen = term
    a, b = seen[f"feedback_{h.a}"], seen[f"feedback_{h.b}"]
    for page in (a, b):
        assert "check(" not in page and "hidden_check" not in page and "BEGIN HIDDEN" not in page
    assert "2.0" in a and "10.0" in a, "A's feedback should show 2 of 10 points"
    assert "not implemented yet" in a
    shown = seen["feedback_a_shown"]  # the same page as Chromium shows it to A, with nothing loaded off the hub
    assert "Score: 2.0 / 2.0" in shown and "not implemented yet" in shown and "check(" not in shown, shown[:2000]
    assert "what the kernel saw" in b, "B's prying exercise should show what its code saw while graded"
    saw = b.split("RuntimeError: what the kernel saw:")[1][:200]  # the error, not the source that raises it
    assert "FileNotFoundError" in saw or "PermissionError" in saw, saw
    assert "attention.ipynb" not in saw and "+" not in saw.split("]")[0], f"the graded code saw other work: {saw}"


def test_a_learner_cannot_reach_other_work_or_the_instructors_tools(term):
    h, seen = term
    assert seen["b_lists_inbound"].returncode != 0 and "Permission denied" in seen["b_lists_inbound"].stderr
    assert seen["b_reads_a"].returncode != 0 and "Permission denied" in seen["b_reads_a"].stderr
    assert seen["b_formgrader"] == 404
    assert seen["b_csp"] == "frame-ancestors 'none'"
    status, csp = seen["instructor_formgrader"]
    assert status == 200 and csp == "frame-ancestors 'self'", seen["instructor_formgrader"]


def test_everything_is_still_there_after_a_restart(term):
    h, seen = term
    assert seen["running_after_stop"] == [], f"still running after make hub-stop: {seen['running_after_stop']}"
    after = seen["after_restart"]
    assert {x["status"] for x in after["listed"]} == {"fetched", "submitted"}, after["listed"]
    assert after["feedback"] == 200
    assert after["grades"] == {h.a: "2", h.b: "0"}


def test_in_the_browser_each_role_has_its_tools_and_the_formgrader_renders(term):
    h, seen = term
    shown = seen["browser"]
    assert shown[f"menu_{h.b}"] == ["Assignment List"], shown
    assert "Formgrader" in shown[f"menu_{h.instructor}"], shown
    assert ASSIGNMENT in shown["formgrader_frame"], f"the formgrader's frame is blank or lacks {ASSIGNMENT}: {shown}"
    assert not seen.get("blocked"), f"the lab pages tried to reach other hosts: {sorted(set(seen['blocked']))}"


def test_the_demo_log_in_keeps_the_instructors_account_to_the_instructor(term):
    h, seen = term
    assert seen["shared"] == {"learner": True, "learner's password, instructor's name": False, "instructor": True,
                              "learner's own Unix password": False, "not a course account": False}, seen["shared"]


def test_an_idle_server_is_stopped_and_its_files_stay(term):
    h, seen = term
    culled = seen["culled"]
    assert culled["after_s"] is not None, f"B's idle server still ran {IDLE_S + 150} s after it started"
    assert culled["culler_said"], "the server stopped, but the hub's log has no word of the idle culler stopping it"
    assert not culled["running"], "a process of B's server is still running"
    assert culled["files_kept"], "B's files changed when the culler stopped the server"
