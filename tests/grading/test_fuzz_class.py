"""A fuzzer of whole classes: hostile submissions drawn by hypothesis, graded by a real `make grade` beside an honest
classmate.

Each example is a class of four submissions, each the release notebook with a few hostile moves drawn from a grammar
of what a learner can do to the grading run: cells that spin past the interrupt, sleep past their limit, flood their
output, exit or kill their kernel, hold memory in memfd or files, leave processes, print terminal escapes, recurse,
write wrong code, and edits of the notebook's structure (cells copied, removed, retyped; nbgrader marks of any
shape). The invariants, whatever is drawn (issue 49):

* the honest classmate is graded in full and reported so;
* every hostile learner has a row in grades.csv, graded or named;
* the run ends within a bound set by the limits, not by what the learners do;
* grading's own processes stay under a memory bound;
* nothing is written outside the course; every CSV cell is inert; nothing printed holds a terminal escape.

`make test` grades two classes (about a minute); `make fuzz FUZZ_EXAMPLES=20` grades more, and hypothesis prints the
blob that replays a failing class (tests/nbtools.py).
"""

from __future__ import annotations

import copy
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from classroom.text_out import is_inert
from grader.registry import assignment as registered_assignment
from nbtools import ROOT, fuzz_settings

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "02-attention", "attention"
#: every test cell's points, the prediction's included (grader.registry, which the notebook's marks agree with)
FULL = {f"test_{ex.name}": ex.points for ex in registered_assignment("02-attention").exercises}
TIMEOUT, BUDGET, MEMORY_MB = 6, 45, 3072
#: grading's own processes (nbgrader with torch and the judge) reach about 700 MiB on an honest class
GRADER_MEMORY_BOUND_MB = 1536

#: what a learner's cell can do to the grading run
CELLS = {
    "spin": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
    "sleep": f"import time\ntime.sleep({TIMEOUT + 2})\n",
    "flood": "print('x' * ({mib} << 20))\n",
    "many_lines": "for i in range(200000):\n    print(i)\n",
    "exit": "raise SystemExit(3)\n",
    "kill": "import os\nos._exit(1)\n",
    "memfd": ("import os\nfds = [os.memfd_create(f'h{{i}}') for i in range({mib} // 256 + 1)]\n"
              "for fd in fds:\n    for _ in range(256):\n        os.write(fd, b'x' * (1 << 20))\n"),
    "files": "for i in range(2000):\n    open(f'junk{{i}}.txt', 'w').write('x' * 1000)\n",
    "sleepers": ("import subprocess\nfor _ in range(3):\n    try:\n        subprocess.Popen(['sleep', '600'])\n"
                 "    except Exception as e:\n        print(e)\n"),
    "escape": ("print('\\x1b[2J\\x1b[31mFORGED\\x1b[0m', 'student honest')\nimport sys\n"
               "print('\\x1b]0;t\\x07', file=sys.stderr)\n"),
    "recurse": "def f(n):\n    return f(n + 1)\nf(0)\n",
    "wrong": "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool)\n",
    "html": "from IPython.display import HTML, display\ndisplay(HTML('<script>window.PWNED=1</script>'))\n",
}
junk = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=6)


@st.composite
def hostile(draw) -> dict:
    nb = nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    for _ in range(draw(st.integers(1, 3))):
        move = draw(st.sampled_from([*CELLS, "copy", "remove", "retype", "marks"]))
        at = draw(st.integers(0, len(nb.cells)))
        if move in CELLS:
            source = CELLS[move].format(mib=draw(st.sampled_from([8, 64, 4096 if move == "memfd" else 64])))
            nb.cells.insert(at, nbformat.v4.new_code_cell(source))
        elif nb.cells:
            i = min(at, len(nb.cells) - 1)
            if move == "copy":
                nb.cells.insert(at, copy.deepcopy(nb.cells[i]))
            elif move == "remove":
                nb.cells.pop(i)
            elif move == "retype":
                cell = nb.cells[i]
                if cell.cell_type == "code":
                    nb.cells[i] = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)
                else:
                    nb.cells[i] = nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata)
            else:
                nb.cells[i].metadata["nbgrader"] = draw(junk)
    return nbformat.writes(nb)


@fuzz_settings(in_the_suite=2)
@given(st.lists(hostile(), min_size=4, max_size=4))
def test_a_drawn_class_of_hostile_submissions_costs_the_honest_classmate_nothing(notebooks):
    base = Path(tempfile.mkdtemp(prefix="fuzz-class-"))
    try:
        course = base / "course"
        course.mkdir()
        shutil.copy(ROOT / "nbgrader_config.py", course)
        shutil.copytree(ROOT / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
        learners = {"honest": (ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()}
        learners.update({f"hostile{i}": text for i, text in enumerate(notebooks)})
        for student, text in learners.items():
            folder = course / "submitted" / student / ASSIGNMENT
            folder.mkdir(parents=True)
            (folder / f"{NOTEBOOK}.ipynb").write_text(text)
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   GRADING_SECRET_FILE="none", GRADER_NOTEBOOK_SECONDS=str(BUDGET), GRADER_MEMORY_MB=str(MEMORY_MB))
        started = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout",
                              str(TIMEOUT), "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, env=env)
        wall = time.monotonic() - started
        said = res.stdout[-4000:] + res.stderr[-4000:]
        assert sorted(os.listdir(base)) == ["course"], "the run wrote beside the course"
        assert res.returncode in (0, 1), said
        # a notebook's cells stop at 3/4 of its budget, each stuck cell costs its limit and a restart; two at once
        assert wall < (len(learners) / 2 + 1) * (BUDGET + 4 * (TIMEOUT + 20)), (wall, said)
        with (course / "grades.csv").open(newline="") as fh:
            rows = list(csv.reader(fh))
        assert all(is_inert(cell) for row in rows for cell in row), rows
        by_student = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
        assert set(by_student) == set(learners), by_student
        honest = by_student["honest"]
        assert honest["status"] == "graded" and float(honest["score"]) == sum(FULL.values()) \
            and honest["message"] == "", (honest, said)
        for student in learners:
            row = by_student[student]
            assert row["status"].startswith(("graded", "not graded")), row
            assert row["status"] == "graded" or row["message"], row
        assert "\x1b" not in res.stdout + res.stderr and "\x07" not in res.stdout + res.stderr
        peak = re.search(r"reached (\d+) MiB of memory at most", res.stdout)
        assert peak and int(peak.group(1)) < GRADER_MEMORY_BOUND_MB, said
        scores = _scores(course, "honest")
        assert scores == FULL, scores
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _scores(course: Path, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student).grades}


#: a piece of each move's cell, to find it in a drawn notebook
MARKERS = {"spin": "SIG_IGN", "sleep": "time.sleep", "flood": "'x' *", "many_lines": "range(200000)",
           "exit": "SystemExit(3)", "kill": "os._exit", "memfd": "memfd_create", "files": "junk{i}",
           "sleepers": "'sleep'", "escape": "FORGED", "recurse": "f(n + 1)", "wrong": "dtype=torch.bool)\\n",
           "html": "PWNED"}


def test_the_grammar_reaches_every_move():
    """Every move of the grammar is drawn by the strategy (a move the fuzzer never draws proves nothing)."""
    from hypothesis import find

    assert set(MARKERS) == set(CELLS)
    for marker in MARKERS.values():
        find(hostile(), lambda text, marker=marker: marker in text, settings=fuzz_settings(in_the_suite=2000))
