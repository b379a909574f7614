"""``make grade-scheduler`` and ``make grade-worker``: Dask's scheduler and a grading worker for this clone.

    python -m classroom.cluster scheduler [--host 127.0.0.1] [--port 8786]
    python -m classroom.cluster worker tcp://HOST:8786 [--root DIR] [--name NAME] [--threads N]
    python -m classroom.cluster hash
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from classroom.cluster.course import (
    CHECKOUT,
    CLIENT_ONLY,
    DASK_SETTINGS,
    ROOT_VARIABLE,
    SCRATCH_VARIABLE,
    WARM_PREFIX,
    course_hash,
)

#: seconds a worker asked to stop (SIGTERM, SIGINT) has to close before its launcher ends it
STOP_PATIENCE = 15.0


def run_scheduler(root: Path, host: str, port: int) -> int:
    """Start Dask's scheduler with this clone on its Python path (it reads each task, so it imports the course's
    modules)."""
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_ONLY}
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env = DASK_SETTINGS | env
    print(f"grade-scheduler: tcp://{host}:{port}, course {course_hash(root, code=root)} from {root}", flush=True)
    os.execve(sys.executable, [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host,
                               "--port", str(port), "--no-dashboard"], env)
    return 0  # never reached


def run_worker(scheduler: str, root: Path, name: str | None, threads: int | None,
               scratch_in: str | None = None) -> int:
    """Start a Dask worker for this clone: one task at a time, the course's kernel threads, no dashboard."""
    env = DASK_SETTINGS | {k: v for k, v in os.environ.items() if k not in CLIENT_ONLY}  # the gradebook: the client's
    env[ROOT_VARIABLE] = str(root)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # nbgrader, by name
    if threads:
        for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[variable] = str(threads)
    print(f"grade-worker: course {course_hash(root, code=root)} from {root}, joining {scheduler}", flush=True)
    # --preload: classroom.cluster.worker's dask_setup and dask_teardown start and stop what the worker keeps for
    # its run
    command = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nthreads", "1",
               "--nworkers", "1", "--no-nanny", "--no-dashboard", "--memory-limit", "0",
               "--name", name or f"{socket.gethostname()}-{os.getpid()}", "--preload", "classroom.cluster.worker"]
    if scheduler.startswith("tcp://127.0.0.1") or scheduler.startswith("tcp://localhost"):
        command += ["--host", "127.0.0.1"]
    # the worker's scratch course and its nbgrader process's log in one folder of its own, removed when the
    # worker stops (SIGTERM, SIGINT or its own end); a worker killed outright leaves it in ``scratch_in``
    scratch = tempfile.mkdtemp(prefix="grade-worker-", dir=scratch_in)
    env[SCRATCH_VARIABLE] = scratch
    proc = subprocess.Popen(command, env=env)
    asked: list[float] = []  # when the worker was asked to stop

    def forward(signum, _frame) -> None:
        asked.append(time.monotonic())
        proc.send_signal(signum)

    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, forward)
    try:
        while True:
            try:
                return proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                # a worker stopped while its scheduler stops too may never finish closing (Dask's close, started
                # by the signal and by the scheduler at once, waits on itself): ended after STOP_PATIENCE
                if asked and time.monotonic() - asked[0] > STOP_PATIENCE:
                    proc.kill()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        stop_warm_processes_of(proc.pid)


def stop_warm_processes_of(pid: int) -> None:
    """End the warm processes a worker (process ``pid``) kept, and remove their folder: a worker that closes
    ends them itself (:func:`classroom.cluster.worker.dask_teardown`), one that died cannot (its warm processes
    end on their own a second after it, their folder stays)."""
    import glob

    from grader import warm

    for folder in glob.glob(os.path.join(warm.socket_base(), f"{WARM_PREFIX}*")):
        try:
            owner = Path(folder, warm.OWNER).read_text().strip()
        except OSError:
            continue
        if owner == str(pid):
            warm.stop_shared(folder)


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m classroom.cluster``)."""
    parser = argparse.ArgumentParser(prog="python -m classroom.cluster", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    w = commands.add_parser("worker", help="start a grading worker for this clone (make grade-worker)")
    w.add_argument("scheduler", help="the scheduler's address, tcp://HOST:8786")
    w.add_argument("--root", type=Path, default=CHECKOUT, help="the clone (default: this one)")
    w.add_argument("--name", default=None, help="the worker's name in the cluster")
    w.add_argument("--threads", type=int, default=None, help="threads of each grading kernel (default: the cores)")
    w.add_argument("--scratch", default=None, help="the folder to keep its scratch courses in (default: the "
                                                  "system's temporary folder)")
    sc = commands.add_parser("scheduler", help="start Dask's scheduler for this clone (make grade-scheduler)")
    sc.add_argument("--host", default="127.0.0.1", help="the address it listens on (default: 127.0.0.1)")
    sc.add_argument("--port", type=int, default=8786)
    sc.add_argument("--root", type=Path, default=CHECKOUT)
    h = commands.add_parser("hash", help="print this clone's course hash")
    h.add_argument("--root", type=Path, default=CHECKOUT)
    args = parser.parse_args(argv)
    if args.command == "hash":
        print(course_hash(args.root.resolve(), code=args.root.resolve()))
        return 0
    if args.command == "scheduler":
        return run_scheduler(args.root.resolve(), args.host, args.port)
    if not args.scheduler.startswith(("tcp://", "tls://")):
        print(f"make grade-worker: SCHEDULER={args.scheduler!r} is not a scheduler address such as "
              "tcp://HOST:8786", file=sys.stderr)
        return 2
    return run_worker(args.scheduler, args.root.resolve(), args.name, args.threads, args.scratch)
