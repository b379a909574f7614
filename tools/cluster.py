"""Grading a class on a Dask cluster: ``make grade SCHEDULER=tcp://HOST:8786`` and ``make grade-worker``.

    python -m tools.cluster scheduler [--host 127.0.0.1] [--port 8786]
    python -m tools.cluster worker tcp://HOST:8786 [--root DIR] [--name NAME] [--threads N]

The scheduler is Dask's own (``dask scheduler``), started in a clone
(``make grade-scheduler``): it reads each task, so the course must be on its
Python path. A worker is started on any
machine that holds a clone of the same commit (``make grade-worker
SCHEDULER=...`` in that clone); ``make grade SCHEDULER=...`` then sends each
(learner, assignment) to the cluster as one task, where :func:`grade_task`
grades it as local grading does: ``nbgrader autograde`` with the course's
``nbgrader_config.py``, in the same fenced kernel (:mod:`grader.autograde`).
A worker keeps what local grading keeps for a run, for its whole run
(:class:`WorkerGrading`): one scratch course, one long-lived nbgrader process
and its warm kernels, so each task pays for grading, not for starting a
grader. The client alone writes the gradebook:

- **One course.** A worker's course (``grader/``, ``solutions/``, ``course_lib/``
  and ``nbgrader_config.py``) is hashed (:func:`course_hash`); a worker whose
  hash is not the client's is refused, with both hashes named, and is given no
  task; a task that reaches one anyway refuses itself.
- **The gradebook stays with the client.** A worker grades into a scratch
  SQLite gradebook of its own and returns the autograded folder; the client
  records the scores with nbgrader's own ``SaveAutoGrades`` into the course's
  gradebook (PostgreSQL for a class), whose address never leaves the client:
  a worker's grading runs without ``GRADEBOOK_URL``, ``DEADLINES`` or any
  password in its environment. Late penalties are the client's too
  (:func:`tools.grade.apply_late_policy`).
- **Each submission once.** A task's key names the assignment, the learner and
  a hash of their files, so the same submission sent twice is one task; a
  task whose worker dies runs again on another (Dask reschedules it; after
  three workers lost to one task it is named as the problem); the client
  records each result once, when it arrives.
- **What goes wrong is named in one line** (an unreachable scheduler, no worker
  of this course, a refused worker, a task lost), and everything else is still
  graded. A submission that kills its kernel scores zero there, as locally.

Cases per learner: the client's grading secret travels with each task into
the scratch course, mode 0600, and is gone when the task ends, so the worker
draws the learner's cases from it as the client would (with
``GRADING_SECRET_FILE=none`` on the client, the registry's seeds there too).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from grader.secret import OFF, SECRET_FILE

if TYPE_CHECKING:
    from grader.nbgrader_processes import NbgraderProcess

#: what a worker's grading depends on: the grading code of the clone that runs it, and the course's assignments
#: and nbgrader configuration; two graders grade alike when these hash alike
CODE_PARTS = ("grader", "course_lib")
COURSE_PARTS = ("solutions", "nbgrader_config.py")
#: the clone this module runs from
CHECKOUT = Path(__file__).resolve().parents[1]
#: the clone a worker grades with (set by ``tools.cluster worker`` for the worker's process)
ROOT_VARIABLE = "COURSE_GRADING_ROOT"
#: the folder of a worker's scratch courses (set by ``tools.cluster worker``, removed when it stops)
SCRATCH_VARIABLE = "COURSE_GRADING_SCRATCH"
#: the client's variables a worker's grading must never see
CLIENT_ONLY = ("GRADEBOOK_URL", "DEADLINES", "GRADING_SECRET_FILE")
#: seconds the client waits for a worker of its course before it gives up on what is left
NO_WORKER_PATIENCE = 60.0
#: seconds between the client's questions to the scheduler, while no result comes, whether a worker of its course
#: is left (the answer lists every worker: asked four times a second, it cost the graders' CPU)
WAIT_SECONDS = 2.0
#: seconds a worker asked to stop (SIGTERM, SIGINT) has to close before its launcher ends it
STOP_PATIENCE = 15.0
#: Dask's settings for the scheduler and the workers (an instructor's own DASK_* variables win): a grading task
#: runs for seconds, so Dask's statistical profiler (a sample every 10 ms), its 20 ms event-loop tick and its
#: half-second system monitor only cost CPU the kernels need. Measured, a scheduler and two idle workers: 2.21 s
#: of CPU in 30 s with Dask's defaults, 0.32 s with these
DASK_SETTINGS = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
}


class WorkerRefused(RuntimeError):
    """A worker that must not grade for this client: another course, or the client's gradebook in reach."""


class ClusterUnavailable(RuntimeError):
    """The cluster cannot grade this course (unreachable, or no worker of this course); nothing was graded."""


def course_hash(root: Path, code: Path = CHECKOUT) -> str:
    """A content hash of what grading reads, as 16 hex digits: :data:`CODE_PARTS` of the clone ``code`` and
    :data:`COURSE_PARTS` of the course folder ``root`` (on a worker, both its clone)."""
    digest = hashlib.sha256()
    for base, parts in ((code, CODE_PARTS), (root, COURSE_PARTS)):
        for part in parts:
            top = base / part
            files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
            for path in files:
                rel = path.relative_to(base).as_posix()
                if "__pycache__" in rel or rel.endswith(".pyc") or ".ipynb_checkpoints" in rel:
                    continue
                digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- the worker's side
@functools.cache
def _worker_course() -> tuple[Path, str]:
    root = Path(os.environ.get(ROOT_VARIABLE) or CHECKOUT)
    return root, course_hash(root, code=root)


def worker_course_hash() -> str:
    """This worker's course hash (the client asks every worker for it with ``Client.run``)."""
    return _worker_course()[1]


def _scratch() -> str | None:
    """Where this worker keeps its scratch course (None: the system's temporary folder)."""
    folder = os.environ.get(SCRATCH_VARIABLE)
    return folder if folder and os.path.isdir(folder) else None


def worker_environment() -> dict[str, str]:
    """The environment of a worker's nbgrader: the worker's own, less anything only the client may hold."""
    from grader.sandbox import is_secret

    return {k: v for k, v in os.environ.items() if k not in CLIENT_ONLY and not is_secret(k)}


@dataclass
class WorkerGrading:
    """What a grading worker keeps for its whole run, as ``make grade`` keeps it for one run on one machine.

    - **One scratch course**, reused by every task: the course's ``nbgrader_config.py``, and each assignment's
      source copied and recorded in a scratch gradebook the first time a task needs it. A task writes its
      learner's submission under ``submitted/<learner>/<assignment>/`` and its grading secret next to the
      gradebook (mode 0600); both, and the autograded copy, are removed when the task ends, so nothing of a
      learner stays on the worker and each task grades its learner alone.
    - **One long-lived nbgrader process** (:class:`grader.nbgrader_processes.NbgraderProcess`) in that course:
      each task is one ``nbgrader autograde`` request, the task's secret set for that request alone. A process
      that dies fails its task's request (the task reports nbgrader's failure) and the next request starts
      another.
    - **The warm kernels' processes** (:func:`grader.warm.shared_warm_processes`), kept by this worker and
      shared by its nbgrader process (and any that replaces it): the course path never changes, so every task
      forks its kernels from the same warm process.

    Made when the worker starts (:func:`dask_setup`, the worker's preload) or by the first task, and closed when
    the worker closes (:func:`dask_teardown`); the worker's scratch folder goes with it (:func:`run_worker`).
    """

    root: Path
    course: Path
    process: NbgraderProcess
    stack: contextlib.ExitStack
    assignments: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, root: Path) -> "WorkerGrading":
        """The scratch course, its warm processes' folder and its nbgrader process, started now."""
        from grader import warm
        from grader.nbgrader_processes import NbgraderProcess

        stack = contextlib.ExitStack()
        folder = Path(tempfile.mkdtemp(prefix="grade-course-", dir=_scratch()))
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        course = folder / "course"
        (course / "submitted").mkdir(parents=True)
        (course / "autograded").mkdir()  # kept for the whole run: the warm processes have it in view
        shutil.copy(root / "nbgrader_config.py", course)
        stack.enter_context(warm.shared_warm_processes(prefix=WARM_PREFIX))
        env = worker_environment()  # after the warm folder is named: its nbgrader process shares it
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # nbgrader runs alembic
        env["GRADING_SECRET_FILE"] = OFF  # each request names its own (the client's secret, or none)
        process = NbgraderProcess(course, env, log_dir=str(folder))
        stack.callback(process.close)
        process.start()  # its imports run while the worker waits for its first task
        return cls(root, course, process, stack)

    def prepare(self, assignment: str) -> None:
        """The assignment's source in the scratch course, and in its gradebook, once per run."""
        from grader.late import Deadlines
        from tools.grade import sync_gradebook

        if assignment not in self.assignments:
            shutil.copytree(self.root / "solutions" / assignment, self.course / "solutions" / assignment)
            sync_gradebook(self.course, assignment, Deadlines())
            self.assignments.add(assignment)

    def clear(self) -> None:
        """Nothing of a learner left in the course: every submission, autograded copy and the secret removed
        (``autograded/`` itself stays, as the warm processes see it)."""
        for top in ("submitted", "autograded"):
            for entry in (self.course / top).iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        (self.course / SECRET_FILE).unlink(missing_ok=True)

    def grade(self, assignment: str, student: str, files: dict[str, bytes], timeout: int | None,
              secret: bytes | None) -> tuple[subprocess.CompletedProcess, dict[str, bytes]]:
        """nbgrader's result for one learner's submission, and the files of its autograded folder."""
        from tools.grade import autograde_arguments

        with self.lock:  # one task at a time (the worker runs one; a direct caller might not)
            self.prepare(assignment)
            self.clear()
            try:
                folder = self.course / "submitted" / student / assignment
                folder.mkdir(parents=True)
                for rel, data in files.items():
                    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                    (folder / rel).write_bytes(data)
                secret_file = OFF
                if secret is not None:
                    path = self.course / SECRET_FILE
                    path.touch(mode=0o600)
                    path.write_bytes(secret)
                    secret_file = str(path)
                res = self.process.run(autograde_arguments(self.course, assignment, [student], [student], timeout),
                                       threads={}, environment={"GRADING_SECRET_FILE": secret_file})
                done = self.course / "autograded" / student / assignment
                out = {p.relative_to(done).as_posix(): p.read_bytes() for p in sorted(done.rglob("*"))
                       if p.is_file()}
            finally:
                self.clear()
        return res, out

    def close(self) -> None:
        self.stack.close()


#: the prefix of a worker's warm processes' folder (grader.warm), by which its launcher finds what a worker that
#: died left running (:func:`run_worker`)
WARM_PREFIX = "grade-worker-warm-"
_grading: list[WorkerGrading] = []
_grading_lock = threading.Lock()


def worker_grading() -> WorkerGrading:
    """This worker's :class:`WorkerGrading`, started on first use."""
    with _grading_lock:
        if not _grading:
            _grading.append(WorkerGrading.start(_worker_course()[0]))
        return _grading[0]


def dask_setup(worker) -> None:
    """Dask's preload hook (``make grade-worker`` preloads this module): the worker's course, nbgrader process
    and warm processes' folder start with the worker, before its first task."""
    del worker
    worker_grading()


def dask_teardown(worker) -> None:
    """Dask's preload hook: the worker closes, and so do its nbgrader process and warm processes."""
    del worker
    with _grading_lock:
        while _grading:
            _grading.pop().close()


def grade_task(assignment: str, student: str, files: dict[str, bytes], client_hash: str,
               timeout: int | None, secret: bytes | None = None) -> dict:
    """Grade one learner's submission of one assignment on this worker; the autograded folder comes back.

    Returns ``{"worker", "returncode", "log", "files"}``: ``files`` maps each file of
    ``autograded/<student>/<assignment>/`` to its bytes (empty when nbgrader could not grade it). The grading is
    the worker's :class:`WorkerGrading`'s: its scratch course, its nbgrader process, its warm kernels.
    """
    root, mine = _worker_course()
    name = _worker_name()
    held = [k for k in CLIENT_ONLY if k in os.environ]
    if held:
        raise WorkerRefused(f"worker {name} holds {', '.join(held)} in its environment, which only the client "
                             "may hold: start it with make grade-worker")
    if mine != client_hash:
        raise WorkerRefused(f"worker {name} grades with course {mine}, the client's is {client_hash}: "
                             "start the worker from a clone of the client's commit")
    res, out = worker_grading().grade(assignment, student, files, timeout, secret)
    return {"worker": name, "returncode": res.returncode, "log": res.stdout + res.stderr, "files": out}


def _worker_name() -> str:
    try:
        from distributed import get_worker

        worker = get_worker()
        return f"{worker.name} ({worker.address})"
    except ValueError:  # not on a worker: called directly
        return socket.gethostname()


# ---------------------------------------------------------------------------------------------- the client's side
@dataclass
class ClusterGrading:
    """``make grade SCHEDULER=...``: every (learner, assignment) a task on the cluster, recorded here."""

    root: Path
    scheduler: str
    timeout: int | None = None
    secret: bytes | None = None
    client: object = None
    course: str = ""
    workers: list[str] = field(default_factory=list)
    #: (learner, assignment) -> the worker that graded it: each recorded once
    recorded: dict[tuple[str, str], str] = field(default_factory=dict)

    def open(self) -> None:
        """Connect and check the workers; :class:`ClusterUnavailable` when the cluster cannot grade this course."""
        from distributed import Client

        self.course = course_hash(self.root)
        try:
            self.client = Client(self.scheduler, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"SCHEDULER={self.scheduler} cannot be reached ({exc}); nothing was "
                                     "graded") from None
        self.workers = self._matching_workers(report=True)
        if self.workers:  # Dask's scheduler reads each task, so it too must import this module
            probe = self.client.submit(worker_course_hash, workers=self.workers, pure=False)
            try:
                probe.result(timeout=60)
            except Exception as exc:
                self.close()
                raise ClusterUnavailable(
                    f"the scheduler at SCHEDULER={self.scheduler} cannot run the course's tasks "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0]}): start it with `make grade-scheduler` "
                    "in a clone of this commit, which puts the course on its Python path; nothing was graded"
                ) from None
        if not self.workers:
            self.close()
            raise ClusterUnavailable(f"no worker at SCHEDULER={self.scheduler} grades this course "
                             f"({self.course}): start one with `make grade-worker SCHEDULER={self.scheduler}` in a "
                             "clone of this commit; nothing was graded")

    def _matching_workers(self, report: bool) -> list[str]:
        hashes = self.client.run(worker_course_hash, on_error="return")
        names = {a: w.get("name", a) for a, w in self.client.scheduler_info(n_workers=-1)["workers"].items()}
        good = []
        for address, theirs in sorted(hashes.items()):
            if theirs == self.course:
                good.append(address)
            elif report:
                why = (f"its course is {theirs}, this clone's is {self.course}" if isinstance(theirs, str)
                       else f"it could not hash its course ({theirs!r})")
                print(f"make grade: worker {names.get(address, address)} at {address} is refused: {why} (start "
                      "it from a clone of this commit)", file=sys.stderr)
        return good

    def _workers_alive(self) -> bool:
        """Whether a worker of this course is still in the cluster (asks the scheduler, not the workers)."""
        return bool(set(self.client.scheduler_info(n_workers=-1)["workers"]) & set(self.workers))

    def describe(self) -> str:
        return f"graded on {len(self.workers)} worker(s) at {self.scheduler}"

    def warm_up(self) -> None:
        """Nothing to start here: the workers are up already (LocalGrading starts its nbgrader processes)."""

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def grade(self, assignment: str, students: list[str], everyone: list[str]) -> list[tuple[str, str]]:
        """Grade ``students`` on the cluster and record each result; returns (learner, why) for what failed."""
        from tqdm import tqdm

        del everyone  # a task holds one learner's files: the rest of the class is never on the worker
        futures = {}
        for student in students:
            folder = self.root / "submitted" / student / assignment
            files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
                     if p.is_file() and ".ipynb_checkpoints" not in p.parts}
            digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in files.items())).hexdigest()[:16]
            future = self.client.submit(grade_task, assignment, student, files, self.course, self.timeout,
                                        self.secret, key=f"grade-{assignment}-{student}-{digest}",
                                        workers=self.workers, allow_other_workers=False, pure=False, retries=0)
            futures[future] = student
        failed: list[tuple[str, str]] = []
        remaining = dict(futures)
        waiting_since = None
        with tqdm(total=len(futures), desc=assignment, unit="submission", file=sys.stderr, disable=None) as bar:
            asked = time.monotonic()
            while remaining:
                done = [f for f in remaining if f.done()]  # the futures' own state: no question to the scheduler
                if not done:
                    time.sleep(0.1)
                    if time.monotonic() - asked < WAIT_SECONDS:
                        continue
                    asked = time.monotonic()
                    if self._workers_alive():
                        waiting_since = None
                    elif waiting_since is None:
                        waiting_since = time.monotonic()
                    elif time.monotonic() - waiting_since > NO_WORKER_PATIENCE:
                        for future, student in remaining.items():
                            future.cancel()
                            failed.append((student, "no worker of this course was left to grade it"))
                        break
                    continue
                for future in done:
                    student = remaining.pop(future)
                    why = self._finish(assignment, student, future)
                    if why:
                        failed.append((student, why))
                    bar.update()
        by_worker = Counter(w.split(" (")[0] for (_, a), w in self.recorded.items() if a == assignment)
        print(f"{assignment}: recorded {sum(by_worker.values())} submission(s) from the cluster: "
              + (", ".join(f"{w} ({n})" for w, n in sorted(by_worker.items())) or "none"))
        return failed

    def _finish(self, assignment: str, student: str, future) -> str | None:
        """Record one task's result; the reason it failed, or None."""
        from distributed import KilledWorker

        try:
            result = future.result()
        except KilledWorker as exc:
            return f"the cluster lost {exc.last_worker.name if exc.last_worker else 'its worker'} three " \
                   "times grading it: left ungraded"
        except WorkerRefused as exc:
            return str(exc)
        except Exception as exc:  # the task's own error, as the worker raised it
            return f"its task failed on the cluster ({type(exc).__name__}: {exc})"
        notebook = [n for n in result["files"] if n.endswith(".ipynb")]
        if result["returncode"] != 0 or not notebook:
            print(result["log"], file=sys.stderr)
            return f"nbgrader could not grade it on worker {result['worker']} (its log is above)"
        if (student, assignment) in self.recorded:
            raise RuntimeError(f"{student}'s {assignment} came back twice")  # never: each future is read once
        record(self.root, assignment, student, result["files"])
        self.recorded[(student, assignment)] = result["worker"]
        return None


def record(root: Path, assignment: str, student: str, files: dict[str, bytes]) -> None:
    """A worker's autograded folder into the course, and its scores into the gradebook, as autograde does.

    The folder replaces the earlier one (autograde's ``--force``); the submission gets its time from its
    timestamp.txt; nbgrader's ``SaveAutoGrades`` writes each graded cell's score and comment.
    """
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    from tools.grade import submitted_at
    from tools.gradebook import gradebook_url

    folder = root / "autograded" / student / assignment
    scratch = folder.with_name(f".{assignment}.incoming")
    shutil.rmtree(scratch, ignore_errors=True)
    for rel, data in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_bytes(data)
    shutil.rmtree(folder, ignore_errors=True)
    scratch.rename(folder)
    url = gradebook_url(root)
    timestamp = submitted_at(root, student, assignment)
    with Gradebook(url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notes on nbgrader's own models, as in autograde
        gb.update_or_create_student(student)
        gb.update_or_create_submission(assignment, student, **({"timestamp": timestamp} if timestamp else {}))
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student,
                                  "db_url": url}}
        SaveAutoGrades().preprocess(nb, resources)


# ---------------------------------------------------------------------------------------- make grade-scheduler/-worker
def run_scheduler(root: Path, host: str, port: int) -> int:
    """Start Dask's scheduler with this clone on its Python path (it reads each task, so it imports this module)."""
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
    # --preload: this module's dask_setup and dask_teardown start and stop what the worker keeps for its run
    command = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nthreads", "1",
               "--nworkers", "1", "--no-nanny", "--no-dashboard", "--memory-limit", "0",
               "--name", name or f"{socket.gethostname()}-{os.getpid()}", "--preload", "tools.cluster"]
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
    ends them itself (:func:`dask_teardown`), one that died cannot (its warm processes end on their own a second
    after it, their folder stays)."""
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
    parser = argparse.ArgumentParser(prog="python -m tools.cluster", description=__doc__.split("\n\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
