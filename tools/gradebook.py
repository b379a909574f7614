"""Which gradebook a course directory uses: the one nbgrader itself will open.

``nbgrader_config.py`` decides it (nbgrader's SQLite file ``gradebook.db`` in
the course root, or the database that the environment variable
``GRADEBOOK_URL`` names, a PostgreSQL server for instance). Tools that read the
gradebook next to nbgrader (``make grade``'s grades.csv) ask here, so that
they read exactly what nbgrader wrote, never a stray SQLite file beside it.

    python -m tools.gradebook [--root DIR]    # prints the URL, password masked
"""

from __future__ import annotations

import argparse
import re
import sys
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
    """A submitted assignment's points less its late penalty (nbgrader keeps the two apart; grader/late.py)."""
    return submission.score - (submission.late_submission_penalty or 0.0)


def masked(url: str) -> str:
    """``url`` with its password, if any, replaced by ***."""
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gradebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    args = parser.parse_args(argv)
    print(masked(gradebook_url(args.root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
