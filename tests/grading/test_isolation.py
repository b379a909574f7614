"""A submission is the unit of failure: whatever one learner hands in costs that learner alone.

One `make grade` run (two jobs, as root) grades honest learners of 02-attention beside submissions that attack the
run itself rather than the checks (issue 49): a notebook nested 100,000 deep, a cell of a megabyte, a copied test
cell and nbgrader marks of another version or of no cell, cells that ignore the interrupt and spin, a notebook that
spends its budget, outputs that flood the grader and one that floods to hide a failing test, a kernel that holds its
memory in memfd, a kernel that reads the grader's environment, folder names written for a spreadsheet and a
terminal. The invariants: every honest classmate graded in full and reported so; the attacker graded as the rules
say, with the reason named; the run bounded in time; nothing written outside the course; every CSV cell inert.

A second set of runs grades as an unprivileged account, the way the hub's instructor grades: inside a control group
delegated to it, where a kernel holding memfd memory is stopped by its own group and the classmates are graded; and
outside one, where `make grade` refuses unless the weaker mode is asked for by name.
"""

from __future__ import annotations

import copy
import csv
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from classroom.text_out import is_inert
from grader.notebook import grade_id
from grader.registry import assignment as registered_assignment
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "02-attention", "attention"
#: every test cell's points, the prediction's included (grader.registry, which the notebook's marks agree with)
FULL = {f"test_{ex.name}": ex.points for ex in registered_assignment("02-attention").exercises}
TIMEOUT = 8  # seconds per cell in these runs
BUDGET = 90  # GRADER_NOTEBOOK_SECONDS: the cells stop at 67 s, the honest notebook takes about 5
SPIN = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
#: memory held in memfd, 256 MiB a file (under the kernel's file-size limit), its pages allocated at once
#: (posix_fallocate), past the process limits' sight
MEMFD = ("import os\nfds = []\n"
         "for n in range({mib} // 256):\n    fds.append(os.memfd_create(f'hog{{n}}'))\n"
         "    os.posix_fallocate(fds[-1], 0, 256 << 20)\nprint('NOT STOPPED')\n")
ENV_PROBE = ("import os\nprint('ENV', sorted(os.environ))\nprint('OOM', open('/proc/self/oom_score_adj').read())\n"
             "try:\n    print('PROC', open('/proc/self/environ', 'rb').read().replace(b'\\0', b' ').decode())\n"
             "except OSError as exc:\n    print('PROC', exc)\n")
#: what the instructor's shell holds when they grade: none of it may reach a kernel
INSTRUCTOR_ENV = {"MYSQL_PWD": "hunter2-mysql", "COURSE_NOTES_FOR_ME": "hunter2-notes", "AWS_SESSION": "hunter2-aws"}
#: learners' folders that are no learner's id: named, not graded, and inert in grades.csv and the terminal
BAD_NAMES = ["=HYPERLINK(\"x.invalid\",\"y\")", "+SUM(1,1)", "@cmd", "\x1b[2Jclears", "tab\tname"]


def _release():
    return nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def _index(nb, gid: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if grade_id(c) == gid)


def _with_cell_after(gid: str, source: str, count: int = 1):
    nb = _release()
    at = _index(nb, gid) + 1
    for _ in range(count):
        nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


def _class() -> dict[str, object]:
    """student -> a notebook (nbformat) or raw bytes."""
    out: dict[str, object] = {name: _release() for name in ("honest_a", "honest_b", "honest_c")}
    out["nested_deep"] = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    nb = _release()
    nb.cells[_index(nb, "causal_mask")].source += "\nPADDING = '" + "x" * (1 << 20) + "'\n"
    out["huge_cell"] = nb
    nb = _release()
    at = _index(nb, "test_causal_mask")
    nb.cells.insert(at, copy.deepcopy(nb.cells[at]))  # tried above its solution, as a learner might
    out["copies_a_test"] = nb
    nb = _release()
    nb.cells[_index(nb, "causal_mask")].metadata["nbgrader"]["schema_version"] = 4
    nb.cells[_index(nb, "test_causal_mask")].metadata["nbgrader"]["points"] = 50
    out["edits_its_marks"] = nb
    nb = _release()
    nb.cells.append(nbformat.v4.new_code_cell("BONUS = True", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": False, "grade_id": "test_bonus", "points": 100,
        "schema_version": 3}}))
    nb.cells.append(nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": "not marks"}))
    out["invents_a_cell"] = nb
    out["spins_at_the_end"] = _with_cell_after("test_scaled_dot_product_attention", SPIN)
    out["spins_in_the_middle"] = _with_cell_after("test_masked_softmax", SPIN)
    nb = _with_cell_after("test_attention_scores", SPIN)
    nb.cells.insert(_index(nb, "test_causal_mask") + 1, nbformat.v4.new_code_cell(SPIN))
    out["spins_twice"] = nb
    out["spends_its_budget"] = _with_cell_after("test_attention_scores", f"import time\ntime.sleep({TIMEOUT - 1})",
                                                count=12)
    out["floods_its_output"] = _with_cell_after("test_scaled_dot_product_attention",
                                                "print('x' * (64 << 20))\nfor i in range(2000):\n    print(i)\n")
    nb = _release()
    nb.cells[_index(nb, "attention_scores")].source = (
        "print('y' * (6 << 20))\n"
        "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n")  # unscaled: its visible test fails
    out["floods_to_hide_a_failure"] = nb
    out["holds_memfd"] = _with_cell_after("test_scaled_dot_product_attention", MEMFD.format(mib=4096))
    out["reads_the_environment"] = _with_cell_after("test_scaled_dot_product_attention", ENV_PROBE)
    for name in BAD_NAMES:
        out[name] = _release()
    return out


def _write_class(course: Path, cls: dict[str, object]) -> None:
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    for student, nb in cls.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        if isinstance(nb, bytes):
            (folder / f"{NOTEBOOK}.ipynb").write_bytes(nb)
        else:
            nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


def _scores(course: Path, students) -> dict[str, dict[str, float]]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        out = {}
        for s in students:
            try:
                out[s] = {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, s).grades}
            except Exception:  # noqa: BLE001 - no submission in the gradebook: not graded
                out[s] = None
        return out


def _rows(course: Path) -> dict[str, dict]:
    with (course / "grades.csv").open(newline="") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh)}


def _grade(course: Path, env: dict[str, str], user: str | None = None, cgroup_procs: list[str] = (),
           view: Path | None = None):
    env = dict(env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               GRADING_SECRET_FILE="none", GRADER_NOTEBOOK_SECONDS=str(BUDGET))
    command = [sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", str(TIMEOUT),
               "--jobs", "2"]
    if user:  # as root in a mount namespace of its own: Python in reach, the groups joined, then the account
        steps = [*_python_in_reach(view), *(f"echo $$ > {p}" for p in cgroup_procs),
                 f'exec runuser -u {user} -- "$@"']
        command = ["unshare", "--mount", "sh", "-c", " && ".join(steps), "sh",
                   "env", *[f"{k}={v}" for k, v in env.items()], *command]
    started = time.monotonic()
    res = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    return res, time.monotonic() - started


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    course = tmp_path_factory.mktemp("isolation")
    cls = _class()
    _write_class(course, cls)
    outside = sorted(os.listdir(course.parent))
    res, wall = _grade(course, dict(os.environ, GRADER_MEMORY_MB="3072", **INSTRUCTOR_ENV))
    assert sorted(os.listdir(course.parent)) == outside, "the run wrote beside the course"
    return course, res, wall, _scores(course, cls)


def _autograded(course: Path, student: str):
    return nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def _text(course: Path, student: str) -> str:
    nb = _autograded(course, student)
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells
                   if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_honest_classmate_is_graded_in_full_and_reported_so(run):
    course, res, _, scores = run
    for student in ("honest_a", "honest_b", "honest_c"):
        assert scores[student] == FULL, (student, res.stdout[-3000:] + res.stderr[-3000:])
        assert _rows(course)[student]["status"] == "graded" and _rows(course)[student]["message"] == ""


def test_a_notebook_over_the_bounds_is_named_and_never_parsed(run):
    course, res, _, scores = run
    rows = _rows(course)
    assert scores["nested_deep"] is None and rows["nested_deep"]["status"] == "not graded"
    assert "nested more than 32 levels" in rows["nested_deep"]["message"]
    assert scores["huge_cell"] is None and "over the course's limit of 256 KiB for one cell" in \
        rows["huge_cell"]["message"], rows["huge_cell"]
    assert res.returncode == 1  # some submissions were not graded, and the run says so


@pytest.mark.parametrize("student, note", [
    ("copies_a_test", "an earlier copy of cell 'test_causal_mask'"),
    ("edits_its_marks", ""),
    ("invents_a_cell", "'test_bonus', which the assignment does not have"),
])
def test_nbgrader_marks_a_learner_wrote_decide_nothing_and_stop_nobody(run, student, note):
    """A copied test cell, marks of another format version, raised points, a bonus cell, marks that are not marks:
    graded as the gradebook says (never more than the assignment's points), and named."""
    course, _, _, scores = run
    assert scores[student] == FULL, scores[student]
    row = _rows(course)[student]
    assert row["status"] == "graded" and float(row["score"]) == sum(FULL.values()) == float(row["max_score"]), row
    assert note in row["message"], row


@pytest.mark.parametrize("student", ["spins_at_the_end", "spins_in_the_middle", "spins_twice"])
def test_a_cell_that_will_not_stop_is_stopped_and_the_work_around_it_keeps_its_points(run, student):
    """The cell ignores the interrupt: its kernel is stopped after the cell's limit and a few seconds' grace, and
    grading goes on in a fresh kernel without it; the right work above and below it keeps its points."""
    course, _, _, scores = run
    assert scores[student] == FULL, (student, scores[student], _text(course, student)[-2000:])
    assert "did not stop within its time limit, even when interrupted" in _rows(course)[student]["message"]
    assert _text(course, student).count("KernelStuck") == (2 if student == "spins_twice" else 1)


def test_the_run_is_bounded_by_the_cells_limits_not_by_what_the_learners_do(run):
    """Four stuck cells and a notebook that spends its whole budget, graded two at a time: the run takes about the
    cells' limits and the budget, not a limit per later cell per stuck one (7 to 12 times the limit before)."""
    _, _, wall, _ = run
    assert wall < 2 * BUDGET + 4 * (TIMEOUT + 15) + 120, wall


def test_a_notebook_that_spends_its_budget_loses_the_cells_it_did_not_run(run):
    course, _, _, scores = run
    # the prediction and attention_scores run before the cells that spend the budget
    assert scores["spends_its_budget"] == {**{k: 0 for k in FULL}, "test_predicted_scores_shape": 1,
                                           "test_attention_scores": 2}
    row = _rows(course)["spends_its_budget"]
    assert f"grading budget of {BUDGET} s was spent" in row["message"], row
    assert "GradingBudgetSpent" in _text(course, "spends_its_budget")


def test_a_flood_of_output_is_cut_and_kept_small(run):
    course, _, _, scores = run
    assert scores["floods_its_output"] == FULL
    page = course / "autograded" / "floods_its_output" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert page.stat().st_size < 6 << 20, page.stat().st_size
    assert "[output cut here" in _text(course, "floods_its_output")
    assert "its output was cut" in _rows(course)["floods_its_output"]["message"]


def test_a_flood_never_hides_a_failing_test(run):
    """The solution cell prints past the notebook's output bound, and its test fails: the failure is kept (a test
    cell scores by its error), so the exercise scores zero, and so does the one that calls it."""
    course, _, _, scores = run
    assert scores["floods_to_hide_a_failure"] == {**FULL, "test_attention_scores": 0,
                                                  "test_scaled_dot_product_attention": 0}
    assert "AssertionError" in _text(course, "floods_to_hide_a_failure")


def test_memory_held_in_memfd_counts_and_stops_its_kernel_alone(run):
    course, res, _, scores = run
    assert scores["holds_memfd"] == FULL
    assert "NOT STOPPED" not in _text(course, "holds_memfd")
    assert "memory limit of 3072 MiB" in _rows(course)["holds_memfd"]["message"]


def test_the_kernel_inherits_an_allowlist_of_the_graders_environment_and_is_first_for_the_oom_killer(run):
    course, _, _, _ = run
    text = _text(course, "reads_the_environment")
    assert "ENV" in text and "PROC" in text, text
    assert "OOM 1000" in text, text
    for name, value in INSTRUCTOR_ENV.items():
        assert name not in text and value not in text, (name, text)


def test_names_a_learner_chose_are_text_in_every_csv_cell_and_on_the_terminal(run):
    course, res, _, _ = run
    with (course / "grades.csv").open(newline="") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert all(is_inert(c) for c in cells), [c for c in cells if not is_inert(c)]
    rows = _rows(course)
    for name in BAD_NAMES:
        (row,) = [r for s, r in rows.items() if s.lstrip("'") == name]
        assert row["status"] == "not graded" and "a learner's id" in row["message"], row
    printed = res.stdout + res.stderr
    assert "\x1b" not in printed and "\\x1b[2Jclears" in printed


# --- grading as an account that is not root, as the hub's instructor does -----------------------------------------
@pytest.fixture(scope="module")
def grader_account():
    """An account of its own, a course folder it owns, and a control group delegated to it (its folders in each
    hierarchy, as the hub's instructor has); all removed afterwards."""
    from grader import cgroups

    if os.geteuid() != 0:
        pytest.skip("making an account and a delegated control group needs root (make test runs as root in CI)")
    user = f"cgrader{os.getpid() % 100000}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True)
    entry = pwd.getpwnam(user)
    base = Path(tempfile.mkdtemp(prefix="course-unprivileged-"))  # pytest's own are closed to other accounts
    os.chmod(base, 0o755)
    folders = []
    try:
        for place in cgroups.hierarchies():
            folder = Path(place.path(f"course-test-delegated-{os.getpid()}"))
            folder.mkdir()
            folders.append(folder)
            files = [folder / n for n in ("cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads")]
            for path in [folder, *(f for f in files if f.exists())]:
                os.chown(path, entry.pw_uid, entry.pw_gid)
        yield user, entry, base, [str(f / "cgroup.procs") for f in folders]
    finally:
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
        time.sleep(0.5)
        for folder in folders:
            for child in sorted(folder.glob("**/"), key=lambda p: -len(p.parts)):
                if child != folder:
                    cgroups.remove_folder(str(child))
            cgroups.remove_folder(str(folder))
        subprocess.run(["userdel", "--force", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _python_in_reach(view: Path) -> list[str]:
    """Shell steps that let another account run this Python, for a mount namespace of their own: where a folder
    above the installation is closed to others (pyenv's under /root, mode 0700), an empty folder is mounted over it
    with the installation's own folder bound back in, so nothing else of it is in view. The machine is unchanged."""
    base = Path(os.path.realpath(sys.base_prefix))
    chain = [*reversed(base.parents), base]
    for closed, inside in zip(chain, chain[1:]):
        if closed != Path("/") and not os.stat(closed).st_mode & 0o001:
            return [f"mkdir -p {view}", f"mount --bind {inside} {view}", f"mount -t tmpfs -o mode=0755 tmpfs {closed}",
                    f"mkdir -p {inside}", f"mount --bind {view} {inside}"]
    return []


def _own_course(base: Path, name: str, entry, cls: dict[str, object]) -> Path:
    course = base / name
    course.mkdir()
    _write_class(course, cls)
    (course / "tmp").mkdir()
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(course)], check=True)
    return course


def test_unprivileged_grading_in_a_delegated_group_stops_a_memfd_hog_and_grades_the_class(grader_account):
    """A kernel writes 4 GiB into memfd under a 3 GiB limit: the process limits never see it, its own control
    group does; it is stopped and named, never the grader, and its classmate is graded in full."""
    user, entry, base, procs = grader_account
    course = _own_course(base, "delegated", entry, {
        "honest": _release(), "hog": _with_cell_after("test_scaled_dot_product_attention", MEMFD.format(mib=4096))})
    res, _ = _grade(course, {"GRADER_MEMORY_MB": "3072", "TMPDIR": str(course / "tmp"), "HOME": str(course)},
                    user=user, cgroup_procs=procs, view=base / "python-view")
    scores = _scores(course, ["honest", "hog"])
    assert scores["honest"] == FULL and scores["hog"] == FULL, res.stdout[-3000:] + res.stderr[-3000:]
    assert "memory limit of 3072 MiB" in _rows(course)["hog"]["message"], _rows(course)["hog"]
    assert "NOT STOPPED" not in _text(course, "hog")


def test_unprivileged_grading_without_a_group_is_refused_unless_asked_for_by_name(grader_account):
    user, entry, base, _ = grader_account
    course = _own_course(base, "undelegated", entry, {"honest": _release()})
    env = {"TMPDIR": str(course / "tmp"), "HOME": str(course)}
    refused, _ = _grade(course, env, user=user, view=base / "python-view")
    assert refused.returncode == 2 and "GRADER_ISOLATION=process-limits" in refused.stderr, refused.stderr
    assert not (course / "grades.csv").exists()
    weak, _ = _grade(course, dict(env, GRADER_ISOLATION="process-limits"), user=user, view=base / "python-view")
    assert weak.returncode == 0, weak.stdout[-3000:] + weak.stderr[-3000:]
    assert "process limits alone" in weak.stdout and _scores(course, ["honest"])["honest"] == FULL
