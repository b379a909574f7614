"""Judge the catalogues of right and wrong implementations under other grading secrets.

With ``GRADING_SECRET_FILE`` set, every learner's hidden cases come from a seed
derived from the course's secret (:func:`grader.secret.learner_seed`) instead
of the registry's. This sweep checks that the catalogues in
``tests/grading/catalogues/`` still hold on such seeds: for K secrets (the
k-th is ``sha256("sweep k")``, so a run can be repeated), each entry is judged
on the seed the learner ``a-learner`` would get for its exercise, by the
catalogue test's own functions (``tests/grading/test_catalogues.py``: the
notebook's cells run in-process with the entry in place of the solution, the
hidden part of its test cell only), with :func:`grader.registry.check` given
that seed. It reports

* right entries that lose marks,
* wrong entries that score full marks,
* wrong entries told something other than their catalogued diagnosis,

one summary line per assignment, then every failure (assignment, exercise,
entry, secret, seed, what happened)::

    python -m tools.secret_sweep --secrets 20
    python -m tools.secret_sweep --secrets 20 --assignment 02-attention --entries 41 47
    python -m tools.secret_sweep --secrets 4 --jobs 2
    python -m tools.secret_sweep --first 21 --secrets 20   # secrets 21 to 40

``--entries`` takes indices of the WRONG list (``41``) or of the RIGHT list
(``r3``); without it, every entry of the chosen assignments is judged. The
exit status is 1 when anything failed. Each judgement takes about 0.05 s on
one core (all 734 entries: about 30 s per secret).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.util
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEARNER = "a-learner"


def secret(k: int) -> bytes:
    """The k-th secret of the sweep (k from 1)."""
    return hashlib.sha256(f"sweep {k}".encode()).digest()


def _catalogue_tests():
    """``tests/grading/test_catalogues.py``, imported as pytest would (``tests/`` on the path for nbtools)."""
    name = "_secret_sweep_test_catalogues"
    if name in sys.modules:
        return sys.modules[name]
    for p in (str(ROOT), str(ROOT / "tests")):
        if p not in sys.path:
            sys.path.insert(0, p)
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "grading" / "test_catalogues.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def seeded_check(seed: int):
    """Every hidden test run inside (``from grader import check; check(...)``) draws its cases from ``seed``."""
    import grader
    import grader.registry as registry

    original = registry.check

    def check(slug, name, learner, **_):
        return original(slug, name, learner, seed=seed)

    had = "check" in vars(grader)
    before = vars(grader).get("check")
    registry.check, grader.check = check, check
    try:
        yield
    finally:
        registry.check = original
        if had:
            grader.check = before
        else:
            del grader.check


@dataclass(frozen=True)
class Task:
    assignment: str
    kind: str  # "wrong" or "right"
    index: int
    exercise: str


#: the kinds of failure, as the summary counts them
KINDS = ("right entry loses marks", "wrong entry scores full marks", "diagnosis lost", "error while judging")


@dataclass(frozen=True)
class Failure:
    task: Task
    k: int
    seed: int
    kind: str  # one of KINDS
    what: str

    def line(self) -> str:
        entry = f"{'#' if self.task.kind == 'wrong' else 'right #'}{self.task.index}"
        return (f"{self.task.assignment} {self.task.exercise} {entry} secret {self.k} seed {self.seed}: "
                f"{self.what}")


@functools.cache
def _entries(assignment: str, kind: str) -> list[dict]:
    """The WRONG or RIGHT list of an assignment's catalogue, read once (by the catalogue test's functions)."""
    tc = _catalogue_tests()
    return tc.catalogue(assignment) if kind == "wrong" else tc.right_catalogue(assignment)


def tasks(assignment: str, entries: list[str] | None) -> list[Task]:
    wrong, right = _entries(assignment, "wrong"), _entries(assignment, "right")
    if entries is None:
        chosen = [("wrong", i) for i in range(len(wrong))] + [("right", i) for i in range(len(right))]
    else:
        chosen = [("right", int(e[1:])) if e.startswith("r") else ("wrong", int(e)) for e in entries]
    return [Task(assignment, kind, i, (wrong if kind == "wrong" else right)[i]["exercise"]) for kind, i in chosen]


def _short(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def judge(task: Task, k: int) -> Failure | None:
    """Judge one entry under the k-th secret with the catalogue test's own test functions."""
    from grader.secret import learner_seed

    tc = _catalogue_tests()
    seed = learner_seed(secret(k), LEARNER, task.assignment, task.exercise)
    entry = _entries(task.assignment, task.kind)[task.index]
    test = (tc.test_wrong_implementation_fails_the_hidden_tests if task.kind == "wrong"
            else tc.test_a_right_implementation_written_differently_keeps_full_marks)
    try:
        with seeded_check(seed):
            test(task.assignment, entry)
    except AssertionError as exc:
        message = str(exc)
        if task.kind == "right":
            kind, detail = KINDS[0], message.split(": the hidden tests reject it: ", 1)[-1]
        elif "hidden tests of" in message and " accept: " in message:
            kind, detail = KINDS[1], ""
        else:
            kind = KINDS[2]
            detail = f"expected {entry['diagnosis']!r}, told: " + message.split("the learner was told: ", 1)[-1]
        return Failure(task, k, seed, kind, _short(f"{kind}: {detail}" if detail else kind))
    except Exception as exc:  # the sweep's own trouble, reported with the entry
        return Failure(task, k, seed, KINDS[3], _short(f"{KINDS[3]}: {type(exc).__name__}: {exc}"))
    return None


def _work(chunk: list[tuple[Task, int]]) -> list[tuple[Task, int, Failure | None]]:
    _one_thread()
    return [(t, k, judge(t, k)) for t, k in chunk]


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--secrets", type=int, default=4, help="how many secrets (the 1st to the N-th)")
    parser.add_argument("--first", type=int, default=1, help="the index of the first secret (default 1)")
    parser.add_argument("--assignment", action="append", help="an assignment's slug (repeatable; default: all)")
    parser.add_argument("--entries", nargs="+", help="WRONG indices (41) or RIGHT indices (r3) of the one assignment")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    tc = _catalogue_tests()
    slugs = args.assignment or tc.assignments()
    if args.entries and len(slugs) != 1:
        parser.error("--entries needs exactly one --assignment")
    ks = list(range(args.first, args.first + args.secrets))
    work = [(t, k) for slug in slugs for t in tasks(slug, args.entries) for k in ks]

    start = time.monotonic()
    if args.jobs <= 1:
        _one_thread()
        results = []
        for slug in slugs:  # progress on stderr, one line per assignment
            results += [(t, k, judge(t, k)) for t, k in work if t.assignment == slug]
            print(f"[{time.monotonic() - start:.0f} s] {slug} judged", file=sys.stderr, flush=True)
    else:
        chunks = [work[j::args.jobs] for j in range(args.jobs)]
        try:
            with ProcessPoolExecutor(args.jobs, mp_context=get_context("fork")) as pool:
                results = [r for part in pool.map(_work, chunks) for r in part]
        except BrokenProcessPool as exc:  # a judging process died: said, not waited for
            print(f"secret_sweep: a judging process died ({exc}); nothing is reported", file=sys.stderr)
            return 2
    wall = time.monotonic() - start

    failures = [f for _, _, f in results if f is not None]
    for slug in slugs:
        mine = [(t, f) for t, _, f in results if t.assignment == slug]
        nw = len({t for t, _ in mine if t.kind == "wrong"})
        nr = len({t for t, _ in mine if t.kind == "right"})
        counts = Counter(f.kind for _, f in mine if f is not None)
        print(f"{slug}: {nw} wrong + {nr} right entries x {len(ks)} secrets = {len(mine)} judged; "
              f"{counts[KINDS[0]]} right losing marks, {counts[KINDS[1]]} wrong with full marks, "
              f"{counts[KINDS[2]]} diagnoses lost, {counts[KINDS[3]]} errors")
    print(f"total: {len(results)} judged (secrets {ks[0]}..{ks[-1]}), {len(failures)} failure(s), "
          f"{wall:.0f} s wall, {max(1, args.jobs)} process(es)")
    for f in sorted(failures, key=lambda f: (f.task.assignment, f.task.kind, f.task.index, f.k)):
        print("  " + f.line())
    return 1 if failures else 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter shutdown: after a long sweep (thousands of notebooks' cells run in this process) its garbage
    # collection once aborted in a C extension ("none_dealloc"), after the report, with a misleading status. The
    # cause, torch's Generator.__reduce__ dropping a reference to None per copy, is now avoided (grader.wire).
    os._exit(status)
