"""`make feedback`: nbgrader's HTML feedback for every autograded submission.

    python -m tools.feedback [--root DIR] [--assignment ID ...]

The feedback shows each test's visible part and its result; the hidden tests'
code is removed and an error is cut to its last line, the diagnosis (see
``HideHiddenTests`` in :mod:`grader.autograde`, wired in
``nbgrader_config.py``). Files land in ``feedback/<student>/<assignment>/``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tools.grade import _env, nbgrader_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make feedback", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    base = root / "autograded"
    done = sorted({p.name for p in base.glob("*/*") if p.is_dir()}) if base.is_dir() else []
    if args.assignment:
        unknown = sorted(set(args.assignment) - set(done))
        if unknown:
            print(f"make feedback: nothing autograded for {unknown}; autograded: {done}", file=sys.stderr)
            return 2
        done = [a for a in done if a in args.assignment]
    if not done:
        print("make feedback: nothing autograded yet (run `make grade` first)")
        return 0
    status = 0
    for assignment in done:
        command = nbgrader_command("generate_feedback", assignment, "--force", "--log-level=ERROR", root=root)
        res = subprocess.run(command, cwd=root, env=_env(), capture_output=True, text=True)
        if res.returncode != 0:
            print(f"make feedback: {assignment} failed:\n{res.stdout}{res.stderr}", file=sys.stderr)
            status = 1
        else:
            n = len(list((root / "feedback").glob(f"*/{assignment}/*.html")))
            print(f"{assignment}: feedback for {n} notebook(s) in {root / 'feedback'}/<student>/{assignment}/")
    return status


if __name__ == "__main__":
    sys.exit(main())
