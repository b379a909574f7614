"""How long `make grade` takes per submission for a whole class, here or on a Dask cluster.

    python benchmarks/grade_class.py [--students 100] [--assignment 02-attention] [--jobs N] [--timeout S]
                                     [--local-workers N]
    python benchmarks/grade_class.py --students 24 --configs jobs:2,workers:1,workers:2 --rounds 3

A temporary course gets ``--students`` submissions of one assignment (a mix:
the reference solution, the untouched release, and wrong implementations from
the assignment's catalogue; ``--assignment all``: that many of each of the 11),
then ``python -m classroom.grade`` grades them all with ``--jobs`` parallel
batches, as an instructor would. Prints the wall
time, seconds per submission and the spread of scores; a second run shows the
cost of re-running when nothing changed (idempotent: nothing is graded again).

With ``--local-workers N`` the class is graded on a Dask cluster instead
(``make grade SCHEDULER=...``): a scheduler and N workers of this clone on
loopback, each worker one task at a time with kernels of ``cores // N``
threads, started and stopped here (their start is not timed: a worker is
started once and grades for as long as it runs).

``--pin K`` puts each worker, with its nbgrader process and kernels (of K
threads), on K cores of its own, as if each had a machine of K cores: what N
workers give against one where every worker brings its cores (the scheduler
and the client run on any core).

``--configs`` grades the same class side by side, each configuration in turn
(``jobs:N``: here, N at a time; ``workers:N``: on a cluster of N workers, kept
up for every round), ``--rounds`` times, alternating, so that a machine shared
with other work loads each alike; each grades a fresh copy of the class. It
prints every time with the load average around it, each configuration's median
and spread, its throughput per job or per worker, and the ratios the cluster is
judged by: a worker's throughput against a local job's (the median over rounds
of the per-unit rates), and N workers against one.
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
import statistics
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
    res = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), *where,
                          "--timeout", str(timeout)], cwd=ROOT, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if res.returncode not in (0, 1):
        sys.exit(res.stdout + res.stderr)
    return took


@contextlib.contextmanager
def local_cluster(workers: int, pin: int = 0):
    """A scheduler and ``workers`` grading workers of this clone on loopback; yields the scheduler's address.
    ``pin``: each worker (with its nbgrader process and kernels, of ``pin`` threads) on ``pin`` cores of its own,
    as if each had a machine of that size; the scheduler and the client on any core."""
    from distributed import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    threads = str(pin or max(1, (os.cpu_count() or 1) // workers))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True, "cwd": ROOT}
    procs = [subprocess.Popen([sys.executable, "-m", "classroom.cluster", "scheduler", "--port", str(port)], **quiet)]
    try:
        time.sleep(2)
        cores = sorted(os.sched_getaffinity(0))
        if pin * workers > len(cores):
            raise SystemExit(f"--pin {pin}: {workers} worker(s) of {pin} core(s) need {pin * workers}, this machine "
                             f"has {len(cores)}")
        for i in range(workers):
            mine = set(cores[i * pin:(i + 1) * pin])
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "classroom.cluster", "worker", address, "--name", f"w{i}", "--threads", threads],
                **quiet, preexec_fn=(lambda mine=mine: os.sched_setaffinity(0, mine)) if pin else None))
        with Client(address, timeout="30s", set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:  # the workers first, while their scheduler can still see them go
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()


def parse_configs(text: str) -> list[tuple[str, int]]:
    """``jobs:2,workers:1`` -> ``[("jobs", 2), ("workers", 1)]``; a clear error names a bad entry."""
    configs = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        kind, _, n = entry.partition(":")
        if kind not in ("jobs", "workers") or not n.isdigit() or int(n) < 1:
            raise SystemExit(f"--configs: {entry!r} is not jobs:N or workers:N with N >= 1 (e.g. jobs:2,workers:2)")
        configs.append((kind, int(n)))
    if not configs:
        raise SystemExit("--configs: no configuration given (e.g. jobs:2,workers:1,workers:2)")
    return configs


def load() -> str:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def side_by_side(args) -> int:
    """Every configuration of ``--configs`` in turn, ``--rounds`` times, each on a fresh copy of one class."""
    configs = parse_configs(args.configs)
    times: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="grade-class-") as tmp, contextlib.ExitStack() as stack:
        template = Path(tmp) / "class"
        template.mkdir()
        build_class(template, args.assignment, args.students)
        n = sum(1 for _ in (template / "submitted").iterdir())
        clusters = {c: stack.enter_context(local_cluster(c[1], args.pin)) for c in configs if c[0] == "workers"}
        print(f"{n} learners of {args.assignment}, {os.cpu_count()} CPU(s); {args.rounds} round(s) of "
              f"{', '.join(f'{k}:{v}' for k, v in configs)}, alternating")
        for r in range(args.rounds):
            for config in configs:
                course = Path(tmp) / f"round{r}-{config[0]}{config[1]}"
                shutil.copytree(template, course)
                before = load()
                took = grade(course, config[1], args.timeout, clusters.get(config))
                times[config].append(took)
                print(f"  round {r + 1} {config[0]}:{config[1]:<2} {took:7.1f} s  {60 * n / took:6.1f} a minute"
                      f"  (load {before} -> {load()})", flush=True)
                shutil.rmtree(course)
    print("\nconfiguration   median s   spread s        a minute   per job/worker a minute")
    rates = {}
    for (kind, k), ts in times.items():
        med = statistics.median(ts)
        rates[(kind, k)] = [60 * n / t / k for t in ts]
        print(f"  {kind}:{k:<10} {med:7.1f}   {min(ts):6.1f}-{max(ts):<6.1f}  {60 * n / med:8.1f}   "
              f"{statistics.median(rates[(kind, k)]):8.1f}")
    jobs = [c for c in configs if c[0] == "jobs"]
    workers = sorted(c for c in configs if c[0] == "workers")
    for w in workers:
        for j in jobs:
            ratios = [a / b for a, b in zip(rates[w], rates[j])]
            print(f"  a worker of workers:{w[1]} against a job of jobs:{j[1]}: {statistics.median(ratios):.2f} "
                  f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})")
    if len(workers) > 1:
        one, most = workers[0], workers[-1]
        speedups = [a / b for a, b in zip(times[one], times[most])]
        print(f"  workers:{most[1]} against workers:{one[1]}: {statistics.median(speedups):.2f} times the "
              f"throughput (rounds {', '.join(f'{x:.2f}' for x in speedups)})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--assignment", default="02-attention")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--local-workers", type=int, default=0, help="grade on a local Dask cluster of N workers")
    parser.add_argument("--configs", default=None, help="side by side, alternating: e.g. jobs:2,workers:1,workers:2")
    parser.add_argument("--rounds", type=int, default=3, help="with --configs: how many times each runs")
    parser.add_argument("--pin", type=int, default=0, metavar="K", help="each worker on K cores of its own (its "
                                                                         "kernels K threads), as if on a machine")
    args = parser.parse_args(argv)
    if args.configs:
        if args.rounds < 1:
            raise SystemExit(f"--rounds {args.rounds}: must be at least 1")
        return side_by_side(args)
    with tempfile.TemporaryDirectory(prefix="grade-class-") as tmp, contextlib.ExitStack() as stack:
        course = Path(tmp)
        build_class(course, args.assignment, args.students)
        scheduler = stack.enter_context(local_cluster(args.local_workers, args.pin)) if args.local_workers else None
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
