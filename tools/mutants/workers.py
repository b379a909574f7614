"""Running mutants: each in a worker process of its own namespace, with a time limit.

A job runs the notebook as a kernel would (the cells up to and including the
exercise's test cells, hidden tests included, the other exercises' test
cells skipped) with the solution cell replaced by the mutant.
"""

from __future__ import annotations

import ast
import importlib
import multiprocessing
import os
import sys
import time
import warnings
from multiprocessing.connection import wait
from pathlib import Path
from typing import Iterable

from grader.notebook import Cell, import_statements, read_cells


def run_exercise_cells(cells: list[Cell], exercise_index: int, replacement: str, test_ids: list[str],
                       last_index: int) -> tuple[bool, str]:
    """Run the notebook up to the exercise's last test cell with the solution cell replaced.

    Test cells of other exercises are skipped; errors elsewhere are ignored
    (as nbgrader's allow_errors would). Returns (passed, message of the first failure).
    """
    ns: dict = {"__name__": "__main__"}
    for c in cells:
        if c.index > last_index:
            break
        if c.kind != "code" or (c.grade and c.grade_id not in test_ids):
            continue
        src = replacement if c.index == exercise_index else c.source
        try:
            exec(compile(src, f"<cell {c.index}: {c.grade_id}>", "exec"), ns)
        except BaseException as exc:  # noqa: BLE001 - a mutant may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            if c.grade and c.grade_id in test_ids:
                return False, f"{c.grade_id}: {type(exc).__name__}: {str(exc)[:300]}"
    return True, ""


def notebook_imports(cells: list[Cell]) -> set[str]:
    """The top-level packages the notebook's code cells import (a worker imports them before its first job)."""
    names = set()
    for n in import_statements(cells):
        if isinstance(n, ast.Import):
            names.update(a.name.split(".")[0] for a in n.names)
        elif n.module and not n.level:
            names.add(n.module.split(".")[0])
    return names


def _worker(conn, root: str, preload: list[str]) -> None:  # pragma: no cover - runs in a child process
    os.chdir(root)
    sys.path.insert(0, root)
    warnings.simplefilter("ignore")  # thousands of mutants: their deprecation warnings are noise here
    for name in preload:  # the slow imports (torch) happen before the clock of the first mutant starts
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the notebook's own cell will report it
            pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)  # the workers share the cores: one thread each
    cache: dict[str, list[Cell]] = {}
    conn.send("ready")  # the time limit counts from here, not from the (slow) import of torch
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        job_id, notebook, exercise_index, source, test_ids, last_index = job
        if notebook not in cache:
            cache[notebook] = read_cells(Path(notebook))
        cells = cache[notebook]
        t0 = time.perf_counter()
        try:
            passed, message = run_exercise_cells(cells, exercise_index, source, test_ids, last_index)
        except BaseException as exc:  # noqa: BLE001
            passed, message = False, f"{type(exc).__name__}: {exc}"
        conn.send((job_id, passed, message, time.perf_counter() - t0))


class Pool:
    """Worker processes that each run one job at a time; a job past the timeout kills its worker."""

    def __init__(self, jobs: int, timeout: float, root: Path, preload: Iterable[str] = ()):
        # Workers are forked from a server process that imported this module (and with it torch) once: a worker
        # that replaces one stopped by the timeout starts in milliseconds, not in a second of torch's import.
        # (A plain fork of this process is not safe once torch has run its thread pool here.)
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload([__name__, "torch"])
        self.jobs, self.timeout, self.root = max(1, jobs), timeout, root
        self.preload = sorted(preload)
        self.workers: list[list] = []  # [process, connection, job or None, start time]

    def _start(self):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, str(self.root), self.preload), daemon=True)
        p.start()
        child.close()
        return [p, parent, "starting", 0.0]

    def run(self, jobs: list[tuple], on_result) -> None:
        """Run every job; ``on_result(job_id, status, message, seconds)`` as each ends.

        A job is ``(job_id, notebook, exercise_index, source, test_ids, last_index)``.
        """
        queue = list(reversed(jobs))
        while len(self.workers) < min(self.jobs, max(1, len(jobs))):
            self.workers.append(self._start())
        busy = 0
        while queue or busy:
            for w in self.workers:
                if w[2] is None and queue:
                    job = queue.pop()
                    w[1].send(job)
                    w[2], w[3] = job, time.monotonic()
                    busy += 1
            conns = [w[1] for w in self.workers if w[2] is not None]
            ready = wait(conns, timeout=0.2)
            now = time.monotonic()
            for i, w in enumerate(self.workers):
                if w[2] is None:
                    continue
                if w[2] == "starting":
                    if w[1] in ready:
                        try:
                            w[1].recv()
                            w[2] = None
                        except (EOFError, OSError):
                            raise RuntimeError("a mutant worker process failed to start") from None
                    continue
                if w[1] in ready:
                    try:
                        job_id, passed, message, seconds = w[1].recv()
                        on_result(job_id, "survived" if passed else "killed", message, seconds)
                    except (EOFError, OSError):  # the worker died (a crash counts as a kill)
                        on_result(w[2][0], "killed", "the worker process died", now - w[3])
                        self._replace(i)
                        busy -= 1
                        continue
                    w[2] = None
                    busy -= 1
                elif now - w[3] > self.timeout:
                    on_result(w[2][0], "timeout", f"ran past {self.timeout:g} s", now - w[3])
                    self._replace(i)
                    busy -= 1

    def _replace(self, i: int) -> None:
        p = self.workers[i][0]
        p.kill()
        p.join(5)
        self.workers[i] = self._start()

    def close(self) -> None:
        for _, conn, _, _ in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for p, _, _, _ in self.workers:
            p.join(5)
            if p.is_alive():
                p.kill()
        self.workers = []
