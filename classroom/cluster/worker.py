"""A grading worker's side: what it keeps for its whole run (:class:`WorkerGrading`) and what each task does
(:func:`grade_task`). ``make grade-worker`` preloads this module: Dask calls :func:`dask_setup` when the worker
starts and :func:`dask_teardown` when it closes."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from classroom.batch import autograde_arguments
from classroom.cluster.course import (
    CHECKOUT,
    CLIENT_ONLY,
    ROOT_VARIABLE,
    SCRATCH_VARIABLE,
    WARM_PREFIX,
    WorkerRefused,
    course_hash,
)
from classroom.gradebook import sync_gradebook
from grader.secret import OFF, SECRET_FILE

if TYPE_CHECKING:
    from grader.nbgrader_processes import NbgraderProcess


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
    the worker closes (:func:`dask_teardown`); the worker's scratch folder goes with it
    (:func:`classroom.cluster.processes.run_worker`).
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
        if assignment not in self.assignments:
            shutil.copytree(self.root / "solutions" / assignment, self.course / "solutions" / assignment)
            sync_gradebook(self.course, assignment)
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
                res = self.process.run(autograde_arguments(self.course, assignment, student, timeout),
                                       threads={}, environment={"GRADING_SECRET_FILE": secret_file})
                done = self.course / "autograded" / student / assignment
                out = {p.relative_to(done).as_posix(): p.read_bytes() for p in sorted(done.rglob("*"))
                       if p.is_file()}
            finally:
                self.clear()
        return res, out

    def close(self) -> None:
        """Stop the nbgrader process and the warm processes, and remove the scratch course."""
        self.stack.close()


#: this worker's WorkerGrading, once started
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
