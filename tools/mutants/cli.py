"""`make mutants`: mutation testing of the assignments' tests.

    python -m tools.mutants [--assignment SLUG ...] [--exercise NAME ...] [--jobs N]
                            [--max-per-exercise N] [--timeout SECONDS] [--report PATH]

Prints a table per assignment, lists every survivor with its line diff,
writes a JSON report (``--report``, by default ``_build/mutants/report.json``)
and exits with status 1 when an assignment's kill rate is below the target
(95 %), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader.registry import assignments

from .report import format_report
from .run import ROOT, run

DEFAULT_REPORT = ROOT / "_build" / "mutants" / "report.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", action="append", help="an assignment slug (repeatable; default: all)")
    parser.add_argument("--exercise", action="append",
                        help="only this exercise (a solution cell's grade_id; repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes (default: the CPU count)")
    parser.add_argument("--max-per-exercise", type=int, default=None, help="at most this many mutants per exercise")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per mutant before it counts as killed")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="where to write the JSON report")
    args = parser.parse_args(argv)
    registry = assignments()
    known = sorted(registry)
    chosen = args.assignment or known
    unknown = [a for a in chosen if a not in known]
    if unknown:
        print(f"unknown assignment(s): {unknown}; known: {known}", file=sys.stderr)
        return 2
    if args.jobs < 1 or (args.max_per_exercise is not None and args.max_per_exercise < 0):
        print("--jobs must be at least 1 and --max-per-exercise not negative", file=sys.stderr)
        return 2
    report = run([registry[a] for a in chosen], args.exercise, args.jobs, args.max_per_exercise, args.timeout)
    if args.exercise and not report["assignments"]:
        print(f"no exercise named {args.exercise} in {chosen}", file=sys.stderr)
        return 2
    print(format_report(report))
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"report: {args.report}")
    return 0 if report["ok"] else 1
