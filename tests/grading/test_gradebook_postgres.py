"""The gradebook can be a PostgreSQL server (GRADEBOOK_URL) that several graders share.

The fast tests check how nbgrader_config.py reads GRADEBOOK_URL: the SQLite
default in the course root, relative SQLite paths, and a clear refusal of
anything else, by nbgrader itself too (it would otherwise log the error and
carry on with a default gradebook).

The slow ones start a real PostgreSQL server of their own on loopback (Debian's
package: `tools/system_packages.sh` installs it), grade submissions into it
with `make grade`'s tool from one course copy, then from a second copy, as a
second grader on another machine would, and read the grades back from the
server with nbgrader's Gradebook API.
"""

from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
import sqlalchemy
from nbgrader.api import Gradebook

from classroom.gradebook import gradebook_url, masked
from grader.registry import assignment as registered_assignment
from nbtools import ROOT

ASSIGNMENT = "02-attention"
NOTEBOOK = "attention"
COURSE_ID = "transformers-course"
FULL_MARKS = sum(ex.points for ex in registered_assignment(ASSIGNMENT).exercises)  # the prediction's included
PG_USER = "grader"
PG_PASSWORD = "s3cret-grader"  # password auth over TCP, as between machines
PG_DB = "gradebook"
SETUP_HINT = "install Debian's postgresql with tools/system_packages.sh (as root) and run the tests again"


# --- GRADEBOOK_URL as nbgrader_config.py reads it ------------------------------------------------

@pytest.fixture
def course(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, tmp_path / "solutions" / ASSIGNMENT)
    return tmp_path


def test_the_default_gradebook_is_sqlite_in_the_course_root(course, monkeypatch):
    monkeypatch.delenv("GRADEBOOK_URL", raising=False)
    assert gradebook_url(course) == f"sqlite:///{course / 'gradebook.db'}"
    monkeypatch.setenv("GRADEBOOK_URL", "  ")
    assert gradebook_url(course) == f"sqlite:///{course / 'gradebook.db'}"


def test_sqlite_paths_are_taken_from_the_course_root(course, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("GRADEBOOK_URL", "sqlite:///grading/book.db")
    assert gradebook_url(course) == f"sqlite:///{course / 'grading' / 'book.db'}"
    elsewhere = tmp_path_factory.mktemp("shared") / "book.db"
    monkeypatch.setenv("GRADEBOOK_URL", f"sqlite:///{elsewhere}")
    assert gradebook_url(course) == f"sqlite:///{elsewhere}"


def test_a_postgresql_url_is_used_as_given(course, monkeypatch):
    url = "postgresql://grader:pw@db.example.org:5432/gradebook"
    monkeypatch.setenv("GRADEBOOK_URL", url)
    assert gradebook_url(course) == url
    assert masked(url) == "postgresql://grader:***@db.example.org:5432/gradebook"


@pytest.mark.parametrize("value, why", [
    ("postgres://grader:pw@db.example.org/gradebook", "must start with sqlite:/// "),
    ("mysql://grader@db.example.org/gradebook", "must start with sqlite:/// "),
    ("gradebook.db", "must start with sqlite:/// "),
    ("sqlite://", "names no file"),
    ("sqlite:///:memory:", "names no file"),
])
def test_any_other_url_is_refused_with_the_value_and_the_rule(course, monkeypatch, value, why):
    monkeypatch.setenv("GRADEBOOK_URL", value)
    with pytest.raises(SystemExit) as exc:
        gradebook_url(course)
    message = str(exc.value.code)
    assert f"GRADEBOOK_URL='{masked(value)}'" in message and why in message
    assert "sqlite:///<" in message or "postgresql://" in message, "the rule is named"
    assert "pw" not in message, "the password must not be printed"


@pytest.mark.slow
def test_nbgrader_itself_refuses_a_bad_url_and_writes_nothing(course):
    exe = Path(sys.executable).with_name("nbgrader")
    env = dict(os.environ, GRADEBOOK_URL="postgres://grader@db.example.org/gradebook",
               PATH=f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([str(exe), "generate_assignment", ASSIGNMENT, "--log-level=ERROR"], cwd=course, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "GRADEBOOK_URL='postgres://grader@db.example.org/gradebook'" in res.stderr
    assert not (course / "gradebook.db").exists() and not (course / "exercises").exists()


@pytest.mark.slow
def test_make_grade_refuses_a_bad_url_and_grades_nothing(course):
    folder = course / "submitted" / "alice" / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", folder)
    res = grade(course, "mysql://grader:pw@db.example.org/gradebook")
    assert res.returncode != 0, res.stdout + res.stderr
    assert "GRADEBOOK_URL='mysql://grader:***@db.example.org/gradebook'" in res.stderr
    assert "must start with sqlite:/// " in res.stderr and ":pw@" not in res.stdout + res.stderr
    assert not (course / "gradebook.db").exists() and not (course / "grades.csv").exists()
    assert not (course / "autograded").exists()


# --- a real PostgreSQL server ---------------------------------------------------------------------

def postgres_bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    if not found:
        pytest.fail(f"PostgreSQL's server programs (initdb, pg_ctl under /usr/lib/postgresql/<version>/bin) "
                    f"are missing: {SETUP_HINT}", pytrace=False)
    return found[-1].parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_postgresql_server_programs_are_installed():
    bindir = postgres_bindir()
    assert all((bindir / prog).is_file() for prog in ("initdb", "pg_ctl", "postgres")), bindir


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server of our own on 127.0.0.1: yields the gradebook URL; stopped and removed afterwards."""
    bindir = postgres_bindir()
    as_postgres: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="course-pg-"))  # not under pytest's tmp: its parents are private to root
    if os.geteuid() == 0:  # the server refuses to run as root
        if shutil.which("runuser") is None:
            pytest.fail("running as root needs runuser (util-linux) to start PostgreSQL as its own user", pytrace=False)
        try:
            shutil.chown(base, "postgres", "postgres")
        except LookupError:
            pytest.fail(f"there is no 'postgres' system user: {SETUP_HINT}", pytrace=False)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data, sockets, log, pwfile = base / "data", base / "sockets", base / "server.log", base / "pwfile"
    port = free_port()

    def run(*cmd: str) -> None:
        res = subprocess.run([*as_postgres, *cmd], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout}{res.stderr}" + (
            f"\nserver log:\n{log.read_text()}" if log.exists() else "")

    started = False
    try:
        run("mkdir", str(sockets))
        run("sh", "-c", f"umask 077 && printf '%s\\n' '{PG_PASSWORD}' > {pwfile}")
        run(str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}", "--auth-local=trust",
            "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync")
        started = True
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
            "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off", "start")
        admin = sqlalchemy.create_engine(f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{port}/postgres",
                                         isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f"CREATE DATABASE {PG_DB}"))
        admin.dispose()
        yield f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{port}/{PG_DB}"
    finally:
        if started:
            subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def course_copy(parent: Path, name: str, submissions: dict[str, Path]) -> Path:
    course = parent / name
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    for student, notebook in submissions.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nbformat.read(notebook, as_version=4), folder / f"{NOTEBOOK}.ipynb")
    return course


def grade(course: Path, url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GRADEBOOK_URL=url,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        [sys.executable, "-m", "classroom.grade", "--root", str(course), "--assignment", ASSIGNMENT],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=900,
    )


SOLUTION = ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
RELEASE = ROOT / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"


@pytest.fixture(scope="module")
def two_graders(postgres, tmp_path_factory):
    """Grader A grades alice (the solution) and bob (the release); grader B, on its own copy, grades carol."""
    parent = tmp_path_factory.mktemp("graders")
    first = course_copy(parent, "grader-a", {"alice": SOLUTION, "bob": RELEASE})
    res_a = grade(first, postgres)
    assert res_a.returncode == 0, res_a.stdout + res_a.stderr
    second = course_copy(parent, "grader-b", {"carol": SOLUTION})
    res_b = grade(second, postgres)
    assert res_b.returncode == 0, res_b.stdout + res_b.stderr
    return postgres, first, second, res_a, res_b


def scores(url: str) -> dict[str, float]:
    with Gradebook(url, course_id=COURSE_ID) as gb:
        return {sub.student.id: sub.score for sub in gb.assignment_submissions(ASSIGNMENT)}


@pytest.mark.slow
def test_grades_go_to_the_postgresql_server(two_graders):
    url, first, second, _, _ = two_graders
    engine = sqlalchemy.create_engine(url)
    try:
        assert engine.dialect.name == "postgresql"
        with engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text(
                "SELECT s.student_id, SUM(g.auto_score) FROM grade g "
                "JOIN submitted_notebook n ON g.notebook_id = n.id "
                "JOIN submitted_assignment s ON n.assignment_id = s.id "
                "GROUP BY s.student_id")).all()
    finally:
        engine.dispose()
    assert {student: float(total) for student, total in rows} == {"alice": FULL_MARKS, "bob": 0, "carol": FULL_MARKS}
    # nothing went to a SQLite gradebook on either machine
    assert not (first / "gradebook.db").exists() and not (second / "gradebook.db").exists()


@pytest.mark.slow
def test_the_gradebook_api_reads_the_expected_scores(two_graders):
    url = two_graders[0]
    assert scores(url) == {"alice": FULL_MARKS, "bob": 0, "carol": FULL_MARKS}
    with Gradebook(url, course_id=COURSE_ID) as gb:
        assert gb.find_assignment(ASSIGNMENT).max_score == FULL_MARKS
        cells = {g.name: g.score for g in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "bob").grades}
        assert cells and set(cells.values()) == {0}, cells


@pytest.mark.slow
def test_the_second_grader_sees_the_first_graders_grades(two_graders):
    _, _, second, _, res_b = two_graders
    rows = {r["student_id"]: r for r in csv.DictReader((second / "grades.csv").open())}
    assert set(rows) == {"alice", "bob", "carol"}, res_b.stdout
    full = f"{FULL_MARKS:g}"
    assert (rows["alice"]["score"], rows["bob"]["score"], rows["carol"]["score"]) == (full, "0", full)
    assert all(r["status"] == "graded" and r["max_score"] == f"{FULL_MARKS:g}" for r in rows.values())
