"""`make grade`: autograde every submission under submitted/ and write grades.csv.

    python -m tools.grade [--root DIR] [--assignment ID ...] [--timeout SECONDS] [--zip FILE] [--jobs N]
                          [--student ID ...] [--scheduler tcp://HOST:8786]

With ``--zip`` (``make grade SUBMISSIONS=export.zip``), a learning-management
system's export is unpacked into ``submitted/`` first: one folder per student
(``<student>/<notebook>.ipynb`` or ``<student>/<assignment>/<notebook>.ipynb``,
under any common top folder). Each notebook goes to the assignment whose
notebook has its name; a file that matches none, a broken notebook or an
unsafe path is named and left out, and an earlier good submission is never
overwritten by a broken one. Each imported submission gets the ``timestamp.txt``
and ``submission_secret.txt`` nbgrader's collect writes (:func:`import_zip`).

For each assignment that has submissions (``submitted/<student>/<assignment>/``):

1. the gradebook learns (or re-learns) the assignment from ``solutions/``,
   with ``nbgrader generate_assignment`` writing its release to a scratch
   folder, so ``exercises/`` is never touched here;
2. every submitted notebook is read and validated *before* grading. A file
   that is not a valid notebook (broken JSON, say) is reported with the
   student's id and the file, and that student's submission is left alone:
   the file stays where it is and any earlier grade stays in the gradebook;
3. all other students are autograded, ``--jobs`` at a time, each by its own
   ``nbgrader autograde`` in the fenced kernel of
   :mod:`grader.autograde` (:class:`LocalGrading`), or with ``--scheduler``
   each as a task on a Dask cluster, recorded here (:mod:`tools.cluster`). A cell that runs past the per-cell
   timeout is interrupted and scores zero; a cell that kills the kernel scores
   zero and grading goes on; a deleted test cell scores zero and is named.
   Each learner's hidden cases are their own, drawn from the course's grading
   secret (:mod:`grader.secret`: ``grading-secret`` in the course folder, or
   the file ``GRADING_SECRET_FILE`` names; the first run creates it and says
   so); ``GRADING_SECRET_FILE=none`` grades on the registry's seeds;
4. ``grades.csv`` lists every student and assignment with the score from
   the gradebook, a status and a message column, and a table of every
   student's points per exercise is printed.

The exit status is 0 when every submission was graded, 1 when some could
not be (they are listed), and 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import getpass
import hashlib
import json
import math
import os
import re
import secrets
import stat
import struct
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import nbformat

from grader import warm
from grader.autograde import grading_secret_file
from grader.failures import printable
from grader.late import DeadlineError, Deadlines, read_deadlines
from grader.nbgrader_processes import THREAD_VARIABLES, NbgraderProcess, NbgraderProcesses
from grader.secret import GradingSecretError, read_or_create
from tools.gradebook import gradebook_url, score_after_penalty
from tools.learner_files import inspect as inspect_files
from tools.learner_files import write_file

if TYPE_CHECKING:
    from tools.cluster import ClusterGrading

#: grades.csv: the score after any late penalty, the penalty, and the hours past the learner's due date
CSV_COLUMNS = ["student_id", "assignment", "score", "max_score", "late_penalty", "hours_late", "status", "message"]
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


@dataclass
class Problem:
    student: str
    assignment: str
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"student '{self.student}', {self.path}: {self.reason}"


def nbgrader_executable() -> str:
    exe = Path(sys.executable).with_name("nbgrader")
    return str(exe) if exe.exists() else "nbgrader"


def nbgrader_command(*args: str, root: Path, timeout: int | None = None) -> list[str]:
    cmd = [nbgrader_executable(), *args, f"--CourseDirectory.root={root}"]
    if timeout is not None:
        cmd.append(f"--Execute.timeout={timeout}")
    return cmd


def kernel_threads(jobs: int) -> int:
    """Threads per grading kernel when ``jobs`` kernels run at once: the cores shared out, at least one.

    Each kernel's torch would otherwise start one thread per core, and with
    two kernels on two cores OpenMP's threads wait on each other: measured,
    grading 2 at a time took 8 to 13 s of kernel time per notebook instead of
    1.2 to 1.8 s.
    """
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def _env(threads: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")  # nbgrader calls alembic and jupyter by name
    if threads is not None:
        for name in THREAD_VARIABLES:
            env.setdefault(name, str(threads))  # an instructor's own setting wins
    return env


def check_notebook(path: Path) -> str | None:
    """Why ``path`` is not a gradable notebook, or None if it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); the file was left as it is"
    try:
        nb = nbformat.from_dict(raw)
        if nb.get("nbformat") != 4:
            return f"not an nbformat 4 notebook (nbformat={nb.get('nbformat')!r})"
        nbformat.validate(nb)
    except Exception as exc:  # nbformat.ValidationError and malformed structures
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"not a valid notebook ({first})"
    return None


def find_submissions(root: Path, assignment: str) -> dict[str, list[Path]]:
    base = root / "submitted"
    found: dict[str, list[Path]] = {}
    if not base.is_dir():
        return found
    for student_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        adir = student_dir / assignment
        if adir.is_dir():
            found[student_dir.name] = sorted(adir.glob("*.ipynb"))
    return found


def expected_notebooks(root: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (root / "solutions" / assignment).glob("*.ipynb"))


def check_submission(root: Path, student: str, assignment: str, notebooks: list[Path]) -> list[Problem]:
    """Why a student's submission of one assignment cannot be graded (empty if it can)."""
    folder = (root / "submitted" / student / assignment).relative_to(root)
    expected = expected_notebooks(root, assignment)
    if not STUDENT_ID.match(student):
        return [Problem(student, assignment, folder, "the student id must be letters, digits, '_', '.', '@' or '-' "
                        "(nbgrader cannot grade this folder name)")]
    refused = refused_files(root, student, assignment)
    if refused:
        return refused
    if not notebooks:
        return [Problem(student, assignment, folder, f"no notebook in the submission (expected {', '.join(expected)})")]
    problems = []
    for nb in notebooks:
        if nb.name not in expected:
            problems.append(Problem(student, assignment, nb.relative_to(root),
                                    f"wrong file name {nb.name!r}: the assignment's notebook is {', '.join(expected)}"))
        elif why := check_notebook(nb):
            problems.append(Problem(student, assignment, nb.relative_to(root), why))
    names = {nb.name for nb in notebooks}
    missing = [e for e in expected if e not in names]
    if missing and not problems:
        problems.append(Problem(student, assignment, folder, f"missing notebook(s): {', '.join(missing)}"))
    return problems


def refused_files(root: Path, student: str, assignment: str) -> list[Problem]:
    """What in submitted/<student>/<assignment> grading must not take (:mod:`tools.learner_files`): a link, a hard
    link, a device, a FIFO or a socket, or a file owned by someone other than the course's owner (whoever runs
    make grade, or owns submitted/) or the learner's own account. nbgrader's autograde would follow a link; the
    submission is not graded until what is named is removed."""
    import pwd

    base = root / "submitted"
    owners = {os.geteuid(), base.stat().st_uid}
    with contextlib.suppress(KeyError):
        owners.add(pwd.getpwnam(student).pw_uid)
    student_dir = base / student
    if student_dir.is_symlink():
        return [Problem(student, assignment, student_dir.relative_to(root),
                        f"a symbolic link (to {os.readlink(student_dir)}): refused, never followed; not graded")]
    found = inspect_files(student_dir / assignment, owners)
    return [Problem(student, assignment, Path(r.path).relative_to(root), f"{r.why}; not graded until it is removed")
            for r in found.refused]


#: the name of a submission's time beside its notebooks, as nbgrader's collect writes it
TIMESTAMP = "timestamp.txt"
#: the key nbgrader's release_feedback and fetch_feedback name a submission's feedback page by
SUBMISSION_SECRET = "submission_secret.txt"


def entry_time(info: zipfile.ZipInfo, zone: str = "UTC") -> dt.datetime:
    """When a zip entry's file was last written, in UTC, naive (as nbgrader stores times).

    The zip's own field has no zone: it is read in ``zone`` (deadlines.toml's ``timezone``). Where the zip
    also holds Info-ZIP's extended timestamp (extra field 0x5455, a Unix time), that exact time is used.
    """
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        body = extra[4:4 + size]
        if kind == 0x5455 and size >= 5 and body[0] & 1:
            (seconds,) = struct.unpack("<i", body[1:5])
            return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).replace(tzinfo=None)
        extra = extra[4 + size:]
    local = dt.datetime(*info.date_time, tzinfo=ZoneInfo(zone))
    return local.astimezone(dt.timezone.utc).replace(tzinfo=None)


def timestamp_text(when: dt.datetime) -> str:
    """A UTC time as nbgrader's collect writes it into timestamp.txt."""
    return f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"


def submitted_at(root: Path, student: str, assignment: str) -> dt.datetime | None:
    """A submission's time from its timestamp.txt (naive UTC, as autograde reads it); None if none can be read."""
    from nbgrader.utils import parse_utc

    stamp = root / "submitted" / student / assignment / TIMESTAMP
    try:
        text = (read_plain(stamp) or "").strip()
        return parse_utc(text) if text else None
    except ValueError:  # autograde names it; the time the gradebook has stays
        return None


def write_submission_record(folder: Path, when: dt.datetime) -> None:
    """What nbgrader's collect leaves beside an exchange submission, for one that came another way.

    ``timestamp.txt`` (UTC) dates it for the late policy; ``submission_secret.txt`` is the random key
    release_feedback names its feedback page by, so releasing feedback to a class never stops at a
    learner whose work came in a zip. An existing secret is kept.
    """
    write_file(folder.parent.parent, [folder.parent.name, folder.name, TIMESTAMP], timestamp_text(when).encode())
    submission_secret(folder)


def submission_secret(folder: Path) -> str:
    """The submission's secret in ``folder`` (release_feedback names its page by it), made there if missing.

    A learner's folder may hold a link in its name: it is replaced, never followed (reading it would put another
    file's contents where a secret belongs; writing through it would write outside the folder)."""
    path = folder / SUBMISSION_SECRET
    text = read_plain(path)
    if text is None:  # missing, or not a plain file (a link is replaced, never written through)
        text = secrets.token_hex(64)
        write_file(folder.parent.parent, [folder.parent.name, folder.name, SUBMISSION_SECRET], text.encode())
    return text


def read_plain(path: Path, limit: int = 1 << 16) -> str | None:
    """A plain file's text (at most ``limit`` bytes), read without following a link or waiting on a pipe; None if
    there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(limit).decode("utf-8", errors="replace")


def import_zip(root: Path, archive: Path, assignments: list[str], zone: str = "UTC") -> list[Problem]:
    """Unpack an LMS export into submitted/<student>/<assignment>/; returns what was left out.

    Each submission gets the time of its newest notebook in the zip (see :func:`entry_time`) or, where
    the student's folder holds one, nbgrader's own ``timestamp.txt``; an unchanged submission keeps its
    time. A time that cannot be read is named and the file's own time used.
    """
    from nbgrader.utils import parse_utc

    owner = {name: a for a in assignments for name in expected_notebooks(root, a)}
    problems: list[Problem] = []
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise SystemExit(f"make grade: SUBMISSIONS={archive} is not a readable zip file ({exc})") from None
    (root / "submitted").mkdir(exist_ok=True)
    written: dict[tuple[str, str], dt.datetime] = {}  # (student, assignment) -> the newest notebook's time
    stamps: dict[tuple[str, str | None], tuple[str, dt.datetime]] = {}  # timestamp.txt entries
    with zf:
        entries = [i for i in zf.infolist() if not i.is_dir() and "__MACOSX" not in i.filename
                   and not PurePosixPath(i.filename).name.startswith(".")]
        parts = [PurePosixPath(i.filename).parts for i in entries]
        top = parts[0][0] if parts and all(len(p) > 2 and p[0] == parts[0][0] for p in parts) else None
        for info, p in zip(entries, parts):
            if PurePosixPath(info.filename).is_absolute() or ".." in p:
                problems.append(Problem("?", "?", Path(info.filename), "unsafe path in the zip file: left out"))
                continue
            p = p[1:] if top else p
            if len(p) < 2:
                problems.append(Problem("?", "?", Path(info.filename), "not inside a student's folder: left out"))
                continue
            student, name = p[0], p[-1]
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0: a zip without Unix modes
            if kind not in (0, stat.S_IFREG):
                what = "a symbolic link" if kind == stat.S_IFLNK else "not a regular file"
                problems.append(Problem(student, "?", Path(info.filename), f"{what} in the zip file: left out"))
                continue
            if name == TIMESTAMP and (len(p) == 2 or (len(p) == 3 and p[1] in assignments)):
                text = zf.read(info).decode("utf-8", "replace").strip()
                try:
                    stamps[(student, p[1] if len(p) == 3 else None)] = (info.filename, parse_utc(text))
                except (ValueError, OverflowError):
                    problems.append(Problem(student, p[1] if len(p) == 3 else "?", Path(info.filename),
                                            f"timestamp {text[:40]!r} is not a date and time such as "
                                            "'2026-12-04 23:59:00 UTC': the file's time in the zip is used"))
                continue
            assignment = owner.get(name)
            if assignment is None or (len(p) > 2 and p[-2] in assignments and p[-2] != assignment):
                problems.append(Problem(student, p[-2] if len(p) > 2 else "?", Path(info.filename),
                                        f"wrong file name {name!r}: no assignment has a notebook of that name "
                                        f"(known: {', '.join(sorted(owner))})"))
                continue
            if not STUDENT_ID.match(student):
                problems.append(Problem(student, assignment, Path(info.filename),
                                        "the student folder must be named with letters, digits, '_', '.', '@' or '-'"))
                continue
            target = root / "submitted" / student / assignment / name
            data = zf.read(info)
            with tempfile.TemporaryDirectory() as scratch:
                probe = Path(scratch) / name
                probe.write_bytes(data)
                why = check_notebook(probe)
            if why:
                kept = "; the earlier submission was kept" if target.exists() else ""
                problems.append(Problem(student, assignment, Path(info.filename), why + kept))
                continue
            when = entry_time(info, zone)
            same = target.is_file() and not target.is_symlink() and target.read_bytes() == data
            if not same or not (target.parent / TIMESTAMP).exists():
                if not same:
                    try:
                        write_file(root / "submitted", [student, assignment, name], data)
                    except OSError as exc:
                        problems.append(Problem(student, assignment, Path(info.filename), f"not imported: {exc}"))
                        continue
                key = (student, assignment)
                written[key] = max(when, written.get(key, when))
    for (student, assignment), when in written.items():
        given = stamps.get((student, assignment)) or stamps.get((student, None))
        write_submission_record(root / "submitted" / student / assignment, given[1] if given else when)
    return problems


#: what make grade knows of the gradebook's copy of each assignment (next to the gradebook, git-ignored)
SYNC_RECORD = ".gradebook-sync.json"


def source_fingerprint(root: Path, assignment: str) -> str:
    """What the gradebook's copy of an assignment is made from: its source folder, the course's nbgrader
    configuration and nbgrader's version, hashed."""
    import nbgrader

    digest = hashlib.sha256(f"nbgrader {nbgrader.__version__}\0".encode())
    source = root / "solutions" / assignment
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update((root / "nbgrader_config.py").read_bytes())
    return digest.hexdigest()


def _gradebook_shape(gb, assignment: str) -> list | None:
    """The gradebook's copy of an assignment, as its notebooks and their graded cells' names and points."""
    from nbgrader.api import MissingEntry

    try:
        found = gb.find_assignment(assignment)
    except MissingEntry:
        return None
    return sorted([nb.name, sorted([cell.name, cell.max_score] for cell in nb.grade_cells)] for nb in found.notebooks)


def _generate_assignment(root: Path, assignment: str) -> None:
    """nbgrader's generate_assignment, in this process (its start-up was most of a sync's time): the course's
    notebooks, cells and points into the gradebook; the release it writes goes to a scratch folder."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        config.CourseDirectory.root = str(root)
        config.CourseDirectory.release_directory = scratch
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        res = api.generate_assignment(assignment, force=True, create=True)
    if not res["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{res.get('error', '')}"
                           f"{res.get('log', '')}")


def sync_gradebook(root: Path, assignment: str, deadlines: Deadlines) -> None:
    """Record the assignment's notebooks, cells and points in the gradebook, and its due date (or none).

    nbgrader's generate_assignment runs only when the gradebook's copy may be out of date: when the source, the
    configuration, nbgrader or the gradebook changed since make grade last ran it (:data:`SYNC_RECORD`), or
    the gradebook's notebooks, cells or points are not those it recorded then (a gradebook made afresh).
    """
    from nbgrader.api import Gradebook

    url = gradebook_url(root)
    fingerprint = source_fingerprint(root, assignment)
    where = hashlib.sha256(url.encode()).hexdigest()[:16]  # which gradebook, without its password
    record_path = root / SYNC_RECORD
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    known = record.get(assignment) if isinstance(record, dict) else None
    with Gradebook(url) as gb:
        shape = _gradebook_shape(gb, assignment)
    if not (isinstance(known, dict) and known.get("fingerprint") == fingerprint and known.get("gradebook") == where
            and shape is not None and known.get("shape") == shape):
        _generate_assignment(root, assignment)
        with Gradebook(url) as gb:
            shape = _gradebook_shape(gb, assignment)
        record = record if isinstance(record, dict) else {}
        record[assignment] = {"fingerprint": fingerprint, "gradebook": where, "shape": shape}
        scratch = record_path.with_name(f"{SYNC_RECORD}.{os.getpid()}")
        scratch.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        scratch.replace(record_path)
    with Gradebook(url) as gb:
        gb.update_or_create_assignment(assignment, duedate=deadlines.due.get(assignment))


def grant_extensions(root: Path, assignment: str, students: list[str], deadlines: Deadlines) -> None:
    """Each learner's extension into the gradebook as deadlines.toml gives it (none there: none in the gradebook)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        for student in students:
            extension = deadlines.extension(assignment, student) if assignment in deadlines.due else None
            if extension is None:
                try:
                    if gb.find_submission(assignment, student).extension is not None:
                        gb.grant_extension(assignment, student)  # no time given: the extension is removed
                except MissingEntry:
                    pass
                continue
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student)
            gb.grant_extension(assignment, student, minutes=extension.total_seconds() / 60)


def autograde_arguments(root: Path, assignment: str, students: list[str], everyone: list[str],
                        timeout: int | None) -> list[str]:
    """nbgrader's arguments to autograde some students' submissions in one run (``--force``: a resubmission
    replaces the earlier autograded copy); the rest of the class is excluded from the run."""
    args = ["autograde", assignment, "--force", "--log-level=INFO"]
    others = sorted(set(everyone) - set(students))
    if others:
        args.append(f"--CourseDirectory.student_id_exclude={','.join(others)}")
    args = nbgrader_command(*args, root=root, timeout=timeout)[1:]
    if timeout is not None:
        args.append(f"--GuardedExecute.timeout={timeout}")
    return args


def autograde(root: Path, assignment: str, students: list[str], everyone: list[str],
              timeout: int | None, threads: int | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Autograde some students' submissions as one ``nbgrader autograde`` command would
    (:func:`autograde_arguments`), in an nbgrader process of its own (:mod:`grader.nbgrader_processes`), which
    reports the learners it could not grade (``.failed``). ``env``: the process's environment (default: this
    one's)."""
    argv = autograde_arguments(root, assignment, students, everyone, timeout)
    process = NbgraderProcess(root, dict(_env(threads, base=env), COURSE_GRADING_OWN_THREADS=""))
    try:
        res = process.run(argv, {})
        if locked(res):  # SQLite and a parallel grader
            res = process.run(argv, {})
    finally:
        process.close()
    return res


def locked(res: subprocess.CompletedProcess) -> bool:
    """Whether a failed autograde met a SQLite gradebook another grader was writing (worth one more try)."""
    return res.returncode != 0 and "database is locked" in res.stdout + res.stderr


@dataclass
class LocalGrading:
    """Grading on this machine: ``jobs`` long-lived nbgrader processes (:mod:`grader.nbgrader_processes`), each
    grading one batch of learners at a time, nbgrader's start paid once per process for the whole run.
    :class:`tools.cluster.ClusterGrading` is the same interface on a Dask cluster."""

    root: Path
    jobs: int
    timeout: int | None = None
    _warm: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    _processes: NbgraderProcesses | None = field(default=None, repr=False)

    def open(self) -> None:
        """The nbgrader processes of this run share their warm processes (grader.warm): one per view of the
        machine and thread count, started by the first to need it, not one per nbgrader process."""
        self._warm.enter_context(warm.shared_warm_processes())
        self._processes = NbgraderProcesses(self.root, self.jobs, _env())
        self._warm.callback(self._processes.close)

    def warm_up(self) -> None:
        """Start the nbgrader processes now, where there is work for them: their imports overlap the gradebook's
        preparation (a run with nothing to grade starts none)."""
        self._processes.start()

    def close(self) -> None:
        self._warm.close()

    def describe(self) -> str:
        return f"graded {self.jobs} at a time"

    def grade(self, assignment: str, students: list[str], everyone: list[str]) -> list[tuple[str, str]]:
        """Autograde ``students`` (the rest of ``everyone`` excluded); returns (learner, why) for what failed."""
        batches = [students[i::self.jobs] for i in range(min(self.jobs, len(students)))]
        threads = {name: str(kernel_threads(len(batches))) for name in THREAD_VARIABLES}

        def grade_batch(batch: list[str]) -> subprocess.CompletedProcess:
            argv = autograde_arguments(self.root, assignment, batch, everyone, self.timeout)
            res = self._processes.run(argv, threads)
            return self._processes.run(argv, threads) if locked(res) else res

        failed = []
        with ThreadPoolExecutor(max_workers=max(1, len(batches))) as pool:
            for batch, res in zip(batches, pool.map(grade_batch, batches)):
                failed += [(s, "nbgrader could not grade it (see its log above)")
                           for s in failed_students(res, assignment, batch)]
                if res.returncode != 0:
                    print(printable(res.stdout + res.stderr), file=sys.stderr)
        return failed


def apply_late_policy(root: Path, assignment: str, students: list[str], deadlines: Deadlines) -> None:
    """Each graded submission's late penalty as deadlines.toml gives it now, without grading it again.

    Autograde assigns the penalty as it grades (nbgrader's AssignLatePenalties with
    :class:`grader.late.CourseLatePolicy`); this applies a due date, an extension or a policy changed since,
    so the gradebook always follows the file; and the submission's time from its timestamp.txt.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        for student in students:
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            when = submitted_at(root, student, assignment)
            if when is not None:
                sub.timestamp = when
            gb.db.flush()
            late_s = sub.total_seconds_late
            for nb in sub.notebooks:
                nb.late_submission_penalty = deadlines.penalty_for(nb.score, late_s) or None
        gb.db.commit()


def failed_students(res: subprocess.CompletedProcess, assignment: str, students: list[str]) -> list[str]:
    """The learners of a batch nbgrader could not grade, as its process reported them (``res.failed``, never read
    from its log's text); every learner of the batch when the process died or named none."""
    if res.returncode == 0:
        return []
    named = {student for a, student in (getattr(res, "failed", None) or []) if a == assignment}
    return sorted(named & set(students)) if named else list(students)


def needs_grading(root: Path, assignment: str, student: str) -> bool:
    """True unless the autograded copy is newer than every submitted notebook (re-running is then a no-op)."""
    done = sorted((root / "autograded" / student / assignment).glob("*.ipynb"))
    sent = sorted((root / "submitted" / student / assignment).glob("*.ipynb"))
    if not done or {p.name for p in done} != {p.name for p in sent}:
        return True
    return max(p.stat().st_mtime for p in sent) > min(p.stat().st_mtime for p in done)


def notes_on(root: Path, assignment: str, student: str) -> list[str]:
    """What a grader should know about an autograded submission: what grading noted (a limit the kernel went over,
    links it left, files not given to it), deleted test cells, a dead kernel."""
    from grader.autograde import DELETED_MARK, KERNEL_DIED, read_notes
    from grader.notebook import grade_id

    notes = []
    for path in sorted((root / "autograded" / student / assignment).glob("*.ipynb")):
        notes += read_notes(str(path.parent), path.stem)
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            gid = grade_id(cell)
            text = cell.source + "".join(str(o.get("ename", "")) for o in cell.get("outputs", []))
            if DELETED_MARK in cell.source:
                notes.append(f"test cell {gid} was deleted (scored zero)")
            elif KERNEL_DIED in text:
                notes.append(f"the kernel died in cell {gid or '(ungraded)'} (scored zero)")
    return notes


def write_csv(root: Path, out: Path, assignments: list[str], problems: list[Problem],
              notes: dict[tuple[str, str], list[str]] | None = None) -> list[dict]:
    from nbgrader.api import Gradebook, MissingEntry

    bad: dict[tuple[str, str], list[Problem]] = {}
    for p in problems:
        bad.setdefault((p.student, p.assignment), []).append(p)
    notes = notes or {}
    rows = []
    with Gradebook(gradebook_url(root)) as gb:
        students = sorted(s.id for s in gb.students)
        for assignment in assignments:
            try:
                max_score = gb.find_assignment(assignment).max_score
            except MissingEntry:
                continue
            for student in sorted(set(students) | {p.student for p in problems if p.assignment == assignment}):
                per_cell = {}
                penalty, late_s = 0.0, 0.0
                try:
                    sub = gb.find_submission(assignment, student)
                    graded = bool(sub.notebooks)
                    penalty, late_s = sub.late_submission_penalty or 0.0, sub.total_seconds_late
                    score = score_after_penalty(sub)
                    for nb in sub.notebooks:
                        per_cell.update({g.name: g.score for g in nb.grades})
                except MissingEntry:
                    score, graded = 0.0, False
                status = "graded" if graded else "no submission"
                if graded and late_s > 0:
                    status += f", late by {late_text(late_s)}"
                found = bad.get((student, assignment), [])
                if found:
                    status = "not graded" + ("; earlier grade kept" if graded else "")
                messages = [p.reason for p in found] + notes.get((student, assignment), [])
                rows.append({
                    "student_id": student,
                    "assignment": assignment,
                    "score": f"{score:g}",
                    "max_score": f"{max_score:g}",
                    "late_penalty": f"{penalty:g}",
                    "hours_late": f"{late_s / 3600:.2f}",
                    "status": status,
                    "message": "; ".join(messages),
                    "cells": per_cell,
                })
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def late_text(seconds: float) -> str:
    """'2 d 3 h 5 min', '3 h 5 min', '12 min': a time late as an instructor reads it (minutes rounded up)."""
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts)


def print_table(rows: list[dict]) -> None:
    """Per assignment: one line per student, one column per exercise (its test cell's points)."""
    for assignment in sorted({r["assignment"] for r in rows}):
        mine = [r for r in rows if r["assignment"] == assignment]
        cells = sorted({c for r in mine for c in r["cells"]})
        names = [c.removeprefix("test_") for c in cells]
        width = max([len("student")] + [len(r["student_id"]) for r in mine])
        print(f"\n{assignment}")
        print(f"  {'student':<{width}}  " + "  ".join(f"{n:>{max(len(n), 5)}}" for n in names) + "   total  status")
        for r in mine:
            pts = [r["cells"].get(c) for c in cells]
            shown = "  ".join(f"{('-' if p is None else f'{p:g}'):>{max(len(n), 5)}}" for p, n in zip(pts, names))
            note = f"  ({r['message']})" if r["message"] else ""
            print(f"  {r['student_id']:<{width}}  {shown}   {r['score']:>3}/{r['max_score']:<3} {r['status']}{note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="grade only this assignment (repeatable)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--csv", type=Path, default=None, help="output file (default: ROOT/grades.csv)")
    parser.add_argument("--zip", type=Path, default=None, help="a zip export of submissions, one folder per student")
    parser.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: CPU count)")
    parser.add_argument("--scheduler", default=None, help="grade on this Dask cluster, tcp://HOST:8786 "
                                                             "(make grade SCHEDULER=...; tools/cluster.py)")
    parser.add_argument("--student", action="append", help="regrade only this learner, whether or not the "
                                                            "submission changed (repeatable; make grade STUDENT=id)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    solutions = root / "solutions"
    sources = sorted(p.name for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
    if not sources:
        print(f"make grade: no assignments under {root / 'solutions'}", file=sys.stderr)
        return 2
    if args.assignment:
        unknown = sorted(set(args.assignment) - set(sources))
        if unknown:
            print(f"make grade: unknown assignment(s) {unknown}; known: {sources}", file=sys.stderr)
            return 2
        sources = [a for a in sources if a in args.assignment]
    if args.timeout is not None and args.timeout <= 0:
        print(f"make grade: --timeout must be a positive number of seconds, got {args.timeout}", file=sys.stderr)
        return 2
    deadlines_path = root / (os.environ.get("DEADLINES", "").strip() or "deadlines.toml")
    try:
        deadlines = read_deadlines(deadlines_path, sorted(p.name for p in solutions.iterdir() if p.is_dir()))
    except DeadlineError as exc:
        print(f"make grade: {exc}; nothing was graded", file=sys.stderr)
        return 2
    jobs = args.jobs if args.jobs is not None else max(1, min(4, os.cpu_count() or 1))
    if jobs <= 0:
        print(f"make grade: --jobs must be a positive number of submissions, got {jobs}", file=sys.stderr)
        return 2

    try:  # cases per learner: the secret is made once here, before the graders start, and read by each of them
        secret_file = grading_secret_file(str(root), os.environ.get("GRADING_SECRET_FILE"))
        created = bool(secret_file) and read_or_create(secret_file)[1]
    except (GradingSecretError, OSError) as exc:
        print(f"make grade: {exc}; nothing was graded", file=sys.stderr)
        return 2
    if created:
        print(f"make grade: created the grading secret {secret_file}: each learner's hidden cases are drawn "
              "from it. Back it up with the gradebook: a regrade with another secret draws other cases.")
    elif not secret_file:
        print("make grade: GRADING_SECRET_FILE=none: the hidden cases are the registry's, which every learner "
              "can draw from the repository")
    if os.geteuid() != 0:
        print(f"make grade: grading as {getpass.getuser()}, not root: each kernel has namespaces, a view and "
              "limits of its own, but runs as this user and in no control group of its own (its memory limit "
              "does not count its files in /tmp); grade as root (sudo make grade) for a user and control groups "
              "per kernel")

    problems: list[Problem] = []
    if args.zip is not None:
        if not args.zip.is_file():
            print(f"make grade: SUBMISSIONS={args.zip} does not exist or is not a file", file=sys.stderr)
            return 2
        problems += import_zip(root, args.zip.resolve(), sources, deadlines.timezone)
    if args.student:  # one learner's regrade (after a zip's import): every named learner has a submission
        have = {student for a in sources for student in find_submissions(root, a)}
        unknown = sorted(set(args.student) - have)
        if unknown:
            print(f"make grade: STUDENT={','.join(unknown)} has no submission under {root / 'submitted'} for "
                  f"{', '.join(sources)}; learners with one: {', '.join(sorted(have)) or 'none'}; nothing was graded",
                  file=sys.stderr)
            return 2

    if args.scheduler:
        from tools.cluster import ClusterGrading, ClusterUnavailable

        secret = Path(secret_file).read_bytes() if secret_file else None
        grading = ClusterGrading(root, args.scheduler, args.timeout, secret)
        try:
            grading.open()
        except ClusterUnavailable as exc:
            print(f"make grade: {exc}", file=sys.stderr)
            return 2
    else:
        grading = LocalGrading(root, jobs, args.timeout)
        grading.open()
    try:
        return grade_class(root, args, sources, deadlines, grading, problems)
    finally:
        grading.close()


def grade_class(root: Path, args: argparse.Namespace, sources: list[str], deadlines: Deadlines,
                grading: LocalGrading | ClusterGrading, problems: list[Problem]) -> int:
    """Grade every assignment's new or changed submissions with ``grading``, then write grades.csv."""
    graded: list[str] = []
    notes: dict[tuple[str, str], list[str]] = {}
    if args.student or any(needs_grading(root, a, s) for a in sources for s in find_submissions(root, a)):
        grading.warm_up()
    for assignment in sources:
        submissions = find_submissions(root, assignment)
        if not submissions:
            continue
        graded.append(assignment)
        sync_gradebook(root, assignment, deadlines)
        todo = []
        for student, notebooks in submissions.items():
            found = check_submission(root, student, assignment, notebooks)
            problems.extend(found)
            if not found:
                todo.append(student)
        if args.student:
            fresh = [s for s in todo if s in args.student]
            print(f"{assignment}: regrading {', '.join(fresh) or 'nobody'} ({len(fresh)} of {len(submissions)} "
                  "submission(s))")
        else:
            fresh = [s for s in todo if needs_grading(root, assignment, s)]
            print(f"{assignment}: {len(todo)} of {len(submissions)} submission(s) gradable, "
                  f"{len(fresh)} new or changed, {grading.describe()}")
        grant_extensions(root, assignment, todo, deadlines)

        for student, why in grading.grade(assignment, fresh, list(submissions)):
            problems.append(Problem(student, assignment, Path("submitted") / student / assignment, why))
        apply_late_policy(root, assignment, todo, deadlines)
        for student in todo:
            found_notes = notes_on(root, assignment, student)
            if found_notes:
                notes[(student, assignment)] = found_notes

    if not graded and not problems:
        print(f"make grade: no submissions under {root / 'submitted'} "
              f"(expected submitted/<student>/<assignment>/*.ipynb for an assignment in {sources}); nothing to grade")
        return 0
    out = args.csv or root / "grades.csv"
    rows = write_csv(root, out, graded, problems, notes) if graded else []
    print_table(rows)
    print(f"\nwrote {out} ({len(rows)} rows)")
    for (student, assignment), found_notes in sorted(notes.items()):
        print(f"  note: student '{student}', {assignment}: {'; '.join(found_notes)}")
    # grades.csv keeps every learner's status; a regrade of some learners reports and fails on theirs alone
    problems = [p for p in problems if not args.student or p.student in args.student]
    if problems:
        print(f"\n{len(problems)} submission(s) could not be graded:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
