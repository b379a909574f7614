"""Generate ``exercises/`` from ``solutions/``: nbgrader's ``generate_assignment`` for every assignment,
in one process (``make exercises``; ``tests/grading/test_exercises_sync.py`` proves the tree in sync).

nbgrader's command takes one assignment per run, and each run pays the start-up of nbgrader and the
grader's preprocessors again (about 8 s of CPU); here the start-up is paid once.

    python -m tools.exercises                      # every assignment, into exercises/
    python -m tools.exercises 02-attention --release-dir /tmp/release --db-url sqlite:////tmp/release/gb.db
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grader import registry

ROOT = Path(__file__).resolve().parents[1]


def generate(names: list[str], *, release_dir: Path | None = None, db_url: str | None = None,
             log_level: str = "WARN") -> None:
    """Run ``nbgrader generate_assignment NAME --force`` for each of ``names``, with the course's config."""
    from nbgrader.apps.generateassignmentapp import GenerateAssignmentApp

    known = sorted(registry.assignments())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"exercises: no assignment {', '.join(unknown)} under solutions/; known: {', '.join(known)}")
    # nbgrader runs alembic by name to open its gradebook: this interpreter's scripts come first on PATH
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    options = [f"--log-level={log_level}"]
    if release_dir is not None:
        options.append(f"--CourseDirectory.release_directory={release_dir}")
    if db_url is not None:
        options.append(f"--CourseDirectory.db_url={db_url}")
    cwd = Path.cwd()
    os.chdir(ROOT)  # nbgrader reads nbgrader_config.py and the course's folders from the working directory
    try:
        for name in names:
            app = GenerateAssignmentApp()
            app.initialize([name, "--force", *options])
            try:
                app.start()
            except SystemExit as stop:  # nbgrader logs why a conversion failed, then exits
                if stop.code:
                    raise SystemExit(f"exercises: nbgrader generate_assignment {name} failed (see above)") from None
    finally:
        os.chdir(cwd)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.exercises", description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment under solutions/")
    parser.add_argument("--release-dir", type=Path, help="where to write (default: exercises/)")
    parser.add_argument("--db-url", help="the gradebook that records the assignments (default: nbgrader_config.py's)")
    parser.add_argument("--log-level", default="WARN")
    args = parser.parse_args(argv)
    names = args.assignments or sorted(registry.assignments())
    generate(names, release_dir=args.release_dir, db_url=args.db_url, log_level=args.log_level)
    print(f"exercises: generated {', '.join(names)}" + (f" into {args.release_dir}" if args.release_dir else ""))


if __name__ == "__main__":
    main()
