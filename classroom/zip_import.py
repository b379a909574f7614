"""A learning-management system's export in: ``make grade SUBMISSIONS=export.zip`` unpacks it into ``submitted/``.

The layout: one folder per learner, ``<student>/<notebook>.ipynb`` or ``<student>/<assignment>/<notebook>.ipynb``,
under at most one common top folder. Each notebook goes to the assignment whose notebook has its name.

**Every entry is its own unit of failure.** An entry that breaks a rule is named (a :class:`~classroom.intake.Problem`
for its learner) and left out, and the rest of the zip is imported: a bomb, a name no folder can have, a broken
notebook, two copies of one notebook cost their own learner's entry, never a classmate's. What is bounded
(:class:`ZipBounds`), before a byte of an entry is kept:

- the zip as a whole: at most ``entries`` entries (more is not an export of a class: nothing is imported, and
  the message says so), at most ``total_bytes`` unpacked (entries past it are named and left out);
- each entry: its unpacked bytes read as a stream and stopped past the notebook bound (:data:`grader.bounds.NOTEBOOK`,
  whatever its header claims), and one that unpacks to more than ``ratio`` times its packed size while over 1 MiB
  is a bomb's, left out;
- each name: every folder and file name at most ``name_bytes`` bytes, the whole at most ``path_bytes``, no control
  character, no absolute path or ``..``; the learner's folder a learner's id (the whole name matched:
  :func:`classroom.intake.student_id_problem`);
- each learner's notebook once: where the zip holds two entries for one learner's notebook, the newer (by the
  zip's own time) is imported and the other named; two of the same time are both left out, named.

**Time is the export's, not the learner's.** A submission's time is the time the zip records for its notebook
(:func:`entry_time`); a ``timestamp.txt`` in the zip was written by whoever made the file, so it is ignored and
counted in the notes. An unchanged submission keeps its time. A notebook that cannot be graded never replaces a
learner's earlier submission.
"""

from __future__ import annotations

import datetime as dt
import struct
import unicodedata
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

from classroom.intake import (
    TIMESTAMP,
    Problem,
    expected_notebooks,
    notebook_problem,
    student_id_problem,
    write_submission_record,
)
from classroom.learner_files import write_file
from classroom.text_out import shown
from grader.bounds import NOTEBOOK


@dataclass(frozen=True)
class ZipBounds:
    """What one export zip may hold (see the module's text)."""

    entries: int = 50_000  # a class of 500 with 11 assignments of 9 files each fits
    total_bytes: int = 4 << 30  # unpacked, read
    ratio: int = 200  # unpacked over packed, for an entry over 1 MiB (a notebook packs about 3-10 times)
    name_bytes: int = 255  # one folder or file name, in UTF-8 (the file system's own limit)
    path_bytes: int = 1024


ZIP = ZipBounds()


@dataclass
class Imported:
    """What an import did: the entries it left out (:class:`~classroom.intake.Problem`, by learner) and what the
    instructor should know besides (``notes``: lines to print)."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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


def name_problem(name: str, bounds: ZipBounds = ZIP) -> str | None:
    """Why an entry's name is not one the course unpacks (None if it is)."""
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in name):
        return "its name holds a control character"
    path = PurePosixPath(name)
    if not path.parts:
        return "it has no name"
    if path.is_absolute() or ".." in path.parts or "\\" in name:
        return "unsafe path in the zip file"
    if len(name.encode("utf-8", "surrogatepass")) > bounds.path_bytes:
        return f"its path is longer than {bounds.path_bytes} bytes"
    if any(len(p.encode("utf-8", "surrogatepass")) > bounds.name_bytes for p in path.parts):
        return f"a folder or file name in its path is longer than {bounds.name_bytes} bytes"
    return None


def _top_folder(parts: list[tuple[str, ...]], assignments: list[str]) -> str | None:
    """The common top folder of an export, if it has one: every entry under one folder, and below it, among the
    entries two levels deep or more, several learners' folders or one that is not an assignment's name
    (``solo/02-attention/x.ipynb`` is learner ``solo``'s; ``export/02-attention/x.ipynb`` beside
    ``export/ann/x.ipynb`` is learner ``02-attention``'s). A stray file beside the learners' folders is left out on
    its own; it never changes whose folder is whose."""
    if not parts or not all(p[0] == parts[0][0] for p in parts):
        return None
    below = {p[1] for p in parts if len(p) > 2}
    if not below or (len(below) == 1 and below <= set(assignments)):
        return None
    return parts[0][0]


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """An entry's unpacked bytes, read as a stream and stopped at ``limit`` + 1 (its header's size is not trusted)."""
    with zf.open(info) as f:
        return f.read(limit + 1)


def import_zip(root: Path, archive: Path, assignments: list[str], zone: str = "UTC",
               bounds: ZipBounds = ZIP) -> Imported:
    """Unpack an LMS export into ``submitted/<student>/<assignment>/``; what was left out, and notes.

    Raises SystemExit (nothing imported) for a file that is not a zip or holds more than ``bounds.entries`` entries.
    """
    owner = {name: a for a in assignments for name in expected_notebooks(root, a)}
    done = Imported()
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise SystemExit(f"make grade: SUBMISSIONS={archive} is not a readable zip file ({shown(exc, 300)}); "
                         "nothing was imported") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > bounds.entries:
            raise SystemExit(f"make grade: SUBMISSIONS={archive} holds {len(infos)} entries, over the course's "
                             f"limit of {bounds.entries} for one export; nothing was imported")
        (root / "submitted").mkdir(exist_ok=True)
        entries = []
        for info in infos:
            # the name as the zip holds it: zipfile cuts a name at a NUL, which would lift the entry out of its folder
            why = name_problem(info.orig_filename, bounds) or name_problem(info.filename, bounds)
            if why:
                done.problems.append(Problem("?", "?", Path(shown(info.orig_filename, 200)), f"{why}: left out"))
                continue
            if info.is_dir() or "__MACOSX" in info.filename or PurePosixPath(info.filename).name.startswith("."):
                continue
            entries.append(info)
        parts = [PurePosixPath(i.filename).parts for i in entries]
        top = _top_folder(parts, assignments)
        wanted: dict[tuple[str, str, str], list[zipfile.ZipInfo]] = defaultdict(list)
        ignored_stamps = 0
        for info, p in zip(entries, parts):
            p = p[1:] if top else p
            if len(p) < 2:
                done.problems.append(Problem("?", "?", Path(info.filename), "not inside a student's folder: left out"))
                continue
            student, name = p[0], p[-1]
            kind = (info.external_attr >> 16) & 0o170000  # 0: a zip without Unix modes
            if kind not in (0, 0o100000):
                what = "a symbolic link" if kind == 0o120000 else "not a regular file"
                done.problems.append(Problem(student, "?", Path(info.filename), f"{what} in the zip file: left out"))
                continue
            if name == TIMESTAMP:
                ignored_stamps += 1
                continue
            assignment = owner.get(name)
            if assignment is None or (len(p) > 2 and p[-2] in assignments and p[-2] != assignment):
                done.problems.append(Problem(student, p[-2] if len(p) > 2 and p[-2] in assignments else "?",
                                             Path(info.filename),
                                             f"wrong file name {name!r}: no assignment has a notebook of that name "
                                             f"(known: {', '.join(sorted(owner))})"))
                continue
            why = student_id_problem(student)
            if why:
                done.problems.append(Problem(student, assignment, Path(info.filename), f"{why}: left out"))
                continue
            wanted[(student, assignment, name)].append(info)
        if ignored_stamps:
            done.notes.append(f"{ignored_stamps} timestamp.txt file(s) in the zip ignored: whoever made the file "
                              "wrote them; each submission's time is the time the zip records for its notebook")

        written: dict[tuple[str, str], dt.datetime] = {}  # (student, assignment) -> the newest notebook's time
        total = 0
        for (student, assignment, name), copies in sorted(wanted.items()):
            info = _newest(copies, zone)
            for other in copies:
                if other is not info:
                    why = ("the zip holds another copy of this learner's notebook, newer: that one was imported"
                           if info is not None else "the zip holds two copies of this learner's notebook with the "
                           "same time: neither was imported")
                    done.problems.append(Problem(student, assignment, Path(other.filename), why))
            if info is None:
                continue
            target = root / "submitted" / student / assignment / name
            try:
                if total > bounds.total_bytes:
                    raise _LeftOut(f"the zip unpacks to more than {bounds.total_bytes >> 30} GiB: the entries past "
                                   "it were left out")
                data = _read(zf, info, NOTEBOOK.bytes)
                total += len(data)
                if len(data) > (1 << 20) and info.compress_size and len(data) > bounds.ratio * info.compress_size:
                    raise _LeftOut(f"it unpacks to more than {bounds.ratio} times its packed size (a zip bomb's "
                                   "ratio): left out")
                why = notebook_problem(data)
                if why:
                    kept = "; the earlier submission was kept" if target.exists() else ""
                    raise _LeftOut(why + kept)
                when = entry_time(info, zone)
                same = target.is_file() and not target.is_symlink() and target.read_bytes() == data
                if not same:
                    write_file(root / "submitted", [student, assignment, name], data)
                if not same or not (target.parent / TIMESTAMP).exists():
                    written[(student, assignment)] = max(when, written.get((student, assignment), when))
            except _LeftOut as exc:
                done.problems.append(Problem(student, assignment, Path(info.filename), str(exc)))
            except OSError as exc:  # a folder that cannot be made, a link planted on the way: named, never followed
                done.problems.append(Problem(student, assignment, Path(info.filename),
                                             f"not imported: {shown(exc, 300)}"))
            except (ValueError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile) as exc:
                # a corrupt entry, an encrypted one, an unknown compression: this entry's problem alone
                done.problems.append(Problem(student, assignment, Path(info.filename),
                                             f"not imported ({type(exc).__name__}: {shown(exc, 200)})"))
    for (student, assignment), when in written.items():
        write_submission_record(root / "submitted" / student / assignment, when)
    return done


class _LeftOut(Exception):
    """An entry left out, the message saying why."""


def _newest(copies: list[zipfile.ZipInfo], zone: str) -> zipfile.ZipInfo | None:
    """The newest of an entry's copies by the zip's time; None when two share the newest time."""
    if len(copies) == 1:
        return copies[0]
    timed = sorted(copies, key=lambda i: entry_time(i, zone), reverse=True)
    return None if entry_time(timed[0], zone) == entry_time(timed[1], zone) else timed[0]
