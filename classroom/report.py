"""The report out: ``grades.csv`` and the table ``make grade`` prints.

``grades.csv`` lists every student and assignment with the score from the gradebook after any late penalty
(:data:`CSV_COLUMNS`), a status (graded, late by how long, no submission, not graded and whether an earlier
grade was kept) and a message column: why a submission was not graded (:class:`classroom.intake.Problem`) and what
a grader should know about one that was (:func:`notes_on`: a limit the kernel went over, links it left, a deleted
test cell, a dead kernel). The table shows every student's points per exercise.
"""

from __future__ import annotations

import math
from pathlib import Path

import nbformat

from classroom.gradebook import gradebook_url, score_after_penalty
from classroom.intake import Problem
from classroom.text_out import csv_dict_writer, shown

#: grades.csv: the score after any late penalty, the penalty, and the hours past the learner's due date
CSV_COLUMNS = ["student_id", "assignment", "score", "max_score", "late_penalty", "hours_late", "status", "message"]


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
    """Write ``out`` for ``assignments`` from the gradebook, with ``problems`` and ``notes`` in the message column;
    returns its rows, each with its learner's points per test cell (``cells``) for :func:`print_table`."""
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
                if found:  # an earlier grade stands where its autograded copy does (classroom.run.earlier_kept)
                    earlier = graded and (root / "autograded" / student / assignment).is_dir()
                    status = "not graded" + ("; earlier grade kept" if earlier else "")
                    score = score if earlier else 0.0
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
        writer = csv_dict_writer(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
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
    """Per assignment: one line per student, one column per exercise (its test cell's points). What a learner chose
    (a folder's name, a message quoting it) is printed with its control characters as escapes (:func:`shown`)."""
    for assignment in sorted({r["assignment"] for r in rows}):
        mine = [r for r in rows if r["assignment"] == assignment]
        cells = sorted({c for r in mine for c in r["cells"]})
        names = [shown(c.removeprefix("test_")) for c in cells]
        width = max([len("student")] + [len(shown(r["student_id"])) for r in mine])
        print(f"\n{assignment}")
        print(f"  {'student':<{width}}  " + "  ".join(f"{n:>{max(len(n), 5)}}" for n in names) + "   total  status")
        for r in mine:
            pts = [r["cells"].get(c) for c in cells]
            points = "  ".join(f"{('-' if p is None else f'{p:g}'):>{max(len(n), 5)}}" for p, n in zip(pts, names))
            note = f"  ({shown(r['message'], 600)})" if r["message"] else ""
            total = f"{r['score']:>3}/{r['max_score']:<3}"
            print(f"  {shown(r['student_id']):<{width}}  {points}   {total} {r['status']}{note}")
