"""The gradebook: which one a course directory uses, and keeping its copy of each assignment in step.

**Which.** The one nbgrader itself will open.

``nbgrader_config.py`` decides it (nbgrader's SQLite file ``gradebook.db`` in
the course root, or the database that the environment variable
``GRADEBOOK_URL`` names, a PostgreSQL server for instance). Tools that read the
gradebook next to nbgrader (``make grade``'s grades.csv) ask here, so that
they read exactly what nbgrader wrote, never a stray SQLite file beside it.

**In step.** Before grading an assignment, ``make grade`` records its notebooks, cells and points in the
gradebook and its due date (:func:`sync_gradebook`), with nbgrader's ``generate_assignment`` writing its release to
a scratch folder, so ``exercises/`` is never touched; it runs only when the gradebook's copy may be out of date.

    python -m classroom.gradebook [--root DIR]    # prints the URL, password masked
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

CONFIG_FILE = "nbgrader_config.py"


def gradebook_url(root: Path) -> str:
    """The database URL nbgrader uses for the course in ``root``.

    ``root``'s nbgrader_config.py is loaded as nbgrader loads it (it reads
    GRADEBOOK_URL and exits with a message naming a URL it refuses); without
    that file it is nbgrader's own default, ``sqlite:///<root>/gradebook.db``.
    """
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root).resolve()
    config = Config()
    if (root / CONFIG_FILE).is_file():
        config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
    # The root given here wins over the config file's, as --CourseDirectory.root does for nbgrader.
    return CourseDirectory(config=config, root=str(root)).db_url


def score_after_penalty(submission) -> float:
    """A submitted assignment's points less its late penalty (nbgrader keeps the two apart; classroom/late.py)."""
    return submission.score - (submission.late_submission_penalty or 0.0)


def masked(url: str) -> str:
    """``url`` with its password, if any, replaced by ***."""
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", url)


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


def sync_gradebook(root: Path, assignment: str, due: dt.datetime | None = None) -> None:
    """Record the assignment's notebooks, cells and points in the gradebook, and its due date ``due`` (naive UTC,
    as deadlines.toml gives it: :class:`classroom.late.Deadlines`), or none.

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
        gb.update_or_create_assignment(assignment, duedate=due)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m classroom.gradebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    args = parser.parse_args(argv)
    print(masked(gradebook_url(args.root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
