"""Submissions in: where a learner's work is found, whether it can be graded, and how a zip becomes folders.

A submission is ``submitted/<student>/<assignment>/<notebook>.ipynb``, put there by nbgrader's collect on the hub
(:mod:`classroom.hub.exchange`), copied in by hand, or unpacked from a learning-management system's export
(:mod:`classroom.zip_import`, ``make grade SUBMISSIONS=export.zip``), which gives each the ``timestamp.txt`` and
``submission_secret.txt`` nbgrader's collect writes (:func:`write_submission_record`).

Every submitted notebook is read and validated *before* grading (:func:`check_submission`): a learner's id that is
not one (:func:`student_id_problem`), a file over the course's bounds (:mod:`grader.bounds`: read as bytes, never
followed, before anything parses it), a file that is not a valid notebook, a wrong name, a link or a file someone
else owns (:mod:`classroom.learner_files`) is a :class:`Problem` naming the student and the file, and that
submission is left alone, its earlier grade kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import secrets
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat

from classroom.learner_files import inspect as inspect_files
from classroom.learner_files import write_file
from classroom.text_out import shown
from grader.bounds import NOTEBOOK, Refused, read_notebook
from grader.failures import printable

#: a learner's id, as nbgrader can grade a folder of that name (the whole name: ``fullmatch``, never ``match``,
#: whose ``$`` would let a final line feed through); at most :data:`STUDENT_ID_LENGTH` characters
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
STUDENT_ID_LENGTH = 64


def student_id_problem(name: str) -> str | None:
    """Why a folder's name cannot be a learner's id (None if it can)."""
    if len(name) > STUDENT_ID_LENGTH:
        return f"a learner's id is at most {STUDENT_ID_LENGTH} characters (this one has {len(name)})"
    if not STUDENT_ID.fullmatch(name):
        return ("a learner's id must be letters, digits, '_', '.', '@' or '-', starting with a letter or digit "
                "(nbgrader cannot grade this folder name)")
    return None


@dataclass
class Problem:
    """Why one learner's submission (or one file of it) is not graded."""

    student: str
    assignment: str
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"student '{shown(self.student)}', {shown(self.path, 200)}: {shown(self.reason, 600)}"


def check_notebook(path: Path) -> str | None:
    """Why ``path`` is not a gradable notebook, or None if it is: read without following a link, within the course's
    bounds on a notebook (:mod:`grader.bounds`: size, depth, cells, source) before it is parsed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "not a plain file"
        data = f.read(NOTEBOOK.bytes + 1)
    return notebook_problem(data)


def notebook_problem(data: bytes) -> str | None:
    """Why the bytes ``data`` are not a gradable notebook, or None if they are."""
    try:
        raw = read_notebook(data)
    except Refused as exc:
        return str(exc)
    try:
        nb = nbformat.from_dict(raw)
        if nb.get("nbformat") != 4:
            return f"not an nbformat 4 notebook (nbformat={nb.get('nbformat')!r})"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat's own notes (duplicate cell ids, which it mends)
            nbformat.validate(nb)
    except Exception as exc:  # nbformat.ValidationError and malformed structures
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        return f"not a valid notebook ({printable(first)})"
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
    why = student_id_problem(student)
    if why:
        return [Problem(student, assignment, folder, why)]
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
    """What in submitted/<student>/<assignment> grading must not take (:mod:`classroom.learner_files`): a link, a hard
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


def needs_grading(root: Path, assignment: str, student: str) -> bool:
    """True unless the autograded copy is newer than every submitted notebook (re-running is then a no-op)."""
    done = sorted((root / "autograded" / student / assignment).glob("*.ipynb"))
    sent = sorted((root / "submitted" / student / assignment).glob("*.ipynb"))
    if not done or {p.name for p in done} != {p.name for p in sent}:
        return True
    return max(p.stat().st_mtime for p in sent) > min(p.stat().st_mtime for p in done)


#: the name of a submission's time beside its notebooks, as nbgrader's collect writes it
TIMESTAMP = "timestamp.txt"
#: the key nbgrader's release_feedback and fetch_feedback name a submission's feedback page by
SUBMISSION_SECRET = "submission_secret.txt"


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
