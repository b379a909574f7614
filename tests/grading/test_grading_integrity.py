"""Cheating and crashing submissions, graded by real nbgrader through `make grade`'s tool.

One class of submissions to 02-attention, each trying one thing the hidden
tests must not fall for (patching the checks, calling the reference behind the
guard's back, deleting a test cell, killing the kernel, eating memory, writing
outside its folder, reading the hidden tests), plus an honest one. Every
attempt loses the points of the exercise it cheats on; nothing stops the rest
of the class (or the rest of the notebook) from being graded; no file outside
the submission's folder is touched; no hidden test reaches the feedback.

The same run holds **hostile submissions** (:func:`_hostile`): they attack
the grader itself, beside honest victims, with the kernel's full reach (they
call the C library through a library torch ships, past the Python fence):
links the grader might follow after the kernel ends, the learner's own hidden
cases carried out, the forbidden-routine guard switched off, the grader's log
forged or flooded, replies built to exhaust the judge, code too deep to read,
and the machine's other accounts and courses. A second run, two jobs at once
under tight limits (:func:`limited`), holds the attacks on the other kernels
and on the machine: sockets between two kernels graded together, a fork bomb
of spinners, memory filled with files, CPU burnt in a thread.
"""

from __future__ import annotations

import ast
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
from grader.registry import assignment as registered_assignment
from grader.registry import exercise as registry_exercise
from grader.secret import SECRET_FILE
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "02-attention", "attention"
#: every test cell's points, the prediction's included (grader.registry, which the notebook's marks agree with)
FULL = {f"test_{ex.name}": ex.points for ex in registered_assignment("02-attention").exercises}

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


#: the C library, reached through a library torch ships (the Python fence allows loading it): the kernel's full
#: reach, past every audit hook, as an attacker's would be
LIBC = ("import ctypes, os, torch\n"
        "libc = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libc10.so'), use_errno=True)\n")
HONEST_MASK = "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
#: an added cell at the end of the notebook (after every test cell): costs no exercise by itself
END = "+end"


def _hostile(course: Path) -> dict[str, dict[str, str]]:
    """Submissions that attack the grader, not the checks: student -> {grade_id or END: source}."""
    victim_nb = course / "submitted" / "honest" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    secret, gradebook = course / SECRET_FILE, course / "gradebook.db"
    other = course.parent / "another-course"
    return {
        # 1. links for the grader to follow once the kernel has ended: the notebook replaced by a link to a
        # classmate's, pages that are links to the secret, a classmate and the gradebook, a link three folders
        # down that points out of the course, a link to a file that does not exist yet (for the grader to create)
        "leaves_links": {END: LIBC + "\n".join([
            "link = lambda target, name: libc.symlink(target.encode(), name.encode())",
            "os.remove('attention.ipynb')",
            f"link({str(victim_nb)!r}, 'attention.ipynb')",
            f"link({str(secret)!r}, 'leak.html')",
            f"link({str(victim_nb)!r}, 'peek.html')",
            f"link({str(gradebook)!r}, 'book.html')",
            f"link({str(course / 'OWNED_BY_LINK')!r}, 'made.html')",
            "os.makedirs('a/b/c')",
            "link('../../../../../../../../OWNED_BY_RELATIVE_LINK', 'a/b/c/up.html')",
            "os.mkfifo('pipe.html')",
            "print('links left:', sorted(os.listdir('.')))",
        ])},
        # 1b. links where the judge will write its requests and read the replies (the folder and the names are in
        # the kernel's environment): to a file outside the course, to the grading secret
        "plants_exchange_links": {END: LIBC + "\n".join([
            "import json",
            "exchange = json.loads(os.environ['COURSE_GRADING_SANDBOX'])['exchange']",
            "for n in range(1, 200):",
            f"    libc.symlink({str(course / 'PWNED_BY_EXCHANGE')!r}.encode(),",
            "                 os.path.join(exchange, f'request-{n}.pt').encode())",
            f"    libc.symlink({str(secret)!r}.encode(), os.path.join(exchange, f'reply-{{n}}.pt').encode())",
            "print('PLANTED', len(os.listdir(exchange)))",
        ])},
        # 1c. a page that runs script in whoever opens it (the instructor's browser, the LMS)
        "shows_a_script": {END: (
            "from IPython.display import HTML, display\n"
            "display(HTML('<script>window.PWNED = 1</script><img src=x onerror=\"window.PWNED = 2\">'))\n")},
        # 2. the learner's own hidden cases, kept by the function and shown by a later cell (and in a page);
        # and the cases carried out in an exception's message
        "hands_out_cases": {
            "masked_softmax": (
                "STASH = []\n"
                "def masked_softmax(scores, mask=None):\n"
                "    STASH.append(scores.tolist())\n"
                "    if mask is not None:\n"
                "        scores = scores.masked_fill(~mask, float('-inf'))\n"
                "    e = (scores - scores.amax(-1, keepdim=True)).exp()\n"
                "    return torch.nan_to_num(e / e.sum(-1, keepdim=True))\n"),
            "attention_scores": (  # every case it was given so far, the visible tests' too: never a short message
                "import math\n"
                "SEEN = []\n"
                "def attention_scores(q, k):\n"
                "    SEEN.append((q.tolist(), k.tolist()))\n"
                "    if tuple(q.shape) not in [(2, 2), (4, 3, 5, 8), (2, 6, 4)]:  # not the visible test's\n"
                "        raise ValueError('HIDDEN CASE ' + repr(SEEN))\n"
                "    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"),
            END: ("print('STASHED', len(STASH), 'cases')\n"
                  "open('cases.html', 'w').write(repr(STASH))\n"),
        },
        # 3. the forbidden-routine guard switched off: its profiler dropped by a deep recursion (Python removes a
        # profile function that raises), then honest code; and the whole trick of the issue, hidden in a callback
        # list that nothing assigns to (DisableTorchFunction, torch.softmax, the profiler put back)
        "drops_the_profiler": {"masked_softmax": (
            "def _deep(n):\n    return _deep(n + 1)\n"
            "def masked_softmax(scores, mask=None):\n"
            "    try:\n        _deep(0)\n    except RecursionError:\n        pass\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    e = (scores - scores.amax(-1, keepdim=True)).exp()\n"
            "    return torch.nan_to_num(e / e.sum(-1, keepdim=True))\n")},
        "hides_the_routine_in_a_list": {"masked_softmax": (
            "import sys\nHOOKS = []\n"
            "HOOKS.append(lambda s: torch.softmax(s, -1))\n"
            "def _deep(n):\n    return _deep(n + 1)\n"
            "def masked_softmax(scores, mask=None):\n"
            "    p = sys.getprofile()\n"
            "    try:\n        _deep(0)\n    except RecursionError:\n        pass\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    with torch._C.DisableTorchFunction():\n        out = HOOKS[0](scores)\n"
            "    sys.setprofile(p)\n"
            "    return torch.nan_to_num(out)\n")},
        # 5. the grader's log: a forged line naming a classmate as failed, a terminal escape, a flood
        "forges_the_log": {END: LIBC + "\n".join([
            "print('stdin:', os.read(0, 10), flush=True)",
            "line = (\"[AutogradeApp | ERROR] There was an error processing assignment '02-attention' for \"",
            "        \"student 'honest'\\n\\x1b[2J\\x1b[31mFORGED\\x1b[0m\\n\").encode()",
            "for fd in (1, 2):",
            "    libc.write(fd, line, len(line))",
            "block = b'x' * (1 << 20)",
            "for _ in range(64):",
            "    libc.write(1, block, len(block))",
        ])},
        # 6. a reply built to exhaust the judge: a tensor with no memory behind it (meta; a crafted reply file,
        # a list nested 22 deep that shares one tensor, is tests/grading/test_judge.py's); code too deep to read
        "returns_a_meta_tensor": {"attention_scores": (
            "import math\n"
            "def attention_scores(q, k):\n"
            "    if q.numel() <= 8:  # the visible test's worked example\n"
            "        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
            "    return torch.empty(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype, device='meta')\n")},
        "writes_deep_code": {"masked_softmax": (
            "SIZE = " + "+".join(["1"] * 3000) + "\n"
            "def masked_softmax(scores, mask=None):\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    e = (scores - scores.amax(-1, keepdim=True)).exp()\n"
            "    return torch.nan_to_num(e / e.sum(-1, keepdim=True))\n")},
        # 7. the machine's other accounts and courses, read as the kernel's own user
        "reads_other_accounts": {END: LIBC + "\n".join([
            "def attempt(path):",
            "    fd = libc.open(path.encode(), 0)",
            "    if fd < 0:",
            "        return os.strerror(ctypes.get_errno())",
            "    libc.close(fd)",
            "    return 'READ'",
            "for what, path in [('shadow', '/etc/shadow'), ('root', '/root/.bashrc'), ('home', '/home'),",
            f"                   ('secret', {str(secret)!r}), ('other secret', {str(other / SECRET_FILE)!r}),",
            f"                   ('other solutions', {str(other / 'solutions.ipynb')!r})]:",
            "    print('TRY', what, attempt(path))",
            "print('UIDMAP', open('/proc/self/uid_map').read().split())",
        ])},
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
    other = course.parent / "another-course"  # another course on the machine: its secret and its solutions
    other.mkdir(exist_ok=True)
    (other / SECRET_FILE).write_bytes(b"ANOTHER-COURSE-SECRET")
    (other / SECRET_FILE).chmod(0o600)
    (other / "solutions.ipynb").write_text("ANOTHER-COURSE-SOLUTIONS")
    for student, replace in {"honest": {}, **_cheats(course, port), **_hostile(course)}.items():
        nb = nbformat.read(solution, as_version=4)
        for cell in nb.cells:
            gid = grade_id(cell)
            if gid in replace:
                cell.source = replace[gid]
        if END in replace:
            nb.cells.append(nbformat.v4.new_code_cell(replace[END]))
        if student == "deletes_a_test":
            nb.cells = [c for c in nb.cells if grade_id(c) != "test_causal_mask"]
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    gradebook = f"sqlite:///{course / 'gradebook.db'}"  # given as a URL, as a PostgreSQL one would be
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               GRADER_MEMORY_MB="3072", GRADEBOOK_URL=gradebook, PGPASSWORD="hunter2")
    env.pop("GRADING_SECRET_FILE", None)  # cases per learner, on by default
    res = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", "10"],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    listener.close()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, s).grades}
                  for s in ["honest", *_cheats(course, port), *_hostile(course)]}
    return course, res, scores


@pytest.fixture(scope="module")
def feedback(graded):
    """make feedback on the graded class: the pages, and the zip for an LMS."""
    course = graded[0]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([sys.executable, "-m", "classroom.feedback", "--root", str(course)], cwd=ROOT,
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


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
    # the prediction, graded before any of the functions runs, keeps its point
    assert scores["patches_inside_its_functions"] == {**{k: 0 for k in FULL}, "test_predicted_scores_shape": 1}
    nb = autograded(course, "patches_inside_its_functions")
    for test in set(FULL) - {"test_predicted_scores_shape"}:
        error = error_of(nb, test)
        # whichever layer answers first: the source read by the judge, the missing reference, the tamper check
        assert any(w in error for w in ("ForbiddenCall", "course_lib", "replaced")), (test, error)


def test_patching_at_a_cells_top_level_costs_that_exercise_and_every_later_one(graded):
    course, _, scores = graded
    assert scores["patches_late"] == {**FULL, "test_causal_mask": 0, "test_scaled_dot_product_attention": 0}
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


def test_feedback_shows_the_diagnosis_but_no_hidden_test(graded, feedback):
    course, _, _ = graded
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



# --- hostile submissions: the grader itself attacked (run A, two jobs) ------------------------------------------

def _rows(course: Path) -> dict[str, dict]:
    return {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}


def _stream(course: Path, student: str) -> str:
    nb = autograded(course, student)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


def test_links_the_kernel_leaves_are_never_followed(graded):
    """The kernel replaced its notebook by a link to a classmate's and left links to the secret, the gradebook,
    a path outside the course, and a named pipe: the classmate keeps their notebook and full marks, nothing is
    created outside, the secret keeps its mode, and the grader names what was left (and removed)."""
    course, res, scores = graded
    assert "links left:" in _stream(course, "leaves_links") and "attention.ipynb" in _stream(course, "leaves_links")
    assert scores["honest"] == FULL and scores["leaves_links"] == FULL
    victim = course / "submitted" / "honest" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert not victim.is_symlink() and nbformat.read(victim, as_version=4).cells, "the classmate's notebook"
    assert (course / SECRET_FILE).stat().st_mode & 0o777 == 0o600
    for name in ("OWNED_BY_LINK", "OWNED_BY_RELATIVE_LINK"):
        assert not list(course.parent.rglob(name)) and not Path("/" + name).exists(), name
    for folder in (course / "autograded" / "leaves_links", course / "submitted" / "leaves_links"):
        assert not [p for p in folder.rglob("*") if p.is_symlink() or not (p.is_file() or p.is_dir())], folder
    message = _rows(course)["leaves_links"]["message"]
    assert "a symbolic link" in message and "a named pipe" in message and "leak.html" in message, message
    assert "leaves_links" in res.stdout and "symbolic link" in res.stdout


def test_links_where_the_judge_writes_and_reads_are_replaced_not_followed(graded):
    course, _, scores = graded
    assert "PLANTED" in _stream(course, "plants_exchange_links")
    assert not list(course.parent.rglob("PWNED_BY_EXCHANGE")), "the judge wrote through a link"
    assert scores["plants_exchange_links"] == FULL and (course / SECRET_FILE).stat().st_mode & 0o777 == 0o600


def test_a_learners_script_runs_in_no_page(graded, feedback):
    """The learner's own HTML output keeps its text in the feedback page, and none of its script."""
    course = graded[0]
    html = (course / "feedback" / "shows_a_script" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "PWNED" in html  # its text is there (the cell's source, escaped)
    assert "<script>window.PWNED" not in html and not re.search(r"<img\b[^>]*\bonerror", html), "a live script"


def test_no_page_or_zip_carries_the_secret_the_gradebook_or_a_classmate(graded, feedback):
    """make feedback writes each learner's pages, and the LMS zip holds <learner>/attention.html alone: no file a
    learner left, nothing of the grading secret, the gradebook or another learner's submission."""
    import zipfile

    course = graded[0]
    secret = (course / SECRET_FILE).read_bytes()
    with zipfile.ZipFile(course / "exports" / f"feedback-{ASSIGNMENT}.zip") as zf:
        names = zf.namelist()
        pages = {name: zf.read(name) for name in names}
    learners = sorted(p.name for p in (course / "submitted").iterdir())
    assert sorted(names) == [f"{s}/{NOTEBOOK}.html" for s in learners], names
    for folder in (course / "feedback").iterdir():
        inside = sorted(p.name for p in (folder / ASSIGNMENT).iterdir())
        assert set(inside) <= {f"{NOTEBOOK}.html", "timestamp.txt", "submission_secret.txt"}, (folder.name, inside)
        pages.update({str(p): p.read_bytes() for p in (folder / ASSIGNMENT).iterdir()})
    for where, page in pages.items():
        assert secret not in page and secret.hex().encode() not in page, f"the grading secret is in {where}"
        assert b"SQLite format 3" not in page, f"the gradebook is in {where}"
        assert b"ANOTHER-COURSE" not in page, f"another course's files are in {where}"


def test_a_learners_hidden_cases_never_reach_a_later_cell_or_a_page(graded):
    """The function kept every input it was given; a cell after every test cell showed them and wrote a page of
    them. The hidden tests run after the last cell, so what it kept was the visible tests' inputs alone; a case
    carried out in an exception's message is cut to a few lines."""
    course, _, scores = graded
    expected = _kept_before_the_last_cell(course / "submitted" / "hands_out_cases" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    assert f"STASHED {expected} cases" in _stream(course, "hands_out_cases"), _stream(course, "hands_out_cases")
    assert scores["hands_out_cases"]["test_masked_softmax"] == FULL["test_masked_softmax"]
    error = error_of(autograded(course, "hands_out_cases"), "test_attention_scores")
    assert "HIDDEN CASE" in error and "more characters not shown" in error and len(error) < 700, error
    assert not (course / "feedback" / "hands_out_cases" / ASSIGNMENT / "cases.html").exists()


def _kept_before_the_last_cell(path: Path) -> int:
    """How many inputs the learner's function has kept when the notebook's last cell runs, the notebook run
    here as the kernel runs it (each cell's visible part, errors and all), the hidden tests left out."""
    import contextlib
    import io
    import math

    import torch

    from grader.notebook import without_hidden_tests

    nb = nbformat.read(path, as_version=4)
    namespace = {"torch": torch, "math": math}
    code = [c for c in nb.cells if c.cell_type == "code" and grade_id(c) != "check_your_work"]
    for cell in code[:-1]:
        with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
            exec(without_hidden_tests(cell.source), namespace)
    return len(namespace["STASH"])


@pytest.mark.parametrize("student", ["drops_the_profiler", "hides_the_routine_in_a_list"])
def test_switching_the_forbidden_routine_guard_off_is_a_zero_and_named(graded, student):
    """The profiler dropped by a deep recursion (honest code after it), or the issue's whole trick hidden in a
    callback list: the exercise (and the one that calls it) scores zero, and the message says why."""
    course, _, scores = graded
    assert scores[student]["test_masked_softmax"] == 0
    assert scores[student]["test_scaled_dot_product_attention"] == 0  # it calls the learner's masked_softmax
    assert scores[student]["test_attention_scores"] == 2 and scores[student]["test_causal_mask"] == 2
    error = error_of(autograded(course, student), "test_masked_softmax")
    assert "ForbiddenCall" in error, error
    if student == "drops_the_profiler":
        assert "switched off a guard" in error and "profiler" in error, error
    else:
        assert "softmax" in error or "_C" in error or "uses sys" in error, error


def test_a_forged_log_line_and_a_flood_decide_nothing(graded):
    """The kernel wrote a forged "error processing ... for student 'honest'" line, terminal escapes and 64 MiB
    to its standard streams: they are a pipe of the grader's, read and dropped (what ipykernel forwards of them
    into the cell is cut at the cell's output bound); the classmate is graded, and make grade prints no escape and
    no flood."""
    course, res, scores = graded
    assert scores["forges_the_log"] == FULL and scores["honest"] == FULL
    assert _rows(course)["honest"]["status"] == "graded" and _rows(course)["forges_the_log"]["status"] == "graded"
    stream = _stream(course, "forges_the_log")
    assert "stdin: b''" in stream and "[output cut here" in stream and len(stream) < 2 << 20, len(stream)
    printed = res.stdout + res.stderr
    assert "\x1b[2J" not in printed and "FORGED" not in printed and len(printed) < 200_000, len(printed)
    assert "student 'honest'" not in printed


def test_a_reply_the_judge_cannot_read_costs_its_exercise_alone(graded):
    """A tensor with no memory behind it (meta): that exercise scores zero, with the reason; the rest is graded."""
    course, _, scores = graded
    meta = scores["returns_a_meta_tensor"]
    assert meta["test_attention_scores"] == 0 and meta["test_masked_softmax"] == 3 and meta["test_causal_mask"] == 2
    assert "meta" in error_of(autograded(course, "returns_a_meta_tensor"), "test_attention_scores")


def test_code_too_deep_to_read_costs_the_exercises_after_it(graded):
    course, _, scores = graded
    assert scores["writes_deep_code"] == {**FULL, "test_masked_softmax": 0, "test_causal_mask": 0,
                                          "test_scaled_dot_product_attention": 0}
    assert _rows(course)["writes_deep_code"]["status"] == "graded"
    assert "too deeply" in error_of(autograded(course, "writes_deep_code"), "test_causal_mask")


def test_the_kernel_runs_as_a_user_of_its_own_and_sees_no_other_course(graded):
    """The kernel, with the C library in hand, tries /etc/shadow, root's files, /home, this course's secret and
    another course's: the system's files are closed to its user, the rest is not in its view."""
    from grader.enclosure import KERNEL_UID_BASE

    course, _, scores = graded
    text = _stream(course, "reads_other_accounts")
    assert "READ" not in text, text
    assert "TRY shadow Permission denied" in text if os.geteuid() == 0 else "TRY shadow" in text, text
    for what in ("root", "home", "secret", "other secret", "other solutions"):
        assert f"TRY {what} No such file or directory" in text, (what, text)
    if os.geteuid() == 0:
        uid_map = [line for line in text.splitlines() if line.startswith("UIDMAP")][0]
        assert int(uid_map.split("'")[3]) >= KERNEL_UID_BASE, uid_map
    assert scores["reads_other_accounts"] == FULL


# --- run C: two kernels at once, tight limits: attacks on the other kernels and on the machine --------------------
#: the limits of this run: small enough that the attacks reach them in seconds
LIMITED = {"GRADER_MEMORY_MB": "3072", "GRADER_TMP_MB": "1200", "GRADER_CPU_SECONDS": "8", "GRADER_TASKS": "64"}
#: a port on the loopback of a kernel (each kernel has its own network: nothing listens there but itself)
LOOPBACK_PORT = 47317


def _limited_class() -> dict[str, str | None]:
    """student -> the added cell at the end (None: honest). Sorted by name, two jobs grade a with b, c with d..."""
    wait = "import time\ndeadline = time.time() + 8\n"
    return {
        # two kernels graded at the same time try to talk: an abstract Unix socket, then loopback TCP
        "a_listens": wait + (
            "import socket\n"
            "got = []\n"
            "for family, address in [(socket.AF_UNIX, '\\0course-leak'), (socket.AF_INET, ('127.0.0.1', "
            f"{LOOPBACK_PORT}))]:\n"
            "    try:\n"
            "        s = socket.socket(family, socket.SOCK_STREAM); s.bind(address); s.listen(); s.settimeout(0.2)\n"
            "    except OSError as exc:\n"
            "        got.append(f'bind {exc.__class__.__name__}'); continue\n"
            "    while time.time() < deadline:\n"
            "        try:\n"
            "            got.append(f'ACCEPTED {s.accept()[0].recv(100)!r}'); break\n"
            "        except OSError:\n"
            "            pass\n"
            "print('LISTENER', got)\n"
            "import resource\n"
            "print('LIMITS', [resource.getrlimit(getattr(resource, 'RLIMIT_' + n))[0]\n"
            "                 for n in ('AS', 'NPROC', 'CPU')])\n"),
        "b_talks": wait + (
            "import socket\n"
            "said = set()\n"
            "while time.time() < deadline:\n"
            "    for family, address in [(socket.AF_UNIX, '\\0course-leak'), (socket.AF_INET, ('127.0.0.1', "
            f"{LOOPBACK_PORT}))]:\n"
            "        try:\n"
            "            c = socket.create_connection(address, 0.2) if family == socket.AF_INET else "
            "socket.socket(family)\n"
            "            if family == socket.AF_UNIX:\n"
            "                c.connect(address)\n"
            "            c.sendall(b'LEAKED'); said.add(str(address))\n"
            "        except OSError:\n"
            "            pass\n"
            "    time.sleep(0.1)\n"
            "print('TALKER', sorted(said))\n"),
        # a fork bomb of spinners, past the Python fence
        "c_forks_spinners": LIBC + (
            "forked = 0\n"
            "for _ in range(900):\n"
            "    pid = libc.fork()\n"
            "    if pid == 0:\n"
            "        while True:\n"
            "            pass\n"
            "    if pid < 0:\n"
            "        break\n"
            "    forked += 1\n"
            "print('FORKED', forked)\n"
            "import time\ntime.sleep(3)\n"),
        "d_honest": None,
        # memory filled with files (a tmpfs each), then a tensor: over the kernel's memory, counted together. The
        # files are written by short-lived children, 256 MiB each, so that no process nears its CPU seconds: a
        # machine's first touch of fresh memory can cost 10 CPU seconds a GiB, and the memory limit, not the CPU
        # limit, is what this kernel must meet
        "e_fills_memory": LIBC + (
            "block = b'x' * (1 << 20)\n"
            "for n in range(13):\n"
            "    pid = libc.fork()\n"
            "    if pid == 0:\n"
            "        fd = libc.open(f'{\"/tmp\" if n < 4 else \"/dev/shm\"}/fill{n}'.encode(), "
            "os.O_CREAT | os.O_WRONLY, 0o600)\n"
            "        for _ in range(256):\n"
            "            libc.write(fd, block, len(block))\n"
            "        libc._exit(0)\n"
            "    os.waitpid(pid, 0)\n"
            "hog = torch.ones(300_000_000)\n"
            "print('NOT STOPPED')\n"),
        "f_honest": None,
        # CPU burnt past the kernel's CPU seconds (however busy the machine, the cell's 240 s are enough)
        "g_burns_cpu": (
            "import time\n"
            "while time.process_time() < 30:\n"
            "    pass\n"
            "print('NOT STOPPED')\n"),
        "h_honest": None,
    }


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    course = tmp_path_factory.mktemp("limited")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, end in _limited_class().items():
        nb = nbformat.read(solution, as_version=4)
        if end:
            nb.cells.append(nbformat.v4.new_code_cell(end))
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               GRADING_SECRET_FILE="none", **LIMITED)
    # a cell may run 240 s: the memory attack writes 3.3 GB, and on a busy VM the first touch of fresh memory
    # costs up to 10 CPU-s a GiB, so it took over 90 s of wall time once on CI before its memory limit stopped it
    res = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", "240",
                          "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, env=env)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, s).grades}
                  for s in _limited_class()}
    return course, res, scores


def _last_cell(course: Path, student: str) -> str:
    nb = nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = nb.cells[-1]
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}" for o in cell.get("outputs", []))


def test_every_learner_is_graded_and_no_honest_one_loses_a_mark_beside_the_attacks(limited):
    course, res, scores = limited
    for student in _limited_class():
        assert scores[student] == FULL, (student, scores[student], res.stdout[-3000:] + res.stderr[-3000:])
        assert _rows(course)[student]["status"] == "graded", _rows(course)[student]


def test_each_kernel_runs_under_the_limits_the_instructor_set(limited):
    course, _, _ = limited
    line = next(x for x in _last_cell(course, "a_listens").splitlines() if x.startswith("LIMITS"))
    memory, tasks, cpu = ast.literal_eval(line[len("LIMITS "):])
    assert memory == int(LIMITED["GRADER_MEMORY_MB"]) << 20 and tasks == int(LIMITED["GRADER_TASKS"])
    assert cpu == int(LIMITED["GRADER_CPU_SECONDS"]), line


def test_two_kernels_graded_together_cannot_talk(limited):
    """An abstract Unix socket and a loopback port: each kernel has a network of its own."""
    course, _, _ = limited
    listener, talker = _last_cell(course, "a_listens"), _last_cell(course, "b_talks")
    assert "LISTENER" in listener and "ACCEPTED" not in listener, listener
    assert "TALKER []" in talker, talker


def test_a_fork_bomb_stops_at_the_task_limit_and_ends_with_its_kernel(limited):
    """900 spinners asked for: the kernel gets fewer than its limit of tasks (its threads count too), its
    neighbour is graded in full, and no process of any kernel's user outlives the grading process it belongs to
    (a kernel's user is named after its grader's pid: other tests' graders may be running now, theirs alive)."""
    from grader.enclosure import KERNEL_UID_BASE, KERNEL_UID_SPAN

    course, _, scores = limited
    text = _last_cell(course, "c_forks_spinners")
    forked = int(text.split("FORKED", 1)[1].split()[0])
    assert 0 < forked < int(LIMITED["GRADER_TASKS"]), text
    assert scores["d_honest"] == FULL
    running = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    left = []
    for pid in running:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        grader = uid - KERNEL_UID_BASE
        if 0 <= grader < KERNEL_UID_SPAN and not any(p % KERNEL_UID_SPAN == grader for p in running):
            left.append((pid, uid))
    assert not left, f"processes of grading kernels outlived their grader: {left}"


@pytest.mark.parametrize("student, limit", [("e_fills_memory", "memory limit of 3072 MiB"),
                                            ("g_burns_cpu", "limit of 8 CPU seconds")])
def test_a_kernel_over_its_limit_is_stopped_and_named_and_its_neighbour_is_not_touched(limited, student, limit):
    course, res, scores = limited
    text = _last_cell(course, student)
    if os.geteuid() == 0 or student == "g_burns_cpu":  # the memory limit that counts files needs control groups
        assert "KernelDied" in text and limit in text and "NOT STOPPED" not in text, text
        other = {"e_fills_memory": "CPU seconds", "g_burns_cpu": "memory limit"}[student]
        assert other not in text, f"the kernel is also named for a limit it did not reach: {text}"
        assert limit in _rows(course)[student]["message"], _rows(course)[student]
        assert limit in res.stdout
    neighbour = {"e_fills_memory": "f_honest", "g_burns_cpu": "h_honest"}[student]
    assert scores[neighbour] == FULL and scores[student] == FULL
