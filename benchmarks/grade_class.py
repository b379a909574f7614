"""How long `make grade` takes per submission for a whole class.

    python benchmarks/grade_class.py [--students 100] [--assignment 02-attention] [--jobs N] [--timeout S]
                                     [--local-workers N]

A temporary course gets ``--students`` submissions of one assignment (a mix:
the reference solution, the untouched release, and wrong implementations from
the assignment's catalogue; ``--assignment all``: that many of each of the 11),
then ``python -m tools.grade`` grades them all with ``--jobs`` parallel
batches, as an instructor would. Prints the wall
time, seconds per submission and the spread of scores; a second run shows the
cost of re-running when nothing changed (idempotent: nothing is graded again).

With ``--local-workers N`` the class is graded on a Dask cluster instead
(``make grade SCHEDULER=...``): a scheduler and N workers of this clone on
loopback, each worker one task at a time with kernels of ``cores // N``
threads, started and stopped here (their start is not timed).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

from grader.notebook import grade_id

ROOT = Path(__file__).resolve().parents[1]


def build_class(course: Path, assignment: str, students: int) -> None:
    if not (course / "solutions").is_dir():
        shutil.copy(ROOT / "nbgrader_config.py", course)
        shutil.copytree(ROOT / "solutions", course / "solutions")
    if assignment == "all":  # the mix: ``students`` learners for each of the course's assignments
        for slug in sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()):
            build_class(course, slug, students)
        return
    (solution,) = sorted((course / "solutions" / assignment).glob("*.ipynb"))
    release = ROOT / "exercises" / assignment / solution.name
    wrong = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{assignment}.py"))["WRONG"]
    for i in range(students):
        kind = i % 4
        if kind == 2:
            nb = nbformat.read(release, as_version=4)
        else:
            nb = nbformat.read(solution, as_version=4)
            if kind in (1, 3):
                entry = wrong[i % len(wrong)]
                for cell in nb.cells:
                    if grade_id(cell) == entry["exercise"]:
                        cell.source = entry["source"]
        folder = course / "submitted" / f"student{i:03d}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / solution.name)


def grade(course: Path, jobs: int, timeout: int, scheduler: str | None = None) -> float:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    where = ["--scheduler", scheduler] if scheduler else ["--jobs", str(jobs)]
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tools.grade", "--root", str(course), *where,
                          "--timeout", str(timeout)], cwd=ROOT, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if res.returncode not in (0, 1):
        sys.exit(res.stdout + res.stderr)
    return took


@contextlib.contextmanager
def local_cluster(workers: int):
    """A scheduler and ``workers`` grading workers of this clone on loopback; yields the scheduler's address."""
    from distributed import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True, "cwd": ROOT}
    procs = [subprocess.Popen([sys.executable, "-m", "tools.cluster", "scheduler", "--port", str(port)], **quiet)]
    try:
        time.sleep(2)
        procs += [subprocess.Popen([sys.executable, "-m", "tools.cluster", "worker", address, "--name", f"w{i}",
                                    "--threads", threads], **quiet) for i in range(workers)]
        with Client(address, timeout="30s", set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--assignment", default="02-attention")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--local-workers", type=int, default=0, help="grade on a local Dask cluster of N workers")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grade-class-") as tmp, contextlib.ExitStack() as stack:
        course = Path(tmp)
        build_class(course, args.assignment, args.students)
        scheduler = stack.enter_context(local_cluster(args.local_workers)) if args.local_workers else None
        first = grade(course, args.jobs, args.timeout, scheduler)
        again = grade(course, args.jobs, args.timeout, scheduler)
        rows = list(csv.DictReader((course / "grades.csv").open()))
        spread = Counter(r["score"] for r in rows)
    how = f"a local cluster of {args.local_workers} worker(s)" if args.local_workers else f"{args.jobs} job(s)"
    n = len(rows)
    print(f"{n} submissions of {args.assignment}, {how}, {os.cpu_count()} CPU(s)")
    print(f"  first run : {first:7.1f} s  = {first / n:5.2f} s per submission, {60 * n / first:5.1f} a minute")
    print(f"  re-run    : {again:7.1f} s  (nothing changed, nothing graded again)")
    print(f"  scores    : {dict(sorted(spread.items(), key=lambda kv: -float(kv[0])))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
