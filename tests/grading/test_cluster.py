"""Grading a class on a real Dask cluster on loopback: a scheduler and two workers of this clone, one worker of
another commit, and a worker killed with SIGKILL while it grades.

The class (02-attention, 12 learners): right, wrong (catalogued mistakes), untouched, one whose submission
kills its kernel, one broken notebook. The same class is graded locally (``make grade``) and on the cluster
(``make grade SCHEDULER=...``); grades.csv must be the same file, every gradable submission is recorded
exactly once, and the worker of another commit is refused by name with both course hashes and grades nothing.
"""

from __future__ import annotations

import csv
import os
import re
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from classroom.cluster.course import SCRATCH_VARIABLE
from classroom.cluster.processes import stop_warm_processes_of
from grader.notebook import grade_id
from grader.registry import assignment as registered_assignment
from grader.secret import SECRET_FILE, read_or_create
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT = "02-attention"
#: the assignment's points, its prediction's included, as grades.csv writes them
FULL = f"{sum(ex.points for ex in registered_assignment(ASSIGNMENT).exercises):g}"
NOTEBOOK = "attention"
TIMEOUT = "30"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADEBOOK_URL", "DEADLINES", "GRADING_SECRET_FILE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"  # two workers on a machine of two cores
    return env | more


def _with_cell(solution: Path, exercise: str, source: str):
    nb = nbformat.read(solution, as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == exercise]
    cell.source = source
    return nb


def _firsts() -> dict[str, dict]:
    """The first catalogued mistake of each exercise of the assignment, by exercise."""
    firsts: dict[str, dict] = {}
    for entry in runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{ASSIGNMENT}.py"))["WRONG"]:
        firsts.setdefault(entry["exercise"], entry)
    return firsts


def _make_class(course: Path) -> None:
    read_or_create(str(course / SECRET_FILE))  # one class, one grading secret: its copy grades with the same
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    release = ROOT / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    firsts = _firsts()
    learners = {
        "alice": nbformat.read(solution, as_version=4), "bruno": nbformat.read(solution, as_version=4),
        "chen": nbformat.read(solution, as_version=4), "lena": nbformat.read(solution, as_version=4),
        "gus": nbformat.read(release, as_version=4), "hana": nbformat.read(release, as_version=4),
        "ivan": _with_cell(solution, "causal_mask", "import os\nos._exit(1)\n"),  # kills its kernel
    }
    for name, exercise in zip(("dora", "emil", "finn", "jules"), sorted(firsts)):
        learners[name] = _with_cell(solution, exercise, firsts[exercise]["source"])
    for name, nb in learners.items():
        folder = course / "submitted" / name / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    broken = course / "submitted" / "kira" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / f"{NOTEBOOK}.ipynb").write_text('{"cells": [')


def _grade(course: Path, *more: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", TIMEOUT,
                             *more], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)


def _start(args: list[str], log: Path, cwd: Path = ROOT, **env: str) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "classroom.cluster", *args], cwd=cwd, env=_env(**env),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_workers(scheduler: str, n: int, deadline: float = 60) -> None:
    from distributed import Client

    with Client(scheduler, timeout="20s", set_as_default=False) as client:
        client.wait_for_workers(n, timeout=deadline)


def _grading(worker: psutil.Process) -> bool:
    """Whether the Dask worker process ``worker`` is grading: a learner's submission is in its scratch course,
    where it lies from the start of a task to its end (classroom.cluster.worker.WorkerGrading)."""
    try:
        scratch = worker.environ().get(SCRATCH_VARIABLE)
    except psutil.Error:
        return False
    return bool(scratch) and any(Path(scratch).glob("grade-course-*/course/submitted/*"))


def _nbgrader_processes(pid: int) -> list[int]:
    """The long-lived nbgrader processes under the worker whose launcher is ``pid``."""
    return sorted(c.pid for c in psutil.Process(pid).children(recursive=True)
                  if "grader.nbgrader_processes" in " ".join(c.cmdline()))


def _test_outputs(course: Path, learner: str) -> dict[str, str]:
    """What each graded test cell of a learner's autograded notebook reported (the error, naming its case)."""
    nb = nbformat.read(course / "autograded" / learner / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    return {grade_id(c): " ".join(f"{o.get('ename')}: {o.get('evalue')}" for o in c.get("outputs", [])
                                  if o.get("output_type") == "error")
            for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    top = tmp_path_factory.mktemp("cluster")
    local, remote = top / "local", top / "remote"
    local.mkdir()
    _make_class(local)
    shutil.copytree(local, remote)
    # another commit: this clone with one byte more in the grader
    other = top / "other-clone"
    other.mkdir()
    for part in ("grader", "classroom", "tools", "solutions"):
        shutil.copytree(ROOT / part, other / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", other)
    (other / "course_lib").symlink_to(ROOT / "course_lib")
    with open(other / "grader" / "__init__.py", "a") as f:
        f.write("# another commit\n")

    port = _free_port()
    scheduler = f"tcp://127.0.0.1:{port}"
    procs = {"scheduler": _start(["scheduler", "--port", str(port)], top / "scheduler.log")}
    # the workers' scratch courses under a folder of the test's: the one w1 is killed in is never cleaned by w1
    scratch = top / "workers-tmp"
    scratch.mkdir()
    killed: list[int] = []  # the killed worker's Dask process
    try:
        time.sleep(2)
        for name in ("w1", "w2"):
            procs[name] = _start(["worker", scheduler, "--name", name, "--threads", "1", "--scratch", str(scratch)],
                                 top / f"{name}.log")
        procs["w3"] = _start(["worker", scheduler, "--name", "w3-other-commit", "--root", str(other),
                              "--scratch", str(scratch)], top / "w3.log", cwd=other, PYTHONPATH=str(other))
        local_run = _grade(local, "--jobs", "2")
        _wait_for_workers(scheduler, 3)
        w2_before = _nbgrader_processes(procs["w2"].pid)
        cluster_run = _grade(remote, "--scheduler", scheduler)
        # w1 is killed with SIGKILL (its whole session: worker, nbgrader, kernel) once it is grading (its nbgrader
        # process runs from the worker's start: a submission in its scratch course says a task is under way)
        killed_at = None
        worker = psutil.Process(procs["w1"].pid)
        while cluster_run.poll() is None and killed_at is None:
            dask_worker = [c for c in worker.children(recursive=True) if "dask_worker" in " ".join(c.cmdline())]
            if dask_worker and _grading(dask_worker[0]):
                os.killpg(procs["w1"].pid, signal.SIGKILL)
                killed.append(dask_worker[0].pid)
                killed_at = time.monotonic()
            time.sleep(0.1)
        out, err = cluster_run.communicate(timeout=400)
        w2_after = _nbgrader_processes(procs["w2"].pid)
        w2_courses = [c for c in psutil.Process(procs["w2"].pid).children(recursive=True)
                      if "dask_worker" in " ".join(c.cmdline())]
        w2_left = sorted(str(p) for c in w2_courses for top in ("submitted", "autograded")
                         for p in Path(c.environ()[SCRATCH_VARIABLE]).glob(f"grade-course-*/course/{top}/*"))
        local_out, local_err = local_run.communicate(timeout=400)
        yield {"local": local, "remote": remote, "out": out, "err": err, "rc": cluster_run.returncode,
               "w2_nbgrader": (w2_before, w2_after), "w2_left": w2_left,
               "local_out": local_out + local_err, "local_rc": local_run.returncode, "killed": killed_at,
               "other": other, "logs": {n: (top / f"{n}.log").read_text() for n in ("w1", "w2", "w3")}}
    finally:
        for proc in reversed(procs.values()):  # the workers first, while their scheduler can still see them go
            _stop(proc)
        shutil.rmtree(scratch, ignore_errors=True)
        for pid in killed:  # what the killed worker kept (its warm processes' folder) goes too
            stop_warm_processes_of(pid)


def test_the_cluster_grades_the_class_as_a_local_run_does(graded):
    assert graded["killed"] is not None, "w1 never started grading: the test did not kill a busy worker"
    assert graded["local_rc"] == graded["rc"] == 1, graded["local_out"] + graded["out"] + graded["err"]
    local, remote = (graded[k] / "grades.csv" for k in ("local", "remote"))
    assert remote.read_text() == local.read_text(), graded["local_out"][-6000:] + graded["out"] + graded["err"]
    rows = {r["student_id"]: r for r in csv.DictReader(local.open())}
    assert rows["alice"]["score"] == FULL and rows["gus"]["score"] == "0" and rows["dora"]["score"] not in ("0", FULL)
    assert rows["ivan"]["score"] not in ("0", FULL) and "kernel died in cell causal_mask" in rows["ivan"]["message"]
    assert "not valid JSON" in rows["kira"]["message"] and "kira" in graded["err"]


def test_every_submission_is_recorded_once_though_a_worker_was_killed(graded):
    summary = re.search(r"recorded (\d+) submission\(s\) from the cluster: (.*)", graded["out"])
    assert summary, graded["out"]
    assert int(summary.group(1)) == 11, summary.group(0)  # 12 learners, one broken notebook
    assert "w1" not in summary.group(2) or "w2" in summary.group(2), summary.group(0)
    assert "w3" not in summary.group(2), "the worker of another commit graded"
    for learner in ("alice", "ivan", "jules"):
        assert len(list((graded["remote"] / "autograded" / learner / ASSIGNMENT).glob("*.ipynb"))) == 1


def test_a_worker_grades_every_task_with_the_nbgrader_process_it_started_with_and_keeps_no_learner(graded):
    """A worker keeps one nbgrader process (and one scratch course) for its whole run, as make grade does for
    one run: w2's, started with the worker, graded every task it got and is still the one; nothing of a learner
    (a submission, an autograded copy) is left in its course between tasks."""
    before, after = graded["w2_nbgrader"]
    summary = re.search(r"recorded \d+ submission\(s\) from the cluster: (.*)", graded["out"])
    assert summary and re.search(r"w2 \((\d+)\)", summary.group(1)), graded["out"]
    assert len(before) == 1 and after == before, (before, after, graded["logs"]["w2"][-3000:])
    assert graded["w2_left"] == [], graded["w2_left"]


def test_the_cluster_draws_each_learners_cases_from_the_clients_secret(graded):
    """The secret travels with each task to the worker's nbgrader process: every learner's graded test cells say
    what they said locally, case for case (the first failing case, with its shapes, is drawn from the secret)."""
    for learner in ("alice", "dora", "emil", "finn", "jules", "ivan"):
        local, remote = (_test_outputs(graded[k], learner) for k in ("local", "remote"))
        assert remote == local, (learner, local, remote)
    first = sorted(_firsts())[0]  # dora's exercise, where her catalogued mistake is
    assert _test_outputs(graded["local"], "dora")[f"test_{first}"], "dora's mistake failed no test cell"


def test_a_worker_of_another_commit_is_refused_with_both_hashes(graded):
    from classroom.cluster.course import course_hash

    ours = course_hash(graded["remote"])
    theirs = course_hash(graded["other"], code=graded["other"])
    assert ours != theirs
    line = next(x for x in graded["err"].splitlines() if "w3-other-commit" in x)
    assert "is refused" in line and theirs in line and ours in line, line


def test_an_unreachable_scheduler_is_named_and_nothing_is_graded(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    folder = tmp_path / "submitted" / "alice" / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", folder)
    address = f"tcp://127.0.0.1:{_free_port()}"
    out, err = _grade(tmp_path, "--scheduler", address).communicate(timeout=120)
    assert f"SCHEDULER={address} cannot be reached" in err and "nothing was graded" in err, out + err
    assert not (tmp_path / "autograded").exists() and not (tmp_path / "grades.csv").exists()
