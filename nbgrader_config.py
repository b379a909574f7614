"""nbgrader configuration for the course (the repository root is the course directory).

solutions/<assignment>/ is the single source of every assignment; the learner
version under exercises/<assignment>/ is generated from it (`make exercises`).
Submissions, autograded copies, feedback and the gradebook stay in the
instructor's checkout and are git-ignored.
"""

import os
import pwd
import re
import sys
import tomllib
from pathlib import Path

import nbgrader
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

import grader
from classroom.late import CourseLatePolicy, DeadlineError, read_deadlines
from grader.autograde import GuardedExecute, HideHiddenTests, RestoreDeletedTests, grading_secret_file
from grader.canonical_cells import CanonicalCells
from grader.failures import STUB
from grader.mathml import MathAsMathML
from grader.pages import ShownSafely, clean, markdown2html
from grader.secret import GradingSecretError

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The course directory is the folder of this file, wherever nbgrader is run from.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "transformers-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# The gradebook: nbgrader's SQLite file gradebook.db in the course root, unless
# the environment variable GRADEBOOK_URL names another one:
#   sqlite:///<path>                          another SQLite file (a relative path is
#                                             taken from the course root)
#   postgresql://user:password@host:port/db   a PostgreSQL server, which several
#                                             graders on several machines can share
# Anything else is refused with a SystemExit: nbgrader only logs an exception
# raised in a config file and carries on with its defaults, and a misspelt URL
# must never send grades to a gradebook nobody reads.
def _gradebook_url(course_root, value):
    value = (value or "").strip()
    if not value:
        return "sqlite:///" + os.path.join(course_root, "gradebook.db")
    scheme, sep, rest = value.partition("://")
    shown = re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", value)  # error messages never show a password
    if not sep or scheme not in ("sqlite", "postgresql"):
        raise SystemExit(
            f"nbgrader_config.py: GRADEBOOK_URL={shown!r} is not a gradebook URL the course accepts: "
            "it must start with sqlite:/// (a file, e.g. sqlite:////srv/course/gradebook.db) or "
            "postgresql:// (a server, e.g. postgresql://grader:secret@db.example.org:5432/gradebook)"
        )
    if scheme == "sqlite":
        path = rest[1:] if rest.startswith("/") else ""
        if not path or path == ":memory:":
            raise SystemExit(
                f"nbgrader_config.py: GRADEBOOK_URL={shown!r} names no file: a SQLite gradebook URL must be "
                "sqlite:///<path relative to the course root> or sqlite:////<absolute path>"
            )
        return "sqlite:///" + os.path.join(course_root, path)
    return value


c.CourseDirectory.db_url = _gradebook_url(c.CourseDirectory.root, os.environ.get("GRADEBOOK_URL"))

# Only notebooks and the data files they read travel with an assignment.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a learner sees in place of a solution.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE\n" + STUB,
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Execution while autograding: every cell gets at most this many seconds; a cell
# that runs longer (an endless loop) is interrupted, its error recorded, and it
# scores zero while the rest of the notebook is still graded.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.Execute.raise_on_iopub_timeout = False
c.Execute.execute_retries = 0

# Autograding runs in a fenced kernel: bubblewrap around it (a read-only system, no
# network, the course's private files out of view) and grader.sandbox inside it: a memory
# limit, no writes outside the submission's folder, no reads of this course's
# private files (solutions/, the gradebook, other students' work), and a check
# before each test cell that the functions the checks use were not replaced.
# A deleted test cell is put back as a failing cell (zero points, named in
# `make grade`'s report); a cell that kills its kernel scores zero and grading
# goes on in a fresh kernel.
# What nbgrader grades is the gradebook's to say: before anything runs, every cell's nbgrader marks are rebuilt from
# the gradebook's record, and a copied test cell, an unknown grade_id or marks of another format version become an
# ordinary cell, noted (grader/canonical_cells.py, in place of nbgrader's DeduplicateIds, whose emptied marks made
# nbgrader stop the whole autograde).
c.Autograde.sanitize_preprocessors = [ClearOutput, CanonicalCells, OverwriteKernelspec, OverwriteCells,
                                      CheckCellMetadata]
c.Autograde.autograde_preprocessors = [
    RestoreDeletedTests, GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]
c.GuardedExecute.course_root = c.CourseDirectory.root
# Each grading kernel's limits (grader/enclosure.py), the instructor's to set: memory in MiB (its control group's,
# its files in /tmp and shared memory counted, and each process's address space), processes and threads at once,
# CPU seconds of each process, the size of its /tmp and /dev/shm. A kernel over one is stopped and its cell
# scores zero, named; the others' kernels are not touched. Grading as root, each kernel also runs as a user of
# its own and in control groups of its own (memory, processes, an equal share of the cores).
def _limit(name, default):
    value = os.environ.get(name, "").strip() or str(default)
    if not value.isdigit():
        raise SystemExit(f"nbgrader_config.py: {name}={value!r} is not a whole number (0 for no limit)")
    return int(value)


c.GuardedExecute.memory_mb = _limit("GRADER_MEMORY_MB", 4096)
c.GuardedExecute.max_tasks = _limit("GRADER_TASKS", 128)
c.GuardedExecute.cpu_seconds = _limit("GRADER_CPU_SECONDS", 600)
c.GuardedExecute.tmp_mb = _limit("GRADER_TMP_MB", 1024)
# Each notebook's wall-clock budget, in seconds: its cells stop at three quarters of it (a cell that will not stop
# after its own time limit and an interrupt has its kernel stopped, and grading goes on in a fresh kernel without
# it); the rest is kept for judging what ran. The heaviest honest notebook takes about 25 s here.
c.GuardedExecute.notebook_seconds = _limit("GRADER_NOTEBOOK_SECONDS", 600)
# The OS fence around the grading kernel: bubblewrap (tools/system_packages.sh installs it), or
# GRADER_OS_FENCE=none where it cannot run (the Python fence alone; grading says so when it starts).
c.GuardedExecute.os_fence = os.environ.get("GRADER_OS_FENCE", "bwrap")
# Each kernel in control groups of its own (as root, or below a group delegated to the grading user, as the course's
# hub delegates its instructor's), so that all its memory counts, memfd and shared memory too, and over it the kernel
# is stopped, never the grader; where none can be made, grading refuses unless GRADER_ISOLATION=process-limits asks
# for the process limits alone by name.
c.GuardedExecute.isolation = os.environ.get("GRADER_ISOLATION", "").strip() or "groups"
c.GuardedExecute.timeout = 60
# Cases per learner (grader/secret.py): each learner's hidden cases come from a seed derived from the course's
# grading secret, which the first grading writes to grading-secret in the course folder, next to the gradebook
# (git-ignored, hidden from the grading kernel; back it up with the gradebook). GRADING_SECRET_FILE names another
# file, or `none` for the registry's public seeds. `python -m tools.secret_sweep --secrets 100` judges every
# catalogued implementation on the cases 100 other secrets draw (73,400 judgements: every one as catalogued).
def _secret_path(course_root, value):
    try:
        return grading_secret_file(course_root, value)
    except GradingSecretError as exc:  # refused like a bad gradebook URL: never grade with a secret learners see
        raise SystemExit(f"nbgrader_config.py: {exc}") from None


c.GuardedExecute.secret_file = _secret_path(c.CourseDirectory.root, os.environ.get("GRADING_SECRET_FILE"))


# nbgrader's exchange is the course's (classroom/hub/exchange.py): collect takes a submission only from the learner it
# names and only that learner's own regular files (links, hard links, devices and others' files are refused and
# named), and every action first checks that no one but its owner can replace the exchange. The classes are found in
# this course's classroom/, after the installed packages; a folder holding only this file (a scratch course) has none.
_EXCHANGE = {"fetch_assignment": "CourseFetchAssignment", "fetch_feedback": "CourseFetchFeedback",
             "release_assignment": "CourseReleaseAssignment", "release_feedback": "CourseReleaseFeedback",
             "list": "CourseList", "submit": "CourseSubmit", "collect": "CourseCollect"}
if os.path.isfile(os.path.join(c.CourseDirectory.root, "classroom", "hub", "exchange.py")):
    if c.CourseDirectory.root not in sys.path:
        sys.path.append(c.CourseDirectory.root)
    for _action, _class in _EXCHANGE.items():
        setattr(c.ExchangeFactory, _action, f"classroom.hub.exchange.{_class}")


# On the course's hub, the instructor's copy of the course has hub.toml beside this file (make hub-users writes it):
# the exchange's folder, so that release and collect find it from any shell, not only from the hub's terminal.
def _hub_exchange(course_root):
    path = os.path.join(course_root, "hub.toml")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            exchange = tomllib.load(fh).get("exchange")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"nbgrader_config.py: {path} cannot be read ({exc}); make hub-users writes it") from None
    if not isinstance(exchange, str) or not os.path.isabs(exchange):
        raise SystemExit(f"nbgrader_config.py: {path}: exchange = {exchange!r} must be the exchange's absolute path")
    return exchange


_exchange = _hub_exchange(c.CourseDirectory.root)
if _exchange:
    c.Exchange.root = _exchange


# The grading fence hides where learners' work lies, wherever grading starts (the hub's terminal, ssh, su, cron,
# make grade): every account's home folder and nbgrader's exchange (the hub's, and nbgrader's default places). It is
# this file that says so, not a variable that only the hub's spawner sets.
def _learners_work(exchange):
    homes = {e.pw_dir for e in pwd.getpwall() if e.pw_uid >= 1000 and os.path.isdir(e.pw_dir)}
    outside = {h for h in homes if os.path.realpath(h) != "/" and not h.startswith("/home/")}
    exchanges = {"/usr/local/share/nbgrader/exchange", "/srv/nbgrader/exchange"} | ({exchange} if exchange else set())
    return sorted({"/home"} | outside | exchanges)


c.GuardedExecute.private_dirs = _learners_work(_exchange)
c.GuardedExecute.interrupt_on_timeout = True
c.GuardedExecute.raise_on_iopub_timeout = False
c.GuardedExecute.execute_retries = 0
# Late work: deadlines.toml in the course root (or the file DEADLINES names) gives the due dates, the
# extensions and the policy (classroom/late.py; deadlines.example.toml). `make grade` writes the dates into
# the gradebook; nbgrader compares each submission's timestamp.txt with them and CourseLatePolicy takes
# the points off. A broken file stops grading here, with the value and the rule named.
def _deadlines_file(course_root, value):
    value = (value or "").strip()
    return os.path.join(course_root, value or "deadlines.toml")


try:
    _deadlines = read_deadlines(Path(_deadlines_file(c.CourseDirectory.root, os.environ.get("DEADLINES"))))
except DeadlineError as exc:
    raise SystemExit(f"nbgrader_config.py: {exc}") from None
c.AssignLatePenalties.plugin_class = CourseLatePolicy
c.CourseLatePolicy.penalty = _deadlines.penalty
c.CourseLatePolicy.points_per_hour = _deadlines.points_per_hour

# Feedback shows each test's visible part and the diagnosis, never the hidden tests' code. It reads offline:
# its math is MathML (grader/mathml.py), and nbgrader's "feedback" template finds the course's mathjax macro
# (grader/templates/feedback: it loads nothing) before nbconvert's, which loads MathJax from a CDN. The
# template's name stays nbgrader's choice: "feedback" for feedback, "formgrade" for the formgrader's
# grading view, which reads this file too.
c.GenerateFeedback.preprocessors = [HideHiddenTests, MathAsMathML, GetGrades, CSSHTMLHeaderPreprocessor]
# Everything a learner wrote is the learner's: a page that shows it (the feedback, the LMS zip, the formgrader in
# the instructor's browser) keeps their text, math and figures but runs nothing of it, fetches nothing for it and
# goes nowhere (grader/pages.py states the rule). Every HTMLExporter built from this file (GenerateFeedback's, the
# formgrader's) reads a notebook through one preprocessor and renders it through one sanitizer: its markdown
# (nbgrader's templates render a markdown cell with markdown2html alone), raw cells, outputs, attachments and
# metadata. sanitize_html stays on: it keeps the templates' own script blocks (JavaScript outputs, widgets) out.
c.HTMLExporter.preprocessors = [ShownSafely]
c.HTMLExporter.filters = {"markdown2html": markdown2html, "clean_html": clean}
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(grader.__file__), "templates"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]
