"""Cases per learner (grader/secret.py): the seed of a learner's hidden cases, and the secret it comes from."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.autograde import grading_secret_file
from grader.registry import assignments
from grader.sandbox import bwrap_arguments, bwrap_works
from grader.secret import SECRET_FILE, GradingSecretError, learner_seed, read_or_create
from nbtools import ROOT


def test_a_new_secret_is_made_once_private_and_then_read_back(tmp_path):
    path = str(tmp_path / SECRET_FILE)
    secret, created = read_or_create(path)
    assert created and len(secret) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_or_create(path) == (secret, False)
    assert read_or_create(str(tmp_path / "another")) != (secret, True)  # random, not derived from anything


def test_graders_starting_together_agree_on_one_secret(tmp_path):
    path = str(tmp_path / SECRET_FILE)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: read_or_create(path), range(16)))
    assert len({secret for secret, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert sorted(os.listdir(tmp_path)) == [SECRET_FILE]


@pytest.mark.parametrize("content", ["", "not hex\n", "ab" * 31 + "\n", "AB" * 32 + "\n"])
def test_a_file_that_is_not_a_secret_is_named_with_the_rule(tmp_path, content):
    path = tmp_path / SECRET_FILE
    path.write_text(content)
    with pytest.raises(GradingSecretError, match=rf"{SECRET_FILE} does not hold a grading secret: it must be the 64"):
        read_or_create(str(path))
    assert path.read_text() == content  # nothing overwritten: the instructor restores it


def test_each_learner_assignment_and_exercise_has_its_own_seed():
    secret = bytes(range(32))
    seeds = {learner_seed(secret, student, slug, ex.name)
             for student in ("alice", "bob", "carol")
             for slug, assignment in assignments().items() for ex in assignment.exercises}
    n = 3 * sum(len(a.exercises) for a in assignments().values())
    assert len(seeds) == n and all(0 <= s < 2**31 for s in seeds)
    assert learner_seed(secret, "alice", "02-attention", "causal_mask") == learner_seed(
        bytes(range(32)), "alice", "02-attention", "causal_mask")  # a regrade draws the same cases
    assert learner_seed(bytes(32), "alice", "02-attention", "causal_mask") != learner_seed(
        secret, "alice", "02-attention", "causal_mask")  # another secret, other cases
    # the fields cannot run into each other: ("ab", "c") and ("a", "bc") are different learners' seeds
    assert learner_seed(secret, "ab", "c", "x") != learner_seed(secret, "a", "bc", "x")


def test_the_secret_is_never_committed():
    done = subprocess.run(["git", "check-ignore", "-q", SECRET_FILE], cwd=ROOT)
    assert done.returncode == 0, f"{SECRET_FILE} is not git-ignored"


def test_cases_per_learner_are_on_unless_the_instructor_says_none(tmp_path):
    """By default the secret is grading-secret in the course folder, next to the default gradebook; another
    file may be named (relative to the course); `none` grades on the registry's seeds."""
    course = str(tmp_path)
    assert grading_secret_file(course, None) == os.path.join(course, SECRET_FILE)
    assert grading_secret_file(course, "  ") == os.path.join(course, SECRET_FILE)
    assert grading_secret_file(course, "private/key") == os.path.join(course, "private", "key")
    assert grading_secret_file(course, "/srv/grading/key") == "/srv/grading/key"
    assert grading_secret_file(course, "none") == grading_secret_file(course, "NONE") == ""


@pytest.mark.parametrize("where", ["exercises/key", "chapters/k", ".venv/key", "grader/key", "submitted/alice/key",
                                   "autograded/key", "feedback"])
def test_a_secret_where_the_grading_kernel_can_read_is_refused_with_the_rule(tmp_path, where):
    with pytest.raises(GradingSecretError, match=rf"GRADING_SECRET_FILE='{where}' lies in .*which the grading kernel "
                                                 "can read: keep the grading secret where"):
        grading_secret_file(str(tmp_path), where)


def test_make_grade_refuses_such_a_secret_before_grading(tmp_path):
    done = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(ROOT)], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, GRADING_SECRET_FILE="exercises/secret"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "lies in" in done.stderr and "nothing was graded" in done.stderr, done.stderr
    assert not (ROOT / "exercises" / "secret").exists()


PEEK = """
import json, sys
from grader import sandbox
path, settings = sys.argv[1], json.loads(sys.argv[2])
sandbox.install(**settings)
try:
    seen = open(path).read()
except BaseException as exc:
    seen = f"{type(exc).__name__}: {exc}"
print(json.dumps(seen))
"""


def test_the_grading_kernel_cannot_read_a_secret_kept_outside_the_course(tmp_path):
    """GuardedExecute hands the secret's file to the fence as a private path: the Python fence refuses to open
    it, and bubblewrap shows nothing of it: outside the view (/var/tmp) it is not there at all, and in a folder
    the kernel may read, the empty file the fence mounts stands in its place (it is left readable to all, so that
    only the fence stands in the way)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="course-secret-test-", dir="/var/tmp"))
    try:
        secret_file = folder / "key"
        secret, _ = read_or_create(str(secret_file))
        secret_file.chmod(0o644)
        work = tmp_path / "work"
        work.mkdir()
        settings = {"workdir": str(work), "private_roots": [str(secret_file)], "public_roots": [],
                    "memory_mb": 2048}
        python = subprocess.run([sys.executable, "-c", PEEK, str(secret_file), json.dumps(settings)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        seen = json.loads(python.stdout.strip().splitlines()[-1])
        assert seen.startswith("PermissionError: grading sandbox: reading"), seen
        if bwrap_works() is not None:
            pytest.fail(f"bubblewrap cannot run here ({bwrap_works()}): make test installs it")

        def cat(hidden, readable=()):
            box = ["bwrap", *bwrap_arguments(hidden=hidden, readable=list(readable), writable=[]), "cat",
                   str(secret_file)]
            return subprocess.run(box, capture_output=True, text=True, timeout=60)

        # outside the system's folders and the readable ones, it is not in the OS fence's view at all
        outside = cat([])
        assert secret.hex() not in outside.stdout and "No such file" in outside.stderr, outside
        # in a folder the kernel may read, it shows unless it is hidden: the fence hides it
        assert secret.hex() in cat([], readable=[folder]).stdout  # nothing else hides it there
        shown = cat([str(secret_file)], readable=[folder])
        assert secret.hex() not in shown.stdout and shown.stdout == "", shown
    finally:
        shutil.rmtree(folder)


def test_the_sweep_reports_a_diagnosis_other_secrets_lose_and_passes_the_ones_they_keep(monkeypatch):
    """tools/secret_sweep.py, the check behind cases per learner: entries mended for other seeds (sdpa #41, #47
    of 02) hold on the first two sweep secrets and the sweep passes; an entry whose catalogued diagnosis is not
    what the judge tells it (train_bpe #19 of 01, given the diagnosis of another mistake) is reported with what it
    was told."""
    from tools import secret_sweep

    def sweep(*args):
        return subprocess.run([sys.executable, "-m", "tools.secret_sweep", *args], cwd=ROOT, capture_output=True,
                              text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))

    kept = sweep("--secrets", "2", "--assignment", "02-attention", "--entries", "41", "47", "r0")
    assert kept.returncode == 0 and "total: 6 judged (secrets 1..2), 0 failure(s)" in kept.stdout, kept.stdout
    entries = secret_sweep._entries("01-tokenization", "wrong")
    task = secret_sweep.Task("01-tokenization", "wrong", 19, "train_bpe")
    assert secret_sweep.judge(task, 1) is None  # the entry as catalogued holds
    misnamed = [dict(e, diagnosis="Likely mistake: one merge too few") if i == 19 else e
                for i, e in enumerate(entries)]
    monkeypatch.setattr(secret_sweep, "_entries", lambda assignment, kind: misnamed)
    failure = secret_sweep.judge(task, 1)
    assert failure is not None and failure.kind == "diagnosis lost", failure
    assert "expected 'Likely mistake: one merge too few'" in failure.what
    assert "Likely mistake: training stops at a pair whose occurrences overlap" in failure.what
