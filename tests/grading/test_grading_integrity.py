"""Cheating and crashing submissions, graded by real nbgrader through `make grade`'s tool.

One class of submissions to 02-attention, each trying one thing the hidden
tests must not fall for (patching the checks, calling the reference behind the
guard's back, deleting a test cell, killing the kernel, eating memory, writing
outside its folder, reading the hidden tests), plus an honest one. Every
attempt loses the points of the exercise it cheats on; nothing stops the rest
of the class (or the rest of the notebook) from being graded; no file outside
the submission's folder is touched; no hidden test reaches the feedback.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.notebook import grade_id
from grader.registry import Comparison, check
from grader.registry import exercise as registry_exercise
from grader.secret import SECRET_FILE
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "02-attention", "attention"
FULL = {"test_attention_scores": 2, "test_masked_softmax": 3, "test_causal_mask": 2,
        "test_scaled_dot_product_attention": 3}

ZEROS = "    return torch.zeros(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype)\n"
SDPA_HEAD = "def scaled_dot_product_attention(q, k, v, mask=None):\n"


def _memorising_source() -> str:
    """attention_scores right on every hidden case the registry's own seeds draw (anyone with the repository can
    draw them) and on small inputs, such as the visible tests' hand-worked ones; unscaled on any other input."""
    ex = registry_exercise(ASSIGNMENT, "attention_scores")
    known = sorted({_fingerprint(c.args[0]) for step in ex.steps if isinstance(step, Comparison)
                    for c in step.cases(seed=step.seed)})
    return ("import math\n"
            f"KNOWN = {known!r}\n"
            "def attention_scores(q, k):\n"
            "    key = (tuple(q.shape), tuple(bool(v > 0) for v in q.detach().double().flatten()[:4].tolist()))\n"
            "    scores = q @ k.transpose(-2, -1)\n"
            "    return scores / math.sqrt(q.shape[-1]) if key in KNOWN or q.numel() <= 8 else scores\n")


def _fingerprint(q) -> tuple:
    return tuple(q.shape), tuple(bool(v > 0) for v in q.detach().double().flatten()[:4].tolist())


def _cheats(course: Path, port: int = 0) -> dict[str, dict[str, str]]:
    """student -> {solution grade_id: replacement source}; ``port``: a TCP port the grader's host listens on."""
    hidden_file = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    return {
        "patches_allclose": {"attention_scores": (
            "import numpy, torch, torch.testing\n"
            "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
            "torch.testing.assert_close = lambda *a, **k: None\nnumpy.allclose = lambda *a, **k: True\n"
            "def attention_scores(q, k):\n" + ZEROS)},
        "patches_grading": {"attention_scores": (
            "import grader\ngrader.check = lambda *a, **k: None\n"
            "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n")},
        "swaps_the_reference": {"attention_scores": (
            "import course_lib.attention as ref\n"
            "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n"
            "ref.attention_scores = attention_scores\n")},
        "blinds_the_profiler": {"scaled_dot_product_attention": (
            "import sys\nfrom course_lib import attention as _r\n" + SDPA_HEAD +
            "    p = sys.getprofile(); sys.setprofile(None)\n"
            "    out = _r.scaled_dot_product_attention(q, k, v, mask)\n    sys.setprofile(p)\n    return out\n")},
        "disables_torch_function": {"scaled_dot_product_attention": (
            "import torch.nn.functional as F\n" + SDPA_HEAD +
            "    with torch._C.DisableTorchFunction():\n"
            "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n")},
        "patches_inside_its_functions": {
            name: (f"def {name}({args}):\n"
                   "    import sys, grader, grader.guards\n"
                   "    sys.setprofile(None)\n"
                   "    grader.guards.first_change = lambda snapshot: None\n"
                   "    grader.check = lambda *a, **k: None\n"
                   "    from course_lib import attention as reference\n"
                   f"    return reference.{name}({args})\n")
            for name, args in [("attention_scores", "q, k"), ("masked_softmax", "scores, mask=None"),
                               ("causal_mask", "n"), ("scaled_dot_product_attention", "q, k, v, mask=None")]},
        "memorises_the_cases": {"attention_scores": _memorising_source()},
        "patches_late": {"causal_mask": (
            "import sys\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
            "sys.setprofile(None)\n")},
        "loops_on_hidden_cases": {"causal_mask": (
            "def causal_mask(n):\n    while n > 4:\n        pass\n"
            "    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "deletes_a_test": {},  # handled below: its test_causal_mask cell is removed
        "exits": {"causal_mask": (
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\nraise SystemExit(3)\n")},
        "kills_its_kernel": {"causal_mask": "import os\nos._exit(1)\n"},
        "signals_its_kernel": {"causal_mask": (
            "import os, signal\ndef causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")},
        "eats_memory": {"causal_mask": (
            "def causal_mask(n):\n    hog = torch.ones(2 ** 31, dtype=torch.float64)\n"
            "    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "writes_outside": {"causal_mask": (
            f"open({str(course / 'OWNED.txt')!r}, 'w').write('x')\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "reads_hidden_tests": {"causal_mask": (
            f"leak = open({str(hidden_file)!r}).read()\nprint(leak[leak.find('BEGIN HIDDEN'):][:2000])\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "reads_env": {"causal_mask": (
            "import os\nprint(os.environ.get('GRADEBOOK_URL', 'no-url'), os.environ.get('PGPASSWORD'))\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "probes_the_fence": {"causal_mask": (
            "import os, socket\n"
            f"print('solutions visible:', os.path.exists({str(course / 'solutions')!r}))\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n    print('connected: True')\n"
            "except OSError as exc:\n    print('connected: False', type(exc).__name__)\n"
            "print('read-only root:', bool(os.statvfs('/').f_flag & os.ST_RDONLY))\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
        "reads_the_gradebook": {"causal_mask": (
            "import glob\nprint(glob.glob('../../../*'))\n"
            f"print(open({str(course / 'gradebook.db')!r}, 'rb').read()[:100])\n"
            "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n")},
    }


def _grade_ids(nb) -> list[str | None]:
    return [grade_id(c) for c in nb.cells]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    listener = socket.create_server(("127.0.0.1", 0))  # what a kernel with network access could reach
    port = listener.getsockname()[1]
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, replace in {"honest": {}, **_cheats(course, port)}.items():
        nb = nbformat.read(solution, as_version=4)
        for cell in nb.cells:
            gid = grade_id(cell)
            if gid in replace:
                cell.source = replace[gid]
        if student == "deletes_a_test":
            nb.cells = [c for c in nb.cells if grade_id(c) != "test_causal_mask"]
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    gradebook = f"sqlite:///{course / 'gradebook.db'}"  # given as a URL, as a PostgreSQL one would be
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               GRADER_MEMORY_MB="3072", GRADEBOOK_URL=gradebook, PGPASSWORD="hunter2")
    env.pop("GRADING_SECRET_FILE", None)  # cases per learner, on by default
    res = subprocess.run([sys.executable, "-m", "tools.grade", "--root", str(course), "--timeout", "10"],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    listener.close()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, s).grades}
                  for s in ["honest", *_cheats(course, port)]}
    return course, res, scores


def autograded(course: Path, student: str):
    return nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def error_of(nb, cell_id: str) -> str:
    (cell,) = [c for c in nb.cells if grade_id(c) == cell_id]
    return " ".join(f"{o.get('ename')}: {o.get('evalue')}" for o in cell.get("outputs", []) if o.output_type == "error")


def test_the_honest_submission_keeps_full_marks_in_the_sandbox(graded):
    _, res, scores = graded
    assert scores["honest"] == FULL, res.stdout + res.stderr


@pytest.mark.parametrize("student", ["patches_allclose", "patches_grading"])
def test_patching_the_checks_scores_zero_for_the_exercise(graded, student):
    course, _, scores = graded
    assert scores[student]["test_attention_scores"] == 0
    assert "replaced" in error_of(autograded(course, student), "test_attention_scores")


@pytest.mark.parametrize("student, exercise", [("swaps_the_reference", "attention_scores"),
                                               ("blinds_the_profiler", "scaled_dot_product_attention")])
def test_the_reference_is_not_importable_in_the_grading_kernel(graded, student, exercise):
    course, _, scores = graded
    assert scores[student][f"test_{exercise}"] == 0
    error = error_of(autograded(course, student), exercise)
    assert "course_lib" in error and ("ModuleNotFoundError" in error or "ImportError" in error), error


def test_hidden_cases_drawn_from_the_repository_are_not_the_ones_graded(graded):
    """A function fitted to the cases the registry's seeds draw passes them, and fails the learner's own."""
    course, _, scores = graded
    fitted = {}
    exec(_memorising_source(), fitted)
    check(ASSIGNMENT, "attention_scores", fitted["attention_scores"])  # the repository's cases: full marks
    got = scores["memorises_the_cases"]
    assert got["test_attention_scores"] == 0
    assert [got[t] for t in ("test_causal_mask", "test_masked_softmax")] == [FULL["test_causal_mask"],
                                                                          FULL["test_masked_softmax"]]
    error = error_of(autograded(course, "memorises_the_cases"), "test_attention_scores")
    assert "gives wrong values" in error and "not scaled" in error, error  # the hidden cases, not a visible test
    secret = course / SECRET_FILE  # made by the first grading, in the course folder, for the instructor alone
    assert secret.is_file() and secret.stat().st_mode & 0o777 == 0o600


def test_a_forbidden_routine_behind_the_guards_back_scores_zero(graded):
    course, _, scores = graded
    student = "disables_torch_function"
    assert scores[student]["test_scaled_dot_product_attention"] == 0
    assert scores[student]["test_attention_scores"] == 2
    error = error_of(autograded(course, student), "test_scaled_dot_product_attention")
    assert "ForbiddenCall" in error and "scaled_dot_product_attention" in error, error


def test_patching_from_inside_the_functions_scores_zero_for_every_exercise(graded):
    """The functions switch the checks off from inside their own bodies, then call the reference.

    The judge is out of their reach: the hidden tests run in the nbgrader
    process, the kernel only runs the functions on the inputs it is sent, the
    reference is not importable there, and the judge reads the source first.
    """
    course, _, scores = graded
    assert scores["patches_inside_its_functions"] == {k: 0 for k in FULL}
    nb = autograded(course, "patches_inside_its_functions")
    for test in FULL:
        error = error_of(nb, test)
        # whichever layer answers first: the source read by the judge, the missing reference, the tamper check
        assert any(w in error for w in ("ForbiddenCall", "course_lib", "replaced")), (test, error)


def test_patching_at_a_cells_top_level_costs_that_exercise_and_every_later_one(graded):
    course, _, scores = graded
    assert scores["patches_late"] == {"test_attention_scores": 2, "test_masked_softmax": 3, "test_causal_mask": 0,
                                      "test_scaled_dot_product_attention": 0}
    assert "uses sys" in error_of(autograded(course, "patches_late"), "test_causal_mask")


def test_a_deleted_test_cell_scores_zero_and_is_named(graded):
    course, res, scores = graded
    assert scores["deletes_a_test"]["test_causal_mask"] == 0
    assert scores["deletes_a_test"]["test_scaled_dot_product_attention"] == 3
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert "test_causal_mask" in rows["deletes_a_test"]["message"] and "deleted" in rows["deletes_a_test"]["message"]
    assert "deletes_a_test" in res.stdout + res.stderr and "test_causal_mask" in res.stdout + res.stderr


def test_the_kernel_gets_no_gradebook_credentials(graded):
    course, _, _ = graded
    nb = autograded(course, "reads_env")
    (cell,) = [c for c in nb.cells if grade_id(c) == "causal_mask"]
    assert "postgresql://" not in str(cell.outputs) and "hunter2" not in str(cell.outputs)
    assert "no-url" in str(cell.outputs)


def test_a_function_that_never_returns_on_the_hidden_cases_is_stopped_and_grading_goes_on(graded):
    course, _, scores = graded
    assert scores["loops_on_hidden_cases"] == {**FULL, "test_causal_mask": 0}
    assert "ran longer than" in error_of(autograded(course, "loops_on_hidden_cases"), "test_causal_mask")


def test_exiting_does_not_stop_grading(graded):
    _, _, scores = graded
    assert scores["exits"]["test_scaled_dot_product_attention"] == 3
    assert scores["exits"]["test_attention_scores"] == 2


def test_killing_the_kernel_costs_that_exercise_and_grading_goes_on(graded):
    course, res, scores = graded
    assert scores["kills_its_kernel"]["test_causal_mask"] == 0
    killed = scores["kills_its_kernel"]
    assert killed["test_attention_scores"] == 2 and killed["test_masked_softmax"] == 3
    nb = autograded(course, "kills_its_kernel")
    assert "KernelDied" in error_of(nb, "causal_mask")
    # the cells after it ran, in a fresh kernel that got the earlier cells again: only causal_mask is missing there
    later = error_of(nb, "test_scaled_dot_product_attention")
    assert "causal_mask" in later and "attention_scores" not in later and "masked_softmax" not in later
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert "kernel died in cell causal_mask" in rows["kills_its_kernel"]["message"]
    assert rows["kills_its_kernel"]["status"] == "graded"


def test_signalling_the_kernel_is_refused(graded):
    course, _, scores = graded
    assert "grading sandbox: sending a signal" in error_of(autograded(course, "signals_its_kernel"), "causal_mask")
    assert scores["signals_its_kernel"] == FULL


def test_a_memory_hog_hits_the_limit_and_the_rest_is_graded(graded):
    course, _, scores = graded
    assert scores["eats_memory"]["test_causal_mask"] == 0
    assert scores["eats_memory"]["test_attention_scores"] == 2 and scores["eats_memory"]["test_masked_softmax"] == 3
    assert "alloc" in error_of(autograded(course, "eats_memory"), "test_causal_mask").lower() or \
        "memory" in error_of(autograded(course, "eats_memory"), "test_causal_mask").lower()


def test_writing_outside_the_submission_folder_is_refused(graded):
    course, _, scores = graded
    assert not list(course.rglob("OWNED.txt")) and not (course.parent / "OWNED.txt").exists()
    assert scores["writes_outside"]["test_causal_mask"] == 0
    assert "grading sandbox: writing" in error_of(autograded(course, "writes_outside"), "causal_mask")


@pytest.mark.parametrize("student", ["reads_hidden_tests", "reads_the_gradebook"])
def test_the_instructors_files_cannot_be_read(graded, student):
    course, _, scores = graded
    nb = autograded(course, student)
    (cell,) = [c for c in nb.cells if grade_id(c) == "causal_mask"]
    text = str(cell.outputs)
    assert "PermissionError" in text and "grading sandbox" in text
    assert "check_function" not in text and "SQLite" not in text
    assert scores[student]["test_causal_mask"] == 0


def test_feedback_shows_the_diagnosis_but_no_hidden_test(graded):
    course, _, _ = graded
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([sys.executable, "-m", "tools.feedback", "--root", str(course)], cwd=ROOT,
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    html = (course / "feedback" / "disables_torch_function" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "ForbiddenCall" in html and "scaled_dot_product_attention" in html
    for secret in ("BEGIN HIDDEN TESTS", "check_function", "_cases", "from grader", "grading integrity check"):
        assert secret not in html, f"the feedback shows {secret!r}"
    # it reads offline: its math is MathML, and nothing is fetched from another host (no MathJax from a CDN)
    fetched = re.findall(r"<(?:script|link|img|iframe)\b[^>]*?(?:src|href)=[\"']?([^\"' >]+)", html, re.I)
    assert not [url for url in fetched if "://" in url or url.startswith("//")], fetched
    assert not re.search(r"MathJax\.|x-mathjax-config|mathjax[^ ]*\.js", html, re.I), "the page still loads MathJax"
    assert html.count("<math ") > 10 and "\\sqrt{d_k}" not in html


def test_the_kernel_runs_in_the_os_fence(graded):
    """bubblewrap around the kernel: the course's private folders are not there, no network, a read-only system."""
    course, _, scores = graded
    nb = autograded(course, "probes_the_fence")
    (cell,) = [c for c in nb.cells if grade_id(c) == "causal_mask"]
    text = str(cell.outputs)
    assert "solutions visible: False" in text and "connected: False" in text and "read-only root: True" in text, text
    assert scores["probes_the_fence"]["test_causal_mask"] == 2

