"""A class on the course's hub, end to end, with a learner who attacks it: real accounts, a real JupyterHub on
loopback, nbgrader's exchange, Chromium.

`make hub`'s own code (classroom/hub/) sets up a hub under a scratch prefix outside /tmp (the grading fence empties
/tmp, so a hub there would be hidden from graded code whatever the hub's settings): the course environment made from
the system's Python, the proxy from the committed npm lockfile, and an instructor and two learners, A and B, as Unix
accounts (throw-away names and groups). JupyterHub starts on random loopback ports with PAM log-in, each user's
server on a subdomain of localhost, each learner within the limits a fresh `make hub` gives this machine. One hub
serves the whole term, and B attacks it as the issue that found the holes did (issue 42):

1. the instructor releases 02-attention, from their JupyterLab (a kernel of their server: the hub's terminal);
2. learner A logs in with the password `make hub-users` gave and, in Chromium, fetches the assignment in the
   Assignments tab, writes one exercise correctly, validates, and submits in the Assignments tab; learner B
   submits the untouched release, then, after the due date, a notebook whose code pries (it lists and reads A's
   home, the exchange, the instructor's files), shows HTML with a script, and has a markdown cell with every trick
   of issue 49 (tests/hostile_pages.py: scripts, handlers, forms, frames, a refresh, beacons, a missing
   attachment). Then B attacks the exchange by hand:
   a submission folder of B's own holding links to the instructor's files, a FIFO, and a timestamp.txt that claims a
   time before the due date; a submission in A's name; renaming the course's folder and A's submission, reading and
   writing into A's submission;
3. the instructor collects, grades (`make grade`'s tool, with deadlines.toml), writes feedback (`make feedback`'s
   tool) and releases it, all from their server: collect names each thing it refused;
4. A fetches feedback in the Assignments tab and reads it in Chromium: the points and the diagnosis, no hidden test
   code; B's shows zero, late, and nothing of the instructor's;
5. B can list neither the exchange's submissions nor A's home; a learner's server has no formgrader; in Chromium,
   B's Nbgrader menu offers the Assignment List alone, and the instructor's Formgrader panel shows the formgrader's
   page in its frame. B serves a page through its own Jupyter settings and restarts its server: the instructor,
   logged in, opens it, and any script on B's address tries to read and frame the instructor's server; the
   instructor opens B's graded notebook in the formgrader, whose HTML carries B's script and markdown B's tricks;
6. the instructor grades B again from a plain root shell (`runuser`, no variable the hub's spawner sets): B's code
   sees no other learner's work there either;
7. A's and B's kernels: a file each writes is private, each /tmp is its own, and B's kernel asks for more memory
   than B's limit: it dies, the cell says why, and A's kernel keeps working;
8. the hub is killed (SIGKILL): `make hub-stop` stops what it left; B listens on the hub's port, and the hub
   refuses to start there; the hub starts, is killed again and started again: one proxy and one culler run, and the
   accounts, the log-in, the work, the grades and the feedback remain;
9. started with the demo log-in, the learners' shared password lets a learner in but not as the instructor, who has
   a password of their own, and no account outside the course gets in;
10. with a short idle limit (IDLE_S), the idle culler stops a learner's server nobody uses, and the learner's files
   stay.

Afterwards the machine is as before: the accounts, their groups and homes, the processes, the control groups and the
prefix are removed. HUB_TEST_DUMP=<file> writes what each step showed to that file (JSON), for a failure's
post-mortem: the hub itself is gone by then.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import csv
import datetime as dt
import grp
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import requests
from hostile_pages import MARK, PAGE_STATE, attack_cell
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from classroom.hub import addresses, service
from classroom.hub.accounts import add_users
from classroom.hub.cgroups import HubGroups, default_limits
from classroom.hub.disks import Disks, DiskSizes
from classroom.hub.layout import COURSE_ID, Groups, HubError, Layout
from classroom.hub.setup import setup as set_up_hub
from grader.notebook import grade_id
from grader.registry import assignment as registered_assignment
from nbtools import ROOT
from tools.lab_client import execute

pytestmark = pytest.mark.slow

#: each learner's home and the exchange, as make hub's HUB_DISK and HUB_EXCHANGE_DISK would make them
DISKS = DiskSizes(home=96 * 2**20, exchange=256 * 2**20)
#: the class that arrives at once, all within ARRIVE_S seconds (benchmarks/class_arrival.py runs whole classes)
ARRIVING, ARRIVE_S = 6, 30

ASSIGNMENT, NOTEBOOK, EXERCISE = "02-attention", "attention.ipynb", "attention_scores"
#: what the instructor's files hold, which must never reach a learner
SENTINELS = {"class list": "SENTINEL-CLASS-LIST", "shell history": "SENTINEL-SHELL-HISTORY"}
#: the script B's notebook shows as HTML, which must not run in the instructor's formgrader
XSS_MARK = "pwned-by-b"
#: where B's markdown payloads send their requests: off the hub (blocked there), and the same path on the hub itself
HUB_BEACON_PATH = "/hub-beacon-of-b"
HUB_BEACON = f"http://127.0.0.1:9{HUB_BEACON_PATH}"


class Hub:
    """The running hub, its accounts and the few gestures the test makes through it."""

    def __init__(self, layout: Layout, groups: Groups, instructor: str, a: str, b: str, arriving: list[str]):
        self.layout, self.groups = layout, groups
        self.instructor, self.a, self.b = instructor, a, b
        self.arriving = arriving  # the class that arrives at once (step 8)
        self.port = service.free_port()
        self.base = f"http://localhost:{self.port}"
        self.kernels: dict[str, str] = {}
        self.started: list[str] = []

    def start(self, auth: str = "pam", idle_s: int = 3600) -> int:
        self.kernels.clear()
        return service.start(self.layout, self.port, auth=auth, groups=self.groups, idle_s=idle_s, report=self.started)

    def server(self, user: str) -> str:
        """The user's server, on a domain of its own."""
        return f"http://{user}.localhost:{self.port}/user/{user}"

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
        assert r.status_code == 302, f"{user} could not log in ({r.status_code}):\n{service.tail(self.log)}"
        s.get(f"{self.base}/hub/spawn", timeout=120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            server = requests.get(f"{self.base}/hub/api/users/{user}", headers=self.admin(), timeout=30).json()
            if server.get("servers", {}).get("", {}).get("ready"):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"{user}'s server did not start within 120 s:\n{service.tail(self.log)}", pytrace=False)
        r = s.get(f"{self.server(user)}/lab", timeout=60)
        assert r.status_code == 200, f"{user}'s lab: {r.status_code}\n{service.tail(self.log)}"
        self.kernels.pop(user, None)
        return s

    def call(self, s: requests.Session, user: str, method: str, path: str, **kw) -> requests.Response:
        """A request to the user's own server, as its pages make it (the server's XSRF token in a header)."""
        headers = {"X-XSRFToken": s.cookies.get("_xsrf", domain=f"{user}.localhost", path=f"/user/{user}/") or ""}
        return s.request(method, f"{self.server(user)}/{path}", headers=headers, timeout=300, **kw)

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

    def execute(self, s: requests.Session, user: str, code: str, timeout: float = 600) -> dict:
        """Run ``code`` in a kernel of the user's server, over the websocket JupyterLab uses (protocol v1); what
        came back to the running cell: {"reply": status or None, "stdout", "stderr", "restarting": bool}."""
        if user not in self.kernels:
            r = self.call(s, user, "POST", "api/kernels", json={"name": "python3"})
            assert r.status_code == 201, f"{user}: a kernel: {r.status_code} {r.text[:300]}"
            self.kernels[user] = r.json()["id"]
        cookies = "; ".join(f"{c.name}={c.value}" for c in s.cookies if c.domain in (f"{user}.localhost", ".localhost"))
        url = f"ws://{user}.localhost:{self.port}/user/{user}/api/kernels/{self.kernels[user]}/channels"
        origin = f"http://{user}.localhost:{self.port}"
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, beside Playwright's
            return pool.submit(asyncio.run, execute(url, cookies, origin, user, code, timeout)).result()

    def in_server(self, s: requests.Session, user: str, *cmd: str,
                  cwd: str = "~/course") -> subprocess.CompletedProcess:
        """A command run from the user's JupyterLab (a kernel of their server: the hub's terminal, as the server's
        environment, control group and /tmp have it)."""
        code = (f"import json, os, subprocess\n"
                f"r = subprocess.run({list(cmd)!r}, cwd=os.path.expanduser({cwd!r}), capture_output=True, text=True)\n"
                f"print('RESULT' + json.dumps([r.returncode, r.stdout, r.stderr]))\n")
        out = self.execute(s, user, code)
        found = [line for line in out["stdout"].splitlines() if line.startswith("RESULT")]
        assert found, f"{' '.join(cmd)} in {user}'s server gave no result: {out}"
        rc, stdout, stderr = json.loads(found[-1][len("RESULT"):])
        return subprocess.CompletedProcess(list(cmd), rc, stdout, stderr)

    def as_root_shell(self, user: str, *cmd: str) -> subprocess.CompletedProcess:
        """A command from a plain root shell as ``user`` (runuser, a bare environment: none of the variables the
        hub's spawner sets), in their ~/course."""
        home = Path(pwd.getpwnam(user).pw_dir)
        return subprocess.run(["runuser", "-u", user, "--", "env", "-i", f"HOME={home}", f"USER={user}",
                               "LANG=C.UTF-8", "PATH=/usr/bin:/bin", *cmd],
                              cwd=home / "course", capture_output=True, text=True, timeout=600)

    def as_user(self, user: str, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, timeout=60)

    @property
    def log(self) -> Path:
        return self.layout.state / "jupyterhub.log"

    @property
    def inbound(self) -> Path:
        return self.layout.exchange / COURSE_ID / "inbound"


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


def resolve_localhost_names(monkeypatch) -> None:
    """*.localhost is loopback (RFC 6761; Chromium knows it); glibc here does not, so this process is told."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(scope="module")
def term():
    """The hub set up, its accounts made, and a whole term run through it; yields (Hub, what happened)."""
    if os.geteuid() != 0:
        pytest.fail("the hub test runs as root (it creates Unix accounts and starts servers as them): run "
                    "`make test` as root", pytrace=False)
    tag = "".join(random.choices(string.ascii_lowercase, k=5))
    instructor, a, b = f"hi{tag}", f"ha{tag}", f"hb{tag}"
    arriving = [f"hc{tag}{i}" for i in range(ARRIVING)]
    groups = Groups(f"hl{tag}", f"hi{tag}g")
    prefix = Path(tempfile.mkdtemp(prefix="course-hub-test-", dir="/opt"))  # not /tmp: see the module's docstring
    prefix.chmod(0o755)  # the learners' servers run the environment inside it
    layout = Layout(prefix / "hub")
    h = Hub(layout, groups, instructor, a, b, arriving)
    seen: dict = {}
    try:
        with pytest.MonkeyPatch.context() as mp:
            resolve_localhost_names(mp)
            t = time.monotonic()
            set_up_hub(layout)
            seen["setup_s"] = time.monotonic() - t
            roster = prefix / "roster.csv"
            roster.write_text(f"id,name,email\n{a},Ada A,ada@example.org\n{b},Bo B,bo@example.org\n{a},Again,\n"
                              + "".join(f"{u},{u},\n" for u in arriving))
            layout.state.mkdir(exist_ok=True)
            Disks(layout).remember(DISKS)  # small disks: the test fills B's
            seen["users"] = add_users(layout, roster, instructor, groups)
            instructor_files(h, tag)
            h.start()
            try:
                run_term(h, seen)
            finally:
                if os.environ.get("HUB_TEST_DUMP"):
                    Path(os.environ["HUB_TEST_DUMP"]).write_text(json.dumps(seen, default=str, indent=1))
        yield h, seen
    finally:
        service.stop(layout)
        remove_accounts([instructor, a, b, *arriving], [groups.learners, groups.instructors])
        shutil.rmtree(prefix, ignore_errors=True)


def instructor_files(h: Hub, tag: str) -> None:
    """What an instructor's home holds that a learner must never see: the class list and the shell's history."""
    entry = pwd.getpwnam(h.instructor)
    home = Path(entry.pw_dir)
    for path, what in ((home / "course" / "class.csv", "class list"), (home / ".bash_history", "shell history")):
        path.write_text(f"{SENTINELS[what]}-{tag}\n{h.a},Ada A\n{h.b},Bo B\n")
        os.chown(path, entry.pw_uid, entry.pw_gid)
        path.chmod(0o600)
    SENTINELS["tag"] = tag


def sentinels() -> list[str]:
    return [f"{SENTINELS[w]}-{SENTINELS['tag']}" for w in ("class list", "shell history")]


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
    """Steps 1-10 of the module's story, with one Chromium open throughout; what each showed goes into ``seen``."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with tools/system_packages.sh (as root)",
                    pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            run_term_in(h, seen, browser)
        finally:
            browser.close()


def pry_source(h: Hub) -> str:
    """B's exercise: what the graded kernel can list and read of others' work, raised as the cell's error."""
    a_home = Path(pwd.getpwnam(h.a).pw_dir)
    i_home = Path(pwd.getpwnam(h.instructor).pw_dir)
    places = {"A's home": str(a_home), "inbound": str(h.inbound), "exchange": str(h.layout.exchange),
              "A's notebook": str(a_home / ASSIGNMENT / NOTEBOOK), "class list": str(i_home / "course" / "class.csv"),
              "history": str(i_home / ".bash_history")}
    return (f"def {EXERCISE}(q, k):\n"
            f"    import os\n"
            f"    seen = {{}}\n"
            f"    for what, place in {places!r}.items():\n"
            f"        try:\n"
            f"            seen[what] = os.listdir(place) if os.path.isdir(place) else open(place).read()[:80]\n"
            f"        except Exception as exc:\n"
            f"            seen[what] = type(exc).__name__\n"
            f"    raise RuntimeError(f'what the kernel saw: {{seen!r}}')\n")


def xss_cell() -> nbformat.NotebookNode:
    """A cell of B's whose output is HTML with a script, for whoever renders B's notebook."""
    return nbformat.v4.new_code_cell(
        "from IPython.display import HTML, display\n"
        f"display(HTML(\"<b id='{XSS_MARK}'>B's output</b><img src=x onerror=\\\"document.title='{XSS_MARK}'\\\">\"\n"
        f"             \"<script>document.title='{XSS_MARK}'</script>\"))\n")


def utc_name(when: dt.datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"


def mark(seen: dict, step: str) -> None:
    """The time each step took (seen["step_s"]), for the suite's budget: a step starts where the last one ends."""
    now = time.monotonic()
    last = seen.setdefault("_mark", [None, now])
    if last[0] is not None:
        seen.setdefault("step_s", {})[last[0]] = round(now - last[1], 1)
    seen["_mark"] = [step, now]


def run_term_in(h: Hub, seen: dict, browser) -> None:
    mark(seen, '1')
    # 1. release, from the instructor's JupyterLab
    si = h.login(h.instructor)
    res = h.in_server(si, h.instructor, "nbgrader", "release_assignment", ASSIGNMENT)
    assert res.returncode == 0, res.stdout + res.stderr

    mark(seen, '2')
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

    # learner B: the untouched release, then (after the due date) a notebook that pries, with a script in its HTML
    sb = h.login(h.b)
    h.assignments(sb, h.b, "fetch")
    h.assignments(sb, h.b, "submit")
    time.sleep(1.5)
    seen["due"] = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    time.sleep(1.5)
    pry = with_source(h.notebook(sb, h.b, path), EXERCISE, pry_source(h))
    pry.cells.append(xss_cell())
    pry.cells.append(attack_cell(HUB_BEACON))  # every trick of issue 49, a missing attachment among them
    h.save(sb, h.b, path, pry)
    h.assignments(sb, h.b, "submit")
    b_attacks_the_exchange(h, seen)

    mark(seen, '3')
    # 3. the instructor collects, grades with a due date, writes and releases feedback, from their JupyterLab
    home = Path(pwd.getpwnam(h.instructor).pw_dir)
    (home / "course" / "deadlines.toml").write_text(f'[late]\npenalty = "none"\n[due]\n{ASSIGNMENT} = '
                                                    f'{seen["due"].isoformat()}\n')
    for cmd in (("nbgrader", "collect", ASSIGNMENT), ("python", "-m", "classroom.grade", "--jobs", "1"),
                ("python", "-m", "classroom.feedback"), ("nbgrader", "release_feedback", ASSIGNMENT)):
        res = h.in_server(si, h.instructor, *cmd)
        seen[cmd[1] if cmd[0] == "nbgrader" else cmd[2]] = res
        assert res.returncode == 0, f"{' '.join(cmd)}:\n{res.stdout}{res.stderr}"
    seen["grades"] = {r["student_id"]: r for r in csv.DictReader((home / "course" / "grades.csv").open())}
    seen["b_copies"] = what_the_course_holds_of(h, h.b)

    mark(seen, '4')
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
        stamps = [c["name"] for c in folder["content"]]
        pages = [h.call(s, user, "GET", f"files/{ASSIGNMENT}/feedback/{stamp}/attention.html") for stamp in stamps]
        assert all(page.status_code == 200 for page in pages), [page.status_code for page in pages]
        seen[f"feedback_{user}"] = pages[-1].text
        seen[f"feedback_all_{user}"] = "".join(page.text for page in pages)
        if user == h.a:
            # nbgrader's feedback page asks a CDN for MathJax: that request is blocked like every request off
            # the hub, and recorded apart (the page must read without it; its math then stays as TeX)
            before = len(seen.get("blocked", []))
            page_a.goto(f"{h.server(user)}/files/{ASSIGNMENT}/feedback/{stamps[-1]}/attention.html")
            seen["feedback_a_shown"] = page_a.locator("body").inner_text()
            seen["blocked_by_feedback"] = seen.get("blocked", [])[before:]
            del seen.get("blocked", [])[before:]
    from nbgrader.utils import notebook_hash

    forged = notebook_hash(secret=FORGED_SECRET, notebook_id=Path(NOTEBOOK).stem)
    forged = h.layout.exchange / COURSE_ID / "feedback" / f"{forged}.html"
    seen["feedback_under_forged_secret"] = h.as_user(h.b, "cat", str(forged))

    mark(seen, '5')
    # 5. what a learner can and cannot reach, and what each role's JupyterLab offers
    seen["b_lists_inbound"] = h.as_user(h.b, "ls", str(h.inbound))
    seen["b_reads_a"] = h.as_user(h.b, "cat", f"{pwd.getpwnam(h.a).pw_dir}/{path}")
    seen["b_formgrader"] = h.call(sb, h.b, "GET", "formgrader").status_code
    r = h.call(si, h.instructor, "GET", "formgrader")
    seen["instructor_formgrader"] = (r.status_code, r.headers.get("Content-Security-Policy"))
    r = h.call(sb, h.b, "GET", "lab")
    seen["b_csp"] = r.headers.get("Content-Security-Policy")
    seen["browser"] = in_the_browser(h, browser, seen)
    seen["squat"] = b_squats_the_port(h, browser, seen)
    seen["b_page"], sb = b_serves_a_page(h, browser, seen)  # B's server was restarted: a new session

    mark(seen, '6')
    # 6. the fence, with grading started from a plain root shell as the instructor: B's code regraded
    res = h.as_root_shell(h.instructor, str(h.layout.env / "bin" / "python"), "-m", "classroom.grade", "--jobs", "1",
                          "--student", h.b)
    seen["root_shell_grade"] = res
    graded = nbformat.read(home / "course" / "autograded" / h.b / ASSIGNMENT / NOTEBOOK, as_version=4)
    (cell,) = [c for c in graded.cells if grade_id(c) == f"test_{EXERCISE}"]
    seen["fence_from_root_shell"] = "".join(str(o.get("evalue", "")) for o in cell.outputs)

    mark(seen, '7')
    # 7. each learner's kernel: private files, a /tmp of its own, and B's memory limit
    writes = ("import os\n"
              "for path in ('/tmp/a-private.txt', os.path.expanduser('~/a-note.txt')):\n"
              "    open(path, 'w').write('A')\n"
              "    print(oct(os.stat(path).st_mode & 0o777), end=' ')\n"
              "print(os.listdir('/tmp'))\n")
    seen["private"] = {"a": h.execute(sa, h.a, writes),
                       "b": h.execute(sb, h.b, "import os\nprint(os.listdir('/tmp'))")}
    seen["limits_of_b"] = HubGroups(h.layout.prefix).limits_of("learners", h.b)
    transport = ("from ipykernel.connect import get_connection_info\n"
                 "print(get_connection_info(unpack=True)['transport'])")
    seen["kernel_transports"] = {h.a: h.execute(sa, h.a, transport)["stdout"].strip(),
                                 h.instructor: h.execute(si, h.instructor, transport)["stdout"].strip()}
    seen["used_by_a"] = HubGroups(h.layout.prefix).usage("learners", h.a)  # server, Validate's kernel, one kernel
    t = time.monotonic()
    seen["b_over_memory"] = h.execute(sb, h.b, "x = b'\\x01' * (3 << 30)\nprint('still here')", timeout=120)
    seen["b_over_memory_s"] = time.monotonic() - t
    seen["a_meanwhile"] = h.execute(sa, h.a, "print(sum(range(10**6)))")
    seen["b_server_after"] = h.call(sb, h.b, "GET", "api/status").status_code
    seen["b_after"] = h.execute(sb, h.b, "print(6 * 7)", timeout=120)
    seen["disk"] = b_fills_its_disk(h, sa, sb)

    mark(seen, 'arrival')
    # a class arrives at once: each logs in, opens the lab, fetches, runs a cell and submits; the instructor
    # collects and grades them all
    seen["arrival"] = a_class_arrives(h, si)
    seen["update"] = an_update_reaches_the_learners(h, si, sa)

    mark(seen, '8')
    # 8. the hub's own processes: killed, stopped, its port held by B, started twice with a kill between
    seen["before_kill"] = running_parts(h)
    seen["guard"] = the_proxy_dies_and_b_is_quicker(h)
    os.kill(int((h.layout.state / "hub.pid").read_text()), signal.SIGKILL)
    time.sleep(1)
    stopped = subprocess.run([sys.executable, "-m", "classroom.hub", "stop", "--prefix", str(h.layout.prefix)],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
    seen["stop_after_kill"] = stopped
    seen["running_after_stop"] = {"hub's": sorted(service.hub_processes(h.layout)),
                                  "users'": {u: _processes_of(u, within_s=5) for u in (h.instructor, h.a, h.b)}}
    # processes of the course's Python that are not the hub's (B's own script, the instructor grading from ssh):
    # the hub's start and stop leave them alone
    squatter = subprocess.Popen(["runuser", "-u", h.b, "--", "python3", "-m", "http.server", str(h.port),
                                 "--bind", "::1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while service.port_is_free(h.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            h.start()
            seen["started_on_held_port"] = "started"
        except HubError as exc:
            seen["started_on_held_port"] = str(exc)
    finally:
        squatter.kill()
        squatter.wait()
        for pid in _processes_of(h.b, within_s=0):  # runuser's child, B's fake server
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not service.port_is_free(h.port) and time.monotonic() < deadline:
        time.sleep(0.2)
    # processes of the course's Python that are not the hub's (B's own script, the instructor grading from ssh):
    # the hub's start, with no control groups left to go by, leaves them alone
    bystanders = {user: subprocess.Popen(["runuser", "-u", user, "--", str(h.layout.env / "bin" / "python"), "-c",
                                          "import time; time.sleep(900)"]) for user in (h.b, h.instructor)}
    time.sleep(1)
    h.start()
    seen["bystanders"] = {user: proc.poll() is None for user, proc in bystanders.items()}
    for proc in bystanders.values():
        for pid in [*service.descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    os.kill(int((h.layout.state / "hub.pid").read_text()), signal.SIGKILL)
    time.sleep(1)
    h.started.clear()
    h.start()  # no make hub-stop between: start stops what the killed hub left
    seen["restart_report"] = list(h.started)
    sa = h.login(h.a)
    seen["after_restart"] = {
        "running": running_parts(h),
        "listed": h.assignments(sa, h.a),
        "feedback": h.call(sa, h.a, "GET", f"api/contents/{ASSIGNMENT}/feedback").status_code,
        "grades": {r["student_id"]: r["score"]
                   for r in csv.DictReader((home / "course" / "grades.csv").open())},
    }

    mark(seen, '9')
    # 9. the demo log-in: one password for the learners, another for the instructor (10: a short idle limit)
    service.stop(h.layout)
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

    mark(seen, '10')
    # 10. the idle culler: B's server, started and then left alone, is stopped; B's files stay
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
        "culler_said": [line for line in service.tail(h.log, 400).splitlines()
                        if "Culling server" in line and h.b in line],
    }
    mark(seen, "end")


#: the submission secret B chose for the submission it forged in A's name
FORGED_SECRET = "b-chose-this-secret"

SQUAT = Path(__file__).with_name("squat.py")


def b_squats_the_port(h: Hub, browser, seen: dict) -> dict:
    """Issue 50's first failure: while the hub runs, B listens on its port on every address and with every option
    Linux allows (tests/hub/squat.py) and answers with a fake log-in page; the instructor, logged in, opens the hub's
    home and their own lab in Chromium (which tries ::1 first). What B got, what the instructor saw, and every
    request that reached B."""
    b_home = Path(pwd.getpwnam(h.b).pw_dir)
    shutil.copy(SQUAT, b_home / "squat.py")
    log = b_home / "squat.log"
    squatter = subprocess.Popen(["runuser", "-u", h.b, "--", "python3", str(b_home / "squat.py"), str(h.port),
                                 str(log)], stdout=subprocess.PIPE, text=True)
    try:
        tried = json.loads(squatter.stdout.readline())
        page = lab_page(browser, h, h.instructor, seen)
        shown = {}
        for name, url in (("home", f"{h.base}/hub/home"), ("lab", f"{h.server(h.instructor)}/lab")):
            response = page.goto(url)
            shown[name] = {"status": response.status if response else None, "title": page.title(),
                           "server": response.server_addr() if response else None}
        page.context.close()
    finally:
        squatter.kill()
        squatter.wait()
    return {"tried": tried, "shown": shown,
            "reached_b": log.read_text().splitlines() if log.exists() else [],
            # who listens on the port now, and whether anything of the hub listens on another TCP port
            "listeners": [(x.address, x.pid in service.hub_processes(h.layout)) for x in addresses.listeners(h.port)],
            "other_ports": hub_tcp_listeners(h)}


def hub_tcp_listeners(h: Hub) -> list[str]:
    """Every TCP socket that a process of the hub (the hub, its proxy and services, every user's server) listens on,
    other than the hub's port: none, when everything behind the proxy is a Unix socket. (A kernel's own IOPub pipe
    for its forked children, which ipykernel binds itself on a port of its choosing and checks with a secret, is no
    port another process was told to bind: not counted. Its channels to its server: ``kernel_transports``.)"""
    ours = service.hub_processes(h.layout)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if fields[3] == "0A" and port != h.port:
                owner = addresses.socket_owners({int(fields[9])}, ours).get(int(fields[9]))
                if owner is not None and "ipykernel_launcher" not in addresses.describe(owner):
                    found.append(f"{addresses.describe(owner)} on port {port}")
    return found


def the_proxy_dies_and_b_is_quicker(h: Hub) -> dict:
    """The proxy dies (the one moment the hub does not hold its port): B listens on [::1] before the hub starts a
    new proxy. The port guard stops B's process and names it in the hub's log; the hub's new proxy holds both
    addresses again."""
    proxy = int((h.layout.state / "proxy.pid").read_text())
    b = subprocess.Popen(["runuser", "-u", h.b, "--", "python3", "-c", (
        "import socket, sys, time\n"
        "print('trying', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        "while time.monotonic() < deadline:\n"
        "    s = socket.socket(socket.AF_INET6)\n"
        "    try:\n"
        f"        s.bind(('::1', {h.port})); s.listen(8); break\n"
        "    except OSError:\n"
        "        s.close(); time.sleep(0.002)\n"
        "else:\n"
        "    print('B never got [::1]', flush=True); sys.exit(1)\n"
        "print('B holds [::1]', flush=True); time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    assert b.stdout.readline().strip() == "trying"  # B's loop runs: now the proxy dies
    os.kill(proxy, signal.SIGKILL)
    got = b.stdout.readline().strip()
    deadline = time.monotonic() + 60
    while b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped_after = None if b.poll() is None else round(60 - (deadline - time.monotonic()), 1)
    for pid in [*service.descendants(b.pid), b.pid]:  # B's squatter, had the guard not stopped it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    b.wait()
    held = []
    while time.monotonic() < deadline:
        ours = service.hub_processes(h.layout)
        held = sorted(x.address for x in addresses.listeners(h.port) if x.pid in ours)
        if len(held) == 2:
            break
        time.sleep(0.5)
    return {"b": got, "stopped_after_s": stopped_after, "held_after": held,
            "guard_said": [line for line in service.tail(h.log, 200).splitlines() if "port guard:" in line]}


def b_fills_its_disk(h: Hub, sa: requests.Session, sb: requests.Session) -> dict:
    """Issue 50's second failure: B writes until nothing more fits, in its home, its /tmp, /var/tmp and /dev/shm;
    B's notebook then cannot be saved, and JupyterLab says why; A saves and submits, and the exchange, the machine's
    disk and the instructor's course are other filesystems. B's filler is removed afterwards."""
    fill = ("import os\n"
            "got = {}\n"
            "for place in (os.path.expanduser('~'), '/tmp', '/var/tmp', '/dev/shm'):\n"
            "    path, n = os.path.join(place, 'filler.bin'), 0\n"
            "    try:\n"
            "        with open(path, 'wb', buffering=0) as fh:\n"
            "            for chunk in (1 << 20, 1 << 12, 1):\n"
            "                try:\n"
            "                    while n < (400 << 20):\n"
            "                        n += fh.write(b'\\0' * chunk)\n"
            "                except OSError as exc:\n"
            "                    if chunk == 1:\n"
            "                        raise\n"
            "        got[place] = ['wrote', n]\n"
            "    except OSError as exc:\n"
            "        got[place] = [exc.strerror, n]\n"
            "    st = os.statvfs(place)\n"
            "    got[place].append(st.f_blocks * st.f_frsize)\n"
            "    if place != os.path.expanduser('~'):\n"
            "        os.remove(path)\n"
            "print('RESULT' + __import__('json').dumps(got))\n")
    path = f"{ASSIGNMENT}/{NOTEBOOK}"
    nb = h.notebook(sb, h.b, path)
    out = h.execute(sb, h.b, fill, timeout=300)
    found = [line for line in out["stdout"].splitlines() if line.startswith("RESULT")]
    wrote = json.loads(found[-1][len("RESULT"):]) if found else out
    r = h.call(sb, h.b, "PUT", f"api/contents/{path}",
               data=json.dumps({"type": "notebook", "format": "json", "content": nb}))
    b_save = (r.status_code, r.json().get("message", "") if r.headers.get("Content-Type", "").startswith(
        "application/json") else r.text[:500])
    a_nb = h.notebook(sa, h.a, path)
    r = h.call(sa, h.a, "PUT", f"api/contents/{path}", data=json.dumps({"type": "notebook", "format": "json",
                                                                        "content": a_nb}))
    a_save = r.status_code
    a_submit = h.assignments(sa, h.a, "submit")
    devices = {what: os.stat(place).st_dev for what, place in (
        ("b's home", pwd.getpwnam(h.b).pw_dir), ("a's home", pwd.getpwnam(h.a).pw_dir),
        ("exchange", h.layout.exchange), ("machine", "/"),
        ("instructor's course", Path(pwd.getpwnam(h.instructor).pw_dir) / "course"))}
    h.as_user(h.b, "rm", "-f", f"{pwd.getpwnam(h.b).pw_dir}/filler.bin")
    return {"wrote": wrote, "b_save": b_save, "a_save": a_save, "a_submitted": [x["status"] for x in a_submit],
            "devices": devices}


def a_class_arrives(h: Hub, si: requests.Session) -> dict:
    """The class of h.arriving logs in within ARRIVE_S seconds (benchmarks/class_arrival.py's own arrivals: the
    hub's form, the server, the lab, fetch, a kernel's cell importing torch and course_lib, submit); the instructor
    collects and grades them. Each step's p50 and p95."""
    import runpy

    bench = runpy.run_path(str(ROOT / "benchmarks" / "class_arrival.py"))
    passwords = h.passwords()
    t = time.monotonic()
    arrivals = bench["arrive"](h.base, h.port, {u: passwords[u] for u in h.arriving}, h.admin(), ASSIGNMENT,
                               within_s=ARRIVE_S, seed=50)
    took = time.monotonic() - t
    collect = h.in_server(si, h.instructor, "nbgrader", "collect", ASSIGNMENT)
    grade = h.in_server(si, h.instructor, "python", "-m", "classroom.grade", "--jobs", "1")
    home = Path(pwd.getpwnam(h.instructor).pw_dir)
    grades = {r["student_id"]: r for r in csv.DictReader((home / "course" / "grades.csv").open())}
    return {"failed": {a.user: a.failed for a in arrivals if a.failed}, "steps": bench["percentiles"](arrivals),
            "took_s": round(took, 1), "collect": collect.returncode, "grade": grade.returncode,
            "graded": {u: grades.get(u, {}).get("status", "") for u in h.arriving},
            "memory_peak": {u: HubGroups(h.layout.prefix).usage("learners", u)["memory_peak"] for u in h.arriving}}


def an_update_reaches_the_learners(h: Hub, si: requests.Session, sa: requests.Session) -> dict:
    """The instructor corrects the release (an added errata file, a cell added to the notebook) and releases it
    again. A, who wrote in the notebook, and C, who fetched and wrote nothing, see the assignment released anew and
    fetch it: C's notebook is the new one; A's is A's, with the new one beside it; both get the errata."""
    course = Path(pwd.getpwnam(h.instructor).pw_dir) / "course"
    release = course / "exercises" / ASSIGNMENT
    entry = pwd.getpwnam(h.instructor)
    (release / "errata.md").write_text("Errata: the scale is 1/sqrt(d_k).\n")
    os.chown(release / "errata.md", entry.pw_uid, entry.pw_gid)
    nb = nbformat.read(release / NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Errata: the scale is $1/\\sqrt{d_k}$."))
    nbformat.write(nb, release / NOTEBOOK)
    res = h.in_server(si, h.instructor, "nbgrader", "release_assignment", ASSIGNMENT, "--force")
    c = h.arriving[0]
    sc = h.login(c)
    out = {"release": res.returncode, "listed": {}, "fetched": {}}
    for user, s in ((h.a, sa), (c, sc)):
        out["listed"][user] = {x["assignment_id"]: x["status"] for x in h.assignments(s, user)
                               if x["status"] != "submitted"}
        a_before = h.notebook(s, user, f"{ASSIGNMENT}/{NOTEBOOK}")
        h.assignments(s, user, "fetch")
        folder = {x["name"] for x in h.call(s, user, "GET", f"api/contents/{ASSIGNMENT}").json()["content"]}
        after = h.notebook(s, user, f"{ASSIGNMENT}/{NOTEBOOK}")
        out["fetched"][user] = {"files": sorted(folder), "kept": after.cells == a_before.cells,
                                "has_errata": "Errata" in after.cells[-1].source}
        out["listed_after"] = {x["assignment_id"]: x["status"] for x in h.assignments(s, user)
                               if x["status"] != "submitted"}
    return out


def b_attacks_the_exchange(h: Hub, seen: dict) -> None:
    """Step 2's attacks by hand, as B's account: a submission of B's own with links, a FIFO and an early time; one in
    A's name; renaming, reading and writing what is not B's."""
    i_home = Path(pwd.getpwnam(h.instructor).pw_dir)
    b_home = Path(pwd.getpwnam(h.b).pw_dir)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=5)
    mine = h.inbound / f"{h.b}+{ASSIGNMENT}+{utc_name(now)}+handmade"
    forged = h.inbound / f"{h.a}+{ASSIGNMENT}+{utc_name(now + dt.timedelta(seconds=1))}+forged"
    notebook = b_home / ASSIGNMENT / NOTEBOOK
    cache = b_home / ".local" / "share" / "jupyter" / "nbgrader_cache" / COURSE_ID
    script = "\n".join([
        "set -eu",
        f"mkdir '{mine}' && cp '{notebook}' '{mine}/'",
        f"printf '%s' '{utc_name(seen['due'] - dt.timedelta(hours=1))}' > '{mine}/timestamp.txt'",  # an early claim
        # the secret of B's last submission through the Assignments tab, so that B's feedback reaches B
        f"cp \"$(ls -d '{cache}'/*+{ASSIGNMENT}+* | sort | tail -n 1)/submission_secret.txt\" '{mine}/'",
        f"ln -s '{i_home / 'course' / 'class.csv'}' '{mine}/class.csv'",
        f"ln -s '{i_home / '.bash_history'}' '{mine}/history.txt'",
        f"ln -s '{i_home / 'course'}' '{mine}/course'",
        f"mkfifo '{mine}/pipe'",
        f"chmod 640 '{mine}/{NOTEBOOK}' '{mine}/timestamp.txt' '{mine}/submission_secret.txt'",  # for the instructors
        f"mkdir '{forged}' && cp '{notebook}' '{forged}/'",
        f"printf '%s' '{utc_name(now)}' > '{forged}/timestamp.txt'",
        f"printf '%s' '{FORGED_SECRET}' > '{forged}/submission_secret.txt'",
    ])
    res = h.as_user(h.b, "bash", "-c", script)
    assert res.returncode == 0, f"B's own folders in inbound could not be made: {res.stderr}"
    a_entry = next(p for p in h.inbound.iterdir() if p.name.startswith(f"{h.a}+") and not p.name.endswith("forged"))
    course = h.layout.exchange / COURSE_ID
    seen["b_tries"] = {what: h.as_user(h.b, *cmd).returncode for what, cmd in {
        "rename the course folder": ("mv", str(course), str(h.layout.exchange / "moved")),
        "make a course folder": ("mkdir", str(h.layout.exchange / "another-course")),
        "write into the release": ("touch", str(course / "outbound" / ASSIGNMENT / "extra.ipynb")),
        "list A's submission": ("ls", str(a_entry)),
        "read A's notebook": ("cat", str(a_entry / NOTEBOOK)),
        "add to A's submission": ("touch", str(a_entry / "extra.ipynb")),
        "rename A's submission": ("mv", str(a_entry), str(h.inbound / "renamed")),
        "remove A's submission": ("rm", "-rf", str(a_entry)),
    }.items()}
    seen["a_entry_modes"] = {p.name: oct(p.stat().st_mode & 0o7777) for p in [a_entry, *a_entry.iterdir()]}
    seen["exchange_modes"] = {str(p.relative_to(h.layout.prefix)): [oct(p.stat().st_mode & 0o7777), p.owner()]
                              for p in (h.layout.exchange, course, h.inbound, course / "outbound", course / "feedback")}


def what_the_course_holds_of(h: Hub, learner: str) -> dict:
    """B's folders in the instructor's course after grading: their links, and whether any file holds what the
    instructor's files hold."""
    course = Path(pwd.getpwnam(h.instructor).pw_dir) / "course"
    folders = [course / part / learner for part in ("submitted", "autograded", "feedback")]
    files = [p for folder in folders for p in folder.rglob("*")]
    secret = (course / "grading-secret").read_text().strip()
    return {
        "links": [str(p) for p in files if p.is_symlink()],
        "names": sorted({p.name for p in files}),
        "leaks": [str(p) for p in files if p.is_file() and not p.is_symlink()
                  and any(s.encode() in p.read_bytes() for s in [*sentinels(), secret])],
    }


def running_parts(h: Hub) -> dict[str, int]:
    """How many of each of the hub's programs run now."""
    cmds = [" ".join(Path(f"/proc/{p}/cmdline").read_text().split("\0")) for p in service.hub_processes(h.layout)
            if Path(f"/proc/{p}/cmdline").exists()]
    return {part: sum(part in c for c in cmds)
            for part in ("proxy.mjs", "jupyterhub_idle_culler", "classroom.hub.guard", "bin/jupyterhub ")}


#: the idle limit of step 10 (the culler then looks every 10 s): short, so that the test waits under a minute
IDLE_S = 20
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
UI_MS = 90_000


def lab_page(browser, h: Hub, user: str, seen: dict, context=None):
    """A new Chromium page logged in as ``user`` through the hub's form, on the user's JupyterLab; requests to
    anything but the hub and its users' servers are blocked and recorded in seen["blocked"]."""
    context = context or browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
    on_hub = re.compile(rf"^http://([a-z0-9_-]+\.)?localhost:{h.port}/")

    def guard(route):
        if on_hub.match(route.request.url) or route.request.url.startswith(("data:", "blob:", "about:")):
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
    """What a learner's and the instructor's JupyterLab offer, whether the instructor's formgrader renders, and
    whether B's graded notebook runs B's script when the instructor opens it in the formgrader."""
    from nbgrader.api import Gradebook

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
            course = Path(pwd.getpwnam(h.instructor).pw_dir) / "course"
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
                graded = gb.find_submission_notebook(Path(NOTEBOOK).stem, ASSIGNMENT, h.b).id
            before = len(seen.get("blocked", []))  # what the grading view asks of other hosts: nothing
            requested: list[str] = []  # every request the grading view makes, on the hub or off it
            page.on("request", lambda r, into=requested: into.append(r.url))
            page.goto(f"{h.server(user)}/formgrader/submissions/{graded}/?index=0")
            page.locator(f"[id$='{XSS_MARK}']").first.wait_for()  # B's HTML output (its id is B's, prefixed)
            page.wait_for_timeout(1500)  # time for a script, an image's handler or a refresh, had one survived
            shown["formgrader_b"] = {"title": page.title(), "scripts_of_b": page.evaluate(
                f"() => Array.from(document.querySelectorAll('script, img[onerror]'))"
                f".filter(e => (e.outerHTML || '').includes('{XSS_MARK}')).length")}
            # B's markdown (tests/hostile_pages.py): what ran, what it asked for, what of it would run or load
            shown["formgrader_b_markdown"] = page.evaluate(PAGE_STATE, ".rendered_html")  # B's cells and outputs
            # MathJax keeps each formula's TeX (or MathML) in a <script type="math/..."> of its own (data a browser
            # never runs):
            # those are MathJax's, not B's
            shown["formgrader_b_markdown"]["mathjax_scripts"] = page.evaluate(
                "() => document.querySelectorAll('.rendered_html script[type^=\"math/\"]').length")
            shown["formgrader_b_markdown"]["beacons"] = [u for u in requested if HUB_BEACON_PATH in u]
            # MathJax from the instructor's own server (hub/mathjax.html.j2), nothing from elsewhere
            page.wait_for_function("() => window.MathJax && window.MathJax.Hub", timeout=30_000)
            shown["formgrader_mathjax"] = page.evaluate(
                "() => Array.from(document.scripts).map(s => s.src).filter(src => src.includes('MathJax'))")
            seen["blocked_by_grading_view"] = seen.get("blocked", [])[before:]
            del seen.get("blocked", [])[before:]
        else:
            page.keyboard.press("Escape")
        page.context.close()
    return shown


def b_serves_a_page(h: Hub, browser, seen: dict) -> tuple[dict, requests.Session]:
    """B serves a page through its own Jupyter settings and restarts its server; the instructor, logged in to their
    JupyterLab, opens it; then a script on B's address (any page there) tries the instructor's server."""
    b_home = Path(pwd.getpwnam(h.b).pw_dir)
    script = "\n".join([
        f"mkdir -p '{b_home}/.jupyter' '{b_home}/pages'",
        f"echo \"c.ServerApp.extra_static_paths = ['{b_home}/pages']\" > '{b_home}/.jupyter/jupyter_server_config.py'",
        f"echo '<p id=\"{XSS_MARK}\">B was here</p>' > '{b_home}/pages/pry.html'",
    ])
    assert h.as_user(h.b, "bash", "-c", script).returncode == 0
    r = requests.delete(f"{h.base}/hub/api/users/{h.b}/server", headers=h.admin(), timeout=120)
    assert r.status_code in (202, 204), r.status_code
    for _ in range(120):
        if "" not in requests.get(f"{h.base}/hub/api/users/{h.b}", headers=h.admin(), timeout=30).json()["servers"]:
            break
        time.sleep(0.5)
    sb = h.login(h.b)
    page = lab_page(browser, h, h.instructor, seen)  # the instructor, logged in to their own server
    response = page.goto(f"{h.server(h.b)}/static/pry.html")
    out = {"status": response.status if response else None, "url": page.url,
           "origin": page.evaluate("() => window.location.origin")}
    target = f"{h.server(h.instructor)}/api/contents/course/class.csv?content=1"
    out["tries"] = page.evaluate("""async ([target, relative, formgrader]) => {
        const tried = {};
        for (const [name, url] of [["instructor's server", target], ["same path here", relative]]) {
            try {
                const r = await fetch(url, {credentials: "include"});
                tried[name] = r.status + " " + (await r.text()).slice(0, 300);
            } catch (e) { tried[name] = "refused: " + e.name; }
        }
        const frame = document.createElement("iframe");
        frame.src = formgrader;
        document.body.appendChild(frame);
        await new Promise(done => { frame.onload = done; setTimeout(done, 5000); });
        try { tried["frame"] = frame.contentDocument ? frame.contentDocument.body.innerText.slice(0, 300) : "null"; }
        catch (e) { tried["frame"] = "refused: " + e.name; }
        return tried;
    }""", [target, f"/user/{h.instructor}/api/contents/course/class.csv?content=1",
           f"{h.server(h.instructor)}/formgrader"])
    page.context.close()
    return out, sb


# --- the term's ordinary course --------------------------------------------------------------------------------

def test_accounts_are_private_and_a_bad_row_is_named(term):
    h, seen = term
    assert any(f"line 4: id '{h.a}' is already on line 2: skipped" in line for line in seen["users"]), seen["users"]
    for user in (h.instructor, h.a, h.b):
        home = Path(pwd.getpwnam(user).pw_dir)
        assert home.stat().st_mode & 0o777 == 0o700, f"{user}'s home is {oct(home.stat().st_mode)}"
    assert set(grp.getgrnam(h.groups.learners).gr_mem) == {h.a, h.b, *h.arriving}
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
    full = sum(ex.points for ex in registered_assignment(ASSIGNMENT).exercises)  # the prediction's point included
    assert "2.0" in a and f"{full:.1f}" in a, f"A's feedback should show 2 of {full} points"
    assert "not implemented yet" in a
    shown = seen["feedback_a_shown"]  # the same page as Chromium shows it to A, with nothing loaded off the hub
    assert "Score: 2.0 / 2.0" in shown and "not implemented yet" in shown and "check(" not in shown, shown[:2000]
    assert "what the kernel saw" in b, "B's prying exercise should show what its code saw while graded"


def test_a_learner_cannot_reach_other_work_or_the_instructors_tools(term):
    h, seen = term
    assert seen["b_lists_inbound"].returncode != 0 and "Permission denied" in seen["b_lists_inbound"].stderr
    assert seen["b_reads_a"].returncode != 0 and "Permission denied" in seen["b_reads_a"].stderr
    assert seen["b_formgrader"] == 404
    assert seen["b_csp"] == "frame-ancestors 'none'"
    status, csp = seen["instructor_formgrader"]
    assert status == 200 and csp == "frame-ancestors 'self'", seen["instructor_formgrader"]


def test_in_the_browser_each_role_has_its_tools_and_the_formgrader_renders(term):
    h, seen = term
    shown = seen["browser"]
    assert shown[f"menu_{h.b}"] == ["Assignment List"], shown
    assert "Formgrader" in shown[f"menu_{h.instructor}"], shown
    assert ASSIGNMENT in shown["formgrader_frame"], f"the formgrader's frame is blank or lacks {ASSIGNMENT}: {shown}"
    assert not seen.get("blocked"), f"the lab pages tried to reach other hosts: {sorted(set(seen['blocked']))}"


# --- each attack of issue 42, and why it fails --------------------------------------------------------------------

def what_the_kernel_saw(text: str) -> dict:
    """The prying exercise's report, {place: listing, contents or the exception's name}, from its error's text."""
    import ast
    import html

    found = re.search(r"what the kernel saw: (\{[\"'].*\})", html.unescape(text))
    assert found, f"no report of the prying exercise in: {text[:1000]}"
    return ast.literal_eval(found.group(1))


def assert_saw_nothing(saw: dict) -> None:
    for what, result in saw.items():
        assert result in ("FileNotFoundError", "PermissionError") or result == [], f"graded code saw {what}: {result}"


def test_links_in_a_learners_submission_are_refused_and_nothing_of_the_instructors_reaches_them(term):
    """Attack 1: B's own inbound folder holds links to the instructor's files (and a FIFO, which must not hang
    collect). Collect names each and takes B's notebook alone; B's graded copy, feedback and page hold nothing of
    the instructor's."""
    h, seen = term
    said = seen["collect"].stdout + seen["collect"].stderr
    for name in ("class.csv", "history.txt", "course"):
        assert re.search(rf"refused .*handmade/{name}: a symbolic link \(to /home/{h.instructor}/", said), said
    assert re.search(r"refused .*handmade/pipe: a FIFO \(named pipe\): refused", said), said
    copies = seen["b_copies"]
    assert copies["links"] == [] and copies["leaks"] == [], copies
    assert not {"class.csv", "history.txt", "course", "pipe"} & set(copies["names"]), copies["names"]
    for page in (seen[f"feedback_all_{h.b}"], seen[f"feedback_all_{h.a}"]):
        assert not any(s in page for s in sentinels()), "the instructor's files reached a feedback page"


def test_a_submission_in_another_learners_name_is_refused(term):
    """Attack 2: B makes inbound/<A>+... with B's notebook and a secret B chose. Collect refuses it by its owner and
    collects A's own submission; no feedback is released under B's secret."""
    h, seen = term
    said = seen["collect"].stdout + seen["collect"].stderr
    assert re.search(rf"refused .*/{h.a}\+{ASSIGNMENT}\+.*\+forged: made by {h.b}, not by {h.a}: a submission in "
                     "another's name is refused, not collected", said), said
    assert float(seen["grades"][h.a]["score"]) == 2, "A was not graded on A's own notebook"
    assert seen["feedback_under_forged_secret"].returncode != 0, "feedback was released under the forger's secret"


def test_a_submissions_time_is_when_its_files_were_written(term):
    """B's hand-made submission claims a time an hour before the due date in its timestamp.txt: its files were
    written after it, so B is late (the grades' test shows it), and collect says why."""
    h, seen = term
    said = seen["collect"].stdout + seen["collect"].stderr
    assert re.search(r"handmade: its timestamp.txt says .*, but its files were last changed at .* \(UTC\): the "
                     "files' time is the submission's time", said), said
    assert seen["grades"][h.b]["status"].startswith("graded, late by"), seen["grades"][h.b]


def test_the_exchange_cannot_be_replaced_and_a_submission_is_its_learners_alone(term):
    """Attack 3: B renames the course's folder, makes another, writes into the release, lists, reads, adds to,
    renames and removes A's submission: each is refused by the exchange's owners and modes."""
    h, seen = term
    assert all(code != 0 for code in seen["b_tries"].values()), seen["b_tries"]
    modes = seen["exchange_modes"]
    assert modes["exchange"] == ["0o755", "root"], modes
    assert modes[f"exchange/{COURSE_ID}"] == ["0o755", h.instructor], modes
    assert modes[f"exchange/{COURSE_ID}/inbound"] == ["0o3733", h.instructor], modes
    assert set(seen["a_entry_modes"].values()) <= {"0o750", "0o2750", "0o640"}, seen["a_entry_modes"]


def test_no_learner_page_runs_as_the_instructor(term):
    """Attack 4: B's own Jupyter settings add a folder of pages to B's server; the logged-in instructor opens B's
    page: it is not served (the user's settings are not read), and a script on B's address (any page of B's
    server) can neither read nor frame the instructor's server (B's server is another site: subdomains). B's
    graded notebook, opened in the instructor's formgrader, runs none of B's HTML."""
    h, seen = term
    page = seen["b_page"]
    assert page["status"] == 404, page
    assert page["origin"] == f"http://{h.b}.localhost:{h.port}", page
    tries = page["tries"]
    assert tries["instructor's server"].startswith("refused:"), tries
    assert not any(s in json.dumps(tries) for s in sentinels()), tries
    assert tries["frame"] in ("null", "refused: SecurityError"), tries
    b_in_formgrader = seen["browser"]["formgrader_b"]
    assert b_in_formgrader == {"title": b_in_formgrader["title"], "scripts_of_b": 0}, b_in_formgrader
    assert XSS_MARK not in b_in_formgrader["title"], b_in_formgrader
    # issue 49: B's markdown (scripts, handlers, forms, frames, refresh, <base>, CSS and image beacons, a missing
    # attachment) in the instructor's formgrader runs nothing, asks for nothing, and leaves nothing that would
    markdown = seen["browser"]["formgrader_b_markdown"]
    assert markdown["ran"] is None and MARK not in markdown["title"], markdown
    assert markdown["beacons"] == [], f"B's markdown asked for {markdown['beacons']}"
    bad = list(markdown["bad"])
    for _ in range(markdown.get("mathjax_scripts", 0)):  # MathJax's TeX holders (hub/mathjax.html.j2), not B's
        bad.remove("<script>")
    assert bad == [] and "/formgrader/submissions/" in markdown["url"], markdown
    assert "no image attached as 'missing.png'" in markdown["text"], markdown["text"][:3000]
    # and B's own feedback page, written by make feedback (which a missing attachment no longer stops): the
    # template's scripts alone (as many as on A's page), nothing that names the beacon
    feedback = seen[f"feedback_{h.b}"]
    assert "no image attached as 'missing.png'" in feedback, feedback[-3000:]
    assert feedback.lower().count("<script") == seen[f"feedback_{h.a}"].lower().count("<script"), feedback[-3000:]
    assert HUB_BEACON_PATH not in feedback


def test_the_fence_holds_wherever_grading_starts(term):
    """Attack 5: B's graded code lists and reads A's home, the exchange and the instructor's files, graded from the
    instructor's JupyterLab and again from a plain root shell (runuser, no variable the hub's spawner sets)."""
    h, seen = term
    res = seen["root_shell_grade"]
    assert res.returncode == 0, res.stdout + res.stderr
    from_lab = what_the_kernel_saw(seen[f"feedback_{h.b}"])
    from_shell = what_the_kernel_saw(seen["fence_from_root_shell"])
    assert set(from_lab) == set(from_shell) == {"A's home", "inbound", "exchange", "A's notebook", "class list",
                                                "history"}, (from_lab, from_shell)
    assert_saw_nothing(from_lab)
    assert_saw_nothing(from_shell)


def test_make_hub_stop_after_the_hub_was_killed_stops_everything_it_started(term):
    """Attack 6, first half: the hub dies by SIGKILL; make hub-stop names and stops its proxy, its culler and the
    users' servers and kernels it left, and nothing of theirs runs afterwards."""
    h, seen = term
    assert seen["before_kill"]["proxy.mjs"] == 1 and seen["before_kill"]["jupyterhub_idle_culler"] == 1
    said = seen["stop_after_kill"].stdout
    assert seen["stop_after_kill"].returncode == 0 and "the hub was not running (killed?)" in said, said
    for part in ("proxy.mjs", "jupyterhub_idle_culler", "classroom.hub.guard",
                 f"of {h.a} (python jupyterhub-singleuser", f"of {h.b} (python jupyterhub-singleuser",
                 "ipykernel_launcher"):
        assert part in said, f"make hub-stop did not name {part}: {said}"
    assert seen["running_after_stop"] == {"hub's": [], "users'": {h.instructor: [], h.a: [], h.b: []}}, \
        seen["running_after_stop"]


def test_make_hub_refuses_a_port_a_learner_holds(term):
    """Attack 6, second half: while the hub is down, B listens on its port; make hub refuses to start, naming B's
    process, instead of reporting a hub that B's fake log-in page would answer for."""
    h, seen = term
    said = seen["started_on_held_port"]
    assert said.startswith(f"HUB_PORT {h.port} is held by process ") and f"of {h.b} (python3 -m http.server" in said \
        and f"on [::1]:{h.port}" in said, \
        said


def test_a_restart_after_a_kill_runs_one_of_each_and_keeps_everything(term):
    h, seen = term
    assert any("stopped what an earlier hub left running" in line and "proxy.mjs" in line
               for line in seen["restart_report"]), seen["restart_report"]
    after = seen["after_restart"]
    assert after["running"] == {"proxy.mjs": 1, "jupyterhub_idle_culler": 1, "classroom.hub.guard": 1,
                                "bin/jupyterhub ": 1}, \
        after["running"]
    assert {x["status"] for x in after["listed"]} == {"fetched", "submitted"}, after["listed"]
    assert after["feedback"] == 200
    assert {u: after["grades"][u] for u in (h.a, h.b)} == {h.a: "2", h.b: "0"}


def test_a_kernel_over_its_memory_limit_dies_with_a_clear_message_while_another_learner_works(term):
    """Attack 7: B's kernel asks for 3 GiB against B's 2 GiB: it is stopped, the running cell says why and names the
    limit, B's server and a fresh kernel go on, and A's kernel computes meanwhile."""
    h, seen = term
    over = seen["b_over_memory"]
    limit = default_limits().memory
    assert over["reply"] is None and "still here" not in over["stdout"], over
    assert (f"The kernel was stopped: your server and its kernels used more than their memory limit, "
            f"{limit / 2**30:.1f} GiB together") in over["stderr"], over
    assert over["restarting"], over
    assert seen["a_meanwhile"]["stdout"].strip() == str(sum(range(10**6))), seen["a_meanwhile"]
    assert seen["b_server_after"] == 200 and seen["b_after"]["stdout"].strip() == "42", seen["b_after"]


def test_each_learner_has_the_limits_make_hub_chose_and_private_files(term):
    h, seen = term
    limits = default_limits()
    assert seen["limits_of_b"] == {"memory": limits.memory, "cpus": limits.cpus, "tasks": limits.tasks}, \
        seen["limits_of_b"]
    a_said = seen["private"]["a"]["stdout"].split()
    assert a_said[:2] == ["0o600", "0o600"] and "a-private.txt" in " ".join(a_said[2:]), seen["private"]
    assert "a-private.txt" not in seen["private"]["b"]["stdout"], "B's /tmp shows A's file"


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


# --- issue 50: every address of the hub's port is the hub's; each learner's disk is bounded; a class arrives at once

def test_every_address_of_the_hubs_port_is_the_hubs(term):
    """B listens on the hub's port on every address and with every option Linux allows an unprivileged user
    (IPv4's loopback and wildcard, IPv6's loopback, its wildcard with IPV6_V6ONLY on and off, IPv4-mapped addresses,
    SO_REUSEADDR and SO_REUSEPORT): none that a browser uses for localhost is B's, and the logged-in instructor's
    Chromium (IPv6's ::1 first) gets the hub's pages, on localhost and on their own subdomain, sending B nothing."""
    from squat import NOT_LOCALHOST

    h, seen = term
    squat = seen["squat"]
    got = [name for name, result in squat["tried"].items()
           if result == "listening" and not name.startswith(NOT_LOCALHOST)]
    assert got == [], f"B listens on the hub's port at {got}"
    assert squat["reached_b"] == [], f"the instructor's browser reached B: {squat['reached_b']}"
    shown = squat["shown"]
    assert shown["home"]["status"] == 200 and "JupyterHub" in shown["home"]["title"], shown
    assert shown["home"]["server"]["ipAddress"] in ("::1", "[::1]"), f"Chromium did not try IPv6 first: {shown}"
    assert shown["lab"]["status"] == 200 and "JupyterLab" in shown["lab"]["title"], shown
    assert sorted(squat["listeners"]) == [("127.0.0.1", True), ("::1", True)], squat["listeners"]


def test_nothing_behind_the_proxy_listens_on_a_port(term):
    """The hub's API, the proxy's API, every user's server and every kernel are Unix sockets in folders nobody else
    can write: no port the spawner chooses for a server or a kernel is left for a learner to bind first."""
    h, seen = term
    assert seen["squat"]["other_ports"] == [], seen["squat"]["other_ports"]
    assert seen["kernel_transports"] == {h.a: "ipc", h.instructor: "ipc"}, seen["kernel_transports"]


def test_a_squatter_quicker_than_a_restarted_proxy_is_stopped_and_named(term):
    """The proxy dies and B listens on [::1] before the hub's new proxy: the port guard stops B's process within
    seconds, names it in the hub's log, and the new proxy holds both addresses."""
    h, seen = term
    guard = seen["guard"]
    assert guard["b"] == "B holds [::1]", guard
    assert guard["stopped_after_s"] is not None and guard["stopped_after_s"] < 15, guard
    assert any(f"of {h.b} (python3" in line and f"on [::1]:{h.port}" in line for line in guard["guard_said"]), guard
    assert guard["held_after"] == ["127.0.0.1", "::1"], guard


def test_a_learner_fills_only_their_own_disk_and_is_told_so(term):
    """B writes until nothing fits: B's home stops at its size, /tmp, /var/tmp and /dev/shm are B's own memory;
    B's save is refused with the course's words; A saves and submits; the exchange, the instructor's course and the
    machine's disk are filesystems of their own."""
    h, seen = term
    disk = seen["disk"]
    wrote = disk["wrote"]
    home = pwd.getpwnam(h.b).pw_dir
    assert wrote[home][0] == "No space left on device" and wrote[home][1] <= DISKS.home, wrote
    for place in ("/tmp", "/var/tmp", "/dev/shm"):
        assert wrote[place][0] in ("No space left on device", "wrote") and wrote[place][2] <= default_limits().memory, \
            wrote
    status, message = disk["b_save"]
    assert status == 507 and "Your home folder is full" in message, disk["b_save"]
    assert disk["a_save"] == 200 and "submitted" in disk["a_submitted"], disk
    devices = disk["devices"]
    assert len({devices[w] for w in ("b's home", "a's home", "exchange", "machine")}) == 4, devices
    assert devices["instructor's course"] == devices["machine"], devices


def test_a_class_arriving_at_once_gets_through(term):
    """ARRIVING learners log in within ARRIVE_S seconds, each opens the lab, fetches, runs a cell importing torch
    and course_lib, and submits; the instructor collects and grades every one. The per-step times are reported."""
    h, seen = term
    arrival = seen["arrival"]
    print(f"class arrival ({ARRIVING} learners within {ARRIVE_S} s): {json.dumps(arrival['steps'])}")
    assert arrival["failed"] == {}, arrival["failed"]
    assert arrival["collect"] == 0 and arrival["grade"] == 0, arrival
    assert all(status.startswith("graded") for status in arrival["graded"].values()), arrival["graded"]
    assert set(arrival["steps"]) == {"log-in to lab", "fetch", "first cell", "submit"}, arrival["steps"]


def test_the_hubs_start_leaves_others_processes_of_the_course_python_alone(term):
    """B's own script and the instructor's (grading from ssh, say) run the course environment's Python outside the
    hub: the hub's stop and start, with no control groups left to go by, stop neither."""
    h, seen = term
    assert seen["bystanders"] == {h.b: True, h.instructor: True}, seen["bystanders"]


def test_a_course_update_reaches_the_learners_without_losing_their_work(term):
    """An updated release shows as released again; fetching it adds what is new, replaces the notebook of a learner
    who had not changed it, and keeps the notebook of one who had, the update beside it."""
    h, seen = term
    update = seen["update"]
    c = h.arriving[0]
    assert update["release"] == 0, update
    assert update["listed"] == {h.a: {ASSIGNMENT: "released"}, c: {ASSIGNMENT: "released"}}, update["listed"]
    a, cc = update["fetched"][h.a], update["fetched"][c]
    assert a["kept"] and not a["has_errata"] and {"errata.md", "attention.updated.ipynb"} <= set(a["files"]), a
    assert cc["has_errata"] and "errata.md" in cc["files"] and "attention.updated.ipynb" not in cc["files"], cc
    assert update["listed_after"] == {ASSIGNMENT: "fetched"}, update


def test_the_formgrader_loads_nothing_from_outside(term):
    """The formgrader's grading view (nbgrader asks a CDN for MathJax) loads MathJax from the instructor's own server
    and asks no other host for anything."""
    h, seen = term
    assert seen["blocked_by_grading_view"] == [], seen["blocked_by_grading_view"]
    scripts = seen["browser"]["formgrader_mathjax"]
    assert scripts and all(src.startswith(f"{h.server(h.instructor)}/static/jupyter_server_mathjax/MathJax.js")
                           for src in scripts), scripts
