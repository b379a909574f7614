"""Submissions in: where a learner's work is found, whether it can be graded, and how a zip becomes folders.

A submission is ``submitted/<student>/<assignment>/<notebook>.ipynb``, put there by nbgrader's collect on the hub
(:mod:`classroom.hub.exchange`), copied in by hand, or unpacked from a learning-management system's export by
:func:`import_zip` (``make grade SUBMISSIONS=export.zip``): one folder per student, ``<student>/<notebook>.ipynb``
or ``<student>/<assignment>/<notebook>.ipynb``, under any common top folder. Each notebook goes to the assignment
whose notebook has its name; a file that matches none, a broken notebook or an unsafe path is named and left out,
and an earlier good submission is never overwritten by a broken one. Each imported submission gets the
``timestamp.txt`` and ``submission_secret.txt`` nbgrader's collect writes.

Every submitted notebook is read and validated *before* grading (:func:`check_submission`): a file that is not a
valid notebook, a wrong name, a link or a file someone else owns (:mod:`classroom.learner_files`) is a
:class:`Problem` naming the student and the file, and that submission is left alone, its earlier grade kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import secrets
import stat
import struct
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

import nbformat

from classroom.learner_files import inspect as inspect_files
from classroom.learner_files import write_file

#: a learner's id, as nbgrader can grade a folder of that name
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


@dataclass
class Problem:
    """Why one learner's submission (or one file of it) is not graded."""

    student: str
    assignment: str
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"student '{self.student}', {self.path}: {self.reason}"


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
