"""A mutation run: the registry's exercises found in their notebooks, their mutants made, run and scored.

For every exercise of an assignment of the registry (:mod:`grader.registry`),
the solution cell of the assignment's notebook under ``solutions/`` is
mutated (:mod:`tools.mutants.mutate`); the reference runs first (it must
pass), then every mutant that is not listed as equivalent, in worker
processes (:mod:`tools.mutants.workers`). A mutant is *killed* when the
exercise's test cell fails (or it runs past the time limit); otherwise it
*survives*.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from grader.notebook import read_cells
from grader.registry import Assignment

from .equivalents import Equivalent, find_equivalent, load_equivalents
from .mutate import SOLUTION_REGION, Mutant, generate_mutants, notebook_modules
from .report import ExerciseResult, build_report
from .workers import Pool, notebook_imports

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ExerciseCells:
    """Where an exercise of the registry lives in its notebook: its solution cell and its test cell."""

    assignment: str
    notebook: Path
    name: str  # the exercise, also its solution cell's grade_id
    solution_index: int
    test_ids: tuple[str, ...]  # the test cell(s) that must catch a mutant
    last_index: int  # the last of them: a run stops there


def exercise_cells(assignment: Assignment, root: Path = ROOT) -> list[ExerciseCells]:
    """The exercises of ``assignment`` with code to mutate (between solution markers), in the registry's order."""
    path = root / "solutions" / assignment.slug / assignment.notebook
    cells = read_cells(path)
    out = []
    for ex in assignment.exercises:
        solution = next((c for c in cells if c.solution and c.grade_id == ex.name), None)
        tests = [c for c in cells if c.is_test and c.grade_id == f"test_{ex.name}"]
        if solution is None or not tests:
            raise ValueError(f"{path}: the registry's exercise {ex.name} has no solution cell {ex.name!r} "
                             f"or no test cell 'test_{ex.name}'")
        if SOLUTION_REGION.search(solution.source):
            out.append(ExerciseCells(assignment.slug, path, ex.name, solution.index,
                                     tuple(c.grade_id for c in tests), tests[-1].index))
    return out


def mutants_of(target: ExerciseCells) -> tuple[str, list[Mutant], set[str]]:
    """The exercise's solution source, its mutants, and the packages its notebook imports."""
    cells = read_cells(target.notebook)
    solution = cells[target.solution_index].source
    return solution, generate_mutants(solution, notebook_modules(cells)), notebook_imports(cells)


def run(assignments: list[Assignment], exercises: list[str] | None = None, jobs: int | None = None,
        max_per_exercise: int | None = None, timeout: float = 20.0, root: Path = ROOT,
        equivalents: list[Equivalent] | None = None, log=print) -> dict:
    """Mutate and test the exercises of these assignments (only ``exercises``, if named); return the report."""
    equivalents = load_equivalents() if equivalents is None else equivalents
    results: dict[str, ExerciseResult] = {}
    all_jobs: list[tuple] = []
    preload: set[str] = set()
    meta: dict[int, tuple[str, dict]] = {}
    for assignment in assignments:
        a = assignment.slug
        for ex in exercise_cells(assignment, root):
            if exercises and ex.name not in exercises:
                continue
            sol, mutants, imports = mutants_of(ex)
            preload |= imports
            if max_per_exercise is not None and len(mutants) > max_per_exercise:
                picked = sorted(random.Random(f"{a}/{ex.name}").sample(range(len(mutants)), max_per_exercise))
                mutants = [mutants[i] for i in picked]
            key = f"{a}/{ex.name}"
            res = results[key] = ExerciseResult(a, ex.name)
            base_id = len(all_jobs)
            all_jobs.append((base_id, str(ex.notebook), ex.solution_index, sol, ex.test_ids, ex.last_index))
            meta[base_id] = (key, {"baseline": True})
            for m in mutants:
                record = {"kind": m.kind, "line": m.line, "before": m.before, "after": m.after, "diff": m.diff}
                eq = find_equivalent(equivalents, a, ex.name, m)
                if eq is not None:
                    eq.used = True
                    record.update(status="equivalent", reason=eq.reason)
                    res.mutants.append(record)
                    continue
                job_id = len(all_jobs)
                all_jobs.append((job_id, str(ex.notebook), ex.solution_index, m.source, ex.test_ids, ex.last_index))
                meta[job_id] = (key, record)
                res.mutants.append(record)
    total = len(all_jobs)
    done = [0]
    t0 = time.monotonic()

    def on_result(job_id, status, message, seconds):
        key, record = meta[job_id]
        res = results[key]
        res.seconds += seconds
        done[0] += 1
        if record.get("baseline"):
            if status != "survived":
                res.baseline = f"FAILED: {message}"
                log(f"  ! the reference fails {key}: {message}")
            return
        record["status"] = status
        record["message"] = message
        if done[0] % 50 == 0 or done[0] == total:
            log(f"  {done[0]}/{total} runs, {time.monotonic() - t0:.0f} s")

    pool = Pool(jobs or os.cpu_count() or 1, timeout, root, preload)
    try:
        pool.run(all_jobs, on_result)
    finally:
        pool.close()
    return build_report([a.slug for a in assignments], list(results.values()), equivalents, exercises=exercises,
                        max_per_exercise=max_per_exercise, timeout=timeout, seconds=time.monotonic() - t0)
