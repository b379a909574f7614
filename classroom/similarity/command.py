"""``make similarity``: the command, its arguments and what it writes.

    python -m classroom.similarity [--root DIR] [--assignment SLUG ...] [--threshold F] [--out DIR]

For each assignment (every one with submissions when none is named) it writes ``<out>/<slug>.html``,
``<out>/<slug>.csv`` (the pairs) and ``<out>/<slug>-groups.csv`` (the groups' members) (default
``ROOT/similarity``) and prints one line: the pairs of learners flagged, the groups, and, apart, the learners
flagged against the reference (their code matches the book's). It opens nothing else for writing, never
through a link, and never inside ``submitted/``. What it prints of a learner's name goes through
:func:`classroom.text_out.shown`.
The exit status is 0, 1 when a submission was skipped, and 2 on a usage error.
Nothing here reads or writes the gradebook.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from classroom.similarity import page, table
from classroom.similarity.calibrate import THRESHOLD, Pair, calibrate, is_flagged, ranked
from classroom.similarity.compare import compare_class
from classroom.similarity.forms import class_forms
from classroom.similarity.groups import Group, find_groups
from classroom.similarity.reading import ClassCode, SimilarityError, is_real_folder, read_class
from classroom.text_out import shown


def write(path: Path, text: str) -> None:
    """Write a report file, never through a link already at its place."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        reason = "a link; a report is never written through one: remove it" if os.path.islink(path) else exc.strerror
        raise SimilarityError(f"cannot write {path}: {reason}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def report(root: Path, slug: str, out_dir: Path,
           threshold: float) -> tuple[ClassCode, list[Pair], list[Group], Path]:
    """Compare one assignment's class and write its page and CSVs; the page's path."""
    cls = read_class(root, slug)
    matrices = compare_class(cls)
    forms = class_forms(matrices)
    pairs = ranked(calibrate(matrices, forms), threshold)
    groups = find_groups(pairs, matrices[0].learners if matrices else [], forms, threshold)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{slug}.html"
    write(path, page.render(cls, matrices, pairs, groups, threshold))
    write(out_dir / f"{slug}.csv", table.render(pairs, cls.exercises, threshold))
    write(out_dir / f"{slug}-groups.csv", table.render_groups(groups, cls.exercises))
    return cls, pairs, groups, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make similarity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="compare this assignment (repeatable; default: "
                                                              "every assignment with submissions)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"flag pairs whose score reaches this (above 0; default {THRESHOLD})")
    parser.add_argument("--out", type=Path, default=None, help="folder of the reports (default: ROOT/similarity)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    out_dir = (args.out if args.out is not None else root / "similarity").resolve()
    try:
        if not args.threshold > 0 or args.threshold != args.threshold or args.threshold == float("inf"):
            raise SimilarityError(f"--threshold must be a number above 0 (a score, as the report shows it), "
                                  f"got {args.threshold}")
        if out_dir.is_relative_to((root / "submitted").resolve()) or out_dir.is_relative_to(root / "submitted"):
            raise SimilarityError(f"--out {out_dir} is inside the learners' submitted/ folder; write the report "
                                  "elsewhere (default: ROOT/similarity)")
        slugs = args.assignment
        if not slugs:
            folder = root / "submitted"
            slugs = sorted({a.name for s in folder.iterdir() if is_real_folder(s) for a in s.iterdir()
                            if is_real_folder(a)}) if is_real_folder(folder) else []
            if not slugs:
                raise SimilarityError(f"no submissions under {folder}: a submission is "
                                      "submitted/<student>/<assignment>/<notebook>.ipynb")
        skipped = False
        for slug in slugs:
            cls, pairs, groups, path = report(root, slug, out_dir, args.threshold)
            learners = [p for p in pairs if not p.reference]
            flagged = sum(is_flagged(p, args.threshold) for p in learners)
            book = sum(is_flagged(p, args.threshold) for p in pairs if p.reference)
            for s in cls.skipped:
                print(f"make similarity: skipped {shown(s, limit=1000)}", file=sys.stderr)
            skipped = skipped or bool(cls.skipped)
            print(f"{slug}: {len(cls.learners)} submissions, {flagged} of {len(learners)} pairs of learners flagged "
                  f"(threshold {args.threshold:g}), {len(groups)} group{'' if len(groups) == 1 else 's'}, "
                  f"{book} of {len(cls.learners)} matching the book's code; "
                  f"report: {path}, {path.with_suffix('.csv').name} and {slug}-groups.csv")
    except SimilarityError as exc:
        print(f"make similarity: {exc}", file=sys.stderr)
        return 2
    return 1 if skipped else 0
